/* MPI-4's nonblocking send-receive: MPI_Isendrecv, MPI_Isendrecv_replace and
 * their large-count forms.
 *
 * The receive and the send each take the route a plain receive or send with
 * the same peer and tag takes (under a spreading map they may be different
 * internal duplicates), so they meet the program's other calls. The two
 * requests (the host's; or the engine's, posted like MPI_Irecv and
 * MPI_Isend, where a lane may carry the communicator and the counts fit an
 * int) belong to one shim request of kind MSH_KIND_PAIR, polled by its
 * waiters like a partitioned one (sync/request.h): complete when both are,
 * with the receive's status (MPI_ERROR: the receive's error, else the
 * send's). The replace form sends from a packed copy of the buffer, so that
 * the receive can land in it. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "intercept/isendrecv.h"
#include "intercept/pack.h"
#include "intercept/shim.h"
#include "sync/cache.h"

#if MPI_VERSION >= 4

typedef struct pair {
    MPI_Request rq, sq; /* host or engine requests: MPI_REQUEST_NULL once complete */
    MPI_Status rst;
    int send_err;
    void *tmp;          /* the replace form's packed send data */
    MPI_Comm comm;      /* the program's: request errors are raised there */
} pair;

static pair *pair_of(msh_request *r)
{
    return r->ext;
}

/* A part of a pair, the host's request or the engine's. */
static int part_test(MPI_Request *h, int *flag, MPI_Status *st)
{
    msh_request *q = msh_req_of(*h);
    if (q)
        return msh_req_ops_of(q)->test(q, h, flag, st);
    int locked = msh_host_enter();
    int rc = PMPI_Test(h, flag, st);
    msh_host_exit(locked);
    return rc;
}

static int part_cancel(MPI_Request *h)
{
    msh_request *q = msh_req_of(*h);
    if (q)
        return msh_req_ops_of(q)->cancel(q);
    int locked = msh_host_enter();
    int rc = PMPI_Cancel(h);
    msh_host_exit(locked);
    return rc;
}

static void part_free(MPI_Request *h)
{
    msh_request *q = msh_req_of(*h);
    if (q) {
        msh_req_ops_of(q)->free(q, h);
        return;
    }
    int locked = msh_host_enter();
    PMPI_Request_free(h);
    msh_host_exit(locked);
}

/* Test what is still pending; 1 once both are complete (r then is). */
static int pair_progress(msh_request *r, int blocking)
{
    (void)blocking;
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING)
        return 1;
    pair *p = pair_of(r);
    if (p->rq != MPI_REQUEST_NULL) {
        int f = 0;
        int rc = part_test(&p->rq, &f, &p->rst);
        if (rc != MPI_SUCCESS) {
            p->rst.MPI_ERROR = rc;
            p->rq = MPI_REQUEST_NULL;
        } else if (f) {
            p->rst.MPI_ERROR = MPI_SUCCESS;
        }
    }
    if (p->sq != MPI_REQUEST_NULL) {
        int f = 0;
        int rc = part_test(&p->sq, &f, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) {
            p->send_err = rc;
            p->sq = MPI_REQUEST_NULL;
        }
    }
    if (p->rq != MPI_REQUEST_NULL || p->sq != MPI_REQUEST_NULL)
        return 0;
    r->status = p->rst;
    if (r->status.MPI_ERROR == MPI_SUCCESS)
        r->status.MPI_ERROR = p->send_err;
    msh_req_complete_here(r);
    return 1;
}

static void free_pair(pair *p)
{
    free(p->tmp);
    free(p);
}

/* Called by the engine as it retires the request, whichever call does. */
static void pair_release(msh_request *r)
{
    free_pair(pair_of(r));
    r->ext = NULL;
}

static int pair_retire(msh_request *r, MPI_Request *handle, MPI_Status *status)
{
    return msh_req_retire(r, handle, status, MSH_RAISE_REQUEST);
}

static int pair_wait(msh_request *r, MPI_Request *handle, MPI_Status *status)
{
    msh_spin sp = MSH_SPIN_ON(r->vci);
    while (!pair_progress(r, 1))
        msh_spin_idle(&sp);
    msh_spin_end(&sp);
    return pair_retire(r, handle, status);
}

static int pair_test(msh_request *r, MPI_Request *handle, int *flag, MPI_Status *status)
{
    *flag = pair_progress(r, 1);
    return *flag ? pair_retire(r, handle, status) : MPI_SUCCESS;
}

static int pair_get_status(msh_request *r, int *flag, MPI_Status *status)
{
    *flag = pair_progress(r, 1);
    if (*flag)
        msh_status_out(status, &r->status);
    return MPI_SUCCESS;
}

static int pair_start(msh_request *r)
{
    (void)r;
    return msh_bad_request(); /* not persistent */
}

/* MPI_Request_free of an active exchange: the host finishes both parts on
 * its own. The replace form's copy is freed if its send is already done,
 * else left (a few bytes; freeing it under a send in flight would be
 * worse). */
static int pair_free(msh_request *r, MPI_Request *handle)
{
    pair *p = pair_of(r);
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING) {
        if (p->rq != MPI_REQUEST_NULL)
            part_free(&p->rq);
        if (p->sq != MPI_REQUEST_NULL) {
            int f = 0;
            part_test(&p->sq, &f, MPI_STATUS_IGNORE);
            if (!f) {
                part_free(&p->sq);
                p->tmp = NULL;
            }
        }
        atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
    }
    MPI_Status ignored;
    pair_retire(r, handle, &ignored);
    *handle = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* The receive part can be cancelled; the pair then completes with the
 * receive's status saying so. */
static int pair_cancel(msh_request *r)
{
    pair *p = pair_of(r);
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING && p->rq != MPI_REQUEST_NULL)
        return part_cancel(&p->rq);
    return MPI_SUCCESS;
}

static MPI_Comm pair_comm(msh_request *r)
{
    return r->ext ? pair_of(r)->comm : MPI_COMM_WORLD;
}

const msh_req_ops msh_pair_req_ops = {
    .progress = pair_progress,
    .wait = pair_wait,
    .test = pair_test,
    .get_status = pair_get_status,
    .start = pair_start,
    .free = pair_free,
    .cancel = pair_cancel,
    .empty_status = msh_empty_status,
    .error_comm = pair_comm,
    .release = pair_release,
};

/* The receive, then the send, through the engine: the communicator may
 * be a lane's, which the host's calls would miss. */
static int post_engine(pair *p, const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                       void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm)
{
    int rc = msh_post_recv(0, recvbuf, recvcount, recvtype, source, recvtag, comm, &p->rq, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = msh_post_send(MSH_TP_SEND, 0, sendbuf, sendcount, sendtype, dest, sendtag, comm, &p->sq, NULL);
    if (rc != MPI_SUCCESS) {
        part_cancel(&p->rq);
        msh_spin sp = MSH_SPIN_ON(0);
        for (int f = 0; !f && part_test(&p->rq, &f, MPI_STATUS_IGNORE) == MPI_SUCCESS;)
            msh_spin_idle(&sp);
        msh_spin_end(&sp);
    }
    return rc;
}

static inline int fits_int(MPI_Count c)
{
    return c >= 0 && c <= INT_MAX;
}

/* r, from msh_post_begin on v (still locked), takes p's two parts. */
static int own_pair(msh_vci *v, msh_request *r, pair *p, MPI_Request *req)
{
    r->kind = MSH_KIND_PAIR;
    r->ext = p;
    r->host = MPI_REQUEST_NULL;
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
    msh_vci_unlock(v);
    *req = msh_req_handle(r);
    return MPI_SUCCESS;
}

/* The receive, then the send, each on its route, owned by one request. */
static int post_pair(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                     void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                     MPI_Comm comm, void *tmp, MPI_Request *req)
{
    msh_route rr;
    int rc = msh_recv_route(comm, source, recvtag, &rr, NULL);
    pair *p = rc == MPI_SUCCESS ? calloc(1, sizeof *p) : NULL;
    if (!p) {
        free(tmp);
        return rc != MPI_SUCCESS ? rc : msh_comm_error(comm, MPI_ERR_NO_MEM);
    }
    p->tmp = tmp;
    p->comm = comm;
    p->sq = p->rq = MPI_REQUEST_NULL;
    if (!msh_tp_direct && fits_int(sendcount) && fits_int(recvcount)) {
        rc = post_engine(p, sendbuf, (int)sendcount, sendtype, dest, sendtag, recvbuf, (int)recvcount, recvtype,
                         source, recvtag, comm);
        msh_request *r = rc == MPI_SUCCESS ? msh_post_begin(rr.vci) : NULL;
        if (!r) {
            if (rc == MPI_SUCCESS) { /* no memory: the parts finish on their own */
                part_free(&p->rq);
                part_free(&p->sq);
                p->tmp = NULL;
                rc = msh_comm_error(comm, MPI_ERR_NO_MEM);
            }
            free_pair(p);
            return rc;
        }
        return own_pair(rr.vci, r, p, req);
    }
    MPI_Comm sc = msh_send_route_comm(comm, dest, sendtag);
    if (MSH_UNLIKELY(msh_queue_on))
        msh_queue_drain_all(); /* the send must not overtake queued ones */
    msh_request *r = msh_post_begin(rr.vci);
    if (!r) {
        free_pair(p);
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    }
    rc = PMPI_Irecv_c(recvbuf, recvcount, recvtype, source, recvtag, rr.comm, &p->rq);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Isend_c(sendbuf, sendcount, sendtype, dest, sendtag, sc, &p->sq);
        if (rc != MPI_SUCCESS) {
            PMPI_Cancel(&p->rq);
            PMPI_Wait(&p->rq, MPI_STATUS_IGNORE); /* a cancelled receive completes at once */
        }
    }
    if (rc != MPI_SUCCESS) {
        msh_vci_req_put(rr.vci, r);
        msh_vci_unlock(rr.vci);
        free_pair(p);
        return rc;
    }
    return own_pair(rr.vci, r, p, req);
}

static int isendrecv_replace(void *buf, MPI_Count count, MPI_Datatype dt, int dest, int sendtag, int source,
                             int recvtag, MPI_Comm comm, MPI_Request *req)
{
    void *tmp;
    MPI_Count pos;
    int rc = msh_pack_copy_c(buf, count, dt, comm, &tmp, &pos);
    if (rc != MPI_SUCCESS)
        return rc;
    return post_pair(tmp, pos, MPI_PACKED, dest, sendtag, buf, count, dt, source, recvtag, comm, tmp, req);
}

MSH_EXPORT int MPI_Isendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                             void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                             MPI_Comm comm, MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Isendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                              recvtag, comm, req);
    return post_pair(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                     comm, NULL, req);
}

MSH_EXPORT int MPI_Isendrecv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                               int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source,
                               int recvtag, MPI_Comm comm, MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Isendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                                recvtag, comm, req);
    return post_pair(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                     comm, NULL, req);
}

MSH_EXPORT int MPI_Isendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                                     int recvtag, MPI_Comm comm, MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Isendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, req);
    return isendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, req);
}

MSH_EXPORT int MPI_Isendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype dt, int dest, int sendtag,
                                       int source, int recvtag, MPI_Comm comm, MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Isendrecv_replace_c(buf, count, dt, dest, sendtag, source, recvtag, comm, req);
    return isendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, req);
}

#endif
