/* The request and completion engine: posting shim requests, waiting for
 * them, retiring them, and completing arrays that mix shim requests, host
 * requests the shim never made (MPI-IO, generalized requests, persistent
 * collectives, ...) and MPI_REQUEST_NULL: the program holds only shim
 * handles for what the shim made, and host handles for the rest. Shim
 * requests are waited for with a sync object (sync.h); host requests with
 * host calls, which in serialized mode are made under the host lock and
 * polled, never blocked in. The MPI_* entry points that call it are in
 * src/intercept/complete.c. */
#ifndef MSH_SYNC_WAIT_H
#define MSH_SYNC_WAIT_H

#include <mpi.h>

#include "core/common.h"
#include "core/error.h"
#include "core/runtime.h"
#include "sync/cache.h"
#include "sync/notes.h"
#include "sync/queue.h"
#include "sync/request.h"
#include "sync/solo.h"
#include "sync/progress.h"
#include "vci/vci.h"

/* ------------------------------------------------------------ outcomes */

/* Report err through c's error handler and return it: the shim's own
 * errors reach the program as the host's would. */
static inline int msh_comm_error(MPI_Comm c, int err)
{
    return msh_error_comm(c, err); /* names the program's call if fatal */
}

/* A request handle of the shim's that names no live request (request.h):
 * refused as the hosts refuse a bad request, on MPI_COMM_WORLD. */
static inline int msh_bad_request(void)
{
    return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_REQUEST);
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

/* The host's own empty status, hidden fields included. */
void msh_empty_status(MPI_Status *st);

static inline int msh_req_done(const msh_request *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_COMPLETE;
}

/* Which call retires a request, for where a transport's own error
 * (msh_tp_done.own_error) is raised: where the host raises its own, once
 * per call. A call that names the communicator (MPI_Recv, MPI_Sendrecv)
 * raises on it. A completion call (MPI_Wait*, MPI_Test*, and MPI_Mrecv,
 * which names none) raises on Open MPI 4.1 on the request's communicator
 * with the request's class; on MPICH 4.0 on MPI_COMM_WORLD, with
 * MPI_ERR_IN_STATUS from the calls that complete all or some
 * (tests/mpi/errors.c measured both). */
typedef enum { MSH_RAISE_COMM, MSH_RAISE_REQUEST, MSH_RAISE_ARRAY } msh_raise_by;

/* Hand a completed request's outcome to the user: copy the status (not its
 * MPI_ERROR), then recycle it (or make a persistent one inactive). *handle
 * becomes MPI_REQUEST_NULL unless persistent. Returns the request's error
 * code, or MPI_ERR_REQUEST if another thread retired it first. */
int msh_req_retire(msh_request *r, MPI_Request *handle, MPI_Status *status, msh_raise_by by);

/* ------------------------------------------------------------ posting */

/* Post helpers used by the point-to-point and collective wrappers: lock the
 * VCI (msh_post_locked: the caller has) and get a request; then commit what
 * the post did (rc: its result; p: what msh_tp_post or msh_tp_post_matched
 * did with the operation, NULL for a persistent one, or a host request the
 * caller made, which commit tracks). Commit unlocks the VCI. */
static inline void msh_post_drain(msh_vci *v)
{
    if (msh_queue_nonempty(v)) /* a direct post never overtakes a queued one */
        msh_queue_drain(v);
}

/* Under v's lock, after msh_post_drain: a request, or NULL (and v unlocked). */
static inline msh_request *msh_post_get(msh_vci *v)
{
    msh_request *r = msh_vci_req_get(v);
    if (MSH_UNLIKELY(!r))
        msh_vci_unlock(v);
    return r;
}

static inline msh_request *msh_post_locked(msh_vci *v)
{
    msh_post_drain(v);
    return msh_post_get(v);
}

static inline msh_request *msh_post_begin(msh_vci *v)
{
    msh_vci_lock(v);
    return msh_post_locked(v);
}

/* A post's counts for MPISHIM_STATS. */
static inline void msh_count_post(msh_vci *v, int kind)
{
    if (kind == MSH_KIND_SEND)
        v->st.sends++;
    else if (kind == MSH_KIND_RECV)
        v->st.recvs++;
    else
        v->st.colls++;
}

/* The two outcomes of a message-rate post, inline in msh_post_commit (and
 * used by msh_post_commit_rest for the same outcomes): pending, tracked by
 * the transport; or a send finished inside its post, for which the shared
 * request stands (MSH_REQ_SENT_IDX), nothing to retire later. */
static inline int msh_commit_pending(msh_vci *v, msh_request *r, int kind, MPI_Request *handle)
{
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_relaxed);
    msh_watchdog_posted(r);
    msh_progress_wake();
    msh_count_post(v, kind);
    msh_vci_unlock(v);
    *handle = msh_req_handle(r);
    return MPI_SUCCESS;
}

static inline void msh_count_sent(msh_vci *v, uint64_t bytes)
{
    v->st.completions++;
    v->st.sends++;
    v->st.bytes += bytes;
}

static inline int msh_commit_sent(msh_vci *v, msh_request *r, MPI_Request *handle)
{
    msh_vci_req_unget(v, r);
    msh_count_sent(v, 0);
    msh_vci_unlock(v);
    *handle = msh_req_sent_handle();
    return MPI_SUCCESS;
}

int msh_post_commit_rest(msh_vci *v, msh_request *r, int kind, int rc, const msh_tp_posted *p, MPI_Request *handle);

static inline int msh_post_commit(msh_vci *v, msh_request *r, int kind, int rc, const msh_tp_posted *p,
                                  MPI_Request *handle)
{
    if (MSH_LIKELY(rc == MPI_SUCCESS && p && (kind == MSH_KIND_SEND || kind == MSH_KIND_RECV))) {
        r->kind = (uint8_t)kind;
        if (p->how == MSH_TP_TRACKED)
            return msh_commit_pending(v, r, kind, handle);
        if (p->how == MSH_TP_DONE && kind == MSH_KIND_SEND && !p->d.own_error)
            return msh_commit_sent(v, r, handle);
    }
    return msh_post_commit_rest(v, r, kind, rc, p, handle);
}

/* Wait for a host request the shim just made (a collective or other
 * nonblocking host call), sync-object style. Used by the generated
 * blocking-collective wrappers: v is locked by msh_coll_begin. */
msh_vci *msh_coll_begin(MPI_Comm comm);
int msh_coll_finish(msh_vci *v, int rc, MPI_Request hreq, MPI_Status *status);

/* Lifecycle of a persistent or active shim request that is not
 * partitioned (MSH_KIND_PART requests go to part.h). msh_req_start takes
 * a persistent, inactive r; msh_req_free sets *handle to MPI_REQUEST_NULL;
 * both refuse a request another thread started or freed meanwhile. */
int msh_req_start(msh_request *r);
int msh_req_free(msh_request *r, MPI_Request *handle);
int msh_req_cancel(msh_request *r);

/* ------------------------------------------------------------ waiting */

/* Wait for a host request by testing it (under the host lock when the host
 * is serialized) and idling between tests (msh_spin). For forwarded
 * blocking calls while msh_sweep_wanted(): the host must not block then. */
int msh_host_wait(MPI_Request *req, MPI_Status *status);

/* Test a host request that the calling thread alone holds (a blocking
 * call's, just posted, not yet a shim request) until it completes or the
 * waiting policy's spin time runs out (MPISHIM_WAIT=adaptive: up to
 * MPISHIM_SPIN_US; block, or a serialized host: one test; spin: as
 * adaptive, since a thread testing here does not progress the shim's
 * pending requests). A waiter
 * spins like this in the host's own blocking call too; the shim's sync
 * object pays off for waits longer than that (in the threads.c
 * pattern on MPICH, 7% of the receives were not done after one test, and
 * sleeping for them made the blocking phase 1.6x slower than raw). Returns
 * the host's result; *h is MPI_REQUEST_NULL once complete. */
int msh_host_test_fresh(MPI_Request *h, MPI_Status *st);

/* Wait for one shim request the sync-object way. */
void msh_req_wait_complete(msh_request *r);

/* Completing an array of requests (MPI_Wait/Testall, -any, -some). */
typedef enum { MSH_COMPLETE_ALL, MSH_COMPLETE_ANY, MSH_COMPLETE_SOME } msh_complete_mode;

typedef struct msh_completion {
    msh_complete_mode mode;
    int blocking;          /* wait until the mode is met; else test once */
    int *flag;             /* tests: whether it was met */
    int *index;            /* any */
    int *outcount;         /* some */
    int *indices;          /* some */
    MPI_Status *statuses;  /* all, some: one per request (or MPI_STATUSES_IGNORE); any: one */
} msh_completion;

/* Complete requests of reqs[0..n) as c asks. Returns the MPI result;
 * reports a stale shim handle or no memory through MPI_COMM_WORLD's error
 * handler (as the single-request calls do). */
int msh_complete(int n, MPI_Request reqs[], const msh_completion *c);

#endif
