/* A buffered send completes at once and its transfer later, so its sender
 * may enter a collective call while the receiver has not yet taken the
 * message, and the receiver takes it before entering the same call: the
 * transfer must move while the sender is inside the collective (over a
 * lane, a large message's rendezvous needs the sender's progress). Each
 * case: rank 0 bsends 256 KiB to rank 1 and enters the collective; rank 1
 * waits 0.2 s, receives and checks the data, then enters it. Collectives:
 * MPI_Comm_dup, MPI_Comm_split, MPI_Win_create, MPI_Barrier. The same
 * holds for any host call that waits for another process: MPI_Win_fence;
 * MPI_Win_start/complete against rank 1's post; MPI_Win_lock of rank 1's
 * window while rank 1 holds it (it unlocks after the receive);
 * MPI_Comm_create_group of ranks 0 and 1; MPI_File_open; and last
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

    test_step = "MPI_Barrier";
    bsend_then(3);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "MPI_Win_fence";
    bsend_then(4);
    CHECK_MPI(MPI_Win_fence(0, w));
    CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, w));

    MPI_Group world_group, g0, g1, g01;
    int r0 = 0, r1 = 1, r01[2] = { 0, 1 };
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
    CHECK_MPI(MPI_Group_incl(world_group, 1, &r0, &g0));
    CHECK_MPI(MPI_Group_incl(world_group, 1, &r1, &g1));
    CHECK_MPI(MPI_Group_incl(world_group, 2, r01, &g01));

    test_step = "MPI_Win_start and MPI_Win_complete";
    bsend_then(5);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_start(g1, 0, w));
        CHECK_MPI(MPI_Win_complete(w));
    } else if (rank == 1) {
        CHECK_MPI(MPI_Win_post(g0, 0, w));
        CHECK_MPI(MPI_Win_wait(w));
    }

    test_step = "MPI_Win_lock";
    if (rank == 1) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, w));
        CHECK_MPI(MPI_Send(NULL, 0, MPI_INT, 0, 99, MPI_COMM_WORLD));
    } else if (rank == 0) {
        CHECK_MPI(MPI_Recv(NULL, 0, MPI_INT, 1, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    }
    bsend_then(6);
    if (rank == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 1, 0, w));
        CHECK_MPI(MPI_Win_unlock(1, w));
    } else if (rank == 1) {
        CHECK_MPI(MPI_Win_unlock(1, w));
    }
    CHECK_MPI(MPI_Win_free(&w));

    test_step = "MPI_Comm_create_group";
    bsend_then(7);
    if (rank < 2) {
        CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, g01, 7, &c));
        int n = 0;
        CHECK_MPI(MPI_Comm_size(c, &n));
        CHECK(n == 2, "MPI_Comm_create_group of 2 ranks made a communicator of %d", n);
        CHECK_MPI(MPI_Comm_free(&c));
    }
    MPI_Group_free(&g0);
    MPI_Group_free(&g1);
    MPI_Group_free(&g01);
    MPI_Group_free(&world_group);

    test_step = "MPI_File_open";
    char path[128];
    long pid = (long)getpid();
    CHECK_MPI(MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD));
    snprintf(path, sizeof path, "/tmp/p2p_bsend_progress.%ld", pid);
    bsend_then(8);
    MPI_File f;
    CHECK_MPI(MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_RDWR | MPI_MODE_DELETE_ON_CLOSE,
                            MPI_INFO_NULL, &f));
    CHECK_MPI(MPI_File_close(&f));

    test_step = "MPI_Buffer_detach and MPI_Finalize";
    bsend_then(9);
    void *b;
    int bs;
    CHECK_MPI(MPI_Buffer_detach(&b, &bs));
    free(bbuf);
    free(msg);
    test_finish("p2p_bsend_progress");
    return 0;
}
