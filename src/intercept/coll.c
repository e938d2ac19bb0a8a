/* Blocking collectives that cannot be run as their plain nonblocking twin.
 *
 * Every other blocking collective is generated (tools/wrapgen.py): the twin
 * plus a shim wait (wrap.h). Open MPI 4.1's nonblocking collectives (libnbc)
 * decide per rank from the count alone whether a peer takes part, while the
 * blocking ones decide from the bytes. When one rank describes an empty
 * message as 1 of a zero-size datatype and its peer as 0 of MPI_INT (equal,
 * empty type signatures, so legal; MPICH's test coll/alltoallw_zeros does
 * it), the nonblocking form goes wrong where the blocking one does not
 * (measured raw, 2-3 ranks, tests/mpi/coll_zero_bytes.c):
 *   - MPI_Ialltoallv: the receiver waits for a message nobody sends (hang);
 *   - MPI_Ibcast: the root sends a message nobody receives, and the next
 *     collective on the communicator receives it (a wrong result or a hang).
 * So on Open MPI the shim rewrites an empty side as count 0 before calling
 * the twin: the same signature, which every rank's libnbc then skips alike.
 * MPICH needs nothing (its nonblocking forms complete these). */
#include <stdlib.h>

#include "intercept/wrap.h"

#if defined(OPEN_MPI)
/* A datatype of size 0: its counts carry no data. MPI_DATATYPE_NULL is left
 * to the host, which reports it. */
static int zero_size(MPI_Datatype type)
{
    int size = -1;
    return type != MPI_DATATYPE_NULL && PMPI_Type_size(type, &size) == MPI_SUCCESS && size == 0;
}

/* counts of a zero-size type, as an array with positive entries 0 (negative
 * ones stay for the host to report), or counts itself when nothing changes.
 * *owned is what to free after the call. */
static const int *empty_counts(const int counts[], MPI_Datatype type, MPI_Comm comm, int **owned)
{
    int inter = 0, n = 0;
    if (counts == NULL || comm == MPI_COMM_NULL || !zero_size(type) ||
        PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_size(comm, &n) : PMPI_Comm_size(comm, &n)) != MPI_SUCCESS || n <= 0)
        return counts;
    int *z = malloc((size_t)n * sizeof *z);
    if (z == NULL)
        return counts;
    for (int i = 0; i < n; i++)
        z[i] = counts[i] > 0 ? 0 : counts[i];
    free(*owned);
    *owned = z;
    return z;
}
#endif

MSH_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    if (!msh_on())
        return PMPI_Bcast(buffer, count, datatype, root, comm);
#if defined(OPEN_MPI)
    if (count > 0 && zero_size(datatype))
        count = 0;
#endif
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
    int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, &r);
    return msh_coll_leave(c, rc, r);
}

MSH_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                             MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                             const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    if (!msh_on())
        return PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                              recvtype, comm);
#if defined(OPEN_MPI)
    int *own_s = NULL, *own_r = NULL;
    if (sendbuf != MPI_IN_PLACE) /* else sendcounts and sendtype are not read */
        sendcounts = empty_counts(sendcounts, sendtype, comm, &own_s);
    recvcounts = empty_counts(recvcounts, recvtype, comm, &own_r);
#endif
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
    int rc = PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                             recvtype, comm, &r);
    rc = msh_coll_leave(c, rc, r);
#if defined(OPEN_MPI)
    free(own_s);
    free(own_r);
#endif
    return rc;
}
