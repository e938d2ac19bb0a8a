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
    int err = msh_wildcard_refused(mc ? mc->asserts : msh_cfg.asserts, source, tag);
    return MSH_UNLIKELY(err != MPI_SUCCESS) ? msh_comm_error(c, err) : MPI_SUCCESS;
}

#endif
