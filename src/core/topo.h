/*
 * topo.h - machine queries used to size the pool of communication
 * interfaces and shown by the info tool.
 *
 * All functions are thread-safe.  The CPU queries are computed once (on the
 * first call of any of them) and cached for the life of the process, so a
 * later change of the process binding is not seen.
 *
 * Link with -lhwloc; with -DHAVE_LIBFABRIC also with -lfabric.
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

/* Short description, e.g.
 *   "2 cores / 2 PUs in cpuset 0x00000003 (hwloc 2.9.0)"
 * written into buf (always NUL-terminated when len > 0, truncated if short). */
void msh_topo_describe(char *buf, size_t len);

typedef struct msh_fabric_prov {
    char   prov_name[64];
    char   fabric_name[64];
    char   domain_name[64];
    size_t max_ep_tx_ctx;   /* domain_attr->max_ep_tx_ctx */
    size_t tx_ctx_cnt;      /* domain_attr->tx_ctx_cnt */
} msh_fabric_prov;

/* Query libfabric for providers offering FI_MSG|FI_TAGGED on FI_EP_RDM
 * endpoints.  Fills up to max entries of out (identical entries are listed
 * once) and returns how many were written: 0 when none (or on error),
 * -1 when built without libfabric (HAVE_LIBFABRIC not defined).
 * Prints nothing itself (libfabric may still log, per FI_LOG_LEVEL).
 * Not cached: every call runs fi_getinfo().  The first call in a process
 * pays for libfabric initializing its providers (~0.1 s on the dev VM),
 * later calls ~1 ms; FI_PROVIDER and friends restrict what is listed. */
int msh_fabric_query(msh_fabric_prov *out, int max);

/* Smallest transmit-context count over the hardware providers found by
 * msh_fabric_query(), or 0 when unknown / none / built without libfabric.
 * Used to cap the interface pool: no more VCIs than hardware streams.
 * See the rule in topo.c.  Computed once, then cached. */
size_t msh_fabric_tx_cap(void);

#ifdef __cplusplus
}
#endif

/* Default VCI pool size (MPISHIM_NUM_VCIS=auto): one per core of the
 * rank's binding, no more than the hardware's transmit contexts (file 003,
 * Fig. 17: VCIs beyond hardware streams only add contention), and at most
 * max. Always >= 1. */
int msh_topo_default_vcis(int max);

#endif /* MSH_CORE_TOPO_H */
