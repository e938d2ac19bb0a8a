/* Unit test of rebinding a library's import (src/core/rebind.c) on this
 * test program itself, linked with -z relro -z now so that its slots are
 * read-only after loading: the program's calls to fopen reach the
 * replacement while rebound, and libc's fopen again after the restore;
 * the slots' pages are read-only before, after and once restored (the
 * store opens them for itself only); a name the program does not import,
 * or defines itself, changes nothing. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/rebind.h"
#include "unit.h"

static FILE *(*real_fopen)(const char *, const char *);
static int hooked;

static FILE *hook(const char *path, const char *mode)
{
    hooked++;
    return real_fopen(path, mode);
}

/* Whether the page holding addr is mapped writable (/proc/self/maps, read
 * with libc's fopen: the program's own may be rebound). */
static int writable(const void *addr)
{
    FILE *f = real_fopen("/proc/self/maps", "r");
    char line[512];
    int w = -1;
    uintptr_t a = (uintptr_t)addr;
    while (f && w < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char perm[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perm) == 3 && a >= lo && a < hi)
            w = perm[1] == 'w';
    }
    if (f)
        fclose(f);
    return w;
}

int msh_unit_defined(void);
int msh_unit_defined(void)
{
    return 1;
}

int main(void)
{
    *(void **)&real_fopen = dlsym(RTLD_DEFAULT, "fopen");
    EXPECT(real_fopen != NULL);

    msh_rebind rb;
    EXPECT(msh_rebind_import(NULL, "fopen", (void *)hook, &rb) == 0);
    EXPECT(rb.n >= 1);
    for (int i = 0; i < rb.n; i++) {
        EXPECT(rb.old[i] != (void *)hook);
        EXPECT(*rb.slot[i] == (void *)hook);
        EXPECT(writable(rb.slot[i]) == 0); /* -z now: RELRO, closed again */
    }
    FILE *f = fopen("/dev/null", "r");
    EXPECT(f != NULL);
    EXPECT(hooked == 1);
    if (f)
        fclose(f);

    void **slot0 = rb.n ? rb.slot[0] : NULL;
    void *old0 = rb.n ? rb.old[0] : NULL;
    msh_rebind_restore(&rb);
    EXPECT(rb.n == 0);
    EXPECT(slot0 && *slot0 == old0);
    EXPECT(slot0 && writable(slot0) == 0);
    f = fopen("/dev/null", "r");
    EXPECT(f != NULL);
    EXPECT(hooked == 1);
    if (f)
        fclose(f);
    msh_rebind_restore(&rb); /* twice: nothing */

    /* Nothing to rebind: not imported, or the program's own. */
    EXPECT(msh_rebind_import(NULL, "msh_unit_no_such_function", (void *)hook, &rb) == -1);
    EXPECT(rb.n == 0);
    EXPECT(msh_rebind_import(NULL, "msh_unit_defined", (void *)hook, &rb) == -1);
    EXPECT(rb.n == 0);
    EXPECT(msh_unit_defined() == 1);

    if (failures)
        printf("test_rebind: FAILED\n");
    else
        printf("ok test_rebind\n"); /* what tests/run.sh looks for */
    return failures != 0;
}
