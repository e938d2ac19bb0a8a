/* The contended half of msh_lock (see lock.h). */
#include "core/lock.h"

#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Tries before sleeping, about what glibc's adaptive mutex spins (its
 * default maximum is 100): a holder inside a short host call lets go
 * within that on a core of its own. */
#define MSH_LOCK_SPINS 100

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

void msh_lock_wait(msh_lock *l)
{
    for (int i = 0; i < MSH_LOCK_SPINS; i++) {
        cpu_relax();
        if (atomic_load_explicit(&l->v, memory_order_relaxed) == 0 && msh_lock_try(l))
            return;
    }
    /* Mark it contended (2) as we take it or go to sleep: whoever releases
     * a 2 wakes one sleeper, which takes it as 2 again, since others may
     * still sleep. */
    while (atomic_exchange_explicit(&l->v, 2, memory_order_acquire) != 0)
        syscall(SYS_futex, &l->v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
}

void msh_lock_wake(msh_lock *l)
{
    syscall(SYS_futex, &l->v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* ------------------------------------------------------------ the biased lock */

/* A bias's run doubles after each revocation, up to this. */
#define MSH_BLOCK_GRANT_MAX (1u << 20)

static int block_asym;
static pthread_once_t block_once = PTHREAD_ONCE_INIT;

static void block_register(void)
{
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0)
        block_asym = 1;
}

void msh_block_setup(void)
{
    pthread_once(&block_once, block_register);
}

void msh_block_init(msh_block *b)
{
    atomic_store_explicit(&b->lock.v, 0, memory_order_relaxed);
    atomic_store_explicit(&b->bias, 0, memory_order_relaxed);
    atomic_store_explicit(&b->bias_in, 0, memory_order_relaxed);
    atomic_store_explicit(&b->entries, 0, memory_order_relaxed);
    b->by_bias = 0;
    b->grants = 0;
    b->revocations = 0;
    b->last = 0;
    b->revoked = 0;
    b->run = 0;
    b->grant_at = MSH_BLOCK_GRANT;
}

/* A full barrier on every running thread of the process. */
static void barrier_all(void)
{
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0) {
        /* Registered at setup, so this does not fail; without the barrier
         * two threads could be inside at once. */
        fputs("mpishim: membarrier failed while revoking a VCI lock's bias\n", stderr);
        abort();
    }
}

/* Under b->lock: clear another thread's bias, with the barrier that makes
 * its owner either see that or be seen inside (bias_in). */
static void revoke_bias(msh_block *b)
{
    b->revoked = atomic_load_explicit(&b->bias, memory_order_relaxed);
    atomic_store_explicit(&b->bias, 0, memory_order_seq_cst);
    barrier_all();
    if (b->grant_at < MSH_BLOCK_GRANT_MAX)
        b->grant_at *= 2;
    b->last = 0;
    b->revocations++;
}

/* Under b->lock, taken by me: if me's bias was the one revoked, its fast
 * path is over (it came here after that), so it can no longer touch
 * bias_in unless granted again. */
static inline void note_revoked_back(msh_block *b, uintptr_t me)
{
    if (b->revoked == me)
        b->revoked = 0;
}

/* A run of takes by one thread earns it the bias, unless a revoked owner
 * may still be late on its fast path (lock.h). */
static void count_run(msh_block *b, uintptr_t me)
{
    if (!block_asym)
        return;
    if (b->last != me) {
        b->last = me;
        b->run = 1;
    } else if (++b->run >= b->grant_at && b->revoked == 0) {
        b->run = 0;
        b->grants++;
        atomic_store_explicit(&b->bias, me, memory_order_relaxed);
    }
}

void msh_block_locked(msh_block *b, uintptr_t me)
{
    if (atomic_load_explicit(&b->bias, memory_order_relaxed) != 0)
        revoke_bias(b);
    /* An owner seen inside (now, or by a try-lock that revoked and gave
     * up) leaves soon: its critical sections never block. */
    for (int i = 0; atomic_load_explicit(&b->bias_in, memory_order_acquire) != 0; i++) {
        if (i < MSH_LOCK_SPINS)
            cpu_relax();
        else
            sched_yield(); /* the owner was preempted inside: let it run */
    }
    note_revoked_back(b, me);
    count_run(b, me);
}

void (*msh_block_fail_hook)(msh_block *b);

int msh_block_try_locked(msh_block *b, uintptr_t me)
{
    note_revoked_back(b, me);
    if (atomic_load_explicit(&b->bias, memory_order_relaxed) != 0)
        revoke_bias(b);
    else if (atomic_load_explicit(&b->bias_in, memory_order_acquire) != 0)
        barrier_all(); /* an owner in its last biased entry: see lock.h */
    if (atomic_load_explicit(&b->bias_in, memory_order_acquire) != 0) {
        if (MSH_UNLIKELY(msh_block_fail_hook != NULL))
            msh_block_fail_hook(b);
        msh_lock_give(&b->lock); /* the owner is inside; the bias stays revoked */
        return MSH_BLOCK_OWNER_IN;
    }
    /* a helper's take: no run of its own, and the user's run goes on */
    return 1;
}

int msh_block_owner_stays(msh_block *b)
{
    barrier_all();
    return atomic_load_explicit(&b->bias_in, memory_order_acquire) != 0;
}
