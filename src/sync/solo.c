/* The solo fast path's slow half (see solo.h). */
#include "sync/solo.h"

#include "core/log.h"
#include "core/runtime.h"
#include "transport/transport.h"

_Atomic int msh_solo_on;
_Atomic uintptr_t msh_solo_owner;
_Atomic int msh_solo_busy;
MSH_TLS char msh_solo_token;

int msh_solo_claim(void)
{
    uintptr_t me = (uintptr_t)&msh_solo_token;
    uintptr_t o = atomic_load_explicit(&msh_solo_owner, memory_order_acquire);
    /* Another thread is inside a solo call right now: threads overlap in
     * MPI, which is what the shared path is for. */
    if (o != 0 && atomic_load_explicit(&msh_solo_busy, memory_order_acquire)) {
        msh_solo_off();
        return 0;
    }
    if (!atomic_compare_exchange_strong_explicit(&msh_solo_owner, &o, me, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        msh_solo_off();
        return 0;
    }
    atomic_store_explicit(&msh_solo_busy, 1, memory_order_relaxed);
    return 1;
}

void msh_solo_off(void)
{
    if (atomic_exchange_explicit(&msh_solo_on, 0, memory_order_acq_rel) && msh_cfg.verbose)
        msh_log("rank %d: threads overlap in MPI; solo fast path off, the runtime takes over", msh_rt.world_rank);
}

void msh_solo_start(int serialized)
{
    atomic_store_explicit(&msh_solo_owner, 0, memory_order_relaxed);
    atomic_store_explicit(&msh_solo_busy, 0, memory_order_relaxed);
    /* Not with a progress thread either: it is a second thread in the
     * shim from the start, and the solo path beside it measured 3-4x
     * slower than the runtime path at T = 1 on MPICH 4.0. */
    atomic_store_explicit(&msh_solo_on, msh_cfg.solo && !serialized && !msh_progress_has_thread() && msh_tp_direct,
                          memory_order_release);
}
