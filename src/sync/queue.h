/* Queued posting: MPISHIM_PROGRESS=combine and offload.
 *
 * A thread posting a point-to-point operation never waits for its VCI's
 * lock. Under combine a poster that gets the lock at once (try-lock) posts
 * directly (post.c); otherwise it fills a shim request with the arguments,
 * pushes it on the VCI's queue (lock-free, multi-producer) and returns the
 * request. The queue is drained into the host under the VCI's lock, in
 * push order:
 *   combine  by the thread holding the lock, when it unlocks
 *            (msh_vci_unlock re-checks the queue), so nothing waits in a
 *            queue while no thread is inside the shim; by the poster if
 *            the lock has come free meanwhile; and by every progress poll;
 *   offload  by the progress thread's polls only: posters never enter
 *            the host.
 * So one thread at a time makes a VCI's host calls, and a poster never
 * waits for the thread that polls (the offload design of Vaidyanathan et
 * al., SC 2015).
 *
 * Order: MPI's non-overtaking rule binds the operations of one thread on one
 * (communicator, peer, tag); they share a route, hence a VCI and a queue,
 * and the queue keeps push order. Every operation posted to a VCI directly
 * (under its lock) first drains the queue (msh_post_begin), and so do probes
 * and the generated pass-through calls (a probe must see what the host would
 * have seen). Queueing is used only once the solo path is off for good, so a
 * solo call never overtakes a queued one.
 *
 * Errors: only calls whose arguments the shim has checked as the host would
 * (known intracommunicator, rank, tag, count, predefined datatype) are
 * queued; anything else takes the direct path and reports at the call as
 * before. A host error when a queued call is finally posted (resources)
 * reaches the request's status. */
#ifndef MSH_SYNC_QUEUE_H
#define MSH_SYNC_QUEUE_H

#include <limits.h>
#include <mpi.h>
#include <stdatomic.h>

#include "core/config.h"
#include "sync/request.h"
#include "sync/solo.h"
#include "vci/vci.h"

/* Set at runtime start: queueing policy, host not serialized. */
extern int msh_queue_on;

/* The queue is in use for new posts now (policy on, solo path off). */
static inline int msh_queue_active(void)
{
    return MSH_UNLIKELY(msh_queue_on) && !atomic_load_explicit(&msh_solo_on, memory_order_relaxed);
}

static inline int msh_queue_nonempty(const msh_vci *v)
{
    return atomic_load_explicit(&v->qhead, memory_order_relaxed) != NULL;
}

/* Whether v has posts queued, or a drainer is posting ones it took off the
 * queue: a thread whose own posts must reach the transport before its next
 * step (a call that must not overtake them, freeing the communicator they
 * name) waits for the drainer by taking v's lock. Seeing qhead empty
 * (acquire) means a drainer's exchange took this thread's posts, after
 * that drainer raised qposting; its release store lowers it. */
static inline int msh_queue_busy(const msh_vci *v)
{
    return atomic_load_explicit(&v->qhead, memory_order_acquire) != NULL ||
           atomic_load_explicit(&v->qposting, memory_order_acquire) != 0;
}

/* Under v's lock: post everything queued on v, in push order. */
void msh_queue_drain(msh_vci *v);

/* MPISHIM_PROGRESS=combine: a VCI's unlocking drains its queue. */
extern int msh_queue_combine;

/* Whether v's queue holds posts, read as a read-modify-write: an RMW reads
 * the latest value of qhead, so a holder that has just unlocked either sees
 * a poster's push or the poster (whose push comes later in qhead's order,
 * and so after the unlock) finds the lock free. A plain load could miss
 * both (store buffering); fences would do too, but ThreadSanitizer does not
 * understand them. */
static inline int msh_vci_queue_seen(msh_vci *v)
{
    struct msh_request *none = NULL;
    return !atomic_compare_exchange_strong_explicit(&v->qhead, &none, NULL, memory_order_seq_cst,
                                                    memory_order_seq_cst);
}

/* Combining: a poster that found the lock taken left its post in the queue
 * for the holder, so a holder checks the queue after unlocking and drains
 * it while it can take the lock (msh_queue_kick, queue.c, which also
 * covers a try-lock that failed on a bias owner inside). */
void msh_queue_kick(msh_vci *v);

static inline void msh_vci_kick(msh_vci *v)
{
    if (msh_vci_queue_seen(v))
        msh_queue_kick(v);
}

/* A try-lock for a thread that queues nothing of its own when it fails (a
 * progress sweep). If it failed on a bias owner inside, posters whose own
 * try-locks failed while it held the lock for that moment rely on it to
 * look at the queue again, as a poster's kick does. */
static inline int msh_vci_trylock_helping(msh_vci *v)
{
    int got = msh_vci_try(v);
    if (MSH_UNLIKELY(got == MSH_VCI_OWNER_IN) && msh_queue_combine)
        msh_vci_kick(v);
    return got > 0;
}

/* The same check by a holder that entered by its bias (a VCI one thread
 * uses alone), without the read-modify-write: a poster that found such a
 * holder inside forced a barrier on it after queueing (lock.h,
 * msh_block_try_locked), so that the holder's read below, which follows
 * its release of bias_in, sees the post unless the poster saw the holder
 * gone and took the lock itself. The compiler must keep the read after
 * the release. */
static inline void msh_vci_kick_biased(msh_vci *v)
{
    atomic_signal_fence(memory_order_seq_cst);
    if (MSH_UNLIKELY(msh_queue_nonempty(v)))
        msh_vci_kick(v);
}

/* Every unlock of a VCI above the VCI layer. */
static inline void msh_vci_unlock(msh_vci *v)
{
    int biased = msh_vci_by_bias(v);
    msh_vci_release(v);
    if (MSH_UNLIKELY(msh_queue_combine)) {
        if (biased)
            msh_vci_kick_biased(v);
        else
            msh_vci_kick(v);
    }
}

/* Drain every VCI's queue, and wait for drains under way (before probes,
 * pass-through calls, MPI_Comm_free: msh_queue_busy). Skips a
 * VCI whose lock this thread holds (a host callback inside a shim call):
 * its pending set may be in use below. */
void msh_queue_drain_all(void);

/* Whether a send/receive with these arguments can be queued: the shim
 * checked everything the host would check at the call. size: the
 * communicator's size (intracommunicator), tag_ub the host's bound. */
int msh_queue_dt_ok(MPI_Datatype dt);
static inline int msh_queue_args_ok(const void *buf, MPI_Count count, MPI_Datatype dt, int peer, int tag, int size,
                                    int recv)
{
    if (count < 0 || count > INT_MAX || (count > 0 && buf == NULL))
        return 0;
    if (peer < 0 ? !(recv && peer == MPI_ANY_SOURCE) : peer >= size)
        return 0;
    if (tag < 0 ? !(recv && tag == MPI_ANY_TAG) : tag > msh_rt.tag_ub)
        return 0;
    return msh_queue_dt_ok(dt);
}

/* Queue a send (ssend: synchronous mode) or receive on v, to be posted on
 * host communicator hc; *handle gets the shim request's handle. Returns
 * MPI_SUCCESS, or MPI_ERR_NO_MEM (no request object). */
int msh_queue_post(msh_vci *v, int recv, int ssend, const void *buf, int count, MPI_Datatype dt, int peer, int tag,
                   MPI_Comm hc, MPI_Comm user, MPI_Request *handle);

/* At runtime start (after the pool) and finalize. */
void msh_queue_init(void);
void msh_queue_fini(void);

#endif
