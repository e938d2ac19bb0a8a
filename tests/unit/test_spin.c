/* Unit test of the waits that test in a loop (msh_spin, src/sync/progress.c),
 * without MPI: each round progresses the waiter's domain once (the runtime
 * on) and nothing with the runtime off; the waiter counts among the rank's
 * spinning threads from its first round until msh_spin_end, and only once
 * however many rounds it makes; concurrent waiters each count, and the
 * count, which decides whether any of them may back off from yielding,
 * goes back to zero. */
#include <pthread.h>
#include <stdio.h>

#include "core/config.h"
#include "core/runtime.h"
#include "sync/progress.h"
#include "unit.h"

#define DONE_AT 100 /* polls after which the fake host has the message */
#define THREADS 4

static _Atomic int polls;

static int fake_poll(void *arg, int dom, unsigned *misses)
{
    (void)arg;
    (void)dom;
    (void)misses;
    return atomic_fetch_add_explicit(&polls, 1, memory_order_relaxed) + 1 >= DONE_AT;
}

static pthread_barrier_t in, out;

static void *waiter(void *arg)
{
    (void)arg;
    msh_spin s = MSH_SPIN_ON(0);
    msh_spin_idle(&s);
    msh_spin_idle(&s);
    pthread_barrier_wait(&in);  /* every waiter has made its rounds ... */
    pthread_barrier_wait(&out); /* ... and main has counted them */
    msh_spin_end(&s);
    return NULL;
}

int main(void)
{
    msh_cfg.progress = MSH_PROGRESS_GLOBAL;
    msh_cfg.wait = MSH_WAIT_ADAPTIVE;
    EXPECT(msh_progress_init() == 0);
    msh_progress_set_poll(0, fake_poll, NULL);
    msh_state_set(MSH_STATE_RUNTIME);

    /* One waiter: a poll per round until the message is there. */
    msh_spin s = MSH_SPIN_ON(0);
    EXPECT(msh_progress_spinners() == 0);
    int rounds = 0;
    while (atomic_load(&polls) < DONE_AT && rounds < 10 * DONE_AT) {
        msh_spin_idle(&s);
        rounds++;
        EXPECT(msh_progress_spinners() == 1);
    }
    EXPECT(rounds == DONE_AT);
    EXPECT(atomic_load(&polls) == DONE_AT);
    msh_spin_end(&s);
    EXPECT(msh_progress_spinners() == 0);
    msh_spin_end(&s); /* a second end counts nothing */
    EXPECT(msh_progress_spinners() == 0);

    /* A wait that ends before its first round never counted. */
    msh_spin never = MSH_SPIN_ON(0);
    msh_spin_end(&never);
    EXPECT(msh_progress_spinners() == 0);

    /* Concurrent waiters each count once. */
    pthread_barrier_init(&in, NULL, THREADS + 1);
    pthread_barrier_init(&out, NULL, THREADS + 1);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        EXPECT(pthread_create(&t[i], NULL, waiter, NULL) == 0);
    pthread_barrier_wait(&in);
    EXPECT(msh_progress_spinners() == THREADS);
    pthread_barrier_wait(&out);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    EXPECT(msh_progress_spinners() == 0);
    pthread_barrier_destroy(&in);
    pthread_barrier_destroy(&out);

    /* The runtime off: a round polls nothing (and still counts). */
    msh_state_set(MSH_STATE_ACTIVE);
    int before = atomic_load(&polls);
    msh_spin off = MSH_SPIN_ON(0);
    for (int i = 0; i < 10; i++)
        msh_spin_idle(&off);
    EXPECT(atomic_load(&polls) == before);
    EXPECT(msh_progress_spinners() == 1);
    msh_spin_end(&off);
    EXPECT(msh_progress_spinners() == 0);

    msh_progress_fini();
    if (failures)
        printf("test_spin: FAILED\n");
    else
        printf("ok test_spin\n"); /* what tests/run.sh looks for */
    return failures != 0;
}
