/* Window side table, internal windows and their synchronization (win.h). */
#include "vci/win.h"

#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/log.h"
#include "vci/comm.h"
#include "vci/vci.h"

msh_htab msh_win_table = MSH_HTAB_INIT;
MSH_TLS msh_htab_memo msh_win_memo;
_Atomic int msh_win_nsplit;
_Atomic int msh_win_npassive;
_Atomic int msh_win_local_as_flush;
_Atomic int msh_win_gate = 1; /* the runtime is off until it starts */

void msh_win_direct_runtime(int on)
{
    atomic_fetch_add_explicit(&msh_win_gate, on ? -1 : 1, memory_order_relaxed);
}

/* Each internal window beyond the user's, and the communicator under them,
 * takes one of the host's communicator context ids, of which MPICH has
 * 2048 per process: with K internal windows a program's 500 windows would
 * need 2500 (MPICH's own rma/window_creation aborted with "Too many
 * communicators" at 4 VCIs). Past this many such extra objects alive in
 * the process, a new window is made as the host would make it. */
#define EXTRA_MAX 512
static _Atomic int extra_alive;

static int extra_of(const msh_win *e)
{
    return e->k - 1 + (e->inner != MPI_COMM_NULL);
}

/* One more or one less window with K > 1. */
static void split_count(int d)
{
    atomic_fetch_add_explicit(&msh_win_nsplit, d, memory_order_relaxed);
    atomic_fetch_add_explicit(&msh_win_gate, d, memory_order_relaxed);
}

MSH_TLS int msh_win_thread_slot = -1;
static _Atomic int next_slot;

int msh_win_thread_slot_assign(void)
{
    msh_win_thread_slot = atomic_fetch_add_explicit(&next_slot, 1, memory_order_relaxed) % MSH_WIN_MAX_K;
    return msh_win_thread_slot;
}

/* How fences are made: the info key mpishim_win_fence, else
 * MPISHIM_WIN_FENCE (parsed as that variable is, src/core/config.c), as a
 * number the ranks agree on by their minimum: every rank must fence the
 * same windows the same way (a host fence never meets the shim's barrier,
 * nor a fence of window 1 a flush of it). */
enum { FENCE_ALL, FENCE_HOST, FENCE_PASSIVE };
static int choose_fence(const msh_win_args *a)
{
    msh_config c = msh_cfg;
    msh_cfg_from_info(a->info, MSH_CFG_WIN_FENCE, &c);
    return c.win_fence == MSH_WIN_FENCE_PASSIVE ? FENCE_PASSIVE
           : c.win_fence == MSH_WIN_FENCE_ALL   ? FENCE_ALL
                                                : FENCE_HOST;
}

/* Bytes MPI_Win_allocate is asked for: see win.h (MPICH 4.0.2). */
#define ALLOC_ROUND 16

/* K from the info key mpishim_win_k, else MPISHIM_WIN_K, else auto. */
_Static_assert(MSH_WIN_MAX_K >= MSH_MAX_VCIS, "MPISHIM_WIN_K accepts up to MSH_MAX_VCIS");
static int choose_k(const msh_win_args *a)
{
    msh_config c = msh_cfg;
    msh_cfg_from_info(a->info, MSH_CFG_WIN_K, &c);
    int k = c.win_k;
    if (k == 0)
        k = a->flavor == MPI_WIN_FLAVOR_CREATE || a->flavor == MPI_WIN_FLAVOR_DYNAMIC ? msh_pool.n : 1;
    /* Routed by target (rank r to window r mod K), windows past the
     * group's size would carry nothing, and each costs collectives at
     * creation and the free, and local calls at every fence. */
    int size = 1;
    if (msh_cfg.win_route == MSH_WIN_ROUTE_TARGET && PMPI_Comm_size(a->comm, &size) == MPI_SUCCESS && k > size)
        k = size;
    return k < 1 ? 1 : k > MSH_WIN_MAX_K ? MSH_WIN_MAX_K : k;
}

/* Window 0, the user's, with the user's flavor. */
static int make_first(msh_win_args *a, MPI_Aint size, MPI_Win *w)
{
#if MPI_VERSION >= 4
    if (a->large) {
        switch (a->flavor) {
        case MPI_WIN_FLAVOR_CREATE:   return PMPI_Win_create_c(a->base, size, a->disp_unit, a->info, a->comm, w);
        case MPI_WIN_FLAVOR_ALLOCATE: return PMPI_Win_allocate_c(size, a->disp_unit, a->info, a->comm, a->baseptr, w);
        case MPI_WIN_FLAVOR_SHARED:
            return PMPI_Win_allocate_shared_c(size, a->disp_unit, a->info, a->comm, a->baseptr, w);
        default: break;
        }
    }
#endif
    switch (a->flavor) {
    case MPI_WIN_FLAVOR_CREATE:   return PMPI_Win_create(a->base, size, (int)a->disp_unit, a->info, a->comm, w);
    case MPI_WIN_FLAVOR_ALLOCATE: return PMPI_Win_allocate(size, (int)a->disp_unit, a->info, a->comm, a->baseptr, w);
    case MPI_WIN_FLAVOR_SHARED:
        return PMPI_Win_allocate_shared(size, (int)a->disp_unit, a->info, a->comm, a->baseptr, w);
    default:                      return PMPI_Win_create_dynamic(a->info, a->comm, w);
    }
}

/* Window i > 0: over window 0's memory (or dynamic, attached later), on
 * comm, congruent with the user's. */
static int make_more(msh_win_args *a, MPI_Comm comm, void *base, MPI_Win *w)
{
    int rc;
    if (a->flavor == MPI_WIN_FLAVOR_DYNAMIC)
        rc = PMPI_Win_create_dynamic(a->info, comm, w);
#if MPI_VERSION >= 4
    else if (a->large)
        rc = PMPI_Win_create_c(base, a->size, a->disp_unit, a->info, comm, w);
#endif
    else
        rc = PMPI_Win_create(base, a->size, (int)a->disp_unit, a->info, comm, w);
    if (rc == MPI_SUCCESS)
        PMPI_Win_set_errhandler(*w, MPI_ERRORS_RETURN);
    return rc;
}

static void entry_free(msh_win *e)
{
    if (e->inner != MPI_COMM_NULL)
        PMPI_Comm_free(&e->inner);
    pthread_mutex_destroy(&e->extend_mu);
    free((void *)e->nheld); /* the start of the block tl lies in */
    free(e->wins);
    free(e->tmap);
    free(e->sizes);
    free(e);
}

/* K internal windows, target rank r routed to window r mod K. */
static void set_k(msh_win *e, int k)
{
    e->k = k;
    for (int r = 0; r < e->nranks; r++)
        e->tmap[r] = (uint8_t)(r % k);
}

/* The side-table entry of a new window whose first host window is w:
 * layout, the target -> window map, and (allocated windows) every rank's
 * user size for MPI_Win_shared_query. Collective over a->comm. */
static int entry_new(msh_win_args *a, MPI_Win w, int k, msh_win **out)
{
    msh_win *e = calloc(1, sizeof *e);
    if (!e)
        return MPI_ERR_NO_MEM;
    e->arrive = e->inner = MPI_COMM_NULL;
    pthread_mutex_init(&e->extend_mu, NULL);
    e->user = w;
    e->h.key = msh_handle_key(&w, sizeof w);
    e->k = k;
    e->route = msh_cfg.win_route;
    e->flavor = a->flavor;
    e->size = a->size;
    PMPI_Comm_size(a->comm, &e->nranks);
    PMPI_Comm_rank(a->comm, &e->rank);
    e->wins = calloc((size_t)k, sizeof *e->wins);
    e->tmap = malloc((size_t)e->nranks);
    int rc = e->wins && e->tmap ? MPI_SUCCESS : MPI_ERR_NO_MEM;
    if (rc == MPI_SUCCESS) {
        e->wins[0] = w;
        set_k(e, k);
    }
    if (rc == MPI_SUCCESS && a->flavor == MPI_WIN_FLAVOR_ALLOCATE) {
        e->sizes = malloc((size_t)e->nranks * sizeof *e->sizes);
        rc = e->sizes ? PMPI_Allgather(&a->size, 1, MPI_AINT, e->sizes, 1, MPI_AINT, a->comm) : MPI_ERR_NO_MEM;
    }
    if (rc != MPI_SUCCESS) {
        entry_free(e);
        return rc;
    }
    *out = e;
    return MPI_SUCCESS;
}

/* Windows 1..K-1 over e->inner. The host may refuse one that it made as
 * window 0 (Open MPI 4.1 makes MPI_Win_allocate windows on one process
 * with its shared-memory component, but has none for MPI_Win_create
 * there): then the window has as many internal windows as every process
 * made, at least window 0, as the program would have had from the host.
 * Collective over e->inner. */
static int more_windows(msh_win_args *a, msh_win *e, void *base, int keep_inner)
{
    int made = 1;
    while (made < e->k && make_more(a, e->inner, base, &e->wins[made]) == MPI_SUCCESS)
        made++;
    int all = made;
    int rc = PMPI_Allreduce(MPI_IN_PLACE, &all, 1, MPI_INT, MPI_MIN, e->inner);
    if (rc != MPI_SUCCESS) {
        while (--made > 0)
            PMPI_Win_free(&e->wins[made]);
        return rc;
    }
    /* A window this process made and another did not is half made: freeing
     * it would wait for processes that never free it, so it is left. */
    if (all < made)
        msh_log_once("MPI_Win_create: the host made an internal window on some processes only; it stays "
                     "allocated until MPI_Finalize");
    for (int i = all; i < made; i++)
        e->wins[i] = MPI_WIN_NULL;
    set_k(e, all);
    if (all == 1 && !keep_inner)
        PMPI_Comm_free(&e->inner);
    return MPI_SUCCESS;
}

int msh_win_make(msh_win_args *a, MPI_Win *win)
{
    /* Every rank must make the same number of windows (auto follows each
     * rank's pool; an info key may differ between ranks) and fence the same
     * way (a host fence never meets the shim's barrier). */
    int agree[2] = { 1, FENCE_HOST };
    if (a->split) {
        agree[0] = choose_k(a);
        agree[1] = choose_fence(a);
        int extra = agree[0] - 1 + (agree[0] > 1 || agree[1] == FENCE_PASSIVE);
        if (extra > 0 && atomic_load_explicit(&extra_alive, memory_order_relaxed) + extra > EXTRA_MAX)
            agree[0] = 1, agree[1] = FENCE_ALL; /* the ranks agree on the smallest */
        int rc = PMPI_Allreduce(MPI_IN_PLACE, agree, 2, MPI_INT, MPI_MIN, a->comm);
        if (rc != MPI_SUCCESS)
            return rc;
    }
    int k = agree[0], passive = agree[1] == FENCE_PASSIVE;
    MPI_Aint size = a->size;
    if (a->flavor == MPI_WIN_FLAVOR_ALLOCATE && size > 0)
        size = (size + ALLOC_ROUND - 1) / ALLOC_ROUND * ALLOC_ROUND;
    int rc = make_first(a, size, win);
    if (rc != MPI_SUCCESS)
        return rc;

    msh_win *e = NULL;
    if ((rc = entry_new(a, *win, k, &e)) != MPI_SUCCESS) {
        PMPI_Win_free(win);
        return rc;
    }
    void *base = a->flavor == MPI_WIN_FLAVOR_CREATE ? a->base
                 : a->flavor == MPI_WIN_FLAVOR_DYNAMIC ? NULL : *(void **)a->baseptr;
    /* The internal windows go over a communicator congruent with the user's
     * but without its attributes: both hosts copy the communicator (and run
     * the user's attribute copy callbacks) in every window constructor, and
     * the program should see that once per window, as without the shim.
     * Not MPI_Comm_dup for the same reason. A passive window uses it for
     * its barrier. */
    e->fence_all = agree[1] == FENCE_ALL;
    if ((k > 1 || passive) && (rc = msh_comm_congruent(a->comm, a->comm, &e->inner)) != MPI_SUCCESS)
        goto fail;
    if (e->inner != MPI_COMM_NULL)
        PMPI_Comm_set_errhandler(e->inner, MPI_ERRORS_RETURN); /* a refused window is not the program's error */
    if (k > 1 && (rc = more_windows(a, e, base, passive)) != MPI_SUCCESS)
        goto fail;
    k = e->k;
    if (passive)
        e->arrive = e->inner;
    if (rc == MPI_SUCCESS)
        rc = msh_htab_insert(&msh_win_table, &e->h);
    if (rc == MPI_SUCCESS) {
        atomic_fetch_add_explicit(&extra_alive, extra_of(e), memory_order_relaxed);
        if (k > 1)
            split_count(1);
        if (e->arrive == MPI_COMM_NULL)
            return MPI_SUCCESS;
        /* One passive-target epoch for the window's life: every operation
         * is legal in it, and MPI_Win_fence becomes flush + barrier. */
        atomic_fetch_add_explicit(&msh_win_npassive, 1, memory_order_relaxed);
        for (int i = 0; i < k && rc == MPI_SUCCESS; i++)
            rc = PMPI_Win_lock_all(MPI_MODE_NOCHECK, e->wins[i]);
        if (rc != MPI_SUCCESS)
            msh_win_free(win);
        return rc;
    }
    for (int i = 1; i < k; i++)
        PMPI_Win_free(&e->wins[i]);
fail:
    entry_free(e);
    PMPI_Win_free(win);
    return rc;
}

int msh_win_free(MPI_Win *win)
{
    msh_win *e = (msh_win *)msh_htab_remove(&msh_win_table, msh_handle_key(win, sizeof *win));
    int rc = MPI_SUCCESS;
    if (e) {
        atomic_fetch_sub_explicit(&extra_alive, extra_of(e), memory_order_relaxed);
        if (e->k > 1)
            split_count(-1);
        int r0 = msh_win_fence_release(e);
        if (r0 != MPI_SUCCESS)
            rc = r0;
        if (e->arrive != MPI_COMM_NULL) {
            atomic_fetch_sub_explicit(&msh_win_npassive, 1, memory_order_relaxed);
            for (int i = 0; i < e->k; i++)
                PMPI_Win_unlock_all(e->wins[i]); /* an epoch not opened (error path) just fails */
        }
        /* Internal windows first, in reverse creation order on every rank. */
        for (int i = e->k - 1; i > 0; i--) {
            int r = PMPI_Win_free(&e->wins[i]);
            if (rc == MPI_SUCCESS)
                rc = r;
        }
        entry_free(e);
    }
    int r = PMPI_Win_free(win);
    return rc == MPI_SUCCESS ? r : rc;
}

static void fini_entry(msh_hent *h, void *arg)
{
    msh_win *e = (msh_win *)h;
    ++*(int *)arg;
    e->arrive = e->inner = MPI_COMM_NULL; /* like the windows themselves: the host's finalize */
    entry_free(e);
}

int msh_win_fini(void)
{
    int left = 0;
    msh_htab_drain(&msh_win_table, fini_entry, &left);
    return left;
}

/* ------------------------------------------------------------ synchronization */

/* Keep the first error and the window it came from. An error of window 0
 * went through the user's handler inside the host already; one of an
 * internal window (MPI_ERRORS_RETURN) is reported through it by done(). */
#define KEEP(i, call)                                                                                             \
    do {                                                                                                          \
        int r_ = (call);                                                                                          \
        if (rc == MPI_SUCCESS && r_ != MPI_SUCCESS) {                                                             \
            rc = r_;                                                                                              \
            at = (i);                                                                                             \
        }                                                                                                         \
    } while (0)

static int done(const msh_win *e, int rc, int at)
{
    if (rc != MPI_SUCCESS && at > 0)
        msh_error_win(e->user, rc);
    return rc;
}

/* This process may have operations on windows 1..K-1 (win.h: sticky
 * flags, set before the operation is made). */
static int beyond_w0(msh_win *e)
{
    return atomic_load_explicit(&e->spread, memory_order_relaxed) ||
           atomic_load_explicit(&e->acc_others, memory_order_relaxed);
}

/* The host's fence on every window: K collectives per fence. */
static int fence_every(msh_win *e, int assert_)
{
    int rc = MPI_SUCCESS, at = 0;
    for (int i = 0; i < e->k; i++)
        KEEP(i, PMPI_Win_fence(assert_, e->wins[i]));
    return done(e, rc, at);
}

/* Windows 1..K-1 enter the fences' epoch: a passive-target epoch that
 * checks no lock (MPI_MODE_NOCHECK takes none, so it cannot hold up
 * another process's MPI_Win_lock after the fences end). Local. */
static int fence_hold(msh_win *e)
{
    for (int i = 1; i < e->k; i++) {
        int rc = PMPI_Win_lock_all(MPI_MODE_NOCHECK, e->wins[i]);
        if (rc != MPI_SUCCESS) {
            while (--i > 0)
                PMPI_Win_unlock_all(e->wins[i]);
            return rc;
        }
    }
    atomic_store_explicit(&e->fence_held, 1, memory_order_relaxed);
    return MPI_SUCCESS;
}

/* Under extend_mu: windows 1..K-1 leave the fences' epoch. */
static void fence_unhold(msh_win *e, int *rc_, int *at_)
{
    int rc = *rc_, at = *at_;
    if (atomic_load_explicit(&e->fence_held, memory_order_relaxed)) {
        for (int i = e->k - 1; i > 0; i--)
            KEEP(i, PMPI_Win_unlock_all(e->wins[i]));
        atomic_store_explicit(&e->fence_held, 0, memory_order_relaxed);
    }
    *rc_ = rc;
    *at_ = at;
}

int msh_win_fence_release(msh_win *e)
{
    if (MSH_LIKELY(!atomic_load_explicit(&e->fence_held, memory_order_relaxed)))
        return MPI_SUCCESS;
    int rc = MPI_SUCCESS, at = 0;
    pthread_mutex_lock(&e->extend_mu);
    fence_unhold(e, &rc, &at);
    pthread_mutex_unlock(&e->extend_mu);
    return done(e, rc, at);
}

/* One host fence, on window 0, for the whole window. Every process first
 * completes its operations on windows 1..K-1 at their targets (flush_all)
 * and makes its stores public (sync); the fence on window 0 then returns
 * nowhere before every process has entered it (it completes at each target
 * the operations of every origin: both hosts make it a barrier or a
 * reduce-scatter), so when it returns here every origin's operations on
 * every window are complete here, a sync after it makes them visible, and
 * no process starts the next epoch's operations on windows 1..K-1 before
 * every process has made its stores before the fence. That last promise is
 * why window 0's fence goes without MPI_MODE_NOPRECEDE: a host may answer
 * it without waiting for anyone and defer its own window's operations
 * instead, which windows 1..K-1 would not be. The first fence (or the first
 * after another kind of epoch) opens the epoch of windows 1..K-1: no
 * operation can be pending there before it. Whatever fails, the fence on
 * window 0 is made: the other processes wait in it. */
int msh_win_fence(msh_win *e, int assert_)
{
    if (e->fence_all)
        return fence_every(e, assert_);
    int rc = MPI_SUCCESS, at = 0;
    if (!atomic_load_explicit(&e->fence_held, memory_order_relaxed))
        KEEP(1, fence_hold(e));
    else if (!(assert_ & MPI_MODE_NOPRECEDE) && beyond_w0(e))
        for (int i = 1; i < e->k; i++)
            KEEP(i, PMPI_Win_flush_all(e->wins[i]));
    int held = atomic_load_explicit(&e->fence_held, memory_order_relaxed);
    for (int i = 1; i < e->k && held; i++)
        KEEP(i, PMPI_Win_sync(e->wins[i]));
    KEEP(0, PMPI_Win_fence(held ? assert_ & ~MPI_MODE_NOPRECEDE : assert_, e->wins[0]));
    for (int i = 1; i < e->k && held; i++)
        KEEP(i, PMPI_Win_sync(e->wins[i]));
    if (held && (assert_ & MPI_MODE_NOSUCCEED)) {
        pthread_mutex_lock(&e->extend_mu);
        fence_unhold(e, &rc, &at);
        pthread_mutex_unlock(&e->extend_mu);
    }
    return done(e, rc, at);
}

int msh_win_post(msh_win *e, MPI_Group g, int assert_)
{
    int rc = msh_win_fence_release(e), at = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    uint64_t open = 0;
    for (int i = 0; i < e->k; i++) {
        int r = PMPI_Win_post(g, assert_, e->wins[i]);
        if (r == MPI_SUCCESS)
            open |= 1ull << i;
        KEEP(i, r);
    }
    atomic_store_explicit(&e->exposed, open, memory_order_relaxed);
    return done(e, rc, at);
}

int msh_win_start(msh_win *e, MPI_Group g, int assert_)
{
    int rc = msh_win_fence_release(e), at = 0;
    if (rc != MPI_SUCCESS)
        return rc;
    for (int i = 0; i < e->k; i++)
        KEEP(i, PMPI_Win_start(g, assert_, e->wins[i]));
    return done(e, rc, at);
}

int msh_win_complete(msh_win *e)
{
    int rc = MPI_SUCCESS, at = 0;
    for (int i = 0; i < e->k; i++)
        KEEP(i, PMPI_Win_complete(e->wins[i]));
    return done(e, rc, at);
}

/* Tests each window whose exposure epoch is still open; a window that
 * reported completion is not tested again (its epoch has ended). */
int msh_win_test(msh_win *e, int *flag)
{
    int rc = MPI_SUCCESS, at = 0;
    uint64_t open = atomic_load_explicit(&e->exposed, memory_order_relaxed);
    for (int i = 0; i < e->k; i++) {
        if (!(open & (1ull << i)))
            continue;
        int f = 0;
        int r = PMPI_Win_test(e->wins[i], &f);
        if (r != MPI_SUCCESS) {
            KEEP(i, r);
            break;
        }
        if (f)
            open &= ~(1ull << i);
    }
    atomic_store_explicit(&e->exposed, open, memory_order_relaxed);
    *flag = rc == MPI_SUCCESS && open == 0;
    return done(e, rc, at);
}

/* The per-target table of lock epochs (win.h, msh_win_tlock), made at the
 * first lock of a window routed by target; NULL if memory runs out (the
 * epoch then locks every window, as under thread routing). The counters go
 * first in the block, so they are aligned. */
static msh_win_tlock *tlocks(msh_win *e)
{
    msh_win_tlock *tl = atomic_load_explicit(&e->tl, memory_order_acquire);
    if (tl || e->route != MSH_WIN_ROUTE_TARGET)
        return tl;
    size_t held = ((size_t)e->k * sizeof(_Atomic int) + sizeof(msh_win_tlock) - 1) / sizeof(msh_win_tlock);
    msh_win_tlock *block = calloc(held + (size_t)e->nranks, sizeof *block);
    if (!block)
        return NULL;
    pthread_mutex_lock(&e->extend_mu);
    tl = atomic_load_explicit(&e->tl, memory_order_relaxed);
    if (!tl) {
        e->nheld = (_Atomic int *)block;
        tl = block + held;
        atomic_store_explicit(&e->tl, tl, memory_order_release);
        block = NULL;
    }
    pthread_mutex_unlock(&e->extend_mu);
    free(block);
    return tl;
}

/* Every window in the fixed order 0..K-1 on every process: two exclusive
 * lockers meet at window 0 first, so neither can hold one window the other
 * waits for. Under target routing only window 0 now (msh_win_tlock). */
int msh_win_lock(msh_win *e, int type, int rank, int assert_)
{
    int r0 = msh_win_fence_release(e);
    if (r0 != MPI_SUCCESS)
        return r0;
    msh_win_tlock *tl = rank >= 0 && rank < e->nranks ? tlocks(e) : NULL;
    int n = tl ? 1 : e->k;
    for (int i = 0; i < n; i++) {
        int rc = PMPI_Win_lock(type, rank, assert_, e->wins[i]);
        if (rc != MPI_SUCCESS) {
            for (int j = i - 1; j >= 0; j--)
                PMPI_Win_unlock(rank, e->wins[j]);
            return done(e, rc, i);
        }
    }
    if (tl) {
        tl[rank].type = type;
        tl[rank].assert_ = assert_;
        atomic_store_explicit(&tl[rank].state, MSH_WIN_TL_W0, memory_order_release);
        atomic_fetch_add_explicit(&e->nlocked, 1, memory_order_relaxed);
    }
    return MPI_SUCCESS;
}

int msh_win_extend(msh_win *e, int target)
{
    msh_win_tlock *tl = atomic_load_explicit(&e->tl, memory_order_acquire);
    int j = e->tmap[target], rc = MPI_SUCCESS;
    pthread_mutex_lock(&e->extend_mu);
    if (atomic_load_explicit(&tl[target].state, memory_order_relaxed) == MSH_WIN_TL_W0) {
        rc = PMPI_Win_lock(tl[target].type, target, tl[target].assert_, e->wins[j]);
        if (rc == MPI_SUCCESS) {
            atomic_fetch_add_explicit(&e->nheld[j], 1, memory_order_relaxed);
            atomic_store_explicit(&tl[target].state, MSH_WIN_TL_BOTH, memory_order_release);
        }
    }
    pthread_mutex_unlock(&e->extend_mu);
    return rc;
}

int msh_win_unlock(msh_win *e, int rank)
{
    int rc = MPI_SUCCESS, at = 0;
    msh_win_tlock *tl = rank >= 0 && rank < e->nranks ? atomic_load_explicit(&e->tl, memory_order_acquire) : NULL;
    int state = tl ? atomic_load_explicit(&tl[rank].state, memory_order_acquire) : MSH_WIN_TL_NONE;
    if (state == MSH_WIN_TL_NONE) { /* every window (or no epoch: the host's error) */
        for (int i = e->k - 1; i >= 0; i--)
            KEEP(i, PMPI_Win_unlock(rank, e->wins[i]));
        return done(e, rc, at);
    }
    if (state == MSH_WIN_TL_BOTH) {
        int j = e->tmap[rank];
        KEEP(j, PMPI_Win_unlock(rank, e->wins[j]));
        atomic_fetch_sub_explicit(&e->nheld[j], 1, memory_order_relaxed);
    }
    KEEP(0, PMPI_Win_unlock(rank, e->wins[0]));
    atomic_store_explicit(&tl[rank].state, MSH_WIN_TL_NONE, memory_order_relaxed);
    atomic_fetch_sub_explicit(&e->nlocked, 1, memory_order_relaxed);
    return done(e, rc, at);
}

int msh_win_lock_all(msh_win *e, int assert_)
{
    int r0 = msh_win_fence_release(e);
    if (r0 != MPI_SUCCESS)
        return r0;
    for (int i = 0; i < e->k; i++) {
        int rc = PMPI_Win_lock_all(assert_, e->wins[i]);
        if (rc != MPI_SUCCESS) {
            for (int j = i - 1; j >= 0; j--)
                PMPI_Win_unlock_all(e->wins[j]);
            return done(e, rc, i);
        }
    }
    return MPI_SUCCESS;
}

int msh_win_unlock_all(msh_win *e)
{
    int rc = MPI_SUCCESS, at = 0;
    for (int i = e->k - 1; i >= 0; i--)
        KEEP(i, PMPI_Win_unlock_all(e->wins[i]));
    return done(e, rc, at);
}

static int flush_one(MPI_Win w, int rank, int local)
{
    if (rank < 0)
        return local ? PMPI_Win_flush_local_all(w) : PMPI_Win_flush_all(w);
    return local ? PMPI_Win_flush_local(rank, w) : PMPI_Win_flush(rank, w);
}

/* Internal window i while lock epochs of target routing are open: only a
 * window some epoch has locked can hold operations, and the host rejects a
 * flush or sync of one without an epoch. (A process cannot have a lock_all
 * epoch on the window at the same time.) */
static int in_epoch(msh_win *e, int i)
{
    if (i == 0 || MSH_LIKELY(atomic_load_explicit(&e->nlocked, memory_order_relaxed) == 0))
        return 1;
    return !atomic_load_explicit(&e->tl, memory_order_acquire) ||
           atomic_load_explicit(&e->nheld[i], memory_order_relaxed) > 0;
}

/* rc of a flush or sync of internal window i > 0 that in_epoch() let
 * through while lock epochs were open: the epoch that held it may have been
 * closed by another thread in between (MPI_ERR_RMA_SYNC), and its unlock
 * completed this process's operations there, which is what was asked. */
static int epoch_gone_ok(int i, int rc)
{
    int cls = rc;
    if (rc == MPI_SUCCESS || i == 0)
        return rc;
    PMPI_Error_class(rc, &cls);
    return cls == MPI_ERR_RMA_SYNC ? MPI_SUCCESS : rc;
}

/* Which windows can hold operations (the flags are sticky and set before
 * the operation is made, so a flush that must complete an operation sees
 * its flag): window 0 alone while one thread has made Puts and Gets and no
 * accumulate went elsewhere (win.h, msh_win_solo). Else, with target
 * routing, every operation to a rank used that rank's window, or window 0
 * in the one-thread period: those two need flushing, less the rank's
 * window while its lock epoch has not locked it. */
int msh_win_flush(msh_win *e, int rank, int local)
{
    int spread = atomic_load_explicit(&e->spread, memory_order_relaxed);
    if (!spread && !atomic_load_explicit(&e->acc_others, memory_order_relaxed))
        return flush_one(e->wins[0], rank, local);
    int rc = MPI_SUCCESS, at = 0;
    if (rank >= 0 && rank < e->nranks && e->route == MSH_WIN_ROUTE_TARGET) {
        int t = e->tmap[rank];
        msh_win_tlock *tl = atomic_load_explicit(&e->tl, memory_order_acquire);
        if (tl && atomic_load_explicit(&tl[rank].state, memory_order_acquire) == MSH_WIN_TL_W0)
            t = 0;
        KEEP(t, flush_one(e->wins[t], rank, local));
        if (t != 0 && atomic_load_explicit(&e->solo, memory_order_relaxed) != 0)
            KEEP(0, flush_one(e->wins[0], rank, local));
        return done(e, rc, at);
    }
    int lazy = atomic_load_explicit(&e->nlocked, memory_order_relaxed) > 0;
    for (int i = 0; i < e->k; i++)
        if (in_epoch(e, i)) {
            int r = flush_one(e->wins[i], rank, local);
            KEEP(i, lazy ? epoch_gone_ok(i, r) : r);
        }
    return done(e, rc, at);
}

int msh_win_sync(msh_win *e)
{
    int rc = MPI_SUCCESS, at = 0;
    int lazy = atomic_load_explicit(&e->nlocked, memory_order_relaxed) > 0;
    for (int i = 0; i < e->k; i++)
        if (in_epoch(e, i)) {
            int r = PMPI_Win_sync(e->wins[i]);
            KEEP(i, lazy ? epoch_gone_ok(i, r) : r);
        }
    return done(e, rc, at);
}

int msh_win_attach(msh_win *e, void *base, MPI_Aint size)
{
    for (int i = 0; i < e->k; i++) {
        int rc = PMPI_Win_attach(e->wins[i], base, size);
        if (rc != MPI_SUCCESS) {
            for (int j = i - 1; j >= 0; j--)
                PMPI_Win_detach(e->wins[j], base);
            return done(e, rc, i);
        }
    }
    return MPI_SUCCESS;
}

int msh_win_detach(msh_win *e, const void *base)
{
    int rc = MPI_SUCCESS, at = 0;
    for (int i = 0; i < e->k; i++)
        KEEP(i, PMPI_Win_detach(e->wins[i], base));
    return done(e, rc, at);
}
