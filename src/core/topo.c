/*
 * topo.c - machine queries: cores / PUs in our CPU binding (hwloc).
 *
 * Build: -lhwloc. The libfabric query is not here: it lives in
 * tools/fabric.c, linked into mpishim-info only (see msh_topo_default_vcis).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* sched_getaffinity, CPU_ALLOC */
#endif

#include "core/topo.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* CPU topology                                                             */
/* ------------------------------------------------------------------------ */

/* Everything the CPU queries report, filled once by topo_init(). */
static struct {
    int  cores;
    int  pus;
    int  node_cores;            /* cores this process may run on at all */
    int  from_hwloc;            /* 0: figures come from the fallback */
    int  progress_cpu;          /* see msh_topo_progress_cpu */
    char cpuset[256];           /* hwloc bitmap string, e.g. 0x00000003 */
    char version[32];           /* hwloc release, e.g. 2.9.0 */
} g_topo;

static pthread_once_t g_topo_once = PTHREAD_ONCE_INIT;

/* CPUs in our sched_getaffinity mask, or 0 if it cannot be read.  The mask
 * is grown until it is big enough for the kernel (machines > 1024 CPUs). */
static int affinity_count(void)
{
    for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (set == NULL)
            return 0;
        size_t sz = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(sz, set);
        int rc = sched_getaffinity(0, sz, set);
        int n = (rc == 0) ? CPU_COUNT_S(sz, set) : 0;
        CPU_FREE(set);
        if (rc == 0)
            return n;
        /* EINVAL means the mask was too small: try a bigger one. */
    }
    return 0;
}

/* Fill g_topo from hwloc.  Returns 0 on success, -1 if hwloc failed. */
static int topo_from_hwloc(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return -1;
    /* Only cores and PUs matter: skipping caches makes the load cheaper. */
    hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return -1;
    }

    int rc = -1;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        goto out;

    /* Our binding; if it cannot be read (e.g. topology from an XML file),
     * everything we are allowed to run on. */
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
        hwloc_bitmap_copy(set, allowed);
    hwloc_bitmap_and(set, set, allowed);

    int pus = hwloc_bitmap_weight(set);
    if (pus <= 0)
        goto out;
    g_topo.node_cores = hwloc_get_nbobjs_inside_cpuset_by_type(topo, allowed, HWLOC_OBJ_CORE);
    if (g_topo.node_cores <= 0)
        g_topo.node_cores = hwloc_bitmap_weight(allowed);

    /* A core counts if any of its PUs is in the binding. */
    int cores = 0;
    hwloc_obj_t core = NULL, last = NULL;
    while ((core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core)))
        if (core->cpuset && hwloc_bitmap_intersects(core->cpuset, set)) {
            cores++;
            last = core;
        }
    /* The progress thread's place: the first PU of the binding's last
     * core, only when the launcher bound the rank to several cores. */
    g_topo.progress_cpu = -1;
    if (cores >= 2 && last && !hwloc_bitmap_isequal(set, allowed)) {
        hwloc_bitmap_t pu = hwloc_bitmap_alloc();
        if (pu) {
            hwloc_bitmap_and(pu, last->cpuset, set);
            g_topo.progress_cpu = hwloc_bitmap_first(pu);
            hwloc_bitmap_free(pu);
        }
    }
    if (cores == 0)             /* some platforms expose no Core objects */
        cores = pus;

    g_topo.pus = pus;
    g_topo.cores = cores < pus ? cores : pus;
    hwloc_bitmap_snprintf(g_topo.cpuset, sizeof g_topo.cpuset, set);

    /* The release ("2.9.0") is only known from the root object's info;
     * the API version is the fallback. */
    const char *ver = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo),
                                                 "hwlocVersion");
    if (ver != NULL && ver[0] != '\0') {
        snprintf(g_topo.version, sizeof g_topo.version, "%s", ver);
    } else {
        unsigned api = hwloc_get_api_version();
        snprintf(g_topo.version, sizeof g_topo.version, "API %u.%u",
                 (api >> 16) & 0xffu, (api >> 8) & 0xffu);
    }
    g_topo.from_hwloc = 1;
    rc = 0;

out:
    if (set != NULL)
        hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return rc;
}

static void topo_init(void)
{
    if (topo_from_hwloc() == 0)
        return;
    /* No hwloc view: one core per CPU we may run on, or 1. */
    int n = affinity_count();
    if (n < 1)
        n = 1;
    g_topo.cores = n;
    g_topo.pus = n;
    g_topo.node_cores = n;
    g_topo.from_hwloc = 0;
    g_topo.progress_cpu = -1;
}

int msh_topo_cores(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.cores;
}

int msh_topo_progress_cpu(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.progress_cpu;
}

int msh_topo_pus(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.pus;
}

void msh_topo_describe(char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    pthread_once(&g_topo_once, topo_init);
    const char *cs = g_topo.cores == 1 ? "" : "s";
    const char *ps = g_topo.pus == 1 ? "" : "s";
    if (g_topo.from_hwloc)
        snprintf(buf, len, "%d core%s / %d PU%s in cpuset %s (hwloc %s)",
                 g_topo.cores, cs, g_topo.pus, ps, g_topo.cpuset,
                 g_topo.version);
    else
        snprintf(buf, len, "%d core%s / %d PU%s (sched_getaffinity; "
                 "hwloc unavailable)", g_topo.cores, cs, g_topo.pus, ps);
}

int msh_topo_node_cores(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.node_cores > g_topo.cores ? g_topo.node_cores : g_topo.cores;
}

/* The launchers' count of this node's ranks: Open MPI's and MPICH
 * Hydra's variables; 0 when neither is set (a singleton, another
 * launcher). */
int msh_topo_local_ranks(void)
{
    static const char *const vars[] = { "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS" };
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && end != v && *end == '\0' && n > 0 && n < (1L << 24))
            return (int)n;
    }
    return 0;
}

int msh_topo_share(int bound, int node, int local, int max)
{
    int n = bound;
    /* Ranks bound to their own cores see their share in their binding;
     * unbound ranks (MPICH's Hydra, --bind-to none) all see the whole
     * node, and as many VCIs as cores each would give a 16-rank job 16
     * per rank: K internal windows per window, made, locked, flushed and
     * freed K times, for threads that have no core to run on. */
    if (local > 1 && node / local < n)
        n = node / local;
    if (n > max)
        n = max;
    return n < 1 ? 1 : n;
}

int msh_topo_default_vcis(int max)
{
    /* No libfabric cap here: loading Debian's libfabric maps libpsm2,
     * libpsm_infinipath and libinfinipath, whose constructor installs
     * SIGSEGV/SIGINT/SIGTERM... handlers (a crashing rank then exits 1
     * instead of dying by the signal), and costs 0.2 s plus 0.15 s for
     * fi_getinfo per process, whatever provider the query is restricted
     * to. mpishim-info reports the cap; MPISHIM_NUM_VCIS applies it. */
    return msh_topo_share(msh_topo_cores(), msh_topo_node_cores(), msh_topo_local_ranks(), max);
}
