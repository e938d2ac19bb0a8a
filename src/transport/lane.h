/* Lanes: transports that carry communicators of their own, outside the
 * host (fabric.c: a libfabric endpoint per VCI; ucx.c: a UCX worker per
 * VCI). At most one lane opens per job. What every lane needs the same
 * way lives here: the table of the communicators it carries (decided the
 * same on every member when the communicator is registered), the words
 * that stand for its requests and matched-probe messages in the host's
 * handle types, a per-VCI cache of named types' sizes, and packing for
 * the other types. */
#ifndef MSH_TRANSPORT_LANE_H
#define MSH_TRANSPORT_LANE_H

#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/htab.h"
#include "transport/transport.h"

/* A communicator the lane carries: its id (already shifted where the
 * lane's tag wants it), this process's rank, and the world rank of each
 * member. Removed only by MPI_Comm_free, and freed once no request of the
 * lane uses it (msh_lane_reclaim_begin). */
typedef struct msh_lane_comm {
    msh_hent h;
    struct msh_lane_comm *retired; /* the next one freed by the program (msh_lane_comm_remove) */
    atomic_int gone;   /* the program freed it: set once */
    int in_use;        /* a request uses it (the reclaimer's, under its mutex) */
    uint64_t cid;      /* agreed by every member */
    uint64_t cid_bits;
    MPI_Comm comm;
    int rank, size;
    int world[];
} msh_lane_comm;

/* What a lane tells the table when its VCI 0 opened (once, at init, the
 * same on every process): its provider's name, how many bits a
 * communicator id may have and where they go in its tag, the largest
 * communicator it carries, and whether it can match MPI_ANY_TAG (if not,
 * it carries only communicators asserting no_any_tag). */
void msh_lane_open(const char *provider, int cid_bits, int cid_shift, int max_size, int any_tag);
/* A later VCI could not open: the lane carries nothing after all. */
void msh_lane_shut(void);
/* The lane's provider, or NULL when no lane is open. */
const char *msh_lane_provider(void);

/* Whether every process of the job shares this node (collective over
 * MPI_COMM_WORLD). */
int msh_lane_one_node(void);

extern msh_htab msh_lane_comms;
static inline msh_lane_comm *msh_lane_comm_of(MPI_Comm c)
{
    return (msh_lane_comm *)msh_htab_lookup(&msh_lane_comms, msh_handle_key(&c, sizeof c));
}
/* The lane's communicator a message goes on: the engine's record of it
 * when it passed one (no second table lookup per message), else looked up. */
static inline msh_lane_comm *msh_lane_comm_msg(const msh_tp_msg *m)
{
    return m->rec ? (msh_lane_comm *)(uintptr_t)m->rec : msh_lane_comm_of(m->comm);
}
int msh_lane_comm_add(MPI_Comm c, int inter, int no_any_tag);
void msh_lane_comm_remove(MPI_Comm c);
/* Freeing what the lanes kept of freed communicators (see lane.c): begin
 * takes the ones retired so far (0: none, or another thread reclaims now);
 * then each VCI's q is marked under that VCI's lock (msh_lane_q_mark), and
 * end frees those no request used, if every VCI was marked (all). */
int msh_lane_reclaim_begin(void);
void msh_lane_reclaim_end(int all);
/* Bytes of the lane's entries, live and kept (mpishim_table_bytes). */
size_t msh_lane_entry_bytes(void);
/* The VCI (of n) every member of a carried c uses for it, or -1. */
int msh_lane_comm_home(MPI_Comm c, int n);

/* A request word for a slot, and back. Values the hosts never use for a
 * request: odd addresses for Open MPI (its requests are aligned objects),
 * small positive ints for MPICH (handle kind 0, below MPI_REQUEST_NULL's
 * 0x2c000000). */
#define MSH_LANE_SLOT_MAX (1 << 24)
static inline msh_tp_req msh_lane_enc(int slot)
{
#if defined(OPEN_MPI) && OPEN_MPI
    return (msh_tp_req)(uintptr_t)(((uintptr_t)slot << 1) | 1);
#else
    return (msh_tp_req)(slot + 1);
#endif
}
static inline int msh_lane_dec(msh_tp_req t)
{
#if defined(OPEN_MPI) && OPEN_MPI
    uintptr_t u = (uintptr_t)t;
    return (u & 1) && (u >> 1) < MSH_LANE_SLOT_MAX ? (int)(u >> 1) : -1;
#else
    long u = (long)t;
    return u >= 1 && u <= MSH_LANE_SLOT_MAX ? (int)(u - 1) : -1;
#endif
}

/* Matched-probe message handles, the same way: they name the VCI that
 * holds the claimed message and the slot of the request that stands for
 * it. */
#define MSH_LANE_MSG_SLOT_BITS 18
static inline MPI_Message msh_lane_msg_enc(int vci, int slot)
{
    uintptr_t code = ((uintptr_t)vci << MSH_LANE_MSG_SLOT_BITS) | (uintptr_t)slot;
#if defined(OPEN_MPI) && OPEN_MPI
    return (MPI_Message)((code << 1) | 1);
#else
    return (MPI_Message)(code + 1);
#endif
}
static inline int msh_lane_msg_dec(MPI_Message m, int *vci, int *slot)
{
#if defined(OPEN_MPI) && OPEN_MPI
    uintptr_t u = (uintptr_t)m;
    if (!(u & 1) || (u >> 1) >= ((uintptr_t)MSH_MAX_VCIS << MSH_LANE_MSG_SLOT_BITS))
        return 0;
    u >>= 1;
#else
    long v = (long)m;
    if (v < 1 || v > ((long)MSH_MAX_VCIS << MSH_LANE_MSG_SLOT_BITS))
        return 0;
    uintptr_t u = (uintptr_t)(v - 1);
#endif
    *vci = (int)(u >> MSH_LANE_MSG_SLOT_BITS);
    *slot = (int)(u & ((1u << MSH_LANE_MSG_SLOT_BITS) - 1));
    return 1;
}

/* Named types seen on a VCI and their sizes: asking the host costs a
 * call per message, and some hosts take a global lock in it. Named
 * handles are never freed, so an entry stays true. */
typedef struct msh_lane_named {
    struct {
        MPI_Datatype dt;
        int size, used;
    } e[16];
} msh_lane_named;

int msh_lane_named_miss(msh_lane_named *n, unsigned k, MPI_Datatype dt, int *size);
/* Whether the host says dt is a named type (asks it: the large-count
 * query where there is one, since MPICH refuses the other for a type made
 * by a large-count call). */
int msh_lane_type_named(MPI_Datatype dt);

/* Whether dt is a named type, and then its size. MPI_DATATYPE_NULL counts
 * as one of no bytes (msh_lane_check refused it where the host does). */
static inline int msh_lane_named_size(msh_lane_named *n, MPI_Datatype dt, int *size)
{
    if (dt == MPI_DATATYPE_NULL) {
        *size = 0;
        return 1;
    }
    unsigned k = (unsigned)(msh_handle_key(&dt, sizeof dt) % 16);
    if (n->e[k].used && memcmp(&n->e[k].dt, &dt, sizeof dt) == 0) {
        *size = n->e[k].size;
        return 1;
    }
    return msh_lane_named_miss(n, k, dt, size);
}

/* The bytes of an operation on count dt at ubuf: the buffer itself for a
 * named type, else a packed copy (send) or room to unpack from (receive)
 * in *tmp, which the caller frees. */
int msh_lane_bytes_packed(int send, void *ubuf, MPI_Count count, MPI_Datatype dt, void **tmp, void **buf,
                          size_t *len);
static inline int msh_lane_bytes(msh_lane_named *n, int send, void *ubuf, MPI_Count count, MPI_Datatype dt, void **tmp,
                                 void **buf, size_t *len)
{
    int tsize = 0;
    if (MSH_LIKELY(msh_lane_named_size(n, dt, &tsize))) {
        *buf = ubuf;
        *len = (size_t)count * (size_t)tsize;
        return MPI_SUCCESS;
    }
    return msh_lane_bytes_packed(send, ubuf, count, dt, tmp, buf, len);
}
/* A duplicate of the derived type dt that r keeps until it is freed,
 * since the program may free dt while r lives (a persistent request
 * starts again, a receive unpacks when it completes): msh_lane_type_of's. */
struct msh_lane_req;
MPI_Datatype msh_lane_keep_derived(struct msh_lane_req *r, MPI_Datatype dt);
/* A buffered send's own copy of count dt at ubuf (packed for a derived
 * type): *copy, which the caller frees, of *len bytes. */
int msh_lane_copy(msh_lane_named *n, void *ubuf, MPI_Count count, MPI_Datatype dt, void **copy, size_t *len);
/* Set a zeroed status's count to len bytes, where the host keeps it:
 * MPICH's own setter takes its global lock, once per received message
 * (threads on different VCIs would meet there). */
static inline void msh_lane_set_bytes(MPI_Status *st, size_t len)
{
#if defined(OPEN_MPI) && OPEN_MPI
    st->_ucount = len;
#elif defined(MPICH)
    st->count_lo = (int)(unsigned)len;
    st->count_hi_and_cancelled = (st->count_hi_and_cancelled & 1) | (int)((uint64_t)len >> 32 << 1);
#else
    PMPI_Status_set_elements_x(st, MPI_BYTE, (MPI_Count)len);
#endif
}

/* The MPI_ERROR a probe that found a message leaves in its status (err:
 * what the program had there), as the host does: MPICH 4.0 writes
 * MPI_SUCCESS from MPI_Probe and MPI_Iprobe; otherwise both hosts leave it
 * (tests/mpi/p2p_status_error.c). matched: MPI_Mprobe, MPI_Improbe. */
static inline int msh_lane_probe_error(int err, int matched)
{
#if defined(MPICH)
    return matched ? err : MPI_SUCCESS;
#else
    (void)matched;
    return err;
#endif
}

/* The count a truncated receive reports when got bytes of a message of
 * whole bytes were written into its buffer: Open MPI 4.1 fills the buffer
 * and reports the whole message; MPICH's count is the intercept layer's
 * to set (intercept/status.h: 0). */
static inline size_t msh_lane_trunc_bytes(size_t got, size_t whole)
{
#if defined(OPEN_MPI) && OPEN_MPI
    (void)got;
    return whole;
#else
    (void)whole;
    return got;
#endif
}

/* Unpack len received bytes from tmp into count dt at ubuf; or
 * MPI_ERR_TRUNCATE where the host refuses the message (it ends partway
 * through a basic element: MPICH, which still writes the whole basic
 * elements before it, as this does); or the error that kept bytes out
 * (the host's unpack, MPI_ERR_NO_MEM), never a silent success. */
int msh_lane_unpack(const void *tmp, size_t len, void *ubuf, MPI_Datatype dt);
/* The same, with dt's size and extent known to the caller (a partitioned
 * channel unpacks one partition at a time with the same type). */
int msh_lane_unpack_sized(const void *tmp, size_t len, void *ubuf, MPI_Datatype dt, MPI_Count tsize, MPI_Aint extent);

/* A lane's request starts with this part, which the per-VCI table below
 * manages: the slot that names it in a request word, the engine's
 * context once tracked, packed data, the final status. */
typedef struct msh_lane_req {
    struct msh_lane_req *next; /* the spare list; a lane's own list while the request lives */
    void *ctx;                 /* the engine's, when tracked */
    void *tmp;                 /* packed data, freed when the request finishes */
    /* The operation (msh_lane_describe): the program's buffer, count and
     * type, peer and tag; mode is a send's, or MSH_TP_RECV (0 for a lane's
     * own probes and acknowledgements). */
    void *ubuf;
    MPI_Count count;
    MPI_Datatype dt;
    int peer, tag;
    uint8_t mode;
    MPI_Status status;
    MPI_Datatype kept;         /* a derived type's duplicate (msh_lane_keep_derived) */
    MPI_Comm comm;             /* the program's, where the request's own errors are raised */
    msh_lane_comm *lc;         /* what the lane knows of it; NULL for a request on none */
    int slot;
    /* Its type's size plus one when the type is named (msh_lane_type_of),
     * so that a post asks the cache once; 0: derived, or not known. */
    int tsize1;
    uint8_t persistent, active, tracked, orphan;
    uint8_t has_kept;
    uint8_t claimed;           /* holds a message a matched probe took (its MPI_Message) */
} msh_lane_req;

/* The type r's operation uses for dt, with its size noted in r when dt
 * is named: dt itself then; a derived dt is kept (keep: r outlives the
 * call, msh_lane_keep_derived) or used as it is (a nonblocking send packs
 * at once). */
static inline MPI_Datatype msh_lane_type_of(msh_lane_named *n, msh_lane_req *r, MPI_Datatype dt, int keep)
{
    int size;
    if (MSH_LIKELY(msh_lane_named_size(n, dt, &size))) {
        r->tsize1 = size + 1;
        return dt;
    }
    r->tsize1 = 0;
    return keep ? msh_lane_keep_derived(r, dt) : dt;
}
/* r, new, takes m's operation on lc (r->persistent set first: a
 * persistent request or a receive keeps a derived type, a nonblocking
 * send packs at once). */
static inline void msh_lane_describe(msh_lane_named *n, msh_lane_req *r, msh_lane_comm *lc, const msh_tp_msg *m)
{
    r->mode = (uint8_t)m->mode;
    r->ubuf = (void *)(uintptr_t)m->buf;
    r->count = m->count;
    r->dt = msh_lane_type_of(n, r, m->dt, m->mode == MSH_TP_RECV || r->persistent);
    r->peer = m->peer;
    r->tag = m->tag;
    r->lc = lc;
    r->comm = lc->comm;
}
/* msh_lane_bytes for r, with the size msh_lane_type_of noted. */
static inline int msh_lane_req_bytes(msh_lane_named *n, msh_lane_req *r, int send, void *ubuf, MPI_Count count,
                                     MPI_Datatype dt, void **buf, size_t *len)
{
    if (MSH_LIKELY(r->tsize1 > 0)) {
        *buf = ubuf;
        *len = (size_t)count * (size_t)(r->tsize1 - 1);
        return MPI_SUCCESS;
    }
    return msh_lane_bytes(n, send, ubuf, count, dt, &r->tmp, buf, len);
}

/* A VCI's requests (under its lock): the slots, freed requests kept for
 * reuse (no allocation per message), and the completions of tracked ones
 * not yet polled. */
typedef struct msh_lane_q {
    msh_lane_req **slots;
    int nslots, free_head;
    int *free_next;
    msh_lane_req *spare;
    /* Done and handed to the engine, not yet polled: they keep their
     * slots until then, so that a request word the engine still holds
     * (a cancel may come meanwhile) names no other request. */
    msh_lane_req *retired;
    size_t size;                     /* of the lane's request */
    void (*drop)(msh_lane_req *r);   /* frees what it holds besides tmp; may be NULL */
    int ntracked;                    /* tracked, done ones not yet polled included */
    msh_tp_done *done;
    int ndone, capdone;
    msh_tp_done *out;                /* what poll returns */
    int capout;
    unsigned host_quiet;             /* polls since the host was last called */
    MPI_Request poke;                /* msh_lane_poke_host's, made on first use */
} msh_lane_q;

static inline void msh_lane_q_init(msh_lane_q *q, size_t size, void (*drop)(msh_lane_req *r))
{
    memset(q, 0, sizeof *q);
    q->free_head = -1;
    q->poke = MPI_REQUEST_NULL;
    q->size = size;
    q->drop = drop;
}

/* A free slot and a spare request (q->size bytes) for the next
 * msh_lane_req_new: 0, or -1 (out of memory, or slots). */
int msh_lane_req_refill(msh_lane_q *q);
/* A zeroed request with a slot, or NULL (out of memory, or slots). size is
 * the lane's request size, a constant there: taken inline, the zeroing is
 * a few stores instead of a call, once per message (msh_zero). */
static inline msh_lane_req *msh_lane_req_new(msh_lane_q *q, size_t size)
{
    if (MSH_UNLIKELY(!q->spare || q->free_head < 0) && msh_lane_req_refill(q) != 0)
        return NULL;
    msh_lane_req *r = q->spare;
    int i = q->free_head;
    q->spare = r->next;
    msh_zero(r, size);
    q->free_head = q->free_next[i];
    r->slot = i;
    q->slots[i] = r;
    return r;
}
void msh_lane_req_free(msh_lane_q *q, msh_lane_req *r);
static inline msh_lane_req *msh_lane_req_of(const msh_lane_q *q, msh_tp_req t)
{
    int s = msh_lane_dec(t);
    return s >= 0 && s < q->nslots ? q->slots[s] : NULL;
}
/* r has nothing more to come: hand it to the engine (tracked), leave it
 * for wait or test (not tracked), or drop it (released while active). */
void msh_lane_finish(msh_lane_q *q, msh_lane_req *r, int vci);
/* Report r's completion through poll with ctx from now on (at once if it
 * is done already). */
int msh_lane_track(msh_lane_q *q, msh_lane_req *r, void *ctx);
/* The progress rule: a thread waiting on a lane must also move what the
 * host carries (a partitioned channel's transfers, one-sided operations,
 * the program's own host requests), which the host moves only inside its
 * calls. A lane's poll calls the host's when the host tracks requests of
 * its VCI, and otherwise pokes the host's progress every
 * MSH_LANE_POKE_POLLS polls. */
#define MSH_LANE_POKE_POLLS 32
/* ... and, whichever VCI's turn it is, at most once per this many
 * nanoseconds in the process (msh_lane_poke_host): less than 32 empty
 * polls of one thread take, so that one waiting thread pokes as often as
 * it would without the gap, and T waiting threads not T times as often. */
#define MSH_LANE_POKE_GAP_NS 1000u
void msh_lane_poke_host(msh_lane_q *q);
static inline int msh_lane_host_poll(msh_lane_q *q, msh_tp *host, const msh_tp_done **hd)
{
    if (MSH_UNLIKELY(msh_tp_lanes_only))
        return 0;
    if (host->ntracked)
        return msh_tp_poll(host, hd);
    if (++q->host_quiet % MSH_LANE_POKE_POLLS == 0)
        msh_lane_poke_host(q);
    return 0;
}
/* At the lane's close, before the host finalizes. */
void msh_lane_q_close(msh_lane_q *q);
/* Under the VCI's lock, between msh_lane_reclaim_begin and _end: mark the
 * freed communicators q's requests still use. */
void msh_lane_q_mark(msh_lane_q *q);
/* Before a lane's endpoints go at MPI_Finalize: sends nobody waits for
 * any more (buffered sends' copies, released sends) must still reach their
 * peers, as the host delivers its buffered sends before MPI_Finalize
 * returns. Calls progress(arg) until none is active (progress may need the
 * peer: a rendezvous waits for its receive), or until MSH_LANE_FLUSH_S
 * seconds after the process's first flush that had something to move
 * (one bound for all its VCIs), which it then says on stderr. Returns how
 * many are left. */
#define MSH_LANE_FLUSH_S 60
int msh_lane_flush(msh_lane_q *q, int (*progress)(void *arg), void *arg, int vci);
/* The host's nh completions hd, then the lane's: *done is q's array. */
int msh_lane_poll(msh_lane_q *q, const msh_tp_done *hd, int nh, const msh_tp_done **done, int vci);
/* The context of the k-th tracked request of the lane, oldest first. */
void *msh_lane_tracked(const msh_lane_q *q, int k);
/* An untracked request's result; non-persistent ones are freed. */
int msh_lane_take(msh_lane_q *q, msh_lane_req *r, msh_tp_req *treq, MPI_Status *st);
/* The host's MPI_TAG_UB, which the lanes keep (read when the lane opens). */
extern int msh_lane_tag_ub;

/* A peer and tag on lc the host would have refused (recv: a receive's or
 * probe's, which may be wildcards): the error class, or MPI_SUCCESS. */
static inline int msh_lane_check_peer(const msh_lane_comm *lc, int peer, int tag, int recv)
{
    if (peer < 0 ? !(recv && peer == MPI_ANY_SOURCE) : peer >= lc->size)
        return MPI_ERR_RANK;
    if (tag < 0 ? !(recv && tag == MPI_ANY_TAG) : tag > msh_lane_tag_ub)
        return MPI_ERR_TAG;
    return MPI_SUCCESS;
}

/* The arguments of a message on lc that the host would have refused,
 * checked before the lane posts it: count, type (MPI_DATATYPE_NULL, but
 * for MPICH's empty message of count 0), rank and tag; the error class
 * the hosts give. */
static inline int msh_lane_check(const msh_tp_msg *m, const msh_lane_comm *lc)
{
    int recv = m->mode == MSH_TP_RECV;
    if (m->count < 0)
        return MPI_ERR_COUNT;
#if defined(MPICH)
    if (m->dt == MPI_DATATYPE_NULL && m->count != 0)
#else
    if (m->dt == MPI_DATATYPE_NULL)
#endif
        return MPI_ERR_TYPE;
    return msh_lane_check_peer(lc, m->peer, m->tag, recv);
}

/* The modes a lane may finish inside the post, with no request of its own
 * (standard and ready sends): tested before the try is called, so that a
 * receive's post pays one compare for it. */
static inline int msh_lane_at_once_mode(msh_tp_mode mode)
{
    return mode == MSH_TP_SEND || mode == MSH_TP_RSEND;
}
/* A carried operation's post or init ended with rc: an error is the
 * lane's own, still to be raised (msh_tp.unraised). */
static inline int msh_lane_posted(msh_tp *tp, int rc)
{
    if (rc != MPI_SUCCESS)
        tp->unraised = 1;
    return rc;
}

/* The word of a send that finished inside its post without a request of
 * the lane's (a short message): only msh_lane_post_track reads it. */
#define MSH_LANE_DONE msh_lane_enc(MSH_LANE_SLOT_MAX - 1)

/* What a post (transport.h) does once the lane posted r with word *treq
 * (r NULL: a send that went without a request of the lane's, *treq
 * MSH_LANE_DONE): a finished one's result is taken into p and r freed; one
 * in flight is tracked with ctx. A non-persistent r just posted is either,
 * so this never fails. */
static inline void msh_lane_post_track(msh_lane_q *q, msh_lane_req *r, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    if (*treq == MSH_LANE_DONE) {
        memset(&p->d.status, 0, sizeof p->d.status); /* what the lane's finished sends report */
        p->d.own_error = 0;
        *treq = MPI_REQUEST_NULL;
        p->how = MSH_TP_DONE;
    } else if (!r->active) {
        p->d.raise_on = r->comm;
        p->d.own_error = msh_lane_take(q, r, treq, &p->d.status) != MPI_SUCCESS;
        p->how = MSH_TP_DONE;
    } else {
        r->ctx = ctx;
        r->tracked = 1;
        q->ntracked++;
        p->how = MSH_TP_TRACKED;
    }
}
/* Let go of r: dropped when it finishes if active, else freed now. */
void msh_lane_release(msh_lane_q *q, msh_lane_req *r, msh_tp_req *treq);

struct msh_lane_tp;
/* What each lane does its own way, behind the operations every lane
 * shares (below): the rest of a post, start or cancel is the same for
 * all of them. Called under the VCI's lock. */
typedef struct msh_lane_ops {
    /* One pass of the lane's progress (nothing once closed): how many
     * completions it read. */
    int (*progress)(struct msh_lane_tp *l);
    /* A standard or ready send of a named type that finished inside the
     * call with no request of the lane's (*treq = MSH_LANE_DONE): 1 if it
     * went, 0 to post it with a request. */
    int (*send_at_once)(struct msh_lane_tp *l, msh_lane_comm *lc, const msh_tp_msg *m, msh_tp_req *treq);
    /* A new zeroed request of the lane's for a receive (recv) or a send,
     * or NULL (out of memory or slots); the caller describes it. */
    msh_lane_req *(*make)(struct msh_lane_tp *l, int recv);
    /* Put r (inactive) on the wire. On failure r is inactive again, or
     * left an orphan that goes once nothing more can come for it. */
    int (*issue)(struct msh_lane_tp *l, msh_lane_req *r);
    /* Ask the provider to cancel r, active; what it may not cancel (a
     * send that left: MPI allows that, its status then says so) it
     * leaves alone. */
    void (*cancel)(struct msh_lane_tp *l, msh_lane_req *r);
    /* Look for a message from source with tag on lc (both checked, the
     * lane open): *flag, and when found *status but its MPI_ERROR (unless
     * MPI_STATUS_IGNORE) and, with claimed, the message taken into a
     * request of the lane's, *claimed, which nothing else can match. */
    int (*probe)(struct msh_lane_tp *l, msh_lane_comm *lc, int source, int tag, int *flag, msh_lane_req **claimed,
                 MPI_Status *status);
    /* Receive the message r claimed, r now described as the receive;
     * on success r is active. */
    int (*recv_claimed)(struct msh_lane_tp *l, msh_lane_req *r);
} msh_lane_ops;

/* A lane's instance starts with this part, which the operations below
 * serve the same way for every lane: the host transport under it (the
 * communicators the lane does not carry), its requests and named types,
 * and its own operations. A lane's ops table points at these where it
 * has nothing of its own to do. */
typedef struct msh_lane_tp {
    msh_tp base;
    msh_tp *host;
    int closed;    /* its endpoints are gone (finalize): nothing moves */
    /* Work in flight that no request tracks (the libfabric lane's
     * acknowledgements waiting in its backlog): pollers see it busy. */
    int untracked;
    msh_lane_q q;
    msh_lane_named named;
    const msh_lane_ops *ops;
} msh_lane_tp;

static inline msh_lane_tp *msh_lane_tp_of(msh_tp *tp) { return (msh_lane_tp *)tp; }

/* Tracked: the host's and the lane's. Never idle to pollers: a peer's send
 * may need this process's endpoint progressed before it completes (a
 * rendezvous; manual progress, as tcp;ofi_rxm has), whatever this process
 * has posted, as the host progresses its own channels in every blocking
 * call. */
static inline void msh_lane_set_tracked(msh_lane_tp *l)
{
    l->base.ntracked = l->host->ntracked + l->q.ntracked;
    atomic_store_explicit(&l->base.busy, l->base.ntracked + l->untracked + 1, memory_order_relaxed);
}

/* The communicator m goes on, if the lane carries it and the peer is a
 * process (MPI_PROC_NULL stays with the host, which completes it). */
static inline msh_lane_comm *msh_lane_carried(const msh_tp_msg *m)
{
    return m->peer == MPI_PROC_NULL ? NULL : msh_lane_comm_msg(m);
}

/* A request of the lane's for m on lc: made inactive (persistent), or
 * issued; its word in *treq. */
MSH_INLINE int msh_lane_new_req(msh_lane_tp *l, const msh_lane_ops *ops, msh_lane_comm *lc, const msh_tp_msg *m,
                                int persistent, msh_tp_req *treq, msh_lane_req **made)
{
    if (l->closed)
        return MPI_ERR_OTHER;
    msh_lane_req *r = ops->make(l, m->mode == MSH_TP_RECV);
    if (!r)
        return MPI_ERR_NO_MEM;
    r->persistent = (uint8_t)persistent;
    msh_lane_describe(&l->named, r, lc, m);
    int rc = persistent ? MPI_SUCCESS : ops->issue(l, r);
    if (rc != MPI_SUCCESS) {
        if (!r->orphan)
            msh_lane_req_free(&l->q, r);
        return rc;
    }
    *treq = msh_lane_enc(r->slot);
    *made = r;
    return MPI_SUCCESS;
}

/* A lane's post and send_now (transport.h), once per message: inline in
 * the lane with its own ops, a constant there, so that the compiler calls
 * the lane's functions directly (or inlines them) instead of through
 * pointers (NEWS has what the pointers cost). A message on a communicator
 * the lane does not carry, or to MPI_PROC_NULL, goes to the host
 * transport under it. */
MSH_INLINE int msh_lane_post(msh_tp *tp, const msh_lane_ops *ops, const msh_tp_msg *m, void *ctx, msh_tp_req *treq,
                             msh_tp_posted *p)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_comm *lc = msh_lane_carried(m);
    int rc;
    if (!lc) {
        rc = msh_tp_post(l->host, m, ctx, treq, p);
        msh_lane_set_tracked(l);
        return rc;
    }
    msh_lane_req *r = NULL;
    rc = msh_lane_check(m, lc);
    if (rc == MPI_SUCCESS && !(msh_lane_at_once_mode(m->mode) && ops->send_at_once(l, lc, m, treq)))
        rc = msh_lane_new_req(l, ops, lc, m, 0, treq, &r);
    if (rc == MPI_SUCCESS) {
        tp->carried++;
        msh_lane_post_track(&l->q, r, ctx, treq, p);
        if (p->how == MSH_TP_TRACKED)
            msh_lane_set_tracked(l);
    }
    return msh_lane_posted(tp, rc);
}
MSH_INLINE int msh_lane_send_now(msh_tp *tp, const msh_lane_ops *ops, const msh_tp_msg *m)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_comm *lc = msh_lane_carried(m);
    msh_tp_req t;
    if (!lc || msh_lane_check(m, lc) != MPI_SUCCESS || !ops->send_at_once(l, lc, m, &t))
        return 0;
    tp->carried++;
    return 1;
}

/* The other transport operations every lane does alike (transport.h): a
 * message on a communicator the lane does not carry, or to MPI_PROC_NULL,
 * and a request word that is not the lane's go to the host transport
 * under it. */
int msh_lane_op_init(msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq);
int msh_lane_op_start(msh_tp *tp, msh_tp_req *treq);
int msh_lane_op_cancel(msh_tp *tp, msh_tp_req *treq);
int msh_lane_op_probe(msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                      MPI_Status *status);
int msh_lane_op_post_matched(msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                             void *ctx, msh_tp_req *treq, msh_tp_posted *p);
int msh_lane_op_track(msh_tp *tp, void *ctx, msh_tp_req treq);
int msh_lane_op_poll(msh_tp *tp, const msh_tp_done **done);
void *msh_lane_op_tracked(msh_tp *tp, int k);
int msh_lane_op_wait(msh_tp *tp, msh_tp_req *treq, MPI_Status *st);
int msh_lane_op_test(msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *st);
int msh_lane_op_release(msh_tp *tp, msh_tp_req *treq);
void msh_lane_op_mark_comms(msh_tp *tp);
/* A lane's transport operations: its own post, send_now and close, the
 * shared ones above for the rest. */
#define MSH_LANE_TP_OPS(lane_name, post_fn, send_now_fn, close_fn)                                          \
    {                                                                                                      \
        .name = (lane_name), .post = (post_fn), .send_now = (send_now_fn), .init = msh_lane_op_init,       \
        .start = msh_lane_op_start, .track = msh_lane_op_track, .poll = msh_lane_op_poll,                  \
        .tracked = msh_lane_op_tracked, .cancel = msh_lane_op_cancel, .probe = msh_lane_op_probe,          \
        .post_matched = msh_lane_op_post_matched, .wait = msh_lane_op_wait, .test = msh_lane_op_test,      \
        .release = msh_lane_op_release, .close = (close_fn), .mark_comms = msh_lane_op_mark_comms,         \
    }

/* Opening, collective on MPI_COMM_WORLD (every process opens its VCIs in
 * the same order, at init): whether ok holds on every process, so that
 * either every process uses a lane or none does. */
int msh_lane_all_ok(int ok);
/* A lane's instance of size bytes, zeroed and on cache lines of its own
 * (VCIs share none), or NULL. */
void *msh_lane_tp_alloc(size_t size);
/* The last step of opening VCI idx on lane l, with the host transport
 * under it: from here the transports are not all the host's. */
void msh_lane_tp_opened(msh_lane_tp *l, msh_tp *host, const msh_lane_ops *ops, const msh_tp_ops *tp_ops, int idx);

/* What every lane's close does around its own: sends still to deliver
 * first (msh_lane_flush), then, after close_ep dropped the endpoints,
 * the requests and the host transport. */
void msh_lane_op_close(msh_lane_tp *l, void (*close_ep)(msh_lane_tp *l));

#endif
