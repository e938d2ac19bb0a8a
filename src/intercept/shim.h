/* What every hand-written entry point needs: is the runtime on (msh_on,
 * core/runtime.h), the solo fast path (sync/solo.h), how to post an
 * operation on a route and wait for shim requests (sync/wait.h). */
#ifndef MSH_INTERCEPT_SHIM_H
#define MSH_INTERCEPT_SHIM_H

#include <mpi.h>

#include "core/common.h"
#include "core/runtime.h"
#include "sync/request.h"
#include "sync/solo.h"
#include "sync/sync.h"
#include "sync/wait.h"
#include "vci/comm.h"
#include "vci/vci.h"

/* Reject a wildcard that c's assertions rule out. */
static inline int msh_check_wildcards(MPI_Comm c, const msh_comm *mc, int source, int tag)
{
    unsigned a = mc ? mc->asserts : msh_cfg.asserts;
    if (MSH_UNLIKELY(source == MPI_ANY_SOURCE && (a & MSH_ASSERT_NO_ANY_SOURCE)))
        return msh_comm_error(c, MPI_ERR_RANK);
    if (MSH_UNLIKELY(tag == MPI_ANY_TAG && (a & MSH_ASSERT_NO_ANY_TAG)))
        return msh_comm_error(c, MPI_ERR_TAG);
    return MPI_SUCCESS;
}

#endif
