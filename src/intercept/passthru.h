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

/* A call that only reads or builds this process's objects (tools/calls.py,
 * class local: a type's size, a rank, packing): no message is involved, so
 * nothing queued can be overtaken; the serialized host's lock only. */
#define MSH_LOCAL_ENTER() int msh_locked_ = msh_host_enter()
#define MSH_LOCAL_EXIT()  msh_host_exit(msh_locked_)

/* With queued posting, a pass-through call (Sendrecv_replace, the large-count
 * calls, MPI_Type_free of a type a queued post names, ...) must not overtake
 * the calling thread's queued posts. */
#define MSH_PASS_ENTER()                                                                                    \
    if (MSH_UNLIKELY(msh_queue_on))                                                                         \
        msh_queue_drain_all();                                                                              \
    MSH_LOCAL_ENTER()
#define MSH_PASS_EXIT()  MSH_LOCAL_EXIT()

/* Whether a local or pass-through wrapper has anything to do around the
 * host call; if not, it is a tail call to the host (the common case: a
 * concurrent host, and for pass, no queued posting). */
#define MSH_LOCAL_BARE() MSH_LIKELY(!msh_host_serial())
#define MSH_PASS_BARE()  MSH_LIKELY(!msh_queue_on && !msh_host_serial())

/* The same around a host call that may wait for another process (window
 * synchronization, file collectives, ...): the lanes are read meanwhile
 * (sync/assist.h). */
#define MSH_WAIT_ENTER()                                                                                    \
    int msh_assisted_ = msh_assist_enter();                                                                 \
    MSH_PASS_ENTER()
#define MSH_WAIT_EXIT()                                                                                     \
    MSH_PASS_EXIT();                                                                                        \
    msh_assist_exit(msh_assisted_)
/* The same for a file call (sync/assist.h, msh_assist_enter_file). */
#define MSH_FILE_WAIT_ENTER()                                                                               \
    int msh_assisted_ = msh_assist_enter_file();                                                            \
    MSH_PASS_ENTER()
#define MSH_FILE_WAIT_EXIT() MSH_WAIT_EXIT()

/* Every MPI call the shim defines and what it does with it (name, kind:
 * pass, local, direct, waits, collective, rma-data, rma-acc, or the class
 * of a hand-written one), generated; mpishim_print_calls prints it. */
extern const char *const msh_call_kinds[][2];
extern const int msh_call_kind_count;

#endif
