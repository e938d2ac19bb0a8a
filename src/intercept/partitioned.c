/* MPI-4 partitioned entry points (src/partitioned has the layer). On an
 * MPI-3 host they exist only here; on an MPI-4 host MPISHIM_PART=native or
 * MPISHIM_DISABLE=1 hands them to the host. */
#include "intercept/shim.h"
#include "mpishim.h"
#include "partitioned/part.h"
#include "core/log.h"

/* MPICH 4.0 declares the list without const. */
#if MPI_VERSION >= 4 && defined(MPICH)
#define PLIST_CONST
#else
#define PLIST_CONST const
#endif

#if MPI_VERSION < 4
static int no_layer(MPI_Comm comm)
{
    static _Atomic int said;
    if (!atomic_exchange(&said, 1))
        msh_log("partitioned communication needs the shim's layer, which is off here "
                "(MPISHIM_DISABLE=1, or before MPI_Init); this host has none of its own");
    return msh_comm_error(comm == MPI_COMM_NULL ? MPI_COMM_WORLD : comm, MPI_ERR_UNSUPPORTED_OPERATION);
}
#endif

MSH_EXPORT int MPI_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int dest,
                              int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!msh_part_layer_on()) {
#if MPI_VERSION >= 4
        return PMPI_Psend_init(buf, partitions, count, datatype, dest, tag, comm, info, request);
#else
        return no_layer(comm);
#endif
    }
    return msh_part_init_req(1, (void *)(uintptr_t)buf, partitions, count, datatype, dest, tag, comm, info, request);
}

MSH_EXPORT int MPI_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                              MPI_Comm comm, MPI_Info info, MPI_Request *request)
{
    if (!msh_part_layer_on()) {
#if MPI_VERSION >= 4
        return PMPI_Precv_init(buf, partitions, count, datatype, source, tag, comm, info, request);
#else
        return no_layer(comm);
#endif
    }
    return msh_part_init_req(0, buf, partitions, count, datatype, source, tag, comm, info, request);
}

/* The partitioned shim request behind a handle, or NULL (then *rc says
 * what to return: the host's answer or an error). */
static msh_request *part_of(MPI_Request req, int *rc)
{
    msh_request *r = msh_req_of(req);
    if (msh_req_is_part(r))
        return r;
    *rc = msh_comm_error(MPI_COMM_WORLD, MPI_ERR_REQUEST);
    return NULL;
}

MSH_EXPORT int MPI_Pready(int partition, MPI_Request request)
{
#if MPI_VERSION >= 4
    if (!msh_req_is_part(msh_req_of(request)))
        return PMPI_Pready(partition, request);
#endif
    int rc;
    msh_request *r = part_of(request, &rc);
    if (!r)
        return rc;
    rc = msh_part_pready(r, partition);
    return rc == MPI_SUCCESS ? rc : msh_comm_error(msh_part_comm(r), rc);
}

MSH_EXPORT int MPI_Pready_range(int partition_low, int partition_high, MPI_Request request)
{
#if MPI_VERSION >= 4
    if (!msh_req_is_part(msh_req_of(request)))
        return PMPI_Pready_range(partition_low, partition_high, request);
#endif
    int rc;
    msh_request *r = part_of(request, &rc);
    if (!r)
        return rc;
    /* Check the whole range first: an error readies nothing. */
    rc = partition_low > partition_high ? MPI_ERR_ARG : msh_part_check_ready(r, partition_low);
    if (rc == MPI_SUCCESS)
        rc = msh_part_check_ready(r, partition_high);
    for (int i = partition_low; rc == MPI_SUCCESS && i <= partition_high; i++)
        rc = msh_part_pready(r, i);
    return rc == MPI_SUCCESS ? rc : msh_comm_error(msh_part_comm(r), rc);
}

MSH_EXPORT int MPI_Pready_list(int length, PLIST_CONST int array_of_partitions[], MPI_Request request)
{
#if MPI_VERSION >= 4
    if (!msh_req_is_part(msh_req_of(request)))
        return PMPI_Pready_list(length, array_of_partitions, request);
#endif
    int rc;
    msh_request *r = part_of(request, &rc);
    if (!r)
        return rc;
    rc = length < 0 ? MPI_ERR_ARG : MPI_SUCCESS;
    for (int i = 0; rc == MPI_SUCCESS && i < length; i++)
        rc = msh_part_check_ready(r, array_of_partitions[i]);
    for (int i = 0; rc == MPI_SUCCESS && i < length; i++)
        rc = msh_part_pready(r, array_of_partitions[i]);
    return rc == MPI_SUCCESS ? rc : msh_comm_error(msh_part_comm(r), rc);
}

MSH_EXPORT int MPI_Parrived(MPI_Request request, int partition, int *flag)
{
    if (request == MPI_REQUEST_NULL && msh_part_layer_on()) {
        *flag = 1; /* MPI 4.0 sec. 4.2.2: a null request has arrived */
        return MPI_SUCCESS;
    }
#if MPI_VERSION >= 4
    if (!msh_req_is_part(msh_req_of(request)))
        return PMPI_Parrived(request, partition, flag);
#endif
    int rc;
    msh_request *r = part_of(request, &rc);
    if (!r)
        return rc;
    rc = msh_part_parrived(r, partition, flag);
    return rc == MPI_SUCCESS ? rc : msh_comm_error(msh_part_comm(r), rc);
}
