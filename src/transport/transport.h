/* Transports: what moves a VCI's point-to-point messages.
 *
 * Each VCI owns one transport instance. The engine above (the sync layer:
 * posting, progress, waits) talks to it through this interface only: post a
 * send or a receive (and track it), make and start a persistent one, track
 * a started one, poll completions into the engine, cancel, probe, receive a
 * probed message, wait, test, release, close. A transport never calls up: completions are returned by poll, the
 * way a completion queue is read, each with the context the engine gave to
 * track (its own request).
 *
 * The host transport (host.c) is the first implementation: the host's
 * nonblocking calls on the VCI's duplicate communicator, polled with
 * Testsome. A new transport is one more file with an ops table and an entry
 * in transport.c's list; nothing above changes.
 *
 * A transport request (msh_tp_req) is one word that the transport owns: the
 * host's MPI_Request for the host transport; another transport encodes its
 * own there. MPI_REQUEST_NULL means none, for every transport.
 *
 * Locking: every operation on an instance runs under its VCI's lock, except
 * msh_tp_idle (a relaxed read, for pollers deciding whether to lock at all)
 * and the ops a transport marks callable without it (msh_tp_host_post and
 * the host's wait and test, on requests nobody else holds). */
#ifndef MSH_TRANSPORT_TRANSPORT_H
#define MSH_TRANSPORT_TRANSPORT_H

#include <mpi.h>
#include <stdatomic.h>

#include "core/common.h"

typedef MPI_Request msh_tp_req;

/* What a point-to-point operation is: the send modes, or a receive. */
typedef enum {
    MSH_TP_SEND = 0,
    MSH_TP_SSEND,
    MSH_TP_BSEND,
    MSH_TP_RSEND,
    MSH_TP_RECV,
} msh_tp_mode;

/* One message, as the program described it, on the route's communicator
 * (the VCI's duplicate for the host transport). */
typedef struct msh_tp_msg {
    const void *buf; /* a receive's buffer too (written) */
    MPI_Count count; /* above INT_MAX only from the large-count calls */
    MPI_Datatype dt;
    int peer;        /* destination, or source (may be a wildcard) */
    int tag;
    MPI_Comm comm;
    msh_tp_mode mode;
    /* The transport's record of comm (msh_tp_comm_record), when the
     * engine has it at hand; NULL: the transport looks comm up itself. */
    const void *rec;
} msh_tp_msg;

static inline msh_tp_msg msh_tp_msg_of(msh_tp_mode mode, const void *buf, MPI_Count count, MPI_Datatype dt, int peer,
                                       int tag, MPI_Comm comm)
{
    return (msh_tp_msg){ .buf = buf, .count = count, .dt = dt, .peer = peer, .tag = tag, .comm = comm, .mode = mode };
}

/* A completion read by poll: the context given to track, the transport
 * request as it is now (MPI_REQUEST_NULL, or a persistent request made
 * inactive), and the final status (MPI_ERROR set, MPI_SUCCESS or not). */
typedef struct msh_tp_done {
    void *ctx;
    msh_tp_req treq;
    MPI_Status status;
    /* Set with an error in status that no error handler has seen (a
     * lane's own: the host raises its errors in its own calls), and the
     * communicator whose handler must see it; the engine raises it in the
     * call that retires the request. */
    int own_error;
    MPI_Comm raise_on;
} msh_tp_done;

struct msh_tp;

/* What a post did with its operation (msh_tp_posted.how). */
typedef enum {
    MSH_TP_TRACKED = 0, /* in flight: its completion comes through poll, with the context given */
    MSH_TP_DONE,        /* finished inside the post (short sends, receives of messages already
                         * there, on a lane): d holds its completion, treq is MPI_REQUEST_NULL */
    MSH_TP_HELD,        /* in flight, but the transport could not track it (no memory): the
                         * caller's to wait for or release */
} msh_tp_how;

typedef struct msh_tp_posted {
    msh_tp_how how;
    /* MSH_TP_DONE: ctx and treq unused; own_error is set exactly when
     * status carries an error (one found inside the post is the
     * transport's own), so that the engine need not read the status of a
     * send that went. */
    msh_tp_done d;
} msh_tp_posted;

typedef struct msh_tp_ops {
    const char *name;
    /* Post a nonblocking send or receive; *treq gets its request, which is
     * tracked with ctx at once unless the operation finished inside the
     * post (p says which). One call for what every nonblocking operation
     * needs: a lane knows at no cost whether the request it just made
     * finished, where a separate question would find it by its word again
     * (the host's answer would cost a test: it tracks every request). */
    int (*post)(struct msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p);
    /* Optional (NULL: never): a standard or ready send that the transport
     * can finish inside this call, with no request (small, named type, room
     * at once). 1 if it went; 0 if not, and nothing happened: the caller
     * then posts it. Lets the engine skip making a request for a send that
     * needs none; called where post would be, so the order is the same. */
    int (*send_now)(struct msh_tp *tp, const msh_tp_msg *m);
    /* Make a persistent send or receive (inactive), and start one. */
    int (*init)(struct msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq);
    int (*start)(struct msh_tp *tp, msh_tp_req *treq);
    /* From now on, report treq's completion through poll with ctx.
     * MPI_ERR_NO_MEM if it cannot; treq is then still the caller's. */
    int (*track)(struct msh_tp *tp, void *ctx, msh_tp_req treq);
    /* Completions of tracked operations, at most all of them: *done points
     * to the transport's own array, valid until the next call on tp.
     * Returns how many; completed operations are no longer tracked. */
    int (*poll)(struct msh_tp *tp, const msh_tp_done **done);
    /* The context of the k-th tracked operation, oldest first (reports). */
    void *(*tracked)(struct msh_tp *tp, int k);
    int (*cancel)(struct msh_tp *tp, msh_tp_req *treq);
    /* A nonblocking probe for a message from source with tag on comm
     * (wildcards allowed); with message not NULL a matched probe, whose
     * message handle only this transport's post_matched receives (posted
     * and tracked as post does). The status is filled when *flag is set. */
    int (*probe)(struct msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                 MPI_Status *status);
    int (*post_matched)(struct msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                        void *ctx, msh_tp_req *treq, msh_tp_posted *p);
    /* Finish an operation that is not tracked (blocking), or test it. */
    int (*wait)(struct msh_tp *tp, msh_tp_req *treq, MPI_Status *status);
    int (*test)(struct msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *status);
    /* Let go of a request: an inactive persistent one is freed; an active
     * one that is not tracked completes on its own. */
    int (*release)(struct msh_tp *tp, msh_tp_req *treq);
    void (*close)(struct msh_tp *tp);
    /* Mark what the transport keeps of freed communicators that its
     * requests still use (msh_tp_comm_reclaim_begin); NULL where it keeps
     * nothing of its own (the host). */
    void (*mark_comms)(struct msh_tp *tp);
} msh_tp_ops;

/* The part of an instance the engine reads; an implementation embeds it
 * first in its own state. ntracked is written by the transport under the
 * VCI's lock; busy is its relaxed copy for pollers that skip an idle VCI
 * rather than take its lock for nothing (a poll that misses a post made
 * meanwhile sees it on its next pass). */
typedef struct msh_tp {
    const msh_tp_ops *ops;
    int idx;          /* the VCI's */
    int ntracked;
    _Atomic int busy;
    /* Set with an error that post, init or probe returned when the transport
     * made it itself and no error handler has seen it yet (a lane's; the
     * host's calls raise their own): the engine raises it through the
     * communicator's handler once the VCI is unlocked. Under the lock. */
    int unraised;
    /* Sends and receives the transport carried itself, outside the host
     * (a lane's; MPISHIM_STATS). Under the lock. */
    unsigned long long carried;
} msh_tp;

/* Open the transport called name for VCI idx; NULL with *why set (a
 * static string) if there is no such transport or it cannot open. */
msh_tp *msh_tp_open(const char *name, int idx, const char **why);

/* Whether the host may carry a VCI's point-to-point messages directly,
 * outside its transport (the solo path, a blocking call's post): true until
 * a transport that carries communicators of its own opens (fabric.c); then
 * every message of such a communicator must go through it, or matching
 * would span two transports. Written once, at init. */
extern int msh_tp_direct;

/* Set while this thread polls the lanes only (msh_progress_poll_lanes): a
 * lane's poll then neither polls nor pokes the host transport under it. */
extern MSH_TLS int msh_tp_lanes_only;

/* Set while this thread polls for a test (msh_progress_test): a poll then
 * looks at every operation it tracks, where it would otherwise look at some
 * (host.c): a test must find an operation complete once the transport has
 * completed it, whichever of the tracked ones it is. */
extern MSH_TLS int msh_tp_exhaustive;

/* A communicator the shim registered (collective over c: every member
 * calls it, in the same order as its other collectives on c), and its
 * removal (MPI_Comm_free). A transport that carries communicators of its
 * own decides here, the same on every member, whether it carries c;
 * no_any_tag: c's receives and probes never use MPI_ANY_TAG (asserted). */
int msh_tp_comm_add(MPI_Comm c, int inter, int no_any_tag);
void msh_tp_comm_remove(MPI_Comm c);
/* The VCI (of n) that c's messages must use when a transport of its own
 * carries c, the same on every member (VCI i of one process reaches only
 * VCI i of another there); -1 when any VCI will do. */
int msh_tp_comm_home(MPI_Comm c, int n);
/* What a transport of its own keeps for c, or NULL (the host's, or a
 * communicator it does not carry): the engine keeps it beside its own
 * entry and passes it in msh_tp_msg.rec. Valid until msh_tp_comm_remove. */
const void *msh_tp_comm_record(MPI_Comm c);

/* What a transport of its own keeps of a freed communicator outlives
 * msh_tp_comm_remove while operations started on it are in flight. To
 * free it once none is: begin (0: nothing to free now), then every VCI's
 * msh_tp_mark_comms under that VCI's lock, then end (all: every VCI was
 * marked; otherwise nothing is freed). */
int msh_tp_comm_reclaim_begin(void);
void msh_tp_comm_reclaim_end(int all);

/* The VCI whose transport holds a message a matched probe returned, or -1
 * for the host's messages (any VCI may receive those). */
int msh_tp_message_vci(MPI_Message m);
/* The Fortran handle of such a message and back (MPI_Message_c2f/f2c on
 * Open MPI, whose own conversion reads the handle's object): 1 if m, or f,
 * is a transport's, 0 for the host's. */
int msh_tp_message_c2f(MPI_Message m, MPI_Fint *f);
int msh_tp_message_f2c(MPI_Fint f, MPI_Message *m);

/* The provider the fabric transport uses, or NULL when it is off. */
const char *msh_tp_fabric_provider(void);

/* The host's own nonblocking or persistent call for m, outside any VCI:
 * the forwarding paths (runtime off, solo), which are the host by
 * definition. */
int msh_tp_host_post(const msh_tp_msg *m, int persistent, msh_tp_req *treq);
/* The same through the host's large-count call (MPI_Isend_c, ...): what
 * msh_tp_host_post does for a count above INT_MAX, and the large-count
 * calls' own path on the host transport. MPI_ERR_COUNT on a host without
 * them (before MPI 4.0), which has no large-count calls to forward. */
int msh_tp_host_post_c(const msh_tp_msg *m, int persistent, msh_tp_req *treq);

static inline int msh_tp_post(msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    return tp->ops->post(tp, m, ctx, treq, p);
}
static inline int msh_tp_send_now(msh_tp *tp, const msh_tp_msg *m)
{
    return tp->ops->send_now && tp->ops->send_now(tp, m);
}
static inline int msh_tp_init(msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq)
{
    return tp->ops->init(tp, m, treq);
}
static inline int msh_tp_start(msh_tp *tp, msh_tp_req *treq) { return tp->ops->start(tp, treq); }
static inline int msh_tp_track(msh_tp *tp, void *ctx, msh_tp_req treq) { return tp->ops->track(tp, ctx, treq); }
static inline int msh_tp_poll(msh_tp *tp, const msh_tp_done **done) { return tp->ops->poll(tp, done); }
static inline void *msh_tp_tracked(msh_tp *tp, int k) { return tp->ops->tracked(tp, k); }
static inline int msh_tp_cancel(msh_tp *tp, msh_tp_req *treq) { return tp->ops->cancel(tp, treq); }
static inline int msh_tp_probe(msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                               MPI_Status *status)
{
    return tp->ops->probe(tp, source, tag, comm, flag, message, status);
}
static inline int msh_tp_post_matched(msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                                      void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    return tp->ops->post_matched(tp, buf, count, dt, message, ctx, treq, p);
}
static inline int msh_tp_wait(msh_tp *tp, msh_tp_req *treq, MPI_Status *st) { return tp->ops->wait(tp, treq, st); }
static inline int msh_tp_test(msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *st)
{
    return tp->ops->test(tp, treq, flag, st);
}
static inline int msh_tp_release(msh_tp *tp, msh_tp_req *treq) { return tp->ops->release(tp, treq); }
static inline void msh_tp_close(msh_tp *tp) { tp->ops->close(tp); }
static inline void msh_tp_mark_comms(msh_tp *tp)
{
    if (tp->ops->mark_comms)
        tp->ops->mark_comms(tp);
}

/* Whether the error of the post, init or probe just made is still to be raised
 * (see unraised), clearing it. */
static inline int msh_tp_take_unraised(msh_tp *tp)
{
    int u = tp->unraised;
    tp->unraised = 0;
    return u;
}

/* Whether tp tracks nothing, as last stored (no lock needed). */
static inline int msh_tp_idle(msh_tp *tp)
{
    return atomic_load_explicit(&tp->busy, memory_order_relaxed) == 0;
}

/* For transports: ntracked changed (under the VCI's lock). */
static inline void msh_tp_set_tracked(msh_tp *tp, int n)
{
    tp->ntracked = n;
    atomic_store_explicit(&tp->busy, n, memory_order_relaxed);
}

#endif
