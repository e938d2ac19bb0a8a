/* A packed copy of a buffer: what the send half of a send-receive that
 * replaces its buffer sends, so that the receive can land in the buffer
 * (large-count MPI_Sendrecv_replace_c and the MPI_Isendrecv_replace forms).
 * A packed message matches a receive of the same type signature. */
#ifndef MSH_INTERCEPT_PACK_H
#define MSH_INTERCEPT_PACK_H

#include <mpi.h>
#include <stdlib.h>

#include "sync/wait.h"

#if MPI_VERSION >= 4
/* *tmp (the caller frees it) gets count elements of dt packed, *bytes
 * their size; errors are the host's, or MPI_ERR_NO_MEM through comm. */
static inline int msh_pack_copy_c(const void *buf, MPI_Count count, MPI_Datatype dt, MPI_Comm comm, void **tmp,
                                  MPI_Count *bytes)
{
    MPI_Count size = 0;
    *bytes = 0;
    int rc = PMPI_Pack_size_c(count, dt, comm, &size);
    if (rc != MPI_SUCCESS)
        return rc;
    *tmp = malloc(size > 0 ? (size_t)size : 1);
    if (!*tmp)
        return msh_comm_error(comm, MPI_ERR_NO_MEM);
    rc = PMPI_Pack_c(buf, count, dt, *tmp, size, bytes, comm);
    if (rc != MPI_SUCCESS) {
        free(*tmp);
        *tmp = NULL;
    }
    return rc;
}
#endif

#endif
