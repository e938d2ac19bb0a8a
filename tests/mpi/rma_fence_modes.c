/* Fences on a window the shim splits, and the other synchronizations
 * after them. Under MPISHIM_WIN_FENCE=host (the default) a fence is the
 * host's fence on the user's window alone, and the internal windows sit in
 * a lock_all(MPI_MODE_NOCHECK) epoch of the shim's between fences; this
 * checks what MPI promises of a fence all the same, and that the program can
 * leave fences for locks, PSCW and lock_all and come back.
 *
 * Window memory per rank: slot[o] for origin o's Put, then an accumulate
 * counter, a value published by local stores, and a counter for locks.
 *   1. Fence rounds, NT threads per rank making the operations (so Puts and
 *      Gets are routed beyond window 0 too): every origin Puts its round
 *      number into its slot on every target and accumulates 1 there; after
 *      the fence every slot and counter is exact. Then each rank stores a
 *      new value locally, fences, and every rank Gets it from every target:
 *      after the next fence the Gets hold it.
 *   2. After a plain fence (no MPI_MODE_NOSUCCEED), exclusive lock epochs
 *      (Accumulate 1) from every rank but the last, while the last rank makes
 *      no window call at all and waits in a barrier: its fences' epoch must
 *      not hold up the others' exclusive locks of its memory (they go to
 *      every rank, the last one included).
 *   3. A PSCW epoch: every rank Puts into its slot on every other.
 *   4. Fences again, ending with MPI_MODE_NOSUCCEED.
 *   5. A lock_all epoch with accumulates to every rank. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "testutil.h"

#define NT     2
#define ROUNDS 20

static int me, np;
static MPI_Win win;
static long *mem;
static long *got; /* phase 1 Gets, one per target */
static int round_no;

/* Layout (in longs) */
#define SLOT(o)   (o)
#define ACC       (np)
#define PUBLISHED (np + 1)
#define LOCKS     (np + 2)
#define NWORDS    (np + 3)

static void *put_acc(void *arg)
{
    long one = 1, v = round_no * 1000L + me;
    for (int t = (int)(intptr_t)arg; t < np; t += NT) {
        CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, t, SLOT(me), 1, MPI_LONG, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, ACC, 1, MPI_LONG, MPI_SUM, win));
    }
    return NULL;
}

static void *get_published(void *arg)
{
    for (int t = (int)(intptr_t)arg; t < np; t += NT)
        CHECK_MPI(MPI_Get(&got[t], 1, MPI_LONG, t, PUBLISHED, 1, MPI_LONG, win));
    return NULL;
}

static void check_slots(const char *when, long expect_base)
{
    for (int o = 0; o < np; o++)
        CHECK(mem[SLOT(o)] == expect_base + o, "%s: slot of origin %d holds %ld, expected %ld", when, o,
              mem[SLOT(o)], expect_base + o);
}

/* The accumulate counter is 0 when it starts. */
static void fence_rounds(int first_assert, int last_assert)
{
    CHECK_MPI(MPI_Win_fence(first_assert, win));
    for (round_no = 1; round_no <= ROUNDS; round_no++) {
        test_run_threads(NT, put_acc);
        CHECK_MPI(MPI_Win_fence(0, win));
        check_slots("after the fence", round_no * 1000L);
        CHECK(mem[ACC] == (long)round_no * np, "round %d: accumulate counter %ld, expected %ld", round_no, mem[ACC],
              (long)round_no * np);
        mem[PUBLISHED] = round_no * 7L + me;
        CHECK_MPI(MPI_Win_fence(0, win));
        for (int t = 0; t < np; t++)
            got[t] = -1;
        test_run_threads(NT, get_published);
        CHECK_MPI(MPI_Win_fence(round_no == ROUNDS ? last_assert : 0, win));
        for (int t = 0; t < np; t++)
            CHECK(got[t] == round_no * 7L + t, "round %d: Get from %d returned %ld, expected %ld", round_no, t,
                  got[t], round_no * 7L + t);
    }
}

/* One thread: Open MPI 4.1's osc/rdma counts a window's passive epochs
 * with an increment outside its lock in MPI_Win_lock, so threads locking
 * one window at once can lose a count (and later synchronizations fail
 * without the shim too). rma_lock_epochs has the threads. */
static void lock_targets(void)
{
    long one = 1;
    for (int t = 0; t < np; t++) {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, t, 0, win));
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, LOCKS, 1, MPI_LONG, MPI_SUM, win));
        CHECK_MPI(MPI_Win_unlock(t, win));
    }
}

static long read_own(int word)
{
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
    CHECK_MPI(MPI_Win_sync(win));
    long v = ((volatile long *)mem)[word];
    CHECK_MPI(MPI_Win_unlock(me, win));
    return v;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("rma_fence_modes", 120);
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    CHECK_MPI(MPI_Alloc_mem((MPI_Aint)NWORDS * (MPI_Aint)sizeof(long), MPI_INFO_NULL, &mem));
    got = calloc((size_t)np, sizeof *got);
    CHECK(got != NULL, "calloc");
    for (int i = 0; i < NWORDS; i++)
        mem[i] = 0;
    CHECK_MPI(MPI_Win_create(mem, (MPI_Aint)NWORDS * (MPI_Aint)sizeof(long), sizeof(long), MPI_INFO_NULL,
                             MPI_COMM_WORLD, &win));

    test_step = "fence rounds";
    fence_rounds(MPI_MODE_NOPRECEDE, 0);

    /* No MPI_MODE_NOSUCCEED above: the fences' epoch is still the shim's
     * when the locks come. The last rank stays out of the window. */
    test_step = "exclusive locks after fences, one rank away";
    if (me != np - 1)
        lock_targets();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (me == np - 1)
        lock_targets();
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    long locks = read_own(LOCKS);
    CHECK(locks == np, "lock counter %ld, expected %d", locks, np);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "PSCW after locks";
    MPI_Group world, others;
    CHECK_MPI(MPI_Win_get_group(win, &world));
    int self[1] = { me };
    CHECK_MPI(MPI_Group_excl(world, 1, self, &others));
    CHECK_MPI(MPI_Win_post(others, 0, win));
    CHECK_MPI(MPI_Win_start(others, 0, win));
    long v = 5000L + me;
    for (int t = 0; t < np; t++)
        if (t != me)
            CHECK_MPI(MPI_Put(&v, 1, MPI_LONG, t, SLOT(me), 1, MPI_LONG, win));
    CHECK_MPI(MPI_Win_complete(win));
    CHECK_MPI(MPI_Win_wait(win));
    mem[SLOT(me)] = 5000L + me;
    check_slots("after PSCW", 5000L);
    CHECK_MPI(MPI_Group_free(&others));
    CHECK_MPI(MPI_Group_free(&world));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "fence rounds after PSCW";
    mem[ACC] = 0;
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    fence_rounds(MPI_MODE_NOPRECEDE, MPI_MODE_NOSUCCEED);
    CHECK(mem[ACC] == (long)ROUNDS * np, "accumulate counter %ld, expected %ld", mem[ACC], (long)ROUNDS * np);

    test_step = "lock_all after fences";
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Win_lock_all(0, win));
    long one = 1;
    for (int t = 0; t < np; t++)
        CHECK_MPI(MPI_Accumulate(&one, 1, MPI_LONG, t, LOCKS, 1, MPI_LONG, MPI_SUM, win));
    CHECK_MPI(MPI_Win_unlock_all(win));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    locks = read_own(LOCKS);
    CHECK(locks == 2L * np, "lock counter %ld after lock_all, expected %d", locks, 2 * np);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    CHECK_MPI(MPI_Win_free(&win));
    CHECK_MPI(MPI_Free_mem(mem));
    free(got);
    test_finish("rma_fence_modes");
    return 0;
}
