/* Reading the lanes while a thread sits in a blocking host call.
 *
 * A lane (a transport with endpoints of its own) moves only while a thread
 * of this process polls it: a large message's rendezvous needs its
 * sender's reads after the send, a buffered one, completed. A host call
 * that waits for other processes (window synchronization,
 * MPI_Comm_create_group, collective file I/O, connecting to other jobs)
 * polls no lane, and one of those processes may need lane traffic that only
 * this one can move before it makes its side of the call: a deadlock that
 * MPI's progress rule forbids and that the raw host, whose blocking calls
 * progress everything, never has. So while any thread is inside such a
 * call, a helper thread polls every VCI's lane, backing off while it finds
 * nothing; never the host, which that call moves (msh_progress_poll_lanes).
 * The helper starts at the first such call with a lane open and
 * ends at MPI_Finalize; with the host transport alone the calls pay one
 * predictable branch. */
#ifndef MSH_SYNC_ASSIST_H
#define MSH_SYNC_ASSIST_H

#include "core/common.h"
#include "core/runtime.h"
#include "transport/transport.h"

int msh_assist_enter_slow(void);
void msh_assist_exit_slow(void);
void msh_assist_stop(void); /* MPI_Finalize, before the VCIs go */

/* Around a blocking host call that may wait for another process:
 * int a = msh_assist_enter(); rc = PMPI_...; msh_assist_exit(a); */
static inline int msh_assist_enter(void)
{
    if (MSH_LIKELY(msh_tp_direct) || !msh_on())
        return 0;
    return msh_assist_enter_slow();
}

static inline void msh_assist_exit(int entered)
{
    if (MSH_UNLIKELY(entered))
        msh_assist_exit_slow();
}

#endif
