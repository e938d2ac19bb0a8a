/* Atomicity and mutual exclusion through a split window (every
 * accumulate-type operation to one target uses one internal window, since
 * MPI's atomicity holds within one window).
 *
 * 1. T threads x P ranks MPI_Fetch_and_op(SUM, 1) on one counter at rank 0
 *    in a lock_all epoch: the final value is exact, and the fetched values
 *    are exactly 0 .. total-1 (each seen once: no lost or doubled update).
 * 2. The same threads MPI_Accumulate and MPI_Get_accumulate (SUM) into an
 *    array, and MPI_Compare_and_swap claims slots: sums exact, each slot
 *    claimed by exactly one caller.
 * 3. Exclusive lock mutual exclusion across ranks: a non-atomic
 *    get-increment-put of a counter under MPI_Win_lock(EXCLUSIVE) from
 *    every rank loses no update. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NT    4
#define NOPS  200
#define NACC  8
#define NSLOT 64

static int me, np;
static int cas_ok = 1; /* see main */
static MPI_Win win;         /* long counters at rank 0: [0] fetch_and_op, [1..NACC] accumulate, then slots */
static long *mem;
static long fetched[NT][NOPS];
static int claimed[NT];

static void *fop_worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    long one = 1;
    for (int i = 0; i < NOPS; i++) {
        CHECK_MPI(MPI_Fetch_and_op(&one, &fetched[t][i], MPI_LONG, 0, 0, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    long vals[NACC], old[NACC];
    for (int k = 0; k < NACC; k++)
        vals[k] = k + 1;
    for (int i = 0; i < NOPS / 4; i++) {
        CHECK_MPI(MPI_Accumulate(vals, NACC, MPI_LONG, 0, 1, NACC, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Get_accumulate(vals, NACC, MPI_LONG, old, NACC, MPI_LONG, 0, 1, NACC, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_flush(0, win));
    }
    /* Claim free slots: 0 -> my id; a slot goes to exactly one caller. */
    long id = me * NT + t + 1, zero = 0, was;
    for (int s = 0; s < NSLOT && cas_ok; s++) {
        CHECK_MPI(MPI_Compare_and_swap(&id, &zero, &was, MPI_LONG, 0, 1 + NACC + s, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        if (was == 0)
            claimed[t]++;
    }
    return NULL;
}

static int cmp_long(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static void atomics(void)
{
    test_step = "fetch_and_op / accumulate / compare_and_swap";
    const int n = (1 + NACC + NSLOT + 1) & ~1; /* 16-byte multiple: see rma_alloc for the host bug */
    CHECK_MPI(MPI_Win_allocate((MPI_Aint)(n * sizeof(long)), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &mem, &win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    memset(mem, 0, (size_t)n * sizeof(long));
    CHECK_MPI(MPI_Win_unlock(me, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, fop_worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    long total = (long)np * NT * NOPS;
    long *all = me == 0 ? malloc((size_t)total * sizeof(long)) : NULL;
    CHECK(me != 0 || all != NULL, "malloc");
    CHECK_MPI(MPI_Gather(fetched, NT * NOPS, MPI_LONG, all, NT * NOPS, MPI_LONG, 0, MPI_COMM_WORLD));
    int mine = 0;
    for (int t = 0; t < NT; t++)
        mine += claimed[t];
    int claims = 0;
    CHECK_MPI(MPI_Reduce(&mine, &claims, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    if (me == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK(mem[0] == total, "counter is %ld after %ld fetch-and-adds", mem[0], total);
        qsort(all, (size_t)total, sizeof(long), cmp_long);
        for (long i = 0; i < total; i++)
            CHECK(all[i] == i, "fetched values: position %ld holds %ld (lost or doubled update)", i, all[i]);
        long per = (long)np * NT * (NOPS / 4) * 2; /* Accumulate + Get_accumulate */
        for (int k = 0; k < NACC; k++)
            CHECK(mem[1 + k] == per * (k + 1), "accumulate element %d is %ld, expected %ld", k, mem[1 + k],
                  per * (k + 1));
        CHECK(!cas_ok || claims == NSLOT, "%d compare-and-swap claims for %d slots", claims, NSLOT);
        for (int s = 0; s < NSLOT && cas_ok; s++)
            CHECK(mem[1 + NACC + s] >= 1 && mem[1 + NACC + s] <= np * NT, "slot %d holds %ld", s, mem[1 + NACC + s]);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    free(all);
    CHECK_MPI(MPI_Win_free(&win));
}

/* Exclusive locks: non-atomic read-modify-write, no update lost. */
static void exclusive(void)
{
    test_step = "exclusive lock mutual exclusion";
    long *c;
    CHECK_MPI(MPI_Win_allocate(2 * sizeof(long), sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &c, &win));
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
    *c = 0;
    CHECK_MPI(MPI_Win_unlock(me, win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    const int rounds = 100;
    for (int i = 0; i < rounds; i++) {
        long v = -1;
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        CHECK_MPI(MPI_Get(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_flush(0, win));
        v++;
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, 0, 0, 1, MPI_LONG, win));
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == 0) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        CHECK(*c == (long)np * rounds, "counter %ld after %d locked increments", *c, np * rounds);
        CHECK_MPI(MPI_Win_unlock(0, win));
    }
    CHECK_MPI(MPI_Win_free(&win));
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_below_multiple(provided, "rma_atomic");
    test_watchdog("rma_atomic", 100);
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    /* Open MPI 4.1.4 (Debian) segfaults in MPI_Compare_and_swap on a
     * one-node window (osc/rdma over btl/vader's emulated atomics,
     * mca_btl_vader_send), with one thread and without the shim; --mca osc
     * sm avoids it. Not something the shim can mend: skipped there, said. */
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len;
    MPI_Get_library_version(lib, &len);
    if (strstr(lib, "Open MPI v4.")) {
        cas_ok = 0;
        if (me == 0)
            fprintf(stderr, "rma_atomic: MPI_Compare_and_swap not tested on %.12s (host segfault, see source)\n", lib);
    }
    atomics();
    exclusive();
    test_watchdog("rma_atomic", 0);
    test_finish("rma_atomic");
    return 0;
}
