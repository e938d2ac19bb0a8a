/* Partitioned channels: init, Start, Pready/Parrived, progress and teardown
 * (see part.h; communicator ids in cid.c, the header dispatcher in
 * dispatch.c, the channel structure in channel.h). */
#include "partitioned/part.h"
#include "partitioned/channel.h"
#include "partitioned/cid.h"
#include "partitioned/plan.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "sync/assist.h"
#include "sync/wait.h"
#include "transport/lane.h"
#include "mpishim.h"

_Atomic int msh_part_nlive;
_Atomic int msh_part_nsetup;

/* ------------------------------------------------------------ setup watch list (part.h) */

/* Lock order: a channel's lock, then watch_lock; the sweep holds watch_lock
 * and only try-locks channels. */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static msh_request **watch;
static int nwatch, capwatch;
static int nbg; /* watched channels freed by the user (bg); under watch_lock */

static int layer; /* 1: the shim's layer serves partitioned calls */
MPI_Comm msh_part_hdrc = MPI_COMM_NULL, msh_part_datac = MPI_COMM_NULL;

int msh_part_layer_on(void) { return layer; }

void msh_part_init(int runtime)
{
    layer = !msh_cfg.disable;
#if MPI_VERSION >= 4
    /* auto: a program whose ranks did not all ask for MPI_THREAD_MULTIPLE
     * gets the host's own layer, as without the shim: with the runtime off
     * no helper thread may move the shim's receives while the program sits
     * in a blocking host call, where the host's layer moves its own. The
     * ranks agreed on `runtime`, so they all pick the same layer. */
    if (msh_cfg.part == MSH_PART_NATIVE || (msh_cfg.part == MSH_PART_AUTO && !runtime))
        layer = 0;
#else
    (void)runtime;
    if (layer && msh_cfg.part == MSH_PART_NATIVE && msh_rt.world_rank == 0)
        msh_log("MPISHIM_PART=native: this host has no partitioned calls (MPI %d.%d); using the shim's layer",
                MPI_VERSION, MPI_SUBVERSION);
#endif
    if (!layer)
        return;
    if (PMPI_Comm_dup(MPI_COMM_WORLD, &msh_part_hdrc) != MPI_SUCCESS ||
        PMPI_Comm_dup(MPI_COMM_WORLD, &msh_part_datac) != MPI_SUCCESS) {
        msh_log("partitioned layer: cannot duplicate MPI_COMM_WORLD; partitioned calls will fail");
        return;
    }
    /* Internal errors come back as codes, reported on the user's comm. */
    PMPI_Comm_set_errhandler(msh_part_hdrc, MPI_ERRORS_RETURN);
    PMPI_Comm_set_errhandler(msh_part_datac, MPI_ERRORS_RETURN);
    msh_part_cid_init();
}

/* Finalize: give channels freed while active a bounded time to finish
 * (their peers are finalizing too), then report what is left. */
static void bg_drain(void)
{
    double t0 = PMPI_Wtime();
    for (;;) {
        pthread_mutex_lock(&watch_lock);
        int left = nbg;
        pthread_mutex_unlock(&watch_lock);
        if (left == 0)
            return;
        if (PMPI_Wtime() - t0 > 10.0) {
            msh_log("finalize: %d partitioned request(s) freed while active never completed", left);
            return;
        }
        msh_part_sweep();
        sched_yield();
    }
}

void msh_part_fini(void)
{
    if (!layer)
        return;
    bg_drain();
    msh_part_disp_stop();
    if (msh_part_datac != MPI_COMM_NULL)
        PMPI_Comm_free(&msh_part_datac);
    if (msh_part_hdrc != MPI_COMM_NULL)
        PMPI_Comm_free(&msh_part_hdrc);
    msh_part_cid_fini();
    pthread_mutex_lock(&watch_lock);
    free(watch);
    watch = NULL;
    nwatch = capwatch = 0;
    pthread_mutex_unlock(&watch_lock);
    layer = 0;
}

static _Atomic unsigned next_tag;

static void part_release(msh_request *r);

/* A started receive without its header (under p->lock), or an active
 * channel the user freed (bg = 1: released by the sweep once done). */
static void watch_add(msh_request *r, msh_part *p, int bg)
{
    pthread_mutex_lock(&watch_lock);
    if (bg && !p->bg) {
        p->bg = 1;
        nbg++;
    }
    if (!p->watched) {
        if (nwatch == capwatch) {
            int ncap = capwatch ? 2 * capwatch : 16;
            msh_request **n = realloc(watch, sizeof *n * (size_t)ncap);
            if (!n) {
                /* Unwatched, the channel still sets up when it is polled. */
                pthread_mutex_unlock(&watch_lock);
                return;
            }
            watch = n;
            capwatch = ncap;
        }
        watch[nwatch++] = r;
        p->watched = 1;
        /* seq_cst: a thread inside a blocking host call either sees it or is
         * seen by the kick (sync/assist.h) */
        atomic_fetch_add_explicit(&msh_part_nsetup, 1, memory_order_seq_cst);
    }
    pthread_mutex_unlock(&watch_lock);
    msh_assist_kick();
}

/* Under watch_lock. */
static void watch_drop_locked(int i)
{
    ((msh_part *)watch[i]->ext)->watched = 0;
    watch[i] = watch[--nwatch];
    atomic_fetch_sub_explicit(&msh_part_nsetup, 1, memory_order_relaxed);
}

static void watch_remove(msh_request *r)
{
    pthread_mutex_lock(&watch_lock);
    for (int i = 0; i < nwatch; i++)
        if (watch[i] == r) {
            watch_drop_locked(i);
            break;
        }
    pthread_mutex_unlock(&watch_lock);
}

int msh_part_sweep(void)
{
    if (pthread_mutex_trylock(&watch_lock) != 0)
        return 0; /* another thread is sweeping */
    msh_part_disp_poll();
    int n = 0;
    for (int i = 0; i < nwatch;) {
        msh_request *r = watch[i];
        msh_part *p = r->ext;
        msh_part_progress(r, 0);
        int pending = atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING;
        if (p->bg && !pending) {
            /* Freed by the user and now done: nobody else holds it. */
            watch_drop_locked(i);
            nbg--;
            part_release(r);
            n++;
        } else if (!p->bg && (atomic_load_explicit(&p->setup, memory_order_acquire) || !pending)) {
            /* Set up, or finished with an error: no longer ours to watch. */
            watch_drop_locked(i);
            n++;
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&watch_lock);
    return n;
}

/* Sender: message m carries sender partitions [m*group, m*group+nparts). */
static int create_send(msh_part *p, int m)
{
    part_msg *g = &p->msg[m];
    int first = m * p->group;
    g->nparts = msh_pplan_msg_nparts(p->partitions, p->group, m);
    MPI_Count n = p->count * g->nparts;
    if (n > INT32_MAX)
        return MPI_ERR_COUNT;
    return PMPI_Send_init(p->buf + (MPI_Aint)first * p->count * p->extent, (int)n, p->dtype, p->wpeer,
                          p->tag_base + m, msh_part_datac, &g->host);
}

/* Receiver: message m by byte ranges of the sender's plan. Data beyond the
 * buffer is received short, so the host reports MPI_ERR_TRUNCATE for it. */
static int create_recv(msh_part *p, int m)
{
    MPI_Count cap = (MPI_Count)p->partitions * p->count * p->tsize;
    msh_prange mr = msh_pplan_msg_range(p->total, p->msg_bytes, p->nmsg, m);
    MPI_Count off = mr.lo, len = mr.hi - mr.lo;
    MPI_Count fit = off >= cap ? 0 : (cap - off < len ? cap - off : len);
    if (p->contig || p->tsize == 0 || p->stage) {
        char *base = p->stage ? p->stage : p->buf;
        if (fit > INT32_MAX)
            return MPI_ERR_COUNT;
        return PMPI_Recv_init(base + (fit ? off : 0), (int)fit, MPI_BYTE, p->wpeer, p->tag_base + m, msh_part_datac,
                              &p->msg[m].host);
    }
    MPI_Count n = fit / p->tsize; /* whole elements: create_recvs staged otherwise */
    if (n > INT32_MAX)
        return MPI_ERR_COUNT;
    return PMPI_Recv_init(p->buf + (MPI_Aint)(off / p->tsize) * p->extent, (int)n, p->dtype, p->wpeer,
                          p->tag_base + m, msh_part_datac, &p->msg[m].host);
}

static int create_msgs(msh_part *p)
{
    for (int m = 0; m < p->nmsg; m++)
        p->msg[m].host = MPI_REQUEST_NULL; /* what part_destroy skips if a creation fails */
    for (int m = 0; m < p->nmsg; m++) {
        int rc = p->send ? create_send(p, m) : create_recv(p, m);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* Open MPI 4.1 frees a persistent request whose completion call reports an
 * error (the handle becomes MPI_REQUEST_NULL, and MPI_Start then fails with
 * MPI_ERR_REQUEST): make such messages again before the next round. */
static int remake_freed_msgs(msh_part *p)
{
    int rc = MPI_SUCCESS;
    for (int m = 0; m < p->nmsg && rc == MPI_SUCCESS; m++)
        if (p->msg[m].host == MPI_REQUEST_NULL)
            rc = p->send ? create_send(p, m) : create_recv(p, m);
    return rc;
}

/* p's messages (p->nmsg), zeroed: one (the usual case for a message of a
 * few partitions) in p itself, no allocation. */
static part_msg *msgs_new(msh_part *p)
{
    if (p->nmsg <= 1) {
        memset(&p->msg1, 0, sizeof p->msg1);
        return &p->msg1;
    }
    return calloc((size_t)p->nmsg, sizeof *p->msg);
}

/* Receiver, under p->lock: the header has arrived; plan the receives. */
static int create_recvs(msh_part *p)
{
    const long long *h = p->rhdr;
    if (h[0] != HDR_MAGIC || h[5] < 0 || h[6] < 0 || h[4] <= 0)
        return MPI_ERR_INTERN;
    p->group = (int)h[4];
    p->nmsg = (int)h[5];
    p->total = h[6];
    p->tag_base = (int)h[7];
    p->msg_bytes = msh_pplan_msg_bytes(p->total, h[3] > 0 && h[3] <= INT32_MAX ? (int)h[3] : 0, p->group, p->nmsg);
    if (!(p->msg = msgs_new(p)))
        return MPI_ERR_NO_MEM;
    MPI_Count cap = (MPI_Count)p->partitions * p->count * p->tsize;
    if (!p->contig && p->tsize > 0 && p->nmsg > 0 && cap > 0 &&
        (p->msg_bytes % p->tsize || p->total % p->tsize)) {
        p->stage = malloc((size_t)cap);
        p->unpacked = calloc((size_t)p->partitions, 1);
        if (!p->stage || !p->unpacked)
            return MPI_ERR_NO_MEM;
    }
    return create_msgs(p);
}

/* Staged receiver, under p->lock and the host lock: receive partition i's
 * bytes [lo, hi) of the message stream, and the messages covering them. */
static void part_range(const msh_part *p, int i, MPI_Count *lo, MPI_Count *hi, int *m0, int *m1)
{
    msh_prange r = msh_pplan_recv_part(p->total, p->msg_bytes, p->nmsg, p->count * p->tsize, i);
    *lo = r.lo;
    *hi = r.hi;
    *m0 = r.first;
    *m1 = r.last;
}

/* Message m is done: unpack every receive partition it completes. */
static void unpack_after(msh_part *p, int m)
{
    msh_prange span = msh_pplan_msg_rparts(p->total, p->msg_bytes, p->nmsg, p->count * p->tsize, p->partitions, m);
    for (int i = span.first; i <= span.last; i++) {
        MPI_Count lo, hi;
        int m0, m1, all = 1;
        part_range(p, i, &lo, &hi, &m0, &m1);
        if (lo >= hi || atomic_load_explicit(&p->unpacked[i], memory_order_relaxed))
            continue;
        for (int k = m0; k <= m1 && all; k++)
            all = atomic_load_explicit(&p->msg[k].done, memory_order_relaxed);
        if (!all)
            continue;
        /* The lanes' unpack: a send shorter than the receive may end inside
         * an element, whose bytes that came land as a receive's would
         * (MPI_Unpack takes whole elements only, or refuses, on Open MPI). */
        int rc = msh_lane_unpack_sized(p->stage + lo, (size_t)(hi - lo), p->buf + (MPI_Aint)i * p->count * p->extent,
                                       p->dtype, p->tsize, p->extent);
        if (rc != MPI_SUCCESS && p->err == MPI_SUCCESS)
            p->err = rc;
        /* release: the partition's data is in the user's buffer */
        atomic_store_explicit(&p->unpacked[i], 1, memory_order_release);
    }
}

static void start_msgs(msh_part *p)
{
    for (int m = 0; m < p->nmsg; m++) {
        int rc = PMPI_Start(&p->msg[m].host);
        if (rc != MPI_SUCCESS && p->err == MPI_SUCCESS)
            p->err = rc;
        if (rc != MPI_SUCCESS) {
            atomic_store_explicit(&p->msg[m].done, 1, memory_order_release);
            p->nleft--;
        } else {
            atomic_store_explicit(&p->msg[m].started, 1, memory_order_release);
        }
    }
}

static void finish_round(msh_request *r, msh_part *p)
{
    MPI_Status *st = &r->status;
    memset(st, 0, sizeof *st);
    st->MPI_SOURCE = p->send ? MPI_ANY_SOURCE : p->peer;
    st->MPI_TAG = p->send ? MPI_ANY_TAG : p->tag;
    if (!p->send && p->peer == MPI_PROC_NULL)
        st->MPI_TAG = MPI_ANY_TAG;
    st->MPI_ERROR = p->err;
    msh_lane_set_bytes(st, (size_t)(p->send ? 0 : p->received)); /* zeroed: not cancelled */
    /* The internal messages' errors come back as codes (their
     * communicators return them): the call that retires the round raises
     * it on the program's communicator, the engine's array calls too. */
    r->q.own_error = p->err != MPI_SUCCESS;
    r->q.comm = p->comm;
    atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
}

/* Under p->lock. */
static void progress_locked(msh_request *r, msh_part *p)
{
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING)
        return;
    int locked = msh_host_enter();
    if (!p->send && !atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        if (!atomic_load_explicit(&p->hdr_in, memory_order_acquire)) {
            msh_host_exit(locked);
            msh_part_disp_poll();
            if (!atomic_load_explicit(&p->hdr_in, memory_order_acquire))
                return;
            locked = msh_host_enter();
        }
        int rc = create_recvs(p);
        atomic_store_explicit(&p->setup, 1, memory_order_release);
        p->nleft = p->nmsg;
        if (rc != MPI_SUCCESS) {
            p->err = rc;
            p->nleft = 0;
            msh_log("partitioned receive from %d tag %d: cannot set up the channel (error %d)", p->peer, p->tag, rc);
        } else {
            start_msgs(p);
        }
    }
    for (int m = 0; m < p->nmsg && p->nleft > 0; m++) {
        part_msg *g = &p->msg[m];
        if (!atomic_load_explicit(&g->started, memory_order_acquire) ||
            atomic_load_explicit(&g->done, memory_order_relaxed))
            continue;
        int f = 0;
        MPI_Status st;
        int rc = PMPI_Test(&g->host, &f, &st);
        if (!f && rc == MPI_SUCCESS)
            continue;
        if (rc != MPI_SUCCESS && p->err == MPI_SUCCESS)
            p->err = rc;
        if (!p->send) {
            int n = 0;
            if (PMPI_Get_count(&st, MPI_BYTE, &n) == MPI_SUCCESS && n != MPI_UNDEFINED)
                p->received += n;
        }
        atomic_store_explicit(&g->done, 1, memory_order_release);
        p->nleft--;
        if (p->stage)
            unpack_after(p, m);
    }
    msh_host_exit(locked);
    if ((p->send || atomic_load_explicit(&p->setup, memory_order_relaxed)) && p->nleft == 0)
        finish_round(r, p);
}

int msh_part_progress(msh_request *r, int blocking)
{
    msh_part *p = r->ext;
    int st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st != MSH_REQ_PENDING)
        return st == MSH_REQ_COMPLETE;
    if (blocking)
        pthread_mutex_lock(&p->lock);
    else if (pthread_mutex_trylock(&p->lock) != 0)
        return 0;
    progress_locked(r, p);
    pthread_mutex_unlock(&p->lock);
    return atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_COMPLETE;
}

/* ------------------------------------------------------------ init */

/* The info key mpishim_part_min_bytes, else MPISHIM_PART_MIN_BYTES (parsed
 * as that variable is, src/core/config.c). */
static MPI_Count min_bytes_of(MPI_Info info)
{
    msh_config c = msh_cfg;
    msh_cfg_from_info(info, MSH_CFG_PART_MIN_BYTES, &c);
    return (MPI_Count)c.part_min_bytes;
}

static void part_destroy(msh_part *p)
{
    if (p->msg) {
        int locked = msh_host_enter();
        for (int m = 0; m < p->nmsg; m++)
            if (p->msg[m].host != MPI_REQUEST_NULL)
                PMPI_Request_free(&p->msg[m].host);
        msh_host_exit(locked);
    }
    if (p->msg != &p->msg1)
        free(p->msg);
    free((void *)p->readied);
    free(p->stage);
    free((void *)p->unpacked);
    if (p->own_type)
        PMPI_Type_free(&p->dtype);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Named types partitioned inits have seen (handle keys, 0: empty; slots
 * fill from the first): never freed and always committed, so a channel on
 * one needs neither init_check_args' probe nor a copy of the type. A type
 * is asked about only after the probe accepted it. */
#define NAMED_SEEN 16
static _Atomic uint64_t named_seen[NAMED_SEEN];

static int named_known(MPI_Datatype dt)
{
    uint64_t k = msh_handle_key(&dt, sizeof dt);
    for (int i = 0; i < NAMED_SEEN; i++) {
        uint64_t e = atomic_load_explicit(&named_seen[i], memory_order_relaxed);
        if (e == k)
            return 1;
        if (e == 0)
            return 0;
    }
    return 0;
}

/* Under the host lock: note dt if it is named. */
static void named_note(MPI_Datatype dt)
{
    if (!msh_lane_type_named(dt))
        return;
    uint64_t k = msh_handle_key(&dt, sizeof dt);
    for (int i = 0; i < NAMED_SEEN; i++) {
        uint64_t e = 0;
        if (atomic_compare_exchange_strong_explicit(&named_seen[i], &e, k, memory_order_relaxed,
                                                    memory_order_relaxed) ||
            e == k)
            return;
    }
}

/* Arguments of a partitioned init: MPI 4.0 sec. 4.2.2, at least one
 * partition; the rest as for point-to-point (no wildcards: a partitioned
 * receive names its peer). Reports through comm's handler. */
static int init_check_args(void *buf, int partitions, MPI_Count count, MPI_Datatype dtype, int tag, MPI_Comm comm,
                           MPI_Info info)
{
    if (comm == MPI_COMM_NULL)
        return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_COMM);
    if (partitions < 1)
        return msh_comm_error(comm, MPI_ERR_ARG);
    if (count < 0)
        return msh_comm_error(comm, MPI_ERR_COUNT);
    if (tag < 0 || tag > msh_rt.tag_ub)
        return msh_comm_error(comm, MPI_ERR_TAG);
    if (dtype == MPI_DATATYPE_NULL)
        return msh_comm_error(comm, MPI_ERR_TYPE);
    if (msh_part_datac == MPI_COMM_NULL)
        return msh_comm_error(comm, MPI_ERR_INTERN); /* init could not make the channel */
    /* Committed? Neither host says so directly; a persistent request to
     * MPI_PROC_NULL checks the type as a real one would, and moves no data. */
    MPI_Request probe = MPI_REQUEST_NULL;
    int nk = 0, named = named_known(dtype);
    int locked = msh_host_enter();
    int trc = named ? MPI_SUCCESS : PMPI_Recv_init(buf, 1, dtype, MPI_PROC_NULL, 0, msh_part_datac, &probe);
    if (!named && trc == MPI_SUCCESS) {
        PMPI_Request_free(&probe);
        named_note(dtype);
    }
    int irc = info == MPI_INFO_NULL ? MPI_SUCCESS : PMPI_Info_get_nkeys(info, &nk);
    msh_host_exit(locked);
    if (trc != MPI_SUCCESS)
        return msh_comm_error(comm, MPI_ERR_TYPE);
    if (irc != MPI_SUCCESS)
        return msh_comm_error(comm, MPI_ERR_INFO);
    return MPI_SUCCESS;
}

/* The communicator's agreed id and the peer's rank in the world channels.
 * Reports through comm's handler. */
static int init_resolve_peer(MPI_Comm comm, int peer, long long *cid, int *wpeer)
{
    int rc = msh_part_comm_peer(comm, peer, cid, wpeer);
    return rc == MPI_SUCCESS ? MPI_SUCCESS : msh_comm_error(comm, rc);
}

/* The sender's plan (messages per partition group, tags) and its header,
 * sent to the receiver's dispatcher. Under the host lock. */
static int init_send_plan(msh_part *p, MPI_Info info)
{
    MPI_Count pb = p->count * p->tsize, minb = min_bytes_of(info);
    p->group = msh_pplan_group(pb, minb, p->partitions);
    p->nmsg = msh_pplan_nmsg(p->partitions, p->group);
    p->total = pb * p->partitions;
    if (p->nmsg >= msh_rt.tag_ub)
        return MPI_ERR_ARG;
    unsigned span = (unsigned)msh_rt.tag_ub + 1u - (unsigned)p->nmsg;
    p->tag_base = (int)(atomic_fetch_add_explicit(&next_tag, (unsigned)p->nmsg, memory_order_relaxed) % span);
    p->msg = msgs_new(p);
    p->readied = calloc((size_t)p->partitions, 1);
    if (!p->msg || !p->readied)
        return MPI_ERR_NO_MEM;
    int rc = create_msgs(p);
    if (rc != MPI_SUCCESS)
        return rc;
    long long *hdr = p->hdr;
    hdr[0] = HDR_MAGIC;
    hdr[1] = p->cid;
    hdr[2] = p->tag;
    hdr[3] = p->partitions;
    hdr[4] = p->group;
    hdr[5] = p->nmsg;
    hdr[6] = p->total;
    hdr[7] = p->tag_base;
    return PMPI_Isend(hdr, HDR_N, MPI_LONG_LONG, p->wpeer, 0, msh_part_hdrc, &p->hdr_req);
}

/* The datatype's copy and layout, then (sender) the plan. */
static int init_type_and_plan(msh_part *p, MPI_Datatype dtype, MPI_Info info)
{
    MPI_Aint lb = 0, tlb = 0, text = 0;
    int locked = msh_host_enter();
    int rc = MPI_SUCCESS;
    if (named_known(dtype))
        p->dtype = dtype;
    else if ((rc = PMPI_Type_dup(dtype, &p->dtype)) == MPI_SUCCESS)
        p->own_type = 1;
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_size_x(dtype, &p->tsize);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_get_extent(dtype, &lb, &p->extent);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_get_true_extent(dtype, &tlb, &text);
    p->contig = rc == MPI_SUCCESS && tlb == 0 && lb == 0 && text == p->extent && (MPI_Count)p->extent == p->tsize;
    if (rc == MPI_SUCCESS && p->send)
        rc = init_send_plan(p, info);
    msh_host_exit(locked);
    if (rc == MPI_SUCCESS && !p->send && p->wpeer == MPI_PROC_NULL) {
        /* Nothing will come: set up at once, with no messages. */
        p->nmsg = 0;
        atomic_store_explicit(&p->setup, 1, memory_order_release);
    }
    return rc;
}

/* Undo a failed init: the header send (if started), then the channel. */
static void init_undo(msh_part *p)
{
    if (p->hdr_req != MPI_REQUEST_NULL) {
        int locked = msh_host_enter();
        PMPI_Cancel(&p->hdr_req);
        PMPI_Wait(&p->hdr_req, MPI_STATUS_IGNORE);
        msh_host_exit(locked);
    }
    free(p->hdr);
    part_destroy(p);
}

int msh_part_init_req(int send, void *buf, int partitions, MPI_Count count, MPI_Datatype dtype, int peer, int tag,
                      MPI_Comm comm, MPI_Info info, MPI_Request *handle)
{
    int rc = init_check_args(buf, partitions, count, dtype, tag, comm, info);
    if (rc != MPI_SUCCESS)
        return rc;
    long long cid = -1;
    int wpeer = MPI_PROC_NULL;
    if ((rc = init_resolve_peer(comm, peer, &cid, &wpeer)) != MPI_SUCCESS)
        return rc;
    msh_part *p = calloc(1, sizeof *p);
    long long *hdr = send ? calloc(HDR_N, sizeof *hdr) : NULL;
    if (!p || (send && !hdr)) {
        free(p);
        free(hdr);
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    }
    pthread_mutex_init(&p->lock, NULL);
    p->send = send;
    p->buf = buf;
    p->partitions = partitions;
    p->count = count;
    p->peer = peer;
    p->wpeer = wpeer;
    p->cid = cid;
    p->tag = tag;
    p->comm = comm;
    p->hdr = hdr;
    p->hdr_req = MPI_REQUEST_NULL;
    p->dtype = MPI_DATATYPE_NULL;

    rc = init_type_and_plan(p, dtype, info);
    if (rc == MPI_SUCCESS && msh_req_arena_init() != 0)
        rc = MPI_ERR_NO_MEM;
    msh_request *r = NULL;
    if (rc == MPI_SUCCESS) {
        int got = 0;
        r = msh_req_pool_take(1, &got);
        if (!r)
            rc = MPI_ERR_NO_MEM;
        else
            msh_req_unpoison(r);
    }
    if (rc != MPI_SUCCESS) {
        init_undo(p);
        return msh_comm_error(comm, rc);
    }
    if (!send && wpeer != MPI_PROC_NULL)
        msh_part_disp_post(p); /* last: from here the dispatcher may fill it */
    r->ext = p;
    r->kind = MSH_KIND_PART;
    r->persistent = 1;
    r->freed = 0;
    r->procnull = 0;
    r->vci = 0;
    r->host = MPI_REQUEST_NULL;
    atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->state, MSH_REQ_INACTIVE, memory_order_release);
    atomic_fetch_add_explicit(&msh_part_nlive, 1, memory_order_relaxed);
    *handle = msh_req_handle(r);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ rounds */

int msh_part_start(msh_request *r)
{
    msh_part *p = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_INACTIVE)
        return msh_comm_error(p->comm, MPI_ERR_REQUEST);
    pthread_mutex_lock(&p->lock);
    p->err = MPI_SUCCESS;
    p->received = 0;
    for (int m = 0; m < p->nmsg; m++) {
        atomic_store_explicit(&p->msg[m].ready, 0, memory_order_relaxed);
        atomic_store_explicit(&p->msg[m].started, 0, memory_order_relaxed);
        atomic_store_explicit(&p->msg[m].done, 0, memory_order_relaxed);
    }
    if (p->send)
        for (int i = 0; i < p->partitions; i++)
            atomic_store_explicit(&p->readied[i], 0, memory_order_relaxed);
    if (p->unpacked)
        for (int i = 0; i < p->partitions; i++)
            atomic_store_explicit(&p->unpacked[i], 0, memory_order_relaxed);
    p->nleft = p->nmsg;
    if (p->send || atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        int locked = msh_host_enter();
        int rc = remake_freed_msgs(p);
        msh_host_exit(locked);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&p->lock);
            return msh_comm_error(p->comm, rc);
        }
    }
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
    if (!p->send && atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        int locked = msh_host_enter();
        start_msgs(p);
        msh_host_exit(locked);
    } else if (!p->send) {
        watch_add(r, p, 0);
        /* The header may be in already: set up now, so the data receives
         * are posted before the sender's data arrives. */
        progress_locked(r, p);
    }
    if ((p->send || atomic_load_explicit(&p->setup, memory_order_relaxed)) && p->nleft == 0 &&
        atomic_load_explicit(&r->state, memory_order_relaxed) == MSH_REQ_PENDING)
        finish_round(r, p);
    pthread_mutex_unlock(&p->lock);
    return MPI_SUCCESS;
}

int msh_part_retire(msh_request *r, MPI_Status *status)
{
    msh_status_out(status, &r->status);
    int err = r->status.MPI_ERROR;
    r->q.own_error = 0; /* raised here */
    atomic_store_explicit(&r->state, MSH_REQ_INACTIVE, memory_order_release);
    if (err != MPI_SUCCESS)
        msh_comm_error(((msh_part *)r->ext)->comm, err);
    return err;
}

void msh_part_empty_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    memset(st, 0, sizeof *st);
    st->MPI_SOURCE = MPI_ANY_SOURCE;
    st->MPI_TAG = MPI_ANY_TAG;
    st->MPI_ERROR = MPI_SUCCESS;
    PMPI_Status_set_elements_x(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
}

/* Release a channel that is not active (or finished) and its request.
 * Takes no watch_lock: the sweep calls it. */
static void part_release(msh_request *r)
{
    msh_part *p = r->ext;
    if (!p->send)
        msh_part_disp_unpost(p);
    int locked = msh_host_enter();
    if (p->hdr_req != MPI_REQUEST_NULL) {
        int f = 0;
        if (PMPI_Test(&p->hdr_req, &f, MPI_STATUS_IGNORE) == MPI_SUCCESS && f)
            free(p->hdr);
        else
            /* The receiver has not taken the header yet: the send goes on
             * by itself and its buffer must outlive it. */
            PMPI_Request_free(&p->hdr_req);
    } else {
        free(p->hdr);
    }
    msh_host_exit(locked);
    part_destroy(p);
    r->ext = NULL;
    r->kind = MSH_KIND_SEND;
    msh_req_release(r);
    msh_req_poison(r);
    msh_req_pool_give(r, 1);
    atomic_fetch_sub_explicit(&msh_part_nlive, 1, memory_order_relaxed);
}

/* Sender: every partition of this round readied (the round can finish
 * without the user). */
static int all_ready(msh_part *p)
{
    for (int m = 0; m < p->nmsg; m++)
        if (atomic_load_explicit(&p->msg[m].ready, memory_order_acquire) < p->msg[m].nparts)
            return 0;
    return 1;
}

int msh_part_free(msh_request *r, MPI_Request *handle)
{
    msh_part *p = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING) {
        /* Freeing an active partitioned request is erroneous (MPI 4.0 sec.
         * 4.2), but hosts finish such operations by themselves: so does the
         * shim, where the round can finish without the user. A send with a
         * partition not ready never can: refuse, keeping the handle. */
        if (p->send && !all_ready(p))
            return msh_comm_error(p->comm, MPI_ERR_REQUEST);
        watch_add(r, p, 1);
        *handle = MPI_REQUEST_NULL;
        return MPI_SUCCESS;
    }
    if (!p->send)
        watch_remove(r); /* finished with an error before any sweep saw it */
    part_release(r);
    *handle = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int msh_part_cancel(msh_request *r)
{
    /* Cancelling an active partitioned request is erroneous (MPI 4.0 sec.
     * 4.2): say so and leave the round alone (a partly cancelled round
     * could complete on neither side). */
    msh_part *p = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING)
        return msh_comm_error(p->comm, MPI_ERR_REQUEST);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ Pready / Parrived */

int msh_part_check_ready(msh_request *r, int partition)
{
    msh_part *p = r->ext;
    if (!p->send)
        return MPI_ERR_REQUEST;
    if (partition < 0 || partition >= p->partitions)
        return MPI_ERR_ARG;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_INACTIVE)
        return MPI_ERR_REQUEST;
    return MPI_SUCCESS;
}

int msh_part_pready(msh_request *r, int partition)
{
    int rc = msh_part_check_ready(r, partition);
    if (rc != MPI_SUCCESS)
        return rc;
    msh_part *p = r->ext;
    if (atomic_exchange_explicit(&p->readied[partition], 1, memory_order_acq_rel))
        return MPI_ERR_ARG; /* readied twice in this round */
    part_msg *g = &p->msg[partition / p->group];
    /* The thread whose Pready completes a message starts it: one atomic,
     * one PMPI_Start (release: its partitions' data is written). */
    if (atomic_fetch_add_explicit(&g->ready, 1, memory_order_acq_rel) + 1 == g->nparts) {
        int locked = msh_host_enter();
        rc = PMPI_Start(&g->host);
        msh_host_exit(locked);
        if (rc != MPI_SUCCESS) {
            pthread_mutex_lock(&p->lock);
            if (p->err == MPI_SUCCESS)
                p->err = rc;
            atomic_store_explicit(&g->done, 1, memory_order_release);
            p->nleft--;
            pthread_mutex_unlock(&p->lock);
            return rc;
        }
        atomic_store_explicit(&g->started, 1, memory_order_release);
    }
    return MPI_SUCCESS;
}

MPI_Comm msh_part_comm(msh_request *r)
{
    return ((msh_part *)r->ext)->comm;
}

int msh_part_parrived(msh_request *r, int partition, int *flag)
{
    msh_part *p = r->ext;
    if (p->send)
        return MPI_ERR_REQUEST;
    if (partition < 0 || partition >= p->partitions)
        return MPI_ERR_ARG;
    int st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st != MSH_REQ_PENDING) {
        *flag = 1; /* inactive or complete */
        return MPI_SUCCESS;
    }
    /* Another thread progressing the channel is fine: look at what it saw. */
    msh_part_progress(r, 0);
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING ||
        !atomic_load_explicit(&p->setup, memory_order_acquire)) {
        *flag = atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING;
        return MPI_SUCCESS;
    }
    if (p->stage) {
        *flag = atomic_load_explicit(&p->unpacked[partition], memory_order_acquire);
        return MPI_SUCCESS;
    }
    MPI_Count lo, hi;
    int m0, m1;
    part_range(p, partition, &lo, &hi, &m0, &m1);
    int ok = 1;
    for (int m = m0; m <= m1 && ok; m++)
        ok = atomic_load_explicit(&p->msg[m].done, memory_order_acquire);
    *flag = ok;
    return MPI_SUCCESS;
}
