/* RMA-MT-style verification (after Dosanjh et al., "RMA-MT: A Benchmark
 * Suite for Assessing MPI Multi-threaded RMA Performance"): T threads each
 * Put their pattern at tid * SLOT of the next rank's window while one thread synchronizes, for
 * fence, PSCW, lock and lock_all (flush after every operation, then a Get of
 * what was put), with windows from MPI_Win_create and MPI_Win_allocate, and
 * with one window per thread synchronized by its own thread. After every
 * epoch the target checks each slot holds the last pattern and that the
 * guard bytes after the slots are untouched.
 *
 * Every rank is origin (for rank + 1) and target (of rank - 1). Extra runs:
 * K forced above 1 for allocated windows too, and routing by thread. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NT     4
#define SLOT   48   /* a multiple of 16: the raw MPICH run must pass too */
#define GUARD  64
#define ROUNDS 12
#define WSIZE  (NT * SLOT + GUARD)

enum mode { FENCE, PSCW, LOCK, LOCKALL, NMODES };
static const char *mode_name[] = { "fence", "pscw", "lock", "lockall+flush" };

static int me, np, next, prev;
static MPI_Group g_next, g_prev;

static unsigned char pat(int src, int tid, int round, int j) { return (unsigned char)(src * 37 + tid * 11 + round * 3 + j + 1); }

typedef struct {
    MPI_Win win;
    enum mode mode;
    int tid, round;
    unsigned char *mem; /* this rank's window memory (per-thread mode) */
} job;

/* One thread's operations of one round. */
static void put_slot(const job *j)
{
    unsigned char src[SLOT], back[SLOT];
    for (int b = 0; b < SLOT; b++)
        src[b] = pat(me, j->tid, j->round, b);
    CHECK_MPI(MPI_Put(src, SLOT, MPI_BYTE, next, (MPI_Aint)j->tid * SLOT, SLOT, MPI_BYTE, j->win));
    if (j->mode == LOCKALL) {
        CHECK_MPI(MPI_Win_flush(next, j->win));
        memset(back, 0, sizeof back);
        CHECK_MPI(MPI_Get(back, SLOT, MPI_BYTE, next, (MPI_Aint)j->tid * SLOT, SLOT, MPI_BYTE, j->win));
        CHECK_MPI(MPI_Win_flush_local(next, j->win));
        /* Natively, MPICH 4.0.2's flush_local can skip the Get when another
         * thread's Put to the same target came in between (rma_flush_local). */
        CHECK(memcmp(src, back, SLOT) == 0 || test_mpich40_flush_local_deviation(),
              "%s round %d thread %d: Get after flushed Put returned other bytes", mode_name[j->mode], j->round, j->tid);
    }
}

static void *worker(void *arg)
{
    put_slot(arg);
    return NULL;
}

static void check_target(const unsigned char *mem, int round, const char *what, int only_tid)
{
    for (int t = 0; t < NT; t++) {
        if (only_tid >= 0 && t != only_tid)
            continue;
        for (int b = 0; b < SLOT; b++)
            CHECK(mem[t * SLOT + b] == pat(prev, t, round, b), "%s round %d: slot %d byte %d is %d, expected %d",
                  what, round, t, b, mem[t * SLOT + b], pat(prev, t, round, b));
    }
    if (only_tid < 0)
        for (int b = 0; b < GUARD; b++)
            CHECK(mem[NT * SLOT + b] == 0, "%s round %d: guard byte %d was written (%d)", what, round, b,
                  mem[NT * SLOT + b]);
}

/* Read local window memory in a passive-target epoch on oneself. */
static void check_locked(MPI_Win win, const unsigned char *mem, int round, const char *what)
{
    CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, me, 0, win));
    check_target(mem, round, what, -1);
    CHECK_MPI(MPI_Win_unlock(me, win));
}

/* Info for a fence window: mpishim_win_fence=passive asks the shim to make
 * the fences itself over one passive-target epoch (hosts ignore the key). */
static MPI_Info fence_info(int passive)
{
    MPI_Info info = MPI_INFO_NULL;
    if (passive) {
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpishim_win_fence", "passive"));
    }
    return info;
}

static void shared_window(enum mode mode, int allocate, int passive)
{
    char what[64];
    snprintf(what, sizeof what, "%s%s, %s window", mode_name[mode], passive ? " (passive)" : "",
             allocate ? "allocated" : "created");
    test_step = what;
    unsigned char *mem = NULL;
    MPI_Win win;
    MPI_Info info = fence_info(passive);
    if (allocate) {
        CHECK_MPI(MPI_Win_allocate(WSIZE, 1, info, MPI_COMM_WORLD, &mem, &win));
    } else {
        mem = malloc(WSIZE);
        CHECK(mem != NULL, "malloc");
        CHECK_MPI(MPI_Win_create(mem, WSIZE, 1, info, MPI_COMM_WORLD, &win));
    }
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (mode == FENCE) {
        memset(mem, 0, WSIZE); /* made public by the first fence; no lock: fence windows see fences only */
    } else {
        CHECK_MPI(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, me, 0, win));
        memset(mem, 0, WSIZE);
        CHECK_MPI(MPI_Win_unlock(me, win));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (mode == FENCE)
        CHECK_MPI(MPI_Win_fence(0, win));
    if (mode == LOCKALL)
        CHECK_MPI(MPI_Win_lock_all(0, win));
    for (int r = 0; r < ROUNDS; r++) {
        if (mode == PSCW) {
            CHECK_MPI(MPI_Win_post(g_prev, 0, win));
            CHECK_MPI(MPI_Win_start(g_next, 0, win));
        }
        if (mode == LOCK)
            CHECK_MPI(MPI_Win_lock(MPI_LOCK_SHARED, next, 0, win));
        pthread_t th[NT];
        job jobs[NT];
        for (int t = 0; t < NT; t++) {
            jobs[t] = (job){ .win = win, .mode = mode, .tid = t, .round = r };
            CHECK(pthread_create(&th[t], NULL, worker, &jobs[t]) == 0, "pthread_create");
        }
        for (int t = 0; t < NT; t++)
            pthread_join(th[t], NULL);
        switch (mode) {
        case FENCE:
            CHECK_MPI(MPI_Win_fence(0, win));
            check_target(mem, r, what, -1);
            CHECK_MPI(MPI_Win_fence(0, win)); /* nobody writes before every rank checked */
            break;
        case PSCW:
            CHECK_MPI(MPI_Win_complete(win));
            CHECK_MPI(MPI_Win_wait(win));
            check_target(mem, r, what, -1);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            break;
        case LOCK:
            CHECK_MPI(MPI_Win_unlock(next, win));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            check_locked(win, mem, r, what);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            break;
        case LOCKALL:
            CHECK_MPI(MPI_Win_flush_all(win));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            CHECK_MPI(MPI_Win_sync(win));
            check_target(mem, r, what, -1);
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            break;
        default:
            break;
        }
    }
    if (mode == LOCKALL)
        CHECK_MPI(MPI_Win_unlock_all(win));
    if (mode == FENCE)
        CHECK_MPI(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK_MPI(MPI_Win_free(&win));
    CHECK(win == MPI_WIN_NULL, "MPI_Win_free did not set MPI_WIN_NULL");
    if (!allocate)
        free(mem);
}

/* One window per thread; each thread synchronizes its own window (fence or
 * PSCW from several threads at once, on different windows). */
typedef struct {
    int tid;
    enum mode mode;
    MPI_Win win;
    unsigned char *mem;
} own_job;

static void *own_worker(void *arg)
{
    own_job *o = arg;
    char what[64];
    snprintf(what, sizeof what, "%s, window per thread", mode_name[o->mode]);
    if (o->mode == FENCE)
        CHECK_MPI(MPI_Win_fence(0, o->win));
    for (int r = 0; r < ROUNDS; r++) {
        if (o->mode == PSCW) {
            CHECK_MPI(MPI_Win_post(g_prev, 0, o->win));
            CHECK_MPI(MPI_Win_start(g_next, 0, o->win));
        }
        job j = { .win = o->win, .mode = o->mode, .tid = o->tid, .round = r };
        put_slot(&j);
        if (o->mode == FENCE) {
            CHECK_MPI(MPI_Win_fence(0, o->win));
            check_target(o->mem, r, what, o->tid);
            CHECK_MPI(MPI_Win_fence(0, o->win));
        } else {
            CHECK_MPI(MPI_Win_complete(o->win));
            CHECK_MPI(MPI_Win_wait(o->win));
            check_target(o->mem, r, what, o->tid);
        }
    }
    return NULL;
}

static void window_per_thread(enum mode mode, int passive)
{
    test_step = mode == FENCE ? (passive ? "fence (passive), window per thread" : "fence, window per thread")
                              : "pscw, window per thread";
    unsigned char *mem = calloc(1, WSIZE);
    CHECK(mem != NULL, "calloc");
    MPI_Win wins[NT];
    own_job o[NT];
    pthread_t th[NT];
    MPI_Info info = fence_info(passive);
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Win_create(mem, WSIZE, 1, info, MPI_COMM_WORLD, &wins[t]));
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    for (int t = 0; t < NT; t++) {
        o[t] = (own_job){ .tid = t, .mode = mode, .win = wins[t], .mem = mem };
        CHECK(pthread_create(&th[t], NULL, own_worker, &o[t]) == 0, "pthread_create");
    }
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    for (int b = 0; b < GUARD; b++)
        CHECK(mem[NT * SLOT + b] == 0, "window per thread: guard byte %d was written", b);
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Win_free(&wins[t]));
    free(mem);
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_below_multiple(provided, "rma_threads");
    test_watchdog("rma_threads", 100);
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    next = (me + 1) % np;
    prev = (me + np - 1) % np;
    MPI_Group world;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    CHECK_MPI(MPI_Group_incl(world, 1, &next, &g_next));
    CHECK_MPI(MPI_Group_incl(world, 1, &prev, &g_prev));

    for (int m = 0; m < NMODES; m++)
        for (int a = 0; a < 2; a++)
            shared_window((enum mode)m, a, 0);
    for (int a = 0; a < 2; a++)
        shared_window(FENCE, a, 1);
    window_per_thread(FENCE, 0);
    window_per_thread(FENCE, 1);
    window_per_thread(PSCW, 0);

    MPI_Group_free(&g_next);
    MPI_Group_free(&g_prev);
    MPI_Group_free(&world);
    test_watchdog("rma_threads", 0);
    test_finish("rma_threads");
    return 0;
}
