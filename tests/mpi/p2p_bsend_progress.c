/* A buffered send completes at once and its transfer later, so its sender
 * may enter a collective call while the receiver has not yet taken the
 * message, and the receiver takes it before entering the same call: the
 * transfer must move while the sender is inside the collective (over a
 * lane, a large message's rendezvous needs the sender's progress). Each
 * case: rank 0 bsends 256 KiB to rank 1 and enters the collective; rank 1
 * waits 0.2 s, receives and checks the data, then enters it. Collectives:
 * MPI_Comm_dup, MPI_Comm_split, MPI_Win_create, MPI_Barrier, and last
 * MPI_Buffer_detach then the barrier before MPI_Finalize. Other ranks only
 * take part in the collectives. */
#include "testutil.h"

#define N (64 * 1024) /* ints: 256 KiB */

static int rank, size;
static int *msg;

static void bsend_then(int k)
{
    if (rank == 0) {
        for (int i = 0; i < N; i++)
            msg[i] = k * N + i;
        CHECK_MPI(MPI_Bsend(msg, N, MPI_INT, 1, k, MPI_COMM_WORLD));
    } else if (rank == 1) {
        test_sleep_ms(200);
        MPI_Status st;
        int c = -1;
        memset(msg, 0, N * sizeof *msg);
        CHECK_MPI(MPI_Recv(msg, N, MPI_INT, 0, k, MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
        CHECK(c == N, "case %d: count %d, expected %d", k, c, N);
        for (int i = 0; i < N; i++)
            if (msg[i] != k * N + i) {
                CHECK(0, "case %d: element %d is %d, expected %d", k, i, msg[i], k * N + i);
                break;
            }
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("p2p_bsend_progress", 60);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    int bsize = N * (int)sizeof(int) + MPI_BSEND_OVERHEAD;
    char *bbuf = malloc((size_t)bsize);
    msg = malloc(N * sizeof *msg);
    CHECK(bbuf && msg, "out of memory");
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));

    MPI_Comm c;
    test_step = "MPI_Comm_dup";
    bsend_then(0);
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    CHECK_MPI(MPI_Comm_free(&c));

    test_step = "MPI_Comm_split";
    bsend_then(1);
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &c));
    CHECK_MPI(MPI_Comm_free(&c));

    test_step = "MPI_Win_create";
    MPI_Win w;
    int wbuf = 0;
    bsend_then(2);
    CHECK_MPI(MPI_Win_create(&wbuf, sizeof wbuf, sizeof wbuf, MPI_INFO_NULL, MPI_COMM_WORLD, &w));
    CHECK_MPI(MPI_Win_free(&w));

    test_step = "MPI_Barrier";
    bsend_then(3);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "MPI_Buffer_detach and MPI_Finalize";
    bsend_then(4);
    void *b;
    int bs;
    CHECK_MPI(MPI_Buffer_detach(&b, &bs));
    free(bbuf);
    free(msg);
    test_finish("p2p_bsend_progress");
    return 0;
}
