/* The solo fast path's state (see the comment below). Kept in the sync
 * layer because the completion engine (wait.c) takes it too. */
#ifndef MSH_SYNC_SOLO_H
#define MSH_SYNC_SOLO_H

#include <stdatomic.h>
#include <stdint.h>

#include "core/common.h"
#include "core/config.h"

/* Solo fast path. While one thread at a time uses MPI, the runtime has
 * nothing to arbitrate: that thread's calls go straight to the (MPI_THREAD_
 * MULTIPLE) host, so a single-threaded phase costs what the host costs. The
 * thread that finds another thread inside a solo call switches the process
 * to the shared path for good. Ownership passes between threads that take
 * turns (a main thread's barrier between workers' phases). This is a
 * heuristic: two threads briefly both solo is legal for the host, only
 * slower. Off with MPISHIM_SOLO=0, whenever the shim serializes the host,
 * and with a progress thread (MPISHIM_PROGRESS=thread, offload).
 * Requests made on the solo path are host requests, which every completion
 * call accepts. */
extern _Atomic int msh_solo_on;
extern _Atomic uintptr_t msh_solo_owner;
extern _Atomic int msh_solo_busy;
extern MSH_TLS char msh_solo_token; /* its address names the thread */
int msh_solo_claim(void);
void msh_solo_off(void);             /* for good */
void msh_solo_start(int serialized); /* at init */

static inline int msh_solo_enter(void)
{
    if (MSH_LIKELY(!atomic_load_explicit(&msh_solo_on, memory_order_relaxed)))
        return 0;
    if (MSH_UNLIKELY(atomic_load_explicit(&msh_solo_owner, memory_order_relaxed) != (uintptr_t)&msh_solo_token))
        return msh_solo_claim();
    atomic_store_explicit(&msh_solo_busy, 1, memory_order_relaxed);
    return 1;
}

/* A solo call that hands out a request. Not with MPISHIM_STATS=1: its
 * report at finalize counts the requests still pending, and only shim
 * requests (in the VCIs' pending sets) can be counted, so there the call
 * takes the runtime path. The inline SOLO_DIRECT paths get the same rule
 * from msh_comm_gate (vci/comm.c), at no cost to the fast path. */
static inline int msh_solo_enter_req(void)
{
    return !msh_cfg.stats && msh_solo_enter();
}

static inline void msh_solo_exit(void)
{
    atomic_store_explicit(&msh_solo_busy, 0, memory_order_release);
}

#endif
