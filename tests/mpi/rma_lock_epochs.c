/* Lock epochs on a window the shim splits (MPI_Win_create: one internal
 * window per VCI by default): exclusive epochs exclude each other and the
 * target's own loads and stores, shared epochs meet, whichever internal
 * window the operations are routed to, and flush, flush_all and Win_sync
 * inside an epoch to one target succeed.
 *
 * Every rank's memory holds two counters: [0] raised by read-modify-write
 * in an exclusive epoch (Get, flush, Put of the value + 1), [1] by
 * MPI_Accumulate in a shared epoch. Each rank runs NT threads; thread i
 * takes the targets t with t % NT == i (a process holds one lock per
 * target at a time), ITERS rounds each. On its own rank the exclusive epoch
 * uses loads and stores instead. At the end every counter is np * ITERS:
 * a lost update means two exclusive epochs overlapped. The threads of a
 * process take turns for whole epochs (a mutex), while the processes'
 * epochs overlap: Open MPI 4.1's osc/rdma counts a window's passive epochs
 * with an increment outside its lock in MPI_Win_lock (the decrement in
 * MPI_Win_unlock is inside), so two threads of a process locking or
 * unlocking one window at the same moment can lose a count, and a flush
 * then fails with MPI_ERR_RMA_SYNC without the shim too (seen in CI).
 *
 * Then, while thread 1 opens and closes epochs to rank 1 whose operations
 * go beyond window 0, thread 0 calls MPI_Win_flush_all and MPI_Win_sync in
 * its own epoch to rank 0, again and again: they succeed whichever of the
 * other thread's epochs they meet. Thread 0 opens its epoch before thread 1
 * starts and closes it after thread 1 is done, for the same reason. */
#include <pthread.h>
#include <stdint.h>

#include "testutil.h"

#define NT    2
#define ITERS 20

static int me, np;
static MPI_Win win;
static long *mem;

static pthread_mutex_t epoch_mu = PTHREAD_MUTEX_INITIALIZER;

static void raise_exclusive(int t)
{
    pthread_mutex_lock(&epoch_mu);
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
    if (t == me) {
        CHECK_MPI(MPI_Win_sync(win));
        long v = ((volatile long *)mem)[0];
        ((volatile long *)mem)[0] = v + 1;
        CHECK_MPI(MPI_Win_sync(win));
    } else {
        long v = -1;
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, t, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(t, win));
        CHECK(v >= 0 && v < (long)np * ITERS, "target %d: counter read %ld", t, v);
        v++;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, t, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_sync(win));
        CHECK_MPI(MPI_Win_flush_all(win));
    }
    CHECK_MPI(MPI_Win_unlock(t, win));
    pthread_mutex_unlock(&epoch_mu);
}

static void raise_shared(int t)
{
    pthread_mutex_lock(&epoch_mu);
    long one = 1, seen = -1, none = 0;
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, t, 0, win));
    CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, 1, 1, MPI_LONG, MPI_SUM, win));
    CHECK_MPI(MPI_Win_flush_local(t, win));
    CHECK_MPI(MPI_Fetch_and_op(&none, &seen, MPI_LONG, t, 1, MPI_NO_OP, win));
    CHECK_MPI(MPI_Win_flush(t, win));
    CHECK(seen >= 1 && seen <= (long)np * ITERS, "target %d: shared counter read %ld", t, seen);
    CHECK_MPI(MPI_Win_unlock(t, win));
    pthread_mutex_unlock(&epoch_mu);
}

#define RACES 200

static pthread_barrier_t race_start, race_end;

static void *race_worker(void *arg)
{
    long none = 0, seen;
    if ((intptr_t)arg == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        pthread_barrier_wait(&race_start);
        for (int i = 0; i < RACES; i++) {
            CHECK_MPI(MPI_Win_flush_all(win));
            CHECK_MPI(MPI_Win_sync(win));
        }
        pthread_barrier_wait(&race_end);
        CHECK_MPI(MPI_Win_unlock(0, win));
    } else {
        pthread_barrier_wait(&race_start);
        for (int i = 0; i < RACES; i++) {
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win));
            CHECK_MPI(MPI_Fetch_and_op(&none, &seen, MPI_LONG, 1, 1, MPI_NO_OP, win));
            CHECK_MPI(MPI_Win_unlock(1, win));
        }
        pthread_barrier_wait(&race_end);
    }
    return NULL;
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < ITERS; i++)
        for (int t = id; t < np; t += NT) {
            raise_exclusive(t);
            raise_shared(t);
        }
    return NULL;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("rma_lock_epochs", 120);
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    CHECK_MPI(MPI_Alloc_mem(2 * sizeof(long), MPI_INFO_NULL, &mem));
    mem[0] = mem[1] = 0;
    CHECK_MPI(MPI_Win_create(mem, 2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "epochs";
    test_run_threads(NT, worker);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "counters";
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
    CHECK(mem[0] == (long)np * ITERS, "exclusive counter %ld, expected %ld", mem[0], (long)np * ITERS);
    CHECK(mem[1] == (long)np * ITERS, "shared counter %ld, expected %ld", mem[1], (long)np * ITERS);
    CHECK_MPI(MPI_Win_unlock(me, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "flush_all beside closing epochs";
    CHECK(pthread_barrier_init(&race_start, NULL, NT) == 0 && pthread_barrier_init(&race_end, NULL, NT) == 0,
          "pthread_barrier_init");
    test_run_threads(NT, race_worker);
    pthread_barrier_destroy(&race_start);
    pthread_barrier_destroy(&race_end);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Free_mem(mem));
    test_finish("rma_lock_epochs");
    return 0;
}
