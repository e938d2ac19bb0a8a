/*
 * ceiling.c - the ceiling of the lanes: Multirate's pairwise pattern
 * (multirate.c) with no MPI in the loop.  Each of T threads per process
 * owns one endpoint of the fabric library a lane would use (a UCX worker,
 * or a libfabric endpoint in a domain of its own) and streams windows of W
 * tagged messages of S bytes to the same thread of the peer process, which
 * acks each window.  A shim VCI on the same library can at best match this
 * rate: it is the "within 20% of the ceiling" reference of bench/README.md.
 *
 *   mpirun -np 2 ceiling -b ucx -t T [-s S] [-w W] [-d SECONDS | -i WINDOWS] [-q]
 *   mpirun -np 2 ceiling -b shm -t T ...        (libfabric provider shm)
 *   mpirun -np 2 ceiling -b 'tcp;ofi_rxm' ...   (any libfabric provider)
 *   mpirun -np 2 ceiling -b ucx -w 1 -p ...     (a ping-pong: the latency ceiling)
 *
 * MPI only starts the processes, exchanges the endpoint addresses, times
 * the start (a barrier) and gathers the counts; the main thread makes
 * those calls, the communicating threads never do.  -c and -o (multirate's
 * communicator options) are accepted and change nothing: every thread has
 * an endpoint of its own, and tags never mix.
 *
 * Per window, as in multirate.c: the receiver has W receives posted, waits
 * for all, checks the first and last byte of each message and its length,
 * posts the next window, then sends the ack (0 bytes; 1 byte = stop); the
 * sender posts W sends, waits for their completions, waits for the ack.
 * With -p the ack carries S bytes too (one more to stop), so that -w 1 is
 * a ping-pong of S bytes each way, what bench/latency.c times through MPI.
 * The result line has multirate's format (mode=ceiling-<backend>), so
 * run_multirate.sh reads it the same way.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <mpi.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef HAVE_UCX
#include <ucp/api/ucp.h>
#endif
#ifdef HAVE_LIBFABRIC
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>
#endif

#define BENCH_PROG "ceiling"
#include "common.h"

#include <stdarg.h>

/* die() with a formatted message. */
static void fail(const char *fmt, ...)
{
    char s[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s, sizeof s, fmt, ap);
    va_end(ap);
    die(s);
}

enum { WARMUP_WINDOWS = 10, MAX_THREADS = 256, TAG_DATA = 1, TAG_ACK = 2 };

static struct {
    const char *backend;
    int threads, size, window;
    long iters;
    double seconds;
    int quiet, pong;
} opt = { "ucx", 1, 8, 128, 100, 0, 0, 0 };

/* Bytes of an ack that goes on (one more: stop). */
static size_t ack_len(void)
{
    return opt.pong ? (size_t)opt.size : 0;
}

static int is_sender;
static pthread_barrier_t gate;
static double t_start;

/* One thread's endpoint, whichever library; the backend's functions below
 * fill and use it. */
typedef struct {
    int id;
    long windows, mismatches;
    pthread_t thread;
    unsigned char *buf, *ack; /* W slots of S bytes; the ack's ack_len() + 1 */
    size_t *lens; /* received lengths, per slot */
    int done[2];  /* completions of sends [0] and receives [1] not yet waited for */
#ifdef HAVE_UCX
    ucp_worker_h w;
    ucp_ep_h ep;
#endif
#ifdef HAVE_LIBFABRIC
    struct fid_domain *dom;
    struct fid_ep *fep;
    struct fid_cq *cq;
    struct fid_av *av;
    fi_addr_t peer;
    struct fi_context2 *ctx; /* one per slot, and one for the ack */
#endif
} ent_t;

/* A backend: make the endpoints (collective: every rank calls it with the
 * same T), one thread's operations, and the teardown. */
typedef struct {
    const char *(*setup)(ent_t *e, int n);
    void (*post_recvs)(ent_t *e, int n, size_t len); /* slots 0..n-1 */
    void (*post_sends)(ent_t *e, int n, size_t len);
    void (*wait)(ent_t *e, int dir, int n);           /* n completions of sends (0) or receives (1) */
    void (*send_ack)(ent_t *e, int stop);
    int (*recv_ack)(ent_t *e);                        /* 1: stop */
    void (*teardown)(ent_t *e, int n);
} backend_t;

static unsigned char stamp(int id, long win, int slot)
{
    return (unsigned char)(id * 31 + win * 7 + slot);
}

/* ------------------------------------------------------------ address exchange */

/* Every rank's address of each of its n endpoints, gathered; returns the
 * peer's (rank ^ 1) n addresses, each `len` bytes, packed (caller frees). */
static unsigned char *exchange(const unsigned char *mine, size_t len, int n)
{
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    unsigned char *all = malloc(len * (size_t)n * (size_t)size);
    if (!all)
        fail("out of memory");
    MPI_Allgather(mine, (int)(len * (size_t)n), MPI_BYTE, all, (int)(len * (size_t)n), MPI_BYTE, MPI_COMM_WORLD);
    unsigned char *peer = malloc(len * (size_t)n);
    if (!peer)
        fail("out of memory");
    memcpy(peer, all + len * (size_t)n * (size_t)(rank ^ 1), len * (size_t)n);
    free(all);
    return peer;
}

/* The largest of every rank's value (address lengths differ by worker). */
static size_t max_all(size_t v)
{
    unsigned long in = v, out = 0;
    MPI_Allreduce(&in, &out, 1, MPI_UNSIGNED_LONG, MPI_MAX, MPI_COMM_WORLD);
    return out;
}

/* ------------------------------------------------------------ UCX */

#ifdef HAVE_UCX
static ucp_context_h ucx_ctx;

/* The context and workers as the UCX lane makes them (src/transport/ucx.c:
 * one context, serialized workers), so that only the shim's own work
 * separates the two rates. */
static const char *ucx_setup(ent_t *e, int n)
{
    if (n < 1 || n > MAX_THREADS)
        return "bad thread count";
    ucp_params_t p = { .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
                       .features = UCP_FEATURE_TAG,
                       .mt_workers_shared = 1 };
    ucp_config_t *cfg;
    if (ucp_config_read(NULL, NULL, &cfg) != UCS_OK)
        return "ucp_config_read failed";
    ucs_status_t s = ucp_init(&p, cfg, &ucx_ctx);
    ucp_config_release(cfg);
    if (s != UCS_OK)
        return "ucp_init failed";
    ucp_address_t **addr = calloc((size_t)n, sizeof *addr);
    size_t *alen = calloc((size_t)n, sizeof *alen), amax = 0;
    if (!addr || !alen)
        return "out of memory";
    for (int i = 0; i < n; i++) {
        ucp_worker_params_t wp = { .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                                   .thread_mode = UCS_THREAD_MODE_SERIALIZED };
        if (ucp_worker_create(ucx_ctx, &wp, &e[i].w) != UCS_OK)
            return "ucp_worker_create failed";
        if (ucp_worker_get_address(e[i].w, &addr[i], &alen[i]) != UCS_OK)
            return "ucp_worker_get_address failed";
        if (alen[i] > amax)
            amax = alen[i];
    }
    size_t len = max_all(amax);
    unsigned char *mine = calloc((size_t)n, len);
    if (!mine)
        return "out of memory";
    for (int i = 0; i < n; i++) {
        memcpy(mine + len * (size_t)i, addr[i], alen[i]);
        ucp_worker_release_address(e[i].w, addr[i]);
    }
    unsigned char *peer = exchange(mine, len, n);
    for (int i = 0; i < n; i++) {
        ucp_ep_params_t ep = { .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
                               .address = (const ucp_address_t *)(peer + len * (size_t)i) };
        if (ucp_ep_create(e[i].w, &ep, &e[i].ep) != UCS_OK)
            return "ucp_ep_create failed";
    }
    free(peer);
    free(mine);
    free(alen);
    free(addr);
    return NULL;
}

static void ucx_send_cb(void *req, ucs_status_t s, void *user)
{
    if (s != UCS_OK)
        fail("a UCX send failed: %s", ucs_status_string(s));
    ((ent_t *)user)->done[0]++;
    ucp_request_free(req);
}

typedef struct {
    ent_t *e;
    int slot;
} ucx_slot;

static void ucx_recv_cb(void *req, ucs_status_t s, const ucp_tag_recv_info_t *info, void *user)
{
    ucx_slot *u = user;
    if (s != UCS_OK)
        fail("a UCX receive failed: %s", ucs_status_string(s));
    u->e->lens[u->slot] = info->length;
    u->e->done[1]++;
    if (req)
        ucp_request_free(req);
}

/* Per thread: the slots' callback arguments (slot W is the ack). */
static __thread ucx_slot *ucx_slots;

static ucx_slot *slots_of(ent_t *e)
{
    if (!ucx_slots) {
        ucx_slots = calloc((size_t)opt.window + 1, sizeof *ucx_slots);
        if (!ucx_slots)
            fail("out of memory");
        for (int k = 0; k <= opt.window; k++)
            ucx_slots[k] = (ucx_slot){ e, k };
    }
    return ucx_slots;
}

static void ucx_recv(ent_t *e, void *buf, size_t len, ucp_tag_t tag, int slot)
{
    ucx_slot *u = &slots_of(e)[slot];
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                                              UCP_OP_ATTR_FIELD_RECV_INFO,
                              .cb.recv = ucx_recv_cb,
                              .user_data = u };
    ucp_tag_recv_info_t info;
    p.recv_info.tag_info = &info;
    ucs_status_ptr_t r = ucp_tag_recv_nbx(e->w, buf, len, tag, ~(ucp_tag_t)0, &p);
    if (UCS_PTR_IS_ERR(r))
        fail("ucp_tag_recv_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    if (r == NULL) { /* completed at once: info holds what arrived */
        e->lens[slot] = info.length;
        e->done[1]++;
    }
}

static void ucx_send(ent_t *e, const void *buf, size_t len, ucp_tag_t tag)
{
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
                              .cb.send = ucx_send_cb,
                              .user_data = e };
    ucs_status_ptr_t r = ucp_tag_send_nbx(e->ep, buf, len, tag, &p);
    if (UCS_PTR_IS_ERR(r))
        fail("ucp_tag_send_nbx: %s", ucs_status_string(UCS_PTR_STATUS(r)));
    if (r == NULL)
        e->done[0]++;
}

static void ucx_post_recvs(ent_t *e, int n, size_t len)
{
    for (int k = 0; k < n; k++)
        ucx_recv(e, e->buf + (size_t)k * len, len, TAG_DATA, k);
}

static void ucx_post_sends(ent_t *e, int n, size_t len)
{
    for (int k = 0; k < n; k++)
        ucx_send(e, e->buf + (size_t)k * len, len, TAG_DATA);
}

static void ucx_wait(ent_t *e, int dir, int n)
{
    while (e->done[dir] < n)
        ucp_worker_progress(e->w);
    e->done[dir] -= n;
}

static void ucx_send_ack(ent_t *e, int stop)
{
    ucx_send(e, e->ack, ack_len() + (size_t)stop, TAG_ACK);
    ucx_wait(e, 0, 1);
}

static int ucx_recv_ack(ent_t *e)
{
    ucx_recv(e, e->ack, ack_len() + 1, TAG_ACK, opt.window);
    ucx_wait(e, 1, 1);
    return e->lens[opt.window] == ack_len() + 1;
}

static void ucx_teardown(ent_t *e, int n)
{
    for (int i = 0; i < n; i++) {
        ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
        ucs_status_ptr_t r = ucp_ep_close_nbx(e[i].ep, &p);
        if (UCS_PTR_IS_PTR(r)) {
            while (ucp_request_check_status(r) == UCS_INPROGRESS)
                ucp_worker_progress(e[i].w);
            ucp_request_free(r);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++)
        ucp_worker_destroy(e[i].w);
    ucp_cleanup(ucx_ctx);
}

static const backend_t ucx_backend = { ucx_setup, ucx_post_recvs, ucx_post_sends, ucx_wait,
                                       ucx_send_ack, ucx_recv_ack, ucx_teardown };
#endif

/* ------------------------------------------------------------ libfabric */

#ifdef HAVE_LIBFABRIC
static struct fi_info *fab_info;
static struct fid_fabric *fab;

static const char *fab_setup(ent_t *e, int n)
{
    if (n < 1 || n > MAX_THREADS)
        return "bad thread count";
    struct fi_info *hints = fi_allocinfo();
    if (!hints)
        return "fi_allocinfo failed";
    /* What the shim's libfabric lane asks for (src/transport/fabric.c). */
    hints->caps = FI_TAGGED | FI_DIRECTED_RECV;
    hints->mode = FI_CONTEXT | FI_CONTEXT2;
    hints->ep_attr->type = FI_EP_RDM;
    hints->domain_attr->threading = FI_THREAD_DOMAIN;
    hints->domain_attr->mr_mode = 0;
    hints->domain_attr->av_type = FI_AV_TABLE;
    hints->domain_attr->control_progress = FI_PROGRESS_MANUAL;
    hints->domain_attr->data_progress = FI_PROGRESS_MANUAL;
    hints->tx_attr->msg_order = FI_ORDER_SAS;
    hints->rx_attr->msg_order = FI_ORDER_SAS;
    hints->fabric_attr->prov_name = strdup(opt.backend);
    int rc = fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, hints, &fab_info);
    fi_freeinfo(hints);
    if (rc != 0)
        return "fi_getinfo found no such provider with tagged RDM endpoints";
    if (fi_fabric(fab_info->fabric_attr, &fab, NULL))
        return "fi_fabric failed";
    unsigned char names[MAX_THREADS][256];
    size_t nlen = 0;
    for (int i = 0; i < n; i++) {
        struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
        struct fi_av_attr ava = { .type = FI_AV_TABLE };
        if (fi_domain(fab, fab_info, &e[i].dom, NULL) || fi_cq_open(e[i].dom, &cqa, &e[i].cq, NULL) ||
            fi_av_open(e[i].dom, &ava, &e[i].av, NULL) || fi_endpoint(e[i].dom, fab_info, &e[i].fep, NULL) ||
            fi_ep_bind(e[i].fep, &e[i].cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(e[i].fep, &e[i].av->fid, 0) ||
            fi_enable(e[i].fep))
            return "opening a libfabric domain, queue, vector or endpoint failed";
        size_t l = sizeof names[i];
        memset(names[i], 0, l);
        if (fi_getname(&e[i].fep->fid, names[i], &l))
            return "fi_getname failed";
        if (l > nlen)
            nlen = l;
        e[i].ctx = calloc((size_t)opt.window + 1, sizeof *e[i].ctx);
        if (!e[i].ctx)
            return "out of memory";
    }
    nlen = max_all(nlen);
    unsigned char *mine = calloc((size_t)n, nlen);
    if (!mine)
        return "out of memory";
    for (int i = 0; i < n; i++)
        memcpy(mine + nlen * (size_t)i, names[i], nlen);
    unsigned char *peer = exchange(mine, nlen, n);
    for (int i = 0; i < n; i++)
        if (fi_av_insert(e[i].av, peer + nlen * (size_t)i, 1, &e[i].peer, 0, NULL) != 1)
            return "fi_av_insert failed";
    free(peer);
    free(mine);
    return NULL;
}

/* One read of the queue: each completion counts for its direction; a
 * receive's length goes to its slot (its context's index). */
static void fab_progress_once(ent_t *e)
{
    struct fi_cq_tagged_entry c[16];
    ssize_t got = fi_cq_read(e->cq, c, 16);
    if (got == -FI_EAGAIN)
        return;
    if (got < 0) {
        struct fi_cq_err_entry err = { 0 };
        fi_cq_readerr(e->cq, &err, 0);
        fail("a libfabric operation failed: %s", fi_strerror(err.err));
    }
    for (ssize_t i = 0; i < got; i++) {
        int recv = (c[i].flags & FI_RECV) != 0;
        if (recv)
            e->lens[(struct fi_context2 *)c[i].op_context - e->ctx] = c[i].len;
        e->done[recv]++;
    }
}

static void fab_wait(ent_t *e, int dir, int n)
{
    while (e->done[dir] < n)
        fab_progress_once(e);
    e->done[dir] -= n;
}

static void fab_recv(ent_t *e, void *buf, size_t len, uint64_t tag, int slot)
{
    ssize_t rc;
    while ((rc = fi_trecv(e->fep, buf, len, NULL, e->peer, tag, 0, &e->ctx[slot])) == -FI_EAGAIN)
        fab_progress_once(e);
    if (rc)
        fail("fi_trecv: %s", fi_strerror((int)-rc));
}

static void fab_send(ent_t *e, const void *buf, size_t len, uint64_t tag, int slot)
{
    ssize_t rc;
    while ((rc = fi_tsend(e->fep, buf, len, NULL, e->peer, tag, &e->ctx[slot])) == -FI_EAGAIN)
        fab_progress_once(e);
    if (rc)
        fail("fi_tsend: %s", fi_strerror((int)-rc));
}

static void fab_post_recvs(ent_t *e, int n, size_t len)
{
    for (int k = 0; k < n; k++)
        fab_recv(e, e->buf + (size_t)k * len, len, TAG_DATA, k);
}

static void fab_post_sends(ent_t *e, int n, size_t len)
{
    for (int k = 0; k < n; k++)
        fab_send(e, e->buf + (size_t)k * len, len, TAG_DATA, k);
}

static void fab_send_ack(ent_t *e, int stop)
{
    fab_send(e, e->ack, ack_len() + (size_t)stop, TAG_ACK, opt.window);
    fab_wait(e, 0, 1);
}

static int fab_recv_ack(ent_t *e)
{
    fab_recv(e, e->ack, ack_len() + 1, TAG_ACK, opt.window);
    fab_wait(e, 1, 1);
    return e->lens[opt.window] == ack_len() + 1;
}

static void fab_teardown(ent_t *e, int n)
{
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < n; i++) {
        fi_close(&e[i].fep->fid);
        fi_close(&e[i].av->fid);
        fi_close(&e[i].cq->fid);
        fi_close(&e[i].dom->fid);
        free(e[i].ctx);
    }
    fi_close(&fab->fid);
    fi_freeinfo(fab_info);
}

static const backend_t fab_backend = { fab_setup, fab_post_recvs, fab_post_sends, fab_wait,
                                       fab_send_ack, fab_recv_ack, fab_teardown };
#endif

/* ------------------------------------------------------------ the pattern */

static const backend_t *be;

static void start_timing(void)
{
    pthread_barrier_wait(&gate); /* everyone warmed up ...      */
    pthread_barrier_wait(&gate); /* ... main has taken the time */
}

static void *sender(void *arg)
{
    ent_t *e = arg;
    const size_t S = (size_t)opt.size;
    for (long win = 0;; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();
        for (int k = 0; k < opt.window && S > 0; k++) {
            e->buf[(size_t)k * S] = stamp(e->id, win, k);
            e->buf[(size_t)k * S + S - 1] = (unsigned char)~stamp(e->id, win, k);
        }
        be->post_sends(e, opt.window, S);
        be->wait(e, 0, opt.window);
        int stop = be->recv_ack(e);
        e->mismatches += e->lens[opt.window] != ack_len() && e->lens[opt.window] != ack_len() + 1;
        if (win >= WARMUP_WINDOWS)
            e->windows++;
        if (stop)
            return NULL;
    }
}

static void *receiver(void *arg)
{
    ent_t *e = arg;
    const size_t S = (size_t)opt.size;
    be->post_recvs(e, opt.window, S);
    for (long win = 0;; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();
        be->wait(e, 1, opt.window);
        for (int k = 0; k < opt.window; k++) {
            e->mismatches += e->lens[k] != S;
            if (S > 0)
                e->mismatches += e->buf[(size_t)k * S] != stamp(e->id, win, k) ||
                                 e->buf[(size_t)k * S + S - 1] != (unsigned char)~stamp(e->id, win, k);
        }
        int stop = 0;
        if (win >= WARMUP_WINDOWS) {
            e->windows++;
            stop = opt.seconds > 0 ? now() - t_start >= opt.seconds : e->windows >= opt.iters;
        }
        if (!stop)
            be->post_recvs(e, opt.window, S);
        be->send_ack(e, stop);
        if (stop)
            return NULL;
    }
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f, "usage: mpirun -np 2 ceiling [-b ucx|shm|tcp;ofi_rxm|PROVIDER] [-t T] [-s BYTES] [-w WINDOW]\n"
               "                            [-d SECONDS | -i WINDOWS] [-p] [-q] [-c] [-o]\n"
               "  T threads per process, each on an endpoint of its own (a UCX worker, or a\n"
               "  libfabric endpoint in a domain of its own); thread i of rank 2k streams windows\n"
               "  of tagged messages to thread i of rank 2k+1. No MPI call while timed.\n"
               "  -p: each window's ack carries BYTES too (-w 1 -p: a ping-pong).\n"
               "  -c, -o: accepted for multirate's command lines; no effect.\n");
}

static int parse(int argc, char **argv)
{
    int c;
    char *end;
    while ((c = getopt(argc, argv, "b:t:s:w:d:i:pqcoh")) != -1) {
        switch (c) {
        case 'b': opt.backend = optarg; break;
        case 't': opt.threads = (int)strtol(optarg, &end, 10); if (*end || opt.threads < 1 || opt.threads > MAX_THREADS) return -1; break;
        case 's': opt.size = (int)strtol(optarg, &end, 10); if (*end || opt.size < 0 || opt.size > (1 << 20)) return -1; break;
        case 'w': opt.window = (int)strtol(optarg, &end, 10); if (*end || opt.window < 1 || opt.window > 100000) return -1; break;
        case 'd': opt.seconds = strtod(optarg, &end); if (*end || opt.seconds <= 0) return -1; break;
        case 'i': opt.iters = strtol(optarg, &end, 10); if (*end || opt.iters < 1) return -1; break;
        case 'p': opt.pong = 1; break;
        case 'q': opt.quiet = 1; break;
        case 'c': case 'o': break;
        case 'h': return 1;
        default: return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

int main(int argc, char **argv)
{
    int nranks;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int p = parse(argc, argv);
    if (p != 0) {
        if (rank == 0)
            usage(p > 0 ? stdout : stderr);
        MPI_Finalize();
        return p > 0 ? 0 : 2;
    }
    if (nranks != 2)
        fail("needs exactly 2 processes (mpirun -np 2), got %d", nranks);
    is_sender = rank % 2 == 0;
    if (strcmp(opt.backend, "ucx") == 0) {
#ifdef HAVE_UCX
        be = &ucx_backend;
#else
        fail("built without UCX (libucx-dev)");
#endif
    } else {
#ifdef HAVE_LIBFABRIC
        be = &fab_backend;
#else
        fail("built without libfabric (libfabric-dev)");
#endif
    }
    const int T = opt.threads;
    ent_t *e = calloc((size_t)T, sizeof *e);
    if (!e)
        fail("out of memory");
    const char *err = be->setup(e, T);
    if (err)
        fail("%s: %s", opt.backend, err);
    for (int i = 0; i < T; i++) {
        e[i].id = i;
        e[i].buf = calloc((size_t)opt.window, (size_t)opt.size > 0 ? (size_t)opt.size : 1);
        e[i].lens = calloc((size_t)opt.window + 1, sizeof *e[i].lens);
        e[i].ack = calloc(ack_len() + 1, 1);
        if (!e[i].buf || !e[i].lens || !e[i].ack)
            fail("out of memory");
    }
    pthread_barrier_init(&gate, NULL, (unsigned)T + 1);
    for (int i = 0; i < T; i++)
        if (pthread_create(&e[i].thread, NULL, is_sender ? sender : receiver, &e[i]) != 0)
            fail("pthread_create failed");
    pthread_barrier_wait(&gate);
    MPI_Barrier(MPI_COMM_WORLD);
    t_start = now();
    pthread_barrier_wait(&gate);
    for (int i = 0; i < T; i++)
        pthread_join(e[i].thread, NULL);
    double elapsed = now() - t_start;
    pthread_barrier_destroy(&gate);

    long mism = 0, msgs_local = 0;
    for (int i = 0; i < T; i++) {
        mism += e[i].mismatches;
        if (!is_sender)
            msgs_local += e[i].windows * opt.window;
    }
    be->teardown(e, T);
    for (int i = 0; i < T; i++) {
        free(e[i].buf);
        free(e[i].lens);
        free(e[i].ack);
    }
    free(e);

    double seconds;
    long msgs, total_mism;
    MPI_Reduce(&elapsed, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&msgs_local, &msgs, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mism, &total_mism, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        double rate = seconds > 0 ? (double)msgs / seconds / 1e6 : 0;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        if (!opt.quiet)
            printf("# ceiling: %s, %d thread%s per process, each on its own endpoint; no MPI while timed\n",
                   opt.backend, T, T == 1 ? "" : "s");
        printf("multirate mode=ceiling-%s T=%d size=%d window=%d comm=own overtaking=0 msgs=%ld seconds=%.6f "
               "mmsgs_per_s=%.6f ranks=%d threads_per_rank=%d cores=%ld mismatches=%ld",
               opt.backend, T, opt.size, opt.window, msgs, seconds, rate, nranks, T, cpus, total_mism);
        /* A ping-pong: each thread's round trips are its windows. */
        if (opt.window == 1 && opt.pong && msgs > 0)
            printf(" half_rtt_us=%.3f", seconds * 1e6 / ((double)msgs / T) / 2);
        printf("\n");
        if (total_mism)
            fprintf(stderr, "ceiling: ERROR: %ld mismatches (payload bytes or lengths)\n", total_mism);
        fflush(stdout);
    }
    MPI_Bcast(&total_mism, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return total_mism ? 1 : 0;
}
