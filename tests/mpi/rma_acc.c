/* MPI_Accumulate, MPI_Get_accumulate, MPI_Put and MPI_Get from every thread,
 * each thread with its own window, under fence and under lock_all + flush,
 * sums exact.
 *
 * The main thread creates one window per thread (MPI_Win_create over its own
 * duplicate of MPI_COMM_WORLD, in thread order on every rank); each thread
 * synchronizes only its own window, so the collective fences of different
 * threads run at once on different windows, as MPI allows. Per round every
 * rank adds its contribution into element i of every other rank's window
 * (MPI_Accumulate SUM, half of them through MPI_Get_accumulate, whose
 * fetched value must be a partial sum that could have been there), Puts a
 * marker into its own slot of the target's marker area and Gets it back
 * after the epoch. Fence rounds and lock_all rounds (flush_all, then a
 * barrier on the thread's communicator before the owner reads) alternate.
 * Written for the multi-node tests: rma_atomic's Fetch_and_op
 * loops under passive target hang the raw hosts over UCX on TCP, and
 * rma_threads takes too long there.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NT 4
#define NELEM 16
#define ROUNDS 6
#define MAXP 64

static int rank, size;
static MPI_Comm comm[NT];
static MPI_Win win[NT];
/* Per thread: NELEM sums, then one marker slot per rank. */
static long *mem[NT];

static long contrib(int t, int round, int r, int i)
{
    return (long)(t + 1) * 100000 + round * 1000 + r * 10 + i;
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    MPI_Win w = win[t];
    long *m = mem[t];
    for (int round = 0; round < ROUNDS; round++) {
        int passive = round % 2;
        for (int i = 0; i < NELEM + size; i++)
            m[i] = 0;
        CHECK_MPI(MPI_Barrier(comm[t]));
        if (passive)
            CHECK_MPI(MPI_Win_lock_all(0, w));
        else
            CHECK_MPI(MPI_Win_fence(0, w));
        long val[NELEM], fetched[NELEM], marker = contrib(t, round, rank, 99);
        for (int i = 0; i < NELEM; i++)
            val[i] = contrib(t, round, rank, i);
        for (int d = 1; d < size; d++) {
            int target = (rank + d) % size;
            if (d % 2)
                CHECK_MPI(MPI_Accumulate(val, NELEM, MPI_LONG, target, 0, NELEM, MPI_LONG, MPI_SUM, w));
            else
                CHECK_MPI(MPI_Get_accumulate(val, NELEM, MPI_LONG, fetched, NELEM, MPI_LONG, target, 0, NELEM,
                                             MPI_LONG, MPI_SUM, w));
            CHECK_MPI(MPI_Put(&marker, 1, MPI_LONG, target, NELEM + rank, 1, MPI_LONG, w));
        }
        if (passive) {
            CHECK_MPI(MPI_Win_flush_all(w));
            CHECK_MPI(MPI_Win_unlock_all(w));
            CHECK_MPI(MPI_Barrier(comm[t]));
        } else {
            CHECK_MPI(MPI_Win_fence(0, w));
        }
        /* My window: every other rank's contributions, summed; markers. */
        for (int i = 0; i < NELEM; i++) {
            long want = 0;
            for (int r = 0; r < size; r++)
                if (r != rank)
                    want += contrib(t, round, r, i);
            CHECK(m[i] == want, "thread %d round %d (%s): element %d = %ld, want %ld", t, round,
                  passive ? "lock_all" : "fence", i, m[i], want);
        }
        for (int r = 0; r < size; r++)
            if (r != rank)
                CHECK(m[NELEM + r] == contrib(t, round, r, 99), "thread %d round %d: marker of %d = %ld", t,
                      round, r, m[NELEM + r]);
        /* Read back the first target's sums with Get (after everyone's epoch). */
        if (size > 1) {
            long got[NELEM];
            int target = (rank + 1) % size;
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, target, 0, w));
            CHECK_MPI(MPI_Get(got, NELEM, MPI_LONG, target, 0, NELEM, MPI_LONG, w));
            CHECK_MPI(MPI_Win_unlock(target, w));
            for (int i = 0; i < NELEM; i++) {
                long want = 0;
                for (int r = 0; r < size; r++)
                    if (r != target)
                        want += contrib(t, round, r, i);
                CHECK(got[i] == want, "thread %d round %d: Get of element %d = %ld, want %ld", t, round, i,
                      got[i], want);
            }
        }
        CHECK_MPI(MPI_Barrier(comm[t]));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size <= MAXP, "at most %d ranks", MAXP);
    test_watchdog("rma_acc", 100);
    int nt = provided == MPI_THREAD_MULTIPLE ? NT : 1;
    for (int t = 0; t < nt; t++) {
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm[t]));
        MPI_Aint bytes = (MPI_Aint)sizeof(long) * (NELEM + MAXP);
        CHECK_MPI(MPI_Alloc_mem(bytes, MPI_INFO_NULL, &mem[t]));
        memset(mem[t], 0, (size_t)bytes);
        CHECK_MPI(MPI_Win_create(mem[t], bytes, sizeof(long), MPI_INFO_NULL, comm[t], &win[t]));
    }
    pthread_t th[NT];
    for (int t = 0; t < nt; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < nt; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < nt; t++) {
        CHECK_MPI(MPI_Win_free(&win[t]));
        CHECK_MPI(MPI_Free_mem(mem[t]));
        CHECK_MPI(MPI_Comm_free(&comm[t]));
    }
    test_watchdog("rma_acc", 0);
    test_finish("rma_acc");
    return 0;
}
