/* Request completion entry points: Wait*, Test*, Start*, Request_free,
 * Request_get_status, Cancel, Request_c2f/f2c. Argument checks and the
 * split between the kinds of request; the engine is in src/sync/wait.h,
 * partitioned requests in src/partitioned/part.h. */
#include <stdlib.h>

#include "intercept/shim.h"
#include "intercept/status.h"
#include "partitioned/part.h"

/* Shim requests may exist: the runtime is on, or partitioned channels are
 * alive (they work without it). */
static inline int shim_reqs(void)
{
    return msh_on() || msh_part_any();
}

/* For a handle that is not a live shim request (r == NULL): refuse a stale
 * shim handle (never to reach the host), else make the host call on it,
 * under the host lock when the host is serialized, with the progress
 * thread out of the host (sync/progress.h), and return its result. */
#define RETURN_HOST_CALL(handle, call)                 \
    do {                                               \
        if (MSH_UNLIKELY(msh_req_invalid(handle)))     \
            return msh_bad_request();                  \
        int beside_ = msh_progress_host_enter();       \
        int locked_ = msh_host_enter();                \
        int rc_ = (call);                              \
        msh_host_exit(locked_);                        \
        msh_progress_host_exit(beside_);               \
        return rc_;                                    \
    } while (0)

/* An inactive shim request: complete at once, with its kind's empty status. */
static inline int inactive(msh_request *r, MPI_Status *status)
{
    if (atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_INACTIVE)
        return 0;
    msh_req_ops_of(r)->empty_status(status);
    return 1;
}

/* ------------------------------------------------------------ single requests */

/* MPI_Wait on a request the shim did not make. */
static int wait_host(MPI_Request *req, MPI_Status *status)
{
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
    if (msh_pool.serialized || poll)
        return msh_host_wait(req, status);
    int beside = msh_progress_host_enter();
    int rc = PMPI_Wait(req, status);
    msh_progress_host_exit(beside);
    return rc;
}

static int wait_call(MPI_Request *req, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Wait(req, status);
    msh_request *r = msh_req_of(*req);
    if (!r)
        return wait_host(req, status);
    if (inactive(r, status))
        return MPI_SUCCESS;
    return msh_req_ops_of(r)->wait(r, req, status);
}

MSH_EXPORT int MPI_Wait(MPI_Request *req, MPI_Status *status)
{
    return msh_status_fix(wait_call(req, status), status);
}

static int test_call(MPI_Request *req, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Test(req, flag, status);
    msh_request *r = msh_req_of(*req);
    if (!r)
        RETURN_HOST_CALL(*req, PMPI_Test(req, flag, status));
    if (inactive(r, status))
        return (*flag = 1), MPI_SUCCESS;
    return msh_req_ops_of(r)->test(r, req, flag, status);
}

MSH_EXPORT int MPI_Test(MPI_Request *req, int *flag, MPI_Status *status)
{
    return msh_status_fix(test_call(req, flag, status), status);
}

static int request_get_status_call(MPI_Request req, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Request_get_status(req, flag, status);
    msh_request *r = msh_req_of(req);
    if (!r)
        RETURN_HOST_CALL(req, PMPI_Request_get_status(req, flag, status));
    if (inactive(r, status))
        return (*flag = 1), MPI_SUCCESS;
    return msh_req_ops_of(r)->get_status(r, flag, status);
}

MSH_EXPORT int MPI_Request_get_status(MPI_Request req, int *flag, MPI_Status *status)
{
    return msh_status_fix(request_get_status_call(req, flag, status), status);
}

/* ------------------------------------------------------------ arrays */

static int waitall_call(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Waitall(n, reqs, statuses);
    return msh_complete(n, reqs, &(msh_completion){ .mode = MSH_COMPLETE_ALL, .blocking = 1, .statuses = statuses });
}

MSH_EXPORT int MPI_Waitall(int n, MPI_Request reqs[], MPI_Status statuses[])
{
    return msh_status_fix_n(waitall_call(n, reqs, statuses), n, statuses);
}

static int testall_call(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Testall(n, reqs, flag, statuses);
    return msh_complete(n, reqs, &(msh_completion){ .mode = MSH_COMPLETE_ALL, .flag = flag, .statuses = statuses });
}

MSH_EXPORT int MPI_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status statuses[])
{
    return msh_status_fix_n(testall_call(n, reqs, flag, statuses), n, statuses);
}

static int waitany_call(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Waitany(n, reqs, index, status);
    return msh_complete(n, reqs,
                        &(msh_completion){ .mode = MSH_COMPLETE_ANY, .blocking = 1, .index = index, .statuses = status });
}

MSH_EXPORT int MPI_Waitany(int n, MPI_Request reqs[], int *index, MPI_Status *status)
{
    return msh_status_fix(waitany_call(n, reqs, index, status), status);
}

static int testany_call(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    if (!shim_reqs())
        return PMPI_Testany(n, reqs, index, flag, status);
    return msh_complete(n, reqs,
                        &(msh_completion){ .mode = MSH_COMPLETE_ANY, .flag = flag, .index = index, .statuses = status });
}

MSH_EXPORT int MPI_Testany(int n, MPI_Request reqs[], int *index, int *flag, MPI_Status *status)
{
    return msh_status_fix(testany_call(n, reqs, index, flag, status), status);
}

static int waitsome_call(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Waitsome(n, reqs, outcount, indices, statuses);
    return msh_complete(n, reqs,
                        &(msh_completion){ .mode = MSH_COMPLETE_SOME, .blocking = 1, .outcount = outcount,
                                           .indices = indices, .statuses = statuses });
}

MSH_EXPORT int MPI_Waitsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    int rc = waitsome_call(n, reqs, outcount, indices, statuses);
    return msh_status_fix_n(rc, rc == MPI_SUCCESS ? 0 : *outcount, statuses);
}

static int testsome_call(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    if (!shim_reqs())
        return PMPI_Testsome(n, reqs, outcount, indices, statuses);
    return msh_complete(n, reqs,
                        &(msh_completion){ .mode = MSH_COMPLETE_SOME, .outcount = outcount, .indices = indices,
                                           .statuses = statuses });
}

MSH_EXPORT int MPI_Testsome(int n, MPI_Request reqs[], int *outcount, int indices[], MPI_Status statuses[])
{
    int rc = testsome_call(n, reqs, outcount, indices, statuses);
    return msh_status_fix_n(rc, rc == MPI_SUCCESS ? 0 : *outcount, statuses);
}

/* ------------------------------------------------------------ lifecycle */

/* A shim request may be started: persistent and inactive. */
static inline int startable(msh_request *r)
{
    return r->persistent && atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_INACTIVE;
}

/* The error for a shim request that may not be started, as the hosts
 * report it (where its kind raises request errors). */
static int not_startable(msh_request *r)
{
    return msh_comm_error(msh_req_ops_of(r)->error_comm(r), MPI_ERR_REQUEST);
}

/* Start a shim request that startable() accepted. */
static int start_shim(msh_request *r)
{
    return msh_req_ops_of(r)->start(r);
}

MSH_EXPORT int MPI_Start(MPI_Request *req)
{
    if (!shim_reqs())
        return PMPI_Start(req);
    msh_request *r = msh_req_of(*req);
    if (!r)
        RETURN_HOST_CALL(*req, PMPI_Start(req));
    return startable(r) ? start_shim(r) : not_startable(r);
}

/* The host requests of a Startall, started by one host call (under the
 * host lock when serialized). */
static int start_host_part(int n, MPI_Request reqs[], int nhost)
{
    MPI_Request stack[16], *hr = nhost == n ? reqs : nhost <= 16 ? stack : malloc(sizeof *hr * (size_t)nhost);
    if (!hr)
        return msh_comm_error(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
    if (hr != reqs)
        for (int i = 0, k = 0; i < n; i++)
            if (!msh_req_of(reqs[i]))
                hr[k++] = reqs[i];
    int locked = msh_host_enter();
    int rc = PMPI_Startall(nhost, hr);
    msh_host_exit(locked);
    if (hr != reqs) {
        /* Open MPI may replace the handle of a request it restarts. */
        for (int i = 0, k = 0; i < n; i++)
            if (!msh_req_of(reqs[i]))
                reqs[i] = hr[k++];
        if (hr != stack)
            free(hr);
    }
    return rc;
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
        rc = start_host_part(n, reqs, nhost);
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
    if (!r)
        RETURN_HOST_CALL(*req, PMPI_Request_free(req));
    return msh_error_keep_frame(msh_req_ops_of(r)->free(r, req));
}

MSH_EXPORT int MPI_Cancel(MPI_Request *req)
{
    if (!shim_reqs())
        return PMPI_Cancel(req);
    msh_request *r = msh_req_of(*req);
    if (!r)
        RETURN_HOST_CALL(*req, PMPI_Cancel(req));
    return msh_error_keep_frame(msh_req_ops_of(r)->cancel(r));
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
