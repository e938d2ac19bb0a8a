/*
 * test_topo.c - standalone checks of src/core/topo.c (no MPI).
 *
 *   gcc -std=c11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc \
 *       tests/unit/test_topo.c src/core/topo.c -lhwloc -pthread
 *
 * Prints "ok test_topo" and exits 0; on failure prints what failed and
 * exits 1.  Set MSH_TEST_VERBOSE=1 to see what was found.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "core/topo.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "unit.h"


/* What nproc reports: CPUs in our affinity mask (0 if unreadable). */
static int affinity_cpus(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    return CPU_COUNT(&set);
}

/* Several threads racing on the first call must all see one answer. */
enum { NRACE = 4 };
static int race_cores[NRACE];

static void *race(void *arg)
{
    int *slot = arg;
    *slot = msh_topo_cores();
    return NULL;
}

int main(void)
{
    int verbose = getenv("MSH_TEST_VERBOSE") != NULL;

    pthread_t th[NRACE];
    for (int i = 0; i < NRACE; i++)
        EXPECT(pthread_create(&th[i], NULL, race, &race_cores[i]) == 0);
    for (int i = 0; i < NRACE; i++)
        pthread_join(th[i], NULL);

    int cores = msh_topo_cores();
    int pus = msh_topo_pus();
    int aff = affinity_cpus();
    for (int i = 0; i < NRACE; i++)
        EXPECT(race_cores[i] == cores);

    EXPECT(cores >= 1);
    EXPECT(cores <= pus);
    if (aff > 0) {
        /* Cores can only be fewer than the CPUs we may run on (SMT). */
        EXPECT(cores <= aff);
        EXPECT(pus <= aff);
    }
    EXPECT(msh_topo_cores() == cores);   /* cached, stable */

    char desc[256];
    memset(desc, 'x', sizeof desc);
    msh_topo_describe(desc, sizeof desc);
    EXPECT(memchr(desc, '\0', sizeof desc) != NULL);
    EXPECT(desc[0] != '\0');
    EXPECT(strstr(desc, "core") != NULL);

    char small[8];
    memset(small, 'x', sizeof small);
    msh_topo_describe(small, sizeof small);        /* truncates, terminates */
    EXPECT(small[sizeof small - 1] == '\0');
    msh_topo_describe(NULL, 0);                    /* must not crash */

    /* auto: one VCI per core of the binding, bounded by the maximum, never 0;
     * no libfabric cap in the library (topo.c says why). */
    EXPECT(msh_topo_default_vcis(1) == 1);
    EXPECT(msh_topo_default_vcis(0) == 1);
    EXPECT(msh_topo_node_cores() >= cores);

    /* ... and no more than the node's cores over the ranks on it. */
    EXPECT(msh_topo_share(16, 16, 0, 64) == 16);  /* alone, unbound */
    EXPECT(msh_topo_share(16, 16, 1, 64) == 16);
    EXPECT(msh_topo_share(16, 16, 2, 64) == 8);   /* 2 unbound ranks */
    EXPECT(msh_topo_share(16, 16, 16, 64) == 1);  /* MPI everywhere, unbound */
    EXPECT(msh_topo_share(16, 16, 3, 64) == 5);
    EXPECT(msh_topo_share(8, 16, 2, 64) == 8);    /* bound to a socket each */
    EXPECT(msh_topo_share(8, 16, 16, 64) == 1);   /* 8 ranks per socket */
    EXPECT(msh_topo_share(1, 16, 2, 64) == 1);    /* bound to a core */
    EXPECT(msh_topo_share(2, 2, 4, 64) == 1);     /* oversubscribed */
    EXPECT(msh_topo_share(128, 128, 1, 64) == 64);
    EXPECT(msh_topo_share(0, 0, 0, 64) == 1);

    /* The launchers' variables, Open MPI's first. */
    setenv("MPI_LOCALNRANKS", "3", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "x", 1);
    EXPECT(msh_topo_local_ranks() == 3);
    setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "4", 1);
    EXPECT(msh_topo_local_ranks() == 4);
    EXPECT(msh_topo_default_vcis(64) == msh_topo_share(cores, msh_topo_node_cores(), 4, 64));
    unsetenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    setenv("MPI_LOCALNRANKS", "-2", 1);
    EXPECT(msh_topo_local_ranks() == 0);
    unsetenv("MPI_LOCALNRANKS");
    EXPECT(msh_topo_local_ranks() == 0);
    EXPECT(msh_topo_default_vcis(64) == (cores < 64 ? cores : 64));

    if (verbose) {
        printf("topo: %s (affinity %d CPUs)\n", desc, aff);
    }

    if (failures) {
        fprintf(stderr, "test_topo: %d check%s failed\n", failures,
                failures == 1 ? "" : "s");
        return 1;
    }
    printf("ok test_topo\n");
    return 0;
}
