/* Blocking collectives whose nonblocking twin, called as it is, gives
 * something else than the host's blocking call: the twin with its arguments
 * rewritten, plus the shim wait. The rewriting makes its host calls (type
 * sizes, topology) inside msh_coll_enter, serialized as the twin is.
 *
 * Every other blocking collective is generated (tools/wrapgen.py): the twin
 * plus a shim wait (wrap.h).
 *
 * Zero-size datatypes (MPI_Bcast, MPI_Alltoallv). Open MPI 4.1's nonblocking collectives (libnbc)
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
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/log.h"
#include "intercept/wrap.h"

_Atomic unsigned long long msh_coll_forms[2];
msh_comm *msh_coll_world;

int msh_coll_agree(msh_comm *mc)
{
    msh_hcoll h = msh_coll_host_enter(); /* may end the solo path: read it after */
    int alone = atomic_load_explicit(&msh_solo_on, memory_order_relaxed);
    int rc = PMPI_Allreduce(MPI_IN_PLACE, &alone, 1, MPI_INT, MPI_MIN, mc->user);
    msh_coll_host_exit(h);
    /* A failed asking reported through the communicator's handler (a member
     * gone): the program's own call follows in the same form. */
    if (rc != MPI_SUCCESS || alone)
        return 1;
    atomic_store_explicit(&mc->coll_nb, 1, memory_order_relaxed);
    if (msh_cfg.verbose)
        msh_log_once("blocking collectives take their nonblocking form on a communicator whose processes are "
                     "not all alone in MPI (MPISHIM_COLL=auto)");
    return 0;
}

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
 * *owned (NULL on entry) is what to free after the call. */
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
    *owned = z;
    return z;
}
#endif

MSH_EXPORT int MPI_Bcast(void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm)
{
    MSH_COLL_BY_HOST(comm, PMPI_Bcast(buffer, count, datatype, root, comm));
    MSH_COLL_INTER_BY_HOST(comm, PMPI_Bcast(buffer, count, datatype, root, comm));
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
#if defined(OPEN_MPI)
    /* an intercommunicator's MPI_PROC_NULL ranks pass no significant type */
    if (count > 0 && root != MPI_PROC_NULL && zero_size(datatype))
        count = 0;
#endif
    int rc = PMPI_Ibcast(buffer, count, datatype, root, comm, &r);
    return msh_coll_leave(c, rc, r);
}

MSH_EXPORT int MPI_Alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                             MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                             const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    MSH_COLL_BY_HOST(comm, PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                          rdispls, recvtype, comm));
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
#if defined(OPEN_MPI)
    int *own_s = NULL, *own_r = NULL;
    if (sendbuf != MPI_IN_PLACE) /* else sendcounts and sendtype are not read */
        sendcounts = empty_counts(sendcounts, sendtype, comm, &own_s);
    recvcounts = empty_counts(recvcounts, recvtype, comm, &own_r);
#endif
    int rc = PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                             recvtype, comm, &r);
    rc = msh_coll_leave(c, rc, r);
#if defined(OPEN_MPI)
    free(own_s);
    free(own_r);
#endif
    return rc;
}

/* ------------------------------------------------ neighborhood alltoall
 *
 * On a Cartesian communicator, a periodic dimension of 1 or 2 processes has
 * the same process as both neighbours. MPI 4.0 (annex B.1.1, the errata of
 * mpi-forum/mpi-issues#153) puts the block sent in the negative direction of
 * dimension d into block 2d+1 of the receiver and vice versa. Open MPI 4.1's
 * blocking Neighbor_alltoall(v,w) do; its nonblocking forms (libnbc) post the
 * receives in list order and swap the two blocks (open-mpi/ompi#14430), so
 * the shim's twin gave other data than the raw blocking call. MPICH 4.0.2's
 * v and w forms pair in list order blocking and nonblocking alike.
 *
 * Rather than trusting a version number, the shim asks the host once per
 * call kind, on a 1-process periodic grid of MPI_COMM_SELF: do the blocking
 * and the nonblocking form agree, and if not, does the nonblocking form with
 * each such dimension's two receive blocks exchanged give the blocking
 * result? Only then are the receive descriptions of those dimensions
 * exchanged (alltoall goes through Ineighbor_alltoallv for that), so the
 * shim gives what the host's blocking call gives, on every host version. */

enum { NBR_A2A, NBR_A2AV, NBR_A2AW, NBR_KINDS };

/* Per kind: -1 not asked yet, 0 the twin as it is, 1 exchange the pairs.
 * Threads asking at once compute the same answer. */
static _Atomic int nbr_exchange[NBR_KINDS] = { -1, -1, -1 };

/* One exchange of kind on c (one periodic dimension of 1 process): blocking
 * (nb = 0), nonblocking, or nonblocking with the receive pair exchanged
 * (nb = 2). */
static int nbr_probe_run(int kind, MPI_Comm c, int nb, int rb[2])
{
    int sb[2] = { 10, 11 }, cnt[2] = { 1, 1 }, dsp[2] = { 0, 1 }, xdsp[2] = { 1, 0 };
    MPI_Aint bdsp[2] = { 0, sizeof(int) }, xbdsp[2] = { sizeof(int), 0 };
    MPI_Datatype ty[2] = { MPI_INT, MPI_INT };
    MPI_Request r = MPI_REQUEST_NULL;
    int rc;
    rb[0] = rb[1] = -1;
    if (nb == 0)
        rc = kind == NBR_A2A    ? PMPI_Neighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, c)
             : kind == NBR_A2AV ? PMPI_Neighbor_alltoallv(sb, cnt, dsp, MPI_INT, rb, cnt, dsp, MPI_INT, c)
                                : PMPI_Neighbor_alltoallw(sb, cnt, bdsp, ty, rb, cnt, bdsp, ty, c);
    else if (nb == 1)
        rc = kind == NBR_A2A    ? PMPI_Ineighbor_alltoall(sb, 1, MPI_INT, rb, 1, MPI_INT, c, &r)
             : kind == NBR_A2AV ? PMPI_Ineighbor_alltoallv(sb, cnt, dsp, MPI_INT, rb, cnt, dsp, MPI_INT, c, &r)
                                : PMPI_Ineighbor_alltoallw(sb, cnt, bdsp, ty, rb, cnt, bdsp, ty, c, &r);
    else
        rc = kind == NBR_A2AW ? PMPI_Ineighbor_alltoallw(sb, cnt, bdsp, ty, rb, cnt, xbdsp, ty, c, &r)
                              : PMPI_Ineighbor_alltoallv(sb, cnt, dsp, MPI_INT, rb, cnt, xdsp, MPI_INT, c, &r);
    if (rc == MPI_SUCCESS && nb)
        rc = PMPI_Wait(&r, MPI_STATUS_IGNORE);
    return rc;
}

static int nbr_probe(int kind)
{
    int dims[1] = { 1 }, periods[1] = { 1 }, want[2], got[2], fixed[2], ans = 0;
    MPI_Comm c;
    if (PMPI_Cart_create(MPI_COMM_SELF, 1, dims, periods, 0, &c) != MPI_SUCCESS)
        return 0;
    PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (nbr_probe_run(kind, c, 0, want) == MPI_SUCCESS && nbr_probe_run(kind, c, 1, got) == MPI_SUCCESS &&
        (got[0] != want[0] || got[1] != want[1]) && nbr_probe_run(kind, c, 2, fixed) == MPI_SUCCESS)
        ans = fixed[0] == want[0] && fixed[1] == want[1];
    PMPI_Comm_free(&c);
    return ans;
}

/* The receive-block permutation for comm: NULL when the twin is used as it
 * is, else a malloc'd array of its in-degree *n with perm[i] = i ^ 1 in the
 * periodic dimensions of 1 or 2 processes. Called inside msh_coll_enter. */
static int *nbr_perm(int kind, MPI_Comm comm, int *n)
{
    int topo = MPI_UNDEFINED, nd = 0;
    if (comm == MPI_COMM_NULL || PMPI_Topo_test(comm, &topo) != MPI_SUCCESS || topo != MPI_CART ||
        PMPI_Cartdim_get(comm, &nd) != MPI_SUCCESS || nd <= 0)
        return NULL;
    int *dims = malloc(3 * (size_t)nd * sizeof *dims), *perm = NULL, any = 0;
    if (dims == NULL)
        return NULL;
    int *periods = dims + nd, *coords = dims + 2 * nd;
    if (PMPI_Cart_get(comm, nd, dims, periods, coords) != MPI_SUCCESS)
        goto out;
    for (int d = 0; d < nd; d++)
        any |= periods[d] && dims[d] <= 2;
    if (!any)
        goto out;
    int ex = atomic_load_explicit(&nbr_exchange[kind], memory_order_relaxed);
    if (ex < 0) {
        ex = nbr_probe(kind);
        atomic_store_explicit(&nbr_exchange[kind], ex, memory_order_relaxed);
    }
    if (!ex || (perm = malloc(2 * (size_t)nd * sizeof *perm)) == NULL)
        goto out;
    for (int i = 0; i < 2 * nd; i++)
        perm[i] = periods[i / 2] && dims[i / 2] <= 2 ? i ^ 1 : i;
    *n = 2 * nd;
out:
    free(dims);
    return perm;
}

/* a permuted copy of n ints (or MPI_Aints, types): out[i] = in[perm[i]] */
#define NBR_PERMUTED(in, perm, n, out)                                         \
    do {                                                                       \
        for (int i_ = 0; i_ < (n); i_++)                                       \
            (out)[i_] = (in)[(perm)[i_]];                                      \
    } while (0)

MSH_EXPORT int MPI_Neighbor_alltoall(const void *sendbuf, int sendcount, MPI_Datatype sendtype,
                                     void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm)
{
    MSH_COLL_BY_HOST(comm, PMPI_Neighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm));
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
    int n = 0, rc, *arr = NULL, *perm = nbr_perm(NBR_A2A, comm, &n);
    /* int displacements in units of the block's extent: i * count must fit */
    if (perm != NULL && (long long)n * (sendcount > recvcount ? sendcount : recvcount) <= INT_MAX)
        arr = malloc(4 * (size_t)n * sizeof *arr);
    if (arr != NULL) { /* as Ineighbor_alltoallv with the receive pairs exchanged */
        int *scnt = arr, *sdsp = arr + n, *rcnt = arr + 2 * n, *rdsp = arr + 3 * n;
        for (int i = 0; i < n; i++) {
            scnt[i] = sendcount;
            sdsp[i] = i * sendcount;
            rcnt[i] = recvcount;
            rdsp[i] = perm[i] * recvcount;
        }
        rc = PMPI_Ineighbor_alltoallv(sendbuf, scnt, sdsp, sendtype, recvbuf, rcnt, rdsp, recvtype, comm, &r);
    } else {
        rc = PMPI_Ineighbor_alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, &r);
    }
    rc = msh_coll_leave(c, rc, r);
    free(arr);
    free(perm);
    return rc;
}

MSH_EXPORT int MPI_Neighbor_alltoallv(const void *sendbuf, const int sendcounts[], const int sdispls[],
                                      MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                                      const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm)
{
    MSH_COLL_BY_HOST(comm, PMPI_Neighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                   rdispls, recvtype, comm));
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
    int n = 0, *arr = NULL, *perm = nbr_perm(NBR_A2AV, comm, &n);
    if (perm != NULL)
        arr = malloc(2 * (size_t)n * sizeof *arr);
    if (arr != NULL) {
        NBR_PERMUTED(recvcounts, perm, n, arr);
        NBR_PERMUTED(rdispls, perm, n, arr + n);
        recvcounts = arr;
        rdispls = arr + n;
    }
    int rc = PMPI_Ineighbor_alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls,
                                      recvtype, comm, &r);
    rc = msh_coll_leave(c, rc, r);
    free(arr);
    free(perm);
    return rc;
}

MSH_EXPORT int MPI_Neighbor_alltoallw(const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[],
                                      const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[],
                                      const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm)
{
    MSH_COLL_BY_HOST(comm, PMPI_Neighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts,
                                                   rdispls, recvtypes, comm));
    MPI_Request r;
    msh_coll_ctx c = msh_coll_enter(comm);
    int n = 0, *cnt = NULL, *perm = nbr_perm(NBR_A2AW, comm, &n);
    MPI_Aint *dsp = NULL;
    MPI_Datatype *ty = NULL;
    if (perm != NULL) {
        cnt = malloc((size_t)n * sizeof *cnt);
        dsp = malloc((size_t)n * sizeof *dsp);
        ty = malloc((size_t)n * sizeof *ty);
    }
    if (cnt != NULL && dsp != NULL && ty != NULL) {
        NBR_PERMUTED(recvcounts, perm, n, cnt);
        NBR_PERMUTED(rdispls, perm, n, dsp);
        NBR_PERMUTED(recvtypes, perm, n, ty);
        recvcounts = cnt;
        rdispls = dsp;
        recvtypes = ty;
    }
    int rc = PMPI_Ineighbor_alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                                      recvtypes, comm, &r);
    rc = msh_coll_leave(c, rc, r);
    free(cnt);
    free(dsp);
    free(ty);
    free(perm);
    return rc;
}
