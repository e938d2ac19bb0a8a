/* Window side table and RMA routing: a window's operations spread over
 * internal windows as communicators spread over VCIs (Zambre et al., ICS
 * 2020, on windows and VCIs), while epochs and synchronization cover all of
 * them.
 *
 * A user window maps to K internal windows over the same memory. Window 0
 * is the handle the user holds, made with the user's own flavor by the
 * user's call, so every query the shim does not change (name, group, info,
 * attributes, errhandler, shared_query) answers for the user window as the
 * host would. Windows 1..K-1 are made inside the same collective call over
 * window 0's memory, with MPI_ERRORS_RETURN: their errors are reported
 * through window 0's handler.
 *
 * Routing: Put and Get (and Rput/Rget) go to the window of their target
 * (MPISHIM_WIN_ROUTE=target, the default) or of the calling thread
 * (`thread`). Accumulate-type operations always go to their target's
 * window, so that every accumulate to one target uses one window: MPI
 * defines their atomicity and ordering only within a window.
 *
 * K: MPISHIM_WIN_K or the info key mpishim_win_k (a number or "auto").
 * auto = the VCI pool size for windows whose flavor the internal windows
 * share (MPI_Win_create, MPI_Win_create_dynamic); 1 for MPI_Win_allocate and
 * MPI_Win_allocate_shared, whose extra windows would have to be made with
 * MPI_Win_create over the allocated memory: Open MPI 4.1 serves those by a
 * different component, 100x slower on one node (0.45 vs 52 M Put/s measured
 * here), so splitting would cost what it means to win. 1 also for a program
 * below MPI_THREAD_MULTIPLE.
 *
 * MPI_Win_allocate gets its memory with a size rounded up to 16 bytes:
 * MPICH 4.0.2 (ch4:ucx) otherwise returns a base pointer shifted by
 * (size mod 16) bytes from where remote operations land. The user's size is
 * what MPI_WIN_SIZE and MPI_Win_shared_query report.
 *
 * MPI_Win_flush_local as MPI_Win_flush (MPISHIM_WIN_FLUSH_LOCAL; auto = on
 * MPICH ch4:ucx): MPICH 4.0.2 keeps one completion level per window and
 * target, which a Get sets to "local flush needed" and a Put to "flush
 * needed"; flush_local acts only on the first, so after Get, Put to the same
 * target, flush_local returns with the Get unfinished (one thread: 31 to 40
 * of 40 Gets measured; tests/mpi/rma_flush_local.c; with threads, another
 * thread's Put in between is enough). MPI_Win_flush acts on both levels,
 * costs the same network flush there, and completes more than flush_local
 * must. */
#ifndef MSH_VCI_WIN_H
#define MSH_VCI_WIN_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/config.h"
#include "core/htab.h"

#define MSH_WIN_MAX_K 64

/* A target's lock epoch under target routing. Window 0 carries the epoch
 * (every epoch to that target locks it first, so exclusive epochs exclude
 * each other there); the target's own window tmap[t] is locked at the first
 * operation routed to it, with the same type and assertion. A thread alone
 * making Puts and Gets stays on window 0 and pays one lock, as without the
 * shim; taking window 0 first and tmap[t] > 0 second keeps every process's
 * order increasing, as MPI_Win_lock_all's is. */
enum { MSH_WIN_TL_NONE, MSH_WIN_TL_W0, MSH_WIN_TL_BOTH };
typedef struct msh_win_tlock {
    _Atomic int state; /* MSH_WIN_TL_* */
    int type, assert_;
} msh_win_tlock;

typedef struct msh_win {
    msh_hent h;                 /* side-table key: the handle */
    MPI_Win user;               /* == wins[0] */
    int k;                      /* internal windows */
    MPI_Win *wins;
    msh_win_route route;
    int flavor;                 /* MPI_WIN_FLAVOR_* */
    int nranks, rank;           /* in the window's group */
    uint8_t *tmap;              /* target rank -> internal window */
    MPI_Aint size;              /* the user's size (MPI_WIN_SIZE) */
    MPI_Aint *sizes;            /* every rank's user size, when rounded */
    _Atomic uint64_t exposed;   /* PSCW: internal windows whose exposure epoch is open */
    MPI_Comm inner;             /* congruent with the window's communicator, without its
                                 * attributes: internal windows 1..k-1 are made over it,
                                 * and it lives as long as they do (MPICH 4.0 names a
                                 * window after its communicator's context id: freed
                                 * early, the id comes back for another window, and
                                 * accumulates land in the wrong one); or MPI_COMM_NULL */
    _Atomic uintptr_t solo;     /* the one thread that has made Puts and Gets on the
                                 * window so far (its msh_win_thread_token), 0 before */
    _Atomic int spread;         /* a second thread has: Puts and Gets are routed */
    _Atomic int acc_others;     /* an accumulate went to a window other than 0 */
    MPI_Comm arrive;            /* fence over passive target (MPISHIM_WIN_FENCE, info
                                 * mpishim_win_fence = passive): inner, for the fence's
                                 * barrier; else MPI_COMM_NULL */
    int fence_all;              /* MPISHIM_WIN_FENCE=all: the host's fence on every window */
    /* Otherwise a fence is the host's fence on window 0 alone, and windows
     * 1..K-1 are held in a lock_all(MPI_MODE_NOCHECK) epoch of the shim's
     * from the first fence until a synchronization of another kind (or
     * MPI_MODE_NOSUCCEED, or the free) releases it (under extend_mu). */
    _Atomic int fence_held;
    /* Lock epochs under target routing, allocated together at the first
     * MPI_Win_lock: one entry per target, and per internal window the
     * number of targets whose epoch has locked it too. */
    _Atomic(msh_win_tlock *) tl;
    _Atomic int *nheld;         /* set before tl */
    _Atomic int nlocked;        /* targets with an epoch open through tl */
    pthread_mutex_t extend_mu;  /* one thread locks a target's window at a time */
} msh_win;

extern msh_htab msh_win_table;
/* Live windows with K > 1: while there are none (every allocated window by
 * default), routing is one load of this counter. */
extern _Atomic int msh_win_nsplit;
/* MPI_Win_flush_local(_all) is made as MPI_Win_flush(_all) (see above);
 * set at init, before the program can have a window. */
extern _Atomic int msh_win_local_as_flush;

/* Live windows whose fence the shim makes (arrive set). */
extern _Atomic int msh_win_npassive;

/* Reasons an RMA call cannot go straight to the host: 1 while the runtime is
 * off (before MPI_Init, after MPI_Finalize, disabled, below MULTIPLE) or
 * serializes the host, plus one per live window with K > 1. While it is 0,
 * MPI_Put and friends are one relaxed load and a tail call. Relaxed: the
 * gate changes inside init, finalize and collective window calls, which
 * every thread that uses the windows is already ordered after. */
extern _Atomic int msh_win_gate;
static inline int msh_win_direct(void)
{
    return atomic_load_explicit(&msh_win_gate, memory_order_relaxed) == 0;
}
/* The runtime starts (concurrent host) or stops: opens or closes the gate. */
void msh_win_direct_runtime(int on);
extern MSH_TLS int msh_win_thread_slot;
int msh_win_thread_slot_assign(void);

extern MSH_TLS msh_htab_memo msh_win_memo;
static inline msh_win *msh_win_lookup(MPI_Win w)
{
    return (msh_win *)msh_htab_lookup_memo(&msh_win_table, msh_handle_key(&w, sizeof w), &msh_win_memo);
}

/* Window j of the target's lock epoch is still to be locked (see
 * msh_win_tlock). Relaxed for the count: the program orders a thread's
 * operation after the MPI_Win_lock that opened its epoch. */
static inline int msh_win_unlocked(msh_win *e, int target, int j)
{
    if (j == 0 || MSH_LIKELY(atomic_load_explicit(&e->nlocked, memory_order_relaxed) == 0))
        return 0;
    msh_win_tlock *tl = atomic_load_explicit(&e->tl, memory_order_acquire);
    return tl && atomic_load_explicit(&tl[target].state, memory_order_acquire) == MSH_WIN_TL_W0;
}

/* Internal window for an accumulate-type operation to target; *extend is
 * set to the window's entry when the target's lock epoch must first lock
 * it (msh_win_extend). */
static inline MPI_Win msh_win_route_acc(MPI_Win w, int target, msh_win **extend)
{
    if (MSH_LIKELY(atomic_load_explicit(&msh_win_nsplit, memory_order_relaxed) == 0))
        return w;
    msh_win *e = msh_win_lookup(w);
    if (MSH_LIKELY(!e || e->k == 1) || (unsigned)target >= (unsigned)e->nranks)
        return w; /* MPI_PROC_NULL and invalid ranks: the host answers */
    int t = e->tmap[target];
    if (t != 0 && !atomic_load_explicit(&e->acc_others, memory_order_relaxed))
        atomic_store_explicit(&e->acc_others, 1, memory_order_relaxed); /* flushes look (win.c) */
    if (MSH_UNLIKELY(msh_win_unlocked(e, target, t)))
        *extend = e;
    return e->wins[t];
}

/* A token of the calling thread, distinct among live threads. */
static inline uintptr_t msh_win_thread_token(void)
{
    return (uintptr_t)&msh_win_thread_slot;
}

/* Puts and Gets stay on window 0 while one thread alone makes them: the
 * internal windows only pay once threads use the window concurrently. On
 * Open MPI 4.1 they are served by another one-sided component than an
 * allocated window 0 (about 90x slower on one node), and every host spends
 * something routing. Put and Get have no order to keep, and synchronization
 * covers all K windows, so the switch may happen at any operation; once a
 * second thread has come, it stays switched. */
static inline int msh_win_solo(msh_win *e)
{
    if (MSH_LIKELY(atomic_load_explicit(&e->spread, memory_order_relaxed)))
        return 0;
    uintptr_t me = msh_win_thread_token(), first = atomic_load_explicit(&e->solo, memory_order_relaxed);
    if (first == me ||
        (first == 0 && atomic_compare_exchange_strong_explicit(&e->solo, &first, me, memory_order_relaxed,
                                                               memory_order_relaxed)))
        return 1;
    atomic_store_explicit(&e->spread, 1, memory_order_relaxed);
    return 0;
}

/* Internal window for a Put or Get to target (*extend as above). */
static inline MPI_Win msh_win_route_data(MPI_Win w, int target, msh_win **extend)
{
    if (MSH_LIKELY(atomic_load_explicit(&msh_win_nsplit, memory_order_relaxed) == 0))
        return w;
    msh_win *e = msh_win_lookup(w);
    if (MSH_LIKELY(!e || e->k == 1) || (unsigned)target >= (unsigned)e->nranks || msh_win_solo(e))
        return w;
    if (e->route == MSH_WIN_ROUTE_THREAD) {
        int s = msh_win_thread_slot >= 0 ? msh_win_thread_slot : msh_win_thread_slot_assign();
        return e->wins[s % e->k];
    }
    int t = e->tmap[target];
    if (MSH_UNLIKELY(msh_win_unlocked(e, target, t)))
        *extend = e;
    return e->wins[t];
}

/* How a window is to be made, from the user's call. */
typedef struct msh_win_args {
    int flavor;        /* MPI_WIN_FLAVOR_CREATE/ALLOCATE/SHARED/DYNAMIC */
    MPI_Aint size;
    MPI_Aint disp_unit;
    int large;         /* the MPI-4 _c variant (disp_unit is an MPI_Aint) */
    MPI_Info info;
    MPI_Comm comm;
    void *base;        /* create: the user's memory */
    void *baseptr;     /* allocate, shared: where to store the base */
    int split;         /* 0: K = 1 (program below MPI_THREAD_MULTIPLE) */
} msh_win_args;

/* The user's constructor, done the shim's way (collective over a->comm). */
int msh_win_make(msh_win_args *a, MPI_Win *win);
/* MPI_Win_free: internal windows, then the user's (collective). */
int msh_win_free(MPI_Win *win);
/* Free every entry still registered (finalize); returns their number. */
int msh_win_fini(void);

/* Synchronization over every internal window (each returns the first
 * error, reported through the user window's handler by the caller). */
int msh_win_fence(msh_win *e, int assert_);
/* Before a synchronization that is not a fence (lock, lock_all, post,
 * start, free): the fences' epoch on windows 1..K-1 ends (local). */
int msh_win_fence_release(msh_win *e);
int msh_win_post(msh_win *e, MPI_Group g, int assert_);
int msh_win_start(msh_win *e, MPI_Group g, int assert_);
int msh_win_complete(msh_win *e);
int msh_win_test(msh_win *e, int *flag);
int msh_win_lock(msh_win *e, int type, int rank, int assert_);
/* Lock the target's own window in its open lock epoch (msh_win_tlock);
 * nothing if another thread did. May wait for the target. */
int msh_win_extend(msh_win *e, int target);
int msh_win_unlock(msh_win *e, int rank);
int msh_win_lock_all(msh_win *e, int assert_);
int msh_win_unlock_all(msh_win *e);
/* flush, flush_local (local != 0), for one rank or all (rank < 0). */
int msh_win_flush(msh_win *e, int rank, int local);
int msh_win_sync(msh_win *e);
int msh_win_attach(msh_win *e, void *base, MPI_Aint size);
int msh_win_detach(msh_win *e, const void *base);

#endif
