/* Passive-target progress and dynamic windows.
 *
 * 1. Rank 0 is a target that only occasionally calls MPI (it sleeps 5 ms
 *    between looks at its memory, under a lock on itself). The other ranks
 *    lock it (shared and exclusive in turn) and their threads Put a slot,
 *    Get it back and Fetch_and_op a counter in the epoch, many times: every
 *    operation completes and the counter and slots are exact when rank 0
 *    sees the counter full.
 * 2. Dynamic window: each rank attaches a buffer, publishes its address;
 *    threads Put into the next rank's buffer in a lock_all epoch; then every
 *    rank detaches, attaches a second buffer and the round is repeated: the
 *    first buffer is untouched by the second round. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

#define NT    3
#define ITERS 40

static int me, np;
static MPI_Win win;

/* Target memory at rank 0: [0] counter, [1 + slot] per (rank, thread).
 * One thread's operations inside the main thread's lock epoch (a process
 * may hold one lock per target: the threads share it). */
typedef struct {
    int t, i;
} op_job;

static void *origin_worker(void *arg)
{
    const op_job *j = arg;
    long slot = 1 + (long)me * NT + j->t;
    long v = me * 1000 + j->t * 100 + j->i, back = -1, one = 1, old;
    CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, slot, 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(0, win));
    CHECK_MPI(MPI_Get(&back, 1, MPI_LONG, 0, slot, 1, MPI_LONG, win));
    CHECK_MPI(MPI_Fetch_and_op(&one, &old, MPI_LONG, 0, 0, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush(0, win));
    CHECK(back == v, "thread %d iteration %d: Get after flushed Put returned %ld, expected %ld", j->t, j->i, back, v);
    return NULL;
}

static void passive_progress(void)
{
    test_step = "passive target progress";
    long *mem;
    MPI_Aint n = 2 + (MPI_Aint)np * NT; /* even: a 16-byte multiple */
    n += n & 1;
    CHECK_MPI(MPI_Win_allocate(n * (MPI_Aint)sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    memset(mem, 0, (size_t)n * sizeof(long));
    CHECK_MPI(MPI_Win_unlock(me, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    long expect = (long)(np - 1) * NT * ITERS;
    if (me == 0) {
        /* A target busy elsewhere: it looks at its memory now and then. */
        long seen = 0;
        for (int looks = 0; seen < expect; looks++) {
            CHECK(looks < 20000, "target: counter stuck at %ld of %ld", seen, expect);
            usleep(5000);
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
            seen = mem[0];
            CHECK_MPI(MPI_Win_unlock(0, win));
        }
        CHECK(seen == expect, "counter %ld, expected %ld", seen, expect);
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        for (int r = 1; r < np; r++)
            for (int t = 0; t < NT; t++)
                CHECK(mem[1 + r * NT + t] == r * 1000 + t * 100 + ITERS - 1, "slot of rank %d thread %d holds %ld", r,
                      t, mem[1 + r * NT + t]);
        CHECK_MPI(MPI_Win_unlock(0, win));
    } else {
        for (int i = 0; i < ITERS; i++) {
            pthread_t th[NT];
            op_job jobs[NT];
            CHECK_MPI(MPI_Win_lock(i % 2 ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 0, 0, win));
            for (int t = 0; t < NT; t++) {
                jobs[t] = (op_job){ .t = t, .i = i };
                CHECK(pthread_create(&th[t], NULL, origin_worker, &jobs[t]) == 0, "pthread_create");
            }
            for (int t = 0; t < NT; t++)
                pthread_join(th[t], NULL);
            CHECK_MPI(MPI_Win_unlock(0, win));
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_free(&win));
}

typedef struct {
    int t;
    MPI_Aint addr; /* of the next rank's buffer */
    long round;
} dyn_job;

static void *dyn_worker(void *arg)
{
    dyn_job *j = arg;
    int next = (me + 1) % np;
    long v = j->round * 100 + me * 10 + j->t + 1;
    CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, next, MPI_Aint_add(j->addr, j->t * (MPI_Aint)sizeof(long)), 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_flush(next, win));
    return NULL;
}

static void dynamic_round(long *buf, long round)
{
    MPI_Aint mine, *addrs = malloc((size_t)np * sizeof *addrs);
    CHECK(addrs != NULL, "malloc");
    CHECK_MPI(MPI_Win_attach(win, buf, NT * (MPI_Aint)sizeof(long)));
    CHECK_MPI(MPI_Get_address(buf, &mine));
    CHECK_MPI(MPI_Allgather(&mine, 1, MPI_AINT, addrs, 1, MPI_AINT, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    pthread_t th[NT];
    dyn_job jobs[NT];
    for (int t = 0; t < NT; t++) {
        jobs[t] = (dyn_job){ .t = t, .addr = addrs[(me + 1) % np], .round = round };
        CHECK(pthread_create(&th[t], NULL, dyn_worker, &jobs[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int prev = (me + np - 1) % np;
    for (int t = 0; t < NT; t++)
        CHECK(buf[t] == round * 100 + prev * 10 + t + 1, "dynamic round %ld: element %d holds %ld", round, t, buf[t]);
    CHECK_MPI(MPI_Win_detach(win, buf));
    free(addrs);
}

static void dynamic(void)
{
    test_step = "dynamic window attach/put/detach";
    long a[NT] = { 0 }, b[NT] = { 0 };
    CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    dynamic_round(a, 1);
    dynamic_round(b, 2);
    for (int t = 0; t < NT; t++)
        CHECK(a[t] != 0 && a[t] % 100 == b[t] % 100 && a[t] / 100 == 1,
              "detached buffer changed by round 2: element %d holds %ld", t, a[t]);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_below_multiple(provided, "rma_passive");
    test_watchdog("rma_passive", 100);
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    passive_progress();
    dynamic();
    test_watchdog("rma_passive", 0);
    test_finish("rma_passive");
    return 0;
}
