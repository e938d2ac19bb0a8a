/* MPI_Init*, MPI_Finalize: where the shim's process state begins and ends. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

#include "core/common.h"
#include "core/config.h"
#include "core/log.h"
#include "core/runtime.h"
#include "mpishim.h"

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:     return "single";
    case MPI_THREAD_FUNNELED:   return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE:   return "multiple";
    default:                    return "?";
    }
}

/* What follows a successful host init, for both MPI_Init and MPI_Init_thread. */
static void after_host_init(int requested, int provided)
{
    msh_rt.thread_requested = requested;
    msh_rt.thread_provided = provided;
    PMPI_Comm_rank(MPI_COMM_WORLD, &msh_rt.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &msh_rt.world_size);
    atomic_store_explicit(&msh_rt.state, msh_cfg.disable ? MSH_STATE_DISABLED : MSH_STATE_ACTIVE,
                          memory_order_release);

    if (msh_cfg.verbose && msh_rt.world_rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0, v = 0, sv = 0;
        PMPI_Get_library_version(lib, &len);
        PMPI_Get_version(&v, &sv);
        lib[strcspn(lib, "\n")] = '\0';
        fprintf(stderr,
                "mpishim %s %s: host \"%s\", MPI %d.%d, %d ranks, thread level requested %s, host provided %s\n",
                MPISHIM_VERSION, msh_cfg.disable ? "disabled (pass-through)" : "active", lib, v, sv,
                msh_rt.world_size, thread_level_name(requested), thread_level_name(provided));
        msh_cfg_print(stderr, &msh_cfg);
        fflush(stderr);
    }
}

MSH_EXPORT int MPI_Init(int *argc, char ***argv)
{
    msh_runtime_configure();
    msh_runtime_check_host();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        after_host_init(MPI_THREAD_SINGLE, provided);
    }
    return rc;
}

MSH_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    msh_runtime_configure();
    msh_runtime_check_host();
    int rc = PMPI_Init_thread(argc, argv, required, provided);
    if (rc == MPI_SUCCESS)
        after_host_init(required, *provided);
    return rc;
}

MSH_EXPORT int MPI_Finalize(void)
{
    int rc = PMPI_Finalize();
    atomic_store_explicit(&msh_rt.state, MSH_STATE_FINALIZED, memory_order_release);
    return rc;
}
