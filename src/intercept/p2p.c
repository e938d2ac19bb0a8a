/* Point-to-point entry points: argument checks, the forwarding paths
 * (runtime off, solo), then one engine call (msh_post_send, msh_post_recv
 * in sync/post.h), which posts on the route the communicator maps to.
 * Blocking calls are the nonblocking call plus a sync-object wait, so no
 * thread ever blocks inside the host, let alone while holding a shim lock:
 * two threads of one rank may each block in a receive that the other's
 * later send satisfies. */
#include <stdlib.h>

#include "intercept/passthru.h"
#include "intercept/shim.h"
#include "intercept/status.h"
#include "partitioned/part.h"

typedef msh_tp_mode send_op;

/* The forwarding paths (runtime off, or solo) make blocking host calls,
 * except while a partitioned receive waits for its header: then the
 * nonblocking call and a wait that sweeps (part.h, MPI's progress rule). */
static int fwd_send(send_op op, const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm c)
{
    if (MSH_UNLIKELY(msh_part_setup_pending())) {
        MPI_Request q;
        msh_tp_msg m = msh_tp_msg_of(op, buf, count, dt, dest, tag, c);
        int rc = msh_tp_host_post(&m, 0, &q);
        return rc == MPI_SUCCESS ? msh_host_wait(&q, MPI_STATUS_IGNORE) : rc;
    }
    switch (op) {
    case MSH_TP_SSEND: return PMPI_Ssend(buf, count, dt, dest, tag, c);
    case MSH_TP_BSEND: return PMPI_Bsend(buf, count, dt, dest, tag, c);
    case MSH_TP_RSEND: return PMPI_Rsend(buf, count, dt, dest, tag, c);
    default:       return PMPI_Send(buf, count, dt, dest, tag, c);
    }
}

static int fwd_recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm c, MPI_Status *status)
{
    if (MSH_LIKELY(!msh_part_setup_pending()))
        return PMPI_Recv(buf, count, dt, source, tag, c, status);
    MPI_Request q;
    int rc = PMPI_Irecv(buf, count, dt, source, tag, c, &q);
    return rc == MPI_SUCCESS ? msh_host_wait(&q, status) : rc;
}

/* Send on sc, receive on rc_comm (the routes may differ on the solo path). */
static int fwd_sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                        MPI_Comm sc, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                        MPI_Comm rcomm, MPI_Status *status)
{
    int poll = msh_part_setup_pending();
    if (sc == rcomm && !poll)
        return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                             recvtag, sc, status);
    MPI_Request q[2];
    MPI_Status st;
    int rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, rcomm, &q[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, sc, &q[1]);
    if (rc != MPI_SUCCESS) {
        PMPI_Cancel(&q[0]);
        PMPI_Wait(&q[0], MPI_STATUS_IGNORE);
        return rc;
    }
    /* One wait each, not the host's Waitall: a receive truncated at its post
     * makes Open MPI 4.1's Waitall never return (multiple thread level), and
     * MPICH 4.0's leaves the send pending (MPI_ERR_PENDING). */
    int rs = poll ? msh_host_wait(&q[1], MPI_STATUS_IGNORE) : PMPI_Wait(&q[1], MPI_STATUS_IGNORE);
    rc = poll ? msh_host_wait(&q[0], &st) : PMPI_Wait(&q[0], &st);
    if (rs != MPI_SUCCESS)
        rc = rs;
    msh_status_out(status, &st); /* MPI_ERROR untouched, as the host's Sendrecv */
    return rc;
}

static int fwd_mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status)
{
    if (MSH_LIKELY(!msh_part_setup_pending()))
        return PMPI_Mrecv(buf, count, dt, message, status);
    MPI_Request q;
    int rc = PMPI_Imrecv(buf, count, dt, message, &q);
    return rc == MPI_SUCCESS ? msh_host_wait(&q, status) : rc;
}

/* Solo, and no communicator routes elsewhere or refuses a wildcard: the
 * host call as is, inline in the wrapper (a message-rate path). */
#define SOLO_DIRECT(call)                                                                                   \
    do {                                                                                                    \
        if (msh_comm_plain() && msh_solo_enter()) {                                                         \
            int rc_ = (call);                                                                               \
            msh_solo_exit();                                                                                \
            return rc_;                                                                                     \
        }                                                                                                   \
    } while (0)

/* Blocking = nonblocking + shim wait, unless the post finished it. by: as
 * the host raises errors found at completion in this call. */
static int wait_one_by(int rc, MPI_Request *req, MPI_Status *status, const msh_blocking *now, msh_raise_by by)
{
    if (rc != MPI_SUCCESS || (now && now->done))
        return rc;
    msh_request *r = msh_req_of(*req);
    if (!r)
        return MPI_Wait(req, status); /* made on the solo path */
    msh_req_wait_complete(r);
    return msh_req_retire(r, req, status, by);
}

/* For a call that names its communicator. */
static int wait_one(int rc, MPI_Request *req, MPI_Status *status, const msh_blocking *now)
{
    return wait_one_by(rc, req, status, now, MSH_RAISE_COMM);
}

/* A blocking send to or receive from MPI_PROC_NULL completes at once and
 * moves nothing: the host's own blocking call, with no shim request and no
 * wait on the sync object (which cost 6x the raw host's time on MPICH 4.0 in
 * the threads.c pattern's PROC_NULL phase). The host gives the status the
 * standard asks for (source MPI_PROC_NULL, tag MPI_ANY_TAG, count 0). */
static int procnull_send(send_op op, const void *buf, int count, MPI_Datatype dt, int tag, MPI_Comm comm)
{
    MSH_PASS_ENTER();
    int rc = fwd_send(op, buf, count, dt, MPI_PROC_NULL, tag, comm);
    MSH_PASS_EXIT();
    return rc;
}

static int procnull_recv(void *buf, int count, MPI_Datatype dt, int tag, MPI_Comm comm, MPI_Status *status)
{
    msh_route rt;
    int rc = msh_recv_route(comm, MPI_PROC_NULL, tag, &rt, NULL); /* a refused wildcard tag stays refused */
    if (rc != MPI_SUCCESS)
        return rc;
    MSH_PASS_ENTER();
    rc = fwd_recv(buf, count, dt, MPI_PROC_NULL, tag, comm, status);
    MSH_PASS_EXIT();
    return rc;
}

/* ------------------------------------------------------------ sends */

#define SEND_WRAPPERS(NAME, INAME, OP)                                                                             \
    MSH_EXPORT int MPI_##NAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm) \
    {                                                                                                       \
        if (!msh_on())                                                                                      \
            return fwd_send(OP, buf, count, dt, dest, tag, comm);                                           \
        if (msh_solo_enter()) {                                                                             \
            int rc_ = fwd_send(OP, buf, count, dt, dest, tag, msh_send_route_comm(comm, dest, tag));                 \
            msh_solo_exit();                                                                                \
            return rc_;                                                                                     \
        }                                                                                                   \
        if (dest == MPI_PROC_NULL)                                                                          \
            return procnull_send(OP, buf, count, dt, tag, comm);                                            \
        MPI_Request req;                                                                                    \
        msh_blocking now = { MPI_STATUS_IGNORE, 0 };                                                        \
        return wait_one(msh_post_send(OP, 0, buf, count, dt, dest, tag, comm, &req, &now), &req, MPI_STATUS_IGNORE, \
                        &now);                                                                              \
    }                                                                                                       \
    MSH_EXPORT int MPI_##INAME(const void *buf, int count, MPI_Datatype dt, int dest, int tag, MPI_Comm comm, \
                               MPI_Request *req)                                                            \
    {                                                                                                       \
        if (!msh_on())                                                                                      \
            return PMPI_##INAME(buf, count, dt, dest, tag, comm, req);                                      \
        SOLO_DIRECT(PMPI_##INAME(buf, count, dt, dest, tag, comm, req));                                    \
        return msh_post_send(OP, 0, buf, count, dt, dest, tag, comm, req, NULL);                                \
    }                                                                                                       \
    MSH_EXPORT int MPI_##NAME##_init(const void *buf, int count, MPI_Datatype dt, int dest, int tag,          \
                                     MPI_Comm comm, MPI_Request *req)                                       \
    {                                                                                                       \
        if (!msh_on())                                                                                      \
            return PMPI_##NAME##_init(buf, count, dt, dest, tag, comm, req);                                \
        return msh_post_send(OP, 1, buf, count, dt, dest, tag, comm, req, NULL);                                \
    }

SEND_WRAPPERS(Send, Isend, MSH_TP_SEND)
SEND_WRAPPERS(Ssend, Issend, MSH_TP_SSEND)
SEND_WRAPPERS(Bsend, Ibsend, MSH_TP_BSEND)
SEND_WRAPPERS(Rsend, Irsend, MSH_TP_RSEND)

/* ------------------------------------------------------------ receives */

static int recv_call(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!msh_on())
        return fwd_recv(buf, count, dt, source, tag, comm, status);
    if (msh_solo_enter()) {
        if (MSH_LIKELY(msh_comm_plain())) {
            int rc = fwd_recv(buf, count, dt, source, tag, comm, status);
            msh_solo_exit();
            return rc;
        }
        msh_route rt;
        int rc = msh_recv_route(comm, source, tag, &rt, NULL);
        if (rc == MPI_SUCCESS)
            rc = fwd_recv(buf, count, dt, source, tag, rt.comm, status);
        msh_solo_exit();
        return rc;
    }
    if (source == MPI_PROC_NULL)
        return procnull_recv(buf, count, dt, tag, comm, status);
    MPI_Request req;
    msh_blocking now = { status, 0 };
    return wait_one(msh_post_recv(0, buf, count, dt, source, tag, comm, &req, &now), &req, status, &now);
}

MSH_EXPORT int MPI_Recv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                        MPI_Status *status)
{
    return msh_status_fix(recv_call(buf, count, dt, source, tag, comm, status), status);
}

MSH_EXPORT int MPI_Irecv(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                         MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Irecv(buf, count, dt, source, tag, comm, req);
    if (source != MPI_PROC_NULL) /* see msh_post_recv */
        SOLO_DIRECT(PMPI_Irecv(buf, count, dt, source, tag, comm, req));
    return msh_post_recv(0, buf, count, dt, source, tag, comm, req, NULL);
}

MSH_EXPORT int MPI_Recv_init(void *buf, int count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                             MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Recv_init(buf, count, dt, source, tag, comm, req);
    return msh_post_recv(1, buf, count, dt, source, tag, comm, req, NULL);
}

static int sendrecv_call(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                         void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm,
                         MPI_Status *status)
{
    if (!msh_on())
        return fwd_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, comm, recvbuf, recvcount, recvtype, source,
                            recvtag, comm, status);
    if (msh_solo_enter()) {
        msh_route rr_;
        int rc = msh_recv_route(comm, source, recvtag, &rr_, NULL);
        if (rc == MPI_SUCCESS)
            rc = fwd_sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, msh_send_route_comm(comm, dest, sendtag), recvbuf,
                              recvcount, recvtype, source, recvtag, rr_.comm, status);
        msh_solo_exit();
        return rc;
    }
    MPI_Request rr, sr;
    int rc = msh_post_recv(0, recvbuf, recvcount, recvtype, source, recvtag, comm, &rr, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = msh_post_send(MSH_TP_SEND, 0, sendbuf, sendcount, sendtype, dest, sendtag, comm, &sr, NULL);
    if (rc != MPI_SUCCESS) {
        /* The receive was posted: it must not linger unmatched. */
        MPI_Cancel(&rr);
        MPI_Wait(&rr, MPI_STATUS_IGNORE);
        return rc;
    }
    int rc_s = wait_one(MPI_SUCCESS, &sr, MPI_STATUS_IGNORE, NULL);
    int rc_r = wait_one(MPI_SUCCESS, &rr, status, NULL);
    return rc_s != MPI_SUCCESS ? rc_s : rc_r;
}

MSH_EXPORT int MPI_Sendrecv(const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                            void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                            MPI_Comm comm, MPI_Status *status)
{
    int rc = sendrecv_call(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source, recvtag,
                           comm, status);
    return msh_status_fix(rc, status);
}

static int sendrecv_replace_call(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                                 int recvtag, MPI_Comm comm, MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Sendrecv_replace(buf, count, dt, dest, sendtag, source, recvtag, comm, status);
    /* Pack the outgoing data first, so the receive can land in buf. A
     * packed message matches a receive of the same type signature. */
    int size = 0, pos = 0, rc;
    if ((rc = PMPI_Pack_size(count, dt, comm, &size)) != MPI_SUCCESS)
        return rc;
    void *tmp = malloc(size > 0 ? (size_t)size : 1);
    if (!tmp)
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    if ((rc = PMPI_Pack(buf, count, dt, tmp, size, &pos, comm)) != MPI_SUCCESS) {
        free(tmp);
        return rc;
    }
    rc = MPI_Sendrecv(tmp, pos, MPI_PACKED, dest, sendtag, buf, count, dt, source, recvtag, comm, status);
    free(tmp);
#if defined(MPICH)
    /* MPICH's own writes MPI_SUCCESS there (tests/mpi/p2p_status_error.c). */
    if (rc == MPI_SUCCESS && status != MPI_STATUS_IGNORE)
        status->MPI_ERROR = MPI_SUCCESS;
#endif
    return rc;
}

MSH_EXPORT int MPI_Sendrecv_replace(void *buf, int count, MPI_Datatype dt, int dest, int sendtag, int source,
                                    int recvtag, MPI_Comm comm, MPI_Status *status)
{
    return msh_status_fix(sendrecv_replace_call(buf, count, dt, dest, sendtag, source, recvtag, comm, status), status);
}

/* ------------------------------------------------------------ probes */

MSH_EXPORT int MPI_Iprobe(int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Iprobe(source, tag, comm, flag, status);
    return msh_probe(source, tag, comm, flag, NULL, status);
}

MSH_EXPORT int MPI_Probe(int source, int tag, MPI_Comm comm, MPI_Status *status)
{
    if (!msh_on())
        return msh_host_probe(source, tag, comm, NULL, status);
    return msh_probe(source, tag, comm, NULL, NULL, status);
}

MSH_EXPORT int MPI_Improbe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                           MPI_Status *status)
{
    if (!msh_on())
        return PMPI_Improbe(source, tag, comm, flag, message, status);
    return msh_probe(source, tag, comm, flag, message, status);
}

MSH_EXPORT int MPI_Mprobe(int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status)
{
    if (!msh_on())
        return msh_host_probe(source, tag, comm, message, status);
    return msh_probe(source, tag, comm, NULL, message, status);
}

/* A lane's messages are the shim's handles. MPICH defines these as macros
 * (a handle is its own Fortran handle), which those satisfy as they are;
 * Open MPI's conversion reads the handle's object. */
#ifndef MPI_Message_c2f
MSH_EXPORT MPI_Fint MPI_Message_c2f(MPI_Message message)
{
    MPI_Fint f;
    return msh_tp_message_c2f(message, &f) ? f : PMPI_Message_c2f(message);
}

MSH_EXPORT MPI_Message MPI_Message_f2c(MPI_Fint message)
{
    MPI_Message m;
    return msh_tp_message_f2c(message, &m) ? m : PMPI_Message_f2c(message);
}
#endif

MSH_EXPORT int MPI_Imrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message, MPI_Request *req)
{
    if (!msh_on())
        return PMPI_Imrecv(buf, count, dt, message, req);
    if (msh_solo_enter_req()) {
        int rc = PMPI_Imrecv(buf, count, dt, message, req);
        msh_solo_exit();
        return rc;
    }
    return msh_post_matched(buf, count, dt, message, req);
}

static int mrecv_call(void *buf, int count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status)
{
    if (!msh_on())
        return fwd_mrecv(buf, count, dt, message, status);
    if (msh_solo_enter()) {
        int rc = fwd_mrecv(buf, count, dt, message, status);
        msh_solo_exit();
        return rc;
    }
    MPI_Request req;
    return wait_one_by(MPI_Imrecv(buf, count, dt, message, &req), &req, status, NULL, MSH_RAISE_REQUEST);
}

MSH_EXPORT int MPI_Mrecv(void *buf, int count, MPI_Datatype dt, MPI_Message *message, MPI_Status *status)
{
    return msh_status_fix(mrecv_call(buf, count, dt, message, status), status);
}
