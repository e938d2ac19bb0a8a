/*
 * topo.h - machine queries used to size the pool of communication
 * interfaces and shown by the info tool.
 *
 * All functions are thread-safe.  The CPU queries are computed once (on the
 * first call of any of them) and cached for the life of the process, so a
 * later change of the process binding is not seen.
 *
 * Link with -lhwloc. Nothing here loads libfabric (tools/fabric.h does,
 * for mpishim-info only).
 */
#ifndef MSH_CORE_TOPO_H
#define MSH_CORE_TOPO_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Cores (not hardware threads) that intersect this process's CPU binding,
 * found with hwloc.  Falls back to the sched_getaffinity() CPU count, then 1.
 * Always >= 1. */
int msh_topo_cores(void);

/* Processing units (hardware threads) in the binding.  Always >= 1 and
 * >= msh_topo_cores(). */
int msh_topo_pus(void);

/* Where MPISHIM_PROGRESS_CPU=auto puts a progress thread: the OS index of
 * the first PU of the last core in this process's binding when the rank is
 * bound to two or more cores but not to everything it may run on; else -1
 * (unbound ranks would all put theirs on the same CPU). */
int msh_topo_progress_cpu(void);

/* Short description, e.g.
 *   "2 cores / 2 PUs in cpuset 0x00000003 (hwloc 2.9.0)"
 * written into buf (always NUL-terminated when len > 0, truncated if short). */
void msh_topo_describe(char *buf, size_t len);

#ifdef __cplusplus
}
#endif

/* Default VCI pool size (MPISHIM_NUM_VCIS=auto): one per core of the
 * rank's binding, and no more than the node's cores divided by the ranks
 * the launcher put on it, at most max. Always >= 1. The hardware's
 * transmit contexts are not asked here: see topo.c;
 * mpishim-info prints the cap they imply. */
int msh_topo_default_vcis(int max);

/* That rule on given figures: bound cores, node cores, local ranks (0 or
 * 1: unknown or alone), max. */
int msh_topo_share(int bound, int node, int local, int max);

/* Cores this process may run on at all (the node's, unless a container or
 * cgroup allows fewer); at least msh_topo_cores(). */
int msh_topo_node_cores(void);

/* Ranks on this node as the launcher says (Open MPI, MPICH Hydra), or 0. */
int msh_topo_local_ranks(void);

#endif /* MSH_CORE_TOPO_H */
