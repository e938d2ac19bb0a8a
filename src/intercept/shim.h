/* What every hand-written entry point needs: is the runtime on, how to post
 * an operation on a route, and how to wait for shim requests. */
#ifndef MSH_INTERCEPT_SHIM_H
#define MSH_INTERCEPT_SHIM_H

#include <mpi.h>

#include "core/common.h"
#include "core/runtime.h"
#include "sync/request.h"
#include "sync/sync.h"
#include "vci/comm.h"
#include "vci/vci.h"

/* Solo fast path. While one thread at a time uses MPI, the runtime has
 * nothing to arbitrate: that thread's calls go straight to the (MPI_THREAD_
 * MULTIPLE) host, so a single-threaded phase costs what the host costs. The
 * thread that finds another thread inside a solo call switches the process
 * to the shared path for good. Ownership passes between threads that take
 * turns (a main thread's barrier between workers' phases). This is a
 * heuristic: two threads briefly both solo is legal for the host, only
 * slower. Off with MPISHIM_SOLO=0 and whenever the shim serializes the host.
 * Requests made on the solo path are host requests, which every completion
 * call accepts. */
extern _Atomic int msh_solo_on;
extern _Atomic uintptr_t msh_solo_owner;
extern _Atomic int msh_solo_busy;
extern MSH_TLS char msh_solo_token; /* its address names the thread */
int msh_solo_claim(void);
void msh_solo_off(void);             /* for good */
void msh_solo_start(int serialized); /* at init */

static inline int msh_solo_enter(void)
{
    if (MSH_LIKELY(!atomic_load_explicit(&msh_solo_on, memory_order_relaxed)))
        return 0;
    if (MSH_UNLIKELY(atomic_load_explicit(&msh_solo_owner, memory_order_relaxed) != (uintptr_t)&msh_solo_token))
        return msh_solo_claim();
    atomic_store_explicit(&msh_solo_busy, 1, memory_order_relaxed);
    return 1;
}

/* A solo call that hands out a request. Not with MPISHIM_STATS=1: its
 * report at finalize counts the requests still pending, and only shim
 * requests (in the VCIs' pending sets) can be counted, so there the call
 * takes the runtime path. The inline SOLO_DIRECT paths get the same rule
 * from msh_comm_gate (vci/comm.c), at no cost to the fast path. */
static inline int msh_solo_enter_req(void)
{
    return !msh_cfg.stats && msh_solo_enter();
}

static inline void msh_solo_exit(void)
{
    atomic_store_explicit(&msh_solo_busy, 0, memory_order_release);
}

/* Report err through c's error handler and return it (design brief rule 8). */
static inline int msh_comm_error(MPI_Comm c, int err)
{
    PMPI_Comm_call_errhandler(c, err);
    return err;
}

/* Reject a wildcard that c's assertions rule out. */
static inline int msh_check_wildcards(MPI_Comm c, const msh_comm *mc, int source, int tag)
{
    unsigned a = mc ? mc->asserts : msh_cfg.asserts;
    if (MSH_UNLIKELY(source == MPI_ANY_SOURCE && (a & MSH_ASSERT_NO_ANY_SOURCE)))
        return msh_comm_error(c, MPI_ERR_RANK);
    if (MSH_UNLIKELY(tag == MPI_ANY_TAG && (a & MSH_ASSERT_NO_ANY_TAG)))
        return msh_comm_error(c, MPI_ERR_TAG);
    return MPI_SUCCESS;
}

/* Copy a completion status to the user, all but MPI_ERROR: MPI 4.0 section
 * 3.2.5 lets only the multiple-completion calls write it, and only when
 * they return MPI_ERR_IN_STATUS (they set it themselves then). */
static inline void msh_status_out(MPI_Status *dst, const MPI_Status *src)
{
    if (dst == MPI_STATUS_IGNORE)
        return;
    int e = dst->MPI_ERROR;
    *dst = *src;
    dst->MPI_ERROR = e;
}

/* A request handle of the shim's that names no live request (request.h):
 * refused as the hosts refuse a bad request, on MPI_COMM_WORLD. */
static inline int msh_bad_request(void)
{
    return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_REQUEST);
}

/* Hand a completed request's outcome to the user: copy the status (not its
 * MPI_ERROR), then recycle it (or make a persistent one inactive). *handle
 * becomes MPI_REQUEST_NULL unless persistent. Returns the request's error
 * code, or MPI_ERR_REQUEST if another thread retired it first. */
int msh_req_retire(msh_request *r, MPI_Request *handle, MPI_Status *status);

/* One round of waiting that does not block in the host: advance
 * partitioned receives still waiting for their header (part.h), poll the
 * runtime's progress, or give the core away. */
void msh_idle(void);

/* Wait for a host request by testing it (under the host lock when the host
 * is serialized) and idling between tests. For forwarded blocking calls
 * while msh_part_setup_pending(): the host must not block then. */
int msh_host_wait(MPI_Request *req, MPI_Status *status);

/* Wait for one shim request the sync-object way. */
void msh_req_wait_complete(msh_request *r);

/* Post helpers used by the point-to-point and collective wrappers: lock the
 * VCI and get a request; then either commit (the host request was posted)
 * or abort (the host call failed). */
static inline msh_request *msh_post_begin(msh_vci *v)
{
    msh_vci_lock(v);
    msh_request *r = msh_vci_req_get(v);
    if (MSH_UNLIKELY(!r))
        msh_vci_unlock(v);
    return r;
}

int msh_post_commit(msh_vci *v, msh_request *r, int kind, int rc, MPI_Request *handle);

/* Wait for a host request the shim just made (a collective or other
 * nonblocking host call), sync-object style. Used by the generated
 * blocking-collective wrappers: v is locked by msh_coll_begin. */
msh_vci *msh_coll_begin(MPI_Comm comm);
int msh_coll_finish(msh_vci *v, int rc, MPI_Request hreq, MPI_Status *status);

#endif
