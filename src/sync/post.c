/* Posting a point-to-point operation (see post.h). */
#include "sync/post.h"

#include <limits.h>

#include "sync/queue.h"
#include "sync/solo.h"
#include "sync/notes.h"

/* Queued posting needs the checks the host makes at the call (queue.h):
 * a communicator the shim knows, an intracommunicator. */
static inline int queueable(const msh_comm *mc)
{
    return mc && !mc->inter;
}

/* The host's own call, outside any VCI: the solo path (the host call
 * itself, on the route's communicator, so that messages keep their order
 * when the process leaves solo mode), and the post of a blocking call,
 * which the host takes without a VCI lock. */
static int host_send(msh_tp_mode op, int persistent, const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
                     int tag, MPI_Comm c, MPI_Request *req)
{
    msh_tp_msg m = msh_tp_msg_of(op, buf, count, dt, dest, tag, c);
    return msh_tp_host_post(&m, persistent, req);
}

static int host_recv(int persistent, void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm c,
                     MPI_Request *req)
{
    msh_tp_msg m = msh_tp_msg_of(MSH_TP_RECV, buf, count, dt, source, tag, c);
    return msh_tp_host_post(&m, persistent, req);
}


/* The transport's record of the routed communicator, when the route is
 * the program's communicator itself (not one of its duplicates). */
static inline const void *route_rec(const msh_comm *mc, MPI_Comm comm, MPI_Comm routed)
{
    return mc && routed == comm ? mc->tp_rec : NULL;
}

static inline int now_path(const msh_blocking *now)
{
    return now && msh_tp_direct && !msh_queue_active();
}

/* The tests of a blocking call's fresh host request h (posted with result
 * rc), under the host lock if the host is serialized. */
static int now_test(int rc, MPI_Request *h, msh_blocking *now, int locked)
{
    if (rc == MPI_SUCCESS) {
        MPI_Status st;
        rc = msh_host_test_fresh(h, &st);
        if (*h == MPI_REQUEST_NULL) {
            now->done = 1;
            msh_status_out(now->status, &st);
        } else if (rc != MPI_SUCCESS) {
            PMPI_Request_free(h); /* the error is reported; nobody can wait for it */
            now->done = 1;
        }
    }
    msh_host_exit(locked);
    return rc;
}

/* The test failed: h becomes a shim request pending on v, to be waited for
 * the usual way (bytes: its payload, for MPISHIM_STATS). */
static int now_adopt(msh_vci *v, MPI_Request h, int kind, int peer, int tag, MPI_Comm comm, MPI_Request *req,
                     msh_blocking *now, uint64_t bytes)
{
    msh_request *r = msh_post_begin(v);
    if (MSH_UNLIKELY(!r)) {
        /* No shim request to wait with: the host's own wait. */
        int locked = msh_host_enter();
        int rc = PMPI_Wait(&h, now->status);
        msh_host_exit(locked);
        now->done = 1;
        return rc;
    }
    r->host = h;
    v->st.bytes += bytes;
    msh_watchdog_note(r, peer, tag, comm);
    return msh_post_commit(v, r, kind, MPI_SUCCESS, NULL, req);
}

/* MPISHIM_STATS=1: count a call finished at the post. */
static void now_count(msh_vci *v, int kind, uint64_t bytes)
{
    msh_vci_lock(v);
    if (kind == MSH_KIND_SEND)
        v->st.sends++;
    else
        v->st.recvs++;
    v->st.bytes += bytes;
    v->st.completions++;
    v->st.now++;
    msh_vci_unlock(v);
}

int msh_post_send(msh_tp_mode op, int persistent, const void *buf, MPI_Count count, MPI_Datatype dt, int dest,
                  int tag, MPI_Comm comm, MPI_Request *req, msh_blocking *now)
{
    int rc;
    if (msh_solo_enter_req()) {
        rc = host_send(op, persistent, buf, count, dt, dest, tag, msh_send_route_comm(comm, dest, tag), req);
        msh_solo_exit();
        return rc;
    }
    msh_progress_note_post();
    msh_comm *mc = msh_comm_lookup(comm);
    msh_route rt;
    msh_route_send(comm, mc, dest, tag, &rt);
    int held = 0; /* rt.vci's lock, taken by the combining try below */
    if (msh_queue_active() && !persistent && (op == MSH_TP_SEND || op == MSH_TP_SSEND) && queueable(mc)) {
        held = msh_vci_trylock(rt.vci); /* free: post directly */
        if (!held && msh_queue_args_ok(buf, count, dt, dest, tag, mc->size, 0))
            return msh_queue_post(rt.vci, 0, op == MSH_TP_SSEND, buf, (int)count, dt, dest, tag, rt.comm, comm, req);
    }
    if (!held && now_path(now)) {
        MPI_Request h;
        int locked = msh_host_enter();
        rc = now_test(host_send(op, 0, buf, count, dt, dest, tag, rt.comm, &h), &h, now, locked);
        if (msh_cfg.stats && now->done && rc == MPI_SUCCESS)
            now_count(rt.vci, MSH_KIND_SEND, msh_payload_bytes(count, dt));
        if (rc != MPI_SUCCESS || now->done)
            return rc;
        return now_adopt(rt.vci, h, MSH_KIND_SEND, dest, tag, comm, req, now,
                         msh_cfg.stats ? msh_payload_bytes(count, dt) : 0);
    }
    msh_tp_msg m = msh_tp_msg_of(op, buf, count, dt, dest, tag, rt.comm);
    m.rec = route_rec(mc, comm, rt.comm);
    if (!held)
        msh_vci_lock(rt.vci);
    msh_post_drain(rt.vci);
    if (!persistent && msh_tp_send_now(rt.vci->tp, &m)) {
        /* Finished inside the call: no request; the shared one stands for it. */
        msh_count_sent(rt.vci, msh_cfg.stats ? msh_payload_bytes(count, dt) : 0);
        msh_vci_unlock(rt.vci);
        *req = msh_req_sent_handle();
        return MPI_SUCCESS;
    }
    msh_request *r = msh_post_get(rt.vci);
    if (!r)
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    msh_tp_posted p;
    rc = persistent ? msh_tp_init(rt.vci->tp, &m, &r->host) : msh_tp_post(rt.vci->tp, &m, r, &r->host, &p);
    int raise = rc != MPI_SUCCESS && msh_tp_take_unraised(rt.vci->tp);
    if (msh_cfg.stats && rc == MPI_SUCCESS)
        rt.vci->st.bytes += msh_payload_bytes(count, dt);
    r->procnull = dest == MPI_PROC_NULL;
    msh_watchdog_note(r, dest, tag, comm);
    rc = msh_post_commit(rt.vci, r, persistent ? MSH_KIND_PSEND : MSH_KIND_SEND, rc, persistent ? NULL : &p, req);
    return raise ? msh_comm_error(comm, rc) : rc;
}

int msh_post_recv(int persistent, void *buf, MPI_Count count, MPI_Datatype dt, int source, int tag, MPI_Comm comm,
                  MPI_Request *req, msh_blocking *now)
{
    /* A nonblocking receive from MPI_PROC_NULL takes the shim path even
     * in solo mode: it fixes the host's status (below). */
    int solo_ok = persistent || source != MPI_PROC_NULL;
    if (solo_ok && msh_comm_plain() && msh_solo_enter_req()) {
        int rc = host_recv(persistent, buf, count, dt, source, tag, comm, req);
        msh_solo_exit();
        return rc;
    }
    msh_progress_note_post();
    msh_route rt;
    msh_comm *mc;
    int rc = msh_recv_route(comm, source, tag, &rt, &mc);
    if (rc != MPI_SUCCESS)
        return rc;
    int held = 0; /* as in msh_post_send */
    if (msh_queue_active() && !persistent && queueable(mc)) {
        held = msh_vci_trylock(rt.vci); /* free: post directly */
        if (!held && msh_queue_args_ok(buf, count, dt, source, tag, mc->size, 1))
            return msh_queue_post(rt.vci, 1, 0, buf, (int)count, dt, source, tag, rt.comm, comm, req);
    }
    if (!held && solo_ok && msh_solo_enter_req()) {
        rc = host_recv(persistent, buf, count, dt, source, tag, rt.comm, req);
        msh_solo_exit();
        return rc;
    }
    if (!held && now_path(now)) { /* source is not MPI_PROC_NULL: MPI_Recv took care */
        MPI_Request h;
        int locked = msh_host_enter();
        rc = now_test(host_recv(0, buf, count, dt, source, tag, rt.comm, &h), &h, now, locked);
        if (msh_cfg.stats && now->done && rc == MPI_SUCCESS)
            now_count(rt.vci, MSH_KIND_RECV, 0);
        if (rc != MPI_SUCCESS || now->done)
            return rc;
        return now_adopt(rt.vci, h, MSH_KIND_RECV, source, tag, comm, req, now, 0);
    }
    msh_request *r = held ? msh_post_locked(rt.vci) : msh_post_begin(rt.vci);
    if (!r)
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    if (!persistent && source == MPI_PROC_NULL) {
        /* Completes at once. The host's blocking receive gives the status
         * the standard asks for (MPICH 4.0's Irecv reports source 0, tag 0,
         * fixed in 4.2), and it cannot block. */
        rc = PMPI_Recv(buf, count > INT_MAX ? 0 : (int)count, dt, source, tag, rt.comm, &r->status);
        if (rc == MPI_SUCCESS) {
            r->status.MPI_ERROR = MPI_SUCCESS;
            r->kind = MSH_KIND_RECV;
            r->host = MPI_REQUEST_NULL;
            msh_req_complete_here(r);
            msh_vci_unlock(rt.vci);
            *req = msh_req_handle(r);
            return MPI_SUCCESS;
        }
        msh_vci_req_put(rt.vci, r);
        msh_vci_unlock(rt.vci);
        return rc;
    }
    msh_tp_msg m = msh_tp_msg_of(MSH_TP_RECV, buf, count, dt, source, tag, rt.comm);
    m.rec = route_rec(mc, comm, rt.comm);
    msh_tp_posted p;
    rc = persistent ? msh_tp_init(rt.vci->tp, &m, &r->host) : msh_tp_post(rt.vci->tp, &m, r, &r->host, &p);
    int raise = rc != MPI_SUCCESS && msh_tp_take_unraised(rt.vci->tp);
    r->procnull = source == MPI_PROC_NULL;
    msh_watchdog_note(r, source, tag, comm);
    rc = msh_post_commit(rt.vci, r, persistent ? MSH_KIND_PRECV : MSH_KIND_RECV, rc, persistent ? NULL : &p, req);
    return raise ? msh_comm_error(comm, rc) : rc;
}

/* A matched message carries no communicator: its receive goes on the
 * VCI whose transport holds it, or (the host's) the calling thread's. */
static msh_vci *message_vci(MPI_Message m)
{
    int t = msh_tp_message_vci(m);
    if (t < 0)
        t = msh_thread_vci >= 0 ? msh_thread_vci : msh_thread_vci_assign();
    return msh_vci_get(t);
}

int msh_post_matched(void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message, MPI_Request *req)
{
    msh_progress_note_post();
    msh_vci *v = message_vci(*message);
    msh_request *r = msh_post_begin(v);
    if (!r)
        return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    msh_tp_posted p;
    int rc = msh_tp_post_matched(v->tp, buf, count, dt, message, r, &r->host, &p);
    return msh_post_commit(v, r, MSH_KIND_RECV, rc, &p, req);
}

/* ------------------------------------------------------------ probes */

int msh_host_probe(int source, int tag, MPI_Comm c, MPI_Message *message, MPI_Status *status)
{
    if (MSH_LIKELY(!msh_sweep_wanted()))
        return message ? PMPI_Mprobe(source, tag, c, message, status) : PMPI_Probe(source, tag, c, status);
    msh_spin sp = MSH_SPIN_ON(0);
    for (;;) {
        int flag = 0;
        int rc = message ? PMPI_Improbe(source, tag, c, &flag, message, status)
                         : PMPI_Iprobe(source, tag, c, &flag, status);
        if (rc != MPI_SUCCESS || flag) {
            msh_spin_end(&sp);
            return rc;
        }
        msh_spin_idle(&sp);
    }
}

int msh_probe(int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message, MPI_Status *status)
{
    msh_route rt;
    int rc = msh_recv_route(comm, source, tag, &rt, NULL);
    if (rc != MPI_SUCCESS)
        return rc;
    if (!flag && msh_solo_enter()) {
        rc = msh_host_probe(source, tag, rt.comm, message, status);
        msh_solo_exit();
        return rc;
    }
    msh_spin sp = MSH_SPIN_ON(rt.vci->idx);
    int f, raise;
    for (;;) {
        f = 0;
        if (MSH_UNLIKELY(msh_queue_on))
            msh_queue_drain_all(); /* see what the queued sends would have sent */
        msh_vci_lock(rt.vci);
        rc = msh_tp_probe(rt.vci->tp, source, tag, rt.comm, &f, message, status);
        raise = rc != MPI_SUCCESS && msh_tp_take_unraised(rt.vci->tp);
        msh_vci_unlock(rt.vci);
        if (flag || rc != MPI_SUCCESS || f)
            break;
        msh_spin_idle(&sp);
    }
    msh_spin_end(&sp);
    if (raise)
        return msh_comm_error(comm, rc);
    if (flag && rc == MPI_SUCCESS)
        *flag = f;
    return rc; /* the status as the host's probe left it, MPI_ERROR too */
}
