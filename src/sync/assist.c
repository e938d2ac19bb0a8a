/* The helper that moves lanes and partitioned receives during blocking host
 * calls (assist.h). */
#define _GNU_SOURCE 1
#include "sync/assist.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#include "core/log.h"
#include "sync/progress.h"
#include "sync/sync.h"

/* The helper's first poll comes this long after a call starts, so that
 * short calls (a fence between ranks that are all there) never wake it to
 * poll; an empty poll doubles the pause up to BACKOFF_MAX_US. A rendezvous
 * takes a few steps, so a stalled peer waits at most a few milliseconds. */
#define FIRST_POLL_US 50
#define BACKOFF_MAX_US 1000
/* After the last call returns, the helper stays awake this long, so that a
 * loop of such calls (fences) does not pay a wake-up each. */
#define LINGER_US 20000

static pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pthread_t helper;
static int stopping; /* under mtx */
static _Atomic int started, stop_flag;
/* Threads inside an assisted call, and whether the helper waits on cv for
 * one: sequentially consistent, so that an entering thread sees the helper
 * asleep or the helper sees the thread inside (no lost wake-up). */
static _Atomic int inside;
static _Atomic int asleep;
/* Threads inside file calls, counted where the host's file I/O does not
 * bear a second thread in its progress engine (assist.h). */
#if defined(MPICH)
#define FILE_CALLS_BEAR_SWEEP 1
#else
#define FILE_CALLS_BEAR_SWEEP 0
#endif
static _Atomic int in_file_calls;

static void pause_us(long us)
{
    struct timespec ts = { 0, us * 1000L };
    nanosleep(&ts, NULL);
}

static int stopped(void)
{
    return atomic_load_explicit(&stop_flag, memory_order_acquire);
}

/* Whether there is traffic only the helper can move now: a lane, or a
 * partitioned receive waiting for its header. */
static int work(void)
{
    return !msh_tp_direct ||
           (msh_upper.sweep_wanted && atomic_load_explicit(msh_upper.sweep_wanted, memory_order_seq_cst));
}

static int wanted(void)
{
    return atomic_load_explicit(&inside, memory_order_seq_cst) > 0 && !stopped() && work();
}

/* Poll while a call is in progress. */
static void assist_calls(void)
{
    long pause = FIRST_POLL_US;
    while (wanted()) {
        pause_us(pause);
        if (!wanted())
            break;
        if (msh_progress_assist(atomic_load_explicit(&in_file_calls, memory_order_seq_cst) == 0) > 0)
            pause = FIRST_POLL_US;
        else if ((pause *= 2) > BACKOFF_MAX_US)
            pause = BACKOFF_MAX_US;
    }
}

static void *assist_main(void *arg)
{
    (void)arg;
    while (!stopped()) {
        assist_calls();
        for (long waited = 0; waited < LINGER_US && !wanted() && !stopped(); waited += BACKOFF_MAX_US)
            pause_us(BACKOFF_MAX_US);
        if (wanted() || stopped())
            continue;
        pthread_mutex_lock(&mtx);
        atomic_store_explicit(&asleep, 1, memory_order_seq_cst);
        while (!stopping && (atomic_load_explicit(&inside, memory_order_seq_cst) == 0 || !work()))
            pthread_cond_wait(&cv, &mtx);
        atomic_store_explicit(&asleep, 0, memory_order_relaxed);
        pthread_mutex_unlock(&mtx);
    }
    return NULL;
}

/* Start the helper if it has not started, and wake it. */
static void wake(void)
{
    pthread_mutex_lock(&mtx);
    if (!atomic_load_explicit(&started, memory_order_relaxed) && !stopping) {
        /* The helper must not take the program's signals. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        int ok = pthread_create(&helper, NULL, assist_main, NULL) == 0;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        atomic_store_explicit(&started, ok, memory_order_release);
        if (!ok) {
            stopping = 1; /* no second try */
            msh_log("cannot start the thread that moves lanes and partitioned receives during blocking host "
                    "calls: a peer that needs that traffic then may wait until the call returns");
        }
    }
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mtx);
}

/* inside and the sweep's flag are sequentially consistent: an entering
 * thread that finds no work and a partitioned receive that makes some
 * (msh_assist_kick) cannot both miss each other. Such a call moves the
 * host: the progress thread leaves it alone meanwhile
 * (msh_progress_host_enter). Bits of the result: 1 entered, 2 the
 * progress thread was told, 4 a counted file call. */
int msh_assist_enter_slow(int file)
{
    int bits = 1 | msh_progress_host_enter() << 1;
    if (file && !FILE_CALLS_BEAR_SWEEP) {
        atomic_fetch_add_explicit(&in_file_calls, 1, memory_order_seq_cst);
        bits |= 4;
    }
    atomic_fetch_add_explicit(&inside, 1, memory_order_seq_cst);
    if (MSH_LIKELY(atomic_load_explicit(&asleep, memory_order_seq_cst) == 0 &&
                   atomic_load_explicit(&started, memory_order_acquire)))
        return bits;
    if (work())
        wake();
    return bits;
}

void msh_assist_kick(void)
{
    if (atomic_load_explicit(&inside, memory_order_seq_cst) > 0)
        wake();
}

void msh_assist_exit_slow(int entered)
{
    atomic_fetch_sub_explicit(&inside, 1, memory_order_release);
    if (entered & 4)
        atomic_fetch_sub_explicit(&in_file_calls, 1, memory_order_release);
    msh_progress_host_exit((entered >> 1) & 1);
}

void msh_assist_stop(void)
{
    pthread_mutex_lock(&mtx);
    int join = atomic_load_explicit(&started, memory_order_relaxed);
    stopping = 1;
    atomic_store_explicit(&stop_flag, 1, memory_order_release);
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mtx);
    if (join)
        pthread_join(helper, NULL);
}
