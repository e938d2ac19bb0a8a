/* Hooks around every generated pass-through wrapper (tools/wrapgen.py).
 *
 * When the host runs below MPI_THREAD_MULTIPLE (MPISHIM_HOST_THREAD=
 * serialized, or a host that cannot do better), every host call must be
 * serialized by the shim, including the calls it knows nothing about: these
 * hooks take the one host lock around them. The lock is recursive because a
 * host may call MPI_* entry points from inside its own functions (ROMIO
 * does), and msh_host_lock_depth tells a thread that waits while holding it
 * to progress by itself rather than sleep (src/sync/progress.c). */
#ifndef MSH_INTERCEPT_PASSTHRU_H
#define MSH_INTERCEPT_PASSTHRU_H

#include "intercept/shim.h"

static inline int msh_pass_enter(void)
{
    if (MSH_LIKELY(!msh_on() || !msh_pool.serialized))
        return 0;
    pthread_mutex_lock(&msh_pool.host_lock);
    msh_host_lock_depth++;
    return 1;
}

static inline void msh_pass_exit(int locked)
{
    if (locked) {
        msh_host_lock_depth--;
        pthread_mutex_unlock(&msh_pool.host_lock);
    }
}

#define MSH_PASS_ENTER() int msh_locked_ = msh_pass_enter()
#define MSH_PASS_EXIT()  msh_pass_exit(msh_locked_)

/* Names of the generated wrappers, for mpishim-info. */
extern const char *const msh_passthru_names[];
extern const int msh_passthru_count;

#endif
