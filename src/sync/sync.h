/* Sync objects, progress domains and completion: the part of the progress
 * engine that completing a request needs (the polling, ownership and
 * waiting are in progress.h, above). After the sync object of Open MPI's
 * opal/threads/wait_sync and Patinyasakdikul's "Improving MPI Threading
 * Support for Current Hardware Architectures" (PhD dissertation, University
 * of Tennessee, 2019, chapter 4).
 *
 * A thread that must wait attaches its shim requests to a sync object on its
 * stack and waits for a count of completions. In each progress domain one
 * waiting thread at a time is the progress owner: it polls the VCIs'
 * transports, completes shim requests, counts them on the sync objects they
 * are attached to and wakes those threads. Other waiters spin, sleep, or
 * spin and then sleep (MPISHIM_WAIT). When the owner's own wait is
 * satisfied it hands ownership to the first sleeping waiter, so a domain
 * with waiters always has an owner.
 *
 * Domains (MPISHIM_PROGRESS): `global` has one domain whose owner polls every
 * VCI; `vci` has one per VCI, and an owner that polls its VCI in vain
 * MPISHIM_SWEEP_POLLS times sweeps every VCI once, so that no VCI waits for
 * progress that only its own waiters would make; `thread` has one domain
 * owned for good by a progress thread.
 *
 * No lock is held while a thread sleeps or spins, and no shim lock is ever
 * held across a blocking host call. Lock order: VCI lock, then domain
 * mutex. */
#ifndef MSH_SYNC_SYNC_H
#define MSH_SYNC_SYNC_H

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "sync/request.h"
#include "transport/transport.h"
#include "vci/vci.h"

typedef struct msh_sync {
    _Atomic int done;       /* completions counted so far */
    int dom;                /* progress domain */
    int sleeping;           /* under the domain mutex */
    int needed;             /* under the domain mutex: wake the sleeper only at this count */
    const void *owner;      /* the waiting thread (its msh_vci_self address) */
    pthread_cond_t cond;
    struct msh_sync *next;  /* domain's list of sleeping waiters */
} msh_sync;

typedef struct msh_domain_stats {
    uint64_t ownerships;               /* by the owner, ordered by `owned` */
    uint64_t handoffs, sleeps, wakeups; /* under the domain mutex */
} msh_domain_stats;

/* A domain's poll: one progress pass by its owner, returning the
 * completions it made (each through msh_progress_complete or the host
 * poll's own batch); *misses is the owner's count of empty passes. */
typedef int (*msh_poll_fn)(void *arg, int dom, unsigned *misses);

typedef struct msh_domain {
    _Alignas(MSH_CACHELINE) pthread_mutex_t mtx;
    /* Taken by compare-and-swap and given back by a store, without the
     * mutex: a wait (or a test under one domain for every VCI) pays two
     * atomic operations, not two lock/unlock pairs; a test on a VCI that
     * is a domain of its own takes none (msh_progress_try). A sleeper
     * counts itself in `sleepers` and then reads `owned`; a releaser
     * clears `owned` and then reads `sleepers` (both sequentially
     * consistent), so either the sleeper sees the domain free and takes
     * it, or the releaser sees the sleeper and hands it on under the
     * mutex. */
    _Atomic int owned;
    _Atomic int sleepers;   /* threads in the waiters list (changed under mtx) */
    _Atomic long owner_tid; /* the owner's kernel thread id (watchdog report) */
    msh_sync *waiters;      /* under mtx: sleeping waiters, FIFO */
    msh_sync *waiters_tail;
    msh_domain_stats st;
    msh_poll_fn poll;       /* set at init: the host poll unless replaced */
    void *poll_arg;
} msh_domain;

/* What the sync layer needs from the partitioned layer above it, which it
 * may not call (layers depend downward only). Registered once, by MPI_Init*
 * (intercept/init.c) before the runtime starts; read without a lock after. */
typedef struct msh_sync_upper {
    /* While *sweep_wanted is non-zero, pollers also call sweep (the
     * partitioned receives still waiting for their header), and calls that
     * would block in the host poll instead. */
    int (*sweep)(void);
    _Atomic int *sweep_wanted;
} msh_sync_upper;

extern msh_sync_upper msh_upper;
void msh_sync_set_upper(const msh_sync_upper *u);

static inline int msh_sweep_wanted(void)
{
    return msh_upper.sweep_wanted && MSH_UNLIKELY(atomic_load_explicit(msh_upper.sweep_wanted, memory_order_relaxed));
}

/* The progress thread (PROGRESS=thread, offload) sleeps while nothing is
 * pending or queued; whatever adds pending or queued work calls
 * msh_progress_wake afterwards (after a pending-set add, under or after the
 * VCI lock; after a queue push). One load while the thread is awake. */
extern _Atomic int msh_progress_asleep;
void msh_progress_wake_slow(void);
static inline void msh_progress_wake(void)
{
    if (MSH_UNLIKELY(atomic_load_explicit(&msh_progress_asleep, memory_order_seq_cst)))
        msh_progress_wake_slow();
}
/* Times the progress thread went to sleep (MPISHIM_STATS). */
uint64_t msh_progress_idle_sleeps(void);

int msh_progress_ndomains(void);
const msh_domain *msh_progress_domain(int i);

/* A domain's state for the watchdog's report (takes the domain mutex). */
typedef struct msh_progress_info {
    int owned;
    long owner_tid;
    int sleepers;
} msh_progress_info;
void msh_progress_describe(int d, msh_progress_info *out);

/* Whether each VCI is a progress domain of its own (an owner per VCI, the
 * sweep of unowned ones): MPISHIM_PROGRESS=vci, and combine once lanes
 * carry the point-to-point traffic. Lanes share nothing, so one owner
 * polling every lane for the whole process would funnel the threads
 * through it again (and take every lane's lock from the threads using
 * them). Set by msh_progress_init (progress.h). */
extern int msh_progress_per_vci;

/* Domain that progresses requests of VCI vci. */
int msh_progress_domain_of(int vci);

/* Replace domain d's poll (NULL: back to polling the VCIs), before any thread
 * waits on it: the seam through which a unit test drives the sync objects
 * without MPI (tests/unit/test_sync.c). A thread that holds the host lock
 * (msh_host_lock_depth) and the progress thread poll the host directly. */
void msh_progress_set_poll(int d, msh_poll_fn fn, void *arg);

/* r, whose status the caller filled in, is complete: mark it so, claim it,
 * and count it on its waiter's sync object, waking that waiter when its
 * wait is over. Under r's VCI lock, not under a domain mutex. */
void msh_progress_complete(msh_request *r);

/* r finished as d says (its status taken): a transport's own error is
 * kept for the call that retires r to raise (msh_tp_done.own_error). */
static inline void msh_req_keep_error(msh_request *r, const msh_tp_done *d)
{
    if (MSH_UNLIKELY(d->own_error)) {
        r->q.comm = d->raise_on;
        r->q.own_error = 1;
    }
}

static inline void msh_sync_init(msh_sync *s, int dom)
{
    atomic_init(&s->done, 0);
    s->dom = dom;
    s->sleeping = 0;
    s->needed = 1;
    s->owner = &msh_vci_self;
    s->next = NULL;
    pthread_cond_init(&s->cond, NULL);
}

/* Attach r to s, under r's VCI lock: 1 if its completion will be counted
 * on s, 0 if progress already completed it. Completion (msh_notify_complete)
 * runs under the same lock, so the handshake needs no atomic
 * read-modify-write: a waiter attaching a window of W requests pays one
 * lock for the run (none extra when the lock is biased to it), not W
 * locked instructions. */
static inline int msh_sync_attach(msh_sync *s, msh_request *r)
{
    if (atomic_load_explicit(&r->sync, memory_order_relaxed) != NULL)
        return 0;
    atomic_store_explicit(&r->sync, s, memory_order_relaxed);
    return 1;
}

/* Detach r from s, under r's VCI lock: 1 if detached before progress
 * claimed it (it will not be counted), 0 if its completion is or will be
 * counted on s. */
static inline int msh_sync_detach(msh_sync *s, msh_request *r)
{
    if (atomic_load_explicit(&r->sync, memory_order_relaxed) != s)
        return 0;
    atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
    return 1;
}

/* Monotonic microseconds, for bounded spins. */
static inline double msh_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* ------------------------------------------------------------ completion */

/* Completions counted per sync object during one poll, flushed together so
 * that a Waitall of W requests costs the waiter's domain mutex once, not W
 * times. */
#define MSH_NOTIFY_MAX 16
typedef struct msh_notify {
    int n;
    msh_sync *s[MSH_NOTIFY_MAX];
    int cnt[MSH_NOTIFY_MAX];
} msh_notify;

/* Under r's VCI lock: r is complete (its status filled in): publish it,
 * claim its completion and count it in b for the sync object attached to
 * it, if any. */
void msh_notify_complete(msh_request *r, msh_notify *b);
/* Count b's completions on their sync objects, waking the waiters whose
 * wait is over. Not under a domain mutex. */
void msh_notify_flush(msh_notify *b);

/* Under the VCI lock: v's transport tracks r (r->host posted), and the
 * progress thread, if asleep, is told. Returns MPI_SUCCESS or
 * MPI_ERR_NO_MEM. */
int msh_vci_pending_add(msh_vci *v, msh_request *r);

/* Domain storage, made by msh_progress_init: n domains polled by poll. */
int msh_domains_init(int n, msh_poll_fn poll);
msh_domain *msh_domain_at(int i);

/* The progress thread's sleep while nothing is pending (progress.c decides
 * when; msh_progress_wake ends it): returns once woken or *stop is set. */
void msh_progress_idle_wait(const _Atomic int *stop);

#endif
