/* Unit test of hog mode (src/sync/progress.c), without MPI: a progress
 * owner whose poll finds nothing shares its CPU with a thread that spins
 * outside MPI (as MPICH's MTest_thread_barrier does). Each yield of the
 * owner hands that thread the core for a whole time slice, so the owner
 * must notice and stop yielding (hog mode), and hog mode must end again
 * once its period is over; with MPISHIM_HOG_MS=off it must never begin.
 * The poll completes the request as soon as hog mode begins (with hog
 * mode off, after OFF_POLLS empty polls); an alarm fails the test if it
 * never does. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "sync/progress.h"
#include "unit.h"

#define TIMEOUT_S 60 /* MSH_TEST_TIMEOUT=s overrides (sanitizer builds) */
#define OFF_POLLS 400 /* about 50 yields, each of them long beside the spinner */

static _Alignas(MSH_CACHELINE) msh_request req;
static _Atomic int stop_spinner;
static _Atomic long empty_polls;

/* The fake host: nothing completes until hog mode has begun (or, with hog
 * mode off, for OFF_POLLS polls). */
static int hog_poll(void *arg, int dom, unsigned *misses)
{
    (void)arg;
    (void)dom;
    (void)misses;
    int due = msh_cfg.hog_ms ? msh_sync_hogged() : atomic_load(&empty_polls) >= OFF_POLLS;
    if (!due || atomic_load_explicit(&req.state, memory_order_acquire) != MSH_REQ_PENDING) {
        atomic_fetch_add_explicit(&empty_polls, 1, memory_order_relaxed);
        return 0;
    }
    memset(&req.status, 0, sizeof req.status);
    msh_progress_complete(&req);
    return 1;
}

static int pin(pthread_t t, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(t, sizeof set, &set);
}

/* A thread outside MPI that never sleeps or yields. */
static void *spinner(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop_spinner, memory_order_relaxed))
        ;
    return NULL;
}

/* One request, waited for as msh_req_wait_complete does: this thread
 * becomes the owner and polls in vain, yielding, until the poll completes
 * it. */
static void wait_one(void)
{
    atomic_store(&req.sync, NULL);
    atomic_store(&req.state, MSH_REQ_PENDING);
    msh_sync s;
    msh_sync_init(&s, 0);
    /* No lock stands for the VCI lock here: only this thread's own polls
     * complete req, after the attach. */
    int attached = msh_sync_attach(&s, &req);
    EXPECT(attached);
    if (attached)
        msh_sync_wait(&s, 1);
    msh_sync_finish(&s, attached);
    EXPECT(atomic_load(&req.state) == MSH_REQ_COMPLETE);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL test_hog: timed out; the owner never noticed the spinning thread\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

int main(void)
{
    signal(SIGALRM, on_alarm);
    const char *to = getenv("MSH_TEST_TIMEOUT");
    alarm(to ? (unsigned)strtoul(to, NULL, 0) : TIMEOUT_S);

    /* The owner (this thread) and the spinner on one CPU: the one this
     * thread may run on first. */
    cpu_set_t mine;
    int cpu = -1;
    if (sched_getaffinity(0, sizeof mine, &mine) == 0)
        for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
            if (CPU_ISSET(c, &mine))
                cpu = c;
    if (cpu < 0 || pin(pthread_self(), cpu) != 0) {
        printf("ok test_hog (skipped: cannot bind threads to a CPU)\n");
        return 0;
    }

    msh_cfg.progress = MSH_PROGRESS_GLOBAL;
    msh_cfg.wait = MSH_WAIT_ADAPTIVE;
    msh_cfg.spin_us = 20;
    EXPECT(msh_progress_init() == 0);
    msh_progress_set_poll(0, hog_poll, NULL);
    EXPECT(!msh_sync_hogged());
    EXPECT(msh_sync_hog_periods() == 0);

    pthread_t sp;
    pthread_attr_t attr;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pthread_attr_init(&attr);
    EXPECT(pthread_attr_setaffinity_np(&attr, sizeof one, &one) == 0);
    EXPECT(pthread_create(&sp, &attr, spinner, NULL) == 0);
    pthread_attr_destroy(&attr);

    /* MPISHIM_HOG_MS=off: the owner keeps yielding. */
    msh_cfg.hog_ms = 0;
    wait_one();
    EXPECT(!msh_sync_hogged());
    EXPECT(msh_sync_hog_periods() == 0);

    /* The default: hog mode begins. */
    msh_cfg.hog_ms = 1000;
    atomic_store(&empty_polls, 0);
    wait_one();
    EXPECT(msh_sync_hogged());
    EXPECT(msh_sync_hog_periods() == 1);
    printf("test_hog: hog mode began after %ld empty polls\n", atomic_load(&empty_polls));

    /* The period ends (MPISHIM_HOG_MS, 1 s here): yields resume. */
    atomic_store(&stop_spinner, 1);
    pthread_join(sp, NULL);
    sleep(2);
    EXPECT(!msh_sync_hogged());
    EXPECT(msh_sync_hog_periods() == 1);
    msh_progress_fini();

    if (failures)
        printf("test_hog: FAILED\n");
    else
        printf("ok test_hog\n"); /* what tests/run.sh looks for */
    return failures != 0;
}
