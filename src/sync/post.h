/* Posting a point-to-point operation: the engine call behind every send
 * and receive entry point (src/intercept/p2p.c), which checks nothing but
 * chooses the path:
 *   - solo (sync/solo.h): the host's own call, on the route's communicator;
 *   - queued (MPISHIM_PROGRESS=offload, and combine when the VCI's lock
 *     is held: a combining post that gets it at once takes the shim path;
 *     queue.h);
 *   - at the post (a blocking call the host completes at once: no shim
 *     request at all; see msh_blocking);
 *   - the shim path: a request from the VCI's cache, the operation posted
 *     through the VCI's transport and tracked by it.
 * It takes the VCI's lock and releases it (msh_post_begin/commit). */
#ifndef MSH_SYNC_POST_H
#define MSH_SYNC_POST_H

#include <mpi.h>

#include "core/config.h"
#include "sync/wait.h"
#include "transport/transport.h"
#include "vci/comm.h"

/* Reject a wildcard that c's assertions rule out. */
static inline int msh_check_wildcards(MPI_Comm c, const msh_comm *mc, int source, int tag)
{
    int err = msh_wildcard_refused(mc ? mc->asserts : msh_cfg.asserts, source, tag);
    return MSH_UNLIKELY(err != MPI_SUCCESS) ? msh_comm_error(c, err) : MPI_SUCCESS;
}

/* The route of a receive (or probe) from source with tag on comm, after
 * refusing a wildcard the communicator's assertions rule out; *mcp (if
 * not NULL) gets the communicator's entry. */
static inline int msh_recv_route(MPI_Comm comm, int source, int tag, msh_route *rt, msh_comm **mcp)
{
    msh_comm *mc = msh_comm_lookup(comm);
    int rc = msh_check_wildcards(comm, mc, source, tag);
    if (rc == MPI_SUCCESS)
        msh_route_recv(comm, mc, source, tag, rt);
    if (mcp)
        *mcp = mc;
    return rc;
}

/* The host communicator a send to dest with tag on comm goes to. */
static inline MPI_Comm msh_send_route_comm(MPI_Comm comm, int dest, int tag)
{
    if (MSH_LIKELY(msh_comm_plain()))
        return comm;
    msh_comm *mc = msh_comm_lookup(comm);
    msh_route rt;
    msh_route_send(comm, mc, dest, tag, &rt);
    return rt.comm;
}

/* Blocking calls at T > 1 (many threads in blocking Send/Recv): an eager
 * send, or a receive whose message is already there, is complete as soon
 * as the host has it. So a blocking call posts with the host outside any
 * shim lock and tests for a bounded time (msh_host_test_fresh); only if
 * the request is still incomplete does it become a shim request, tracked
 * by its VCI's transport and waited for with a sync object. A finished
 * call then costs the host's nonblocking call and test: no VCI lock, shim
 * request, tracking or progress ownership. Not while posts are queued (MPISHIM_PROGRESS=
 * combine, offload): a direct post must not overtake a queued one. */
typedef struct msh_blocking {
    MPI_Status *status; /* the blocking call's */
    int done;           /* finished at the post: *req was not set */
} msh_blocking;

/* A send of mode op, or a receive: nonblocking, or persistent (made
 * inactive); now is NULL but for the blocking calls. Errors are raised
 * through comm's error handler where the host would raise them. */
int msh_post_send(msh_tp_mode op, int persistent, const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
                  int tag, MPI_Comm comm, MPI_Request *req, msh_blocking *now);
int msh_post_recv(int persistent, void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                  MPI_Request *req, msh_blocking *now);

/* The receive of a message a probe matched (MPI_Imrecv), on the VCI whose
 * transport holds it. */
int msh_post_matched(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message, MPI_Request *req);

/* The host's blocking probe (message == NULL: MPI_Probe, else MPI_Mprobe)
 * on c; while partitioned setups wait for their headers it polls instead
 * and lets them progress. */
int msh_host_probe(int source, int tag, MPI_Comm c, MPI_Message *message, MPI_Status *status);

/* The four probes: message == NULL for Probe/Iprobe, flag == NULL for the
 * blocking ones, which loop on the transport's nonblocking probe on the
 * route's VCI, giving progress a chance between tries, so that no thread
 * blocks in the host. */
int msh_probe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status);

#endif
