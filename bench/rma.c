/*
 * rma.c - RMA-MT-style one-sided benchmark for mpishim.
 *
 * After the RMA-MT micro-benchmarks (Dosanjh et al., "RMA-MT: a benchmark
 * suite for assessing MPI multi-threaded RMA performance"): threads of one
 * rank issue MPI_Put or MPI_Get to another rank, under one of the four
 * synchronization methods of MPI RMA, and the rate is measured.
 *
 * Exactly 2 ranks: rank 0 is the origin and runs T threads (-t; the main
 * thread is thread 0), rank 1 is the target.  MPI_THREAD_MULTIPLE.
 *
 * Windows: MPI_Win_allocate, disp_unit 1; the target's window has T*S bytes
 * (S = -s, the size of one operation) plus a GUARD of 64 bytes after them,
 * the origin's 0 bytes.  Thread i's slot is [i*S, (i+1)*S).  With -w every
 * thread has a window of its own, w[i] (made in a loop, collectively, on
 * both ranks), of S + 64 bytes, its slot at displacement 0.
 *
 * One round of thread i (every thread does -i rounds): n (-n) operations of
 * S bytes to rank 1 at its slot, then the round's synchronization:
 *
 *   mode      shared window (default)                  -w: window w[i]
 *   fence     pthread barrier; thread 0: MPI_Win_fence; thread i: MPI_Win_fence
 *             barrier.  Target main thread: the          on w[i]; target thread
 *             matching fences.  First fence                i: the matching fences
 *             MPI_MODE_NOPRECEDE, last MPI_MODE_NOSUCCEED (before the loop / last round)
 *   pscw      barrier; thread 0: MPI_Win_complete, then  thread i: complete, start
 *             MPI_Win_start for the next round; barrier. on w[i]; target thread i:
 *             Target: MPI_Win_wait, then MPI_Win_post    wait, post on w[i]
 *             (groups: the other rank)
 *   lock      thread 0 holds MPI_Win_lock(SHARED, 1);    thread i: unlock, lock
 *             barrier; thread 0: unlock, lock; barrier   its own w[i]
 *   lockall   MPI_Win_lock_all once (thread 0), then     thread i: lock_all,
 *             every thread: MPI_Win_flush(1) after its   flush, unlock_all on w[i]
 *             n operations: concurrent flushes, no
 *             barrier; MPI_Win_unlock_all at the end
 *
 * The last round does not reopen an epoch (no start/lock after it), so the
 * run ends with every epoch closed.  In lock and lockall modes the target
 * only waits (passive target): its main thread sits in the final MPI_Barrier.
 *
 * Timing (origin): the epochs are opened (fence, start, lock, lock_all),
 * then a pthread barrier; t0 on thread 0 after it; t1 on thread 0 after the
 * last round's synchronization (and the closing unlock_all) of every thread,
 * i.e. after a final pthread barrier.  Rates: T*i*n operations / (t1 - t0)
 * (M ops/s) and T*i*n*S bytes / (t1 - t0) (MB/s, 10^6 bytes), of the
 * measured phase (see below).
 *
 * Rounds per thread: -i I gives exactly I rounds and no warm-up (as in
 * RMA-MT).  By default the run is calibrated instead, in phases (each the
 * whole protocol, epochs opened and closed, same checks) of c rounds:
 * c starts at max(1, min(100, 2^18 / (S*n))); a phase that is not the first,
 * has at least 5 rounds and took at least half of -d (default 0.2 s) is the
 * measured one; every other phase is a warm-up, and the next one gets
 * c * -d / (its time) rounds (at most 16 times more).  Rank 0 decides and
 * broadcasts.  A fixed count cannot fit: on the 2-core test machine one
 * round of 16 puts of 8 B costs from 0.5 us (Open MPI, lock_all, T = 1) to
 * 50 us and more (fence), and T threads multiply the work.
 * The result line gives the rounds (iters=) and the measured time.
 *
 * Verification (always on; failures are counted, printed (the first few),
 * never fatal; any failure makes the exit code 3):
 *   put  the source of thread i in round r is the byte ramp
 *        b[k] = (i*31 + r + k) & 0xff (a pointer into one ramp buffer, no
 *        copying); the target's slots start zeroed.  After the run the
 *        target checks that every slot holds the last round's ramp of its
 *        thread and that the guard bytes are still zero (under an
 *        MPI_Win_lock of itself).  In pscw mode the target also checks the
 *        slots after every MPI_Win_wait, before its next MPI_Win_post (the
 *        only point where the window is quiet in a run): whole slots up to
 *        4 KiB, else one byte every 512 and the last.
 *   get  the target's slot i holds b[k] = (i*31 + 101 + k) & 0xff.  Each
 *        operation of a round gets into its own local buffer (at most 4 MiB
 *        of them per thread; beyond that buffers are reused within a round)
 *        that was poisoned first (every byte differs from the expected
 *        value); after the synchronization that completes the round, the
 *        origin thread checks each buffer (whole up to 4 KiB, else every
 *        512th byte and the last; the poisoned bytes are exactly those
 *        checked).  64 guard bytes after every local buffer must keep their
 *        value, and the target's data and guard must be unchanged at the end.
 *
 * Watchdog: -W SEC (default 120; 0: off): a thread per rank; if the run has
 * not finished after SEC seconds it prints what every thread is doing
 * (call and round) to stderr and ends the process with exit code 4.
 *
 * Output: with -q only the result line, printed by rank 0:
 *   rma host=H mode=M op=P T=t size=S win=shared|per-thread mops_per_s=X
 *       mbytes_per_s=Y failures=F iters=I n=N seconds=D shim=0|1
 * (one line; H from MPI_Get_library_version: openmpi, mpich or other; shim
 * = 1 when libmpishim.so is loaded and active).  Without -q a few "#" lines
 * describe the run first, with a note when 2 ranks x T threads exceed the
 * cores.  Exit codes: 0 ok, 2 usage or MPI error, 3 verification
 * failures, 4 watchdog.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_barrier_t, getopt, RTLD_DEFAULT */
#endif

#include <mpi.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "rma" /* for die() */
#include "common.h"

enum { MODE_FENCE, MODE_PSCW, MODE_LOCK, MODE_LOCKALL };
enum { OP_PUT, OP_GET };
enum {
    GUARD = 64,          /* bytes after the window's slots, and after every local get buffer */
    FULL_BELOW = 4096,   /* buffers up to this size are checked whole */
    STRIDE = 512,        /* else one byte every STRIDE bytes, and the last */
    MAX_THREADS = 256,
    MAX_SIZE = 1 << 20,
    LOCAL_BUDGET = 4 << 20, /* get: local buffers per thread, bytes */
    MAX_REPORTS = 5,     /* failures printed per rank */
    GET_SEED = 101,
    LOCAL_GUARD_BYTE = 0xc3,
};

static const char *const mode_names[] = { "fence", "pscw", "lock", "lockall" };
static const char *const op_names[] = { "put", "get" };

static struct {
    int mode, op;
    int threads;          /* T */
    size_t size;          /* S */
    long n;               /* operations per synchronization */
    long iters;           /* -i: rounds per thread, or -1: calibrated to -d */
    double seconds;       /* -d */
    int per_thread;       /* -w */
    int passive_fence;    /* -P */
    long win_k;           /* -K, 0: not set */
    int quiet;
    double watchdog;      /* seconds, 0 off */
} opt;

static MPI_Win *wins;            /* 1 or T windows */
static unsigned char **wbase;    /* their base addresses (the target's memory) */
static int nwins;
static MPI_Group peer;           /* the other rank (PSCW) */
static unsigned char *ramp;      /* ramp[k] = k & 0xff, S + 256 bytes */
static pthread_barrier_t bar;    /* the threads of this rank */
static atomic_long failures;     /* of this rank */
static long rounds;              /* of the current phase, per thread */
static double t_start, t_end;    /* the origin's, of the current phase */

/* What each thread is doing, for the watchdog. */
typedef struct {
    _Atomic(const char *) where;
    atomic_long round;
} progress;
static progress *prog;
static int nprog;
static atomic_int finished;

/* ------------------------------------------------------------------ helpers */

static void at(int tid, const char *where, long round)
{
    atomic_store_explicit(&prog[tid].round, round, memory_order_relaxed);
    atomic_store_explicit(&prog[tid].where, where, memory_order_release);
}

static void barrier(int tid, long round)
{
    at(tid, "pthread barrier", round);
    pthread_barrier_wait(&bar);
}

/* A failure: counted, the first few printed. */
static void fail(const char *fmt, long a, long b, long c, long d)
{
    long k = atomic_fetch_add(&failures, 1);
    if (k < MAX_REPORTS) {
        char s[256];
        snprintf(s, sizeof s, fmt, a, b, c, d);
        fprintf(stderr, "rma: rank %d: verification: %s\n", rank, s);
    }
}

/* The expected bytes of a buffer: the ramp from offset c. */
static inline const unsigned char *ramp_at(long c)
{
    return ramp + (c & 0xff);
}

/* Compare buf to the ramp from offset c: whole up to FULL_BELOW bytes, else
 * every STRIDE bytes and the last.  Returns the first bad offset or -1. */
static long ramp_check(const unsigned char *buf, long c, size_t size)
{
    const unsigned char *want = ramp_at(c);
    if (size <= FULL_BELOW) {
        if (memcmp(buf, want, size) == 0)
            return -1;
        for (size_t k = 0; k < size; k++)
            if (buf[k] != want[k])
                return (long)k;
        return -1;
    }
    for (size_t k = 0; k < size; k += STRIDE)
        if (buf[k] != want[k])
            return (long)k;
    return buf[size - 1] != want[size - 1] ? (long)size - 1 : -1;
}

/* Poison exactly the bytes ramp_check(c) looks at: the ramp from c + 128. */
static void ramp_poison(unsigned char *buf, long c, size_t size)
{
    const unsigned char *p = ramp_at(c + 128);
    if (size <= FULL_BELOW) {
        memcpy(buf, p, size);
        return;
    }
    for (size_t k = 0; k < size; k += STRIDE)
        buf[k] = p[k];
    buf[size - 1] = p[size - 1];
}

static long put_pattern(int tid, long round)
{
    return (long)tid * 31 + round;
}

static long get_pattern(int tid)
{
    return (long)tid * 31 + GET_SEED;
}

/* ------------------------------------------------------------------ watchdog */

static void *watchdog(void *arg)
{
    (void)arg;
    double deadline = now() + opt.watchdog;
    while (!atomic_load(&finished)) {
        if (now() > deadline) {
            fprintf(stderr, "rma: rank %d: watchdog: no end after %g s (mode=%s op=%s T=%d size=%zu win=%s n=%ld iters=%ld)\n",
                    rank, opt.watchdog, mode_names[opt.mode], op_names[opt.op], opt.threads, opt.size,
                    opt.per_thread ? "per-thread" : "shared", opt.n, rounds);
            for (int i = 0; i < nprog; i++) {
                const char *w = atomic_load(&prog[i].where);
                fprintf(stderr, "rma: rank %d:   thread %d: %s, round %ld\n", rank, i, w ? w : "(not started)",
                        atomic_load(&prog[i].round));
            }
            fflush(stderr);
            _exit(4);
        }
        struct timespec ts = { 0, 100 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ------------------------------------------------------------------ origin */

static MPI_Win win_of(int tid)
{
    return opt.per_thread ? wins[tid] : wins[0];
}

/* Open the first epoch on win (thread tid). */
static void open_epoch(int tid, MPI_Win win)
{
    switch (opt.mode) {
    case MODE_FENCE:
        at(tid, "MPI_Win_fence (first)", -1);
        check_mpi(MPI_Win_fence(MPI_MODE_NOPRECEDE, win), "MPI_Win_fence");
        break;
    case MODE_PSCW:
        at(tid, "MPI_Win_start (first)", -1);
        check_mpi(MPI_Win_start(peer, 0, win), "MPI_Win_start");
        break;
    case MODE_LOCK:
        at(tid, "MPI_Win_lock (first)", -1);
        check_mpi(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
        break;
    default:
        at(tid, "MPI_Win_lock_all", -1);
        check_mpi(MPI_Win_lock_all(0, win), "MPI_Win_lock_all");
        break;
    }
}

/* The synchronization that ends round r of thread tid (in shared mode
 * thread 0 synchronizes for all between two barriers).  lockall: a flush. */
static void round_sync(int tid, MPI_Win win, long r)
{
    int last = r == rounds - 1;
    int shared = !opt.per_thread;
    if (opt.mode == MODE_LOCKALL) {
        at(tid, "MPI_Win_flush", r);
        check_mpi(MPI_Win_flush(1, win), "MPI_Win_flush");
        return;
    }
    if (shared)
        barrier(tid, r);
    if (!shared || tid == 0) {
        switch (opt.mode) {
        case MODE_FENCE:
            at(tid, "MPI_Win_fence", r);
            check_mpi(MPI_Win_fence(last ? MPI_MODE_NOSUCCEED : 0, win), "MPI_Win_fence");
            break;
        case MODE_PSCW:
            at(tid, "MPI_Win_complete", r);
            check_mpi(MPI_Win_complete(win), "MPI_Win_complete");
            if (!last) {
                at(tid, "MPI_Win_start", r);
                check_mpi(MPI_Win_start(peer, 0, win), "MPI_Win_start");
            }
            break;
        default:
            at(tid, "MPI_Win_unlock", r);
            check_mpi(MPI_Win_unlock(1, win), "MPI_Win_unlock");
            if (!last) {
                at(tid, "MPI_Win_lock", r);
                check_mpi(MPI_Win_lock(MPI_LOCK_SHARED, 1, 0, win), "MPI_Win_lock");
            }
            break;
        }
    }
    if (shared)
        barrier(tid, r);
}

typedef struct {
    int tid;
    pthread_t th;
} thread_arg;

static void *origin_thread(void *arg)
{
    int tid = ((thread_arg *)arg)->tid;
    MPI_Win win = win_of(tid);
    const size_t S = opt.size;
    const MPI_Aint disp = opt.per_thread ? 0 : (MPI_Aint)tid * (MPI_Aint)S;
    const int count = (int)S;

    /* get: local buffers, each followed by a guard */
    size_t stride = (S + 63) / 64 * 64 + GUARD;
    long nslots = 0;
    unsigned char *local = NULL;
    if (opt.op == OP_GET) {
        nslots = opt.n;
        if ((size_t)nslots * S > LOCAL_BUDGET)
            nslots = (long)(LOCAL_BUDGET / S) > 0 ? (long)(LOCAL_BUDGET / S) : 1;
        local = xcalloc((size_t)nslots, stride);
        memset(local, LOCAL_GUARD_BYTE, (size_t)nslots * stride);
    }
    long per_round = nslots < opt.n ? nslots : opt.n; /* buffers used per round */
    long c_get = get_pattern(tid);

    if (opt.per_thread || tid == 0)
        open_epoch(tid, win);
    barrier(tid, -1);
    if (tid == 0)
        t_start = now();

    for (long r = 0; r < rounds; r++) {
        if (opt.op == OP_PUT) {
            const unsigned char *src = ramp_at(put_pattern(tid, r));
            at(tid, "MPI_Put", r);
            for (long j = 0; j < opt.n; j++)
                check_mpi(MPI_Put(src, count, MPI_BYTE, 1, disp, count, MPI_BYTE, win), "MPI_Put");
        } else {
            for (long j = 0; j < per_round; j++)
                ramp_poison(local + (size_t)j * stride, c_get, S);
            at(tid, "MPI_Get", r);
            for (long j = 0; j < opt.n; j++)
                check_mpi(MPI_Get(local + (size_t)(j % nslots) * stride, count, MPI_BYTE, 1, disp, count,
                                  MPI_BYTE, win),
                          "MPI_Get");
        }
        round_sync(tid, win, r);
        if (opt.op == OP_GET) {
            at(tid, "checking the gets", r);
            for (long j = 0; j < per_round; j++) {
                long bad = ramp_check(local + (size_t)j * stride, c_get, S);
                if (bad >= 0)
                    fail("get: thread %ld round %ld buffer %ld: wrong byte at offset %ld after the synchronization",
                         tid, r, j, bad);
            }
        }
    }

    if (opt.mode == MODE_LOCKALL) {
        if (opt.per_thread) {
            at(tid, "MPI_Win_unlock_all", rounds);
            check_mpi(MPI_Win_unlock_all(win), "MPI_Win_unlock_all");
        } else {
            barrier(tid, rounds);
            if (tid == 0) {
                at(tid, "MPI_Win_unlock_all", rounds);
                check_mpi(MPI_Win_unlock_all(win), "MPI_Win_unlock_all");
            }
        }
    }
    barrier(tid, rounds);
    if (tid == 0)
        t_end = now();

    if (local) {
        for (long j = 0; j < nslots; j++)
            for (size_t k = S; k < stride; k++)
                if (local[(size_t)j * stride + k] != LOCAL_GUARD_BYTE) {
                    fail("get: thread %ld buffer %ld: local guard byte %ld (of %ld) overwritten", tid, j,
                         (long)(k - S), (long)(stride - S));
                    break;
                }
        free(local);
    }
    at(tid, "done", rounds);
    return NULL;
}

/* ------------------------------------------------------------------ target */

/* pscw, put: the slots of window w after round r's MPI_Win_wait. */
static void target_check_round(int w, long r)
{
    int first = opt.per_thread ? w : 0, last = opt.per_thread ? w + 1 : opt.threads;
    for (int i = first; i < last; i++) {
        const unsigned char *slot = wbase[w] + (opt.per_thread ? 0 : (size_t)i * opt.size);
        long bad = ramp_check(slot, put_pattern(i, r), opt.size);
        if (bad >= 0)
            fail("put: slot %ld round %ld: wrong byte at offset %ld after MPI_Win_wait (window %ld)", i, r, bad, w);
    }
}

/* Target, fence and pscw: the matching calls on window w (thread tid). */
static void *target_thread(void *arg)
{
    int tid = ((thread_arg *)arg)->tid;
    int w = opt.per_thread ? tid : 0;
    MPI_Win win = wins[w];
    if (opt.mode == MODE_FENCE) {
        at(tid, "MPI_Win_fence (first)", -1);
        check_mpi(MPI_Win_fence(MPI_MODE_NOPRECEDE, win), "MPI_Win_fence");
        for (long r = 0; r < rounds; r++) {
            at(tid, "MPI_Win_fence", r);
            check_mpi(MPI_Win_fence(r == rounds - 1 ? MPI_MODE_NOSUCCEED : 0, win), "MPI_Win_fence");
        }
    } else {
        at(tid, "MPI_Win_post (first)", -1);
        check_mpi(MPI_Win_post(peer, 0, win), "MPI_Win_post");
        for (long r = 0; r < rounds; r++) {
            at(tid, "MPI_Win_wait", r);
            check_mpi(MPI_Win_wait(win), "MPI_Win_wait");
            if (opt.op == OP_PUT) {
                at(tid, "checking the slots", r);
                target_check_round(w, r);
            }
            if (r < rounds - 1) {
                at(tid, "MPI_Win_post", r);
                check_mpi(MPI_Win_post(peer, 0, win), "MPI_Win_post");
            }
        }
    }
    at(tid, "done", rounds);
    return NULL;
}

/* Fill (init) or check the target's memory of every window. */
static void target_memory(int init)
{
    const size_t S = opt.size;
    for (int w = 0; w < nwins; w++) {
        int nslot = opt.per_thread ? 1 : opt.threads;
        size_t data = (size_t)nslot * S;
        /* Fence windows are touched between fences, which end every epoch:
         * no lock (one would be an error on a window fenced over passive
         * target, -P). */
        int lock = opt.mode != MODE_FENCE;
        if (lock)
            check_mpi(MPI_Win_lock(init ? MPI_LOCK_EXCLUSIVE : MPI_LOCK_SHARED, 1, 0, wins[w]),
                      "MPI_Win_lock (self)");
        unsigned char *b = wbase[w];
        for (int s = 0; s < nslot; s++) {
            int tid = opt.per_thread ? w : s;
            unsigned char *slot = b + (size_t)s * S;
            long c = opt.op == OP_PUT ? put_pattern(tid, rounds - 1) : get_pattern(tid);
            if (init) {
                if (opt.op == OP_PUT)
                    memset(slot, 0, S);
                else
                    memcpy(slot, ramp_at(c), S);
                continue;
            }
            /* the final check is always of every byte */
            const unsigned char *want = ramp_at(c);
            if (memcmp(slot, want, S) != 0) {
                size_t k = 0, nbad = 0;
                while (k < S && slot[k] == want[k])
                    k++;
                for (size_t q = k; q < S; q++)
                    nbad += slot[q] != want[q];
                fail(opt.op == OP_PUT ? "put: at the end slot %ld differs from its last round's data at %ld of "
                                        "its bytes, first at offset %ld (got 0x%02lx)"
                                      : "get: at the end slot %ld differs from its initial data at %ld of its "
                                        "bytes, first at offset %ld (got 0x%02lx)",
                     tid, (long)nbad, (long)k, slot[k]);
            }
        }
        for (size_t k = 0; k < GUARD; k++) {
            if (init)
                b[data + k] = 0;
            else if (b[data + k] != 0) {
                fail("window %ld: guard byte %ld (after %ld bytes of slots) is 0x%02lx, not 0", w, (long)k,
                     (long)data, b[data + k]);
                break;
            }
        }
        if (lock)
            check_mpi(MPI_Win_unlock(1, wins[w]), "MPI_Win_unlock (self)");
    }
}

/* ------------------------------------------------------------------ options */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np 2 rma [options]   (rank 0: origin with T threads; rank 1: target)\n"
            "  -m MODE  fence, pscw, lock or lockall (default lockall): the synchronization\n"
            "  -o OP    put (default) or get\n"
            "  -t T     origin threads (default 1, at most %d)\n"
            "  -s S     bytes per operation, 8 .. 1M (K/M suffixes; default 8)\n"
            "  -n N     operations per thread and synchronization (default 16)\n"
            "  -i I     synchronization rounds per thread, no warm-up (default: calibrated,\n"
            "           after warm-up phases, so that the measured phase takes about -d)\n"
            "  -d SEC   the measured phase's aimed duration (default 0.2)\n"
            "  -w       one window per thread (default: one window shared by the threads)\n"
            "  -P       fence: windows made with the info key mpishim_win_fence=passive (under\n"
            "           mpishim a fence is then flush + a barrier the thread sleeps in; a host\n"
            "           alone ignores the key)\n"
            "  -K K     windows made with the info key mpishim_win_k=K: K internal windows under\n"
            "           mpishim (allocated windows have 1 by default; a host alone ignores the key)\n"
            "  -W SEC   watchdog: exit 4 with a report after SEC seconds (default 120, 0 off)\n"
            "  -q       the result line only\n"
            "  -h       this help\n",
            MAX_THREADS);
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return -1;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    if (*end != '\0' || v < lo || v > hi)
        return -1;
    *out = (long)v;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    int c;
    long v;
    opt.mode = MODE_LOCKALL;
    opt.op = OP_PUT;
    opt.threads = 1;
    opt.size = 8;
    opt.n = 16;
    opt.iters = -1;
    opt.seconds = 0.2;
    opt.watchdog = 120;
    while ((c = getopt(argc, argv, "m:o:t:s:n:i:d:wPK:W:qh")) != -1) {
        switch (c) {
        case 'm':
            if (!strcmp(optarg, "fence")) opt.mode = MODE_FENCE;
            else if (!strcmp(optarg, "pscw")) opt.mode = MODE_PSCW;
            else if (!strcmp(optarg, "lock")) opt.mode = MODE_LOCK;
            else if (!strcmp(optarg, "lockall")) opt.mode = MODE_LOCKALL;
            else return -1;
            break;
        case 'o':
            if (!strcmp(optarg, "put")) opt.op = OP_PUT;
            else if (!strcmp(optarg, "get")) opt.op = OP_GET;
            else return -1;
            break;
        case 't': if (parse_long(optarg, 1, MAX_THREADS, &v)) return -1; opt.threads = (int)v; break;
        case 's': if (parse_long(optarg, 8, MAX_SIZE, &v)) return -1; opt.size = (size_t)v; break;
        case 'n': if (parse_long(optarg, 1, 1000000, &v)) return -1; opt.n = v; break;
        case 'i': if (parse_long(optarg, 1, 100000000, &v)) return -1; opt.iters = v; break;
        case 'd':
            opt.seconds = atof(optarg);
            if (!(opt.seconds > 0 && opt.seconds <= 3600)) return -1;
            break;
        case 'w': opt.per_thread = 1; break;
        case 'P': opt.passive_fence = 1; break;
        case 'K': if (parse_long(optarg, 1, 64, &v)) return -1; opt.win_k = v; break;
        case 'W':
            opt.watchdog = atof(optarg);
            if (opt.watchdog < 0) return -1;
            break;
        case 'q': opt.quiet = 1; break;
        case 'h': return 1;
        default: return -1;
        }
    }
    if (optind != argc)
        return -1;
    return 0;
}

/* openmpi, mpich or other, from MPI_Get_library_version. */
static const char *host_name(void)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    MPI_Get_library_version(v, &len);
    if (strstr(v, "Open MPI"))
        return "openmpi";
    if (strstr(v, "MPICH"))
        return "mpich";
    return "other";
}

/* ------------------------------------------------------------------ main */

/* One phase on both ranks: every thread does `r` rounds (epochs opened and
 * closed inside), then MPI_Barrier.  On the origin t_start/t_end are set. */
static void run_phase(long r)
{
    int active_target = opt.mode == MODE_FENCE || opt.mode == MODE_PSCW;
    int nthreads = rank == 0 ? opt.threads : (active_target && opt.per_thread ? opt.threads : 1);
    rounds = r;
    if (rank == 0 || active_target) {
        thread_arg *ta = xcalloc((size_t)nthreads, sizeof *ta);
        void *(*fn)(void *) = rank == 0 ? origin_thread : target_thread;
        if (pthread_barrier_init(&bar, NULL, (unsigned)nthreads))
            die("pthread_barrier_init failed");
        for (int i = 0; i < nthreads; i++) {
            ta[i].tid = i;
            if (i > 0 && pthread_create(&ta[i].th, NULL, fn, &ta[i]))
                die("pthread_create failed");
        }
        fn(&ta[0]);
        for (int i = 1; i < nthreads; i++)
            pthread_join(ta[i].th, NULL);
        pthread_barrier_destroy(&bar);
        free(ta);
    } else {
        at(0, "passive target: MPI_Barrier", r);
    }
    if (rank == 0 || active_target)
        at(0, "MPI_Barrier (end of phase)", r);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* The measured phase, calibrated (no -i): phases of c rounds, c starting
 * at max(1, min(100, 2^18 / (S*n))); a phase is the measured one when it is
 * not the first, has at least MIN_ROUNDS rounds and took at least half of
 * -d; else it was a warm-up, and the next gets c * -d / (its time), at most
 * 16 times more (at least as many).  Rank 0 decides, MPI_Bcast tells rank 1.
 * Returns the measured phase's rounds; *nwarm = warm-up phases. */
enum { MIN_ROUNDS = 5, MAX_ROUNDS = 10000000 };

static long calibrated_run(int *nwarm)
{
    long c = (long)((1L << 18) / ((long)opt.size * opt.n));
    c = c > 100 ? 100 : (c < 1 ? 1 : c);
    for (int phase = 0;; phase++) {
        run_phase(c);
        long next = 0; /* 0: that was the measured phase; else the next phase's rounds */
        if (rank == 0) {
            double t = t_end - t_start;
            if (phase == 0 || c < MIN_ROUNDS || (t < opt.seconds / 2 && c < MAX_ROUNDS)) {
                double f = t > 0 ? opt.seconds / t : 16;
                f = f > 16 ? 16 : (f < 1 ? 1 : f);
                double n = (double)c * f + 0.5;
                next = n > MAX_ROUNDS ? MAX_ROUNDS : (n < MIN_ROUNDS ? MIN_ROUNDS : (long)n);
            }
        }
        at(0, "MPI_Bcast (calibration)", c);
        MPI_Bcast(&next, 1, MPI_LONG, 0, MPI_COMM_WORLD);
        if (next == 0) {
            *nwarm = phase;
            return c;
        }
        c = next;
    }
}

int main(int argc, char **argv)
{
    int provided, nranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int pa = parse_args(argc, argv);
    if (pa != 0) {
        if (rank == 0) {
            if (pa < 0)
                fprintf(stderr, "rma: bad arguments\n");
            usage(pa < 0 ? stderr : stdout);
        }
        MPI_Finalize();
        return pa < 0 ? 2 : 0;
    }
    if (nranks != 2) {
        if (rank == 0)
            fprintf(stderr, "rma: needs exactly 2 ranks (has %d)\n", nranks);
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE && opt.threads > 1)
        die("T > 1 needs MPI_THREAD_MULTIPLE, which the MPI library does not provide");

    int shim = shim_active();
    const char *host = host_name();
    const int T = opt.threads;
    const size_t S = opt.size;

    nprog = T; /* the origin's threads, or the target's (at most T) */
    prog = xcalloc((size_t)nprog, sizeof *prog);
    for (int i = 0; i < nprog; i++)
        at(i, "setup", -1);
    pthread_t wd;
    if (opt.watchdog > 0 && pthread_create(&wd, NULL, watchdog, NULL))
        die("pthread_create (watchdog) failed");

    ramp = xcalloc(S + 256, 1);
    for (size_t k = 0; k < S + 256; k++)
        ramp[k] = (unsigned char)(k & 0xff);

    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int other = 1 - rank;
    MPI_Group_incl(world, 1, &other, &peer);
    MPI_Group_free(&world);

    /* Windows: the target's memory, the origin's none. */
    at(0, "MPI_Win_allocate", -1);
    nwins = opt.per_thread ? T : 1;
    wins = xcalloc((size_t)nwins, sizeof *wins);
    wbase = xcalloc((size_t)nwins, sizeof *wbase);
    MPI_Aint wsize = rank == 1 ? (MPI_Aint)((opt.per_thread ? 1 : (size_t)T) * S + GUARD) : 0;
    MPI_Info info = MPI_INFO_NULL;
    if (opt.passive_fence || opt.win_k) {
        check_mpi(MPI_Info_create(&info), "MPI_Info_create");
        if (opt.passive_fence)
            check_mpi(MPI_Info_set(info, "mpishim_win_fence", "passive"), "MPI_Info_set");
        if (opt.win_k) {
            char k[8];
            snprintf(k, sizeof k, "%ld", opt.win_k);
            check_mpi(MPI_Info_set(info, "mpishim_win_k", k), "MPI_Info_set");
        }
    }
    for (int w = 0; w < nwins; w++)
        check_mpi(MPI_Win_allocate(wsize, 1, info, MPI_COMM_WORLD, &wbase[w], &wins[w]), "MPI_Win_allocate");
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (rank == 1) {
        at(0, "initializing the window", -1);
        target_memory(1);
    }
    at(0, "MPI_Barrier (setup)", -1);
    MPI_Barrier(MPI_COMM_WORLD);

    int nwarm = 0;
    long measured;
    if (opt.iters > 0) {
        measured = opt.iters;
        run_phase(measured);
    } else {
        measured = calibrated_run(&nwarm);
    }
    if (rank == 0 && !opt.quiet) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        printf("# rma: host %s%s, 2 ranks: rank 0 origin with T=%d thread(s), rank 1 target\n", host,
               shim ? " through mpishim" : "", T);
        printf("# %s %s of %zu bytes, %ld per synchronization, %s window%s\n", mode_names[opt.mode],
               op_names[opt.op], S, opt.n, opt.per_thread ? "one" : "one shared", opt.per_thread ? " per thread" : "");
        if (opt.iters > 0)
            printf("# %ld rounds per thread (-i), no warm-up\n", measured);
        else
            printf("# %ld rounds per thread, after %d warm-up phase(s), aimed at %g s\n", measured, nwarm,
                   opt.seconds);
        if (2L * T > cores)
            printf("# oversubscribed: 2 ranks x %d threads = %d > %ld cores\n", T, 2 * T, cores);
        fflush(stdout);
    }
    if (rank == 1) {
        at(0, "final check", measured);
        target_memory(0);
    }

    at(0, "MPI_Win_free", measured);
    for (int w = 0; w < nwins; w++)
        check_mpi(MPI_Win_free(&wins[w]), "MPI_Win_free");
    MPI_Group_free(&peer);

    long mine = atomic_load(&failures), total = 0;
    at(0, "MPI_Allreduce (failures)", measured);
    MPI_Allreduce(&mine, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        double secs = t_end - t_start;
        double ops = (double)T * (double)measured * (double)opt.n;
        if (secs <= 0)
            secs = 1e-9;
        printf("rma host=%s mode=%s op=%s T=%d size=%zu win=%s mops_per_s=%.4f mbytes_per_s=%.2f failures=%ld "
               "iters=%ld n=%ld seconds=%.4f shim=%d\n",
               host, mode_names[opt.mode], op_names[opt.op], T, S, opt.per_thread ? "per-thread" : "shared",
               ops / secs / 1e6, ops * (double)S / secs / 1e6, total, measured, opt.n, secs, shim);
        fflush(stdout);
    }
    free(ramp);
    free(wins);
    free(wbase);
    at(0, "MPI_Finalize", measured);
    MPI_Finalize();
    atomic_store(&finished, 1);
    if (opt.watchdog > 0)
        pthread_join(wd, NULL);
    free(prog);
    return total ? 3 : 0;
}
