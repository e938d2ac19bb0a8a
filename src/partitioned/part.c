/* Partitioned channels: private duplicates, init, Start, Pready/Parrived,
 * progress and teardown (see part.h). */
#include "partitioned/part.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "intercept/shim.h"
#include "mpishim.h"

_Atomic int msh_part_nlive;
_Atomic int msh_part_nsetup;

/* ------------------------------------------------------------ host access */

/* With a serialized host every host call goes under the shim's host lock. */
static inline void hl(void)
{
    if (msh_on() && msh_pool.serialized) {
        pthread_mutex_lock(&msh_pool.host_lock);
        msh_host_lock_depth++;
    }
}
static inline void hu(void)
{
    if (msh_on() && msh_pool.serialized) {
        msh_host_lock_depth--;
        pthread_mutex_unlock(&msh_pool.host_lock);
    }
}

/* ------------------------------------------------------------ setup watch list (part.h) */

/* Lock order: a channel's lock, then watch_lock; the sweep holds watch_lock
 * and only try-locks channels. */
static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static msh_request **watch;
static int nwatch, capwatch;

/* ------------------------------------------------------------ private duplicates */

typedef struct pcomm {
    MPI_Comm user, hdr, data;
} pcomm;

static pthread_mutex_t pc_lock = PTHREAD_MUTEX_INITIALIZER;
static pcomm *pcs;
static int npcs, cappcs;
static int layer; /* 1: the shim's layer serves partitioned calls */

int msh_part_layer_on(void) { return layer; }

int msh_part_comm_add(MPI_Comm c)
{
    if (!layer || c == MPI_COMM_NULL)
        return MPI_SUCCESS;
    pcomm e = { c, MPI_COMM_NULL, MPI_COMM_NULL };
    hl();
    int rc = PMPI_Comm_dup(c, &e.hdr);
    if (rc == MPI_SUCCESS) {
        rc = PMPI_Comm_dup(c, &e.data);
        if (rc != MPI_SUCCESS)
            PMPI_Comm_free(&e.hdr);
    }
    if (rc == MPI_SUCCESS) {
        /* Internal errors come back as codes, reported on the user's comm. */
        PMPI_Comm_set_errhandler(e.hdr, MPI_ERRORS_RETURN);
        PMPI_Comm_set_errhandler(e.data, MPI_ERRORS_RETURN);
    }
    hu();
    if (rc != MPI_SUCCESS)
        return rc;
    pthread_mutex_lock(&pc_lock);
    if (npcs == cappcs) {
        int ncap = cappcs ? 2 * cappcs : 16;
        pcomm *n = realloc(pcs, sizeof *n * (size_t)ncap);
        if (!n) {
            pthread_mutex_unlock(&pc_lock);
            hl();
            PMPI_Comm_free(&e.hdr);
            PMPI_Comm_free(&e.data);
            hu();
            return MPI_ERR_NO_MEM;
        }
        pcs = n;
        cappcs = ncap;
    }
    pcs[npcs++] = e;
    pthread_mutex_unlock(&pc_lock);
    return MPI_SUCCESS;
}

static int pcomm_find(MPI_Comm c, pcomm *out)
{
    int found = 0;
    pthread_mutex_lock(&pc_lock);
    for (int i = npcs - 1; i >= 0; i--)
        if (pcs[i].user == c) {
            *out = pcs[i];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&pc_lock);
    return found;
}

void msh_part_comm_del(MPI_Comm c)
{
    pcomm e;
    int found = 0;
    pthread_mutex_lock(&pc_lock);
    for (int i = npcs - 1; i >= 0; i--)
        if (pcs[i].user == c) {
            e = pcs[i];
            pcs[i] = pcs[--npcs];
            found = 1;
            break;
        }
    pthread_mutex_unlock(&pc_lock);
    if (found) {
        hl();
        PMPI_Comm_free(&e.hdr);
        PMPI_Comm_free(&e.data);
        hu();
    }
}

static int tag_ub = 32767;

void msh_part_init(void)
{
    layer = !msh_cfg.disable;
#if MPI_VERSION >= 4
    if (msh_cfg.part == MSH_PART_NATIVE)
        layer = 0;
#else
    if (layer && msh_cfg.part == MSH_PART_NATIVE && msh_rt.world_rank == 0)
        msh_log("MPISHIM_PART=native: this host has no partitioned calls (MPI %d.%d); using the shim's layer",
                MPI_VERSION, MPI_SUBVERSION);
#endif
    if (!layer)
        return;
    void *v = NULL;
    int flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag);
    if (flag && v)
        tag_ub = *(int *)v;
    msh_part_comm_add(MPI_COMM_WORLD);
    msh_part_comm_add(MPI_COMM_SELF);
}

void msh_part_fini(void)
{
    /* The duplicates of MPI_COMM_WORLD and MPI_COMM_SELF; those of
     * communicators the program never freed go with MPI_Finalize. */
    msh_part_comm_del(MPI_COMM_SELF);
    msh_part_comm_del(MPI_COMM_WORLD);
    pthread_mutex_lock(&pc_lock);
    free(pcs);
    pcs = NULL;
    npcs = cappcs = 0;
    pthread_mutex_unlock(&pc_lock);
    pthread_mutex_lock(&watch_lock);
    free(watch);
    watch = NULL;
    nwatch = capwatch = 0;
    pthread_mutex_unlock(&watch_lock);
    layer = 0;
}

/* ------------------------------------------------------------ channels */

enum { HDR_MAGIC = 0x50415254, HDR_N = 6 };

typedef struct part_msg {
    MPI_Request host;     /* persistent host request on the data duplicate */
    int nparts;           /* sender: user partitions in this message */
    _Atomic int ready;    /* sender: partitions readied this round */
    _Atomic int started;  /* PMPI_Start returned this round */
    _Atomic int done;     /* complete this round */
} part_msg;

typedef struct msh_part {
    int send;
    char *buf;
    int partitions;
    MPI_Count count;
    MPI_Datatype dtype;   /* our duplicate: the user may free theirs */
    MPI_Count tsize;      /* packed bytes of one element */
    MPI_Aint extent;
    int contig;           /* elements densely packed: byte offsets address the buffer */
    int peer, tag;
    MPI_Comm comm;        /* the user's, for errors */
    MPI_Comm data;
    /* The plan, from the sender's header. */
    int group;            /* sender partitions per message */
    int nmsg;
    MPI_Count msg_bytes;  /* bytes of every message but maybe the last */
    MPI_Count total;      /* bytes the sender sends */
    int tag_base;
    part_msg *msg;
    long long *hdr;       /* header buffer (leaked if the header is never delivered) */
    MPI_Request hdr_req;
    _Atomic int setup;    /* receiver: header seen, receives created */
    int watched;          /* in the setup watch list; under watch_lock */
    _Atomic unsigned char *readied; /* sender: per partition, this round */
    int nleft;            /* messages not done this round; under lock */
    int err;              /* first error of the round; under lock */
    MPI_Count received;   /* bytes received this round; under lock */
    pthread_mutex_t lock; /* setup and host tests of the messages */
} msh_part;

static _Atomic unsigned next_tag;

/* Under p->lock: a started receive without its header. */
static void watch_add(msh_request *r, msh_part *p)
{
    pthread_mutex_lock(&watch_lock);
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
        atomic_fetch_add_explicit(&msh_part_nsetup, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&watch_lock);
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
    int n = 0;
    for (int i = 0; i < nwatch;) {
        msh_request *r = watch[i];
        msh_part *p = r->ext;
        msh_part_progress(r, 0);
        /* Set up, or finished with an error: no longer ours to watch. */
        if (atomic_load_explicit(&p->setup, memory_order_acquire) ||
            atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING) {
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
    g->nparts = p->partitions - first < p->group ? p->partitions - first : p->group;
    MPI_Count n = p->count * g->nparts;
    if (n > INT32_MAX)
        return MPI_ERR_COUNT;
    return PMPI_Send_init(p->buf + (MPI_Aint)first * p->count * p->extent, (int)n, p->dtype, p->peer,
                          p->tag_base + m, p->data, &g->host);
}

/* Receiver: message m by byte ranges of the sender's plan. Data beyond the
 * buffer is received short, so the host reports MPI_ERR_TRUNCATE for it. */
static int create_recv(msh_part *p, int m)
{
    MPI_Count cap = (MPI_Count)p->partitions * p->count * p->tsize;
    MPI_Count off = (MPI_Count)m * p->msg_bytes;
    MPI_Count len = m == p->nmsg - 1 ? p->total - off : p->msg_bytes;
    MPI_Count fit = off >= cap ? 0 : (cap - off < len ? cap - off : len);
    if (p->contig || p->tsize == 0) {
        if (fit > INT32_MAX)
            return MPI_ERR_COUNT;
        return PMPI_Recv_init(p->buf + (fit ? off : 0), (int)fit, MPI_BYTE, p->peer, p->tag_base + m, p->data,
                              &p->msg[m].host);
    }
    if (off % p->tsize || fit % p->tsize)
        return MPI_ERR_TYPE; /* a message would split an element of this type */
    MPI_Count n = fit / p->tsize;
    if (n > INT32_MAX)
        return MPI_ERR_COUNT;
    return PMPI_Recv_init(p->buf + (MPI_Aint)(off / p->tsize) * p->extent, (int)n, p->dtype, p->peer,
                          p->tag_base + m, p->data, &p->msg[m].host);
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

/* Receiver, under p->lock: the header has arrived; plan the receives. */
static int create_recvs(msh_part *p, const MPI_Status *hst)
{
    if (p->peer == MPI_PROC_NULL || hst->MPI_SOURCE == MPI_PROC_NULL) {
        p->nmsg = 0;
        return MPI_SUCCESS;
    }
    long long *h = p->hdr;
    if (h[0] != HDR_MAGIC || h[3] < 0 || h[4] < 0)
        return MPI_ERR_INTERN;
    p->group = (int)h[2];
    p->nmsg = (int)h[3];
    p->total = h[4];
    p->tag_base = (int)h[5];
    p->msg_bytes = p->nmsg ? (p->total + p->nmsg - 1) / p->nmsg : 0;
    if (p->nmsg > 0 && h[1] > 0) /* messages hold whole sender partitions */
        p->msg_bytes = (p->total / h[1]) * p->group;
    p->msg = calloc((size_t)(p->nmsg ? p->nmsg : 1), sizeof *p->msg);
    if (!p->msg)
        return MPI_ERR_NO_MEM;
    return create_msgs(p);
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
    PMPI_Status_set_elements_x(st, MPI_BYTE, p->send ? 0 : p->received);
    PMPI_Status_set_cancelled(st, 0);
    atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
}

/* Under p->lock. */
static void progress_locked(msh_request *r, msh_part *p)
{
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING)
        return;
    hl();
    if (!p->send && !atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        int f = 0;
        MPI_Status hst;
        int rc = PMPI_Test(&p->hdr_req, &f, &hst);
        if (rc != MPI_SUCCESS) {
            p->err = rc;
            p->nleft = 0;
            hu();
            finish_round(r, p);
            return;
        }
        if (!f) {
            hu();
            return;
        }
        rc = create_recvs(p, &hst);
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
    }
    hu();
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

static MPI_Count min_bytes_of(MPI_Info info)
{
    MPI_Count v = (MPI_Count)msh_cfg.part_min_bytes;
    if (info == MPI_INFO_NULL)
        return v;
    char val[64];
    int flag = 0;
    if (PMPI_Info_get(info, "mpishim_part_min_bytes", (int)sizeof val - 1, val, &flag) == MPI_SUCCESS && flag) {
        char *end = NULL;
        long long x = strtoll(val, &end, 10);
        if (end != val && x >= 0) {
            if (*end == 'K' || *end == 'k')
                x <<= 10;
            else if (*end == 'M' || *end == 'm')
                x <<= 20;
            v = x;
        }
    }
    return v;
}

static void part_destroy(msh_part *p)
{
    if (p->msg) {
        hl();
        for (int m = 0; m < p->nmsg; m++)
            if (p->msg[m].host != MPI_REQUEST_NULL)
                PMPI_Request_free(&p->msg[m].host);
        hu();
    }
    free(p->msg);
    free((void *)p->readied);
    if (p->dtype != MPI_DATATYPE_NULL)
        PMPI_Type_free(&p->dtype);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

int msh_part_init_req(int send, void *buf, int partitions, MPI_Count count, MPI_Datatype dtype, int peer, int tag,
                      MPI_Comm comm, MPI_Info info, MPI_Request *handle)
{
    if (comm == MPI_COMM_NULL)
        return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_COMM);
    if (partitions < 0 || count < 0)
        return msh_comm_error(comm, partitions < 0 ? MPI_ERR_ARG : MPI_ERR_COUNT);
    if (!send && peer == MPI_ANY_SOURCE)
        return msh_comm_error(comm, MPI_ERR_RANK);
    if (!send && tag == MPI_ANY_TAG)
        return msh_comm_error(comm, MPI_ERR_TAG);
    if (tag < 0 || tag > tag_ub)
        return msh_comm_error(comm, MPI_ERR_TAG);
    pcomm pc;
    if (!pcomm_find(comm, &pc)) {
        msh_log("partitioned init on a communicator the shim did not see created (MPI_Comm_idup?); "
                "create it with a blocking constructor");
        return msh_comm_error(comm, MPI_ERR_COMM);
    }
    msh_part *p = calloc(1, sizeof *p);
    long long *hdr = calloc(HDR_N, sizeof *hdr);
    if (!p || !hdr) {
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
    p->tag = tag;
    p->comm = comm;
    p->data = pc.data;
    p->hdr = hdr;
    p->hdr_req = MPI_REQUEST_NULL;
    p->dtype = MPI_DATATYPE_NULL;

    int rc;
    hl();
    MPI_Aint lb = 0, tlb = 0, text = 0;
    rc = PMPI_Type_dup(dtype, &p->dtype);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_size_x(dtype, &p->tsize);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_get_extent(dtype, &lb, &p->extent);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Type_get_true_extent(dtype, &tlb, &text);
    p->contig = rc == MPI_SUCCESS && tlb == 0 && lb == 0 && text == p->extent && (MPI_Count)p->extent == p->tsize;
    if (rc == MPI_SUCCESS && send) {
        MPI_Count pb = count * p->tsize, minb = min_bytes_of(info);
        p->group = 1;
        if (pb > 0 && minb > pb)
            p->group = (int)((minb + pb - 1) / pb);
        if (p->group > partitions)
            p->group = partitions > 0 ? partitions : 1;
        p->nmsg = partitions ? (partitions + p->group - 1) / p->group : 0;
        p->total = pb * partitions;
        if (p->nmsg >= tag_ub) {
            rc = MPI_ERR_ARG;
        } else {
            unsigned span = (unsigned)tag_ub + 1u - (unsigned)p->nmsg;
            p->tag_base = (int)(atomic_fetch_add_explicit(&next_tag, (unsigned)p->nmsg, memory_order_relaxed) % span);
            p->msg = calloc((size_t)(p->nmsg ? p->nmsg : 1), sizeof *p->msg);
            p->readied = calloc((size_t)(partitions ? partitions : 1), 1);
            if (!p->msg || !p->readied)
                rc = MPI_ERR_NO_MEM;
        }
        if (rc == MPI_SUCCESS)
            rc = create_msgs(p);
        if (rc == MPI_SUCCESS) {
            hdr[0] = HDR_MAGIC;
            hdr[1] = partitions;
            hdr[2] = p->group;
            hdr[3] = p->nmsg;
            hdr[4] = p->total;
            hdr[5] = p->tag_base;
            rc = PMPI_Isend(hdr, HDR_N, MPI_LONG_LONG, peer, tag, pc.hdr, &p->hdr_req);
        }
    } else if (rc == MPI_SUCCESS) {
        rc = PMPI_Irecv(hdr, HDR_N, MPI_LONG_LONG, peer, tag, pc.hdr, &p->hdr_req);
    }
    hu();
    if (rc == MPI_SUCCESS && msh_req_arena_init() != 0)
        rc = MPI_ERR_NO_MEM;
    msh_request *r = NULL;
    if (rc == MPI_SUCCESS) {
        int got = 0;
        r = msh_req_pool_take(1, &got);
        if (!r)
            rc = MPI_ERR_NO_MEM;
    }
    if (rc != MPI_SUCCESS) {
        if (p->hdr_req != MPI_REQUEST_NULL) {
            hl();
            PMPI_Cancel(&p->hdr_req);
            PMPI_Wait(&p->hdr_req, MPI_STATUS_IGNORE);
            hu();
        }
        free(hdr);
        part_destroy(p);
        return msh_comm_error(comm, rc);
    }
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
    p->nleft = p->nmsg;
    if (p->send || atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        hl();
        int rc = remake_freed_msgs(p);
        hu();
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&p->lock);
            return msh_comm_error(p->comm, rc);
        }
    }
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
    if (!p->send && atomic_load_explicit(&p->setup, memory_order_relaxed)) {
        hl();
        start_msgs(p);
        hu();
    } else if (!p->send) {
        watch_add(r, p);
    }
    if ((p->send || atomic_load_explicit(&p->setup, memory_order_relaxed)) && p->nleft == 0)
        finish_round(r, p);
    pthread_mutex_unlock(&p->lock);
    return MPI_SUCCESS;
}

int msh_part_retire(msh_request *r, MPI_Status *status)
{
    msh_status_out(status, &r->status);
    int err = r->status.MPI_ERROR;
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

int msh_part_free(msh_request *r, MPI_Request *handle)
{
    msh_part *p = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING)
        return msh_comm_error(p->comm, MPI_ERR_REQUEST); /* active: free it after completion */
    if (!p->send)
        watch_remove(r); /* finished with an error before any sweep saw it */
    hl();
    if (p->hdr_req != MPI_REQUEST_NULL) {
        int f = 0;
        if (!p->send) {
            PMPI_Cancel(&p->hdr_req);
            PMPI_Wait(&p->hdr_req, MPI_STATUS_IGNORE);
            free(p->hdr);
        } else if (PMPI_Test(&p->hdr_req, &f, MPI_STATUS_IGNORE) == MPI_SUCCESS && f) {
            free(p->hdr);
        } else {
            /* The receiver has not matched the header yet: the send goes on
             * by itself and its 48-byte buffer must outlive it. */
            PMPI_Request_free(&p->hdr_req);
        }
    } else {
        free(p->hdr);
    }
    hu();
    part_destroy(p);
    r->ext = NULL;
    r->kind = MSH_KIND_SEND;
    msh_req_release(r);
    msh_req_pool_give(r, 1);
    atomic_fetch_sub_explicit(&msh_part_nlive, 1, memory_order_relaxed);
    *handle = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

int msh_part_cancel(msh_request *r)
{
    msh_part *p = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING)
        return MPI_SUCCESS;
    pthread_mutex_lock(&p->lock);
    hl();
    for (int m = 0; m < p->nmsg; m++)
        if (atomic_load_explicit(&p->msg[m].started, memory_order_acquire) &&
            !atomic_load_explicit(&p->msg[m].done, memory_order_relaxed))
            PMPI_Cancel(&p->msg[m].host);
    hu();
    pthread_mutex_unlock(&p->lock);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ Pready / Parrived */

int msh_part_pready(msh_request *r, int partition)
{
    msh_part *p = r->ext;
    if (!p->send)
        return MPI_ERR_REQUEST;
    if (partition < 0 || partition >= p->partitions)
        return MPI_ERR_ARG;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_INACTIVE)
        return MPI_ERR_REQUEST;
    if (atomic_exchange_explicit(&p->readied[partition], 1, memory_order_acq_rel))
        return MPI_ERR_ARG; /* readied twice in this round */
    part_msg *g = &p->msg[partition / p->group];
    /* The thread whose Pready completes a message starts it: one atomic,
     * one PMPI_Start (release: its partitions' data is written). */
    if (atomic_fetch_add_explicit(&g->ready, 1, memory_order_acq_rel) + 1 == g->nparts) {
        hl();
        int rc = PMPI_Start(&g->host);
        hu();
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
    MPI_Count rpb = p->count * p->tsize, lo = (MPI_Count)partition * rpb, hi = lo + rpb;
    if (hi > p->total)
        hi = p->total;
    int m0 = 0, m1 = p->nmsg - 1;
    if (rpb > 0 && lo < hi && p->msg_bytes > 0) {
        m0 = (int)(lo / p->msg_bytes);
        m1 = (int)((hi - 1) / p->msg_bytes);
        if (m1 >= p->nmsg)
            m1 = p->nmsg - 1;
    }
    int ok = 1;
    for (int m = m0; m <= m1 && ok; m++)
        ok = atomic_load_explicit(&p->msg[m].done, memory_order_acquire);
    *flag = ok;
    return MPI_SUCCESS;
}
