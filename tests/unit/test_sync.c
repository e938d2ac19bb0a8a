/* Unit test of the sync objects and the ownership handoff (src/sync/
 * progress.c), without MPI: many threads wait on one progress domain whose
 * poll function (msh_progress_set_poll) completes fake requests in a random
 * order. Every wait must end (a lost handoff leaves sleepers without an
 * owner: the alarm fails the test) and find its requests complete. Some
 * rounds test (msh_progress_try) until done before they wait, so owners
 * come and go between the sleeps as in MPI_Test loops.
 * MSH_TEST_SEED=n repeats a run; the seed is printed. */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "sync/progress.h"
#include "unit.h"

#define NTHREADS 6
#define EPOCHS 12     /* per wait policy: threads start together, end apart */
#define ROUNDS 500    /* at most, per thread and epoch */
#define MAXREQ 4      /* requests per wait */
#define TIMEOUT_S 60   /* MSH_TEST_TIMEOUT=s overrides (sanitizer builds) */

static _Alignas(MSH_CACHELINE) msh_request reqs[NTHREADS][MAXREQ];

/* The fake host: requests posted and not yet completed. */
static pthread_mutex_t plock = PTHREAD_MUTEX_INITIALIZER;
static msh_request *pending[NTHREADS * MAXREQ];
static int npending;
static unsigned poll_seed; /* under plock */
static _Atomic long completions;

/* plock plays the VCI lock: a request is (re)posted, attached, detached
 * and completed under it (attaching and completing are plain loads and
 * stores that only the lock orders), so a waiter that sees its request
 * complete cannot repost it while the poller is still claiming it (lock
 * order as in the shim: this lock, then the domain mutex). */
static void post(msh_request *r)
{
    pthread_mutex_lock(&plock);
    atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
    pending[npending++] = r;
    pthread_mutex_unlock(&plock);
}

/* The domain's poll: mostly nothing (the owner then spins and yields, and
 * the other waiters go to sleep), else complete up to three pending
 * requests picked at random. */
static int fake_poll(void *arg, int dom, unsigned *misses)
{
    (void)arg;
    (void)dom;
    (void)misses;
    int k = 0;
    pthread_mutex_lock(&plock);
    int want = rand_r(&poll_seed) % 16 == 0 ? 1 + rand_r(&poll_seed) % 3 : 0;
    for (; k < want && k < 3 && npending > 0; k++) {
        int i = rand_r(&poll_seed) % npending;
        msh_request *r = pending[i];
        pending[i] = pending[--npending];
        memset(&r->status, 0, sizeof r->status);
        msh_progress_complete(r);
    }
    pthread_mutex_unlock(&plock);
    atomic_fetch_add_explicit(&completions, k, memory_order_relaxed);
    return k;
}

static int is_complete(msh_request *r)
{
    return atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_COMPLETE;
}

/* What msh_req_wait_complete and the array wait of src/sync/wait.c do:
 * attach, wait for all (all != 0) or one, detach the rest, finish. */
static void wait_reqs(msh_request **rs, int m, int all)
{
    msh_sync s;
    msh_sync_init(&s, 0);
    int attached = 0, already = 0, att[MAXREQ];
    pthread_mutex_lock(&plock);
    for (int i = 0; i < m; i++) {
        att[i] = msh_sync_attach(&s, rs[i]);
        attached += att[i];
        already += !att[i];
    }
    pthread_mutex_unlock(&plock);
    int needed = all ? attached : (already ? 0 : 1);
    if (needed > 0)
        msh_sync_wait(&s, needed);
    int claimed = attached;
    if (!all) {
        pthread_mutex_lock(&plock);
        for (int i = 0; i < m; i++)
            if (att[i])
                claimed -= msh_sync_detach(&s, rs[i]);
        pthread_mutex_unlock(&plock);
    }
    msh_sync_finish(&s, claimed);
}

static _Atomic long waits_done, waits_wanted, tests_done;
static unsigned base_seed, epoch;
static pthread_barrier_t start;

static void *waiter(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seed = base_seed + 7919u * (unsigned)(t + 1) + 104729u * epoch;
    /* Threads run different numbers of rounds: the last ones left must
     * still find an owner when the others are gone. */
    int rounds = ROUNDS / 2 + rand_r(&seed) % (ROUNDS / 2);
    atomic_fetch_add_explicit(&waits_wanted, rounds, memory_order_relaxed);
    pthread_barrier_wait(&start);
    for (int round = 0; round < rounds; round++) {
        int m = 1 + rand_r(&seed) % MAXREQ, all = rand_r(&seed) % 2;
        msh_request *rs[MAXREQ];
        for (int i = 0; i < m; i++)
            post(rs[i] = &reqs[t][i]);
        if (rand_r(&seed) % 4 == 0)
            sched_yield(); /* let some complete before the waiter attaches */
        if (rand_r(&seed) % 3 == 0) {
            /* Test until done, as MPI_Test loops do: each try takes the
             * domain and gives it back while others sleep, so each of its
             * releases must see them and hand the domain on. */
            for (int i = 0; i < m; i++)
                while (!is_complete(rs[i]))
                    if (msh_progress_try(0) == 0)
                        sched_yield(); /* 6 threads on few cores */
            atomic_fetch_add_explicit(&tests_done, 1, memory_order_relaxed);
        }
        wait_reqs(rs, m, all);
        int ndone = 0;
        for (int i = 0; i < m; i++)
            ndone += is_complete(rs[i]);
        EXPECT(all ? ndone == m : ndone >= 1);
        if (!all && ndone < m) {
            /* The rest must complete before these requests are reused. */
            msh_request *rest[MAXREQ];
            int nrest = 0;
            for (int i = 0; i < m; i++)
                if (!is_complete(rs[i]))
                    rest[nrest++] = rs[i];
            wait_reqs(rest, nrest, 1);
            for (int i = 0; i < nrest; i++)
                EXPECT(is_complete(rest[i]));
        }
        atomic_fetch_add_explicit(&waits_done, 1, memory_order_relaxed);
        /* Sometimes leave for a while, as a thread computing between
         * calls does: an owner that leaves must hand the domain on. */
        if (rand_r(&seed) % 8 == 0)
            usleep((useconds_t)(rand_r(&seed) % 300));
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL test_sync: timed out; waiters were left without a progress owner\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void run(msh_wait_policy policy, const char *name)
{
    msh_cfg.wait = policy;
    atomic_store(&waits_done, 0);
    atomic_store(&waits_wanted, 0);
    atomic_store(&completions, 0);
    atomic_store(&tests_done, 0);
    const msh_domain *d = msh_progress_domain(0);
    unsigned long long handoffs0 = d->st.handoffs, sleeps0 = d->st.sleeps;
    for (epoch = 0; epoch < EPOCHS; epoch++) {
        pthread_t th[NTHREADS];
        pthread_barrier_init(&start, NULL, NTHREADS);
        for (int t = 0; t < NTHREADS; t++)
            EXPECT(pthread_create(&th[t], NULL, waiter, (void *)(intptr_t)t) == 0);
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(th[t], NULL);
        pthread_barrier_destroy(&start);
        EXPECT(npending == 0);
        EXPECT(!atomic_load(&d->owned));
        EXPECT(d->waiters == NULL);
    }
    EXPECT(atomic_load(&waits_done) == atomic_load(&waits_wanted));
    printf("test_sync: wait %s: %ld waits (%ld after tests), %ld completions, %llu handoffs, %llu sleeps\n", name,
           atomic_load(&waits_done), atomic_load(&tests_done), atomic_load(&completions),
           (unsigned long long)d->st.handoffs - handoffs0,
           (unsigned long long)d->st.sleeps - sleeps0);
}

int main(void)
{
    const char *e = getenv("MSH_TEST_SEED");
    base_seed = e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL);
    poll_seed = base_seed;
    printf("test_sync: seed %u (MSH_TEST_SEED=%u repeats it)\n", base_seed, base_seed);
    fflush(stdout);
    signal(SIGALRM, on_alarm);
    const char *to = getenv("MSH_TEST_TIMEOUT");
    alarm(to ? (unsigned)strtoul(to, NULL, 0) : TIMEOUT_S);

    /* One domain, polled by the fake host only (no VCIs). */
    msh_cfg.progress = MSH_PROGRESS_GLOBAL;
    msh_cfg.spin_us = 20;
    EXPECT(msh_progress_init() == 0);
    EXPECT(msh_progress_ndomains() == 1);
    msh_progress_set_poll(0, fake_poll, NULL);

    run(MSH_WAIT_BLOCK, "block");       /* every waiter sleeps: handoffs carry the domain */
    run(MSH_WAIT_ADAPTIVE, "adaptive"); /* spin, then sleep */
    run(MSH_WAIT_SPIN, "spin");

    if (failures)
        printf("test_sync: FAILED (seed %u)\n", base_seed);
    else
        printf("ok test_sync\n"); /* what tests/run.sh looks for */
    return failures != 0;
}
