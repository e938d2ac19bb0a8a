/* The contended half of msh_lock (see lock.h). */
#include "core/lock.h"

#include <linux/futex.h>
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
