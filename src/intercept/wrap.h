/* The C side of the generated wrappers (tools/wrapgen.py).
 *
 * The generator only describes calls: for each MPI_X of the host it picks a
 * call class and writes a body that calls the class's helpers below, so that
 * every policy a generated wrapper follows (serialized host, solo path,
 * partitioned progress, window routing, error handlers) is stated here once,
 * in C. Classes:
 *   pass-through    MSH_PASS_ENTER/EXIT around the host call (passthru.h),
 *                   MSH_LOCAL_ENTER/EXIT for a call that involves no
 *                   message, MSH_WAIT_ENTER/EXIT for one that may wait for
 *                   other processes; a tail call to the host while
 *                   MSH_PASS_BARE / MSH_LOCAL_BARE say nothing is around it;
 *   collective      a blocking collective: the host's blocking call where
 *                   MSH_COLL_BY_HOST says so, else its nonblocking twin
 *                   plus a wait: msh_coll_enter / msh_coll_leave;
 *   routed RMA      the host call on the window's route: msh_win_direct()
 *                   inline, else msh_rma_route / msh_rma_leave. */
#ifndef MSH_INTERCEPT_WRAP_H
#define MSH_INTERCEPT_WRAP_H

#include <mpi.h>
#include <stdatomic.h>

#include "core/common.h"
#include "core/error.h"
#include "intercept/passthru.h"
#include "intercept/shim.h"
#include "partitioned/part.h"
#include "sync/queue.h"
#include "vci/win.h"

/* ------------------------------------------------------------ collectives */

/* A thread waiting in a blocking collective as the nonblocking twin plus a
 * shim wait sleeps on the sync object instead of spinning in the host, and
 * holds no lock meanwhile; the host's blocking call costs less (Open MPI
 * 4.1's nonblocking collectives build a schedule per call). A blocking and
 * a nonblocking collective do not match, so every member of a communicator
 * must take the same form for each call, whatever its path (solo or not). */
typedef struct {
    msh_vci *v; /* locked by msh_coll_begin; NULL on the solo path */
} msh_coll_ctx;

/* MPISHIM_STATS=1: blocking collectives made in each form, [1] the host's. */
extern _Atomic unsigned long long msh_coll_forms[2];
static inline void msh_coll_count(int host)
{
    if (MSH_UNLIKELY(msh_cfg.stats))
        atomic_fetch_add_explicit(&msh_coll_forms[host], 1, memory_order_relaxed);
}

/* MPISHIM_COLL=auto: the members of mc agree whether each of them has had
 * one thread at a time in MPI so far (the solo path still on), with a host
 * MPI_Allreduce over mc. Returns 1 when all have (the host's form goes on),
 * else 0, for good. */
int msh_coll_agree(msh_comm *mc);

/* MPI_COMM_WORLD's entry (set at init; it lives until MPI_Finalize): the
 * communicator most collectives use, found without the table lookup. */
extern msh_comm *msh_coll_world;

/* Whether this blocking collective on comm is the host's blocking call: with
 * MPISHIM_COLL=host always; with auto, on a communicator the runtime
 * registered, until its members find one that is not alone, asked at its
 * 2nd, 3rd, 5th, 9th, ..., 513th collective and every 1024th after
 * (MSH_COLL_ASK_EVERY): at the same call on every member, since every
 * member makes the communicator's collectives in the same order. A process
 * that stops being alone takes the nonblocking form from the next asking on
 * (the host's collectives until then: the raw host's behaviour). Asking
 * more often costs a stream of rooted collectives more than the asking
 * itself: the root, which ran ahead, waits there for the others. */
#define MSH_COLL_ASK_EVERY 1024u
static inline int msh_coll_host_form(MPI_Comm comm)
{
    if (msh_coll_host())
        return 1;
    if (!msh_coll_auto())
        return 0;
    msh_comm *mc = comm == MPI_COMM_WORLD && msh_coll_world ? msh_coll_world : msh_comm_lookup(comm);
    if (mc == NULL || mc->inter || atomic_load_explicit(&mc->coll_nb, memory_order_relaxed))
        return 0;
    unsigned k = atomic_load_explicit(&mc->coll_calls, memory_order_relaxed);
    atomic_store_explicit(&mc->coll_calls, k + 1, memory_order_relaxed);
    if (MSH_UNLIKELY(k != 0 && (k < MSH_COLL_ASK_EVERY ? (k & (k - 1)) == 0 : (k & (MSH_COLL_ASK_EVERY - 1)) == 0)))
        return msh_coll_agree(mc);
    return 1;
}

/* Around the host's blocking collective. It is a call of the solo path when
 * this thread can take it (another thread entering meanwhile then ends the
 * solo path, which is what the next asking reads); otherwise the thread's
 * queued posts go first (the call must not overtake them). Either way the
 * helper moves lanes and partitioned receives meanwhile (sync/assist.h). */
typedef struct {
    int solo, assisted;
} msh_hcoll;

static inline msh_hcoll msh_coll_host_enter(void)
{
    msh_hcoll h = { msh_solo_enter(), msh_assist_enter() };
    if (!h.solo && msh_queue_on)
        msh_queue_drain_all();
    return h;
}

static inline void msh_coll_host_exit(msh_hcoll h)
{
    msh_assist_exit(h.assisted);
    if (h.solo)
        msh_solo_exit();
}

/* Without the runtime, or where msh_coll_host_form says so: return the
 * host's blocking call. */
#define MSH_COLL_BY_HOST(comm, call)                                                                        \
    do {                                                                                                    \
        if (!msh_on())                                                                                      \
            return call;                                                                                    \
        if (msh_coll_host_form(comm)) {                                                                     \
            msh_coll_count(1);                                                                              \
            msh_hcoll h_ = msh_coll_host_enter();                                                           \
            int rc_ = call;                                                                                 \
            msh_coll_host_exit(h_);                                                                         \
            return rc_;                                                                                     \
        }                                                                                                   \
    } while (0)

/* A rooted collective (MPI_Bcast, Gather(v), Scatter(v), Reduce) over an
 * intercommunicator is the host's blocking call, as a window
 * synchronization is (passthru.h): the ranks of the root's side other than
 * the root pass MPI_PROC_NULL, and MPI leaves their other arguments
 * insignificant, but both hosts' nonblocking forms go by them. With count
 * 0 there (what mpi4py passes), Open MPI 4.1's libnbc skips the call on
 * that rank alone, which then uses other tags than its peers, and the next
 * collective hangs, raw with MPI_Ibcast as well; under MPICH 4.0 a
 * receiver returned without the data. Being an intercommunicator is the
 * same on every member, so every rank takes the same form. */
static inline int msh_coll_inter(MPI_Comm comm)
{
    msh_comm *mc = msh_comm_lookup(comm);
    if (MSH_LIKELY(mc != NULL))
        return mc->inter;
    /* Not in the side table: made by MPI_Comm_accept, connect, join or
     * spawn, which the shim does not register. */
    int inter = 0, locked = msh_host_enter();
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS)
        inter = 0;
    msh_host_exit(locked);
    return inter;
}

#define MSH_COLL_INTER_BY_HOST(comm, call)                                                                  \
    do {                                                                                                    \
        if (MSH_UNLIKELY(msh_coll_inter(comm))) {                                                           \
            MSH_WAIT_ENTER();                                                                               \
            int rc_ = call;                                                                                 \
            MSH_WAIT_EXIT();                                                                                \
            return rc_;                                                                                     \
        }                                                                                                   \
    } while (0)

static inline msh_coll_ctx msh_coll_enter(MPI_Comm comm)
{
    msh_coll_ctx c = { NULL };
    msh_coll_count(0);
    if (!msh_solo_enter())
        c.v = msh_coll_begin(comm);
    return c;
}

/* rc and req: what the nonblocking twin returned. */
static inline int msh_coll_leave(msh_coll_ctx c, int rc, MPI_Request req)
{
    if (c.v)
        return msh_coll_finish(c.v, rc, req, MPI_STATUS_IGNORE);
    if (rc == MPI_SUCCESS)
        rc = msh_part_setup_pending() ? msh_host_wait(&req, MPI_STATUS_IGNORE) : PMPI_Wait(&req, MPI_STATUS_IGNORE);
    msh_solo_exit();
    return rc;
}

/* ------------------------------------------------------------ routed RMA */

/* The target's lock epoch locks the routed window first (vci/win.h,
 * msh_win_tlock); the lanes are read while it waits for the target. */
void msh_rma_extend(msh_win *e, int target);

/* The window a routed call takes: acc (a constant in each generated
 * wrapper) picks accumulate-type routing over Put/Get routing. */
static inline MPI_Win msh_rma_route(MPI_Win w, int target, int acc)
{
    msh_win *extend = NULL;
    MPI_Win r = acc ? msh_win_route_acc(w, target, &extend) : msh_win_route_data(w, target, &extend);
    if (MSH_UNLIKELY(extend != NULL))
        msh_rma_extend(extend, target);
    return r;
}

/* After the host call on the routed window w: an internal window returns
 * errors, so the user window's handler is called here. */
static inline int msh_rma_leave(MPI_Win user, MPI_Win w, int rc)
{
    if (MSH_UNLIKELY(rc != MPI_SUCCESS) && w != user)
        msh_error_win(user, rc);
    return rc;
}

#endif
