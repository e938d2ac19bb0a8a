/*
 * thread_pairs.c - message rate of many thread pairs sharing one MPI library.
 *
 * A small, readable take on the "Multirate pairwise" benchmark
 * (Patinyasakdikul et al., 2019): ranks 2k and 2k+1 form a process pair and
 * each runs T threads.  Thread i of the even rank streams messages to
 * thread i of the odd rank with tag i, so T independent conversations share
 * the process's MPI library.  With a thread-safe MPI that serializes
 * internally, the aggregate rate typically *drops* as T grows, which is the
 * problem this project (mpishim) sets out to fix.
 *
 * Each window of W messages goes like this (one pair of threads):
 *
 *     sender (even rank)                  receiver (odd rank)
 *                                         W x MPI_Irecv   (already posted)
 *     W x MPI_Isend   ------------------>
 *     MPI_Waitall                         MPI_Waitall, check payloads
 *                                         W x MPI_Irecv   (next window)
 *     MPI_Recv ack    <------------------ MPI_Send zero-byte ack
 *
 * The ack keeps the sender from running unboundedly ahead.  Because the
 * receiver posts the next window *before* acking, every message finds its
 * receive already posted, so data messages are matched against posted
 * receives, not parked on the unexpected-message path.  Multirate gets the same effect with a
 * "ready" message before each window and an ack after it (and also barriers
 * all threads each window); folding "ready" into the ack halves the control
 * traffic and lets each pair run at its own pace.
 *
 * Build and run (exactly like any MPI program):
 *     mpicc -std=c11 -O2 -D_GNU_SOURCE examples/thread_pairs.c -o thread_pairs -pthread
 *     mpirun -np 2 ./thread_pairs -t 4
 *
 * Options:
 *     -t T   thread pairs per process pair     (default 4)
 *     -s B   message size in bytes             (default 8)
 *     -w W   window: messages per round trip   (default 128)
 *     -i N   timed windows per thread          (default 200: even a
 *            collapsed T=4 run, ~0.05 M msg/s, ends in a few seconds)
 *     -c     one communicator per thread pair (MPI_Comm_dup before the
 *            threads start) instead of all sharing MPI_COMM_WORLD
 *     -q     print only one machine-readable line
 *
 * The rate counts data messages only (not acks) over the time from a start
 * barrier, after WARMUP_WINDOWS untimed windows, to the last thread joining.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* pthread_barrier_t, getopt, sysconf */
#endif

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    WARMUP_WINDOWS = 10,        /* untimed: connection setup, page faults */
    MAX_THREADS = 1024,         /* keeps data tags i and ack tags T+i small */
};

/* Command-line settings, identical on every rank. */
static struct {
    int  threads;               /* -t */
    int  size;                  /* -s */
    int  window;                /* -w */
    long iters;                 /* -i */
    int  comm_per_pair;         /* -c */
    int  quiet;                 /* -q */
} opt = { 4, 8, 128, 200, 0, 0 };

/* One communicating thread. */
typedef struct {
    pthread_t thread;
    int       id;               /* thread index i, also the data tag */
    MPI_Comm  comm;             /* MPI_COMM_WORLD or this pair's own dup */
    long      mismatches;       /* payload bytes that were wrong */
} pair_t;

static int peer;                /* the other rank of our process pair */
static int is_sender;           /* even ranks send, odd ranks receive */

/* All workers and the main thread meet here twice so that the timed part
 * starts together everywhere: see start_timing() and main(). */
static pthread_barrier_t start_gate;

/* ------------------------------------------------------------------------ */

/* Payload check: first and last byte of every message carry a value that
 * depends on thread, window and slot, so a message delivered to the wrong
 * thread, slot or window (or not at all) is very likely caught.  The last
 * byte is the complement so that a shifted copy is caught too. */
static unsigned char stamp(int thread, long win, int slot)
{
    return (unsigned char)((unsigned long)thread * 131u + (unsigned long)win * 31u +
                           (unsigned long)slot * 7u + 1u);
}

static void write_stamp(unsigned char *msg, int thread, long win, int slot)
{
    if (opt.size == 0)
        return;
    unsigned char v = stamp(thread, win, slot);
    msg[opt.size - 1] = (unsigned char)~v;
    msg[0] = v;                 /* written last: wins when size is 1 */
}

static long check_stamp(const unsigned char *msg, int thread, long win, int slot)
{
    if (opt.size == 0)
        return 0;
    unsigned char v = stamp(thread, win, slot);
    if (opt.size == 1)
        return msg[0] != v;
    return (msg[0] != v) + (msg[opt.size - 1] != (unsigned char)~v);
}

static void start_timing(void)
{
    pthread_barrier_wait(&start_gate);     /* everyone warmed up ...      */
    pthread_barrier_wait(&start_gate);     /* ... main has taken the time */
}

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (p == NULL) {
        fprintf(stderr, "thread_pairs: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ------------------------------------------------------------------------ */

static void *sender(void *arg)
{
    pair_t *p = arg;
    const int W = opt.window;
    const int ack_tag = opt.threads + p->id;
    /* One slot per message: a buffer must not change while its Isend is
     * in flight, and each message carries its own stamp. */
    unsigned char *buf = xmalloc((size_t)W * (size_t)opt.size);
    MPI_Request *req = xmalloc((size_t)W * sizeof *req);
    /* Real statuses, not MPI_STATUSES_IGNORE: gcc >= 12 flags MPICH's
     * (MPI_Status *)1 sentinel as an out-of-bounds array (-Wstringop-overflow). */
    MPI_Status *st = xmalloc((size_t)W * sizeof *st);
    char ack;

    for (long win = 0; win < WARMUP_WINDOWS + opt.iters; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();
        for (int k = 0; k < W; k++) {
            unsigned char *msg = buf + (size_t)k * (size_t)opt.size;
            write_stamp(msg, p->id, win, k);
            MPI_Isend(msg, opt.size, MPI_BYTE, peer, p->id, p->comm, &req[k]);
        }
        MPI_Waitall(W, req, st);
        MPI_Recv(&ack, 0, MPI_BYTE, peer, ack_tag, p->comm, MPI_STATUS_IGNORE);
    }

    free(st);
    free(req);
    free(buf);
    return NULL;
}

static void post_window(pair_t *p, unsigned char *buf, MPI_Request *req)
{
    for (int k = 0; k < opt.window; k++)
        MPI_Irecv(buf + (size_t)k * (size_t)opt.size, opt.size, MPI_BYTE,
                  peer, p->id, p->comm, &req[k]);
}

static void *receiver(void *arg)
{
    pair_t *p = arg;
    const int W = opt.window;
    const int ack_tag = opt.threads + p->id;
    const long windows = WARMUP_WINDOWS + opt.iters;
    unsigned char *buf = xmalloc((size_t)W * (size_t)opt.size);
    MPI_Request *req = xmalloc((size_t)W * sizeof *req);
    MPI_Status *st = xmalloc((size_t)W * sizeof *st);   /* see sender() */
    char ack = 0;

    post_window(p, buf, req);
    for (long win = 0; win < windows; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();                 /* this window is pre-posted */
        MPI_Waitall(W, req, st);
        for (int k = 0; k < W; k++)
            p->mismatches += check_stamp(buf + (size_t)k * (size_t)opt.size,
                                         p->id, win, k);
        if (win + 1 < windows)
            post_window(p, buf, req);       /* before the ack: see top */
        MPI_Send(&ack, 0, MPI_BYTE, peer, ack_tag, p->comm);
    }

    free(st);
    free(req);
    free(buf);
    return NULL;
}

/* ------------------------------------------------------------------------ */

/* "Open MPI v4.1.4, package: ..." -> "Open MPI v4.1.4";
 * "MPICH Version:\t4.0.2\nMPICH Release date: ..." -> "MPICH 4.0.2". */
static void tidy_library_version(char *lib)
{
    lib[strcspn(lib, "\n,")] = '\0';
    char *out = lib;
    for (const char *in = lib; *in != '\0'; ) {
        if (strncmp(in, " Version:", 9) == 0) {
            in += 9;
            continue;
        }
        if (*in == '\t' || *in == ' ') {        /* squeeze blanks to one */
            while (*in == '\t' || *in == ' ')
                in++;
            if (out != lib && *in != '\0')
                *out++ = ' ';
            continue;
        }
        *out++ = *in++;
    }
    *out = '\0';
}

static void usage(FILE *f)
{
    fprintf(f,
        "usage: mpirun -np 2 thread_pairs [-t T] [-s bytes] [-w W] [-i N] [-c] [-q]\n"
        "  Thread i of rank 2k streams windows of W messages to thread i of\n"
        "  rank 2k+1 (tag i); the receiver acks each window.\n"
        "  -t T   thread pairs per process pair     (default 4)\n"
        "  -s B   message size in bytes             (default 8)\n"
        "  -w W   messages per window               (default 128)\n"
        "  -i N   timed windows per thread          (default 200, after %d warm-up)\n"
        "  -c     a communicator per thread pair (default: all use MPI_COMM_WORLD)\n"
        "  -q     print only: msgrate T=.. size=.. window=.. msgs=.. seconds=.. mmsgs_per_s=..\n",
        WARMUP_WINDOWS);
}

/* Parses a whole-number option argument within [lo, hi]. */
static int parse_num(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 when -h was given, -1 on a bad command line (with a
 * message already printed if print_errors). */
static int parse_args(int argc, char **argv, int print_errors)
{
    long v;
    int c;
    opterr = 0;
    while ((c = getopt(argc, argv, "t:s:w:i:cqh")) != -1) {
        switch (c) {
        case 't':
            if (parse_num(optarg, 1, MAX_THREADS, &v)) goto bad;
            opt.threads = (int)v;
            break;
        case 's':
            if (parse_num(optarg, 0, INT_MAX, &v)) goto bad;
            opt.size = (int)v;
            break;
        case 'w':
            if (parse_num(optarg, 1, 1 << 20, &v)) goto bad;
            opt.window = (int)v;
            break;
        case 'i':
            if (parse_num(optarg, 1, LONG_MAX - WARMUP_WINDOWS, &v)) goto bad;
            opt.iters = v;
            break;
        case 'c': opt.comm_per_pair = 1; break;
        case 'q': opt.quiet = 1; break;
        case 'h': return 1;
        default:  goto bad;
        }
    }
    if (optind != argc)
        goto bad;
    /* Each thread holds one window of messages at a time. */
    if ((double)opt.window * opt.size > (double)(1u << 30)) {
        if (print_errors)
            fprintf(stderr, "thread_pairs: window x size must be <= 1 GiB per thread\n");
        return -1;
    }
    return 0;
bad:
    if (print_errors) {
        if (c == '?' && optopt != 0)
            fprintf(stderr, "thread_pairs: unknown option or missing value: -%c\n",
                    optopt);
        else if (c != -1)
            fprintf(stderr, "thread_pairs: bad value for -%c: '%s'\n", c, optarg);
        else
            fprintf(stderr, "thread_pairs: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
    }
    return -1;
}

int main(int argc, char **argv)
{
    int provided, rank, nranks;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    /* Every rank parses the same argv, so they all agree without talking. */
    int parsed = parse_args(argc, argv, rank == 0);
    if (parsed != 0) {
        if (parsed > 0 && rank == 0)
            usage(stdout);
        MPI_Finalize();
        return parsed > 0 ? 0 : 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "thread_pairs: MPI_THREAD_MULTIPLE requested but the "
                    "MPI library only provides level %d; cannot run threads "
                    "concurrently in MPI.\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (nranks < 2 || nranks % 2 != 0) {
        if (rank == 0)
            fprintf(stderr, "thread_pairs: needs an even number of ranks (pairs "
                    "2k <-> 2k+1), e.g. mpirun -np 2; got %d.\n", nranks);
        MPI_Finalize();
        return 2;
    }
    is_sender = (rank % 2 == 0);
    peer = is_sender ? rank + 1 : rank - 1;

    pair_t *pairs = xmalloc((size_t)opt.threads * sizeof *pairs);
    for (int i = 0; i < opt.threads; i++) {
        pairs[i].id = i;
        pairs[i].mismatches = 0;
        /* Dups are collective, so they are made here, in the same order on
         * every rank, before any thread exists.  Per-communicator matching
         * (Open MPI) lets pairs stop contending on one queue. */
        if (opt.comm_per_pair)
            MPI_Comm_dup(MPI_COMM_WORLD, &pairs[i].comm);
        else
            pairs[i].comm = MPI_COMM_WORLD;
    }

    pthread_barrier_init(&start_gate, NULL, (unsigned)opt.threads + 1);
    for (int i = 0; i < opt.threads; i++) {
        int rc = pthread_create(&pairs[i].thread, NULL,
                                is_sender ? sender : receiver, &pairs[i]);
        if (rc != 0) {
            fprintf(stderr, "thread_pairs: rank %d: pthread_create: %s\n",
                    rank, strerror(rc));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    /* Workers wait at the gate after their warm-up; only the main thread
     * talks to MPI here, then opens the gate for the timed part. */
    pthread_barrier_wait(&start_gate);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    pthread_barrier_wait(&start_gate);
    for (int i = 0; i < opt.threads; i++)
        pthread_join(pairs[i].thread, NULL);
    double elapsed = MPI_Wtime() - t0;
    pthread_barrier_destroy(&start_gate);

    long mismatches = 0;
    for (int i = 0; i < opt.threads; i++) {
        mismatches += pairs[i].mismatches;
        if (opt.comm_per_pair)
            MPI_Comm_free(&pairs[i].comm);
    }
    free(pairs);

    /* The run lasts as long as its slowest rank. */
    double seconds;
    long total_mismatches;
    MPI_Reduce(&elapsed, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mismatches, &total_mismatches, 1, MPI_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);

    /* Threads on this node vs. CPUs: with more busy threads than CPUs the
     * rate mostly measures the OS scheduler (and MPI's lock hand-offs). */
    MPI_Comm node;
    int ranks_on_node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);

    if (rank == 0) {
        long long msgs = (long long)(nranks / 2) * opt.threads * opt.window *
                         opt.iters;
        double rate = seconds > 0 ? msgs / seconds / 1e6 : 0.0;
        if (opt.quiet) {
            printf("msgrate T=%d size=%d window=%d msgs=%lld seconds=%.6f "
                   "mmsgs_per_s=%.6f\n", opt.threads, opt.size, opt.window,
                   msgs, seconds, rate);
        } else {
            char lib[MPI_MAX_LIBRARY_VERSION_STRING];
            int len;
            MPI_Get_library_version(lib, &len);
            tidy_library_version(lib);
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            long threads_on_node = (long)opt.threads * ranks_on_node;
            char note[160] = "";
            if (cpus > 0 && threads_on_node > cpus)
                snprintf(note, sizeof note, "  (%d thread%s/rank x %d ranks on "
                         "node = %ld > %ld CPUs: oversubscribed)", opt.threads,
                         opt.threads == 1 ? "" : "s", ranks_on_node,
                         threads_on_node, cpus);
            printf("# %s, MPI_THREAD_MULTIPLE, %s\n", lib,
                   opt.comm_per_pair ? "one communicator per thread pair"
                                     : "all pairs on MPI_COMM_WORLD");
            printf("thread_pairs: %d ranks x %d thread pair%s, %d B, window %d, "
                   "%ld windows: %lld msgs in %.3f s = %.3f M msg/s%s\n",
                   nranks, opt.threads, opt.threads == 1 ? "" : "s", opt.size,
                   opt.window, opt.iters, msgs, seconds, rate, note);
        }
        if (total_mismatches != 0)
            fprintf(stderr, "thread_pairs: ERROR: %ld payload byte%s did not "
                    "match the expected pattern\n", total_mismatches,
                    total_mismatches == 1 ? "" : "s");
    }

    MPI_Bcast(&total_mismatches, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return total_mismatches != 0 ? 1 : 0;
}
