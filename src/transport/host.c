/* The host transport: a VCI's messages are the host's own nonblocking calls
 * on the VCI's duplicate communicator (the route's), and its tracked
 * operations a set of host requests polled with Testsome. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "transport/transport.h"

/* Sets larger than this are polled through their oldest request, with a
 * full Testsome every FULL_POLL_EVERY polls. */
#define HEAD_POLL_MIN 8
#define FULL_POLL_EVERY 16

typedef struct host_tp {
    msh_tp base;
    int cap;
    unsigned head_polls; /* polls that looked at the oldest request only */
    /* Tracked requests, parallel arrays (Testsome works on hreqs). */
    MPI_Request *hreqs;
    void **ctx;
    int *out_idx;        /* Testsome scratch, cap entries */
    MPI_Status *out_st;
    msh_tp_done *done;   /* poll's results, cap entries */
} host_tp;

static inline host_tp *host_of(msh_tp *tp)
{
    return (host_tp *)tp;
}

int msh_tp_host_post_c(const msh_tp_msg *m, int persistent, msh_tp_req *treq)
{
#if MPI_VERSION >= 4
    void *buf = (void *)(uintptr_t)m->buf;
    if (!persistent) {
        switch (m->mode) {
        case MSH_TP_SSEND: return PMPI_Issend_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_BSEND: return PMPI_Ibsend_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_RSEND: return PMPI_Irsend_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_RECV:  return PMPI_Irecv_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
        default:           return PMPI_Isend_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
        }
    }
    switch (m->mode) {
    case MSH_TP_SSEND: return PMPI_Ssend_init_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_BSEND: return PMPI_Bsend_init_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_RSEND: return PMPI_Rsend_init_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_RECV:  return PMPI_Recv_init_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
    default:           return PMPI_Send_init_c(buf, m->count, m->dt, m->peer, m->tag, m->comm, treq);
    }
#else
    (void)m, (void)persistent, (void)treq;
    return MPI_ERR_COUNT;
#endif
}

int msh_tp_host_post(const msh_tp_msg *m, int persistent, msh_tp_req *treq)
{
    if (MSH_UNLIKELY(m->count > INT_MAX))
        return msh_tp_host_post_c(m, persistent, treq);
    void *buf = (void *)(uintptr_t)m->buf;
    int count = (int)m->count;
    if (!persistent) {
        switch (m->mode) {
        case MSH_TP_SSEND: return PMPI_Issend(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_BSEND: return PMPI_Ibsend(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_RSEND: return PMPI_Irsend(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
        case MSH_TP_RECV:  return PMPI_Irecv(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
        default:           return PMPI_Isend(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
        }
    }
    switch (m->mode) {
    case MSH_TP_SSEND: return PMPI_Ssend_init(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_BSEND: return PMPI_Bsend_init(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_RSEND: return PMPI_Rsend_init(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
    case MSH_TP_RECV:  return PMPI_Recv_init(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
    default:           return PMPI_Send_init(buf, count, m->dt, m->peer, m->tag, m->comm, treq);
    }
}

static int host_track(msh_tp *tp, void *ctx, msh_tp_req treq);

/* A host request is never known done without a test of its own: every
 * posted one is tracked (p->how TRACKED, or HELD without memory). */
static int tracked(msh_tp *tp, int rc, void *ctx, msh_tp_req treq, msh_tp_posted *p)
{
    if (rc == MPI_SUCCESS)
        p->how = host_track(tp, ctx, treq) == MPI_SUCCESS ? MSH_TP_TRACKED : MSH_TP_HELD;
    return rc;
}

static int host_post(msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    int rc = msh_tp_host_post(m, 0, treq);
    return tracked(tp, rc, ctx, *treq, p);
}

static int host_init(msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq)
{
    (void)tp;
    return msh_tp_host_post(m, 1, treq);
}

static int host_start(msh_tp *tp, msh_tp_req *treq)
{
    (void)tp;
    return PMPI_Start(treq);
}

static int grow(host_tp *h)
{
    int cap = h->cap ? h->cap * 2 : 256;
    MPI_Request *hr = realloc(h->hreqs, sizeof *hr * (size_t)cap);
    if (hr)
        h->hreqs = hr;
    void **cx = realloc(h->ctx, sizeof *cx * (size_t)cap);
    if (cx)
        h->ctx = cx;
    int *oi = realloc(h->out_idx, sizeof *oi * (size_t)cap);
    if (oi)
        h->out_idx = oi;
    MPI_Status *os = realloc(h->out_st, sizeof *os * (size_t)cap);
    if (os)
        h->out_st = os;
    msh_tp_done *d = realloc(h->done, sizeof *d * (size_t)cap);
    if (d)
        h->done = d;
    if (!hr || !cx || !oi || !os || !d)
        return MPI_ERR_NO_MEM;
    h->cap = cap;
    return MPI_SUCCESS;
}

static int host_track(msh_tp *tp, void *ctx, msh_tp_req treq)
{
    host_tp *h = host_of(tp);
    int n = tp->ntracked;
    if (MSH_UNLIKELY(n == h->cap) && grow(h) != MPI_SUCCESS)
        return MPI_ERR_NO_MEM;
    h->hreqs[n] = treq;
    h->ctx[n] = ctx;
    msh_tp_set_tracked(tp, n + 1);
    return MPI_SUCCESS;
}

/* Whether a full pass is worth making. Testsome costs O(tracked) per call,
 * a pass of a host Waitall O(1). Requests of one VCI complete roughly in
 * the order they were posted, so while the oldest is not done a cheap look
 * at it (which also drives the host's progress) stands in for a full
 * pass; a full pass every FULL_POLL_EVERY polls catches the rest, and
 * every poll for a test makes one (msh_tp_exhaustive). */
static int head_says_poll(host_tp *h, int n)
{
    if (n <= HEAD_POLL_MIN || msh_tp_exhaustive || ++h->head_polls % FULL_POLL_EVERY == 0)
        return 1;
    int flag = 0;
    PMPI_Request_get_status(h->hreqs[0], &flag, MPI_STATUS_IGNORE);
    return flag;
}

/* Testsome over the n tracked requests; returns the count completed
 * (out_idx, out_st), *rc the host's result. */
static int testsome(host_tp *h, int n, int *rc)
{
    int outcount = 0;
    *rc = PMPI_Testsome(n, h->hreqs, &outcount, h->out_idx, h->out_st);
    if (MSH_UNLIKELY(outcount == MPI_UNDEFINED)) {
        /* The host sees every one as inactive: a persistent operation it
         * completed inside MPI_Start (MPICH 4.0 does so for MPI_PROC_NULL
         * peers). They are complete, with the empty status the host's own
         * Wait would give. */
        MPI_Request nul = MPI_REQUEST_NULL;
        MPI_Status empty;
        PMPI_Wait(&nul, &empty);
        for (int i = 0; i < n; i++) {
            h->out_idx[i] = i;
            h->out_st[i] = empty;
        }
        outcount = n;
    }
    return outcount;
}

#if !defined(MPICH)
/* The one tracked request by the host's Test, its result as testsome's:
 * the error in the status, *rc MPI_ERR_IN_STATUS. */
static int test_one(host_tp *h, int *rc)
{
    int flag = 0;
    *rc = PMPI_Test(&h->hreqs[0], &flag, &h->out_st[0]);
    if (!flag)
        return 0;
    h->out_st[0].MPI_ERROR = *rc;
    *rc = *rc == MPI_SUCCESS ? MPI_SUCCESS : MPI_ERR_IN_STATUS;
    h->out_idx[0] = 0;
    return 1;
}
#endif

static int host_poll(msh_tp *tp, const msh_tp_done **done)
{
    host_tp *h = host_of(tp);
    int n = tp->ntracked, rc = MPI_SUCCESS;
    if (n == 0 || !head_says_poll(h, n))
        return 0;
#if !defined(MPICH)
    /* Open MPI's Testsome looks at the requests before its progress call,
     * its Test after it as well: a test's poll looks once more, at what its
     * own progress completed, as the host's test would have; of one request
     * by the host's Test, one progress call where two Testsomes made two.
     * (MPICH's Testsome progresses first.) */
    int outcount = n == 1 && msh_tp_exhaustive ? test_one(h, &rc) : testsome(h, n, &rc);
    if (outcount == 0 && rc == MPI_SUCCESS && msh_tp_exhaustive && n > 1)
        outcount = testsome(h, n, &rc);
#else
    int outcount = testsome(h, n, &rc);
#endif
    if (outcount <= 0)
        return 0;
    for (int k = 0; k < outcount; k++) {
        int i = h->out_idx[k];
        msh_tp_done *d = &h->done[k];
        d->ctx = h->ctx[i];
        d->treq = h->hreqs[i]; /* MPI_REQUEST_NULL, or the inactive persistent request */
        d->status = h->out_st[k];
        if (rc != MPI_ERR_IN_STATUS)
            d->status.MPI_ERROR = MPI_SUCCESS;
        d->own_error = 0; /* the host's Testsome raised it */
        h->ctx[i] = NULL;
    }
    /* Compact, keeping the order of the rest. */
    int j = 0;
    for (int i = 0; i < n; i++) {
        if (h->ctx[i]) {
            h->ctx[j] = h->ctx[i];
            h->hreqs[j] = h->hreqs[i];
            j++;
        }
    }
    msh_tp_set_tracked(tp, j);
    *done = h->done;
    return outcount;
}

static void *host_tracked(msh_tp *tp, int k)
{
    return k >= 0 && k < tp->ntracked ? host_of(tp)->ctx[k] : NULL;
}

static int host_cancel(msh_tp *tp, msh_tp_req *treq)
{
    (void)tp;
    return PMPI_Cancel(treq);
}

static int host_probe(msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                      MPI_Status *status)
{
    (void)tp;
    return message ? PMPI_Improbe(source, tag, comm, flag, message, status)
                   : PMPI_Iprobe(source, tag, comm, flag, status);
}

static int host_post_matched(msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                             void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    int rc;
#if MPI_VERSION >= 4
    if (count > INT_MAX)
        rc = PMPI_Imrecv_c(buf, count, dt, message, treq);
    else
#endif
        rc = PMPI_Imrecv(buf, (int)count, dt, message, treq);
    return tracked(tp, rc, ctx, *treq, p);
}

static int host_wait(msh_tp *tp, msh_tp_req *treq, MPI_Status *st)
{
    (void)tp;
    return PMPI_Wait(treq, st);
}

static int host_test(msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *st)
{
    (void)tp;
    return PMPI_Test(treq, flag, st);
}

static int host_release(msh_tp *tp, msh_tp_req *treq)
{
    (void)tp;
    return *treq == MPI_REQUEST_NULL ? MPI_SUCCESS : PMPI_Request_free(treq);
}

/* The arrays stay: a thread still returning from its last call after
 * finalize may touch them (vci.c says why the VCIs outlive finalize). */
static void host_close(msh_tp *tp)
{
    (void)tp;
}

static const msh_tp_ops host_ops = {
    .name = "host",
    .post = host_post,
    .init = host_init,
    .start = host_start,
    .track = host_track,
    .poll = host_poll,
    .tracked = host_tracked,
    .cancel = host_cancel,
    .probe = host_probe,
    .post_matched = host_post_matched,
    .wait = host_wait,
    .test = host_test,
    .release = host_release,
    .close = host_close,
};

/* Listed in transport.c. */
msh_tp *msh_tp_host_open(int idx, const char **why);

msh_tp *msh_tp_host_open(int idx, const char **why)
{
    host_tp *h = aligned_alloc(MSH_CACHELINE, (sizeof *h + MSH_CACHELINE - 1) / MSH_CACHELINE * MSH_CACHELINE);
    if (!h) {
        *why = "out of memory";
        return NULL;
    }
    memset(h, 0, sizeof *h);
    h->base.ops = &host_ops;
    h->base.idx = idx;
    return &h->base;
}
