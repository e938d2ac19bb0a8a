/* The watchdog (see watchdog.h). */
#define _GNU_SOURCE 1
#include "sync/watchdog.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "core/runtime.h"
#include "sync/queue.h"
#include "sync/notes.h"
#include "sync/sync.h"
#include "vci/vci.h"

#define TICK_MS 100
#define MAX_LINES_PER_VCI 32

static pthread_t thread;
static _Atomic int stop_flag;
static _Atomic int usr1; /* lock-free, so async-signal-safe */
static struct sigaction old_usr1;
static int limit_ticks;

static void on_usr1(int sig)
{
    (void)sig;
    atomic_store_explicit(&usr1, 1, memory_order_relaxed); /* reported at the next tick */
}

/* A growing text buffer; every line gets the "mpishim: " prefix. */
typedef struct text {
    char *p;
    size_t n, cap;
} text;

__attribute__((format(printf, 2, 3))) static void line(text *t, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0)
        return;
    if ((size_t)k >= sizeof buf)
        k = (int)sizeof buf - 1;
    size_t need = t->n + (size_t)k + 16;
    if (need > t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 8192;
        while (cap < need)
            cap *= 2;
        char *p = realloc(t->p, cap);
        if (!p)
            return;
        t->p = p;
        t->cap = cap;
    }
    t->n += (size_t)sprintf(t->p + t->n, "mpishim: %s\n", buf);
}

static const char *kind_name(int k)
{
    static const char *const names[] = { "send", "recv", "coll", "psend", "precv", "part", "sendrecv" };
    return k >= 0 && k < (int)(sizeof names / sizeof names[0]) ? names[k] : "?";
}

static void comm_name(MPI_Comm c, char *buf, size_t len)
{
    if (c == MPI_COMM_WORLD)
        snprintf(buf, len, "MPI_COMM_WORLD");
    else if (c == MPI_COMM_SELF)
        snprintf(buf, len, "MPI_COMM_SELF");
    else
        snprintf(buf, len, "comm 0x%llx", (unsigned long long)(uintptr_t)c);
}

static void report(const char *why, uint32_t tick)
{
    text t = { 0 };
    line(&t, "watchdog, rank %d: %s", msh_rt.world_rank, why);
    for (int d = 0; d < msh_progress_ndomains(); d++) {
        msh_progress_info pi;
        msh_progress_describe(d, &pi);
        if (msh_progress_has_thread())
            line(&t, "  progress: the progress thread; %d threads asleep in shim waits", pi.sleepers);
        else if (pi.owned)
            line(&t, "  progress domain %d: owned by thread %ld; %d threads asleep in shim waits", d, pi.owner_tid,
                 pi.sleepers);
        else
            line(&t, "  progress domain %d: no owner; %d threads asleep in shim waits", d, pi.sleepers);
    }
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        msh_vci_lock(v);
        int n = v->tp->ntracked;
        line(&t, "  VCI %d: %d pending, %llu completed so far", i, n, (unsigned long long)v->st.completions);
        for (int k = 0; k < n && k < MAX_LINES_PER_VCI; k++) {
            const msh_request *r = msh_tp_tracked(v->tp, k);
            const msh_note *in = msh_note_of(r);
            double age = (double)(uint32_t)(tick - in->tick) * TICK_MS / 1000.0;
            if (in->noted) {
                char cn[64];
                comm_name(in->comm, cn, sizeof cn);
                line(&t, "    %s %s %d tag %d on %s, pending %.1f s%s", kind_name(r->kind),
                     r->kind == MSH_KIND_SEND || r->kind == MSH_KIND_PSEND ? "to" : "from", in->peer, in->tag, cn,
                     age, r->freed ? " (freed by the program)" : "");
            } else {
                line(&t, "    %s, pending %.1f s%s", kind_name(r->kind), age,
                     r->freed ? " (freed by the program)" : "");
            }
        }
        if (n > MAX_LINES_PER_VCI)
            line(&t, "    ... and %d more", n - MAX_LINES_PER_VCI);
        msh_vci_unlock(v);
    }
    if (t.p) {
        ssize_t w = write(2, t.p, t.n);
        (void)w;
    }
    free(t.p);
}

static void *watch_main(void *arg)
{
    (void)arg;
    uint64_t last_total = 0;
    uint32_t last_change = 0;
    int armed = 1;
    while (!atomic_load_explicit(&stop_flag, memory_order_acquire)) {
        struct timespec ts = { 0, TICK_MS * 1000000L };
        nanosleep(&ts, NULL);
        uint32_t tick = msh_notes_tick();
        uint64_t total = 0;
        long pending = 0;
        for (int i = 0; i < msh_pool.n; i++) {
            msh_vci *v = &msh_pool.v[i];
            msh_vci_lock(v);
            total += v->st.completions;
            pending += v->tp->ntracked;
            msh_vci_unlock(v);
        }
        if (total != last_total || pending == 0) {
            last_total = total;
            last_change = tick;
            armed = 1;
        }
        if (atomic_exchange_explicit(&usr1, 0, memory_order_relaxed)) {
            report("SIGUSR1", tick);
        } else if (armed && (int)(tick - last_change) >= limit_ticks) {
            char why[128];
            snprintf(why, sizeof why, "no request completed for %d s while %ld are pending",
                     limit_ticks * TICK_MS / 1000, pending);
            report(why, tick);
            armed = 0; /* once per stall */
        }
    }
    return NULL;
}

int msh_watchdog_start(int seconds)
{
    if (seconds <= 0)
        return 0;
    if (msh_notes_start() != 0)
        return -1;
    limit_ticks = seconds * (1000 / TICK_MS);
    atomic_store_explicit(&stop_flag, 0, memory_order_relaxed);
    /* The thread must not take the program's signals. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    int rc = pthread_create(&thread, NULL, watch_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        msh_notes_stop();
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, &old_usr1);
    msh_notes_on = 1;
    return 0;
}

void msh_watchdog_stop(void)
{
    if (!msh_notes_on)
        return;
    sigaction(SIGUSR1, &old_usr1, NULL);
    atomic_store_explicit(&stop_flag, 1, memory_order_release);
    pthread_join(thread, NULL);
    msh_notes_on = 0;
}
