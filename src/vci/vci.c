/* VCI pool: creation and teardown (see vci.h; its request cache is
 * managed in sync/request.c, its operations in flight by its transport). */
#include "vci/vci.h"

#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"

msh_vci_pool msh_pool;
MSH_TLS int msh_host_lock_depth;
MSH_TLS char msh_vci_self;

int msh_vci_pool_init(int n, int serialized)
{
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&msh_pool.host_lock, &ra);
    pthread_mutexattr_destroy(&ra);

    msh_vci *v = aligned_alloc(MSH_CACHELINE, sizeof(msh_vci) * (size_t)n);
    if (!v)
        return -1;
    memset(v, 0, sizeof(msh_vci) * (size_t)n);
    /* own_lock spins briefly before sleeping, as an adaptive mutex does:
     * the critical sections are short host calls, but threads may
     * outnumber cores; a thread that uses a VCI alone comes to take it
     * without an atomic instruction (core/lock.h). */
    msh_block_setup();
    for (int i = 0; i < n; i++) {
        msh_block_init(&v[i].own_lock);
        v[i].serial = serialized ? &msh_pool.host_lock : NULL;
        v[i].idx = i;
    }
    /* The fabric, where asked for and possible (the same on every process:
     * its open agrees), else the host. */
    int fabric = msh_cfg.fabric != MSH_FABRIC_OFF && !serialized;
    if (msh_cfg.fabric != MSH_FABRIC_OFF && serialized)
        msh_log("MPISHIM_FABRIC: not with a serialized host; the host carries every message");
    /* auto: UCX's workers where UCX loads (faster than libfabric's shm
     * provider, and without its limits), else libfabric. */
    const char *lane = msh_cfg.fabric == MSH_FABRIC_UCX || msh_cfg.fabric == MSH_FABRIC_AUTO ? "ucx" : "fabric";
    for (int i = 0; i < n; i++) {
        const char *why = NULL;
        if (fabric) {
            v[i].tp = msh_tp_open(lane, i, &why);
            if (!v[i].tp && i == 0 && msh_cfg.fabric == MSH_FABRIC_AUTO && strcmp(lane, "ucx") == 0) {
                if (msh_cfg.verbose)
                    msh_log("MPISHIM_FABRIC=auto: UCX: %s; trying libfabric", why);
                lane = "fabric"; /* every process saw the same: the opens agree */
                v[i].tp = msh_tp_open(lane, i, &why);
            }
            if (v[i].tp)
                continue;
            msh_log("MPISHIM_FABRIC: VCI %d: %s; the host carries its messages", i, why);
            fabric = 0;
        }
        v[i].tp = msh_tp_open("host", i, &why);
        if (!v[i].tp) {
            msh_log("VCI %d: cannot open its transport: %s", i, why);
            return -1;
        }
    }
    if (fabric && msh_cfg.verbose)
        msh_log("MPISHIM_FABRIC: provider %s, an endpoint for each of %d VCIs", msh_tp_fabric_provider(), n);
    msh_pool.v = v;
    msh_pool.n = n;
    msh_pool.serialized = serialized;
    return 0;
}

/* Counts what is still pending; frees nothing. A thread whose last call
 * is still returning when the main thread finalizes (MPICH's test
 * threads/comm/ctxidup; erroneous, but both hosts survive it) retires its
 * request into its VCI's cache under the VCI's lock after that: the VCIs,
 * their locks and their transports stay valid until the process exits, as
 * the request arena does (tests/mpi/mt_finalize_late). */
int msh_vci_pool_fini(void)
{
    int leaked = 0;
    for (int i = 0; i < msh_pool.n; i++) {
        leaked += msh_pool.v[i].tp->ntracked;
        msh_vci_lock(&msh_pool.v[i]); /* a late thread's call finishes first */
        msh_tp_close(msh_pool.v[i].tp);
        msh_vci_release(&msh_pool.v[i]);
    }
    return leaked;
}
