/* Process-wide state of the shim: set up in MPI_Init*, torn down in
 * MPI_Finalize. */
#ifndef MSH_CORE_RUNTIME_H
#define MSH_CORE_RUNTIME_H

#include <stdatomic.h>

#include "core/common.h"
#include "core/config.h"

typedef enum {
    MSH_STATE_UNINIT = 0, /* before MPI_Init* */
    MSH_STATE_ACTIVE,     /* intercepting, runtime off: calls are forwarded (windows are tracked) */
    MSH_STATE_DISABLED,   /* MPISHIM_DISABLE=1: pure pass-through */
    MSH_STATE_FINALIZED,
    MSH_STATE_RUNTIME,    /* ACTIVE with the runtime on (msh_on) */
} msh_state;

typedef struct msh_runtime {
    _Atomic int state;     /* msh_state */
    int thread_requested;  /* what the program asked for */
    int thread_provided;   /* what the host gave */
    int world_rank;
    int world_size;
    int tag_ub;            /* the host's MPI_TAG_UB */
    int coll_mode;         /* msh_coll_form of blocking collectives, agreed by every
                            * rank at init (MPISHIM_COLL) */
} msh_runtime;

extern msh_runtime msh_rt;

/* The state changes only inside MPI_Init* and MPI_Finalize, which the
 * program itself orders against its other threads' MPI calls (they may
 * call MPI only between the two): relaxed loads suffice, and the release
 * stores publish what init set up for a reader that pairs with acquire. */
static inline int msh_state_get(void)
{
    return atomic_load_explicit(&msh_rt.state, memory_order_relaxed);
}

static inline void msh_state_set(msh_state s)
{
    atomic_store_explicit(&msh_rt.state, (int)s, memory_order_release);
}

/* The runtime handles calls only in a program that asked for
 * MPI_THREAD_MULTIPLE and did not disable the shim; otherwise every entry
 * point forwards unchanged (a program below MULTIPLE gets no shim locking).
 * Checked first by every entry point. */
static inline int msh_on(void)
{
    return MSH_LIKELY(msh_state_get() == MSH_STATE_RUNTIME);
}

/* MPISHIM_COLL=host with the runtime on: a blocking collective is the host's
 * blocking call, on every path (every rank must use the same form: a
 * blocking and a nonblocking collective do not match). */
static inline int msh_coll_host(void)
{
    return MSH_UNLIKELY(msh_rt.coll_mode == MSH_COLL_HOST);
}

/* MPISHIM_COLL=auto with the runtime on: the form is chosen per
 * communicator (intercept/wrap.h, msh_coll_host_form). */
static inline int msh_coll_auto(void)
{
    return msh_rt.coll_mode == MSH_COLL_AUTO;
}

/* Initialized and not disabled: the runtime on or off (window tracking). */
static inline int msh_intercepting(void)
{
    int s = msh_state_get();
    return s == MSH_STATE_ACTIVE || s == MSH_STATE_RUNTIME;
}

/* Parse the configuration once (idempotent, thread-safe). Exits the process
 * with a one-line message on a malformed MPISHIM_* value. */
void msh_runtime_configure(void);

/* Stop with a clear message if the process holds two MPI libraries (a shim
 * built for one host preloaded into a program of the other). */
void msh_runtime_check_host(void);

#endif
