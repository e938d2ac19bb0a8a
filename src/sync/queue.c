/* Queued posting (see queue.h). */
#include "sync/queue.h"

#include <pthread.h>
#include <string.h>

#include "sync/cache.h"
#include "sync/sync.h"
#include "sync/notes.h"

int msh_queue_on;
int msh_queue_combine;

/* ------------------------------------------------------------ datatypes */

/* Queued calls are posted later: a derived datatype could be freed by then
 * (MPI_Type_free of a type in use is legal), a predefined one cannot. */
int msh_queue_dt_ok(MPI_Datatype dt)
{
    static const MPI_Datatype named[] = {
        MPI_BYTE, MPI_CHAR, MPI_SIGNED_CHAR, MPI_UNSIGNED_CHAR, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT,
        MPI_UNSIGNED, MPI_LONG, MPI_UNSIGNED_LONG, MPI_LONG_LONG, MPI_UNSIGNED_LONG_LONG, MPI_FLOAT, MPI_DOUBLE,
        MPI_LONG_DOUBLE, MPI_INT8_T, MPI_INT16_T, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T, MPI_UINT16_T,
        MPI_UINT32_T, MPI_UINT64_T, MPI_C_BOOL, MPI_C_DOUBLE_COMPLEX, MPI_AINT, MPI_OFFSET, MPI_PACKED,
        MPI_INTEGER, MPI_REAL, MPI_DOUBLE_PRECISION, MPI_COMPLEX, MPI_DOUBLE_COMPLEX, MPI_LOGICAL, MPI_CHARACTER,
    };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (dt == named[i])
            return 1;
    return 0;
}

/* ------------------------------------------------------------ request objects */

/* Posters take request objects without any VCI lock: from a per-thread
 * cache refilled from the global pool. Retired requests go to the VCI
 * caches as always, which give their surplus back to the pool. */
#define TCACHE_BATCH 32

static MSH_TLS msh_request *tcache;
static MSH_TLS int ntcache;
static pthread_key_t tcache_key;
static int have_key;

static void tcache_release(void *arg)
{
    (void)arg;
    if (tcache)
        msh_req_pool_give(tcache, ntcache);
    tcache = NULL;
    ntcache = 0;
}

static msh_request *tcache_get(void)
{
    if (MSH_UNLIKELY(!tcache)) {
        int got = 0;
        tcache = msh_req_pool_take(TCACHE_BATCH, &got);
        ntcache = got;
        if (!tcache)
            return NULL;
        if (have_key)
            pthread_setspecific(tcache_key, &tcache); /* any non-NULL value: run the destructor */
    }
    msh_request *r = tcache;
    tcache = r->next;
    ntcache--;
    msh_req_unpoison(r);
    return r;
}

/* ------------------------------------------------------------ posting */

int msh_queue_post(msh_vci *v, int recv, int ssend, const void *buf, int count, MPI_Datatype dt, int peer, int tag,
                   MPI_Comm hc, MPI_Comm user, MPI_Request *handle)
{
    msh_request *r = tcache_get();
    if (MSH_UNLIKELY(!r))
        return MPI_ERR_NO_MEM;
    r->vci = (int16_t)v->idx;
    r->kind = recv ? MSH_KIND_RECV : MSH_KIND_SEND;
    r->freed = 0;
    r->persistent = 0;
    r->procnull = 0;
    r->host = MPI_REQUEST_NULL;
    r->q.buf = buf;
    r->q.comm = hc;
    r->q.dt = dt;
    r->q.count = count;
    r->q.peer = peer;
    r->q.tag = tag;
    r->q.recv = (uint8_t)recv;
    r->q.ssend = (uint8_t)ssend;
    atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_relaxed);
    msh_watchdog_note(r, peer, tag, user);
    msh_watchdog_posted(r);
    *handle = msh_req_handle(r);
    /* Publish: the drainer reads the fields above after its acquire. */
    msh_request *h = atomic_load_explicit(&v->qhead, memory_order_relaxed);
    do {
        r->next = h;
    } while (!atomic_compare_exchange_weak_explicit(&v->qhead, &h, r, memory_order_seq_cst, memory_order_relaxed));
    if (msh_queue_combine)
        msh_vci_kick(v);
    else
        msh_progress_wake();
    return MPI_SUCCESS;
}

/* Under v's lock: r could not be posted (rc): complete it with that error,
 * or recycle it if the user freed it meanwhile. */
static void post_failed(msh_vci *v, msh_request *r, int rc)
{
    memset(&r->status, 0, sizeof r->status);
    r->status.MPI_ERROR = rc;
    if (r->freed) {
        msh_vci_req_put(v, r);
        return;
    }
    msh_progress_complete(r);
}

void msh_queue_drain(msh_vci *v)
{
    atomic_store_explicit(&v->qposting, 1, memory_order_relaxed); /* published by the exchange */
    msh_request *h = atomic_exchange_explicit(&v->qhead, NULL, memory_order_acq_rel);
    msh_request *fifo = NULL;
    while (h) { /* newest first: reverse into push order */
        msh_request *n = h->next;
        h->next = fifo;
        fifo = h;
        h = n;
    }
    while (fifo) {
        msh_request *r = fifo;
        fifo = r->next;
        r->next = NULL;
        msh_tp_msg m = {
            .buf = r->q.buf, .count = r->q.count, .dt = r->q.dt, .peer = r->q.peer, .tag = r->q.tag,
            .comm = r->q.comm, .mode = r->q.recv ? MSH_TP_RECV : r->q.ssend ? MSH_TP_SSEND : MSH_TP_SEND,
        };
        msh_tp_posted p;
        int rc = msh_tp_post(v->tp, &m, r, &r->host, &p);
        int done = rc == MPI_SUCCESS && p.how == MSH_TP_DONE;
        if (rc == MPI_SUCCESS && p.how == MSH_TP_HELD) {
            /* Posted but cannot be tracked: let the transport finish it. */
            msh_tp_release(v->tp, &r->host);
            rc = MPI_ERR_NO_MEM;
        } else if (rc == MPI_SUCCESS && !done) {
            msh_progress_wake();
        }
        if (MSH_UNLIKELY(rc != MPI_SUCCESS)) {
            if (msh_tp_take_unraised(v->tp) && !r->freed)
                r->q.own_error = 1; /* raised on q.comm when the request is retired */
            post_failed(v, r, rc);
            continue;
        }
        if (r->q.recv) {
            v->st.recvs++;
        } else {
            v->st.sends++;
            if (msh_cfg.stats)
                v->st.bytes += msh_payload_bytes(r->q.count, r->q.dt);
        }
        if (done) { /* finished inside its post: nothing to track */
            r->status = p.d.status;
            v->st.completions++;
            if (r->freed) {
                msh_vci_req_put(v, r);
            } else {
                msh_req_keep_error(r, &p.d);
                msh_progress_complete(r);
            }
        }
    }
    atomic_store_explicit(&v->qposting, 0, memory_order_release);
}

void msh_queue_kick(msh_vci *v)
{
    do {
        int got = msh_vci_try(v);
        if (got == 0)
            return; /* its holder looks after unlocking */
        if (got == MSH_VCI_OWNER_IN) {
            /* This thread held the lock for a moment, and the owner may
             * have left then, its look at the queue failing to take the
             * lock, as did the try of any poster pushing then: look again
             * unless the owner, still inside after a barrier, will. */
            if (msh_vci_owner_stays(v))
                return;
            continue;
        }
        msh_queue_drain(v);
        msh_vci_release(v);
    } while (msh_vci_queue_seen(v));
}

void msh_queue_drain_all(void)
{
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        if (!msh_queue_busy(v) || msh_vci_held_by_me(v))
            continue;
        msh_vci_lock(v);
        msh_queue_drain(v);
        msh_vci_unlock(v);
    }
}

void msh_queue_init(void)
{
    int policy = msh_cfg.progress == MSH_PROGRESS_COMBINE || msh_cfg.progress == MSH_PROGRESS_OFFLOAD;
    msh_queue_on = policy && !msh_pool.serialized;
    msh_queue_combine = msh_queue_on && msh_cfg.progress == MSH_PROGRESS_COMBINE;
    if (msh_queue_on && !have_key)
        have_key = pthread_key_create(&tcache_key, tcache_release) == 0;
}

void msh_queue_fini(void)
{
    msh_queue_drain_all();
    msh_queue_combine = 0;
    msh_queue_on = 0;
    tcache_release(NULL);
}
