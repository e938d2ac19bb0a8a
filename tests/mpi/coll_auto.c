/* Blocking collectives while the processes of a communicator go from one
 * thread at a time in MPI to several, on some ranks only.
 *
 * Under MPISHIM_COLL=auto (the default) a communicator's blocking
 * collectives are the host's blocking calls while all its processes have
 * had one thread at a time in MPI, and their nonblocking twins from the
 * time the processes, asked together, find one that has not. A blocking and
 * a nonblocking collective do not match, so every member must switch at the
 * same call; a rank that switched alone would hang or mismatch here.
 *
 * Phase 1, one thread per rank: MPI_Allreduce on MPI_COMM_WORLD and
 * MPI_Bcast and MPI_Reduce on a duplicate, 150 rounds (past several
 * askings). Phase 2, rank 0 only has threads (rank 1 and the others stay
 * alone): a second thread waits in MPI_Recv for rank 1's message, which
 * rank 1 sends once it has received the main thread's, so two threads of
 * rank 0 are inside MPI at once. Phase 3:
 * the same collectives again, 150 rounds, and on a communicator split
 * after phase 2. With the argument "alone" phase 2 is left out.
 *
 * Checked: every result. tests/run.sh also checks, with MPISHIM_STATS=1,
 * which forms each rank made (all the host's when alone; both otherwise,
 * on every rank). */
#include "testutil.h"

#define ROUNDS 150

static int rank, size;

static void rounds(MPI_Comm dup, const char *phase)
{
    for (int i = 0; i < ROUNDS; i++) {
        int x = rank + i, sum = 0;
        CHECK_MPI(MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(sum == size * (size - 1) / 2 + size * i, "%s round %d: MPI_Allreduce gave %d", phase, i, sum);
        int root = i % size, v = rank == root ? 1000 + i : -1;
        CHECK_MPI(MPI_Bcast(&v, 1, MPI_INT, root, dup));
        CHECK(v == 1000 + i, "%s round %d: MPI_Bcast gave %d", phase, i, v);
        int mx = -1;
        CHECK_MPI(MPI_Reduce(&x, &mx, 1, MPI_INT, MPI_MAX, root, dup));
        CHECK(rank != root || mx == size - 1 + i, "%s round %d: MPI_Reduce gave %d", phase, i, mx);
    }
}

static MPI_Comm p2p;

static void *receiver(void *arg)
{
    int *got = arg;
    CHECK_MPI(MPI_Recv(got, 1, MPI_INT, 1, 5, p2p, MPI_STATUS_IGNORE));
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int alone = argc > 1 && strcmp(argv[1], "alone") == 0;

    MPI_Comm dup;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    rounds(dup, "phase 1");

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &p2p));
    if (!alone && rank == 0) {
        int got = 0, msg = 77;
        pthread_t th;
        CHECK(pthread_create(&th, NULL, receiver, &got) == 0, "pthread_create");
        usleep(100 * 1000); /* the receiver waits inside MPI_Recv by now */
        CHECK_MPI(MPI_Send(&msg, 1, MPI_INT, 1, 6, p2p));
        pthread_join(th, NULL);
        CHECK(got == 78, "MPI_Recv from rank 1 gave %d", got);
    } else if (!alone && rank == 1) {
        int msg = 0;
        CHECK_MPI(MPI_Recv(&msg, 1, MPI_INT, 0, 6, p2p, MPI_STATUS_IGNORE));
        msg++;
        CHECK_MPI(MPI_Send(&msg, 1, MPI_INT, 0, 5, p2p));
    }

    rounds(dup, "phase 3");
    MPI_Comm half;
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    int hsize = 0, one = 1, n = 0;
    MPI_Comm_size(half, &hsize);
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_MPI(MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, half));
        CHECK(n == hsize, "split round %d: MPI_Allreduce gave %d, expected %d", i, n, hsize);
        CHECK_MPI(MPI_Barrier(half));
    }
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK_MPI(MPI_Comm_free(&p2p));
    CHECK_MPI(MPI_Comm_free(&dup));
    test_finish("coll_auto");
    return 0;
}
