/* Sync objects, progress domains and completion (see sync.h). */
#include "sync/sync.h"

#include <stdlib.h>
#include <string.h>

#include "core/config.h"

static msh_domain *domains;
static int ndomains;
static msh_poll_fn default_poll;

int msh_domains_init(int n, msh_poll_fn poll)
{
    domains = aligned_alloc(MSH_CACHELINE, sizeof(msh_domain) * (size_t)n);
    if (!domains)
        return -1;
    memset(domains, 0, sizeof(msh_domain) * (size_t)n);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&domains[i].mtx, NULL);
        domains[i].poll = poll;
    }
    ndomains = n;
    default_poll = poll;
    return 0;
}

int msh_progress_ndomains(void) { return ndomains; }
const msh_domain *msh_progress_domain(int i) { return &domains[i]; }
msh_domain *msh_domain_at(int i) { return &domains[i]; }

int msh_progress_per_vci;

int msh_progress_domain_of(int vci)
{
    return msh_progress_per_vci ? vci : 0;
}

void msh_progress_set_poll(int d, msh_poll_fn fn, void *arg)
{
    domains[d].poll = fn ? fn : default_poll;
    domains[d].poll_arg = fn ? arg : NULL;
}

void msh_progress_describe(int i, msh_progress_info *out)
{
    msh_domain *d = &domains[i];
    pthread_mutex_lock(&d->mtx);
    out->owned = atomic_load_explicit(&d->owned, memory_order_relaxed);
    out->owner_tid = atomic_load_explicit(&d->owner_tid, memory_order_relaxed);
    out->sleepers = 0;
    for (msh_sync *w = d->waiters; w; w = w->next)
        out->sleepers++;
    pthread_mutex_unlock(&d->mtx);
}

/* ------------------------------------------------------------ the layer above */

msh_sync_upper msh_upper;

void msh_sync_set_upper(const msh_sync_upper *u)
{
    msh_upper = *u;
}

/* ------------------------------------------------------------ completion */

void msh_notify_flush(msh_notify *b)
{
    for (int i = 0; i < b->n; i++) {
        msh_sync *s = b->s[i];
        if (s->owner == &msh_vci_self) {
            /* The waiter polls for itself: it neither sleeps nor finishes
             * s while it is here, so no mutex and no wake-up. */
            atomic_fetch_add_explicit(&s->done, b->cnt[i], memory_order_release);
            continue;
        }
        msh_domain *d = &domains[s->dom];
        /* Counted under the mutex: once the waiter has seen its count and
         * taken the mutex, no poller touches s again (msh_sync_finish). */
        pthread_mutex_lock(&d->mtx);
        int done = atomic_fetch_add_explicit(&s->done, b->cnt[i], memory_order_release) + b->cnt[i];
        /* Wake the sleeper only when its wait is over: a Waitall of W
         * requests completing over many polls costs one wake-up, not many. */
        if (s->sleeping && done >= s->needed) {
            d->st.wakeups++;
            pthread_cond_signal(&s->cond);
        }
        pthread_mutex_unlock(&d->mtx);
    }
    b->n = 0;
}

static void notify_add(msh_notify *b, msh_sync *s)
{
    for (int i = 0; i < b->n; i++)
        if (b->s[i] == s) {
            b->cnt[i]++;
            return;
        }
    if (b->n == MSH_NOTIFY_MAX)
        msh_notify_flush(b);
    b->s[b->n] = s;
    b->cnt[b->n] = 1;
    b->n++;
}

void msh_notify_complete(msh_request *r, msh_notify *b)
{
    atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
    msh_sync *s = atomic_load_explicit(&r->sync, memory_order_relaxed);
    atomic_store_explicit(&r->sync, MSH_SYNC_CLAIMED, memory_order_relaxed);
    if (s && s != MSH_SYNC_CLAIMED)
        notify_add(b, s);
}

void msh_progress_complete(msh_request *r)
{
    msh_notify b;
    b.n = 0; /* the rest is written before it is read */
    msh_notify_complete(r, &b);
    msh_notify_flush(&b);
}

int msh_vci_pending_add(msh_vci *v, msh_request *r)
{
    int rc = msh_tp_track(v->tp, r, r->host);
    if (MSH_LIKELY(rc == MPI_SUCCESS))
        msh_progress_wake();
    return rc;
}

/* ------------------------------------------------------------ the progress thread's sleep */

_Atomic int msh_progress_asleep;
static pthread_mutex_t idle_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond = PTHREAD_COND_INITIALIZER;
static uint64_t idle_sleeps; /* under idle_mtx */

void msh_progress_wake_slow(void)
{
    pthread_mutex_lock(&idle_mtx);
    if (atomic_load_explicit(&msh_progress_asleep, memory_order_relaxed)) {
        atomic_store_explicit(&msh_progress_asleep, 0, memory_order_relaxed);
        pthread_cond_signal(&idle_cond);
    }
    pthread_mutex_unlock(&idle_mtx);
}

void msh_progress_idle_wait(const _Atomic int *stop)
{
    /* No timeout: a missed wake-up would hide here as a slow run, so the
     * protocol of msh_progress_asleep is the only way out (tests under
     * PROGRESS=thread and offload hang if it is wrong). */
    pthread_mutex_lock(&idle_mtx);
    idle_sleeps++;
    while (atomic_load_explicit(&msh_progress_asleep, memory_order_relaxed) &&
           !atomic_load_explicit(stop, memory_order_acquire))
        pthread_cond_wait(&idle_cond, &idle_mtx);
    atomic_store_explicit(&msh_progress_asleep, 0, memory_order_relaxed);
    pthread_mutex_unlock(&idle_mtx);
}

uint64_t msh_progress_idle_sleeps(void)
{
    pthread_mutex_lock(&idle_mtx);
    uint64_t n = idle_sleeps;
    pthread_mutex_unlock(&idle_mtx);
    return n;
}
