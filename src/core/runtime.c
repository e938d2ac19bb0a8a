#include "core/runtime.h"
#include "core/common.h"
#include "core/config.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/htab.h"
#include "core/log.h"

#include "mpishim.h"

msh_runtime msh_rt;

static pthread_once_t configure_once = PTHREAD_ONCE_INIT;

static void configure(void)
{
    msh_cfg_init();
}

void msh_runtime_configure(void)
{
    pthread_once(&configure_once, configure);
}

/* ---------------------------------------------------- one MPI per process */

#define MSH_MAX_MPI_LIBS 4

typedef struct mpi_libs {
    int  n;
    char path[MSH_MAX_MPI_LIBS][512];
} mpi_libs;

/* For each loaded object, find which object its PMPI_Init lookup lands in
 * (its own or a dependency's): the distinct answers are the MPI libraries. */
static int collect_mpi_lib(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    mpi_libs *libs = arg;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    Dl_info di;
    void *sym = dlsym(h, "PMPI_Init");
    if (sym && dladdr(sym, &di) && di.dli_fname) {
        char real[512];
        const char *p = realpath(di.dli_fname, real) ? real : di.dli_fname;
        int seen = 0;
        for (int i = 0; i < libs->n; i++)
            seen |= !strcmp(libs->path[i], p);
        if (!seen && libs->n < MSH_MAX_MPI_LIBS)
            snprintf(libs->path[libs->n++], sizeof libs->path[0], "%s", p);
    }
    dlclose(h);
    return 0;
}

void msh_runtime_check_host(void)
{
    mpi_libs libs = { 0 };
    dl_iterate_phdr(collect_mpi_lib, &libs);
    if (libs.n > 1) {
        /* A build for the other host was preloaded: every handle would be
         * misread, so stop with a clear message instead. */
        msh_log_once("this libmpishim.so was built for %s, but the process loaded two MPI libraries (%s and %s); "
                     "preload the build matching the program's MPI, or use the mpishim launcher",
                     MSH_HOST_FLAVOR, libs.path[0], libs.path[1]);
        exit(1);
    }
}

MSH_EXPORT int mpishim_active(void)
{
    msh_runtime_configure();
    return !msh_cfg.disable;
}

MSH_EXPORT const char *mpishim_version(void)
{
    return MPISHIM_VERSION;
}

MSH_EXPORT void mpishim_print_config(FILE *out)
{
    msh_runtime_configure();
    msh_cfg_print(out, &msh_cfg);
}
