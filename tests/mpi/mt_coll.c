/* Blocking collectives from every thread at once, each thread on its own
 * communicator (MPI_THREAD_MULTIPLE).
 *
 * MPI allows concurrent collectives on different communicators; on one
 * communicator they must be called by one thread per rank, in the same
 * order on every rank. Here the main thread makes one MPI_Comm_dup of
 * MPI_COMM_WORLD per thread (in thread order, so every rank makes them in
 * the same order), then NTHREADS threads run NITER rounds at once on their
 * own communicator: MPI_Bcast (root rotating; every 8th round 64 KiB, past
 * the hosts' eager limits), MPI_Allreduce, MPI_Reduce (root rotating),
 * MPI_Allgather, MPI_Alltoall, MPI_Gather, MPI_Scatter, MPI_Scan and
 * MPI_Barrier, every result checked against what each rank contributed
 * (values depend on thread, round and rank, so a message of another thread's
 * collective, or of another round, shows up as a wrong value).
 *
 * Written for the multi-node tests, where the threads' collectives
 * cross TCP between nodes; run like every test here on one node too.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NTHREADS 4
#define NITER 40
#define BIG (64 * 1024 / 4) /* ints in a large broadcast */

static int rank, size;
static MPI_Comm comm[NTHREADS];

/* What rank r contributes in round it of thread t, element i. */
static int val(int t, int it, int r, int i)
{
    return (t + 1) * 1000003 + it * 7919 + r * 101 + i;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    MPI_Comm c = comm[t];
    int *big = malloc(sizeof(int) * BIG);
    int *all = malloc(sizeof(int) * (size_t)size * 2);
    int *mine = malloc(sizeof(int) * (size_t)size * 2);
    CHECK(big && all && mine, "malloc");
    for (int it = 0; it < NITER; it++) {
        int root = (it + t) % size;
        /* Bcast: the root's values. */
        int n = (it % 8 == 7) ? BIG : 4;
        for (int i = 0; i < n; i++)
            big[i] = rank == root ? val(t, it, root, i) : -1;
        CHECK_MPI(MPI_Bcast(big, n, MPI_INT, root, c));
        for (int i = 0; i < n; i++)
            CHECK(big[i] == val(t, it, root, i), "thread %d round %d: bcast[%d] = %d", t, it, i, big[i]);

        /* Allreduce and Reduce: sums over ranks, two elements. */
        long in[2] = {val(t, it, rank, 0), val(t, it, rank, 1)}, out[2] = {0, 0}, want[2] = {0, 0};
        for (int r = 0; r < size; r++) {
            want[0] += val(t, it, r, 0);
            want[1] += val(t, it, r, 1);
        }
        CHECK_MPI(MPI_Allreduce(in, out, 2, MPI_LONG, MPI_SUM, c));
        CHECK(out[0] == want[0] && out[1] == want[1], "thread %d round %d: allreduce %ld %ld, want %ld %ld",
              t, it, out[0], out[1], want[0], want[1]);
        out[0] = out[1] = 0;
        CHECK_MPI(MPI_Reduce(in, out, 2, MPI_LONG, MPI_SUM, root, c));
        if (rank == root)
            CHECK(out[0] == want[0] && out[1] == want[1], "thread %d round %d: reduce", t, it);

        /* Allgather and Gather: every rank's two values in rank order. */
        int two[2] = {val(t, it, rank, 0), val(t, it, rank, 1)};
        CHECK_MPI(MPI_Allgather(two, 2, MPI_INT, all, 2, MPI_INT, c));
        for (int r = 0; r < size; r++)
            CHECK(all[2 * r] == val(t, it, r, 0) && all[2 * r + 1] == val(t, it, r, 1),
                  "thread %d round %d: allgather from %d", t, it, r);
        memset(all, 0, sizeof(int) * (size_t)size * 2);
        CHECK_MPI(MPI_Gather(two, 2, MPI_INT, all, 2, MPI_INT, root, c));
        if (rank == root)
            for (int r = 0; r < size; r++)
                CHECK(all[2 * r] == val(t, it, r, 0), "thread %d round %d: gather from %d", t, it, r);

        /* Alltoall: element j of rank r goes to rank j. */
        for (int j = 0; j < size; j++)
            mine[j] = val(t, it, rank, j);
        CHECK_MPI(MPI_Alltoall(mine, 1, MPI_INT, all, 1, MPI_INT, c));
        for (int r = 0; r < size; r++)
            CHECK(all[r] == val(t, it, r, rank), "thread %d round %d: alltoall from %d", t, it, r);

        /* Scatter: the root's element r to rank r. */
        int one = -1;
        CHECK_MPI(MPI_Scatter(mine, 1, MPI_INT, &one, 1, MPI_INT, root, c));
        CHECK(one == val(t, it, root, rank), "thread %d round %d: scatter got %d", t, it, one);

        /* Scan: prefix sum over ranks 0..rank. */
        long s = 0, sw = 0;
        for (int r = 0; r <= rank; r++)
            sw += val(t, it, r, 0);
        CHECK_MPI(MPI_Scan(&in[0], &s, 1, MPI_LONG, MPI_SUM, c));
        CHECK(s == sw, "thread %d round %d: scan %ld, want %ld", t, it, s, sw);

        CHECK_MPI(MPI_Barrier(c));
    }
    free(big);
    free(all);
    free(mine);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    test_watchdog("mt_coll", 100);
    int nt = provided == MPI_THREAD_MULTIPLE ? NTHREADS : 1;
    for (int t = 0; t < nt; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm[t]));
    pthread_t th[NTHREADS];
    for (int t = 0; t < nt; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < nt; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < nt; t++)
        CHECK_MPI(MPI_Comm_free(&comm[t]));
    test_watchdog("mt_coll", 0);
    test_finish("mt_coll");
    return 0;
}
