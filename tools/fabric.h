/*
 * fabric.h - libfabric provider query for mpishim-info (tools/fabric.c).
 * Thread-safe.
 */
#ifndef MSH_TOOLS_FABRIC_H
#define MSH_TOOLS_FABRIC_H

#include <stddef.h>

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
 * See the rule in fabric.c.  Computed once, then cached. */
size_t msh_fabric_tx_cap(void);

#endif /* MSH_TOOLS_FABRIC_H */
