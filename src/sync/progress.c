/* The progress engine and sync-object waits (see sync.h). */
#include "sync/progress.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "core/topo.h"
#include "sync/cache.h"
#include "sync/queue.h"

/* Empty polls before an owner yields the core, while its yields give the
 * core to another thread ... */
#define MSH_YIELD_POLLS 8u
/* ... and up to 2^MSH_YIELD_BACKOFF times as many while they find nobody
 * to give it to (see yield_timed). */
#define MSH_YIELD_BACKOFF 6

/* A yield by a progress owner that kept it off its core this long: the
 * core went to a thread that runs until the kernel takes the core back (a
 * spinning thread barrier such as MPICH's MTest_thread_barrier, an OpenMP
 * runtime's spin-wait, a busy compute thread). Threads waiting in the shim
 * give the core back within microseconds, or sleep. On the 2-core VM
 * (kernel 6.18, Open MPI and MPICH, Multirate T = 1..8), at most 3 of
 * about 10^4 owner yields took 1 ms or more; beside a spinning barrier
 * (bench/threads -b spin) about 1400 per 8 s took 3-10 ms. */
#define MSH_HOG_YIELD_US 2000
/* MSH_HOG_COUNT such yields within MSH_HOG_WINDOW_US ... */
#define MSH_HOG_COUNT 4
#define MSH_HOG_WINDOW_US 100000
/* ... and for MPISHIM_HOG_MS (1000) the rank's waits give no core away:
 * owners poll without yielding and waiters sleep at once instead of
 * spinning, as each yield would hand that thread a whole time slice while
 * the peer's messages wait. Then yields resume, and a busy thread still
 * there is seen again within MSH_HOG_COUNT long yields (about 1% of the
 * default period). MPISHIM_HOG_MS=off: never. */

static struct {
    _Alignas(MSH_CACHELINE) _Atomic int64_t until; /* hog mode lasts to here (msh_now_us) */
    _Atomic int64_t window_start;
    _Atomic int count;
    _Atomic uint64_t periods; /* times hog mode began (MPISHIM_STATS) */
} hog;

static pthread_t progress_thread;
static _Atomic int progress_thread_stop;
int msh_progress_thread_on;

/* Under v's lock: hand the n completions its transport returned to their
 * waiters (or recycle the requests the program freed). */
static void complete_polled(msh_vci *v, const msh_tp_done *done, int n)
{
    msh_notify b;
    b.n = 0; /* the rest is written before it is read */
    for (int k = 0; k < n; k++) {
        msh_request *r = done[k].ctx;
        r->status = done[k].status;
        r->host = done[k].treq; /* none, or the inactive persistent request */
        if (r->freed) {
            /* The user freed it while active: nobody will wait for it. */
            if (r->persistent)
                msh_tp_release(v->tp, &r->host);
            msh_vci_req_put(v, r);
            continue;
        }
        msh_req_keep_error(r, &done[k]);
        msh_notify_complete(r, &b);
    }
    v->st.completions += (uint64_t)n;
    msh_notify_flush(&b);
}

/* Entered holding v's lock, which it releases: post v's queue, poll its
 * transport, complete what it reports. */
static int poll_locked(msh_vci *v, int lanes_only)
{
    if (!lanes_only && msh_queue_nonempty(v))
        msh_queue_drain(v);
    if (msh_tp_idle(v->tp)) {
        msh_vci_unlock(v);
        return 0;
    }
    v->st.polls++;
    const msh_tp_done *done = NULL;
    int n = msh_tp_poll(v->tp, &done);
    if (n <= 0) {
        v->st.empty_polls++;
        msh_vci_unlock(v);
        return 0;
    }
    complete_polled(v, done, n);
    msh_vci_unlock(v);
    return n;
}

static int poll_vci(msh_vci *v, int blocking, int lanes_only)
{
    if (msh_tp_idle(v->tp) && (lanes_only || !msh_queue_nonempty(v)))
        return 0;
    if (blocking)
        msh_vci_lock(v);
    else if (!msh_vci_trylock_helping(v))
        return 0;
    return poll_locked(v, lanes_only);
}

int msh_progress_poll(msh_vci *v, int blocking)
{
    return poll_vci(v, blocking, 0);
}

/* ------------------------------------------------------------ yielding */

static inline int poll_hook(void)
{
    return msh_sweep_wanted() ? msh_upper.sweep() : 0;
}

static inline int hog_mode(int64_t now)
{
    return now < atomic_load_explicit(&hog.until, memory_order_relaxed);
}

int msh_sync_hogged(void)
{
    return hog_mode((int64_t)msh_now_us());
}

uint64_t msh_sync_hog_periods(void)
{
    return atomic_load_explicit(&hog.periods, memory_order_relaxed);
}

/* An owner's yields. Where threads outnumber cores a yield hands the core
 * to a thread that needs it (one this owner woke, the peer rank's); where
 * every spinning thread has a core it is only a system call, and a message
 * that arrives meanwhile waits for it (docs/design.md has what that cost a
 * lane's latency). So an owner yields half as often after each yield,
 * down to 2^MSH_YIELD_BACKOFF times fewer, while two things say nobody
 * needs its core: the rank's spinning owners are no more than its share of
 * the node's cores, and the yield took little more than its fastest (it ran
 * nobody: a thread outside MPI may want the core too). Either one false
 * brings back the base rate. The timing alone is not enough: the kernel
 * may keep a yielder on its core while other spinners wait. */
static MSH_TLS struct {
    unsigned idle;   /* empty polls since the last yield or completion */
    unsigned shift;  /* yield every MSH_YIELD_POLLS << shift empty polls */
    double floor_us; /* fastest yield seen (0: none yet) */
} yq;

static struct {
    _Alignas(MSH_CACHELINE) _Atomic int n; /* threads in an owner's polling loop */
} spinning;
static int cores_here = 1; /* the rank's share of the node's cores */

static double yield_timed(void)
{
    double t0 = msh_now_us();
    sched_yield();
    double took = msh_now_us() - t0;
    if (yq.floor_us <= 0 || took < yq.floor_us)
        yq.floor_us = took > 0 ? took : 1e-3;
    if (took <= 1.5 * yq.floor_us + 0.5 &&
        atomic_load_explicit(&spinning.n, memory_order_relaxed) <= cores_here) {
        if (yq.shift < MSH_YIELD_BACKOFF)
            yq.shift++;
    } else {
        yq.shift = 0;
    }
    return took;
}

/* One empty poll of an owner: 1 when it is time to yield. */
static inline int yield_due(void)
{
    if (++yq.idle < MSH_YIELD_POLLS << yq.shift)
        return 0;
    yq.idle = 0;
    return 1;
}

/* A poll that completed something: the count starts again. */
static inline void yield_reset(void)
{
    yq.idle = 0;
}

void msh_spin_idle(msh_spin *s)
{
    if (!s->counted) {
        s->counted = 1;
        atomic_fetch_add_explicit(&spinning.n, 1, memory_order_relaxed);
    }
    if (poll_hook() > 0 || (msh_on() && msh_progress_try(s->vci) > 0)) {
        yield_reset();
        return;
    }
    /* A round costs more than an owner's poll: the base is every round. */
    if (++yq.idle >= 1u << yq.shift) {
        yq.idle = 0;
        yield_timed();
    }
}

void msh_spin_end(msh_spin *s)
{
    if (s->counted)
        atomic_fetch_sub_explicit(&spinning.n, 1, memory_order_relaxed);
    s->counted = 0;
}

int msh_progress_spinners(void)
{
    return atomic_load_explicit(&spinning.n, memory_order_relaxed);
}

/* An owner's yield, timed: a run of long ones starts hog mode. The counts
 * are a heuristic; a race between two owners costs one miscount. */
static void owner_yield(void)
{
    if (msh_cfg.hog_ms == 0) {
        yield_timed();
        return;
    }
    int64_t t0 = (int64_t)msh_now_us();
    if (hog_mode(t0))
        return;
    int64_t t1 = t0 + (int64_t)yield_timed();
    if (t1 - t0 < MSH_HOG_YIELD_US)
        return;
    if (t1 - atomic_load_explicit(&hog.window_start, memory_order_relaxed) > MSH_HOG_WINDOW_US) {
        atomic_store_explicit(&hog.window_start, t1, memory_order_relaxed);
        atomic_store_explicit(&hog.count, 1, memory_order_relaxed);
        return;
    }
    if (atomic_fetch_add_explicit(&hog.count, 1, memory_order_relaxed) + 1 >= MSH_HOG_COUNT) {
        atomic_store_explicit(&hog.count, 0, memory_order_relaxed);
        atomic_store_explicit(&hog.until, t1 + (int64_t)msh_cfg.hog_ms * 1000, memory_order_relaxed);
        if (atomic_fetch_add_explicit(&hog.periods, 1, memory_order_relaxed) == 0 && msh_cfg.verbose)
            msh_log("a thread outside MPI keeps a core (a yield took %.1f ms): waits stop yielding for %d ms at a time "
                    "(MPISHIM_HOG_MS)", (double)(t1 - t0) / 1000, msh_cfg.hog_ms);
    }
}

/* One pass over every VCI. */
static int poll_all(int blocking)
{
    int n = poll_hook();
    for (int i = 0; i < msh_pool.n; i++)
        n += msh_progress_poll(&msh_pool.v[i], blocking);
    return n;
}

/* The helper runs while a program thread is inside a blocking host call,
 * which moves the host itself: entering the host from a second thread
 * there adds concurrency the program never asked for, and the host may not
 * bear it (Open MPI 4.1's ompio progress walks its pending file requests
 * without a lock: MPI_File_read_all_end died of SIGSEGV). */
int msh_progress_poll_lanes(void)
{
    msh_tp_lanes_only = 1;
    int n = 0;
    for (int i = 0; i < msh_pool.n; i++)
        n += poll_vci(&msh_pool.v[i], 0, 1);
    msh_tp_lanes_only = 0;
    return n;
}

/* The sweep does enter the host, for the partitioned layer's own requests
 * only, and only while a receive waits for its header: the raw host's own
 * layer would move such a receive inside the blocking call. Not during a
 * file call on Open MPI (sweep = 0, sync/assist.h). */
int msh_progress_assist(int sweep)
{
    int n = sweep ? poll_hook() : 0;
    if (!msh_tp_direct)
        n += msh_progress_poll_lanes();
    return n;
}

/* The sweep of PROGRESS=vci, by the owner of domain self: one pass over
 * the other VCIs that no thread owns, so that none waits for a waiter of
 * its own forever. An owned one is polled by its owner already; polling it
 * here too would take its lock, and its transport's cache lines, from the
 * thread working on it (NEWS.md, 2026-11-26, has what that cost on 16
 * cores). So is one whose lock is biased to a thread that has used it
 * since this sweeper's last look (a thread posting between its waits):
 * the sweep's lock would also revoke that bias. A VCI whose bias owner
 * stayed quiet through this sweeper's looks for MSH_SWEEP_QUIET_US is
 * polled: sweeps come about a microsecond apart, so an owner that was only
 * descheduled between two looks, or had just been granted its bias, looked
 * quiet, and each revocation doubles the run the next grant needs (two
 * threads testing on two lanes lost their biases tens of times a second
 * and ran on the plain lock: NEWS.md, 2026-12-01). An owner that computes
 * with a receive left behind is still helped, a millisecond later. */
#define MSH_SWEEP_QUIET_US 1000u

/* 8 bytes a VCI: this initial-exec TLS also counts against the static TLS
 * that a program's dlopen of the library would need. */
static MSH_TLS struct {
    unsigned entries;     /* the owner's count at this sweeper's last look (msh_vci_look) */
    uint32_t quiet_since; /* first look that found it unchanged (us, wrapping), or 0 */
} swept[MSH_MAX_VCIS];

/* Whether the sweep leaves VCI i to the thread its lock is biased to. */
static int leave_to_owner(int i)
{
    switch (msh_vci_look(&msh_pool.v[i], &swept[i].entries)) {
    case MSH_BLOCK_UNBIASED:
        return 0;
    case MSH_BLOCK_OWNER_BUSY:
        swept[i].quiet_since = 0;
        return 1;
    case MSH_BLOCK_OWNER_QUIET:
        break;
    }
    /* Quiet since the last look: a clock read, only now. */
    uint32_t now = (uint32_t)(uint64_t)msh_now_us();
    if (swept[i].quiet_since == 0)
        swept[i].quiet_since = now;
    if ((uint32_t)(now - swept[i].quiet_since) < MSH_SWEEP_QUIET_US)
        return 1;
    swept[i].quiet_since = 0;
    return 0;
}

static int sweep_others(int self)
{
    int n = poll_hook();
    for (int i = 0; i < msh_pool.n; i++)
        if (i != self && !atomic_load_explicit(&msh_domain_at(i)->owned, memory_order_relaxed) &&
            !leave_to_owner(i))
            n += msh_progress_poll(&msh_pool.v[i], 0);
    return n;
}

/* What the owner of domain d polls once: the host poll, every domain's
 * poll function unless msh_progress_set_poll replaced it. */
static int poll_domain(int d, unsigned *misses)
{
    if (!msh_progress_per_vci)
        return poll_all(1);
    int n = msh_progress_poll(&msh_pool.v[d], 1) + poll_hook();
    /* A count, not a modulo: no division on every empty poll. */
    if (n == 0 && ++*misses >= (unsigned)msh_cfg.sweep_polls) {
        n = sweep_others(d);
        *misses = 0;
    }
    if (n)
        *misses = 0;
    return n;
}

static int vci_poll(void *arg, int d, unsigned *misses)
{
    (void)arg;
    return poll_domain(d, misses);
}


/* ------------------------------------------------------------ ownership */

/* The calling thread's kernel id, read once per thread. */
static MSH_TLS long my_tid;
static long self_tid(void)
{
    if (MSH_UNLIKELY(my_tid == 0))
        my_tid = (long)syscall(SYS_gettid);
    return my_tid;
}

static int take_ownership(msh_domain *d)
{
    int unowned = 0;
    /* The relaxed look first: a thread that finds the domain owned does
     * not take the line away from the owner. */
    if (atomic_load_explicit(&d->owned, memory_order_relaxed) ||
        !atomic_compare_exchange_strong_explicit(&d->owned, &unowned, 1, memory_order_seq_cst, memory_order_relaxed))
        return 0;
    atomic_store_explicit(&d->owner_tid, self_tid(), memory_order_relaxed);
    d->st.ownerships++;
    return 1;
}

/* Under d->mtx, with the domain unowned: wake the first sleeper that still
 * waits, so that a domain with waiters always gets an owner. Sleepers
 * whose wait is already satisfied are skipped: they are leaving, and a
 * handoff to them would be lost. */
static void handoff_locked(msh_domain *d)
{
    for (msh_sync *w = d->waiters; w; w = w->next) {
        if (atomic_load_explicit(&w->done, memory_order_acquire) < w->needed) {
            d->st.handoffs++;
            pthread_cond_signal(&w->cond);
            return;
        }
    }
}

/* The store and the load are sequentially consistent against the
 * sleeper's count and look (sync.h, msh_domain): a sleeper that this load
 * misses sees the domain free. The handoff is under the mutex, which a
 * sleeper holds from its count until it sleeps, so the signal finds it
 * asleep. Another thread may own the domain again by then; then that
 * owner's release hands off. */
static void release_ownership(msh_domain *d)
{
    atomic_store_explicit(&d->owned, 0, memory_order_seq_cst);
    if (MSH_LIKELY(atomic_load_explicit(&d->sleepers, memory_order_seq_cst) == 0))
        return;
    pthread_mutex_lock(&d->mtx);
    if (!atomic_load_explicit(&d->owned, memory_order_relaxed))
        handoff_locked(d);
    pthread_mutex_unlock(&d->mtx);
}

/* pthread_cond_wait is a POSIX cancellation point, the host's waits are
 * not: a thread cancelled while asleep here would unwind holding the domain
 * mutex with its on-stack sync object still linked, and every other thread
 * would hang. So the sleep is never a cancellation point; a pending cancel
 * acts at the program's next one, after the MPI call, as with the host. */
static void sleep_on(pthread_cond_t *c, pthread_mutex_t *m)
{
    int old;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    pthread_cond_wait(c, m);
    pthread_setcancelstate(old, NULL);
}

static void sleep_until_done_or_unowned(msh_domain *d, msh_sync *s, int needed)
{
    pthread_mutex_lock(&d->mtx);
    while (atomic_load_explicit(&s->done, memory_order_acquire) < needed &&
           atomic_load_explicit(&d->owned, memory_order_relaxed)) {
        s->next = NULL;
        s->needed = needed;
        if (d->waiters_tail)
            d->waiters_tail->next = s;
        else
            d->waiters = s;
        d->waiters_tail = s;
        atomic_fetch_add_explicit(&d->sleepers, 1, memory_order_seq_cst);
        /* Counted, then the look that release_ownership pairs with. */
        if (atomic_load_explicit(&d->owned, memory_order_seq_cst)) {
            s->sleeping = 1;
            d->st.sleeps++;
            sleep_on(&s->cond, &d->mtx);
            s->sleeping = 0;
        }
        atomic_fetch_sub_explicit(&d->sleepers, 1, memory_order_relaxed);
        /* Unlink s (it may no longer be the head). */
        msh_sync **pp = &d->waiters, *prev = NULL;
        while (*pp && *pp != s) {
            prev = *pp;
            pp = &(*pp)->next;
        }
        if (*pp) {
            *pp = s->next;
            if (d->waiters_tail == s)
                d->waiters_tail = prev;
        }
    }
    /* Leaving with the domain unowned (a handoff may have been meant for
     * this thread just as its wait was satisfied): pass it on. */
    if (d->waiters && !atomic_load_explicit(&d->owned, memory_order_relaxed) &&
        atomic_load_explicit(&s->done, memory_order_acquire) >= needed)
        handoff_locked(d);
    pthread_mutex_unlock(&d->mtx);
}

void msh_sync_wait(msh_sync *s, int needed)
{
    msh_domain *d = msh_domain_at(s->dom);
    if (MSH_UNLIKELY(msh_host_lock_depth > 0)) {
        /* This thread holds the host lock inside a pass-through call: no
         * one else can progress, so it polls by itself. */
        while (atomic_load_explicit(&s->done, memory_order_acquire) < needed)
            poll_all(1);
        return;
    }
    double spin_until = -1;
    unsigned misses = 0;
    for (;;) {
        if (atomic_load_explicit(&s->done, memory_order_acquire) >= needed)
            return;
        if (take_ownership(d)) {
            atomic_fetch_add_explicit(&spinning.n, 1, memory_order_relaxed);
            while (atomic_load_explicit(&s->done, memory_order_acquire) < needed) {
                /* A run of empty polls gives the core away: with more
                 * threads than cores, the threads this owner woke need it
                 * to post their next operations, and
                 * the peer rank's threads may share the core. Not in hog
                 * mode (above). */
                if (d->poll(d->poll_arg, s->dom, &misses) == 0) {
                    if (yield_due())
                        owner_yield();
                } else {
                    yield_reset();
                }
            }
            atomic_fetch_sub_explicit(&spinning.n, 1, memory_order_relaxed);
            release_ownership(d);
            return;
        }
        /* Someone else progresses this domain. */
        if (msh_cfg.wait == MSH_WAIT_SPIN) {
            sched_yield();
            continue;
        }
        if (msh_cfg.wait == MSH_WAIT_ADAPTIVE && msh_cfg.spin_us > 0) {
            double t = msh_now_us();
            if (spin_until < 0)
                spin_until = t + msh_cfg.spin_us;
            if (t < spin_until && !hog_mode((int64_t)t)) {
                sched_yield();
                continue;
            }
        }
        sleep_until_done_or_unowned(d, s, needed);
    }
}

void msh_sync_finish(msh_sync *s, int claimed)
{
    msh_domain *d = msh_domain_at(s->dom);
    pthread_mutex_lock(&d->mtx);
    while (atomic_load_explicit(&s->done, memory_order_acquire) < claimed) {
        s->needed = claimed;
        s->sleeping = 1;
        sleep_on(&s->cond, &d->mtx);
    }
    s->sleeping = 0;
    pthread_mutex_unlock(&d->mtx);
    pthread_cond_destroy(&s->cond);
}

static MSH_TLS unsigned try_misses; /* this thread's empty tries since its last sweep */

/* A test on a VCI that is a progress domain of its own polls the VCI
 * without taking the domain: the VCI's lock serializes the polling already
 * (with plain stores for a thread alone on it, core/lock.h), and taking
 * and giving back the domain were two atomic read-modify-writes per test,
 * most of an empty test's time on a lane. A try on a domain that a waiter
 * owns polls nothing (a test then polls by msh_progress_test's rule); the
 * domain's sleepers wait for its owner, which a test never is now. */
static int try_vci(msh_domain *d, int dom, int *skipped)
{
    if (atomic_load_explicit(&d->owned, memory_order_relaxed)) {
        *skipped = 1;
        return 0;
    }
    int n = msh_progress_poll(&msh_pool.v[dom], 1) + poll_hook();
    /* Tests that found nothing on their VCI sweep the others, as an owner
     * does, once per MPISHIM_SWEEP_POLLS of them: a sweep looks at every
     * other VCI's lock and ownership, which the threads working there
     * write, so a loop of tests on T VCIs that swept each time passed
     * those lines between the threads at every test (docs/design.md has
     * what that cost). */
    if (n == 0 && ++try_misses >= (unsigned)msh_cfg.sweep_polls) {
        n = sweep_others(dom);
        try_misses = 0;
    }
    if (n)
        try_misses = 0;
    return n;
}

/* *skipped is set when another thread owns the domain and nothing was polled. */
static int progress_try(int vci, int *skipped)
{
    if (MSH_UNLIKELY(msh_host_lock_depth > 0))
        return poll_all(1);
    int dom = msh_progress_domain_of(vci);
    msh_domain *d = msh_domain_at(dom);
    if (msh_progress_per_vci && d->poll == vci_poll)
        return try_vci(d, dom, skipped);
    /* One domain for every VCI (or a replaced poll): one thread at a time
     * polls them all, the others' tries return at once. */
    if (!take_ownership(d)) {
        *skipped = d->poll == vci_poll;
        return 0;
    }
    unsigned misses = 0;
    int n = d->poll(d->poll_arg, dom, &misses);
    release_ownership(d);
    return n;
}

int msh_progress_try(int vci)
{
    int skipped = 0;
    return progress_try(vci, &skipped);
}

/* With a progress thread (or beside a waiter that owns the domain), a
 * thread's tests of one request (or one array, by its first pending
 * handle) one after another, with no post of its own between, are a
 * polling loop: of those after the first, every
 * MSH_TEST_LOOP_POLLS-th polls, the others leave it to the owner's next
 * pass. A test that polls takes the VCI's lock from the progress thread,
 * which holds it most of the time: polling at every test
 * made an empty test many times slower than the host's (docs/design.md). */
#define MSH_TEST_LOOP_POLLS 64
static MSH_TLS struct {
    MPI_Request key;
    unsigned posts; /* msh_progress_posts at the run's first test */
    unsigned n;
} test_loop;
MSH_TLS unsigned msh_progress_posts;

int msh_progress_test(int vci, uint64_t vcis, MPI_Request key)
{
    if (!msh_progress_has_thread() || msh_host_lock_depth > 0) {
        int skipped = 0;
        msh_tp_exhaustive = 1;
        int n = progress_try(vci, &skipped);
        msh_tp_exhaustive = 0;
        /* A waiter that owns the domain polls for everyone, but looks at
         * only some of many pending requests per poll: left to it, a single
         * test beside it said "not complete" of a finished send. Such a
         * test polls the tested VCIs itself, below, as it would beside a
         * progress thread (the same polling-loop rule). */
        if (!skipped)
            return n;
    }
    if (key == MPI_REQUEST_NULL) {
        /* polls, and leaves the run as it is */
    } else if (key == test_loop.key && msh_progress_posts == test_loop.posts) {
        if (++test_loop.n % MSH_TEST_LOOP_POLLS != 0)
            return 0;
    } else {
        test_loop.key = key;
        test_loop.posts = msh_progress_posts;
        test_loop.n = 0;
    }
    /* A progress thread owns the domain for good, so a try would leave
     * every completion to its next pass, and a program that tests once,
     * with nothing else running, would find a finished send not finished.
     * The tested VCIs are polled here, under their locks, as the progress
     * thread's polls are; also one that looks idle: a poll takes its
     * completions off the tracked set before it marks them complete, under
     * the lock. */
    msh_tp_exhaustive = 1;
    int n = 0;
    for (int i = 0; i < msh_pool.n && i < MSH_MAX_VCIS; i++)
        if (vcis & (UINT64_C(1) << i)) {
            msh_vci_lock(&msh_pool.v[i]);
            n += poll_locked(&msh_pool.v[i], 0);
        }
    msh_tp_exhaustive = 0;
    return n;
}

/* ------------------------------------------------------------ progress thread */

/* Consecutive empty passes after which the progress thread checks whether
 * anything is pending at all, and sleeps if not: offload's thread must not
 * take a core while the rank has nothing in flight. */
#define MSH_IDLE_CHECK_POLLS 1024
/* Nothing pending or queued on any VCI, no partitioned receive waiting for
 * its header. Called with msh_progress_asleep already set: a poster adds
 * to a pending set under the VCI's lock and then reads the flag, so either
 * this check sees its request or the poster sees the flag and wakes us;
 * a queued post is a seq_cst push followed by a seq_cst read of the flag,
 * against a seq_cst store of the flag followed by a seq_cst read of the
 * queue here. */
static int nothing_pending(void)
{
    if (msh_sweep_wanted())
        return 0;
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        if (atomic_load_explicit(&v->qhead, memory_order_seq_cst) != NULL)
            return 0;
        msh_vci_lock(v);
        int n = v->tp->ntracked;
        msh_vci_unlock(v);
        if (n)
            return 0;
    }
    return 1;
}

static void idle_sleep(void)
{
    atomic_store_explicit(&msh_progress_asleep, 1, memory_order_seq_cst);
    if (!nothing_pending()) {
        atomic_store_explicit(&msh_progress_asleep, 0, memory_order_relaxed);
        return;
    }
    msh_progress_idle_wait(&progress_thread_stop);
}

/* MPISHIM_PROGRESS_CPU: the CPU the user named, else (auto) the last core
 * of the rank's binding when the launcher bound it to several cores (an
 * unbound rank would put every rank's thread on one CPU). */
static void place_progress_thread(pthread_t t)
{
    int cpu = msh_cfg.progress_cpu >= 0 ? msh_cfg.progress_cpu : msh_topo_progress_cpu();
    if (cpu < 0)
        return;
    /* Sized for cpu: a fixed cpu_set_t holds only CPU_SETSIZE (1024) CPUs. */
    cpu_set_t *set = CPU_ALLOC((size_t)cpu + 1);
    size_t sz = CPU_ALLOC_SIZE((size_t)cpu + 1);
    int rc = -1;
    if (set) {
        CPU_ZERO_S(sz, set);
        CPU_SET_S((size_t)cpu, sz, set);
        rc = pthread_setaffinity_np(t, sz, set);
        CPU_FREE(set);
    }
    if (rc != 0)
        msh_log("MPISHIM_PROGRESS_CPU: cannot bind the progress thread to CPU %d; it runs unbound", cpu);
}

/* ------------------------------------------------------------ the progress thread beside the program's host calls */

/* A program thread inside a host call that runs the host's progress engine
 * (a blocking call that waits for other processes, a wait or test of a
 * request the shim did not make) moves the host itself, as it would raw.
 * The progress thread entering the host meanwhile adds concurrency the
 * program never asked for, and the host may not bear it: Open MPI 4.1's
 * ompio walks its pending file requests in the progress engine without a
 * lock, and a single-threaded program with a receive pending died of
 * SIGSEGV in MPI_File_read_all_end. So while such a call runs, the
 * progress thread's passes post the queues and read the lanes but leave
 * the host alone, unless a program thread sleeps in a shim wait: raw, that
 * thread would be in the host's progress engine as well, and it needs the
 * host's completions reported. (A thread that waits by testing polls the
 * VCIs it tests itself, msh_progress_test.) The other completions are
 * reported once the call returns.
 *
 * A caller counts itself, then waits for the end of a pass that may have
 * entered the host before it counted (an odd pass number: one pass, a few
 * microseconds); the progress thread makes its pass odd, then looks at the
 * count. Both sequentially consistent: one of them sees the other. */
static struct {
    _Alignas(MSH_CACHELINE) _Atomic int n; /* program threads in such calls */
} host_callers;
static struct {
    _Alignas(MSH_CACHELINE) _Atomic unsigned n; /* odd during a pass that may enter the host */
} pt_pass;
static MSH_TLS int host_call_depth; /* this thread's such calls, nested (the host calls MPI_* back) */
static MSH_TLS int is_progress_thread;

int msh_progress_host_enter_slow(void)
{
    if (host_call_depth++ > 0 || is_progress_thread)
        return 1;
    atomic_fetch_add_explicit(&host_callers.n, 1, memory_order_seq_cst);
    /* A thread that holds a VCI's lock (a callback of the host's, inside
     * a poll) or the serialized host's must not wait for a pass that may
     * need that lock. */
    if (msh_host_lock_depth > 0)
        return 1;
    for (int i = 0; i < msh_pool.n; i++)
        if (msh_vci_held_by_me(&msh_pool.v[i]))
            return 1;
    unsigned p = atomic_load_explicit(&pt_pass.n, memory_order_seq_cst);
    if (p & 1)
        while (atomic_load_explicit(&pt_pass.n, memory_order_acquire) == p)
            sched_yield();
    return 1;
}

void msh_progress_host_exit_slow(void)
{
    if (--host_call_depth > 0 || is_progress_thread)
        return;
    atomic_fetch_sub_explicit(&host_callers.n, 1, memory_order_release);
}

/* The pass beside such a call: each VCI's queued posts, the lanes without
 * their host polls and pokes. Not the partitioned sweep, which enters the
 * host: a receive waiting for its header during the call is the helper's
 * (sync/assist.h), whose polls back off to one a millisecond, where this
 * thread's passes follow each other (docs/design.md). */
static int pass_beside_host_call(void)
{
    int n = 0;
    msh_tp_lanes_only = 1;
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        if (!msh_tp_direct) {
            n += poll_vci(v, 1, 0);
        } else if (msh_queue_nonempty(v)) {
            msh_vci_lock(v);
            msh_queue_drain(v);
            msh_vci_unlock(v);
        }
    }
    msh_tp_lanes_only = 0;
    return n;
}

static int progress_pass(void)
{
    unsigned p = atomic_load_explicit(&pt_pass.n, memory_order_relaxed);
    atomic_store_explicit(&pt_pass.n, p + 1, memory_order_seq_cst);
    if (atomic_load_explicit(&host_callers.n, memory_order_seq_cst) > 0 &&
        atomic_load_explicit(&msh_domain_at(0)->sleepers, memory_order_relaxed) == 0) {
        atomic_store_explicit(&pt_pass.n, p + 2, memory_order_release);
        return pass_beside_host_call();
    }
    int n = poll_all(1);
    atomic_store_explicit(&pt_pass.n, p + 2, memory_order_release);
    return n;
}

static void *progress_main(void *arg)
{
    (void)arg;
    is_progress_thread = 1;
    unsigned empty = 0;
    while (!atomic_load_explicit(&progress_thread_stop, memory_order_acquire)) {
        if (progress_pass() > 0) {
            empty = 0;
            continue;
        }
        if (++empty % MSH_IDLE_CHECK_POLLS == 0)
            idle_sleep();
        else
            sched_yield();
    }
    return NULL;
}

int msh_progress_init(void)
{
    msh_progress_per_vci =
        msh_cfg.progress == MSH_PROGRESS_VCI || (msh_cfg.progress == MSH_PROGRESS_COMBINE && !msh_tp_direct);
    if (msh_domains_init(msh_progress_per_vci ? msh_pool.n : 1, vci_poll) != 0)
        return -1;
    cores_here = msh_topo_default_vcis(1 << 20);
    if (msh_progress_has_thread()) {
        /* The progress thread owns the one domain for good. */
        atomic_store(&msh_domain_at(0)->owned, 1);
        atomic_store(&progress_thread_stop, 0);
        if (pthread_create(&progress_thread, NULL, progress_main, NULL) != 0)
            return -1;
        msh_progress_thread_on = 1;
        /* Named and placed before init returns: top -H, gdb and the tests
         * can tell it apart from the program's threads. */
        pthread_setname_np(progress_thread, "msh-progress");
        place_progress_thread(progress_thread);
    }
    return 0;
}

void msh_progress_fini(void)
{
    if (msh_progress_thread_on) {
        atomic_store_explicit(&progress_thread_stop, 1, memory_order_release);
        msh_progress_wake_slow();
        pthread_join(progress_thread, NULL);
        msh_progress_thread_on = 0;
        atomic_store(&msh_domain_at(0)->owned, 0);
    }
}

void msh_progress_reclaim_comms(void)
{
    if (!msh_tp_comm_reclaim_begin())
        return;
    int all = 1;
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        if (msh_vci_held_by_me(v)) {
            all = 0;
            break;
        }
        msh_vci_lock(v);
        msh_tp_mark_comms(v->tp);
        msh_vci_unlock(v);
    }
    msh_tp_comm_reclaim_end(all);
}
