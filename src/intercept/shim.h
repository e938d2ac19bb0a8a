/* What every hand-written entry point needs: is the runtime on (msh_on,
 * core/runtime.h), the solo fast path (sync/solo.h), how to post an
 * operation on a route and wait for shim requests (sync/wait.h). */
#ifndef MSH_INTERCEPT_SHIM_H
#define MSH_INTERCEPT_SHIM_H

#include <mpi.h>

#include "core/common.h"
#include "core/runtime.h"
#include "sync/post.h"
#include "sync/request.h"
#include "sync/solo.h"
#include "sync/progress.h"
#include "sync/wait.h"
#include "vci/comm.h"
#include "vci/vci.h"

#endif
