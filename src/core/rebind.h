/* Rebinding one library's import for a while: the slots through which a
 * loaded library calls a function of another (its global offset table)
 * pointed at a replacement, then back. Only that library's own calls
 * change; the program's and every other library's stay as they were.
 * For a dependency that does something costly and useless at one known
 * moment (libfabric's first query, transport/fabric.c). */
#ifndef MSH_CORE_REBIND_H
#define MSH_CORE_REBIND_H

#include <stdint.h>

#define MSH_REBIND_MAX 4

typedef struct msh_rebind {
    uintptr_t base; /* the library's load address */
    void **slot[MSH_REBIND_MAX];
    void *old[MSH_REBIND_MAX];
    int n;
} msh_rebind;

/* Point every slot through which the library of handle (a dlopen handle;
 * NULL: the program) calls or takes the function name at repl, noting
 * what they held in *rb. 0 done; -1 nothing changed: the library imports
 * no such function, or this platform's relocations are not known here
 * (x86-64 and AArch64 are). Not for a function the library defines. */
int msh_rebind_import(void *handle, const char *name, void *repl, msh_rebind *rb);

/* Put back what msh_rebind_import changed (nothing if it failed). */
void msh_rebind_restore(msh_rebind *rb);

#endif
