/* The watchdog (MPISHIM_WATCHDOG=SECONDS, off by default): a thread of its
 * own that wakes every 100 ms and, when requests are pending and none of
 * this rank's requests has completed for SECONDS, prints once per stall
 * what is pending per VCI (kind, peer, tag, communicator, age) and who owns
 * progress. SIGUSR1 asks for the same report at once. Nothing of it exists
 * unless the variable is set: no thread, no signal handler, and the post
 * paths pay one predictable branch. */
#ifndef MSH_SYNC_WATCHDOG_H
#define MSH_SYNC_WATCHDOG_H

#include <mpi.h>
#include <stdatomic.h>

#include "core/common.h"
#include "sync/request.h"

/* Non-zero while the watchdog runs (read on post paths). */
extern int msh_watchdog_on;

int msh_watchdog_start(int seconds); /* after the progress engine; 0 or -1 */
void msh_watchdog_stop(void);        /* before the VCI pool goes */

void msh_watchdog_note_(const msh_request *r, int peer, int tag, MPI_Comm comm);
void msh_watchdog_posted_(const msh_request *r);

/* What a pending request is, for the report (post paths, VCI lock held). */
static inline void msh_watchdog_note(const msh_request *r, int peer, int tag, MPI_Comm comm)
{
    if (MSH_UNLIKELY(msh_watchdog_on))
        msh_watchdog_note_(r, peer, tag, comm);
}

/* When a request entered a pending set (its age in the report). What was
 * noted applies if this thread noted r just before (a fresh post) or r is
 * persistent (noted at init); else the slot's old note is dropped. */
static inline void msh_watchdog_posted(const msh_request *r)
{
    if (MSH_UNLIKELY(msh_watchdog_on))
        msh_watchdog_posted_(r);
}

#endif
