/* Statuses on their way back to the program: where a host reports a field
 * that describes another operation, the shim reports what happened.
 *
 * A truncated receive's count. MPICH 4.0 with the ch4:ucx device writes
 * nothing into the buffer of a receive whose message is too long, and its
 * status keeps the count of whichever earlier operation last used the same
 * internal request object: a number that describes neither the message nor
 * the buffer, and that changes with the shim's own set-up traffic. On that
 * host the shim reports 0, what was delivered (and what a fresh MPICH
 * process reports). Open MPI reports the message's size, which is kept. The
 * check costs nothing on success: it runs only when a call failed. */
#ifndef MSH_INTERCEPT_STATUS_H
#define MSH_INTERCEPT_STATUS_H

#include <mpi.h>
#include <stdatomic.h>

#include "core/common.h"

/* Set once at init (msh_status_init); read on the error paths only. */
extern _Atomic int msh_status_trunc_zero;

/* At init, after the host's: turn the correction on for MPICH's ch4:ucx device. */
void msh_status_init(int mpich_ucx);

/* The slow halves, after a failed call: its one status, or its n statuses
 * (looked at only if it returned MPI_ERR_IN_STATUS). */
void msh_status_fix_one(int rc, MPI_Status *st);
void msh_status_fix_array(int rc, int n, MPI_Status *sts);

/* Wrap a single-completion call's result: returns rc. */
static inline int msh_status_fix(int rc, MPI_Status *st)
{
    if (MSH_UNLIKELY(rc != MPI_SUCCESS) && st != MPI_STATUS_IGNORE &&
        atomic_load_explicit(&msh_status_trunc_zero, memory_order_relaxed))
        msh_status_fix_one(rc, st);
    return rc;
}

/* Wrap the result of Waitall, Testall, Waitsome or Testsome (n: how many
 * statuses it wrote). */
static inline int msh_status_fix_n(int rc, int n, MPI_Status *sts)
{
    if (MSH_UNLIKELY(rc != MPI_SUCCESS) && sts != MPI_STATUSES_IGNORE &&
        atomic_load_explicit(&msh_status_trunc_zero, memory_order_relaxed))
        msh_status_fix_array(rc, n, sts);
    return rc;
}

#endif
