/* A communicator lives until its last operation ends: a send or receive
 * started on it may complete after MPI_Comm_free. Rank 1 starts K
 * receives on a duplicate of MPI_COMM_WORLD, frees the duplicate, and only
 * then lets rank 0 send (a barrier on MPI_COMM_WORLD); rank 0 starts K
 * sends (every other one synchronous) on its own duplicate, frees it, and
 * only then waits. Rank 1 checks data, source, tag and count. Two ways
 * this broke: the lanes kept what they knew of a communicator only until
 * its free, and a receive's match then read freed memory (MPICH's
 * comm/cmfree2 died of SIGSEGV over tcp on Open MPI); and with queued
 * posting (MPISHIM_PROGRESS=offload) a send still queued at the free was
 * posted afterwards on the freed handle ("Invalid communicator" from
 * MPICH over tcp). Other ranks take part in the duplicate and the barrier
 * only. */
#include "testutil.h"

#define K 64
#define N 64

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The race showed at 2 ranks; above that a round costs the idle ranks'
     * duplicate and barrier too (oversubscribed here), so fewer. */
    int rounds = size > 2 ? 50 : 200;
    static int buf[K][N];
    for (int round = 0; round < rounds; round++) {
        MPI_Comm dup;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        MPI_Request req[K];
        if (rank == 0) {
            for (int k = 0; k < K; k++)
                for (int i = 0; i < N; i++)
                    buf[k][i] = (round * K + k) * N + i;
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            for (int k = 0; k < K; k++) {
                if (k % 2)
                    CHECK_MPI(MPI_Issend(buf[k], N, MPI_INT, 1, 7 + k, dup, &req[k]));
                else
                    CHECK_MPI(MPI_Isend(buf[k], N, MPI_INT, 1, 7 + k, dup, &req[k]));
            }
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK_MPI(MPI_Waitall(K, req, MPI_STATUSES_IGNORE));
        } else if (rank == 1) {
            MPI_Status st[K];
            memset(buf, 0, sizeof buf);
            for (int k = 0; k < K; k++)
                CHECK_MPI(MPI_Irecv(buf[k], N, MPI_INT, 0, 7 + k, dup, &req[k]));
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK(dup == MPI_COMM_NULL, "MPI_Comm_free left the handle set");
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(K, req, st));
            for (int k = 0; k < K; k++) {
                int c = -1;
                CHECK_MPI(MPI_Get_count(&st[k], MPI_INT, &c));
                CHECK(c == N && st[k].MPI_SOURCE == 0 && st[k].MPI_TAG == 7 + k,
                      "round %d receive %d: count %d source %d tag %d", round, k, c, st[k].MPI_SOURCE,
                      st[k].MPI_TAG);
                for (int i = 0; i < N; i++)
                    CHECK(buf[k][i] == (round * K + k) * N + i, "round %d receive %d: [%d] is %d", round, k, i,
                          buf[k][i]);
            }
        } else {
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    test_finish("p2p_comm_free_pending");
    return 0;
}
