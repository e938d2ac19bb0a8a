/* Hooks around every generated pass-through wrapper (tools/wrapgen.py).
 *
 * When the host runs below MPI_THREAD_MULTIPLE (MPISHIM_HOST_THREAD=
 * serialized, or a host that cannot do better), every host call must be
 * serialized by the shim, including the calls it knows nothing about: these
 * hooks take the one host lock around them (msh_host_enter, vci/vci.h). */
#ifndef MSH_INTERCEPT_PASSTHRU_H
#define MSH_INTERCEPT_PASSTHRU_H

#include "intercept/shim.h"
#include "sync/assist.h"

/* With queued posting, a pass-through call (Sendrecv_replace, the large-count
 * calls, ...) must not overtake the calling thread's queued posts. */
#define MSH_PASS_ENTER()                                                                                    \
    if (MSH_UNLIKELY(msh_queue_on))                                                                         \
        msh_queue_drain_all();                                                                              \
    int msh_locked_ = msh_host_enter()
#define MSH_PASS_EXIT()  msh_host_exit(msh_locked_)

/* The same around a host call that may wait for another process (window
 * synchronization, file collectives, ...): the lanes are read meanwhile
 * (sync/assist.h). */
#define MSH_WAIT_ENTER()                                                                                    \
    int msh_assisted_ = msh_assist_enter();                                                                 \
    MSH_PASS_ENTER()
#define MSH_WAIT_EXIT()                                                                                     \
    MSH_PASS_EXIT();                                                                                        \
    msh_assist_exit(msh_assisted_)

/* Names of the generated wrappers, for mpishim-info. */
extern const char *const msh_passthru_names[];
extern const int msh_passthru_count;

#endif
