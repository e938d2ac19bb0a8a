/* Errors the shim raises itself (error.h). */
#include "core/error.h"

#include <dlfcn.h>
#include <elf.h>
#include <execinfo.h>
#include <link.h>
#include <stdint.h>
#include <string.h>

#include "core/log.h"

#define MAX_FRAMES 48

static int is_mpi_name(const char *s)
{
    return s && (strncmp(s, "MPI_", 4) == 0 || strncmp(s, "mpi_", 4) == 0);
}

const char *msh_error_user_call(char *buf, size_t len)
{
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    Dl_info self;
    if (len == 0 || !dladdr((void *)&msh_error_user_call, &self))
        return NULL;
    const char *found = NULL;
    for (int i = 0; i < n; i++) {
        Dl_info di;
        const ElfW(Sym) *sym = NULL;
        if (!dladdr1(frames[i], &di, (void **)&sym, RTLD_DL_SYMENT) || di.dli_fbase != self.dli_fbase || !sym ||
            !is_mpi_name(di.dli_sname))
            continue;
        /* dladdr names the nearest exported symbol below the address: the
         * frame must lie inside it (a static helper after it does not). */
        uintptr_t pc = (uintptr_t)frames[i], start = (uintptr_t)di.dli_saddr;
        if (pc > start && pc <= start + sym->st_size)
            found = di.dli_sname; /* keep going: the outermost one is the program's call */
    }
    if (!found)
        return NULL;
    strncpy(buf, found, len - 1);
    buf[len - 1] = '\0';
    return buf;
}

static int fatal(MPI_Errhandler eh)
{
#if MPI_VERSION >= 4
    if (eh == MPI_ERRORS_ABORT)
        return 1;
#endif
    return eh == MPI_ERRORS_ARE_FATAL;
}

/* The line before a fatal handler ends the job. */
static void say(MPI_Errhandler eh, int err)
{
    if (!fatal(eh))
        return;
    char call[64], what[MPI_MAX_ERROR_STRING];
    int wl = 0, rank = -1;
    if (PMPI_Error_string(err, what, &wl) != MPI_SUCCESS)
        strcpy(what, "unknown error");
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *c = msh_error_user_call(call, sizeof call);
    msh_log("rank %d: error in %s: %s", rank, c ? c : "an MPI call", what);
}

int msh_error_comm_raise(MPI_Comm c, int err)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    if (c != MPI_COMM_NULL && PMPI_Comm_get_errhandler(c, &eh) == MPI_SUCCESS) {
        say(eh, err);
        PMPI_Errhandler_free(&eh);
    }
    PMPI_Comm_call_errhandler(c, err);
    return err;
}

int msh_error_win_raise(MPI_Win w, int err)
{
    MPI_Errhandler eh = MPI_ERRHANDLER_NULL;
    if (w != MPI_WIN_NULL && PMPI_Win_get_errhandler(w, &eh) == MPI_SUCCESS) {
        say(eh, err);
        PMPI_Errhandler_free(&eh);
    }
    PMPI_Win_call_errhandler(w, err);
    return err;
}
