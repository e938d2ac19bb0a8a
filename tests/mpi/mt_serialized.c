/* Point-to-point and blocking collectives from four threads at once.
 *
 * Run with MPISHIM_HOST_THREAD=serialized the shim asks the host for less
 * than MPI_THREAD_MULTIPLE, still gives the program MULTIPLE, and must
 * serialize every host call itself without ever blocking inside the host
 * while it holds that serialization (a blocking MPI_Allreduce in one thread
 * must not stop another thread's receive, which its peer's allreduce may
 * depend on).  The same program is also run with the default host level,
 * and with per-VCI progress.
 *
 * NTHREADS threads per rank; thread t has its own duplicate of
 * MPI_COMM_WORLD (made before the threads start: collectives on one
 * communicator must not run concurrently).  Every round, each thread:
 *   - blocking MPI_Sendrecv around the ring on MPI_COMM_WORLD (tag t),
 *   - a window of MPI_Irecv/MPI_Isend around the ring on its duplicate,
 *     completed with MPI_Waitall,
 *   - MPI_Allreduce (MPI_SUM, MPI_MAX) on its duplicate,
 *   - every few rounds MPI_Bcast from a rotating root and MPI_Barrier,
 *   - blocking MPI_Recv/MPI_Send pair on its duplicate, ordered by rank
 *     parity so that it cannot deadlock.
 * Every result, payload, status source/tag/count is checked.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NTHREADS 4
#define NROUND 12
#define WIN 4
#define VLEN 6
#define BIG 4096 /* ints: every 8th window message is 16 KB */

static int rank, size, left, right;
static MPI_Comm tcomm[NTHREADS];

static int val(int src, int t, int round, int i, int j)
{
    return (int)((uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(t * 4096 + round * 16 + i) * 0x85EBCA77u ^
                 (uint32_t)j * 2654435761u);
}

static void check_status(const MPI_Status *st, int src, int tag, int n, const char *what, int t, int round)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag,
          "thread %d round %d %s: status source %d tag %d, expected %d/%d", t, round, what, st->MPI_SOURCE,
          st->MPI_TAG, src, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == n, "thread %d round %d %s: count %d, expected %d", t, round, what, cnt, n);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    MPI_Comm c = tcomm[t];
    int *sb = malloc(sizeof(int) * BIG * WIN), *rb = malloc(sizeof(int) * BIG * WIN);
    CHECK(sb && rb, "out of memory");

    for (int round = 0; round < NROUND; round++) {
        MPI_Status st;

        /* blocking Sendrecv on the shared MPI_COMM_WORLD, tag = thread */
        {
            int out[3] = {val(rank, t, round, 0, 0), val(rank, t, round, 0, 1), val(rank, t, round, 0, 2)};
            int in[3] = {-1, -1, -1};
            CHECK_MPI(MPI_Sendrecv(out, 3, MPI_INT, right, t, in, 3, MPI_INT, left, t, MPI_COMM_WORLD, &st));
            check_status(&st, left, t, 3, "Sendrecv", t, round);
            for (int j = 0; j < 3; j++)
                CHECK(in[j] == val(left, t, round, 0, j), "thread %d round %d Sendrecv: word %d is %d", t,
                      round, j, in[j]);
        }

        /* nonblocking window on the thread's duplicate */
        {
            MPI_Request rq[2 * WIN];
            MPI_Status sts[2 * WIN];
            for (int i = 0; i < WIN; i++) {
                int n = ((round * WIN + i) % 8 == 5) ? BIG : 1 + i;
                for (int j = 0; j < n; j++)
                    sb[i * BIG + j] = val(rank, t, round, 1 + i, j);
                rb[i * BIG] = -1;
                CHECK_MPI(MPI_Irecv(rb + i * BIG, BIG, MPI_INT, left, 10 + i, c, &rq[i]));
                CHECK_MPI(MPI_Isend(sb + i * BIG, n, MPI_INT, right, 10 + i, c, &rq[WIN + i]));
            }
            CHECK_MPI(MPI_Waitall(2 * WIN, rq, sts));
            for (int i = 0; i < WIN; i++) {
                int n = ((round * WIN + i) % 8 == 5) ? BIG : 1 + i;
                check_status(&sts[i], left, 10 + i, n, "window", t, round);
                for (int j = 0; j < n; j++)
                    CHECK(rb[i * BIG + j] == val(left, t, round, 1 + i, j),
                          "thread %d round %d window %d: word %d", t, round, i, j);
            }
        }

        /* blocking collectives on the thread's duplicate */
        {
            long in[VLEN] = {rank + 1, t, round, (long)rank * round, 1, rank}, out[VLEN];
            long expect[VLEN] = {
                (long)size * (size + 1) / 2,         (long)t * size, (long)round * size,
                (long)round * size * (size - 1) / 2, size,           (long)size * (size - 1) / 2};
            CHECK_MPI(MPI_Allreduce(in, out, VLEN, MPI_LONG, MPI_SUM, c));
            for (int j = 0; j < VLEN; j++)
                CHECK(out[j] == expect[j], "thread %d round %d: MPI_Allreduce(SUM)[%d] = %ld, expected %ld",
                      t, round, j, out[j], expect[j]);
            int mx = -1, mine = rank * 100 + t;
            CHECK_MPI(MPI_Allreduce(&mine, &mx, 1, MPI_INT, MPI_MAX, c));
            CHECK(mx == (size - 1) * 100 + t, "thread %d round %d: MPI_Allreduce(MAX) = %d", t, round, mx);
            if (round % 4 == t % 4) {
                int root = (round / 4) % size, b[5];
                for (int j = 0; j < 5; j++)
                    b[j] = rank == root ? val(root, t, round, 9, j) : -1;
                CHECK_MPI(MPI_Bcast(b, 5, MPI_INT, root, c));
                for (int j = 0; j < 5; j++)
                    CHECK(b[j] == val(root, t, round, 9, j), "thread %d round %d: MPI_Bcast word %d", t,
                          round, j);
                CHECK_MPI(MPI_Barrier(c));
            }
        }

        /* blocking Send/Recv on the duplicate, ordered by parity (even ranks send first) */
        {
            int x = val(rank, t, round, 7, 0), y = -1;
            if (rank % 2 == 0) {
                CHECK_MPI(MPI_Send(&x, 1, MPI_INT, right, 20, c));
                CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, left, 20, c, &st));
            } else {
                CHECK_MPI(MPI_Recv(&y, 1, MPI_INT, left, 20, c, &st));
                CHECK_MPI(MPI_Send(&x, 1, MPI_INT, right, 20, c));
            }
            check_status(&st, left, 20, 1, "Send/Recv", t, round);
            CHECK(y == val(left, t, round, 7, 0), "thread %d round %d Send/Recv: got %d", t, round, y);
        }
    }
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_serialized");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;
    for (int t = 0; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]));

    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create failed");
    for (int t = 0; t < NTHREADS; t++)
        CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");

    for (int t = 0; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_free(&tcomm[t]));
    test_finish("mt_serialized");
    return 0;
}
