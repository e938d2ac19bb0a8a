/* The UCX transport: each VCI owns a UCX worker (its own shared-memory
 * or network endpoints), the way MPICH's ch4/ucx gives each VCI a worker
 * of its own, so that threads on different VCIs share no lock with each
 * other or with the host. A lane (lane.h): the communicators it carries
 * are decided when they are made; every other one, and the host's own
 * requests, stay with the host transport this one wraps.
 *
 * VCI i of every process talks to VCI i of every other; the workers'
 * addresses are exchanged once, at init, through the host, and an
 * endpoint to a process is made the first time a VCI sends to it.
 *
 * Matching is UCX's tag matching, which keeps one sender's messages in
 * order. A message's 64-bit tag:
 *   bits 48-63  the communicator's lane id
 *   bits 31-47  the sender's rank in the communicator
 *   bits 0-30   the MPI tag
 * so MPI_ANY_SOURCE and MPI_ANY_TAG are masks, MPI_TAG_UB stays the
 * host's (at most 2^31 - 1), and communicators over 2^17 processes stay
 * with the host. UCX provides the rest of MPI's point-to-point rules:
 * synchronous sends (ucp_tag_send_sync_nbx completes once the receiver
 * matched), probes that leave or take the message (ucp_tag_probe_nb),
 * receiving a taken message (ucp_tag_msg_recv_nbx), cancelling receives,
 * and rendezvous for large messages.
 *
 * Locking: everything on a worker runs under its VCI's lock; workers are
 * made UCS_THREAD_MODE_SERIALIZED, their shared context mt_workers_shared.
 *
 * libucp is loaded with dlopen when a job asks for it: a job without it
 * pays nothing, and when the host has not loaded UCX itself, UCX is told
 * not to install its error-signal handlers (crash reports stay the
 * host's). */
#include "transport/transport.h"

#include <stdlib.h>

#ifndef HAVE_UCX

msh_tp *msh_tp_ucx_open(int idx, const char **why);
msh_tp *msh_tp_ucx_open(int idx, const char **why)
{
    (void)idx;
    *why = "built without UCX";
    return NULL;
}

#else

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucp/api/ucp.h>

#include "core/config.h"
#include "core/log.h"
#include "transport/lane.h"

#define CID_BITS 16
#define CID_SHIFT 48
#define SRC_SHIFT 31
#define SRC_BITS 17
#define TAG_MASK ((1ULL << SRC_SHIFT) - 1)
#define SRC_MASK (((1ULL << SRC_BITS) - 1) << SRC_SHIFT)

/* ------------------------------------------------------------ the job */

static struct {
    void *lib;
    ucs_status_t (*config_read)(const char *, const char *, ucp_config_t **);
    void (*config_release)(ucp_config_t *);
    ucs_status_t (*config_modify)(ucp_config_t *, const char *, const char *);
    ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t *, const ucp_config_t *, ucp_context_h *);
    ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t *, ucp_worker_h *);
    void (*worker_destroy)(ucp_worker_h);
    ucs_status_t (*worker_get_address)(ucp_worker_h, ucp_address_t **, size_t *);
    void (*worker_release_address)(ucp_worker_h, ucp_address_t *);
    unsigned (*worker_progress)(ucp_worker_h);
    ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t *, ucp_ep_h *);
    ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t *);
    ucs_status_ptr_t (*tag_send_nbx)(ucp_ep_h, const void *, size_t, ucp_tag_t, const ucp_request_param_t *);
    ucs_status_ptr_t (*tag_send_sync_nbx)(ucp_ep_h, const void *, size_t, ucp_tag_t, const ucp_request_param_t *);
    ucs_status_ptr_t (*tag_recv_nbx)(ucp_worker_h, void *, size_t, ucp_tag_t, ucp_tag_t,
                                     const ucp_request_param_t *);
    ucp_tag_message_h (*tag_probe_nb)(ucp_worker_h, ucp_tag_t, ucp_tag_t, int, ucp_tag_recv_info_t *);
    ucs_status_ptr_t (*tag_msg_recv_nbx)(ucp_worker_h, void *, size_t, ucp_tag_message_h,
                                         const ucp_request_param_t *);
    void (*request_cancel)(ucp_worker_h, void *);
    void (*request_free)(void *);
    ucs_status_t (*request_check_status)(void *);
    ucp_context_h ctx;
    int wsize, wrank;
    int failed;
} job;

/* The symbols, in job's order after lib. */
static const char *const syms[] = {
    "ucp_config_read", "ucp_config_release", "ucp_config_modify", "ucp_init_version", "ucp_worker_create",
    "ucp_worker_destroy", "ucp_worker_get_address", "ucp_worker_release_address", "ucp_worker_progress",
    "ucp_ep_create", "ucp_ep_close_nbx", "ucp_tag_send_nbx", "ucp_tag_send_sync_nbx", "ucp_tag_recv_nbx",
    "ucp_tag_probe_nb", "ucp_tag_msg_recv_nbx", "ucp_request_cancel", "ucp_request_free",
    "ucp_request_check_status",
};

static const char *load(void)
{
    /* A host that loaded UCX itself (MPICH's ch4:ucx, Open MPI's ucx
     * components) has its handlers already; otherwise UCX would install
     * its own, on the error signals and on SIGHUP (its debug signal),
     * which raw runs do not have. Both are read once, when libucs loads;
     * a user's own settings win. */
    static const char *const quiet[][2] = { { "UCX_HANDLE_ERRORS", "none" }, { "UCX_DEBUG_SIGNO", "0" } };
    int set[2] = { 0, 0 };
    int loaded = dlopen("libucs.so.0", RTLD_NOW | RTLD_NOLOAD) != NULL;
    for (int i = 0; i < 2 && !loaded; i++)
        if (!getenv(quiet[i][0]))
            set[i] = setenv(quiet[i][0], quiet[i][1], 1) == 0;
    job.lib = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    for (int i = 0; i < 2; i++)
        if (set[i])
            unsetenv(quiet[i][0]); /* children inherit only what the user set */
    if (!job.lib)
        return "cannot load libucp.so.0";
    void **fn = (void **)&job.config_read;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(fn[i] = dlsym(job.lib, syms[i])))
            return "libucp.so.0 lacks a function it needs";
    return NULL;
}

static const char *query(void)
{
    ucp_config_t *cfg;
    if (job.config_read(NULL, NULL, &cfg) != UCS_OK)
        return "ucp_config_read failed";
    /* One node: shared memory only, which also spares UCX opening every
     * network device at start-up. A user's UCX_TLS wins. */
    if (!getenv("UCX_TLS") && msh_lane_one_node())
        job.config_modify(cfg, "TLS", "self,sm");
    job.config_modify(cfg, "WARN_UNUSED_ENV_VARS", "n");
    ucp_params_t p = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_TAG,
        .mt_workers_shared = 1,
    };
    ucs_status_t st = job.init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, &job.ctx);
    job.config_release(cfg);
    return st == UCS_OK ? NULL : "ucp_init failed";
}

/* Once, for VCI 0: load and initialise, and agree: if any process cannot,
 * no process uses UCX. */
static const char *job_open(void)
{
    PMPI_Comm_size(MPI_COMM_WORLD, &job.wsize);
    PMPI_Comm_rank(MPI_COMM_WORLD, &job.wrank);
    const char *why = load();
    if (!why)
        why = query();
    if (!msh_lane_all_ok(!why)) {
        job.failed = 1;
        return why ? why : "another process cannot open it";
    }
    return NULL;
}

/* ------------------------------------------------------------ requests */

enum { OP_SEND, OP_RECV, OP_PROBE };

struct ux_tp;
typedef struct ux_req {
    msh_lane_req b;      /* first (lane.h) */
    struct ux_tp *f;
    uint8_t op;
    uint8_t posting;     /* inside UCX's post call */
    void *buf;
    size_t len;
    void *ureq;          /* UCX's request, while in flight */
    ucp_tag_message_h msg; /* what a matched probe took */
} ux_req;

typedef struct ux_tp {
    msh_lane_tp l;       /* the host under it (everything UCX does not carry), requests, named types */
    ucp_worker_h w;
    ucp_ep_h *ep;        /* by world rank, made on first use */
    char *addrs;         /* every process's worker address for this VCI */
    size_t alen;         /* each one's room in addrs */
} ux_tp;

static inline ux_tp *ux_of(msh_tp *tp) { return (ux_tp *)tp; }

static inline ux_req *req_new(ux_tp *f)
{
    ux_req *r = (ux_req *)msh_lane_req_new(&f->l.q, sizeof *r);
    if (r)
        r->f = f;
    return r;
}
static inline void req_free(ux_tp *f, ux_req *r) { msh_lane_req_free(&f->l.q, &r->b); }
static inline ux_req *req_of(ux_tp *f, msh_tp_req t) { return (ux_req *)msh_lane_req_of(&f->l.q, t); }
static inline void finish(ux_tp *f, ux_req *r) { msh_lane_finish(&f->l.q, &r->b, f->l.base.idx); }

/* ------------------------------------------------------------ completions */

static int ux_error(ucs_status_t st)
{
    switch (st) {
    case UCS_OK:                      return MPI_SUCCESS;
    case UCS_ERR_MESSAGE_TRUNCATED:   return MPI_ERR_TRUNCATE;
    case UCS_ERR_NO_MEMORY:           return MPI_ERR_NO_MEM;
    default:                          return MPI_ERR_OTHER;
    }
}

static void send_done(ux_req *r, ucs_status_t st)
{
    r->b.status.MPI_ERROR = ux_error(st);
    if (st != UCS_OK)
        msh_log("ucx: VCI %d: a send failed: %s", r->f->l.base.idx, st == UCS_ERR_CANCELED ? "cancelled" : "error");
    finish(r->f, r);
}

static void recv_done(ux_req *r, ucs_status_t st, const ucp_tag_recv_info_t *info)
{
    MPI_Status *s = &r->b.status;
    if (st == UCS_ERR_CANCELED) {
        s->MPI_ERROR = MPI_SUCCESS;
        PMPI_Status_set_cancelled(s, 1);
    } else {
        /* A truncated message is not delivered at all (UCX writes
         * nothing): its count is 0, what arrived. */
        size_t len = info && st == UCS_OK ? info->length : 0;
        if (len > r->len)
            len = r->len;
        s->MPI_ERROR = ux_error(st);
        if (info) {
            s->MPI_SOURCE = (int)((info->sender_tag & SRC_MASK) >> SRC_SHIFT);
            s->MPI_TAG = (int)(info->sender_tag & TAG_MASK);
        } else {
            s->MPI_SOURCE = r->b.peer;
            s->MPI_TAG = r->b.tag;
        }
        /* zeroed when issued: not cancelled */
        msh_lane_set_bytes(s, len);
        int urc = r->b.tmp && len > 0 ? msh_lane_unpack(r->b.tmp, len, r->b.ubuf, r->b.dt) : MPI_SUCCESS;
        if (urc != MPI_SUCCESS) {
            s->MPI_ERROR = urc;
            msh_lane_set_bytes(s, 0);
        }
    }
    finish(r->f, r); /* frees tmp */
}

/* A callback may run inside the call that posts (receives ask for that:
 * UCX 1.13 leaves the receive information of an immediate completion
 * unset); the poster then frees UCX's request, which it is handed. */
static void send_cb(void *request, ucs_status_t st, void *user)
{
    ux_req *r = user;
    int posting = r->posting;
    r->ureq = NULL;
    send_done(r, st);
    if (!posting)
        job.request_free(request);
}

static void recv_cb(void *request, ucs_status_t st, const ucp_tag_recv_info_t *info, void *user)
{
    ux_req *r = user;
    int posting = r->posting;
    r->ureq = NULL;
    recv_done(r, st, info); /* info lives in UCX's request */
    if (!posting)
        job.request_free(request);
}

/* One pass of the worker, as MPICH's ch4/ucx makes: a loop until a pass
 * finds nothing would pay for that empty pass on every poll, and the
 * engine polls again anyway while its wait is not satisfied. */
static int progress(ux_tp *f)
{
    return f->l.closed ? 0 : (int)job.worker_progress(f->w);
}
static int lane_progress(msh_lane_tp *l) { return progress((ux_tp *)l); }

/* ------------------------------------------------------------ posting */

/* An endpoint is made on the first send to its peer (out of line), then
 * read on every send (inline). */
static ucp_ep_h ep_make(ux_tp *f, int world)
{
    ucp_ep_params_t p = {
        .field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS,
        .address = (const ucp_address_t *)(f->addrs + (size_t)world * f->alen),
    };
    if (job.ep_create(f->w, &p, &f->ep[world]) != UCS_OK)
        f->ep[world] = NULL;
    return f->ep[world];
}

static inline ucp_ep_h ep_to(ux_tp *f, int world)
{
    ucp_ep_h ep = f->ep[world];
    return MSH_LIKELY(ep != NULL) ? ep : ep_make(f, world);
}

static inline uint64_t match_tag(const msh_lane_comm *lc, int source, int tag)
{
    return lc->cid_bits | (source == MPI_ANY_SOURCE ? 0 : (uint64_t)source << SRC_SHIFT) |
           (tag == MPI_ANY_TAG ? 0 : (uint32_t)tag);
}
static inline uint64_t match_mask(int source, int tag)
{
    return ~0ULL & ~(source == MPI_ANY_SOURCE ? SRC_MASK : 0) & ~(tag == MPI_ANY_TAG ? TAG_MASK : 0);
}

/* What UCX returned for a posted operation: done already (a send, or an
 * operation whose callback ran inside the call), failed, or in flight
 * (its request, completed through the callback). */
MSH_INLINE int posted(ux_req *r, ucs_status_ptr_t p)
{
    r->posting = 0;
    if (p == NULL) {
        /* A receive asked not to complete here: if UCX did anyway, what it
         * received is not known beyond the receive's own source and tag. */
        if (r->op == OP_SEND)
            send_done(r, UCS_OK);
        else if (r->b.active)
            recv_done(r, UCS_OK, NULL);
        return MPI_SUCCESS;
    }
    if (UCS_PTR_IS_ERR(p)) {
        r->b.active = 0;
        return ux_error(UCS_PTR_STATUS(p));
    }
    if (r->b.active)
        r->ureq = p;
    else
        job.request_free(p);
    return MPI_SUCCESS;
}

static int send_now(ux_tp *f, ux_req *r)
{
    const msh_lane_comm *lc = r->b.lc;
    ucp_ep_h ep = ep_to(f, lc->world[r->b.peer]);
    if (!ep) {
        r->b.active = 0;
        return MPI_ERR_OTHER;
    }
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.send = send_cb,
        .user_data = r,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    uint64_t tag = lc->cid_bits | (uint64_t)lc->rank << SRC_SHIFT | (uint32_t)r->b.tag;
    r->posting = 1;
    ucs_status_ptr_t s = r->b.mode == MSH_TP_SSEND ? job.tag_send_sync_nbx(ep, r->buf, r->len, tag, &p)
                                                 : job.tag_send_nbx(ep, r->buf, r->len, tag, &p);
    return posted(r, s);
}

/* A buffered send completes at once, whether or not a receive is posted
 * (a rendezvous would wait for it): the data is copied and sent by a
 * request of its own, which goes when the transfer is done. */
static int bsend(ux_tp *f, ux_req *r)
{
    ux_req *c = req_new(f);
    if (!c)
        return MPI_ERR_NO_MEM;
    int rc = msh_lane_copy(&f->l.named, r->b.ubuf, r->b.count, r->b.dt, &c->b.tmp, &c->len);
    if (rc == MPI_SUCCESS) {
        c->op = OP_SEND;
        c->b.mode = MSH_TP_SEND;
        c->b.peer = r->b.peer;
        c->b.tag = r->b.tag;
        c->b.lc = r->b.lc;
        c->buf = c->b.tmp;
        c->b.orphan = 1;
        c->b.active = 1;
        rc = send_now(f, c); /* on failure c is inactive, and not freed */
    }
    if (rc != MPI_SUCCESS) {
        req_free(f, c);
        r->b.active = 0;
        return rc;
    }
    finish(f, r);
    return MPI_SUCCESS;
}

MSH_INLINE int issue(ux_tp *f, ux_req *r)
{
    memset(&r->b.status, 0, sizeof r->b.status);
    r->b.active = 1;
    /* mode alone (a receive's is MSH_TP_RECV) */
    if (r->b.mode == MSH_TP_BSEND)
        return bsend(f, r);
    int rc = msh_lane_req_bytes(&f->l.named, &r->b, r->op == OP_SEND, r->b.ubuf, r->b.count, r->b.dt, &r->buf, &r->len);
    if (rc != MPI_SUCCESS) {
        free(r->b.tmp);
        r->b.tmp = NULL;
        r->b.active = 0;
        return rc;
    }
    if (r->op == OP_SEND)
        return send_now(f, r);
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL |
                        UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .cb.recv = recv_cb,
        .user_data = r,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    r->posting = 1;
    ucs_status_ptr_t s = r->msg ? job.tag_msg_recv_nbx(f->w, r->buf, r->len, r->msg, &p)
                                : job.tag_recv_nbx(f->w, r->buf, r->len, match_tag(r->b.lc, r->b.peer, r->b.tag),
                                                   match_mask(r->b.peer, r->b.tag), &p);
    r->msg = NULL;
    return posted(r, s);
}

/* A new request of the lane's (lane.h's make). */
static msh_lane_req *make(msh_lane_tp *l, int recv)
{
    ux_req *r = req_new((ux_tp *)l);
    if (r)
        r->op = recv ? OP_RECV : OP_SEND;
    return r ? &r->b : NULL;
}

/* A standard or ready send of a named type first tries to finish inside
 * UCX's call, with no request of its own (MSH_LANE_DONE): what short
 * messages do when the endpoint has room. UCX keeps the order of its
 * endpoint's sends whichever way each goes. 1 if it went. */
static int send_at_once(msh_lane_tp *l, msh_lane_comm *lc, const msh_tp_msg *m, msh_tp_req *treq)
{
    ux_tp *f = (ux_tp *)l;
    int tsize;
    if (!msh_lane_at_once_mode(m->mode) || f->l.closed ||
        !msh_lane_named_size(&f->l.named, m->dt, &tsize))
        return 0;
    ucp_ep_h ep = ep_to(f, lc->world[m->peer]);
    if (!ep)
        return 0;
    ucp_request_param_t p = {
        .op_attr_mask = UCP_OP_ATTR_FLAG_FORCE_IMM_CMPL | UCP_OP_ATTR_FIELD_MEMORY_TYPE,
        .memory_type = UCS_MEMORY_TYPE_HOST,
    };
    uint64_t tag = lc->cid_bits | (uint64_t)lc->rank << SRC_SHIFT | (uint32_t)m->tag;
    ucs_status_ptr_t s = job.tag_send_nbx(ep, m->buf, (size_t)m->count * (size_t)tsize, tag, &p);
    if (s != NULL) {
        if (!UCS_PTR_IS_ERR(s))
            job.request_free(s); /* not expected with FORCE_IMM_CMPL */
        return 0;
    }
    *treq = MSH_LANE_DONE;
    return 1;
}

static int lane_issue(msh_lane_tp *l, msh_lane_req *r) { return issue((ux_tp *)l, (ux_req *)r); }

static void cancel(msh_lane_tp *l, msh_lane_req *b)
{
    ux_req *r = (ux_req *)b;
    if (r->op == OP_RECV && r->ureq)
        job.request_cancel(((ux_tp *)l)->w, r->ureq);
}

static int lane_probe(msh_lane_tp *l, msh_lane_comm *lc, int source, int tag, int *flag, msh_lane_req **claimed,
                      MPI_Status *status);
static int lane_recv_claimed(msh_lane_tp *l, msh_lane_req *r);

static const msh_lane_ops ux_lane_ops = {
    .progress = lane_progress,
    .send_at_once = send_at_once,
    .make = make,
    .issue = lane_issue,
    .cancel = cancel,
    .probe = lane_probe,
    .recv_claimed = lane_recv_claimed,
};

static int ux_post(msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    return msh_lane_post(tp, &ux_lane_ops, m, ctx, treq, p);
}
static int ux_send_now(msh_tp *tp, const msh_tp_msg *m) { return msh_lane_send_now(tp, &ux_lane_ops, m); }

static int lane_probe(msh_lane_tp *l, msh_lane_comm *lc, int source, int tag, int *flag, msh_lane_req **claimed,
                      MPI_Status *status)
{
    ux_tp *f = (ux_tp *)l;
    ucp_tag_recv_info_t info;
    ucp_tag_message_h m = job.tag_probe_nb(f->w, match_tag(lc, source, tag), match_mask(source, tag), claimed != NULL,
                                           &info);
    if (!m) { /* what has arrived may not be in the queue yet */
        progress(f);
        m = job.tag_probe_nb(f->w, match_tag(lc, source, tag), match_mask(source, tag), claimed != NULL, &info);
    }
    *flag = m != NULL;
    if (!m)
        return MPI_SUCCESS;
    if (claimed) {
        ux_req *r = req_new(f);
        if (!r || r->b.slot >= (1 << MSH_LANE_MSG_SLOT_BITS)) {
            /* the message is taken: it can only be dropped */
            ucp_request_param_t p = { .op_attr_mask = 0 };
            void *sink = malloc(info.length ? info.length : 1);
            ucs_status_ptr_t s = sink ? job.tag_msg_recv_nbx(f->w, sink, info.length, m, &p) : NULL;
            while (s && !UCS_PTR_IS_ERR(s) && job.request_check_status(s) == UCS_INPROGRESS)
                job.worker_progress(f->w);
            if (s && !UCS_PTR_IS_ERR(s))
                job.request_free(s);
            free(sink);
            if (r)
                req_free(f, r);
            return MPI_ERR_NO_MEM;
        }
        r->op = OP_PROBE;
        r->msg = m;
        *claimed = &r->b;
    }
    if (status != MPI_STATUS_IGNORE) {
        memset(status, 0, sizeof *status);
        status->MPI_SOURCE = (int)((info.sender_tag & SRC_MASK) >> SRC_SHIFT);
        status->MPI_TAG = (int)(info.sender_tag & TAG_MASK);
        msh_lane_set_bytes(status, info.length);
    }
    return MPI_SUCCESS;
}

static int lane_recv_claimed(msh_lane_tp *l, msh_lane_req *b)
{
    ux_req *r = (ux_req *)b;
    if (r->op != OP_PROBE || !r->msg)
        return MPI_ERR_REQUEST;
    r->op = OP_RECV;
    return issue((ux_tp *)l, r);
}

/* At finalize, under the VCI's lock: the endpoints and the worker go (its
 * shared-memory segments with them); the structure stays, marked closed,
 * for a thread still returning from its last call (vci.c says why). */
static void close_ep(msh_lane_tp *l)
{
    ux_tp *f = (ux_tp *)l;
    ucp_request_param_t p = { .op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS, .flags = UCP_EP_CLOSE_FLAG_FORCE };
    for (int i = 0; i < job.wsize; i++) {
        if (!f->ep[i])
            continue;
        ucs_status_ptr_t st = job.ep_close_nbx(f->ep[i], &p);
        while (st && !UCS_PTR_IS_ERR(st) && job.request_check_status(st) == UCS_INPROGRESS)
            job.worker_progress(f->w);
        if (st && !UCS_PTR_IS_ERR(st))
            job.request_free(st);
        f->ep[i] = NULL;
    }
    job.worker_destroy(f->w);
}

static void ux_close(msh_tp *tp) { msh_lane_op_close(msh_lane_tp_of(tp), close_ep); }

static const msh_tp_ops ux_ops = MSH_LANE_TP_OPS("ucx", ux_post, ux_send_now, ux_close);

/* ------------------------------------------------------------ opening */

static const char *open_worker(ux_tp *f)
{
    ucp_worker_params_t p = {
        .field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
        .thread_mode = UCS_THREAD_MODE_SERIALIZED,
    };
    if (job.worker_create(job.ctx, &p, &f->w) != UCS_OK) {
        f->w = NULL;
        return "ucp_worker_create failed";
    }
    f->ep = calloc((size_t)job.wsize, sizeof *f->ep);
    return f->ep ? NULL : "out of memory";
}

/* Exchange the workers' addresses through the host; every process calls
 * this for each VCI in the same order. */
static const char *exchange(ux_tp *f, const char *why)
{
    ucp_address_t *a = NULL;
    size_t len = 0;
    if (!why && job.worker_get_address(f->w, &a, &len) != UCS_OK)
        why = "ucp_worker_get_address failed";
    long v[2] = { !why, (long)len }, all[2];
    v[0] = -v[0]; /* MPI_MAX of -ok: 0 when every process is ok */
    PMPI_Allreduce(v, all, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (all[0] == 0) {
        if (a)
            job.worker_release_address(f->w, a);
        return why ? why : "another process cannot open its worker";
    }
    f->alen = (size_t)all[1];
    char *mine = calloc(1, f->alen);
    f->addrs = malloc(f->alen * (size_t)job.wsize);
    int allok = msh_lane_all_ok(mine && f->addrs);
    if (allok) {
        memcpy(mine, a, len);
        PMPI_Allgather(mine, (int)f->alen, MPI_BYTE, f->addrs, (int)f->alen, MPI_BYTE, MPI_COMM_WORLD);
    }
    free(mine);
    job.worker_release_address(f->w, a);
    return allok ? NULL : "out of memory";
}

msh_tp *msh_tp_ucx_open(int idx, const char **why);
msh_tp *msh_tp_ucx_open(int idx, const char **why)
{
    if (idx == 0 && (*why = job_open()) != NULL)
        return NULL;
    if (job.failed || !job.ctx) {
        *why = "not opened";
        return NULL;
    }
    ux_tp *f = msh_lane_tp_alloc(sizeof *f);
    msh_tp *host = msh_tp_open("host", idx, why);
    const char *w = !f || !host ? "out of memory" : NULL;
    if (f) {
        msh_lane_q_init(&f->l.q, sizeof(ux_req), NULL);
        if (!w)
            w = open_worker(f);
    }
    /* Collective from here: every process takes part even when it failed. */
    w = exchange(f ? f : &(ux_tp){ 0 }, w);
    if (w) {
        *why = w;
        job.failed = 1;
        msh_lane_shut();
        return NULL; /* the VCIs opened so far stay open, unused */
    }
    if (idx == 0)
        msh_lane_open("ucx", CID_BITS, CID_SHIFT, 1 << SRC_BITS, 1);
    msh_lane_tp_opened(&f->l, host, &ux_lane_ops, &ux_ops, idx);
    return &f->l.base;
}

#endif
