/* A communicator lives until its last operation ends: a receive posted on
 * it may complete after MPI_Comm_free. Rank 1 posts receives on a
 * duplicate of MPI_COMM_WORLD (one for a synchronous send, one for a
 * standard one), frees the duplicate, and only then lets rank 0 send (a
 * barrier on MPI_COMM_WORLD); rank 0 sends on its own duplicate and frees
 * it. Rank 1 checks data, source, tag and count. The lanes kept what they
 * knew of a communicator only until its free: the receive's match then read
 * freed memory (MPICH's comm/cmfree2 died of SIGSEGV over tcp on Open
 * MPI). Other ranks take part in the duplicate and the barrier only. */
#include "testutil.h"

#define N 1000

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    for (int round = 0; round < 3; round++) {
        MPI_Comm dup;
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
        int a[N], b[N];
        if (rank == 0) {
            for (int i = 0; i < N; i++)
                a[i] = round * N + i, b[i] = -(round * N + i);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Ssend(a, N, MPI_INT, 1, 7, dup));
            CHECK_MPI(MPI_Send(b, N, MPI_INT, 1, 8, dup));
            CHECK_MPI(MPI_Comm_free(&dup));
        } else if (rank == 1) {
            MPI_Request req[2];
            MPI_Status st[2];
            memset(a, 0, sizeof a);
            memset(b, 0, sizeof b);
            CHECK_MPI(MPI_Irecv(a, N, MPI_INT, 0, 7, dup, &req[0]));
            CHECK_MPI(MPI_Irecv(b, N, MPI_INT, 0, 8, dup, &req[1]));
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK(dup == MPI_COMM_NULL, "MPI_Comm_free left the handle set");
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Waitall(2, req, st));
            for (int k = 0; k < 2; k++) {
                int c = -1;
                CHECK_MPI(MPI_Get_count(&st[k], MPI_INT, &c));
                CHECK(c == N && st[k].MPI_SOURCE == 0 && st[k].MPI_TAG == 7 + k,
                      "round %d receive %d: count %d source %d tag %d", round, k, c, st[k].MPI_SOURCE,
                      st[k].MPI_TAG);
            }
            for (int i = 0; i < N; i++) {
                CHECK(a[i] == round * N + i, "round %d: a[%d] is %d", round, i, a[i]);
                CHECK(b[i] == -(round * N + i), "round %d: b[%d] is %d", round, i, b[i]);
            }
        } else {
            CHECK_MPI(MPI_Comm_free(&dup));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        }
    }
    test_finish("p2p_comm_free_pending");
    return 0;
}
