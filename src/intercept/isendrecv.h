/* MPI-4's nonblocking send-receive (isendrecv.c): its request kind's
 * operations, registered at init. */
#ifndef MSH_INTERCEPT_ISENDRECV_H
#define MSH_INTERCEPT_ISENDRECV_H

#include <mpi.h>

#include "sync/request.h"

#if MPI_VERSION >= 4
extern const msh_req_ops msh_pair_req_ops;
#endif

#endif
