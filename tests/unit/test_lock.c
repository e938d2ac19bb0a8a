/* Unit tests of the locks of src/core/lock.h. msh_lock: try-lock fails
 * while the lock is held and succeeds once it is released; threads that
 * outnumber the cores (so that some spin out and sleep in the kernel) never
 * hold it at once, and every increment made under it survives; a holder
 * that sleeps while others queue up wakes them all in the end. msh_block
 * (the biased VCI lock): a thread's run earns the bias, another thread's
 * take or try-lock revokes it, and threads that alternate long runs (bias
 * granted and revoked over and over) with short ones never hold it at
 * once and lose no increment. No MPI needed. Replay with a seed: test_lock
 * SEED (default: the time). */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "core/lock.h"
#include "unit.h"

#define THREADS 8
#define ROUNDS 20000

static msh_lock lk = MSH_LOCK_INIT;
static long counter;             /* plain: the lock alone protects it */
static atomic_int inside;        /* threads inside the critical section */
static atomic_int overlaps;
static unsigned seed;

/* The critical section every case runs: alone inside, one increment. */
static void critical(int busy)
{
    if (atomic_fetch_add_explicit(&inside, 1, memory_order_relaxed) != 0)
        atomic_fetch_add_explicit(&overlaps, 1, memory_order_relaxed);
    for (volatile int k = 0; k < busy; k++)
        ;
    counter++;
    atomic_fetch_sub_explicit(&inside, 1, memory_order_relaxed);
}

static void *hammer(void *arg)
{
    unsigned s = seed ^ (unsigned)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        if ((s = s * 1103515245u + 12345u) >> 28 == 0) {
            while (!msh_lock_try(&lk))
                ;
        } else {
            msh_lock_take(&lk);
        }
        if (atomic_fetch_add_explicit(&inside, 1, memory_order_relaxed) != 0)
            atomic_fetch_add_explicit(&overlaps, 1, memory_order_relaxed);
        counter++;
        /* now and then a long hold, so that waiters give up spinning */
        if ((s >> 20) % 512 == 0) {
            struct timespec ts = { 0, 20000 };
            nanosleep(&ts, NULL);
        }
        atomic_fetch_sub_explicit(&inside, 1, memory_order_relaxed);
        msh_lock_give(&lk);
    }
    return NULL;
}

static void test_try(void)
{
    msh_lock l = MSH_LOCK_INIT;
    EXPECT(msh_lock_try(&l));
    EXPECT(!msh_lock_try(&l));
    msh_lock_give(&l);
    EXPECT(msh_lock_try(&l));
    msh_lock_give(&l);
    msh_lock_take(&l);
    EXPECT(!msh_lock_try(&l));
    msh_lock_give(&l);
    EXPECT(atomic_load(&l.v) == 0);
}

static void test_contended(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, hammer, (void *)(uintptr_t)(i + 1)) != 0)
            abort();
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    EXPECT(counter == (long)THREADS * ROUNDS);
    EXPECT(atomic_load(&overlaps) == 0);
    EXPECT(atomic_load(&lk.v) == 0);
}

/* A holder that sleeps long enough for every other thread to go to sleep
 * in the kernel: each must be woken and get the lock in turn. */
static void *one_take(void *arg)
{
    (void)arg;
    msh_lock_take(&lk);
    counter++;
    msh_lock_give(&lk);
    return NULL;
}

static void test_sleepers_woken(void)
{
    counter = 0;
    pthread_t t[THREADS];
    msh_lock_take(&lk);
    for (int i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, one_take, NULL) != 0)
            abort();
    struct timespec ts = { 0, 50 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    EXPECT(counter == 0);
    msh_lock_give(&lk);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    EXPECT(counter == THREADS);
    EXPECT(atomic_load(&lk.v) == 0);
}

static msh_block bk;
static MSH_TLS char token; /* its address names the thread, as msh_vci_self does */
#define ME ((uintptr_t)&token)

static void test_bias(void)
{
    msh_block_setup();
    msh_block_init(&bk);
    for (int i = 0; i < 4 * MSH_BLOCK_GRANT; i++) {
        msh_block_take(&bk, ME);
        msh_block_give(&bk);
    }
    /* Granted (where membarrier is there): the fast path leaves the plain lock free. */
    int biased = atomic_load(&bk.bias) == ME;
    msh_block_take(&bk, ME);
    EXPECT(!biased || atomic_load(&bk.lock.v) == 0);
    /* Someone else's try-lock fails while the owner is inside, and revokes;
     * with a bias, it says that it held the plain lock for a moment. */
    EXPECT(msh_block_try(&bk, ME + 1) == (biased ? MSH_BLOCK_OWNER_IN : 0));
    EXPECT(!biased || msh_block_owner_stays(&bk));
    EXPECT(atomic_load(&bk.bias) == 0);
    msh_block_give(&bk);
    EXPECT(!biased || !msh_block_owner_stays(&bk));
    EXPECT(msh_block_try(&bk, ME + 1) == 1);
    EXPECT(atomic_load(&bk.bias) == 0);
    msh_block_give(&bk);
    EXPECT(atomic_load(&bk.lock.v) == 0 && atomic_load(&bk.bias_in) == 0);
    if (!biased)
        printf("test_lock: no membarrier here; the bias cases ran on the plain lock\n");
}

/* A helper (a progress sweep) leaves a busy bias owner alone and finds a
 * quiet one; the counters MPISHIM_STATS prints count the grant and the
 * revocation. */
static void test_look(void)
{
    msh_block_init(&bk);
    unsigned seen = 0;
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_UNBIASED);
    for (int i = 0; i < 2 * MSH_BLOCK_GRANT; i++) {
        msh_block_take(&bk, ME);
        msh_block_give(&bk);
    }
    if (atomic_load(&bk.bias) != ME)
        return; /* no membarrier: never biased */
    EXPECT(bk.grants == 1 && bk.revocations == 0);
    EXPECT(msh_block_look(&bk, ME, &seen) == MSH_BLOCK_UNBIASED); /* the owner itself is no helper */
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_OWNER_BUSY); /* entered since the last look */
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_OWNER_QUIET); /* quiet since */
    msh_block_take(&bk, ME);
    msh_block_give(&bk);
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_OWNER_BUSY);
    unsigned other = 0; /* a second helper keeps its own look */
    EXPECT(msh_block_look(&bk, ME + 2, &other) == MSH_BLOCK_OWNER_BUSY);
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_OWNER_QUIET);
    EXPECT(msh_block_try(&bk, ME + 1) == 1); /* the helper helps: the bias goes */
    msh_block_give(&bk);
    EXPECT(atomic_load(&bk.bias) == 0 && bk.revocations == 1);
    EXPECT(msh_block_look(&bk, ME + 1, &seen) == MSH_BLOCK_UNBIASED);
}

/* A former owner late on its fast path: it read the bias as its own, then
 * was preempted while another thread's take revoked it and a third earned
 * the bias and went in by it. The late thread's store to the lock's
 * "inside" flag, and the clear after it found the bias gone, must not hide
 * the new owner from the next taker. One thread plays all three (tokens
 * A, B, C), which needs no scheduling luck, the race that once let two
 * threads into one VCI. */
static void test_late_former_owner(void)
{
    const uintptr_t a = ME + 1, b = ME + 2, c = ME + 3;
    msh_block_init(&bk);
    for (int i = 0; i < MSH_BLOCK_GRANT; i++) {
        msh_block_take(&bk, a);
        msh_block_give(&bk);
    }
    if (atomic_load(&bk.bias) != a)
        return; /* no membarrier: never biased */
    /* B revokes A's bias, then runs long enough for a grant of its own. */
    for (int i = 0; i < 4 * MSH_BLOCK_GRANT; i++) {
        msh_block_take(&bk, b);
        msh_block_give(&bk);
    }
    msh_block_take(&bk, b); /* B inside, by its bias if it has one */
    EXPECT(msh_block_enter_biased(&bk, a) == 0); /* A, late: not its bias any more */
    int got = msh_block_try(&bk, c);
    EXPECT(got != 1); /* C must not get in beside B */
    if (got == 1)
        msh_block_give(&bk);
    msh_block_give(&bk);
    /* A comes back by the slow path; from then on the others may earn the
     * bias again. */
    msh_block_take(&bk, a);
    msh_block_give(&bk);
    for (int i = 0; i < 64 * MSH_BLOCK_GRANT && atomic_load(&bk.bias) != b; i++) {
        msh_block_take(&bk, b);
        msh_block_give(&bk);
    }
    EXPECT(atomic_load(&bk.bias) == b);
    EXPECT(atomic_load(&bk.lock.v) == 0 && atomic_load(&bk.bias_in) == 0);
}

static void *runs(void *arg)
{
    unsigned s = seed ^ (unsigned)(uintptr_t)arg;
    for (int i = 0; i < ROUNDS / 4;) {
        s = s * 1103515245u + 12345u;
        int n = (s >> 16) % 4 == 0 ? (int)(s >> 20) % (8 * MSH_BLOCK_GRANT) : 1 + (int)(s >> 20) % 3;
        for (int k = 0; k < n; k++, i++) {
            if ((s >> 8) % 8 == 0) {
                while (msh_block_try(&bk, ME) <= 0)
                    ;
            } else {
                msh_block_take(&bk, ME);
            }
            critical(0);
            msh_block_give(&bk);
        }
        if ((s >> 24) % 16 == 0)
            sched_yield();
    }
    return NULL;
}

static void test_bias_contended(void)
{
    msh_block_init(&bk);
    counter = 0;
    atomic_store(&overlaps, 0);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        if (pthread_create(&t[i], NULL, runs, (void *)(uintptr_t)(i + 1)) != 0)
            abort();
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    EXPECT(counter >= 4L * (ROUNDS / 4));
    EXPECT(atomic_load(&overlaps) == 0);
    EXPECT(atomic_load(&bk.bias_in) == 0 && atomic_load(&bk.lock.v) == 0);
    /* Each revocation doubled the run that earns the next grant. */
    printf("test_lock: grant run %u after the contended case (%u at first)\n", bk.grant_at, MSH_BLOCK_GRANT);
}

/* The revocation race itself: an owner that holds the lock most of the
 * time by its fast path, and another thread's take, many times over. */
static atomic_int stop;
static _Atomic uintptr_t owner_token;

static void *owner(void *arg)
{
    (void)arg;
    atomic_store(&owner_token, ME);
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        msh_block_take(&bk, ME);
        critical(200);
        msh_block_give(&bk);
    }
    return NULL;
}

static void test_revoke_while_inside(void)
{
    int granted = 0;
    atomic_store(&overlaps, 0);
    for (int rep = 0; rep < 200; rep++) {
        msh_block_init(&bk);
        atomic_store(&stop, 0);
        atomic_store(&owner_token, 0);
        pthread_t t;
        if (pthread_create(&t, NULL, owner, NULL) != 0)
            abort();
        for (int w = 0; w < 100000 && (atomic_load(&owner_token) == 0 ||
                                       atomic_load(&bk.bias) != atomic_load(&owner_token)); w++)
            sched_yield();
        granted += atomic_load(&bk.bias) != 0;
        for (int k = 0; k < 3; k++) {
            msh_block_take(&bk, ME);
            critical(0);
            msh_block_give(&bk);
        }
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
    }
    EXPECT(atomic_load(&overlaps) == 0);
    printf("test_lock: %d of 200 revocations met a granted bias\n", granted);
}

int main(int argc, char **argv)
{
    seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
    test_try();
    test_contended();
    test_sleepers_woken();
    test_bias();
    test_look();
    test_late_former_owner();
    test_bias_contended();
    test_revoke_while_inside();
    if (failures) {
        fprintf(stderr, "test_lock: %d failure(s) (seed %u)\n", failures, seed);
        return 1;
    }
    printf("ok test_lock (seed %u)\n", seed);
    return 0;
}
