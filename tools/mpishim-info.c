/* mpishim-info: what a run under mpishim will use on this machine.
 *
 * Prints the host MPI (library, standard version, thread support), the
 * cores hwloc sees for this process, the libfabric providers and their
 * transmit contexts, and the effective MPISHIM_* configuration. Run it as
 * `mpishim-info` (singleton) or under mpirun to see a rank's view. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/topo.h"
#include "fabric.h"
#include "mpishim.h"

#ifndef MSH_HOST_FLAVOR
#define MSH_HOST_FLAVOR "unknown"
#endif

static const char *level_name(int l)
{
    return l == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
         : l == MPI_THREAD_SERIALIZED ? "MPI_THREAD_SERIALIZED"
         : l == MPI_THREAD_FUNNELED ? "MPI_THREAD_FUNNELED" : "MPI_THREAD_SINGLE";
}

extern char **environ;

/* Which layer serves MPI_Psend_init and friends (MPISHIM_PART). */
static const char *part_layer(void)
{
    msh_config c;
    static char err[256];
    msh_cfg_defaults(&c);
    if (msh_cfg_parse(&c, environ, err, sizeof err, NULL, NULL) != 0)
        return err;
#if MPI_VERSION >= 4
    if (c.part == MSH_PART_NATIVE)
        return "the host's own (MPISHIM_PART=native)";
    if (c.part == MSH_PART_AUTO)
        return "the shim's layer when every rank asks for MPI_THREAD_MULTIPLE, else the host's own (auto)";
    return "the shim's layer (MPISHIM_PART=shim)";
#else
    return "the shim's layer (this host has no partitioned calls of its own)";
#endif
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: mpishim-info [--host openmpi|mpich] [--doc md|man | --calls]\n"
                   "Prints the host MPI, cores, libfabric providers and the effective MPISHIM_* configuration.\n"
                   "--host: one host's build only (without it the mpishim-info command reports for every host\n"
                   "built).\n"
                   "--doc md|man: prints the reference of every MPISHIM_* variable instead (Markdown, or a man\n"
                   "page section), without starting MPI.\n"
                   "--calls: prints every MPI call the shim defines and what it does with it (docs/design.md,\n"
                   "\"Which calls the shim changes\"), without starting MPI.\n");
            return 0;
        }
        if (!strcmp(argv[i], "--doc") && i + 1 < argc && (!strcmp(argv[i + 1], "md") || !strcmp(argv[i + 1], "man"))) {
            msh_cfg_doc(stdout, !strcmp(argv[i + 1], "man"));
            return 0;
        }
        if (!strcmp(argv[i], "--calls")) {
            mpishim_print_calls(stdout);
            return 0;
        }
        fprintf(stderr, "mpishim-info: unknown argument '%s' (try --help)\n", argv[i]);
        return 2;
    }

    int provided = 0, rank = 0, size = 1, v = 0, sv = 0, len = 0;
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Get_version(&v, &sv);
    MPI_Get_library_version(lib, &len);
    lib[strcspn(lib, "\n")] = '\0';

    if (rank == 0) {
        char topo[256];
        msh_topo_describe(topo, sizeof topo);
        printf("mpishim %s (%s build), %s\n", mpishim_version(), MSH_HOST_FLAVOR,
               mpishim_active() ? "active" : "disabled by MPISHIM_DISABLE (pass-through)");
        printf("host MPI library   %s\n", lib);
        printf("MPI standard       %d.%d\n", v, sv);
        printf("thread support     program gets %s (requested MPI_THREAD_MULTIPLE)\n", level_name(provided));
        printf("ranks              %d\n", size);
        printf("cores (hwloc)      %s\n", topo);
        int pcpu = msh_topo_progress_cpu();
        if (pcpu >= 0)
            printf("progress thread    PROGRESS_CPU=auto binds it to CPU %d (rank 0's binding)\n", pcpu);
        else
            printf("progress thread    PROGRESS_CPU=auto leaves it unbound (rank 0 is bound to one core or to the whole machine)\n");

        msh_fabric_prov prov[64];
        int n = msh_fabric_query(prov, 64);
        if (n < 0) {
            printf("libfabric          not built in\n");
        } else if (n == 0) {
            printf("libfabric          no provider found\n");
        } else {
            size_t cap = msh_fabric_tx_cap();
            printf("libfabric          VCI cap from transmit contexts: ");
            if (cap)
                printf("%zu\n", cap);
            else
                printf("none (no hardware provider)\n");
            /* One line per provider: the same provider shows up once per
             * interface and address family. */
            for (int i = 0; i < n; i++) {
                int first = 1;
                for (int j = 0; j < i; j++)
                    first &= strcmp(prov[i].prov_name, prov[j].prov_name) != 0;
                if (!first)
                    continue;
                int doms = 0;
                for (int j = i; j < n; j++)
                    doms += !strcmp(prov[i].prov_name, prov[j].prov_name);
                printf("  %-14s %2d endpoint(s), e.g. domain %-8s max_ep_tx_ctx %zu tx_ctx_cnt %zu\n",
                       prov[i].prov_name, doms, prov[i].domain_name, prov[i].max_ep_tx_ctx, prov[i].tx_ctx_cnt);
            }
        }
        /* The library does not ask libfabric itself (src/core/topo.c): the
         * cap is advice the user applies with MPISHIM_NUM_VCIS. */
        int pool = msh_topo_default_vcis(MSH_MAX_VCIS);
        int local = msh_topo_local_ranks();
        if (local > 1)
            printf("VCI pool if auto   %d (%d cores in this process's binding; %d on the node for %d ranks)\n", pool,
                   msh_topo_cores(), msh_topo_node_cores(), local);
        else
            printf("VCI pool if auto   %d (cores in this process's binding; no launcher's count of ranks on the "
                   "node)\n",
                   pool);
        size_t fcap = n > 0 ? msh_fabric_tx_cap() : 0;
        if (fcap > 0 && fcap < (size_t)pool)
            printf("                   hardware transmit contexts suggest MPISHIM_NUM_VCIS=%zu\n", fcap);
        const char *lane = mpishim_lane();
        if (lane)
            printf("lane               %s: each VCI's point-to-point messages go outside the host (MPISHIM_FABRIC);\n"
                   "                   each VCI has a progress owner of its own unless MPISHIM_PROGRESS is global,\n"
                   "                   thread or offload\n",
                   lane);
        else
            printf("lane               none: every message goes through the host\n");
        printf("partitioned        %s\n", part_layer());
        printf("configuration (MPISHIM_* environment):\n");
        mpishim_print_config(stdout);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
