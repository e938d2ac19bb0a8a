/* Unit tests of the VCI lock (src/core/lock.h): try-lock fails while the
 * lock is held and succeeds once it is released; threads that outnumber
 * the cores (so that some spin out and sleep in the kernel) never hold it
 * at once, and every increment made under it survives; a holder that
 * sleeps while others queue up wakes them all in the end. No MPI needed.
 * Replay with a seed: test_lock SEED (default: the time). */
#include <pthread.h>
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

int main(int argc, char **argv)
{
    seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : (unsigned)time(NULL);
    test_try();
    test_contended();
    test_sleepers_woken();
    if (failures) {
        fprintf(stderr, "test_lock: %d failure(s) (seed %u)\n", failures, seed);
        return 1;
    }
    printf("ok test_lock (seed %u)\n", seed);
    return 0;
}
