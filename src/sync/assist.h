/* Progress during blocking host calls.
 *
 * Two kinds of traffic move only while a thread of this process polls
 * them through the shim: a lane's (a transport with endpoints of its own: a
 * large message's rendezvous needs its sender's reads after the send, a
 * buffered one, completed) and a started partitioned receive's whose
 * header has not arrived (the shim's layer posts its internal receives
 * when the header comes). A host call that waits for other processes
 * (window synchronization, communicator constructors, collective file
 * I/O, the host's blocking collectives, connecting to other jobs) moves
 * neither, and one of those processes may need that traffic before it
 * makes its side of the call: a deadlock that MPI's progress rule forbids
 * and that the raw host, whose blocking calls progress everything, never
 * has. So while any thread is inside such a call and there is such traffic
 * (a lane is open, or a partitioned receive waits for its header), a
 * helper thread polls it, backing off while it finds nothing: every VCI's
 * lane, never the host's matching, which that call moves
 * (msh_progress_assist). The helper starts the first time it is needed
 * and ends at MPI_Finalize. A partitioned receive that starts while a
 * thread is already inside such a call wakes it (msh_assist_kick). */
#ifndef MSH_SYNC_ASSIST_H
#define MSH_SYNC_ASSIST_H

#include "core/common.h"
#include "core/runtime.h"
#include "transport/transport.h"

int msh_assist_enter_slow(int file);
void msh_assist_exit_slow(int entered);
void msh_assist_kick(void); /* after making msh_upper's sweep wanted (seq_cst) */
void msh_assist_stop(void); /* MPI_Finalize, before the VCIs go */

/* Around a blocking host call that may wait for another process:
 * int a = msh_assist_enter(); rc = PMPI_...; msh_assist_exit(a); */
static inline int msh_assist_enter(void)
{
    if (!msh_on())
        return 0;
    return msh_assist_enter_slow(0);
}

/* The same around a file call (MPI_File_*): on Open MPI the helper then
 * leaves out the partitioned sweep, which enters the host, and Open MPI
 * 4.1's ompio walks its pending file requests in the host's progress engine
 * without a lock. A partitioned receive waiting for its header is then set
 * up when the call returns (docs/design.md, Known limits). */
static inline int msh_assist_enter_file(void)
{
    if (!msh_on())
        return 0;
    return msh_assist_enter_slow(1);
}

static inline void msh_assist_exit(int entered)
{
    if (MSH_UNLIKELY(entered))
        msh_assist_exit_slow(entered);
}

#endif
