/* A partitioned request's operations in the request layer's table
 * (sync/request.h): polled by its waiters (msh_part_progress), retired as a
 * persistent request that stays for its next round, its request errors
 * raised on its communicator. */
#include "partitioned/part.h"
#include "sync/wait.h"

/* Polls of a partitioned request before its waiter starts idling: a short
 * message is often in within a few polls, and giving the core away costs
 * more than that. */
#define MSH_PART_SPIN_POLLS 256

static int part_wait(msh_request *r, MPI_Request *handle, MPI_Status *status)
{
    (void)handle; /* persistent: the handle stays */
    msh_spin sp = MSH_SPIN_ON(r->vci);
    for (unsigned polls = 0; !msh_part_progress(r, 1); polls++)
        if (polls >= MSH_PART_SPIN_POLLS)
            msh_spin_idle(&sp);
    msh_spin_end(&sp);
    return msh_part_retire(r, status);
}

static int part_test(msh_request *r, MPI_Request *handle, int *flag, MPI_Status *status)
{
    (void)handle;
    *flag = msh_part_progress(r, 1);
    return *flag ? msh_part_retire(r, status) : MPI_SUCCESS;
}

/* The round's status without retiring it; MPI_SUCCESS on both hosts. */
static int part_get_status(msh_request *r, int *flag, MPI_Status *status)
{
    msh_part_progress(r, 1);
    *flag = msh_req_done(r);
    if (*flag)
        msh_status_out(status, &r->status);
    return MPI_SUCCESS;
}

const msh_req_ops msh_part_req_ops = {
    .progress = msh_part_progress,
    .wait = part_wait,
    .test = part_test,
    .get_status = part_get_status,
    .start = msh_part_start,
    .free = msh_part_free,
    .cancel = msh_part_cancel,
    .empty_status = msh_part_empty_status,
    .error_comm = msh_part_comm,
};
