/* The fabric transport: each VCI owns a libfabric domain, endpoint,
 * completion queue and address vector, so that threads on different VCIs
 * share no lock with each other or with the host (the way MPICH's ch4/ofi
 * gives each VCI its own endpoint: Zambre, Chandramowliswharan and Balaji,
 * "How I learned to stop worrying about user-visible endpoints and love
 * MPI", ICS 2020).
 *
 * VCI i of every process talks to VCI i of every other; the endpoint names
 * are exchanged once, at init, through the host (MPI_COMM_WORLD). The
 * communicators the fabric carries are the intra-communicators made from
 * MPI_COMM_WORLD that the shim registers (msh_tp_comm_add); every other
 * communicator, and the host's own requests (collectives), stay with the
 * host transport this one wraps, so that a communicator's messages are
 * matched by one transport only.
 *
 * Matching is the provider's tagged matching. A message's 64-bit tag:
 *   bit 63      an acknowledgement (synchronous sends, below: the tag
 *               is this bit alone); with
 *   bit 62      a large message's bulk (providers without FI_PEEK, below)
 *   bits 32-61  the communicator's fabric id
 *   bits 0-31   the MPI tag (the bulk's: a sequence number)
 * The remote data (64 bits) carries the sender's rank in the communicator
 * (low half) and, for a synchronous send, its number (bits 32-62, never
 * 0), which is all an acknowledgement's data; bit 63 marks a large
 * message's header. A receive therefore ignores no tag bit unless it takes
 * MPI_ANY_TAG (the low 32).
 * A receive from a given source is a directed receive (FI_DIRECTED_RECV)
 * from that process's endpoint. The
 * provider keeps messages from one sender in order (FI_ORDER_SAS), which
 * with in-order matching gives MPI's non-overtaking rule.
 *
 * A synchronous send completes once its receive has matched: the receiver
 * answers a matched synchronous message with an empty acknowledgement
 * whose data names the send (its request's slot), and the sender takes
 * every acknowledgement with one standing receive. A receive posted per
 * send would hold one of the provider's bounded receive entries for as
 * long as the send waits for its match, and sends waiting for receives
 * the peer posts later would fill them (tcp;ofi_rxm holds about a
 * thousand): no later send could go, the ones the peer waits for included.
 *
 * Datatypes: a named type goes straight from or to the user's buffer; any
 * other is packed (send) or received into a packed buffer and unpacked.
 *
 * Locking: everything runs under the VCI's lock (FI_THREAD_DOMAIN), which
 * is what keeps one VCI's domain from ever being touched by two threads.
 *
 * libfabric is loaded with dlopen when a job asks for it (MPISHIM_FABRIC):
 * Debian's build pulls in PSM libraries whose start-up costs and signal
 * handlers no job without the fabric should pay. */
#include "transport/transport.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"

#ifndef HAVE_LIBFABRIC

msh_tp *msh_tp_fabric_open(int idx, const char **why);
msh_tp *msh_tp_fabric_open(int idx, const char **why)
{
    (void)idx;
    *why = "built without libfabric";
    return NULL;
}

#else

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_tagged.h>

#include "core/rebind.h"
#include "transport/lane.h"

#define TAG_ACK (1ULL << 63)
#define TAG_BULK_BIT (1ULL << 62)
#define TAG_CID_SHIFT 32
#define CID_BITS 30
#define TAG_LOW 0xffffffffULL
/* Without FI_PEEK (below): the bulk of a large message, and the remote
 * data's mark of its header. */
#define TAG_BULK (TAG_ACK | TAG_BULK_BIT)
#define DATA_HDR (1ULL << 63)
#define SYNC_SEQ(data) ((uint32_t)((data) >> 32) & 0x7fffffffu)
#define EAGER_MAX 65536
/* rxm's shared receive buffers per endpoint (job_open) */
#define RXM_MSG_RX "512"
#define HDR_LEN 16

/* ------------------------------------------------------------ the job */

/* What every VCI shares: the library, the provider's description, the
 * fabric object, the world's size and this process's rank in it. */
static struct {
    void *lib;
    int (*getinfo)(uint32_t, const char *, const char *, uint64_t, const struct fi_info *, struct fi_info **);
    void (*freeinfo)(struct fi_info *);
    struct fi_info *(*dupinfo)(const struct fi_info *);
    int (*fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
    struct fi_info *info;
    struct fid_fabric *fab;
    int wsize, wrank;
    int failed; /* the job agreed not to use the fabric */
    int nopeek; /* the provider ignores FI_PEEK and FI_CLAIM */
    int shm_mapped_at_insert; /* shm maps a peer's file when its address is inserted */
    size_t rx_min; /* receives shorter than this land in scratch memory of this size */
    char prov[64];
} job;

/* A communicator the fabric carries (lane.h); its id sits at
 * TAG_CID_SHIFT. */
typedef msh_lane_comm fab_comm;

static inline fab_comm *comm_of(MPI_Comm c)
{
    return msh_lane_comm_of(c);
}

/* The PSM libraries Debian's libfabric links (libpsm2, libpsm_infinipath)
 * serve Omni-Path and TrueScale adapters only, and their constructors
 * sleep 100 ms each. On a node without such an adapter the stand-ins built
 * beside the shim (tools/psmstub.sh: same names, every function failing)
 * are loaded first: the loader then takes them for libfabric's
 * dependencies, and its psm and psm2 providers find nothing, as they would
 * on that node anyway. Not when libfabric is in the process already. */
static const char *const psm_names[] = { "libpsm2.so.2", "libpsm_infinipath.so.1" };
static void *psm_stub[2];

static int psm_adapter(void)
{
    DIR *d = opendir("/dev");
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = strncmp(e->d_name, "hfi1", 4) == 0 || strncmp(e->d_name, "ipath", 5) == 0;
    if (d)
        closedir(d);
    return found;
}

static void psm_stubs_close(void)
{
    for (int i = 0; i < 2; i++)
        if (psm_stub[i])
            dlclose(psm_stub[i]);
    psm_stub[0] = psm_stub[1] = NULL;
}

static void psm_stubs_open(void)
{
    void *loaded = dlopen("libfabric.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (loaded) {
        dlclose(loaded);
        return;
    }
    Dl_info self;
    if (psm_adapter() || !dladdr((void *)psm_stubs_open, &self) || !self.dli_fname)
        return;
    const char *slash = strrchr(self.dli_fname, '/');
    int dirlen = slash ? (int)(slash - self.dli_fname) : 1;
    const char *dir = slash ? self.dli_fname : ".";
    /* Each one that was built (none where libfabric links no PSM). */
    for (int i = 0; i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%.*s/psmstub/%s", dirlen, dir, psm_names[i]);
        psm_stub[i] = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
}

/* Load libfabric's handful of real functions (the rest are inline calls
 * through the objects' operation tables). */
static const char *load(void)
{
    /* The PSM libraries, where they load, install signal handlers unless
     * told not to; the host's crash reports must stay the host's. */
    setenv("IPATH_NO_BACKTRACE", "1", 0);
    setenv("HFI_NO_BACKTRACE", "1", 0);
    psm_stubs_open();
    job.lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!job.lib && (psm_stub[0] || psm_stub[1])) {
        /* A libfabric that wants more of PSM than the stand-ins have. */
        msh_log("fabric: libfabric refused the PSM stand-ins (%s); loading the PSM libraries", dlerror());
        psm_stubs_close();
        job.lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    }
    if (!job.lib)
        return "cannot load libfabric.so.1";
    *(void **)&job.getinfo = dlsym(job.lib, "fi_getinfo");
    *(void **)&job.freeinfo = dlsym(job.lib, "fi_freeinfo");
    *(void **)&job.dupinfo = dlsym(job.lib, "fi_dupinfo");
    *(void **)&job.fabric = dlsym(job.lib, "fi_fabric");
    if (!job.getinfo || !job.freeinfo || !job.dupinfo || !job.fabric)
        return "libfabric.so.1 lacks fi_getinfo, fi_freeinfo, fi_dupinfo or fi_fabric";
    return NULL;
}

static const char *provider_name(void)
{
    switch (msh_cfg.fabric) {
    case MSH_FABRIC_SHM:   return "shm";
    case MSH_FABRIC_TCP:   return "tcp;ofi_rxm";
    case MSH_FABRIC_VERBS: return "verbs;ofi_rxm";
    default:               return msh_lane_one_node() ? "shm" : "tcp;ofi_rxm";
    }
}

/* The longest message rxm sends eagerly: its buffer size, 16 KiB unless
 * its variables say more. */
static size_t rxm_eager_bytes(void)
{
    static const char *const vars[] = { "FI_OFI_RXM_BUFFER_SIZE", "FI_OFI_RXM_EAGER_LIMIT" };
    size_t n = 16384;
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(vars[i]);
        unsigned long long x = v ? strtoull(v, NULL, 0) : 0;
        if (x > n && x <= (1ULL << 30))
            n = (size_t)x;
    }
    return n;
}

/* libfabric's verbs provider, which the first query starts whatever
 * provider it names, reads all of /proc/kallsyms twice to learn whether
 * the kernel registers dma-buf memory: most of a libfabric lane's start-up
 * (docs/design.md). Only an RDMA device could use the answer, so on a node
 * without one libfabric's own calls to fopen find no such file during the
 * query (core/rebind.h); nothing else in the process is touched. */
static FILE *quiet_fopen(const char *path, const char *mode)
{
    if (path && strcmp(path, "/proc/kallsyms") == 0) {
        errno = ENOENT;
        return NULL;
    }
    return fopen(path, mode);
}

static int rdma_device(void)
{
    DIR *d = opendir("/sys/class/infiniband");
    int found = 0;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        found = e->d_name[0] != '.';
    if (d)
        closedir(d);
    return found;
}

static int getinfo_quiet(const struct fi_info *hints, struct fi_info **info)
{
    static const char *const names[] = { "fopen", "fopen64" };
    msh_rebind rb[2] = { { .n = 0 }, { .n = 0 } };
    if (!rdma_device())
        for (int i = 0; i < 2; i++)
            msh_rebind_import(job.lib, names[i], (void *)quiet_fopen, &rb[i]);
    int rc = job.getinfo(FI_VERSION(1, 9), NULL, NULL, 0, hints, info);
    for (int i = 0; i < 2; i++)
        msh_rebind_restore(&rb[i]);
    return rc;
}

static const char *query(const char *prov)
{
    struct fi_info *hints = job.dupinfo(NULL);
    if (!hints)
        return "out of memory";
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
    hints->fabric_attr->prov_name = strdup(prov);
    int rc = getinfo_quiet(hints, &job.info);
    job.freeinfo(hints);
    if (rc != 0 || !job.info)
        return "the provider offers no tagged, ordered, directed-receive endpoint";
    if (job.info->domain_attr->cq_data_size < 8)
        return "the provider's remote data is under 8 bytes";
    snprintf(job.prov, sizeof job.prov, "%s", job.info->fabric_attr->prov_name);
    /* Before libfabric 1.19 the shm provider takes FI_PEEK for an
     * ordinary receive, so probes hold what they find themselves
     * (peek_held), and it matches a message that arrived before its
     * receive with a stale ignore mask (that of the last receive its
     * entry served), so only exact tags are safe: it carries only
     * communicators that assert no_any_tag. */
    uint32_t (*version)(void) = NULL;
    *(void **)&version = dlsym(job.lib, "fi_version");
    job.nopeek = strcmp(job.prov, "shm") == 0 && (!version || version() < FI_VERSION(1, 19));
    /* From 1.20 shm maps a peer's file at the first message instead. */
    job.shm_mapped_at_insert = strcmp(job.prov, "shm") == 0 && version && version() < FI_VERSION(1, 20);
    /* libfabric 1.17's tcp fails a receive that truncates an eager message
     * when rxm handed it the program's buffer (its dynamic receive
     * buffers), and drops the connection. A receive shorter than rxm's
     * eager messages lands in scratch memory as long as they are, so that
     * none is ever truncated by the provider, and is cut here. */
    if (strstr(job.prov, "tcp") && strstr(job.prov, "rxm"))
        job.rx_min = rxm_eager_bytes();
    if (job.fabric(job.info->fabric_attr, &job.fab, NULL) != 0)
        return "fi_fabric failed";
    return NULL;
}

/* Once, for VCI 0 (every process opens its VCIs in the same order, at
 * init): load, choose the provider, and agree: if any process cannot, no
 * process uses the fabric. */
static const char *job_open(void)
{
    PMPI_Comm_size(MPI_COMM_WORLD, &job.wsize);
    PMPI_Comm_rank(MPI_COMM_WORLD, &job.wrank);
    /* rxm posts 4096 receive buffers of 16 KiB on each endpoint's shared
     * receive context unless told how many: some 70 MB and 0.13 s at
     * start-up per VCI. libfabric reads its variables once, in the first
     * fi_getinfo; a user's own setting wins, and children inherit only
     * what the user set. */
    int set_rx = !getenv("FI_OFI_RXM_MSG_RX_SIZE") &&
                 setenv("FI_OFI_RXM_MSG_RX_SIZE", RXM_MSG_RX, 1) == 0;
    const char *why = load();
    const char *prov = provider_name();
    if (!why)
        why = query(prov);
    if (set_rx)
        unsetenv("FI_OFI_RXM_MSG_RX_SIZE");
    if (!msh_lane_all_ok(!why)) {
        job.failed = 1;
        return why ? why : "another process cannot open it";
    }
    return NULL;
}

/* ------------------------------------------------------------ requests */

enum { OP_SEND, OP_RECV, OP_PROBE, OP_ACK };
enum { CTX_MAIN, CTX_ACKS, CTX_BULK };

struct fab_req;
typedef struct fab_ctx {
    struct fi_context2 f; /* the provider's, first */
    struct fab_req *req;
    int which;
} fab_ctx;

typedef struct fab_req {
    msh_lane_req b;      /* first (lane.h) */
    fab_ctx main, bulk;
    /* What the fabric does with it; b.mode (MSH_TP_BSEND and MSH_TP_SSEND
     * only with OP_SEND) is tested alone where it decides. */
    uint8_t op;
    int pending;         /* completions still to come */
    size_t len;
    int probe_found;
    /* waiting in the backlog: what is left to issue */
    struct fab_req *next;
    void *buf;
    uint8_t ack_wait;    /* a synchronous send went: its acknowledgement is to come */
    /* Without FI_PEEK, a message over EAGER_MAX goes as a header (its
     * length and a sequence number) and then its bulk, on a tag of its
     * own, so that a probe never needs more than EAGER_MAX bytes. */
    uint8_t hdr_sent, bulk_wait;
    uint32_t bulk_seq;
    size_t bulk_len;
    fi_addr_t bulk_from;
    void *scratch;       /* a truncated bulk, or a short receive's landing (rx_min) */
    void *rbuf;          /* what the receive was posted with: buf, hdr or scratch */
    struct fab_held *held; /* the message a matched probe holds */
    char hdr[HDR_LEN];
    fi_addr_t ack_to;    /* OP_ACK */
    uint64_t ack_tag;    /* a synchronous send's number; OP_ACK's data */
} fab_req;

typedef struct fab_held {
    struct fab_held *next;
    uint64_t tag, data;
    size_t len;          /* the message's (a large one's whole length) */
    int large;           /* only its header is here */
    uint32_t seq;
    char bytes[];
} fab_held;

typedef struct fab_tp {
    /* The host under it (everything the fabric does not carry), requests
     * and completions not yet polled, named types; its acknowledgements
     * in the backlog count as untracked work. */
    msh_lane_tp l;
    struct fid_domain *dom;
    struct fid_ep *ep;
    struct fid_cq *cq;
    struct fid_av *av;
    fi_addr_t *addr;     /* by world rank */
    /* Without FI_PEEK: messages a probe took off the endpoint, oldest
     * first, which receives match before the endpoint's. */
    struct fab_held *held, **held_tail;
    char *bounce;
    uint32_t seq;        /* large messages' bulk */
    fab_ctx acks;        /* the standing receive of acknowledgements */
    int acks_posted;
    /* Operations the provider could not take yet (-FI_EAGAIN), issued in
     * order by later progress: the poster never spins inside a post,
     * where it would wait for a peer that is itself spinning in a post on
     * another VCI. Later operations of the same kind queue behind them, to
     * keep order; sends (and acknowledgements) and receives (and bulk
     * receives) queue apart, so that a receive never waits behind a send
     * that waits for the peer to take its messages (BL_TX, BL_RX). */
    fab_req *bl_head[2], *bl_tail[2];
} fab_tp;

static inline fab_tp *fab_of(msh_tp *tp) { return (fab_tp *)tp; }

enum { BL_TX, BL_RX };

#define enc msh_lane_enc

static fab_req *req_new(fab_tp *f)
{
    fab_req *r = (fab_req *)msh_lane_req_new(&f->l.q, sizeof *r);
    if (r) {
        r->main.req = r->bulk.req = r;
        r->main.which = CTX_MAIN;
        r->bulk.which = CTX_BULK;
    }
    return r;
}

/* What a request holds besides its packed data (lane.h's drop). */
static void drop(msh_lane_req *b)
{
    fab_req *r = (fab_req *)b;
    free(r->scratch);
    free(r->held);
    r->scratch = NULL;
    r->held = NULL;
}

static inline void req_free(fab_tp *f, fab_req *r) { msh_lane_req_free(&f->l.q, &r->b); }
static inline fab_req *req_of(fab_tp *f, msh_tp_req t) { return (fab_req *)msh_lane_req_of(&f->l.q, t); }

/* ------------------------------------------------------------ completions */

static inline void finish(fab_tp *f, fab_req *r) { msh_lane_finish(&f->l.q, &r->b, f->l.base.idx); }

/* A receive's count and error, its data unpacked (derived types): len
 * bytes arrived of a message of whole bytes (more when truncated). */
static void recv_bytes(fab_req *r, size_t len, size_t whole, int err)
{
    MPI_Status *st = &r->b.status;
    st->MPI_ERROR = err;
    /* zeroed when issued: not cancelled */
    msh_lane_set_bytes(st, err == MPI_ERR_TRUNCATE ? msh_lane_trunc_bytes(len, whole) : len);
    int urc = r->b.tmp && len > 0 ? msh_lane_unpack(r->b.tmp, len, r->b.ubuf, r->b.dt) : MPI_SUCCESS;
    if (urc != MPI_SUCCESS && err == MPI_SUCCESS) {
        st->MPI_ERROR = urc;
        msh_lane_set_bytes(st, 0);
    }
}

static void recv_status(fab_req *r, uint64_t tag, uint64_t data, size_t len, size_t whole, int err)
{
    r->b.status.MPI_SOURCE = (int)(uint32_t)data;
    r->b.status.MPI_TAG = (int)(tag & TAG_LOW);
    recv_bytes(r, len, whole, err);
}

static int read_cq(fab_tp *f);
static void backlog_add(fab_tp *f, fab_req *r);

/* A large message's sequence number (its bulk's tag): 1 to 2^31 - 1. */
static inline uint32_t next_seq(fab_tp *f)
{
    f->seq = f->seq % 0x7fffffffu + 1;
    return f->seq;
}

/* Answer a matched synchronous message from the communicator's rank src:
 * an empty message whose data is the send's number, taken by the
 * sender's standing receive (post_acks). */
static void send_ack(fab_tp *f, const fab_comm *fc, int src, uint64_t data)
{
    uint64_t seq = SYNC_SEQ(data);
    fi_addr_t to = f->addr[fc->world[src]];
    if (!f->bl_head[BL_TX] && fi_tinjectdata(f->ep, NULL, 0, seq, to, TAG_ACK) != -FI_EAGAIN)
        return;
    fab_req *a = req_new(f);
    if (!a) {
        msh_log("fabric: VCI %d: out of memory for an acknowledgement; a synchronous send may hang",
                f->l.base.idx);
        return;
    }
    a->op = OP_ACK;
    a->ack_to = to;
    a->ack_tag = seq;
    a->b.active = a->b.orphan = 1; /* nobody waits for it, but it must go (msh_lane_flush) */
    f->l.untracked++;
    backlog_add(f, a);
}

/* ---- without FI_PEEK: large messages in two parts, probes that hold */

static int fi_error(int rc)
{
    return rc == -FI_ENOMEM ? MPI_ERR_NO_MEM : MPI_ERR_OTHER;
}


/* Post the receive of a large message's bulk: into the buffer, or, when
 * it does not fit, into scratch memory that is then cut (truncation). */
static ssize_t try_bulk(fab_tp *f, fab_req *r)
{
    void *dst = r->buf;
    if (r->bulk_len > r->len) {
        if (!r->scratch && !(r->scratch = malloc(r->bulk_len)))
            return -FI_ENOMEM;
        dst = r->scratch;
    }
    ssize_t rc = fi_trecv(f->ep, dst, r->bulk_len, NULL, r->bulk_from, TAG_BULK | r->b.lc->cid_bits | r->bulk_seq, 0,
                          &r->bulk.f);
    if (rc == 0)
        r->bulk_wait = 0;
    return rc;
}

/* r matched the header of a large message: receive its bulk (one more
 * completion to come). */
static void head_of_large(fab_tp *f, fab_req *r, uint64_t tag, uint64_t data, size_t len, uint32_t seq)
{
    int src = (int)(uint32_t)data;
    r->b.status.MPI_SOURCE = src;
    r->b.status.MPI_TAG = (int)(tag & TAG_LOW);
    r->bulk_len = len;
    r->bulk_seq = seq;
    r->bulk_from = f->addr[r->b.lc->world[src]];
    if (SYNC_SEQ(data))
        send_ack(f, r->b.lc, src, data);
    r->pending++;
    r->bulk_wait = 1;
    ssize_t rc = f->bl_head[BL_RX] ? -FI_EAGAIN : try_bulk(f, r);
    if (rc == -FI_EAGAIN) {
        backlog_add(f, r);
    } else if (rc) {
        r->b.status.MPI_ERROR = fi_error((int)rc);
        r->pending--;
    }
}

/* Copy len bytes that arrived elsewhere into r's buffer, cut to its size
 * (then *err says so); returns what was copied. */
static size_t cut_into(fab_req *r, const void *src, size_t len, int *err)
{
    if (len > r->len) {
        len = r->len;
        *err = MPI_ERR_TRUNCATE;
    }
    if (len)
        memcpy(r->buf, src, len);
    return len;
}

static void bulk_done(fab_req *r)
{
    size_t len = r->bulk_len;
    int err = MPI_SUCCESS;
    if (r->scratch) { /* only when the bulk did not fit */
        len = cut_into(r, r->scratch, len, &err);
        free(r->scratch);
        r->scratch = NULL;
    }
    recv_bytes(r, len, r->bulk_len, err);
}

static fab_held **held_find(fab_tp *f, const fab_comm *fc, int source, int tag)
{
    fab_held **pp = &f->held;
    for (; *pp; pp = &(*pp)->next) {
        const fab_held *h = *pp;
        if ((h->tag & ~TAG_LOW) == fc->cid_bits &&
            (source == MPI_ANY_SOURCE || (int)(uint32_t)h->data == source) &&
            (tag == MPI_ANY_TAG || (int)(h->tag & TAG_LOW) == tag))
            break;
    }
    return pp;
}

static fab_held *held_take(fab_tp *f, fab_held **pp)
{
    fab_held *h = *pp;
    *pp = h->next;
    if (f->held_tail == &h->next)
        f->held_tail = pp;
    h->next = NULL;
    return h;
}

/* A probe's receive caught a message in the bounce buffer: keep it. */
static void hold(fab_tp *f, const struct fi_cq_tagged_entry *e)
{
    int large = (e->data & DATA_HDR) != 0;
    fab_held *h = malloc(sizeof *h + (large ? 0 : e->len));
    if (!h) {
        msh_log("fabric: VCI %d: out of memory: a probed message is lost", f->l.base.idx);
        return;
    }
    h->next = NULL;
    h->tag = e->tag;
    h->data = e->data & ~DATA_HDR;
    h->large = large;
    h->seq = 0;
    if (large) {
        uint64_t len;
        memcpy(&len, f->bounce, 8);
        memcpy(&h->seq, f->bounce + 8, 4);
        h->len = (size_t)len;
    } else {
        h->len = e->len;
        if (e->len)
            memcpy(h->bytes, f->bounce, e->len);
    }
    *f->held_tail = h;
    f->held_tail = &h->next;
}

/* Receive r from a held message (r is issued: one completion pending). */
static void deliver_held(fab_tp *f, fab_req *r, fab_held *h)
{
    if (h->large) {
        head_of_large(f, r, h->tag, h->data, h->len, h->seq);
    } else {
        int err = MPI_SUCCESS;
        size_t len = cut_into(r, h->bytes, h->len, &err);
        recv_status(r, h->tag, h->data, len, h->len, err);
        if (SYNC_SEQ(h->data))
            send_ack(f, r->b.lc, (int)(uint32_t)h->data, h->data);
    }
    free(h);
    if (--r->pending == 0)
        finish(f, r);
}

/* A receive's message came: len bytes of whole (more when the provider
 * truncated it). */
static void on_recv(fab_tp *f, fab_req *r, uint64_t tag, uint64_t data, size_t len, size_t whole, int err)
{
    if (job.nopeek && (data & DATA_HDR) && err == MPI_SUCCESS) {
        uint64_t blen;
        uint32_t seq;
        memcpy(&blen, r->rbuf, 8);
        memcpy(&seq, (char *)r->rbuf + 8, 4);
        head_of_large(f, r, tag, data & ~DATA_HDR, (size_t)blen, seq);
        return;
    }
    if (r->rbuf == r->hdr) { /* a buffer under HDR_LEN bytes, without FI_PEEK */
        len = cut_into(r, r->hdr, len, &err);
    } else if (r->scratch && r->rbuf == r->scratch) { /* a short receive (rx_min) */
        len = cut_into(r, r->scratch, len, &err);
        free(r->scratch);
        r->scratch = NULL;
    }
    recv_status(r, tag, data, len, whole, err);
    if (SYNC_SEQ(data))
        send_ack(f, r->b.lc, (int)(uint32_t)data, data);
}

/* Post the standing receive of acknowledgements: from any process, for
 * any send. No tag bit is ignored (libfabric 1.17's shm provider would
 * apply an ignore mask to later receives its entry serves: see job.nopeek),
 * so the send is named in the data. Retried by
 * progress while the provider cannot take it; an acknowledgement that
 * comes meanwhile waits in the provider as unexpected. */
static void post_acks(fab_tp *f)
{
    if (f->l.closed)
        return;
    ssize_t rc = fi_trecv(f->ep, NULL, 0, NULL, FI_ADDR_UNSPEC, TAG_ACK, 0, &f->acks.f);
    if (rc == 0)
        f->acks_posted = 1;
    else if (rc != -FI_EAGAIN)
        msh_log("fabric: VCI %d: the receive of acknowledgements failed: error %d", f->l.base.idx, (int)rc);
}

/* The acknowledgement of the synchronous send in slot seq - 1 came. */
static void on_ack(fab_tp *f, uint64_t seq)
{
    f->acks_posted = 0;
    fab_req *r = req_of(f, enc((int)(seq & 0x7fffffffu) - 1));
    if (r && r->op == OP_SEND && r->ack_wait) {
        r->ack_wait = 0;
        if (--r->pending == 0)
            finish(f, r);
    } else {
        msh_log("fabric: VCI %d: an acknowledgement for no synchronous send (%u)", f->l.base.idx,
                (unsigned)(seq & 0x7fffffffu));
    }
    post_acks(f);
}

static void on_completion(fab_tp *f, const struct fi_cq_tagged_entry *e)
{
    fab_ctx *c = e->op_context;
    if (c->which == CTX_ACKS) {
        on_ack(f, e->data);
        return;
    }
    fab_req *r = c->req;
    if (r->op == OP_PROBE && job.nopeek) {
        hold(f, e);
        r->probe_found = 1;
        r->pending = 0;
        return;
    }
    if (r->op == OP_PROBE) {
        r->probe_found = 1;
        r->b.status.MPI_SOURCE = (int)(uint32_t)e->data;
        r->b.status.MPI_TAG = (int)(e->tag & TAG_LOW);
        r->b.status.MPI_ERROR = MPI_SUCCESS;
        msh_lane_set_bytes(&r->b.status, e->len); /* zeroed by peek */
        r->pending = 0;
        return;
    }
    if (c->which == CTX_MAIN && r->op == OP_RECV)
        on_recv(f, r, e->tag, e->data, e->len, e->len, MPI_SUCCESS);
    else if (c->which == CTX_BULK && r->op == OP_RECV)
        bulk_done(r);
    if (--r->pending == 0)
        finish(f, r);
}

static void on_error(fab_tp *f, const struct fi_cq_err_entry *e)
{
    fab_ctx *c = e->op_context;
    if (c->which == CTX_ACKS) {
        f->acks_posted = 0;
        if (e->err != FI_ECANCELED)
            msh_log("fabric: VCI %d: the receive of acknowledgements failed: error %d", f->l.base.idx, e->err);
        post_acks(f);
        return;
    }
    fab_req *r = c->req;
    if (r->op == OP_PROBE) {
        r->probe_found = 0; /* FI_ENOMSG: nothing there */
        r->pending = 0;
        return;
    }
    if (e->err == FI_ECANCELED) {
        r->b.status.MPI_ERROR = MPI_SUCCESS;
        PMPI_Status_set_cancelled(&r->b.status, 1);
    } else if (r->op == OP_RECV && c->which == CTX_MAIN) {
        /* Truncated: the buffer is full (len may say 0), olen bytes more
         * did not fit. */
        size_t len = e->err == FI_ETRUNC ? r->len : e->len;
        on_recv(f, r, e->tag, e->data, len, len + (e->err == FI_ETRUNC ? e->olen : 0),
                e->err == FI_ETRUNC ? MPI_ERR_TRUNCATE : MPI_ERR_OTHER);
    } else {
        r->b.status.MPI_ERROR = MPI_ERR_OTHER;
        msh_log("fabric: VCI %d: operation failed: error %d", f->l.base.idx, e->err);
    }
    if (--r->pending == 0)
        finish(f, r);
}

static int drain_backlog(fab_tp *f);

/* Read the completion queue until it is empty, then issue what waits. */
static int progress(fab_tp *f)
{
    int total = 0;
    if (f->l.closed)
        return 0;
    if (MSH_UNLIKELY(!f->acks_posted))
        post_acks(f);
    for (;;) {
        int n = read_cq(f);
        total += n;
        if ((!f->bl_head[BL_TX] && !f->bl_head[BL_RX]) || drain_backlog(f) == 0 || n == 0)
            return total;
    }
}
static int lane_progress(msh_lane_tp *l) { return progress((fab_tp *)l); }

static int read_cq(fab_tp *f)
{
    struct fi_cq_tagged_entry e[16];
    int total = 0;
    for (;;) {
        ssize_t n = fi_cq_read(f->cq, e, 16);
        if (n > 0) {
            for (ssize_t k = 0; k < n; k++)
                on_completion(f, &e[k]);
            total += (int)n;
            continue;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry err;
            memset(&err, 0, sizeof err);
            if (fi_cq_readerr(f->cq, &err, 0) > 0) {
                on_error(f, &err);
                total++;
                continue;
            }
        }
        return total;
    }
}

/* ------------------------------------------------------------ posting */

/* The bytes of r's operation (lane.h). */
static inline int buffer_of(fab_tp *f, fab_req *r, void **buf, size_t *len)
{
    return msh_lane_req_bytes(&f->l.named, &r->b, r->op == OP_SEND, r->b.ubuf, r->b.count, r->b.dt, buf, len);
}

/* What a receive or probe on fc matches: the source's endpoint (any, for
 * MPI_ANY_SOURCE), the tag, and the bits it ignores (MPI_ANY_TAG's). */
static inline fi_addr_t match_from(const fab_tp *f, const fab_comm *fc, int source)
{
    return source == MPI_ANY_SOURCE ? FI_ADDR_UNSPEC : f->addr[fc->world[source]];
}
static inline uint64_t match_tag(const fab_comm *fc, int tag)
{
    return fc->cid_bits | (tag == MPI_ANY_TAG ? 0 : (uint32_t)tag);
}
static inline uint64_t match_ignore(int tag)
{
    return tag == MPI_ANY_TAG ? TAG_LOW : 0;
}

/* Try to hand r to the provider: 0 when it took it, -FI_EAGAIN when it
 * cannot yet, another negative error. */
static ssize_t try_send(fab_tp *f, fab_req *r)
{
    fab_comm *fc = r->b.lc;
    fi_addr_t to = f->addr[fc->world[r->b.peer]];
    uint64_t tag = fc->cid_bits | (uint32_t)r->b.tag, data = (uint32_t)fc->rank;
    if (r->b.mode == MSH_TP_SSEND)
        data |= (uint64_t)r->ack_tag << 32;
    if (job.nopeek && r->len > EAGER_MAX) {
        if (!r->hdr_sent) {
            uint64_t len = r->len;
            memcpy(r->hdr, &len, 8);
            memcpy(r->hdr + 8, &r->bulk_seq, 4);
            ssize_t rc = fi_tsenddata(f->ep, r->hdr, HDR_LEN, NULL, data | DATA_HDR, to, tag, &r->main.f);
            if (rc)
                return rc;
            r->hdr_sent = 1;
            r->ack_wait = r->b.mode == MSH_TP_SSEND; /* the header matches */
        }
        return fi_tsend(f->ep, r->buf, r->len, NULL, to, TAG_BULK | fc->cid_bits | r->bulk_seq, &r->bulk.f);
    }
    ssize_t rc = fi_tsenddata(f->ep, r->buf, r->len, NULL, data, to, tag, &r->main.f);
    if (rc == 0)
        r->ack_wait = r->b.mode == MSH_TP_SSEND;
    return rc;
}

/* A receive shorter than rx_min lands in scratch memory (see rx_min);
 * 0 without memory. */
static int land_short(fab_req *r)
{
    if (!r->scratch && !(r->scratch = malloc(job.rx_min)))
        return 0;
    r->rbuf = r->scratch;
    return 1;
}

/* The bytes r's receive was posted with room for. */
static inline size_t room_of(const fab_req *r)
{
    if (r->rbuf == r->hdr)
        return HDR_LEN;
    return r->scratch && r->rbuf == r->scratch ? job.rx_min : r->len;
}

static ssize_t try_recv(fab_tp *f, fab_req *r)
{
    fab_comm *fc = r->b.lc;
    r->rbuf = r->buf;
    if (job.nopeek) {
        /* What a probe took off the endpoint came before anything still in it. */
        fab_held **pp = f->held ? held_find(f, fc, r->b.peer, r->b.tag) : NULL;
        if (pp && *pp) {
            deliver_held(f, r, held_take(f, pp));
            return 1;
        }
        if (r->len < HDR_LEN) /* room for a large message's header */
            r->rbuf = r->hdr;
    } else if (r->len < job.rx_min && !land_short(r)) {
        return -FI_ENOMEM;
    }
    return fi_trecv(f->ep, r->rbuf, room_of(r), NULL, match_from(f, fc, r->b.peer), match_tag(fc, r->b.tag),
                    match_ignore(r->b.tag), &r->main.f);
}

static ssize_t try_issue(fab_tp *f, fab_req *r)
{
    if (r->bulk_wait)
        return try_bulk(f, r);
    switch (r->op) {
    case OP_SEND: return try_send(f, r);
    case OP_RECV: return try_recv(f, r);
    default:      return fi_tinjectdata(f->ep, NULL, 0, r->ack_tag, r->ack_to, TAG_ACK);
    }
}

/* Which backlog r waits in. */
static inline int bl_of(const fab_req *r)
{
    return r->op == OP_RECV || r->bulk_wait ? BL_RX : BL_TX;
}

static void backlog_add(fab_tp *f, fab_req *r)
{
    int q = bl_of(r);
    r->next = NULL;
    if (f->bl_tail[q])
        f->bl_tail[q]->next = r;
    else
        f->bl_head[q] = r;
    f->bl_tail[q] = r;
}

/* r could not be issued: it ends, once what went is done (a large
 * message's header, and a synchronous one's acknowledgement, which the
 * header's match sends). */
static void fail_issued(fab_tp *f, fab_req *r)
{
    r->pending = r->ack_wait + r->hdr_sent; /* still to come */
    if (!r->pending)
        finish(f, r);
}

/* Issue backlog q in order while the provider takes it; returns how many
 * it took. An operation that fails ends with the error. */
static int drain_queue(fab_tp *f, int q)
{
    int n = 0;
    while (f->bl_head[q]) {
        fab_req *r = f->bl_head[q];
        int ack = r->op == OP_ACK;
        /* off the list first: a held message may end r at once, and a
         * large one's bulk receive may join the backlog */
        f->bl_head[q] = r->next;
        if (!f->bl_head[q])
            f->bl_tail[q] = NULL;
        ssize_t rc = try_issue(f, r);
        if (rc == -FI_EAGAIN) {
            r->next = f->bl_head[q];
            f->bl_head[q] = r;
            if (!f->bl_tail[q])
                f->bl_tail[q] = r;
            break;
        }
        n++;
        if (rc == 1) {
            /* received from a held message */
        } else if (ack) {
            f->l.untracked--;
            if (rc)
                msh_log("fabric: VCI %d: an acknowledgement failed: error %d", f->l.base.idx, (int)rc);
            req_free(f, r);
        } else if (rc) {
            r->b.status.MPI_ERROR = fi_error((int)rc);
            fail_issued(f, r);
        }
    }
    return n;
}

static int drain_backlog(fab_tp *f)
{
    return drain_queue(f, BL_RX) + drain_queue(f, BL_TX);
}

static int issue(fab_tp *f, fab_req *r);

/* A buffered send completes at once, whether or not a receive is posted
 * (a rendezvous would wait for it): a copy is sent by a request of its
 * own, which goes when the transfer is done. */
static int bsend(fab_tp *f, fab_req *r)
{
    fab_req *c = req_new(f);
    if (!c)
        return MPI_ERR_NO_MEM;
    size_t len = 0;
    int rc = msh_lane_copy(&f->l.named, r->b.ubuf, r->b.count, r->b.dt, &c->b.tmp, &len);
    if (rc != MPI_SUCCESS) {
        req_free(f, c);
        return rc;
    }
    c->op = OP_SEND;
    c->b.mode = MSH_TP_SEND;
    c->b.ubuf = c->b.tmp; /* its own bytes: freed when it finishes */
    c->b.count = (MPI_Count)len;
    c->b.dt = MPI_BYTE;
    c->b.peer = r->b.peer;
    c->b.tag = r->b.tag;
    c->b.lc = r->b.lc;
    c->b.orphan = 1;
    rc = issue(f, c); /* on failure it is gone, or goes once nothing more can come */
    if (rc != MPI_SUCCESS)
        return rc;
    finish(f, r);
    return MPI_SUCCESS;
}

static int issue(fab_tp *f, fab_req *r)
{
    if (r->b.mode == MSH_TP_BSEND)
        return bsend(f, r);
    memset(&r->b.status, 0, sizeof r->b.status);
    r->ack_wait = r->hdr_sent = r->bulk_wait = 0;
    int rc = buffer_of(f, r, &r->buf, &r->len);
    if (rc != MPI_SUCCESS) {
        free(r->b.tmp);
        r->b.tmp = NULL;
        return rc;
    }
    r->pending = r->b.mode == MSH_TP_SSEND ? 2 : 1;
    if (r->b.mode == MSH_TP_SSEND)
        r->ack_tag = (uint32_t)r->b.slot + 1; /* never 0: the request lives until its acknowledgement */
    if (r->op == OP_SEND && job.nopeek && r->len > EAGER_MAX) {
        r->bulk_seq = next_seq(f);
        r->pending++;
    }
    r->b.active = 1;
    ssize_t frc = f->bl_head[bl_of(r)] ? -FI_EAGAIN : try_issue(f, r);
    if (frc == -FI_EAGAIN) {
        backlog_add(f, r);
        return MPI_SUCCESS;
    }
    if (frc == 1) /* received from a held message */
        return MPI_SUCCESS;
    if (frc) {
        /* The caller gets the error and no request: one whose
         * acknowledgement receive must still be cancelled lives on until
         * that completes, then goes (persistent ones stay the caller's). */
        r->b.status.MPI_ERROR = fi_error((int)frc);
        if ((r->ack_wait || r->hdr_sent) && !r->b.persistent)
            r->b.orphan = 1;
        fail_issued(f, r);
        return r->b.status.MPI_ERROR;
    }
    return MPI_SUCCESS;
}

/* A new request of the lane's (lane.h's make). */
static msh_lane_req *make(msh_lane_tp *l, int recv)
{
    fab_req *r = req_new((fab_tp *)l);
    if (r)
        r->op = recv ? OP_RECV : OP_SEND;
    return r ? &r->b : NULL;
}

/* A standard or ready send of a named type within the provider's inject
 * size goes at once, with no request or completion of its own
 * (MSH_LANE_DONE), unless operations wait in the backlog: they go first,
 * to keep order. 1 if it went. */
static int send_at_once(msh_lane_tp *l, fab_comm *fc, const msh_tp_msg *m, msh_tp_req *treq)
{
    fab_tp *f = (fab_tp *)l;
    int tsize;
    if (!msh_lane_at_once_mode(m->mode) || f->l.closed || f->bl_head[BL_TX] ||
        !msh_lane_named_size(&f->l.named, m->dt, &tsize))
        return 0;
    size_t len = (size_t)m->count * (size_t)tsize;
    if (len > job.info->tx_attr->inject_size || (job.nopeek && len > EAGER_MAX))
        return 0;
    fi_addr_t to = f->addr[fc->world[m->peer]];
    uint64_t tag = fc->cid_bits | (uint32_t)m->tag;
    if (fi_tinjectdata(f->ep, m->buf, len, (uint32_t)fc->rank, to, tag) != 0)
        return 0;
    *treq = MSH_LANE_DONE;
    return 1;
}

static int lane_issue(msh_lane_tp *l, msh_lane_req *r) { return issue((fab_tp *)l, (fab_req *)r); }

static void cancel(msh_lane_tp *l, msh_lane_req *b)
{
    fab_req *r = (fab_req *)b;
    if (r->op == OP_RECV)
        fi_cancel(&((fab_tp *)l)->ep->fid, &r->main.f);
}

static int lane_probe(msh_lane_tp *l, msh_lane_comm *fc, int source, int tag, int *flag, msh_lane_req **claimed,
                      MPI_Status *status);
static int lane_recv_claimed(msh_lane_tp *l, msh_lane_req *r);

static const msh_lane_ops fab_lane_ops = {
    .progress = lane_progress,
    .send_at_once = send_at_once,
    .make = make,
    .issue = lane_issue,
    .cancel = cancel,
    .probe = lane_probe,
    .recv_claimed = lane_recv_claimed,
};

static int fab_post(msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    return msh_lane_post(tp, &fab_lane_ops, m, ctx, treq, p);
}
static int fab_send_now(msh_tp *tp, const msh_tp_msg *m) { return msh_lane_send_now(tp, &fab_lane_ops, m); }

#define MSG_SLOT_BITS MSH_LANE_MSG_SLOT_BITS
#define msg_enc msh_lane_msg_enc
#define msg_dec msh_lane_msg_dec

/* A probe where the provider has no FI_PEEK: a message already held, or
 * a receive into the bounce buffer that is cancelled if nothing came at
 * once; what it caught is held, in arrival order, for later receives.
 * The VCI's lock is held throughout, so no receive is posted while the
 * bounce receive is out (it would otherwise have come first). With
 * claim, the message leaves the held list for r, which stands for it. */
static int peek_held(fab_tp *f, fab_req *r, fab_comm *fc, int source, int tag, int claim, int *flag)
{
    fab_held **pp = held_find(f, fc, source, tag);
    if (!*pp) {
        if (f->bl_head[BL_RX]) { /* receives before this one wait: nothing seen yet */
            progress(f);
            *flag = 0;
            return MPI_SUCCESS;
        }
        r->op = OP_PROBE;
        r->pending = 1;
        r->probe_found = 0;
        ssize_t rc = fi_trecv(f->ep, f->bounce, EAGER_MAX, NULL, match_from(f, fc, source), match_tag(fc, tag),
                              match_ignore(tag), &r->main.f);
        if (rc == -FI_EAGAIN) {
            progress(f);
            *flag = 0;
            return MPI_SUCCESS;
        }
        if (rc)
            return fi_error((int)rc);
        progress(f);
        if (r->pending)
            fi_cancel(&f->ep->fid, &r->main.f);
        while (r->pending)
            progress(f);
        if (!r->probe_found) {
            *flag = 0;
            return MPI_SUCCESS;
        }
        pp = held_find(f, fc, source, tag);
        if (!*pp) { /* lost for lack of memory */
            *flag = 0;
            return MPI_ERR_NO_MEM;
        }
    }
    fab_held *h = *pp;
    memset(&r->b.status, 0, sizeof r->b.status);
    r->b.status.MPI_SOURCE = (int)(uint32_t)h->data;
    r->b.status.MPI_TAG = (int)(h->tag & TAG_LOW);
    msh_lane_set_bytes(&r->b.status, h->len);
    if (claim)
        r->held = held_take(f, pp);
    *flag = 1;
    return MPI_SUCCESS;
}

/* A peek (FI_PEEK), or with claim a peek that also takes the message
 * (FI_CLAIM), for which r's context then stands. */
static int peek(fab_tp *f, fab_req *r, fab_comm *fc, int source, int tag, int claim, int *flag)
{
    r->op = OP_PROBE;
    r->pending = 1;
    r->probe_found = 0;
    memset(&r->b.status, 0, sizeof r->b.status);
    struct fi_msg_tagged msg = {
        .addr = match_from(f, fc, source),
        .tag = match_tag(fc, tag),
        .ignore = match_ignore(tag),
        .context = &r->main.f,
    };
    ssize_t rc = f->bl_head[BL_RX] ? -FI_EAGAIN
                                   : fi_trecvmsg(f->ep, &msg, FI_PEEK | FI_COMPLETION | (claim ? FI_CLAIM : 0));
    if (rc == -FI_EAGAIN) {
        progress(f); /* nothing seen yet: the caller tries again */
        *flag = 0;
        return MPI_SUCCESS;
    }
    if (rc)
        return fi_error((int)rc);
    while (r->pending)
        progress(f);
    *flag = r->probe_found;
    return MPI_SUCCESS;
}

static int lane_probe(msh_lane_tp *l, msh_lane_comm *fc, int source, int tag, int *flag, msh_lane_req **claimed,
                      MPI_Status *status)
{
    fab_tp *f = (fab_tp *)l;
    fab_req pr, *r = &pr;
    if (claimed) {
        r = req_new(f);
        if (!r || r->b.slot >= (1 << MSG_SLOT_BITS)) {
            if (r)
                req_free(f, r);
            return MPI_ERR_NO_MEM;
        }
    } else {
        memset(&pr, 0, sizeof pr);
        pr.main.req = &pr;
    }
    int rc = job.nopeek ? peek_held(f, r, fc, source, tag, claimed != NULL, flag)
                        : peek(f, r, fc, source, tag, claimed != NULL, flag);
    if (rc == MPI_SUCCESS && *flag && status != MPI_STATUS_IGNORE)
        *status = r->b.status;
    if (claimed && (rc != MPI_SUCCESS || !*flag))
        req_free(f, r);
    else if (claimed)
        *claimed = &r->b;
    return rc;
}

/* The lane's receive of the message that r, a matched probe's, claimed. */
static int lane_recv_claimed(msh_lane_tp *l, msh_lane_req *b)
{
    fab_tp *f = (fab_tp *)l;
    fab_req *r = (fab_req *)b;
    if (r->op != OP_PROBE)
        return MPI_ERR_REQUEST;
    r->op = OP_RECV;
    int rc = buffer_of(f, r, &r->buf, &r->len);
    if (rc != MPI_SUCCESS)
        return rc;
    if (job.nopeek) {
        fab_held *h = r->held;
        r->held = NULL;
        if (!h)
            return MPI_ERR_REQUEST;
        r->pending = 1;
        r->b.active = 1;
        deliver_held(f, r, h);
        return MPI_SUCCESS;
    }
    r->rbuf = r->buf;
    if (r->len < job.rx_min && !land_short(r))
        return MPI_ERR_NO_MEM;
    struct iovec iov = { .iov_base = r->rbuf, .iov_len = room_of(r) };
    struct fi_msg_tagged msg = { .msg_iov = &iov, .iov_count = 1, .context = &r->main.f };
    ssize_t frc;
    /* The claimed message is the provider's: retrying cannot deadlock. */
    while ((frc = fi_trecvmsg(f->ep, &msg, FI_CLAIM | FI_COMPLETION)) == -FI_EAGAIN)
        read_cq(f);
    if (frc)
        return fi_error((int)frc);
    r->pending = 1;
    r->b.active = 1;
    return MPI_SUCCESS;
}

/* Called at finalize under the VCI's lock. The endpoint must be closed:
 * the shm provider's region is a file in /dev/shm that only its close
 * removes (left, they pile up, and a later process with the same pid
 * cannot open its endpoint). The structure stays: a thread still
 * returning from its last call after finalize may look at it (vci.c
 * says why the VCIs outlive finalize), and finds it closed. */
static void close_ep(msh_lane_tp *l)
{
    fab_tp *f = (fab_tp *)l;
    fi_close(&f->ep->fid);
    fi_close(&f->cq->fid);
    fi_close(&f->av->fid);
    fi_close(&f->dom->fid);
}

static void fab_close(msh_tp *tp) { msh_lane_op_close(msh_lane_tp_of(tp), close_ep); }

static const msh_tp_ops fab_ops = MSH_LANE_TP_OPS("fabric", fab_post, fab_send_now, fab_close);

/* ------------------------------------------------------------ opening */

static const char *open_endpoint(fab_tp *f)
{
    struct fi_cq_attr cqa = { .format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE };
    struct fi_av_attr ava = { .type = FI_AV_TABLE };
    if (fi_domain(job.fab, job.info, &f->dom, NULL))
        return "fi_domain failed";
    if (fi_endpoint(f->dom, job.info, &f->ep, NULL))
        return "fi_endpoint failed";
    if (fi_cq_open(f->dom, &cqa, &f->cq, NULL))
        return "fi_cq_open failed";
    if (fi_av_open(f->dom, &ava, &f->av, NULL))
        return "fi_av_open failed";
    if (fi_ep_bind(f->ep, &f->cq->fid, FI_TRANSMIT | FI_RECV) || fi_ep_bind(f->ep, &f->av->fid, 0))
        return "fi_ep_bind failed";
    if (fi_enable(f->ep))
        return "fi_enable failed";
    return NULL;
}

/* libfabric's shm provider keeps each endpoint's queues in a file of
 * /dev/shm that its peers open by name, and at its first endpoint installs
 * handlers for SIGINT, SIGTERM, SIGBUS and SIGSEGV that remove those files
 * before the signal takes its course: a host's own handlers are replaced
 * (they still run after), and a rank killed by SIGKILL leaves its files.
 * Before libfabric 1.20 the provider maps a peer's file when its address
 * is inserted, so once every process has inserted a VCI's addresses (the
 * exchange) no one opens them by name again: each process removes its own
 * file there and puts back the handlers it had before the first endpoint.
 * From 1.20 a peer's file is opened at its first message, so the files,
 * and libfabric's handlers, stay. */
static struct sigaction sig_before[32];
static int sig_saved;

static void signals_save(void)
{
    for (int s = 1; s < 32; s++)
        sigaction(s, NULL, &sig_before[s]);
    sig_saved = 1;
}

/* Only those that changed: a program's own are left alone. */
static void signals_restore(void)
{
    for (int s = 1; s < 32 && sig_saved; s++) {
        struct sigaction now;
        if (sigaction(s, NULL, &now) == 0 && now.sa_handler != sig_before[s].sa_handler)
            sigaction(s, &sig_before[s], NULL);
    }
}

/* The file behind an endpoint name ("fi_shm://<pid>:<uid>:<index>": the
 * part after the scheme, in /dev/shm). 0 once it is gone. */
static int shm_unlink_name(const char *name)
{
    const char *p = strstr(name, "://");
    p = p ? p + 3 : name;
    return *p && !strchr(p, '/') ? shm_unlink(p) : -1;
}

/* Exchange endpoint names through the host; every process calls this for
 * each VCI in the same order. */
static const char *exchange(fab_tp *f, const char *why)
{
    char name[256];
    size_t len = sizeof name;
    memset(name, 0, sizeof name);
    if (!why && fi_getname(&f->ep->fid, name, &len))
        why = "fi_getname failed";
    if (!msh_lane_all_ok(!why))
        return why ? why : "another process cannot open its endpoint";
    char *names = malloc((size_t)job.wsize * sizeof name);
    f->addr = malloc(sizeof *f->addr * (size_t)job.wsize);
    if (!msh_lane_all_ok(names && f->addr)) {
        free(names);
        return "out of memory";
    }
    PMPI_Allgather(name, sizeof name, MPI_BYTE, names, sizeof name, MPI_BYTE, MPI_COMM_WORLD);
    /* One at a time: a provider's names need not be of one length. */
    int ok = 1;
    for (int i = 0; i < job.wsize && ok; i++) {
        int rc = fi_av_insert(f->av, names + (size_t)i * sizeof name, 1, &f->addr[i], 0, NULL);
        ok = rc == 1;
        if (!ok && msh_cfg.verbose)
            msh_log("fabric: fi_av_insert of rank %d's name gave %d (format %u)", i, rc,
                    (unsigned)job.info->addr_format);
    }
    free(names);
    if (!msh_lane_all_ok(ok))
        return "fi_av_insert failed";
    /* Every process has mapped this VCI's endpoints now (the shm provider
     * maps a peer's file when its address is inserted). */
    if (job.shm_mapped_at_insert) {
        if (shm_unlink_name(name) == 0)
            signals_restore();
        else if (msh_cfg.verbose)
            msh_log("fabric: cannot remove the shm provider's file of \"%s\"; its signal handlers stay", name);
    }
    return NULL;
}

msh_tp *msh_tp_fabric_open(int idx, const char **why);
msh_tp *msh_tp_fabric_open(int idx, const char **why)
{
    if (idx == 0 && (*why = job_open()) != NULL)
        return NULL;
    if (job.failed || !job.fab) {
        *why = "not opened";
        return NULL;
    }
    fab_tp *f = msh_lane_tp_alloc(sizeof *f);
    msh_tp *host = msh_tp_open("host", idx, why);
    const char *w = !f || !host ? "out of memory" : NULL;
    if (f) {
        msh_lane_q_init(&f->l.q, sizeof(fab_req), drop);
        f->held_tail = &f->held;
        if (!w && job.nopeek && !(f->bounce = malloc(EAGER_MAX)))
            w = "out of memory";
        if (!w && idx == 0 && job.shm_mapped_at_insert)
            signals_save();
        if (!w)
            w = open_endpoint(f);
    }
    /* Collective from here: every process takes part even when it failed. */
    w = exchange(f ? f : &(fab_tp){ 0 }, w);
    if (w) {
        *why = w;
        job.failed = 1;
        msh_lane_shut();
        return NULL; /* the VCIs opened so far stay open, unused */
    }
    /* Wildcard tags need the provider's ignore mask, which old shm does
     * not apply to messages that arrived first (job.nopeek says why). */
    if (idx == 0)
        msh_lane_open(job.prov, CID_BITS, TAG_CID_SHIFT, INT_MAX, !job.nopeek);
    msh_lane_tp_opened(&f->l, host, &fab_lane_ops, &fab_ops, idx);
    f->acks.which = CTX_ACKS;
    post_acks(f);
    return &f->l.base;
}

#endif
