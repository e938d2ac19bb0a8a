/* Request completion: Wait*, Test*, Start*, Request_free, Request_get_status,
 * Cancel, Request_c2f/f2c.
 *
 * Arrays may mix shim requests, host requests the shim never made (MPI-IO,
 * generalized requests, persistent collectives, ...) and MPI_REQUEST_NULL
 * (design brief rule 3). Shim requests are waited for with a sync object;
 * host requests with host calls, which in serialized mode are made under
 * the host lock and polled, never blocked in. */
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "intercept/shim.h"
#include "partitioned/part.h"
#include "sync/watchdog.h"

/* ------------------------------------------------------------ helpers */

int msh_post_commit(msh_vci *v, msh_request *r, int kind, int rc, MPI_Request *handle)
{
    if (MSH_UNLIKELY(rc != MPI_SUCCESS)) {
        msh_vci_req_put(v, r);
        msh_vci_unlock(v);
        return rc;
    }
    r->kind = (uint8_t)kind;
    if (kind == MSH_KIND_PSEND || kind == MSH_KIND_PRECV) {
        r->persistent = 1;
        atomic_store_explicit(&r->state, MSH_REQ_INACTIVE, memory_order_relaxed);
    } else {
        atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_relaxed);
        rc = msh_vci_pending_add(v, r);
        msh_watchdog_posted(r);
        if (MSH_UNLIKELY(rc != MPI_SUCCESS)) {
            /* Cannot track it: finish it here rather than lose it. */
            msh_vci_unlock(v);
            PMPI_Wait(&r->host, &r->status);
            atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
            atomic_store_explicit(&r->sync, MSH_SYNC_CLAIMED, memory_order_release);
            *handle = msh_req_handle(r);
            return MPI_SUCCESS;
        }
        if (kind == MSH_KIND_SEND)
            v->st.sends++;
        else if (kind == MSH_KIND_RECV)
            v->st.recvs++;
        else
            v->st.colls++;
    }
    msh_vci_unlock(v);
    *handle = msh_req_handle(r);
    return MPI_SUCCESS;
}

static void empty_status(MPI_Status *st)
{
    if (st == MPI_STATUS_IGNORE)
        return;
    /* The host's own empty status, hidden fields included. */
    MPI_Request nul = MPI_REQUEST_NULL;
    PMPI_Wait(&nul, st);
}

/* Retiring many requests takes each VCI's lock once per run of requests
 * on that VCI, not once per request: *held is the VCI locked so far.
 * The state moves from COMPLETE first, so that a request is retired once
 * even if two threads wait on it (an erroneous program): the loser gets
 * MPI_ERR_REQUEST and the request never enters a cache twice. */
static int retire_held(msh_request *r, MPI_Request *handle, MPI_Status *status, msh_vci **held)
{
    int from = MSH_REQ_COMPLETE;
    if (MSH_UNLIKELY(!atomic_compare_exchange_strong_explicit(&r->state, &from,
                                                              r->persistent ? MSH_REQ_INACTIVE : MSH_REQ_FREE,
                                                              memory_order_acq_rel, memory_order_acquire)))
        return msh_bad_request();
    int err = r->status.MPI_ERROR;
    msh_status_out(status, &r->status);
    if (r->persistent)
        return err;
    msh_vci *v = msh_vci_get(r->vci);
    if (*held != v) {
        if (*held)
            msh_vci_unlock(*held);
        msh_vci_lock(v);
        *held = v;
    }
    msh_vci_req_put(v, r);
    *handle = MPI_REQUEST_NULL;
    return err;
}

static void release_held(msh_vci *held)
{
    if (held)
        msh_vci_unlock(held);
}

int msh_req_retire(msh_request *r, MPI_Request *handle, MPI_Status *status)
{
    msh_vci *held = NULL;
    int err = retire_held(r, handle, status, &held);
    release_held(held);
    return err;
}

static inline int is_done(const msh_request *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_COMPLETE;
}

static int shim_done_at_exit(int n, const MPI_Request reqs[])
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        msh_request *r = msh_req_of(reqs[i]);
        d += r && is_done(r);
    }
    return d;
}

void msh_req_wait_complete(msh_request *r)
{
    if (is_done(r))
        return;
    /* Eager messages are often done after one pass: skip the sync then. */
    msh_progress_try(r->vci);
    if (is_done(r))
        return;
    msh_sync s;
    msh_sync_init(&s, msh_progress_domain_of(r->vci));
    int attached = msh_sync_attach(&s, r);
    if (attached)
        msh_sync_wait(&s, 1);
    msh_sync_finish(&s, attached);
}

msh_vci *msh_coll_begin(MPI_Comm comm)
{
    msh_comm *mc = msh_comm_lookup(comm);
    msh_route rt;
    msh_route_of(comm, mc, 0, 0, 0, &rt);
    if (mc && mc->ndups)
        rt.vci = msh_vci_get(mc->vci); /* collectives stay on the user communicator */
    msh_vci_lock(rt.vci);
    return rt.vci;
}

int msh_coll_finish(msh_vci *v, int rc, MPI_Request hreq, MPI_Status *status)
{
    if (rc != MPI_SUCCESS) {
        msh_vci_unlock(v);
        return rc;
    }
    msh_request *r = msh_vci_req_get(v);
    if (!r) {
        msh_vci_unlock(v);
        return PMPI_Wait(&hreq, status);
    }
    r->host = hreq;
    MPI_Request h;
    msh_post_commit(v, r, MSH_KIND_COLL, MPI_SUCCESS, &h);
    msh_req_wait_complete(r);
    return msh_req_retire(r, &h, status);
}

void msh_idle(void)
{
    if (msh_part_setup_pending() && msh_part_sweep() > 0)
        return;
    if (!msh_on() || msh_progress_try(0) == 0)
        sched_yield();
}

int msh_host_wait(MPI_Request *req, MPI_Status *status)
{
    for (;;) {
        int f = 0;
        int locked = msh_host_enter();
        int rc = PMPI_Test(req, &f, status);
        msh_host_exit(locked);
        if (rc != MPI_SUCCESS || f)
            return rc;
        msh_idle();
    }
}

/* Shim requests may exist: the runtime is on, or partitioned channels are
 * alive (they work without it). */
static inline int shim_reqs(void)
{
    return msh_on() || msh_part_any();
}

/* State of a shim request, advancing a partitioned one first. */
static inline int state_of(msh_request *r)
{
    if (r->kind == MSH_KIND_PART && atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING)
        msh_part_progress(r, 1);
    return atomic_load_explicit(&r->state, memory_order_acquire);
}

/* ------------------------------------------------------------ the engine */

typedef enum { WAIT_ALL, WAIT_ANY, WAIT_SOME } wait_mode;

/* Scratch for the host requests of an array, small ones on the stack. */
typedef struct host_part {
    int n;
    int *pos;           /* position in the user's array */
    MPI_Request *req;
    MPI_Status *st;
    int *idx;
    int stack_pos[16], stack_idx[16];
    MPI_Request stack_req[16];
    MPI_Status stack_st[16];
} host_part;

static int host_part_init(host_part *h, int n)
{
    h->n = 0;
    if (n <= 16) {
        h->pos = h->stack_pos;
        h->req = h->stack_req;
        h->st = h->stack_st;
        h->idx = h->stack_idx;
        return 0;
    }
    h->pos = malloc(sizeof(int) * (size_t)n);
    h->req = malloc(sizeof(MPI_Request) * (size_t)n);
    h->st = malloc(sizeof(MPI_Status) * (size_t)n);
    h->idx = malloc(sizeof(int) * (size_t)n);
    return h->pos && h->req && h->st && h->idx ? 0 : -1;
}

static void host_part_free(host_part *h)
{
    if (h->pos != h->stack_pos) {
        free(h->pos);
        free(h->req);
        free(h->st);
        free(h->idx);
    }
}

/* Sync-object wait for the pending shim requests of an array: all of them
 * (WAIT_ALL) or at least one. */
static void wait_shim(int n, MPI_Request reqs[], wait_mode mode)
{
    msh_sync s;
    int dom = -1, attached = 0, already = 0;
    msh_request *att[64];
    int natt_stack = 0;
    msh_request **attv = att;
    if (n > 64) {
        attv = malloc(sizeof *attv * (size_t)n);
        if (!attv) {
            /* No memory for the bookkeeping: poll instead. */
            for (;;) {
                int done = 0, pend = 0;
                for (int i = 0; i < n; i++) {
                    msh_request *r = msh_req_of(reqs[i]);
                    if (r && atomic_load(&r->state) == MSH_REQ_PENDING)
                        pend++;
                    else if (r && is_done(r))
                        done++;
                }
                if (pend == 0 || (mode != WAIT_ALL && done))
                    return;
                msh_idle();
            }
        }
    }
    for (int i = 0; i < n; i++) {
        msh_request *r = msh_req_of(reqs[i]);
        if (!r)
            continue;
        int st = atomic_load_explicit(&r->state, memory_order_acquire);
        if (st == MSH_REQ_COMPLETE) {
            already++;
            continue;
        }
        if (st != MSH_REQ_PENDING)
            continue;
        if (dom < 0) {
            dom = msh_progress_domain_of(r->vci);
            msh_sync_init(&s, dom);
        }
        if (msh_sync_attach(&s, r))
            attv[natt_stack++] = r, attached++;
        else
            already++;
    }
    if (dom < 0)
        goto out;
    int needed = mode == WAIT_ALL ? attached : (already ? 0 : 1);
    if (needed > 0)
        msh_sync_wait(&s, needed);
    int claimed = attached;
    if (mode != WAIT_ALL)
        for (int k = 0; k < natt_stack; k++)
            claimed -= msh_sync_detach(&s, attv[k]);
    msh_sync_finish(&s, claimed);
out:
    if (attv != att)
        free(attv);
}

/* Complete requests of an array. blocking: wait until the mode is met;
 * else test once. Fills *flag (tests), *index (any), *outcount/indices
 * (some), statuses (all/some) or one status (any). */
static int complete(int n, MPI_Request reqs[], wait_mode mode, int blocking, int *flag, int *index, int *outcount,
                    int indices[], MPI_Status *statuses)
{
    int nshim = 0, nshim_active = 0, nhost = 0, nnull = 0, nshim_pending = 0, first_pending_vci = 0;
    for (int i = 0; i < n; i++) {
        if (reqs[i] == MPI_REQUEST_NULL) {
            nnull++;
            continue;
        }
        msh_request *r = msh_req_of(reqs[i]);
        if (!r) {
            if (MSH_UNLIKELY(msh_req_invalid(reqs[i])))
                return msh_bad_request(); /* before anything completes */
            nhost++;
            continue;
        }
        nshim++; /* inactive persistent ones too: never hand them to the host */
        int st = state_of(r);
        if (st == MSH_REQ_PENDING || st == MSH_REQ_COMPLETE) {
            nshim_active++;
            if (st == MSH_REQ_PENDING && nshim_pending++ == 0)
                first_pending_vci = r->vci;
        }
    }

    /* Only host requests: the host does it all. Except on MPICH 4.0 with
     * null entries: its Waitall asserts on an incomplete generalized request
     * next to MPI_REQUEST_NULL; the general path below leaves nulls out. */
#if defined(MPICH)
    int host_whole = nnull == 0 || mode != WAIT_ALL;
#else
    int host_whole = 1;
    (void)nnull;
#endif
    if (nshim == 0 && nhost > 0 && host_whole) {
        int solo = msh_on() && msh_solo_enter();
        /* Block in the host only when nothing else needs this thread. */
        int host_blocks = blocking && !msh_pool.serialized && !msh_part_setup_pending();
        for (;;) {
            int rc, f = 0;
            int locked = msh_host_enter();
            switch (mode) {
            case WAIT_ALL:
                rc = host_blocks ? (f = 1, PMPI_Waitall(n, reqs, statuses))
                                 : PMPI_Testall(n, reqs, &f, statuses);
                break;
            case WAIT_ANY:
                rc = host_blocks ? (f = 1, PMPI_Waitany(n, reqs, index, statuses))
                                 : PMPI_Testany(n, reqs, index, &f, statuses);
                break;
            default:
                rc = host_blocks ? PMPI_Waitsome(n, reqs, outcount, indices, statuses)
                                 : PMPI_Testsome(n, reqs, outcount, indices, statuses);
                f = *outcount != 0;
                break;
            }
            msh_host_exit(locked);
            if (rc != MPI_SUCCESS || f || !blocking) {
                if (flag)
                    *flag = f;
                if (solo)
                    msh_solo_exit();
                return rc;
            }
            msh_idle();
        }
    }

    /* Nothing active at all. */
    if (nshim_active == 0 && nhost == 0) {
        if (flag)
            *flag = 1;
        if (mode == WAIT_ALL) {
            if (statuses != MPI_STATUSES_IGNORE)
                for (int i = 0; i < n; i++)
                    empty_status(&statuses[i]);
        } else if (mode == WAIT_ANY) {
            *index = MPI_UNDEFINED;
            empty_status(statuses);
        } else {
            *outcount = MPI_UNDEFINED;
        }
        return MPI_SUCCESS;
    }

    host_part h;
    if (host_part_init(&h, nhost) != 0) {
        host_part_free(&h);
        return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    }
    for (int i = 0; i < n; i++)
        if (reqs[i] != MPI_REQUEST_NULL && !msh_req_of(reqs[i])) {
            h.pos[h.n] = i;
            h.req[h.n] = reqs[i];
            h.n++;
        }

    /* host_idle: the host part holds only inactive requests (Testany or
     * Testsome said MPI_UNDEFINED), which with no active shim request makes
     * the call return MPI_UNDEFINED. */
    int rc = MPI_SUCCESS, satisfied = 0, host_done = 0, host_any = MPI_UNDEFINED, host_some = 0, host_idle = 0;
    if (nshim_pending && !blocking && msh_on()) /* partitioned requests exist without the runtime */
        msh_progress_try(first_pending_vci);
    for (;;) {
        int shim_done = 0, shim_pending = 0, part_pending = 0;
        for (int i = 0; i < n; i++) {
            msh_request *r = msh_req_of(reqs[i]);
            if (!r)
                continue;
            int st = state_of(r);
            shim_done += st == MSH_REQ_COMPLETE;
            shim_pending += st == MSH_REQ_PENDING;
            part_pending += st == MSH_REQ_PENDING && r->kind == MSH_KIND_PART;
        }
        if (h.n > 0) {
            int locked = msh_host_enter();
            if (mode == WAIT_ALL && shim_pending == 0)
                rc = PMPI_Testall(h.n, h.req, &host_done, h.st); /* all-or-nothing across both kinds */
            else if (mode == WAIT_ANY && shim_done == 0) {
                int f = 0;
                rc = PMPI_Testany(h.n, h.req, &host_any, &f, h.st);
                host_idle = f && host_any == MPI_UNDEFINED;
                if (!f)
                    host_any = MPI_UNDEFINED;
            } else if (mode == WAIT_SOME) {
                rc = PMPI_Testsome(h.n, h.req, &host_some, h.idx, h.st);
                host_idle = host_some == MPI_UNDEFINED;
                if (host_some == MPI_UNDEFINED)
                    host_some = 0;
            }
            msh_host_exit(locked);
            if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
                break;
        } else {
            host_done = 1;
        }
        if (mode == WAIT_ALL)
            satisfied = shim_pending == 0 && host_done;
        else if (mode == WAIT_ANY)
            satisfied = shim_done > 0 || host_any != MPI_UNDEFINED || (host_idle && shim_pending == 0);
        else
            satisfied = shim_done > 0 || host_some > 0 || (host_idle && shim_pending == 0);
        if (satisfied || !blocking)
            break;
        /* Partitioned requests are polled, not notified: no sleeping then. */
        if (h.n == 0 && part_pending == 0)
            wait_shim(n, reqs, mode);
        else
            msh_idle();
    }
    if (flag)
        *flag = satisfied;

    /* MPI_ERROR fields are written only when the call returns
     * MPI_ERR_IN_STATUS (MPI 4.0 section 3.2.5): find out first. */
    int err_in_status = satisfied && rc == MPI_ERR_IN_STATUS;
    if (satisfied && mode != WAIT_ANY)
        for (int i = 0; i < n && !err_in_status; i++) {
            msh_request *r = msh_req_of(reqs[i]);
            err_in_status = r && is_done(r) && r->status.MPI_ERROR != MPI_SUCCESS;
        }
    if (satisfied) {
        if (mode == WAIT_ALL) {
            for (int k = 0; k < h.n; k++)
                reqs[h.pos[k]] = h.req[k];
            int hk = 0;
            msh_vci *held = NULL;
            for (int i = 0; i < n; i++) {
                MPI_Status *sp = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
                msh_request *r = msh_req_of(reqs[i]);
                int e = MPI_SUCCESS;
                if (hk < h.n && h.pos[hk] == i) {
                    msh_status_out(sp, &h.st[hk]);
                    e = rc == MPI_ERR_IN_STATUS ? h.st[hk].MPI_ERROR : MPI_SUCCESS;
                    hk++;
                } else if (r && is_done(r)) {
                    e = retire_held(r, &reqs[i], sp, &held);
                } else {
                    empty_status(sp);
                }
                if (err_in_status && sp != MPI_STATUS_IGNORE)
                    sp->MPI_ERROR = e;
            }
            release_held(held);
        } else if (mode == WAIT_ANY) {
            if (shim_done_at_exit(n, reqs) == 0 && host_any == MPI_UNDEFINED) {
                *index = MPI_UNDEFINED; /* every request inactive */
                empty_status(statuses);
            } else if (host_any != MPI_UNDEFINED) {
                /* The host already completed (and released) this one. */
                *index = h.pos[host_any];
                reqs[*index] = h.req[host_any];
                msh_status_out(statuses, &h.st[0]);
            } else {
                int pick = 0;
                while (pick < n && !(msh_req_of(reqs[pick]) && is_done(msh_req_of(reqs[pick]))))
                    pick++;
                *index = pick;
                rc = msh_req_retire(msh_req_of(reqs[pick]), &reqs[pick], statuses);
            }
        } else {
            int out = 0;
            msh_vci *held = NULL;
            for (int i = 0; i < n; i++) {
                msh_request *r = msh_req_of(reqs[i]);
                if (r && is_done(r)) {
                    MPI_Status *sp = statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[out];
                    int e = retire_held(r, &reqs[i], sp, &held);
                    if (err_in_status && sp != MPI_STATUS_IGNORE)
                        sp->MPI_ERROR = e;
                    indices[out++] = i;
                }
            }
            release_held(held);
            for (int k = 0; k < host_some; k++) {
                int i = h.pos[h.idx[k]];
                reqs[i] = h.req[h.idx[k]];
                if (statuses != MPI_STATUSES_IGNORE) {
                    msh_status_out(&statuses[out], &h.st[k]);
                    if (err_in_status)
                        statuses[out].MPI_ERROR = rc == MPI_ERR_IN_STATUS ? h.st[k].MPI_ERROR : MPI_SUCCESS;
                }
                indices[out++] = i;
            }
            *outcount = out == 0 && host_idle ? MPI_UNDEFINED : out;
        }
    } else if (mode == WAIT_SOME) {
        *outcount = 0;
    } else if (mode == WAIT_ANY) {
        *index = MPI_UNDEFINED;
    }
    host_part_free(&h);
    if (err_in_status)
        return MPI_ERR_IN_STATUS;
    return rc == MPI_ERR_IN_STATUS ? MPI_SUCCESS : rc;
}

/* ------------------------------------------------------------ single requests */

/* Polls of a partitioned request before its waiter starts idling. */
#define MSH_PART_SPIN_POLLS 256

MSH_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Wait(req, status);
    msh_request *r = msh_req_of(*req);
    if (!r) {
        if (*req == MPI_REQUEST_NULL)
            return PMPI_Wait(req, status);
        if (MSH_UNLIKELY(msh_req_invalid(*req)))
            return msh_bad_request();
        int poll = msh_part_setup_pending();
        if (msh_on() && msh_solo_enter()) {
            int rc = poll ? msh_host_wait(req, status) : PMPI_Wait(req, status);
            msh_solo_exit();
            return rc;
        }
        return msh_pool.serialized || poll ? msh_host_wait(req, status) : PMPI_Wait(req, status);
    }
    int st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st == MSH_REQ_INACTIVE) {
        if (r->kind == MSH_KIND_PART)
            msh_part_empty_status(status);
        else
            empty_status(status);
        return MPI_SUCCESS;
    }
    if (r->kind == MSH_KIND_PART) {
        /* Poll a while before idling: a short message is often in within a
         * few polls, and giving the core away costs more than that. */
        for (unsigned polls = 0; !msh_part_progress(r, 1); polls++)
            if (polls >= MSH_PART_SPIN_POLLS)
                msh_idle();
        return msh_part_retire(r, status);
    }
    msh_req_wait_complete(r);
    return msh_req_retire(r, req, status);
}

MSH_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Test(req, flag, status);
    msh_request *r = msh_req_of(*req);
    if (!r) {
        if (MSH_UNLIKELY(msh_req_invalid(*req)))
            return msh_bad_request();
        int locked = msh_host_enter();
        int rc = PMPI_Test(req, flag, status);
        msh_host_exit(locked);
        return rc;
    }
    int st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st == MSH_REQ_INACTIVE) {
        *flag = 1;
        if (r->kind == MSH_KIND_PART)
            msh_part_empty_status(status);
        else
            empty_status(status);
        return MPI_SUCCESS;
    }
    if (r->kind == MSH_KIND_PART) {
        *flag = msh_part_progress(r, 1);
        return *flag ? msh_part_retire(r, status) : MPI_SUCCESS;
    }
    if (st != MSH_REQ_COMPLETE) {
        msh_progress_try(r->vci);
        if (!is_done(r)) {
            *flag = 0;
            return MPI_SUCCESS;
        }
    }
    *flag = 1;
    return msh_req_retire(r, req, status);
}

MSH_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Request_get_status(req, flag, status);
    msh_request *r = msh_req_of(req);
    if (!r) {
        if (MSH_UNLIKELY(msh_req_invalid(req)))
            return msh_bad_request();
        int locked = msh_host_enter();
        int rc = PMPI_Request_get_status(req, flag, status);
        msh_host_exit(locked);
        return rc;
    }
    int st = atomic_load_explicit(&r->state, memory_order_acquire);
    if (st == MSH_REQ_INACTIVE) {
        *flag = 1;
        if (r->kind == MSH_KIND_PART)
            msh_part_empty_status(status);
        else
            empty_status(status);
        return MPI_SUCCESS;
    }
    if (r->kind == MSH_KIND_PART)
        msh_part_progress(r, 1);
    else if (st != MSH_REQ_COMPLETE)
        msh_progress_try(r->vci);
    *flag = is_done(r);
    if (*flag)
        msh_status_out(status, &r->status);
    return MPI_SUCCESS;
}

/* ------------------------------------------------------------ arrays */

MSH_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Waitall(n, reqs, statuses);
    return complete(n, reqs, WAIT_ALL, 1, NULL, NULL, NULL, NULL, statuses);
}

MSH_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Testall(n, reqs, flag, statuses);
    return complete(n, reqs, WAIT_ALL, 0, flag, NULL, NULL, NULL, statuses);
}

MSH_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Waitany(n, reqs, index, status);
    return complete(n, reqs, WAIT_ANY, 1, NULL, index, NULL, NULL, status);
}

MSH_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Testany(n, reqs, index, flag, status);
    return complete(n, reqs, WAIT_ANY, 0, flag, index, NULL, NULL, status);
}

MSH_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    return complete(n, reqs, WAIT_SOME, 1, NULL, NULL, outcount, indices, statuses);
}

MSH_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Testsome(n, reqs, outcount, indices, statuses);
    return complete(n, reqs, WAIT_SOME, 0, NULL, NULL, outcount, indices, statuses);
}

/* ------------------------------------------------------------ lifecycle */

/* A shim request may be started: persistent and inactive. */
static inline int startable(msh_request *r)
{
    return r->persistent && atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_INACTIVE;
}

/* The error for a shim request that may not be started, as the hosts
 * report it (on MPI_COMM_WORLD; a partitioned one on its communicator). */
static int not_startable(msh_request *r)
{
    return r->kind == MSH_KIND_PART ? msh_comm_error(msh_part_comm(r), MPI_ERR_REQUEST) : msh_bad_request();
}

/* Start a shim request that startable() accepted. */
static int start_shim(msh_request *r)
{
    if (r->kind == MSH_KIND_PART)
        return msh_part_start(r);
    msh_vci *v = msh_vci_get(r->vci);
    msh_vci_lock(v);
    if (atomic_load_explicit(&r->state, memory_order_relaxed) != MSH_REQ_INACTIVE) {
        msh_vci_unlock(v); /* another thread started it meanwhile */
        return msh_bad_request();
    }
    int rc = PMPI_Start(&r->host);
    if (rc == MPI_SUCCESS && r->procnull) {
        /* Done as soon as started; the host's Wait returns at once (and
         * MPICH 4.0's Testsome would call it inactive, never complete). */
        rc = PMPI_Wait(&r->host, &r->status);
        r->status.MPI_ERROR = rc;
        atomic_store_explicit(&r->sync, MSH_SYNC_CLAIMED, memory_order_relaxed);
        atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
    } else if (rc == MPI_SUCCESS) {
        atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
        atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
        if (MSH_UNLIKELY(msh_vci_pending_add(v, r) != MPI_SUCCESS)) {
            /* Cannot track it: finish it here rather than lose it. */
            msh_vci_unlock(v);
            r->status.MPI_ERROR = PMPI_Wait(&r->host, &r->status);
            atomic_store_explicit(&r->sync, MSH_SYNC_CLAIMED, memory_order_relaxed);
            atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
            return MPI_SUCCESS;
        }
        msh_watchdog_posted(r);
        if (r->kind == MSH_KIND_PSEND)
            v->st.sends++;
        else
            v->st.recvs++;
    }
    msh_vci_unlock(v);
    return rc;
}

MSH_EXPORT int MPI_Start(MPI_Request *req)
{
    if (!shim_reqs())
        return PMPI_Start(req);
    msh_request *r = msh_req_of(*req);
    if (!r) {
        if (MSH_UNLIKELY(msh_req_invalid(*req)))
            return msh_bad_request();
        int locked = msh_host_enter();
        int rc = PMPI_Start(req);
        msh_host_exit(locked);
        return rc;
    }
    return startable(r) ? start_shim(r) : not_startable(r);
}

/* Every entry is checked before any starts, as the hosts do: the shim's
 * here, the host's by one host MPI_Startall over them (whose error, class
 * and handler are then the host's own). */
MSH_EXPORT int MPI_Startall(int n, MPI_Request reqs[])
{
    if (!shim_reqs() || n <= 0 || !reqs)
        return PMPI_Startall(n, reqs);
    int nhost = 0;
    for (int i = 0; i < n; i++) {
        msh_request *r = msh_req_of(reqs[i]);
        if (!r) {
            if (MSH_UNLIKELY(msh_req_invalid(reqs[i])))
                return msh_bad_request();
            nhost++;
        } else if (!startable(r)) {
            return not_startable(r);
        }
    }
    int rc = MPI_SUCCESS;
    if (nhost > 0) {
        MPI_Request stack[16], *hr = nhost == n ? reqs : nhost <= 16 ? stack : malloc(sizeof *hr * (size_t)nhost);
        if (!hr)
            return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
        if (hr != reqs)
            for (int i = 0, k = 0; i < n; i++)
                if (!msh_req_of(reqs[i]))
                    hr[k++] = reqs[i];
        int locked = msh_host_enter();
        rc = PMPI_Startall(nhost, hr);
        msh_host_exit(locked);
        if (hr != reqs) {
            /* Open MPI may replace the handle of a request it restarts. */
            for (int i = 0, k = 0; i < n; i++)
                if (!msh_req_of(reqs[i]))
                    reqs[i] = hr[k++];
            if (hr != stack)
                free(hr);
        }
        if (rc != MPI_SUCCESS || nhost == n)
            return rc;
    }
    for (int i = 0; i < n && rc == MPI_SUCCESS; i++) {
        msh_request *r = msh_req_of(reqs[i]);
        if (r)
            rc = start_shim(r);
    }
    return rc;
}

MSH_EXPORT int MPI_Request_free(MPI_Request *req)
{
    if (!shim_reqs())
        return PMPI_Request_free(req);
    msh_request *r = msh_req_of(*req);
    if (!r) {
        if (MSH_UNLIKELY(msh_req_invalid(*req)))
            return msh_bad_request();
        int locked = msh_host_enter();
        int rc = PMPI_Request_free(req);
        msh_host_exit(locked);
        return rc;
    }
    if (r->kind == MSH_KIND_PART)
        return msh_part_free(r, req);
    msh_vci *v = msh_vci_get(r->vci);
    msh_vci_lock(v);
    int st = atomic_load_explicit(&r->state, memory_order_relaxed);
    if (MSH_UNLIKELY(msh_req_of(*req) != r)) {
        msh_vci_unlock(v); /* another thread freed it meanwhile */
        return msh_bad_request();
    }
    if (st == MSH_REQ_PENDING) {
        r->freed = 1; /* progress recycles it when the host is done */
        msh_req_new_gen(r); /* copies of the handle are stale from now on */
    } else if (MSH_UNLIKELY(!atomic_compare_exchange_strong_explicit(&r->state, &st, MSH_REQ_FREE,
                                                                     memory_order_acq_rel, memory_order_relaxed))) {
        msh_vci_unlock(v); /* a waiter retired it meanwhile (retiring takes no VCI lock first) */
        return msh_bad_request();
    } else {
        if (r->persistent && r->host != MPI_REQUEST_NULL)
            PMPI_Request_free(&r->host);
        msh_vci_req_put(v, r);
    }
    msh_vci_unlock(v);
    *req = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

MSH_EXPORT int MPI_Cancel(MPI_Request *req)
{
    if (!shim_reqs())
        return PMPI_Cancel(req);
    msh_request *r = msh_req_of(*req);
    if (!r) {
        if (MSH_UNLIKELY(msh_req_invalid(*req)))
            return msh_bad_request();
        int locked = msh_host_enter();
        int rc = PMPI_Cancel(req);
        msh_host_exit(locked);
        return rc;
    }
    if (r->kind == MSH_KIND_PART)
        return msh_part_cancel(r);
    msh_vci *v = msh_vci_get(r->vci);
    msh_vci_lock(v);
    int rc = MPI_SUCCESS;
    if (atomic_load_explicit(&r->state, memory_order_relaxed) == MSH_REQ_PENDING)
        rc = PMPI_Cancel(&r->host);
    msh_vci_unlock(v);
    return rc;
}

/* MPICH defines these as macros (a request handle is its own Fortran
 * handle), which shim handles satisfy as they are. */
#ifndef MPI_Request_c2f
MSH_EXPORT MPI_Fint MPI_Request_c2f(MPI_Request req)
{
    MPI_Fint f;
    return shim_reqs() && msh_req_c2f(req, &f) ? f : PMPI_Request_c2f(req);
}

MSH_EXPORT MPI_Request MPI_Request_f2c(MPI_Fint f)
{
    MPI_Request h;
    return shim_reqs() && msh_req_f2c(f, &h) ? h : PMPI_Request_f2c(f);
}
#endif
