/* A mutex for the per-message paths: one atomic instruction to take it and
 * one to release it when nobody waits, without the type and owner checks
 * of glibc's adaptive mutex. The VCI lock is taken once per post and once
 * per poll, so that difference is paid on every message.
 *
 * The algorithm is the three-state futex mutex of Drepper, "Futexes Are
 * Tricky" (2011): 0 free, 1 held, 2 held and a thread may sleep on it. A
 * thread that finds it held spins briefly, as an adaptive mutex does (the
 * critical sections are short, non-blocking calls), then sleeps in the
 * kernel, so that threads outnumbering cores give their core away. Not
 * recursive; no owner is recorded (the VCI keeps its own holder). */
#ifndef MSH_CORE_LOCK_H
#define MSH_CORE_LOCK_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/common.h"

typedef struct msh_lock {
    _Atomic uint32_t v;
} msh_lock;

#define MSH_LOCK_INIT { 0 }

static inline int msh_lock_try(msh_lock *l)
{
    uint32_t free_ = 0;
    return atomic_compare_exchange_strong_explicit(&l->v, &free_, 1, memory_order_acquire, memory_order_relaxed);
}

/* The contended part: spin, then sleep (core/lock.c). */
void msh_lock_wait(msh_lock *l);
void msh_lock_wake(msh_lock *l);

static inline void msh_lock_take(msh_lock *l)
{
    if (MSH_UNLIKELY(!msh_lock_try(l)))
        msh_lock_wait(l);
}

static inline void msh_lock_give(msh_lock *l)
{
    if (MSH_UNLIKELY(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
        msh_lock_wake(l);
}

/* A biased lock (msh_block): the VCI lock. A VCI that one thread uses
 * alone (a thread per communicator, or a single thread) is taken and
 * released by that thread with plain stores, no atomic read-modify-write:
 * on a lane at one thread per rank, the two locked instructions of each
 * msh_lock acquisition were a large share of the time per message
 * (docs/design.md, The VCI lock).
 *
 * The lock is biased to a thread (its token) once that thread took the
 * underlying msh_lock MSH_BLOCK_GRANT times in a row. The owner then enters
 * by storing bias_in and reading bias back (the fast side of an asymmetric
 * Dekker pair); any other thread takes the msh_lock, clears bias, forces a
 * barrier on every running thread of the process (Linux's membarrier, as
 * the handle table's readers do, core/htab.h) and waits for bias_in to
 * drop: either the owner saw the cleared bias and took the slow path, or
 * the revoker sees it inside and waits for it to leave. After a revocation
 * the next grant needs twice the run, so that two threads that share a VCI
 * settle on the plain lock. Without membarrier no bias is ever granted.
 *
 * bias_in is one flag for whoever owns the bias, and a former owner may
 * still be on its fast path, between its first look at the bias and its
 * store to bias_in, when the revocation comes (preempted there, for as
 * long as the scheduler likes). Its store, and its clear once it finds the
 * bias gone, would hide a newer owner inside from the next revoker, so no
 * other thread is granted the bias until the revoked owner has taken the
 * plain lock once, which it does only after that fast path has ended. */
typedef struct msh_block {
    msh_lock lock;
    _Atomic uintptr_t bias;   /* the owner's token, or 0 */
    _Atomic int bias_in;      /* written by the owner only: inside, or trying to enter */
    _Atomic unsigned entries; /* written by the owner only: its fast entries (wrapping) */
    int by_bias;              /* the holder entered by the fast path (the holder's alone) */
    /* Under lock: the last thread that took it, its run, the run that earns a grant. */
    uintptr_t last;
    /* Under lock: the owner whose bias was revoked, until it takes the
     * lock again (see msh_block_locked). */
    uintptr_t revoked;
    unsigned run, grant_at;
    uint64_t grants, revocations; /* under lock (MPISHIM_STATS) */
} msh_block;

#define MSH_BLOCK_GRANT 64

/* Whether biases can be granted (membarrier registered); call once before
 * the first msh_block is used. */
void msh_block_setup(void);
void msh_block_init(msh_block *b);
/* Under b->lock, taken by me: revoke another thread's bias and wait until
 * its owner is out, count me's run. The try-lock's form does not wait: it
 * returns MSH_BLOCK_OWNER_IN, with b->lock released, if the owner is
 * inside (see msh_block_try), and fails so only after a barrier on every
 * thread that follows whatever the caller wrote before (the revocation's,
 * or one of its own when the bias was already gone), so that an owner
 * leaving reads those writes (a combining poster's queued post:
 * sync/queue.h, msh_vci_kick_biased). Nor does it count: the try-locks
 * are a helper's or a combining poster's (a progress sweep, a drain, a
 * post that queues if the lock is taken), which must not earn a bias that
 * the VCI's own users would revoke, each time with a barrier. */
void msh_block_locked(msh_block *b, uintptr_t me);
int msh_block_try_locked(msh_block *b, uintptr_t me);
/* For unit tests only (NULL otherwise): called by a try-lock that found
 * the owner inside, while it still holds b->lock, so that a test can
 * schedule other threads into that moment. */
extern void (*msh_block_fail_hook)(msh_block *b);

/* The fast path after its first look found the bias mine. Apart for the
 * unit tests: a thread preempted between that look and this is one whose
 * bias may have been revoked and granted again meanwhile. */
static inline int msh_block_enter_biased(msh_block *b, uintptr_t me)
{
    atomic_store_explicit(&b->bias_in, 1, memory_order_relaxed);
    /* The revoker's membarrier orders this store before the load below on
     * this thread's CPU; the compiler must not reorder them either. */
    atomic_signal_fence(memory_order_seq_cst);
    if (MSH_LIKELY(atomic_load_explicit(&b->bias, memory_order_relaxed) == me)) {
        b->by_bias = 1;
        atomic_store_explicit(&b->entries, atomic_load_explicit(&b->entries, memory_order_relaxed) + 1,
                              memory_order_relaxed);
        return 1;
    }
    atomic_store_explicit(&b->bias_in, 0, memory_order_release);
    return 0;
}

static inline int msh_block_fast(msh_block *b, uintptr_t me)
{
    if (atomic_load_explicit(&b->bias, memory_order_relaxed) != me)
        return 0;
    return msh_block_enter_biased(b, me);
}

static inline void msh_block_take(msh_block *b, uintptr_t me)
{
    if (MSH_LIKELY(msh_block_fast(b, me)))
        return;
    msh_lock_take(&b->lock);
    msh_block_locked(b, me);
}

/* 1: taken. 0: another thread holds b->lock. MSH_BLOCK_OWNER_IN: not
 * taken, after this thread held b->lock for a moment and found the bias
 * owner inside. In that moment other threads' try-locks fail, and the
 * owner may leave: a caller that relies on failed try-lockers being seen
 * by whoever is inside (sync/queue.h) must look again itself then
 * (msh_block_owner_stays). */
#define MSH_BLOCK_OWNER_IN (-1)

static inline int msh_block_try(msh_block *b, uintptr_t me)
{
    if (MSH_LIKELY(msh_block_fast(b, me)))
        return 1;
    return msh_lock_try(&b->lock) ? msh_block_try_locked(b, me) : 0;
}

/* After MSH_BLOCK_OWNER_IN: a barrier on every thread, then whether the
 * owner is still inside. If it is, whatever the caller (and any thread
 * whose try-lock failed while the caller held b->lock) wrote before is
 * seen by the owner once it leaves; if not, the owner may have left
 * without seeing it. */
int msh_block_owner_stays(msh_block *b);

/* What a thread that would only help (a progress sweep) finds in b. */
enum msh_block_look {
    MSH_BLOCK_UNBIASED = 0, /* not biased to another thread: take it freely */
    MSH_BLOCK_OWNER_QUIET,  /* biased to another thread, no entry since the last look */
    MSH_BLOCK_OWNER_BUSY,   /* biased to another thread that entered since the last look */
};

/* One read of b's bias and entry count; *seen is the helper's own count
 * from its previous look. A busy owner makes its own progress, and taking
 * the lock would revoke its bias (a membarrier that interrupts every
 * running thread of the process); how long a quiet owner is left alone is
 * the helper's choice. Reads only. */
static inline enum msh_block_look msh_block_look(const msh_block *b, uintptr_t me, unsigned *seen)
{
    uintptr_t o = atomic_load_explicit(&b->bias, memory_order_relaxed);
    if (o == 0 || o == me)
        return MSH_BLOCK_UNBIASED;
    unsigned e = atomic_load_explicit(&b->entries, memory_order_relaxed);
    if (e == *seen)
        return MSH_BLOCK_OWNER_QUIET;
    *seen = e;
    return MSH_BLOCK_OWNER_BUSY;
}

/* For b's holder: whether it entered by the fast path. */
static inline int msh_block_by_bias(const msh_block *b)
{
    return b->by_bias;
}

static inline void msh_block_give(msh_block *b)
{
    if (b->by_bias) {
        b->by_bias = 0;
        atomic_store_explicit(&b->bias_in, 0, memory_order_release);
        return;
    }
    msh_lock_give(&b->lock);
}

#endif
