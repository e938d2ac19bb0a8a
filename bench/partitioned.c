/*
 * partitioned.c - MPI-4 partitioned communication benchmark for mpishim.
 *
 * Two ranks: rank 0 sends, rank 1 receives.  One program, three modes
 * (-m), each measuring a partitioned variant ("part") against a baseline
 * ("base") in the same process, in alternating blocks of rounds:
 *
 *   overhead  part: MPI_Psend_init/MPI_Precv_init with one partition,
 *                   Start, MPI_Pready(0), Wait;
 *             base: a plain persistent MPI_Send_init/MPI_Recv_init pair;
 *             sizes (default) 8 64 512 4K 64K 1M 16M bytes.
 *   parts     part: 1 2 4 8 16 32 64 partitions of a total of 64K, 1M, 16M
 *                   bytes, the one sending thread readying every partition
 *                   (MPI_Pready per partition; -R range|list for
 *                   MPI_Pready_range/MPI_Pready_list);
 *             base: the persistent pair of the whole buffer.
 *   early     early-bird: T sender threads (-t, default 2 and 4;
 *             MPI_THREAD_MULTIPLE) "compute" for staggered times (thread i
 *             busy-waits until (i+1)*D us after a common start, -D, default
 *             100 us), then
 *               part: each calls MPI_Pready on its own partition(s);
 *               base: the threads join and the main thread sends the whole
 *                     buffer with one MPI_Send (receiver: MPI_Irecv, Wait).
 *             Reported: time from the last thread's end of compute (its
 *             MPI_Pready, or its arrival at the join) to the receiver's
 *             return from MPI_Wait.
 *   burst     a receiver behind its sender: the sender makes N channels
 *             (-r, default 1000) one after another while the receiver is
 *             still away (it starts once the sender says it is done, or
 *             after BURST_WAIT seconds if the sender cannot finish alone),
 *             then the receiver makes its N;
 *               part: MPI_Psend_init/MPI_Precv_init (1 partition), Start,
 *                     Pready(0), Wait, MPI_Request_free;
 *               base: MPI_Send_init/MPI_Recv_init, Start, Wait, free.
 *             Reported ("chan"): the receiver's loop time / N, 5 bursts per
 *             kind, alternating; sizes (default) 8 64 512 bytes, so that
 *             the sender's messages wait unexpected at the receiver. With
 *             -F the sender initializes all N first, then runs them (its
 *             headers then wait in front of its data).
 *
 * One round (every mode, both kinds), the control messages are 0 bytes:
 *
 *     sender (rank 0)                      receiver (rank 1)
 *     MPI_Irecv ack                        Start / Irecv of the data
 *     MPI_Recv go   <--------------------  MPI_Send go
 *     write the round's stamps
 *     t0                                        (data)
 *     Start, Pready..., Wait  ---------->  MPI_Wait;  t_done
 *     Wait ack; t1  <--------------------  MPI_Send ack
 *                                          check the data
 *
 * so every data message finds its receive started (pre-posted), and the
 * receiver's check is outside the timed part.
 *
 *   overhead, parts: "time per round" = t1 - t0 on the sender, i.e. one-way
 *     data transfer plus one zero-byte message back (the ack).  Reported
 *     per run: the median over the timed rounds (mean and min also printed).
 *     The zero-byte round trip rtt0 (median of 200 ping-pongs) is printed
 *     too, so the one-way time can be estimated as round - rtt0/2.
 *   early: two measurements of the same interval, per round:
 *     ack    t_ack - t_ready - rtt0/2 on the sender's clock, where t_ready is
 *            the latest end of compute of the T threads, t_ack the return of
 *            MPI_Wait on the ack (pre-posted; the receiver sends it right
 *            after its MPI_Wait), and rtt0/2 the estimated one-way time of
 *            the ack itself;
 *     clock  t_done - offset - t_ready, where t_done is the receiver's own
 *            timestamp after its MPI_Wait (sent over after the timed rounds)
 *            and offset the receiver's clock minus the sender's, estimated
 *            from 100 ping-pongs (Cristian: the sample of the shortest round
 *            trip).  On one node CLOCK_MONOTONIC is shared and offset ~ 0.
 *     Also printed: span, t_ready minus the common start (nominal T*D; more
 *     when the machine is oversubscribed and a thread was descheduled).
 *
 * Data check: every round carries a different pattern (a hash of round id
 * and byte offset in 8-byte words).  Buffers of at most 4 KiB per partition
 * are written and checked whole every round; larger ones at one word every
 * 512 bytes plus the last word of every partition.  The first (untimed)
 * round of every variant and one untimed round after its timed rounds write
 * and check every word of the buffer.  Any mismatch (or a wrong status on
 * a base receive) is reported and the program exits with status 1.
 *
 * Rounds: min(-r, max(5, -b MiB / size)) timed rounds per variant and
 * cell, after max(2, rounds/10) warm-up rounds; the timed rounds of the
 * variants of a cell alternate in 4 blocks (rotated order).
 *
 * Thread level: MPI_THREAD_MULTIPLE in every mode (early needs it; the other
 * modes ask for it too so that the shim runs its runtime in all of them).
 *
 * Options: see usage().  With -q only the result lines are printed:
 *   partitioned info ...
 *   partitioned mode=M kind=K size=S parts=P threads=T rounds=N metric=X median_us=... mean_us=... min_us=...
 *   partitioned done errors=E
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_barrier_t, getopt, RTLD_DEFAULT */
#endif

#include <mpi.h>
#if !defined(MPI_VERSION) || MPI_VERSION < 4
#include "mpishim.h" /* the partitioned calls, for an MPI-3 host (libmpishim implements them) */
#endif

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "partitioned" /* for die() */
#include "common.h"

enum { MODE_OVERHEAD, MODE_PARTS, MODE_EARLY, MODE_BURST };
enum { KIND_PART, KIND_BASE };
enum { READY_EACH, READY_RANGE, READY_LIST };
enum { TAG_GO = 1, TAG_ACK = 2, TAG_TIMES = 3, TAG_SYNC = 4, TAG_BURST = 5, TAG_DATA = 100 };
enum {
    MAXLIST = 32,
    FULL_BELOW = 4096, /* partitions up to this size are checked whole every round */
    STRIDE = 512,      /* else one word per STRIDE bytes */
    NBLOCKS = 4,
    MAX_THREADS = 256,
};

static const char *const mode_names[] = { "overhead", "parts", "early", "burst" };
static const char *const kind_names[] = { "part", "base" };

static struct {
    int mode;
    int kinds;             /* bit 1 << KIND_* */
    size_t sizes[MAXLIST];
    int nsizes;
    int parts[MAXLIST];    /* parts mode */
    int nparts;
    int threads[MAXLIST];  /* early mode */
    int nthreads;
    int ppt;               /* early: partitions per thread */
    double delay_us;       /* early: D */
    long max_rounds;       /* -r */
    double budget_mib;     /* -b */
    int ready;             /* -R */
    long long min_bytes;   /* -a: info mpishim_part_min_bytes (-1: none) */
    int init_first;        /* burst -F */
    int quiet;
} opt;

static unsigned char *buf;  /* the one data buffer of this rank */
static size_t bufsize;
static long errors;         /* data or status mismatches seen by this rank */
static int status_warned;

/* ------------------------------------------------------------------ helpers */

static double median_of(const double *v, int n)
{
    if (n <= 0)
        return 0.0;
    double *c = xcalloc((size_t)n, sizeof *c);
    memcpy(c, v, (size_t)n * sizeof *c);
    double m = bench_median(c, n);
    free(c);
    return m;
}

/* ------------------------------------------------------------------ data pattern */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static inline uint64_t word_of(uint64_t rid, size_t off)
{
    return mix64(rid * 0x9e3779b97f4a7c15ULL + (uint64_t)off + 1);
}

/* The words of region [lo, hi) (hi - lo a positive multiple of 8) that a
 * round writes and checks: all of them when full or the region is small,
 * else every STRIDE bytes and the last one. */
static size_t region_step(size_t lo, size_t hi, int full)
{
    return (full || hi - lo <= FULL_BELOW) ? 8 : STRIDE;
}

/* Round rid's words of [lo, hi), written into base (the data buffer, or a
 * burst channel's own). */
static void stamp_region(unsigned char *base, size_t lo, size_t hi, uint64_t rid, int full)
{
    size_t step = region_step(lo, hi, full), o;
    for (o = lo; o + 8 <= hi; o += step) {
        uint64_t w = word_of(rid, o);
        memcpy(base + o, &w, 8);
    }
    if (step != 8) {
        uint64_t w = word_of(rid, hi - 8);
        memcpy(base + hi - 8, &w, 8);
    }
}

static long check_region(size_t lo, size_t hi, uint64_t rid, int full)
{
    size_t step = region_step(lo, hi, full), o;
    long bad = 0;
    for (o = lo; o + 8 <= hi; o += step) {
        uint64_t w;
        memcpy(&w, buf + o, 8);
        if (w != word_of(rid, o)) {
            if (errors + bad < 5)
                fprintf(stderr, "partitioned: rank %d: data mismatch at byte %zu of round %#llx\n", rank, o,
                        (unsigned long long)rid);
            bad++;
        }
    }
    if (step != 8) {
        uint64_t w;
        memcpy(&w, buf + hi - 8, 8);
        if (w != word_of(rid, hi - 8))
            bad++;
    }
    return bad;
}

/* ------------------------------------------------------------------ variants */

/* One measured variant of a cell: a kind and its requests. */
typedef struct {
    int kind;
    int parts;          /* partitions of the part kind (1 for base) */
    int nreg;           /* regions of the data pattern: partitions, or threads' shares */
    int tag;
    MPI_Request req;    /* persistent: Psend/Precv or Send/Recv_init; early base: none */
    double *lat;        /* sender, per timed round: round time, or early ack latency */
    double *clk;        /* early: clock-method latency */
    double *span;       /* early: t_ready - common start */
    double *tdone;      /* receiver, early: MPI_Wait return per timed round */
    int ntimed;
} variant;

static int next_tag = TAG_DATA;

static void variant_init(variant *v, int kind, size_t size, int parts, int nreg, int rounds, int persistent)
{
    memset(v, 0, sizeof *v);
    v->kind = kind;
    v->parts = kind == KIND_PART ? parts : 1;
    v->nreg = nreg;
    v->tag = next_tag++;
    v->req = MPI_REQUEST_NULL;
    v->lat = xcalloc((size_t)rounds, sizeof(double));
    v->clk = xcalloc((size_t)rounds, sizeof(double));
    v->span = xcalloc((size_t)rounds, sizeof(double));
    v->tdone = xcalloc((size_t)rounds, sizeof(double));
    if (kind == KIND_PART) {
        MPI_Info info = MPI_INFO_NULL;
        if (opt.min_bytes >= 0) {
            char val[32];
            snprintf(val, sizeof val, "%lld", opt.min_bytes);
            MPI_Info_create(&info);
            MPI_Info_set(info, "mpishim_part_min_bytes", val);
        }
        MPI_Count count = (MPI_Count)(size / (size_t)parts);
        if (rank == 0)
            check_mpi(MPI_Psend_init(buf, parts, count, MPI_BYTE, 1, v->tag, MPI_COMM_WORLD, info, &v->req),
                      "MPI_Psend_init");
        else
            check_mpi(MPI_Precv_init(buf, parts, count, MPI_BYTE, 0, v->tag, MPI_COMM_WORLD, info, &v->req),
                      "MPI_Precv_init");
        if (info != MPI_INFO_NULL)
            MPI_Info_free(&info);
    } else if (persistent) {
        if (rank == 0)
            check_mpi(MPI_Send_init(buf, (int)size, MPI_BYTE, 1, v->tag, MPI_COMM_WORLD, &v->req), "MPI_Send_init");
        else
            check_mpi(MPI_Recv_init(buf, (int)size, MPI_BYTE, 0, v->tag, MPI_COMM_WORLD, &v->req), "MPI_Recv_init");
    }
}

static void variant_free(variant *v)
{
    if (v->req != MPI_REQUEST_NULL)
        check_mpi(MPI_Request_free(&v->req), "MPI_Request_free");
    free(v->lat);
    free(v->clk);
    free(v->span);
    free(v->tdone);
}

static void region_of(size_t size, int nreg, int i, size_t *lo, size_t *hi)
{
    size_t share = size / (size_t)nreg;
    *lo = (size_t)i * share;
    *hi = *lo + share;
}

/* Mark partitions [lo, hi) of the request ready, in the -R style. */
static void ready_range(MPI_Request req, int lo, int hi)
{
    switch (opt.ready) {
    case READY_RANGE:
        check_mpi(MPI_Pready_range(lo, hi - 1, req), "MPI_Pready_range");
        break;
    case READY_LIST: {
        int list[64], n = 0;
        for (int p = lo; p < hi; p++) {
            list[n++] = p;
            if (n == 64 || p == hi - 1) {
                check_mpi(MPI_Pready_list(n, list, req), "MPI_Pready_list");
                n = 0;
            }
        }
        break;
    }
    default:
        for (int p = lo; p < hi; p++)
            check_mpi(MPI_Pready(p, req), "MPI_Pready");
    }
}

/* Receiver: check a completed round. */
static void check_round(const variant *v, size_t size, uint64_t rid, int full, const MPI_Status *st)
{
    long bad = 0;
    for (int i = 0; i < v->nreg; i++) {
        size_t lo, hi;
        region_of(size, v->nreg, i, &lo, &hi);
        bad += check_region(lo, hi, rid, full);
    }
    int n = -1;
    MPI_Get_count(st, MPI_BYTE, &n);
    if (v->kind == KIND_BASE) {
        if (st->MPI_SOURCE != 0 || st->MPI_TAG != v->tag || n != (int)size) {
            if (errors + bad < 5)
                fprintf(stderr, "partitioned: rank 1: base receive status source %d tag %d count %d, expected 0 %d %zu\n",
                        st->MPI_SOURCE, st->MPI_TAG, n, v->tag, size);
            bad++;
        }
    } else if (n != MPI_UNDEFINED && n != (int)size && !status_warned) {
        /* Not counted as an error: what a partitioned receive's status holds
         * is reported once, for information. */
        status_warned = 1;
        fprintf(stderr, "partitioned: rank 1: note: partitioned receive status count %d (source %d tag %d), "
                        "message %zu bytes\n", n, st->MPI_SOURCE, st->MPI_TAG, size);
    }
    errors += bad;
}

/* ------------------------------------------------------------------ overhead, parts: one round */

static double rtt0; /* zero-byte round trip, seconds */

/* Returns the round time on the sender (0 on the receiver). */
static double round_single(variant *v, size_t size, uint64_t rid, int full)
{
    MPI_Status st;
    if (rank == 0) {
        MPI_Request ack;
        check_mpi(MPI_Irecv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, &ack), "MPI_Irecv ack");
        check_mpi(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv go");
        for (int i = 0; i < v->nreg; i++) {
            size_t lo, hi;
            region_of(size, v->nreg, i, &lo, &hi);
            stamp_region(buf, lo, hi, rid, full);
        }
        double t0 = now();
        check_mpi(MPI_Start(&v->req), "MPI_Start");
        if (v->kind == KIND_PART)
            ready_range(v->req, 0, v->parts);
        check_mpi(MPI_Wait(&v->req, MPI_STATUS_IGNORE), "MPI_Wait send");
        check_mpi(MPI_Wait(&ack, MPI_STATUS_IGNORE), "MPI_Wait ack");
        return now() - t0;
    }
    check_mpi(MPI_Start(&v->req), "MPI_Start");
    check_mpi(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD), "MPI_Send go");
    check_mpi(MPI_Wait(&v->req, &st), "MPI_Wait recv");
    check_mpi(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD), "MPI_Send ack");
    check_round(v, size, rid, full, &st);
    return 0.0;
}

/* ------------------------------------------------------------------ early: workers */

static struct {
    pthread_barrier_t start, done;
    int nthreads;
    pthread_t tid[MAX_THREADS];
    /* The round, set by main before the start barrier. */
    variant *v;
    size_t size;
    uint64_t rid;
    int full;
    double t_start;
    int quit;
    double t_ready[MAX_THREADS];
} pool;

static void *worker(void *arg)
{
    int i = (int)(intptr_t)arg;
    for (;;) {
        pthread_barrier_wait(&pool.start);
        if (pool.quit)
            break;
        variant *v = pool.v;
        int lo = i * opt.ppt, hi = lo + opt.ppt;
        /* "compute": produce this thread's share, then busy-wait out the rest */
        for (int r = lo; r < hi; r++) {
            size_t a, b;
            region_of(pool.size, v->nreg, r, &a, &b);
            stamp_region(buf, a, b, pool.rid, pool.full);
        }
        double until = pool.t_start + (double)(i + 1) * opt.delay_us * 1e-6;
        double t;
        while ((t = now()) < until)
            ;
        pool.t_ready[i] = t;
        if (v->kind == KIND_PART)
            ready_range(v->req, lo, hi);
        pthread_barrier_wait(&pool.done); /* the join */
    }
    return NULL;
}

static void pool_start(int nthreads)
{
    pool.nthreads = nthreads;
    pool.quit = 0;
    if (pthread_barrier_init(&pool.start, NULL, (unsigned)nthreads + 1) ||
        pthread_barrier_init(&pool.done, NULL, (unsigned)nthreads + 1))
        die("pthread_barrier_init");
    for (int i = 0; i < nthreads; i++)
        if (pthread_create(&pool.tid[i], NULL, worker, (void *)(intptr_t)i))
            die("pthread_create");
}

static void pool_stop(void)
{
    pool.quit = 1;
    pthread_barrier_wait(&pool.start);
    for (int i = 0; i < pool.nthreads; i++)
        pthread_join(pool.tid[i], NULL);
    pthread_barrier_destroy(&pool.start);
    pthread_barrier_destroy(&pool.done);
}

/* Lead between main's "go" to the threads and their common start, so that
 * every thread is awake when the stagger begins. */
#define START_LEAD 30e-6

/* One early-bird round; timed index k >= 0 records the results. */
static void round_early(variant *v, size_t size, uint64_t rid, int full, int k)
{
    MPI_Status st;
    if (rank == 0) {
        MPI_Request ack;
        check_mpi(MPI_Irecv(NULL, 0, MPI_BYTE, 1, TAG_ACK, MPI_COMM_WORLD, &ack), "MPI_Irecv ack");
        check_mpi(MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv go");
        if (v->kind == KIND_PART)
            check_mpi(MPI_Start(&v->req), "MPI_Start");
        pool.v = v;
        pool.size = size;
        pool.rid = rid;
        pool.full = full;
        pool.t_start = now() + START_LEAD;
        pthread_barrier_wait(&pool.start);
        pthread_barrier_wait(&pool.done);
        if (v->kind == KIND_BASE)
            check_mpi(MPI_Send(buf, (int)size, MPI_BYTE, 1, v->tag, MPI_COMM_WORLD), "MPI_Send");
        else
            check_mpi(MPI_Wait(&v->req, MPI_STATUS_IGNORE), "MPI_Wait send");
        check_mpi(MPI_Wait(&ack, MPI_STATUS_IGNORE), "MPI_Wait ack");
        double t_ack = now();
        double t_ready = pool.t_ready[0];
        for (int i = 1; i < pool.nthreads; i++)
            if (pool.t_ready[i] > t_ready)
                t_ready = pool.t_ready[i];
        if (k >= 0) {
            v->lat[k] = t_ack - t_ready - rtt0 / 2;
            v->span[k] = t_ready - pool.t_start;
            v->clk[k] = t_ready; /* made a latency once the receiver's times are in */
            v->ntimed = k + 1;
        }
        return;
    }
    MPI_Request rreq = MPI_REQUEST_NULL;
    if (v->kind == KIND_PART)
        check_mpi(MPI_Start(&v->req), "MPI_Start");
    else
        check_mpi(MPI_Irecv(buf, (int)size, MPI_BYTE, 0, v->tag, MPI_COMM_WORLD, &rreq), "MPI_Irecv");
    check_mpi(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD), "MPI_Send go");
    check_mpi(MPI_Wait(v->kind == KIND_PART ? &v->req : &rreq, &st), "MPI_Wait recv");
    double t_done = now();
    check_mpi(MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_ACK, MPI_COMM_WORLD), "MPI_Send ack");
    if (k >= 0) {
        v->tdone[k] = t_done;
        v->ntimed = k + 1;
    }
    check_round(v, size, rid, full, &st);
}

/* ------------------------------------------------------------------ clocks */

static void measure_rtt0(void)
{
    enum { N = 200, W = 20 };
    double t[N];
    for (int i = 0; i < N + W; i++) {
        if (rank == 0) {
            double a = now();
            MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_SYNC, MPI_COMM_WORLD);
            MPI_Recv(NULL, 0, MPI_BYTE, 1, TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            if (i >= W)
                t[i - W] = now() - a;
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_SYNC, MPI_COMM_WORLD);
        }
    }
    if (rank == 0)
        rtt0 = median_of(t, N);
    MPI_Bcast(&rtt0, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

/* Receiver's clock minus the sender's, seen from the sender. */
static double measure_offset(void)
{
    enum { N = 100 };
    double best = 1e30, off = 0.0;
    for (int i = 0; i < N; i++) {
        if (rank == 0) {
            double a = now(), b;
            MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_SYNC, MPI_COMM_WORLD);
            MPI_Recv(&b, 1, MPI_DOUBLE, 1, TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double c = now();
            if (c - a < best) {
                best = c - a;
                off = b - (a + c) / 2;
            }
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, 0, TAG_SYNC, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double b = now();
            MPI_Send(&b, 1, MPI_DOUBLE, 0, TAG_SYNC, MPI_COMM_WORLD);
        }
    }
    return off;
}

/* ------------------------------------------------------------------ cells */

static long rounds_for(size_t size)
{
    double r = opt.budget_mib * 1048576.0 / (double)size;
    long n = r > (double)opt.max_rounds ? opt.max_rounds : (long)r;
    if (n < 5)
        n = 5;
    if (n > opt.max_rounds)
        n = opt.max_rounds;
    return n;
}

static uint64_t cell_no;

static void print_line(const char *kind, size_t size, int parts, int threads, int rounds, const char *metric,
                       const double *v, int n)
{
    double sum = 0, mn = n ? v[0] : 0;
    for (int i = 0; i < n; i++) {
        sum += v[i];
        if (v[i] < mn)
            mn = v[i];
    }
    printf("partitioned mode=%s kind=%s size=%zu parts=%d threads=%d rounds=%d metric=%s median_us=%.3f "
           "mean_us=%.3f min_us=%.3f\n",
           mode_names[opt.mode], kind, size, parts, threads, rounds, metric, median_of(v, n) * 1e6,
           n ? sum / n * 1e6 : 0.0, mn * 1e6);
}

/* Measure the variants of one cell (same size; early: same thread count)
 * in alternating blocks and print their results. */
static void run_cell(size_t size, variant *vs, int nv, int threads, double offset)
{
    long rounds = rounds_for(size);
    long warm = rounds / 10 > 2 ? rounds / 10 : 2;
    uint64_t seq = 0;
    cell_no++;
    int early = opt.mode == MODE_EARLY;
#define RID(vi) ((cell_no << 40) | ((uint64_t)(vi) << 32) | seq++)
    for (int i = 0; i < nv; i++)
        for (long w = 0; w < warm; w++) {
            uint64_t rid = RID(i);
            if (early)
                round_early(&vs[i], size, rid, w == 0, -1);
            else
                round_single(&vs[i], size, rid, w == 0);
        }
    int nblk = rounds >= 2 * NBLOCKS ? NBLOCKS : 1;
    long done[MAXLIST * 2] = { 0 };
    for (int b = 0; b < nblk; b++) {
        long per = rounds / nblk + (b < rounds % nblk);
        for (int j = 0; j < nv; j++) {
            int i = (j + b) % nv;
            for (long r = 0; r < per; r++) {
                uint64_t rid = RID(i);
                if (early) {
                    round_early(&vs[i], size, rid, 0, (int)done[i]);
                } else {
                    double t = round_single(&vs[i], size, rid, 0);
                    vs[i].lat[done[i]] = t;
                    vs[i].ntimed = (int)done[i] + 1;
                }
                done[i]++;
            }
        }
    }
    for (int i = 0; i < nv; i++) { /* a last full check of every variant */
        uint64_t rid = RID(i);
        if (early)
            round_early(&vs[i], size, rid, 1, -1);
        else
            round_single(&vs[i], size, rid, 1);
    }
#undef RID
    if (early) { /* the receiver's MPI_Wait return times, for the clock method */
        for (int i = 0; i < nv; i++) {
            if (rank == 1) {
                MPI_Send(vs[i].tdone, vs[i].ntimed, MPI_DOUBLE, 0, TAG_TIMES, MPI_COMM_WORLD);
            } else {
                MPI_Recv(vs[i].tdone, (int)rounds, MPI_DOUBLE, 1, TAG_TIMES, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                for (int k = 0; k < vs[i].ntimed; k++)
                    vs[i].clk[k] = vs[i].tdone[k] - offset - vs[i].clk[k];
            }
        }
    }
    if (rank != 0)
        return;
    for (int i = 0; i < nv; i++) {
        const variant *v = &vs[i];
        const char *kind = kind_names[v->kind];
        int parts = v->kind == KIND_PART ? v->parts : 0;
        if (early) {
            print_line(kind, size, parts, threads, v->ntimed, "ack", v->lat, v->ntimed);
            print_line(kind, size, parts, threads, v->ntimed, "clock", v->clk, v->ntimed);
            print_line(kind, size, parts, threads, v->ntimed, "span", v->span, v->ntimed);
        } else {
            print_line(kind, size, parts, threads, v->ntimed, "round", v->lat, v->ntimed);
        }
    }
    fflush(stdout);
}

static int want(int kind) { return (opt.kinds >> kind) & 1; }

static void mode_overhead(void)
{
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        long rounds = rounds_for(size);
        variant vs[2];
        int nv = 0;
        if (want(KIND_PART))
            variant_init(&vs[nv++], KIND_PART, size, 1, 1, (int)rounds, 1);
        if (want(KIND_BASE))
            variant_init(&vs[nv++], KIND_BASE, size, 1, 1, (int)rounds, 1);
        run_cell(size, vs, nv, 1, 0.0);
        for (int i = 0; i < nv; i++)
            variant_free(&vs[i]);
    }
}

static void mode_parts(void)
{
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        long rounds = rounds_for(size);
        variant vs[MAXLIST + 1];
        int nv = 0;
        if (want(KIND_BASE))
            variant_init(&vs[nv++], KIND_BASE, size, 1, 1, (int)rounds, 1);
        if (want(KIND_PART))
            for (int p = 0; p < opt.nparts; p++)
                variant_init(&vs[nv++], KIND_PART, size, opt.parts[p], opt.parts[p], (int)rounds, 1);
        run_cell(size, vs, nv, 1, 0.0);
        for (int i = 0; i < nv; i++)
            variant_free(&vs[i]);
    }
}

static void mode_early(double offset)
{
    for (int s = 0; s < opt.nsizes; s++)
        for (int t = 0; t < opt.nthreads; t++) {
            size_t size = opt.sizes[s];
            int T = opt.threads[t], P = T * opt.ppt;
            long rounds = rounds_for(size);
            variant vs[2];
            int nv = 0;
            if (rank == 0)
                pool_start(T);
            if (want(KIND_PART))
                variant_init(&vs[nv++], KIND_PART, size, P, P, (int)rounds, 1);
            if (want(KIND_BASE))
                variant_init(&vs[nv++], KIND_BASE, size, 1, P, (int)rounds, 0);
            run_cell(size, vs, nv, T, offset);
            for (int i = 0; i < nv; i++)
                variant_free(&vs[i]);
            if (rank == 0)
                pool_stop();
        }
}

/* ------------------------------------------------------------------ options */

/* ------------------------------------------------------------------ burst */

enum { BURST_RUNS = 5 };
#define BURST_WAIT 0.5 /* seconds; MPICH's own layer waits for its receiver */

/* The sender's round of one burst channel: its data (the words check_region
 * expects of round rid), Start, Pready, Wait, free. */
static void burst_send(MPI_Request *r, int kind, unsigned char *b, size_t size, uint64_t rid)
{
    stamp_region(b, 0, size, rid, 1);
    check_mpi(MPI_Start(r), "MPI_Start");
    if (kind == KIND_PART)
        check_mpi(MPI_Pready(0, *r), "MPI_Pready");
    check_mpi(MPI_Wait(r, MPI_STATUS_IGNORE), "MPI_Wait");
    check_mpi(MPI_Request_free(r), "MPI_Request_free");
}

/* One burst of n channels of one kind; the receiver's seconds per channel
 * (0 on the sender). */
static double burst_once(int kind, size_t size, int n, uint64_t rid0)
{
    MPI_Request req;
    double t = 0;
    check_mpi(MPI_Sendrecv(NULL, 0, MPI_BYTE, 1 - rank, TAG_SYNC, NULL, 0, MPI_BYTE, 1 - rank, TAG_SYNC,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Sendrecv");
    if (rank == 0) {
        /* -F: all the inits first, each channel on a buffer of its own */
        int first = opt.init_first;
        unsigned char *sb = first ? xcalloc((size_t)n, size) : buf;
        MPI_Request *reqs = xcalloc(first ? (size_t)n : 1, sizeof *reqs);
        for (int i = 0; i < n; i++) {
            MPI_Request *r = &reqs[first ? i : 0];
            unsigned char *b = first ? sb + (size_t)i * size : buf;
            if (kind == KIND_PART)
                check_mpi(MPI_Psend_init(b, 1, (MPI_Count)size, MPI_BYTE, 1, TAG_BURST, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, r), "MPI_Psend_init");
            else
                check_mpi(MPI_Send_init(b, (int)size, MPI_BYTE, 1, TAG_BURST, MPI_COMM_WORLD, r), "MPI_Send_init");
            if (!first)
                burst_send(r, kind, b, size, rid0 + (uint64_t)i);
        }
        for (int i = 0; first && i < n; i++)
            burst_send(&reqs[i], kind, sb + (size_t)i * size, size, rid0 + (uint64_t)i);
        free(reqs);
        if (sb != buf)
            free(sb);
        check_mpi(MPI_Send(NULL, 0, MPI_BYTE, 1, TAG_GO, MPI_COMM_WORLD), "MPI_Send");
        return 0;
    }
    /* Away until the sender is done (or, where it cannot be done alone,
     * for BURST_WAIT seconds). */
    int done = 0;
    check_mpi(MPI_Irecv(NULL, 0, MPI_BYTE, 0, TAG_GO, MPI_COMM_WORLD, &req), "MPI_Irecv");
    double t0 = MPI_Wtime();
    while (!done && MPI_Wtime() - t0 < BURST_WAIT)
        check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    t0 = MPI_Wtime();
    for (int i = 0; i < n; i++) {
        MPI_Request r;
        MPI_Status st;
        if (kind == KIND_PART)
            check_mpi(MPI_Precv_init(buf, 1, (MPI_Count)size, MPI_BYTE, 0, TAG_BURST, MPI_COMM_WORLD, MPI_INFO_NULL,
                                     &r), "MPI_Precv_init");
        else
            check_mpi(MPI_Recv_init(buf, (int)size, MPI_BYTE, 0, TAG_BURST, MPI_COMM_WORLD, &r), "MPI_Recv_init");
        check_mpi(MPI_Start(&r), "MPI_Start");
        check_mpi(MPI_Wait(&r, &st), "MPI_Wait");
        check_mpi(MPI_Request_free(&r), "MPI_Request_free");
        errors += check_region(0, size, rid0 + (uint64_t)i, 1);
    }
    t = (MPI_Wtime() - t0) / n;
    if (!done)
        check_mpi(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
    return t;
}

static void mode_burst(void)
{
    int n = (int)(opt.max_rounds < 100000 ? opt.max_rounds : 100000);
    for (int s = 0; s < opt.nsizes; s++) {
        size_t size = opt.sizes[s];
        double v[2][BURST_RUNS];
        for (int run = 0; run < BURST_RUNS; run++)
            for (int j = 0; j < 2; j++) {
                int kind = (run + j) % 2; /* alternate which kind goes first */
                if (!want(kind))
                    continue;
                double t = burst_once(kind, size, n, (uint64_t)(cell_no++) << 32);
                /* the receiver's time, to the sender, which prints */
                if (rank == 1)
                    check_mpi(MPI_Send(&t, 1, MPI_DOUBLE, 0, TAG_TIMES, MPI_COMM_WORLD), "MPI_Send");
                else
                    check_mpi(MPI_Recv(&v[kind][run], 1, MPI_DOUBLE, 1, TAG_TIMES, MPI_COMM_WORLD,
                                       MPI_STATUS_IGNORE), "MPI_Recv");
            }
        if (rank == 0)
            for (int kind = 0; kind < 2; kind++)
                if (want(kind))
                    print_line(kind_names[kind], size, 1, 1, n, "chan", v[kind], BURST_RUNS);
        fflush(stdout);
    }
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np 2 partitioned [options]      (rank 0 sends, rank 1 receives)\n"
            "  -m MODE   overhead (default): 1 partition vs a persistent send/recv pair\n"
            "            parts: 1..64 partitions of one buffer, one thread readies all\n"
            "            early: T threads ready their partitions at staggered times vs\n"
            "                   join + one MPI_Send; time from last ready to receiver's Wait\n"
            "            burst: a receiver behind its sender; N channels (-r) made one\n"
            "                   after another, per channel on the receiver\n"
            "  -k KIND   part, base or both (default both)\n"
            "  -s LIST   sizes in bytes, comma separated, K/M suffixes (default:\n"
            "            overhead 8,64,512,4K,64K,1M,16M; parts and early 64K,1M,16M;\n"
            "            burst 8,64,512)\n"
            "  -p LIST   parts: partition counts (default 1,2,4,8,16,32,64)\n"
            "  -t LIST   early: sender threads T (default 2,4)\n"
            "  -n N      early: partitions per thread (default 1)\n"
            "  -D US     early: stagger step D in microseconds (default 100)\n"
            "  -R HOW    how partitions are readied: each (MPI_Pready, default), range\n"
            "            (MPI_Pready_range), list (MPI_Pready_list)\n"
            "  -a BYTES  info key mpishim_part_min_bytes=BYTES on the partitioned inits\n"
            "  -F        burst: the sender initializes all its channels before running any\n"
            "  -r N      at most N timed rounds per variant (default 1000; early 200)\n"
            "  -b MIB    and at most about MIB MiB of data per variant (default 256)\n"
            "  -q        result lines only\n"
            "  -h        this help\n");
}

static size_t parse_size(const char *s, int *ok)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    *ok = end != s;
    if (*end == 'K' || *end == 'k')
        v <<= 10, end++;
    else if (*end == 'M' || *end == 'm')
        v <<= 20, end++;
    if (*end != '\0')
        *ok = 0;
    return (size_t)v;
}

/* Comma separated list; sizes with K/M suffixes. */
static int parse_list(const char *arg, size_t *out, int max)
{
    char tmp[1024];
    int n = 0;
    snprintf(tmp, sizeof tmp, "%s", arg);
    for (char *save = NULL, *t = strtok_r(tmp, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        int ok = 0;
        if (n == max)
            return -1;
        out[n++] = parse_size(t, &ok);
        if (!ok || out[n - 1] == 0)
            return -1;
    }
    return n;
}

static int parse_args(int argc, char **argv)
{
    int c, n;
    size_t tmp[MAXLIST];
    const char *sizes = NULL, *parts = NULL, *threads = NULL;
    opt.mode = MODE_OVERHEAD;
    opt.kinds = 3;
    opt.ppt = 1;
    opt.delay_us = 100;
    opt.max_rounds = -1;
    opt.budget_mib = 256;
    opt.min_bytes = -1;
    while ((c = getopt(argc, argv, "m:k:s:p:t:n:D:R:a:r:b:Fqh")) != -1) {
        switch (c) {
        case 'm':
            if (!strcmp(optarg, "overhead")) opt.mode = MODE_OVERHEAD;
            else if (!strcmp(optarg, "parts")) opt.mode = MODE_PARTS;
            else if (!strcmp(optarg, "early")) opt.mode = MODE_EARLY;
            else if (!strcmp(optarg, "burst")) opt.mode = MODE_BURST;
            else return -1;
            break;
        case 'k':
            if (!strcmp(optarg, "part")) opt.kinds = 1 << KIND_PART;
            else if (!strcmp(optarg, "base")) opt.kinds = 1 << KIND_BASE;
            else if (!strcmp(optarg, "both")) opt.kinds = 3;
            else return -1;
            break;
        case 's': sizes = optarg; break;
        case 'p': parts = optarg; break;
        case 't': threads = optarg; break;
        case 'n': opt.ppt = atoi(optarg); if (opt.ppt < 1) return -1; break;
        case 'D': opt.delay_us = atof(optarg); if (opt.delay_us < 0) return -1; break;
        case 'R':
            if (!strcmp(optarg, "each")) opt.ready = READY_EACH;
            else if (!strcmp(optarg, "range")) opt.ready = READY_RANGE;
            else if (!strcmp(optarg, "list")) opt.ready = READY_LIST;
            else return -1;
            break;
        case 'a': {
            int ok = 0;
            opt.min_bytes = (long long)parse_size(optarg, &ok);
            if (!ok) return -1;
            break;
        }
        case 'r': opt.max_rounds = atol(optarg); if (opt.max_rounds < 1) return -1; break;
        case 'b': opt.budget_mib = atof(optarg); if (opt.budget_mib <= 0) return -1; break;
        case 'F': opt.init_first = 1; break;
        case 'q': opt.quiet = 1; break;
        case 'h': return 1;
        default: return -1;
        }
    }
    if (optind != argc)
        return -1;
    if (opt.max_rounds < 0)
        opt.max_rounds = opt.mode == MODE_EARLY ? 200 : 1000;
    static const char *const def_sizes[] = { "8,64,512,4K,64K,1M,16M", "64K,1M,16M", "64K,1M,16M", "8,64,512" };
    if ((n = parse_list(sizes ? sizes : def_sizes[opt.mode], opt.sizes, MAXLIST)) <= 0)
        return -1;
    opt.nsizes = n;
    if ((n = parse_list(parts ? parts : "1,2,4,8,16,32,64", tmp, MAXLIST)) <= 0)
        return -1;
    opt.nparts = n;
    for (int i = 0; i < n; i++)
        opt.parts[i] = tmp[i] > 1000000 ? -1 : (int)tmp[i];
    if ((n = parse_list(threads ? threads : "2,4", tmp, MAXLIST)) <= 0)
        return -1;
    opt.nthreads = n;
    for (int i = 0; i < n; i++)
        opt.threads[i] = tmp[i] > MAX_THREADS ? -1 : (int)tmp[i];
    /* Every partition (or thread share) must be a whole number of 8-byte words. */
    for (int s = 0; s < opt.nsizes; s++) {
        size_t z = opt.sizes[s];
        if (z > INT_MAX || z % 8)
            return -1;
        if (opt.mode == MODE_PARTS)
            for (int p = 0; p < opt.nparts; p++)
                if (opt.parts[p] < 1 || z % ((size_t)opt.parts[p] * 8))
                    return -1;
        if (opt.mode == MODE_EARLY)
            for (int t = 0; t < opt.nthreads; t++)
                if (opt.threads[t] < 1 || z % ((size_t)opt.threads[t] * (size_t)opt.ppt * 8))
                    return -1;
        if (z > bufsize)
            bufsize = z;
    }
    return 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int pa = parse_args(argc, argv);
    if (pa != 0) {
        if (rank == 0) {
            if (pa < 0)
                fprintf(stderr, "partitioned: bad arguments (sizes must be multiples of 8 * partitions "
                                "[* threads]; at most 2 GiB)\n");
            usage(pa < 0 ? stderr : stdout);
        }
        MPI_Finalize();
        return pa < 0 ? 2 : 0;
    }
    if (size != 2) {
        if (rank == 0)
            fprintf(stderr, "partitioned: needs exactly 2 ranks (has %d)\n", size);
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE && opt.mode == MODE_EARLY)
        die("early mode needs MPI_THREAD_MULTIPLE");
    if (posix_memalign((void **)&buf, 4096, bufsize))
        die("out of memory");
    memset(buf, 0, bufsize); /* fault the pages in */

    int shim = shim_active();
    int ver = 0, sub = 0;
    MPI_Get_version(&ver, &sub);

    measure_rtt0();
    double offset = opt.mode == MODE_EARLY ? measure_offset() : 0.0;
    if (rank == 0) {
        printf("partitioned info mode=%s shim=%d mpi=%d.%d thread_multiple=%d ready=%s D_us=%g ppt=%d offset_us=%.3f\n",
               mode_names[opt.mode], shim, ver, sub, provided == MPI_THREAD_MULTIPLE,
               opt.ready == READY_RANGE ? "range" : opt.ready == READY_LIST ? "list" : "each", opt.delay_us, opt.ppt,
               offset * 1e6);
        if (!opt.quiet)
            printf("# times in microseconds; overhead/parts: per round (one-way data + 0-byte ack);\n"
                   "# early: from the last thread's ready to the receiver's MPI_Wait return\n");
        double r[1] = { rtt0 };
        print_line("-", 0, 0, 0, 200, "rtt0", r, 1);
        fflush(stdout);
    }

    switch (opt.mode) {
    case MODE_OVERHEAD: mode_overhead(); break;
    case MODE_PARTS: mode_parts(); break;
    case MODE_BURST: mode_burst(); break;
    default: mode_early(offset); break;
    }

    long total = 0;
    MPI_Allreduce(&errors, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("partitioned done errors=%ld\n", total);
        fflush(stdout);
    }
    free(buf);
    MPI_Finalize();
    return total ? 1 : 0;
}
