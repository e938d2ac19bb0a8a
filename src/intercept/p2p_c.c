/* The MPI-4 large-count point-to-point calls (MPI_Send_c, MPI_Recv_c, ...).
 *
 * On the host transport these go to the host's own large-count calls, but
 * on the route the int-count calls with the same communicator, peer and
 * tag take: a message sent by either kind must meet a receive of either
 * kind, and two messages of one sender and tag must not overtake each
 * other (under a spreading map the route is one of the communicator's
 * internal duplicates). Queued posts are drained first, for the same
 * reason. Blocking calls are the nonblocking call plus msh_host_wait, so
 * that no thread blocks inside the host (with a serialized host, one
 * blocked there would hold the host lock). Those requests are the host's;
 * the completion calls take them as they are. Where a lane may carry the
 * communicator, they go through the engine as the int-count calls do. */
#include <stdlib.h>

#include "intercept/pack.h"
#include "intercept/passthru.h"
#include "intercept/shim.h"
#include "intercept/status.h"

#if MPI_VERSION >= 4

/* A send's route communicator, with queued posts drained. */
static MPI_Comm send_comm(MPI_Comm comm, int dest, int tag)
{
    if (MSH_UNLIKELY(msh_queue_on))
        msh_queue_drain_all();
    return msh_send_route_comm(comm, dest, tag);
}

/* A receive's route communicator, after refusing a wildcard the
 * communicator's assertions rule out. */
static int recv_comm(MPI_Comm comm, int source, int tag, MPI_Comm *c)
{
    msh_route rt;
    int rc = msh_recv_route(comm, source, tag, &rt, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    if (MSH_UNLIKELY(msh_queue_on))
        msh_queue_drain_all();
    *c = rt.comm;
    return MPI_SUCCESS;
}

/* Where a transport other than the host carries communicators (a lane),
 * these calls go through the engine like the int-count ones, so that both
 * kinds meet on one transport (the engine's counts are MPI_Count). */
static inline int engine_c(MPI_Count count)
{
    return !msh_tp_direct && count >= 0;
}

/* Wait for a request of these calls: the engine's or the host's. */
static int wait_c(MPI_Request *q, MPI_Status *status)
{
    return msh_req_of(*q) ? MPI_Wait(q, status) : msh_host_wait(q, status);
}

/* A nonblocking or persistent send on its route. */
static int post_send_c(msh_tp_mode m, int persistent, const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
                       int tag, MPI_Comm comm, MPI_Request *req)
{
    if (engine_c(count))
        return msh_post_send(m, persistent, buf, count, dt, dest, tag, comm, req, NULL);
    msh_tp_msg msg = msh_tp_msg_of(m, buf, count, dt, dest, tag, send_comm(comm, dest, tag));
    int locked = msh_host_enter();
    int rc = msh_tp_host_post_c(&msg, persistent, req);
    msh_host_exit(locked);
    return rc;
}

static int send_c(msh_tp_mode m, const void *buf, MPI_Count count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm)
{
    MPI_Request q;
    int rc = post_send_c(m, 0, buf, count, dt, dest, tag, comm, &q);
    return rc == MPI_SUCCESS ? wait_c(&q, MPI_STATUS_IGNORE) : rc;
}

#define SEND_C_WRAPPERS(NAME, INAME, MODE)                                                                      \
    MSH_EXPORT int MPI_##NAME##_c(const void *buf, MPI_Count count, MPI_Datatype dt, int dest, int tag,          \
                                  MPI_Comm comm)                                                                \
    {                                                                                                           \
        if (!msh_on())                                                                                          \
            return PMPI_##NAME##_c(buf, count, dt, dest, tag, comm);                                            \
        return send_c(MODE, buf, count, dt, dest, tag, comm);                                                   \
    }                                                                                                           \
    MSH_EXPORT int MPI_##INAME##_c(const void *buf, MPI_Count count, MPI_Datatype dt, int dest, int tag,         \
                                   MPI_Comm comm, MPI_Request *req)                                             \
    {                                                                                                           \
        if (!msh_on())                                                                                          \
            return PMPI_##INAME##_c(buf, count, dt, dest, tag, comm, req);                                      \
        return post_send_c(MODE, 0, buf, count, dt, dest, tag, comm, req);                                      \
    }                                                                                                           \
    MSH_EXPORT int MPI_##NAME##_init_c(const void *buf, MPI_Count count, MPI_Datatype dt, int dest, int tag,     \
                                       MPI_Comm comm, MPI_Request *req)                                         \
    {                                                                                                           \
        if (!msh_on())                                                                                          \
            return PMPI_##NAME##_init_c(buf, count, dt, dest, tag, comm, req);                                  \
        return post_send_c(MODE, 1, buf, count, dt, dest, tag, comm, req);                                      \
    }

SEND_C_WRAPPERS(Send, Isend, MSH_TP_SEND)
SEND_C_WRAPPERS(Ssend, Issend, MSH_TP_SSEND)
SEND_C_WRAPPERS(Bsend, Ibsend, MSH_TP_BSEND)
SEND_C_WRAPPERS(Rsend, Irsend, MSH_TP_RSEND)

/* A nonblocking or persistent receive on its route. */
static int post_recv_c(int persistent, void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag,
                       MPI_Comm comm, MPI_Request *req)
{
    if (engine_c(count))
        return msh_post_recv(persistent, buf, count, dt, source, tag, comm, req, NULL);
    MPI_Comm c;
    int rc = recv_comm(comm, source, tag, &c);
    if (rc != MPI_SUCCESS)
        return rc;
    msh_tp_msg msg = msh_tp_msg_of(MSH_TP_RECV, buf, count, dt, source, tag, c);
    int locked = msh_host_enter();
    rc = msh_tp_host_post_c(&msg, persistent, req);
    msh_host_exit(locked);
    return rc;
}

MSH_EXPORT int MPI_Irecv_c(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                           MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Irecv_c(buf, count, dt, source, tag, comm, req);
    return post_recv_c(0, buf, count, dt, source, tag, comm, req);
}

static int recv_c_call(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                       MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Recv_c(buf, count, dt, source, tag, comm, status);
    MPI_Request q;
    int rc = MPI_Irecv_c(buf, count, dt, source, tag, comm, &q);
    return rc == MPI_SUCCESS ? wait_c(&q, status) : rc;
}

MSH_EXPORT int MPI_Recv_c(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                          MPI_Status *status)
{
    return msh_status_fix(recv_c_call(buf, count, dt, source, tag, comm, status), status);
}

MSH_EXPORT int MPI_Recv_init_c(void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                               MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Recv_init_c(buf, count, dt, source, tag, comm, req);
    return post_recv_c(1, buf, count, dt, source, tag, comm, req);
}

/* The receive first, so that a send to this process itself finds it; one
 * wait each (see fwd_sendrecv in p2p.c for why not the host's Waitall). */
static int sendrecv_c_call(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                           void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag,
                           MPI_Comm comm, MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Sendrecv_c(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                               recvtag, comm, status);
    MPI_Request q[2];
    MPI_Status st;
    int rc = MPI_Irecv_c(recvbuf, recvcount, recvtype, source, recvtag, comm, &q[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = post_send_c(MSH_TP_SEND, 0, sendbuf, sendcount, sendtype, dest, sendtag, comm, &q[1]);
    if (rc != MPI_SUCCESS) {
        MPI_Cancel(&q[0]);
        wait_c(&q[0], MPI_STATUS_IGNORE);
        return rc;
    }
    int rs = wait_c(&q[1], MPI_STATUS_IGNORE);
    rc = wait_c(&q[0], &st);
    if (rs != MPI_SUCCESS)
        rc = rs;
    msh_status_out(status, &st); /* MPI_ERROR untouched, as the host's Sendrecv */
    return rc;
}

MSH_EXPORT int MPI_Sendrecv_c(const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest,
                              int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source,
                              int recvtag, MPI_Comm comm, MPI_Status *status)
{
    return msh_status_fix(sendrecv_c_call(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount,
                                          recvtype, source, recvtag, comm, status),
                          status);
}

/* The packed outgoing data first, so the receive can land in buf (as the
 * int-count MPI_Sendrecv_replace does). */
static int sendrecv_replace_c_call(void *buf, MPI_Count count, MPI_Datatype dt, int dest, int sendtag, int source,
                                   int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Sendrecv_replace_c(buf, count, dt, dest, sendtag, source, recvtag, comm, status);
    void *tmp;
    MPI_Count pos;
    int rc = msh_pack_copy_c(buf, count, dt, comm, &tmp, &pos);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = sendrecv_c_call(tmp, pos, MPI_PACKED, dest, sendtag, buf, count, dt, source, recvtag, comm, status);
    free(tmp);
#if defined(MPICH)
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE)
        status->MPI_ERROR = MPI_SUCCESS;
#endif
    return rc;
}

MSH_EXPORT int MPI_Sendrecv_replace_c(void *buf, MPI_Count count, MPI_Datatype dt, int dest, int sendtag,
                                      int source, int recvtag, MPI_Comm comm, MPI_Status *status)
{
    return msh_status_fix(sendrecv_replace_c_call(buf, count, dt, dest, sendtag, source, recvtag, comm, status),
                          status);
}

/* Matched receives: a message a lane holds goes to the engine, any other
 * to the host's call as it is (its probe matched it on its route
 * already). */
static inline int engine_message(const MPI_Message *message)
{
    return msh_on() && msh_tp_message_vci(*message) >= 0;
}

MSH_EXPORT int MPI_Imrecv_c(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message, MPI_Request *req)
{
    if (engine_message(message))
        return msh_post_matched(buf, count, dt, message, req);
    return PMPI_Imrecv_c(buf, count, dt, message, req);
}

MSH_EXPORT int MPI_Mrecv_c(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status)
{
    if (!engine_message(message))
        return PMPI_Mrecv_c(buf, count, dt, message, status);
    MPI_Request q;
    int rc = msh_post_matched(buf, count, dt, message, &q);
    return rc == MPI_SUCCESS ? MPI_Wait(&q, status) : rc;
}

#endif
