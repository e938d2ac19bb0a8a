/* A mutex for the per-message paths: one atomic instruction to take it and
 * one to release it when nobody waits, where glibc's adaptive mutex runs
 * some 30 instructions each way (type and owner checks). The VCI lock is
 * taken once per post and once per poll, so that difference is paid on
 * every message.
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

#endif
