/* Rebinding one library's import (see rebind.h). The library's dynamic
 * section names its relocations; those of the function's name that fill
 * a slot with its address (a call through the PLT, or a reference to it
 * as data) give the slots. A slot inside the part the loader made
 * read-only after relocating (RELRO: all of them when the library was
 * linked with -z now) is made writable for the store and read-only
 * again. */
#include "core/rebind.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && !defined(__ILP32__)
#define FN_SLOT(t) ((t) == R_X86_64_JUMP_SLOT || (t) == R_X86_64_GLOB_DAT)
#elif defined(__aarch64__) && !defined(__ILP32__)
#define FN_SLOT(t) ((t) == R_AARCH64_JUMP_SLOT || (t) == R_AARCH64_GLOB_DAT)
#endif

#ifdef FN_SLOT

/* The read-only range the loader made of the object at base, as it
 * protects it (whole pages only: the last part-page stays writable). */
struct relro {
    uintptr_t base, lo, hi;
};

static int find_relro(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct relro *r = arg;
    if (info->dlpi_addr != r->base)
        return 0;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_GNU_RELRO) {
            r->lo = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
            r->hi = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz) & ~(page - 1);
        }
    }
    return 1;
}

/* One slot's store, through a writable window where it is read-only;
 * 0 done. */
static int store(void **slot, void *v, const struct relro *ro)
{
    uintptr_t a = (uintptr_t)slot;
    int locked = a >= ro->lo && a < ro->hi;
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *pg = (void *)(a & ~(page - 1));
    if (locked && mprotect(pg, page, PROT_READ | PROT_WRITE) != 0)
        return -1;
    /* Another thread may call through the slot meanwhile: one aligned
     * word, old or new, never half of each. */
    atomic_store_explicit((_Atomic(void *) *)slot, v, memory_order_release);
    if (locked)
        mprotect(pg, page, PROT_READ);
    return 0;
}

/* The loader relocates the dynamic section's addresses in place on these
 * platforms; a file offset would be below the load address. */
static uintptr_t at(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

int msh_rebind_import(void *handle, const char *name, void *repl, msh_rebind *rb)
{
    rb->n = 0;
    struct link_map *lm = NULL;
    if (!handle && !(handle = dlopen(NULL, RTLD_NOW)))
        return -1;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_ld)
        return -1;
    uintptr_t base = lm->l_addr;
    const ElfW(Sym) *sym = NULL;
    const char *str = NULL;
    const ElfW(Rela) *tab[2] = { NULL, NULL };
    size_t len[2] = { 0, 0 };
    int pltrela = 1;
    for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:   sym = (const ElfW(Sym) *)at(base, d->d_un.d_ptr); break;
        case DT_STRTAB:   str = (const char *)at(base, d->d_un.d_ptr); break;
        case DT_JMPREL:   tab[0] = (const ElfW(Rela) *)at(base, d->d_un.d_ptr); break;
        case DT_PLTRELSZ: len[0] = d->d_un.d_val; break;
        case DT_PLTREL:   pltrela = d->d_un.d_val == DT_RELA; break;
        case DT_RELA:     tab[1] = (const ElfW(Rela) *)at(base, d->d_un.d_ptr); break;
        case DT_RELASZ:   len[1] = d->d_un.d_val; break;
        default:          break;
        }
    }
    if (!sym || !str || !pltrela)
        return -1;
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; tab[t] && i < len[t] / sizeof(ElfW(Rela)) && rb->n < MSH_REBIND_MAX; i++) {
            const ElfW(Rela) *r = &tab[t][i];
            size_t s = ELF64_R_SYM(r->r_info);
            if (!FN_SLOT(ELF64_R_TYPE(r->r_info)) || s == 0 || sym[s].st_shndx != SHN_UNDEF ||
                strcmp(str + sym[s].st_name, name) != 0)
                continue;
            rb->slot[rb->n] = (void **)(base + r->r_offset);
            rb->old[rb->n] = *rb->slot[rb->n];
            rb->n++;
        }
    }
    struct relro ro = { .base = base, .lo = 0, .hi = 0 };
    dl_iterate_phdr(find_relro, &ro);
    int done = 0;
    for (int i = 0; i < rb->n; i++)
        if (store(rb->slot[i], repl, &ro) == 0) {
            rb->slot[done] = rb->slot[i];
            rb->old[done++] = rb->old[i];
        }
    rb->n = done;
    rb->base = base;
    return done ? 0 : -1;
}

void msh_rebind_restore(msh_rebind *rb)
{
    if (rb->n == 0)
        return;
    struct relro ro = { .base = rb->base, .lo = 0, .hi = 0 };
    dl_iterate_phdr(find_relro, &ro);
    for (int i = 0; i < rb->n; i++)
        store(rb->slot[i], rb->old[i], &ro);
    rb->n = 0;
}

#else

int msh_rebind_import(void *handle, const char *name, void *repl, msh_rebind *rb)
{
    (void)handle, (void)name, (void)repl;
    rb->n = 0;
    return -1;
}

void msh_rebind_restore(msh_rebind *rb)
{
    rb->n = 0;
}

#endif
