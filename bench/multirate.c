/*
 * multirate.c - the pairwise pattern of the Multirate benchmark
 * (Patinyasakdikul, Lou, Eberius, Bosilca: "Multirate: a flexible MPI
 * benchmark for fast assessment of multithreaded communication
 * performance", ExaMPI'19; dissertation ch. 3.5 and appendix A), written
 * for mpishim's measurements.
 *
 * Communication entities pair up: ranks 2k and 2k+1 form a process pair.
 *
 *   thread mode (default)   each rank runs T communicating threads; thread i
 *                           of rank 2k streams to thread i of rank 2k+1
 *                           (data tag i, ack tag T+i), so T conversations
 *                           share one MPI library per process.
 *   process mode (-p)       "MPI everywhere": each rank runs exactly one
 *                           communicating entity (its main thread) and the
 *                           pairs are rank pairs, so
 *                               mpirun -np 2T multirate -p
 *                           is the process-mode row for T pairs, the same
 *                           work as `mpirun -np 2 multirate -t T` in threads.
 *
 * Each window of W messages of S bytes, for one pair:
 *
 *     sender (even rank)                  receiver (odd rank)
 *                                         W x MPI_Irecv   (already posted)
 *     W x MPI_Isend   ------------------>
 *     MPI_Waitall                         MPI_Waitall, check payloads
 *                                         W x MPI_Irecv   (next window)
 *     MPI_Recv ack    <------------------ MPI_Send ack (0 bytes; 1 byte = stop)
 *
 * As in examples/thread_pairs.c: the ack keeps the sender from running
 * ahead, and because the next window is posted before the ack, every data
 * message finds its receive pre-posted (the matching path, not the
 * unexpected-message path).  Multirate itself uses a "ready" message before
 * each window plus an ack after it and barriers all threads every window;
 * folding "ready" into the ack halves the control traffic and lets each pair
 * run at its own pace.  The receiver decides when the run ends (after N
 * windows with -i, or when the -d time budget is spent) and says so in the
 * last ack, which is 1 byte long instead of 0; every other ack is empty.
 *
 * Communicators:
 *   default   all pairs share one communicator (MPI_COMM_WORLD, or one
 *             duplicate of it when -o needs the info hints);
 *   -c        a communicator per thread pair, MPI_Comm_dup'ed before any
 *             thread starts (process mode: MPI_Comm_split into one
 *             communicator per rank pair);
 *   -o        message overtaking allowed: the communicator(s) are made with
 *             MPI_Comm_dup_with_info carrying the MPI-4 assertions
 *                 mpi_assert_allow_overtaking = true
 *                 mpi_assert_no_any_tag       = true
 *                 mpi_assert_no_any_source    = true
 *             The last two are always true of this benchmark (it never posts
 *             a wildcard receive), so they cost nothing and let an MPI (or
 *             mpishim) route messages by tag/source.  Note that the original
 *             Multirate's -o also switched receives to MPI_ANY_TAG; we do not,
 *             because that would contradict mpi_assert_no_any_tag.  With
 *             overtaking, the W messages of a window (same source, tag and
 *             communicator) may match the W pre-posted receives in any order,
 *             so the payload check is then order-insensitive within a window
 *             (windows cannot mix: the ack separates them).
 *
 * Thread level: MPI_THREAD_MULTIPLE is requested in both modes.  Process
 * mode would be content with MPI_THREAD_SINGLE, but the host then takes no
 * locks (and mpishim adds none when the program asks for less than
 * MULTIPLE), so the MPI-everywhere row would measure a cheaper library than
 * the threaded rows; asking for MULTIPLE everywhere keeps the comparison to
 * "threads vs. processes" alone.
 *
 * Payload check: the first and last byte of every message carry a value
 * depending on pair, window and slot (last byte complemented); the receiver
 * also checks each status's source and tag.  Any mismatch is counted,
 * reported, and makes the program exit with status 1.
 *
 * Rate: data messages only (acks excluded), counted over the timed windows,
 * divided by the slowest rank's time from a start barrier (after
 * WARMUP_WINDOWS untimed windows) to its last communicating thread ending.
 *
 * Options: see usage().  Note on naming: in the original Multirate, -p picks
 * the pairwise pattern (its only pattern here); in this program -p means
 * process mode, as in mpishim's benchmark plan.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* pthread_barrier_t, getopt, sysconf, RTLD_DEFAULT (common.h) */
#endif

#include <mpi.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h" /* now() */

enum {
    WARMUP_WINDOWS = 10,        /* untimed: connection setup, page faults */
    MAX_THREADS = 1024,         /* keeps data tags i and ack tags T+i small */
    DEFAULT_THREADS = 4,
    /* 8 pairs x 128 msgs x 100 windows = 102,400 msgs: 2.6 s at a
     * collapsed 0.04 M msg/s, a few ms on a healthy host (use -d there). */
    DEFAULT_ITERS = 100,
};

/* Command-line settings, identical on every rank. */
static struct {
    int    threads;             /* -t: thread pairs per rank pair */
    int    threads_given;
    int    size;                /* -s */
    int    window;              /* -w */
    long   iters;               /* -i: timed windows per pair */
    double seconds;             /* -d: time budget instead of -i (0 = off) */
    int    comm_per_pair;       /* -c */
    int    overtaking;          /* -o */
    int    process;             /* -p */
    int    quiet;               /* -q */
} opt = { DEFAULT_THREADS, 0, 8, 128, DEFAULT_ITERS, 0.0, 0, 0, 0, 0 };

/* One communicating entity (a thread, or the main thread in -p mode). */
typedef struct {
    pthread_t thread;
    int       id;               /* pair number: stamps; thread mode: data tag */
    int       tag, ack_tag;
    int       peer;             /* the partner's rank in comm */
    MPI_Comm  comm;
    long      windows;          /* timed windows completed */
    long      mismatches;       /* wrong payload bytes, sources or tags */
} pair_t;

static int is_sender;           /* even ranks send, odd ranks receive */

/* Start of the timed part, shared by the workers and main. */
static pthread_barrier_t start_gate;
static double t_start;

static const char *const assert_keys[] = {
    "mpi_assert_allow_overtaking",
    "mpi_assert_no_any_tag",
    "mpi_assert_no_any_source",
};
#define NASSERT ((int)(sizeof assert_keys / sizeof assert_keys[0]))

/* ------------------------------------------------------------------------ */

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (p == NULL) {
        fprintf(stderr, "multirate: out of memory (%zu bytes)\n", n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* Payload stamp: stamp() is 7*slot + f(pair, win) mod 256, and 7 is
 * invertible mod 256 (7 * 183 = 1281 = 5 * 256 + 1), so the slot a message
 * was sent from is recoverable modulo 256: that is what the
 * order-insensitive check of -o uses. */
static unsigned char stamp_base(int id, long win)
{
    return (unsigned char)((unsigned long)id * 131u + (unsigned long)win * 31u + 1u);
}

static unsigned char stamp(int id, long win, int slot)
{
    return (unsigned char)(stamp_base(id, win) + (unsigned long)slot * 7u);
}

static void write_stamp(unsigned char *msg, int id, long win, int slot)
{
    if (opt.size == 0)
        return;
    unsigned char v = stamp(id, win, slot);
    msg[opt.size - 1] = (unsigned char)~v;
    msg[0] = v;                 /* written last: wins when size is 1 */
}

/* Ordered check of slot k: 0, 1 or 2 wrong bytes. */
static long check_stamp(const unsigned char *msg, int id, long win, int slot)
{
    if (opt.size == 0)
        return 0;
    unsigned char v = stamp(id, win, slot);
    if (opt.size == 1)
        return msg[0] != v;
    return (msg[0] != v) + (msg[opt.size - 1] != (unsigned char)~v);
}

/* Order-insensitive check of a whole window (-o): every message must be
 * self-consistent, and the multiset of slots (mod 256) must be exactly
 * {0..W-1} (mod 256).  Returns the number of misfits. */
static long check_window_unordered(const unsigned char *buf, int id, long win,
                                   int *hits /* [256] */)
{
    const int W = opt.window;
    long bad = 0;
    if (opt.size == 0)
        return 0;
    memset(hits, 0, 256 * sizeof *hits);
    unsigned char base = stamp_base(id, win);
    for (int k = 0; k < W; k++) {
        const unsigned char *msg = buf + (size_t)k * (size_t)opt.size;
        unsigned char v = msg[0];
        if (opt.size > 1 && msg[opt.size - 1] != (unsigned char)~v)
            bad++;
        hits[(unsigned char)((unsigned)(unsigned char)(v - base) * 183u)]++;
    }
    for (int r = 0; r < 256; r++) {
        int expected = W / 256 + (r < W % 256);
        if (hits[r] > expected)
            bad += hits[r] - expected;  /* surplus == deficit: count once */
    }
    return bad;
}

static long check_status(const MPI_Status *st, const pair_t *p)
{
    return (st->MPI_SOURCE != p->peer) + (st->MPI_TAG != p->tag);
}

/* Called by every entity once, between warm-up and the timed part. */
static void start_timing(void)
{
    if (opt.process) {          /* the entity is the main thread */
        MPI_Barrier(MPI_COMM_WORLD);
        t_start = now();
        return;
    }
    pthread_barrier_wait(&start_gate);     /* everyone warmed up ...      */
    pthread_barrier_wait(&start_gate);     /* ... main has taken the time */
}

/* ------------------------------------------------------------------------ */

static void *sender(void *arg)
{
    pair_t *p = arg;
    const int W = opt.window;
    /* One slot per message: a buffer must not change while its Isend is
     * in flight, and each message carries its own stamp. */
    unsigned char *buf = xmalloc((size_t)W * (size_t)opt.size);
    MPI_Request *req = xmalloc((size_t)W * sizeof *req);
    /* Real statuses, not MPI_STATUSES_IGNORE: gcc >= 12 flags MPICH's
     * (MPI_Status *)1 sentinel as an out-of-bounds array (-Wstringop-overflow). */
    MPI_Status *st = xmalloc((size_t)W * sizeof *st);
    MPI_Status ack_st;
    char ack;
    int stop = 0;

    for (long win = 0; !stop; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();
        for (int k = 0; k < W; k++) {
            unsigned char *msg = buf + (size_t)k * (size_t)opt.size;
            write_stamp(msg, p->id, win, k);
            MPI_Isend(msg, opt.size, MPI_BYTE, p->peer, p->tag, p->comm, &req[k]);
        }
        MPI_Waitall(W, req, st);
        MPI_Recv(&ack, 1, MPI_BYTE, p->peer, p->ack_tag, p->comm, &ack_st);
        int n = 0;
        MPI_Get_count(&ack_st, MPI_BYTE, &n);
        stop = (n == 1);
        if (win >= WARMUP_WINDOWS)
            p->windows++;
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
                  p->peer, p->tag, p->comm, &req[k]);
}

static void *receiver(void *arg)
{
    pair_t *p = arg;
    const int W = opt.window;
    unsigned char *buf = xmalloc((size_t)W * (size_t)opt.size);
    MPI_Request *req = xmalloc((size_t)W * sizeof *req);
    MPI_Status *st = xmalloc((size_t)W * sizeof *st);   /* see sender() */
    int hits[256];
    char ack = 0;
    int stop = 0;

    post_window(p, buf, req);
    for (long win = 0; !stop; win++) {
        if (win == WARMUP_WINDOWS)
            start_timing();                 /* this window is pre-posted */
        MPI_Waitall(W, req, st);
        if (opt.overtaking) {
            p->mismatches += check_window_unordered(buf, p->id, win, hits);
        } else {
            for (int k = 0; k < W; k++)
                p->mismatches += check_stamp(buf + (size_t)k * (size_t)opt.size,
                                             p->id, win, k);
        }
        for (int k = 0; k < W; k++)
            p->mismatches += check_status(&st[k], p);
        if (win >= WARMUP_WINDOWS) {
            p->windows++;
            stop = opt.seconds > 0 ? now() - t_start >= opt.seconds
                                   : p->windows >= opt.iters;
        }
        if (!stop)
            post_window(p, buf, req);       /* before the ack: see top */
        MPI_Send(&ack, stop, MPI_BYTE, p->peer, p->ack_tag, p->comm);
    }

    free(st);
    free(req);
    free(buf);
    return NULL;
}

/* ------------------------------------------------------------------------ */

/* A duplicate of base for one pair (or for all): with -o, carrying the
 * assertions; otherwise a plain MPI_Comm_dup. */
static void make_comm(MPI_Comm base, MPI_Comm *out)
{
    if (!opt.overtaking) {
        MPI_Comm_dup(base, out);
        return;
    }
    MPI_Info info;
    MPI_Info_create(&info);
    for (int k = 0; k < NASSERT; k++)
        MPI_Info_set(info, assert_keys[k], "true");
    MPI_Comm_dup_with_info(base, info, out);
    MPI_Info_free(&info);
}

/* How many of the assertions MPI_Comm_get_info reports back as "true"
 * (MPI-4: a library returns the hints it actually uses; an MPI-3 library
 * may drop keys it does not know). */
static int asserts_reported(MPI_Comm comm)
{
    MPI_Info info;
    int n = 0;
    if (MPI_Comm_get_info(comm, &info) != MPI_SUCCESS || info == MPI_INFO_NULL)
        return 0;
    for (int k = 0; k < NASSERT; k++) {
        char val[16];
        int flag = 0;
        if (MPI_Info_get(info, assert_keys[k], (int)sizeof val - 1, val, &flag) ==
                MPI_SUCCESS && flag && strcmp(val, "true") == 0)
            n++;
    }
    MPI_Info_free(&info);
    return n;
}

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
        "usage: mpirun -np 2 multirate [-t T] [-s bytes] [-w W] [-i N | -d sec] [-c] [-o] [-q]\n"
        "       mpirun -np 2T multirate -p [-s bytes] [-w W] [-i N | -d sec] [-c] [-o] [-q]\n"
        "  Pairwise Multirate: entity i of rank 2k streams windows of W messages\n"
        "  to entity i of rank 2k+1, which acks each window.\n"
        "  -t T   thread pairs per rank pair (thread mode)       (default %d)\n"
        "  -p     process mode, MPI everywhere: one entity per rank, the pairs\n"
        "         are rank pairs (T = ranks / 2; -t is not allowed)\n"
        "  -s B   message size in bytes                          (default 8)\n"
        "  -w W   messages per window                            (default 128)\n"
        "  -i N   timed windows per pair, after %d warm-up         (default %d)\n"
        "  -d S   run the timed part for S seconds instead of -i (receivers\n"
        "         stop at the first window end past S): steadier figures\n"
        "  -c     a communicator per pair (default: one shared communicator)\n"
        "  -o     allow overtaking: communicators from MPI_Comm_dup_with_info with\n"
        "         mpi_assert_allow_overtaking, mpi_assert_no_any_tag and\n"
        "         mpi_assert_no_any_source = true (no wildcards are ever used)\n"
        "  -q     print only the machine-readable line:\n"
        "         multirate mode=thread|process T=.. size=.. window=.. comm=shared|per-pair\n"
        "         overtaking=0|1 msgs=.. seconds=.. mmsgs_per_s=.. ranks=..\n"
        "         threads_per_rank=.. cores=.. mismatches=..\n"
        "  Exit status: 0 ok, 1 payload mismatches, 2 bad command line.\n",
        DEFAULT_THREADS, WARMUP_WINDOWS, DEFAULT_ITERS);
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

static int parse_seconds(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > 1e6)
        return -1;
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 when -h was given, -1 on a bad command line (with a
 * message already printed if print_errors). */
static int parse_args(int argc, char **argv, int print_errors)
{
    const char *why = NULL;
    int iters_given = 0;
    long v;
    int c;
    opterr = 0;
    while ((c = getopt(argc, argv, "t:s:w:i:d:copqh")) != -1) {
        switch (c) {
        case 't':
            if (parse_num(optarg, 1, MAX_THREADS, &v)) goto bad;
            opt.threads = (int)v;
            opt.threads_given = 1;
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
            if (parse_num(optarg, 1, LONG_MAX / 2, &v)) goto bad;
            opt.iters = v;
            iters_given = 1;
            break;
        case 'd':
            if (parse_seconds(optarg, &opt.seconds)) goto bad;
            break;
        case 'c': opt.comm_per_pair = 1; break;
        case 'o': opt.overtaking = 1; break;
        case 'p': opt.process = 1; break;
        case 'q': opt.quiet = 1; break;
        case 'h': return 1;
        default:  goto bad;
        }
    }
    if (optind != argc)
        goto bad;
    if (iters_given && opt.seconds > 0)
        why = "-i and -d exclude each other";
    else if (opt.process && opt.threads_given && opt.threads != 1)
        why = "-p runs one entity per rank: choose T pairs with mpirun -np 2T, not -t";
    else if ((double)opt.window * opt.size > (double)(1u << 30))
        why = "window x size must be <= 1 GiB per entity";
    if (why != NULL) {
        if (print_errors)
            fprintf(stderr, "multirate: %s\n", why);
        return -1;
    }
    if (opt.process)
        opt.threads = 1;
    return 0;
bad:
    if (print_errors) {
        if (c == '?' && optopt != 0)
            fprintf(stderr, "multirate: unknown option or missing value: -%c\n",
                    optopt);
        else if (c != -1)
            fprintf(stderr, "multirate: bad value for -%c: '%s'\n", c, optarg);
        else
            fprintf(stderr, "multirate: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
    }
    return -1;
}

int main(int argc, char **argv)
{
    int provided, rank, nranks;
    /* MULTIPLE in both modes: see the top of this file. */
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
    if (!opt.process && provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            fprintf(stderr, "multirate: MPI_THREAD_MULTIPLE requested but the MPI "
                    "library only provides level %d; thread mode needs it (-p "
                    "does not).\n", provided);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (nranks < 2 || nranks % 2 != 0) {
        if (rank == 0)
            fprintf(stderr, "multirate: needs an even number of ranks (pairs "
                    "2k <-> 2k+1), e.g. mpirun -np 2%s; got %d.\n",
                    opt.process ? "T with -p" : "", nranks);
        MPI_Finalize();
        return 2;
    }
    is_sender = (rank % 2 == 0);

    /* Communicators are collective, so they are all made here, in the same
     * order on every rank, before any thread exists. */
    const int T = opt.threads;          /* entities per rank */
    pair_t *pairs = xmalloc((size_t)T * sizeof *pairs);
    MPI_Comm shared = MPI_COMM_WORLD, pair_split = MPI_COMM_NULL;
    if (opt.process) {
        /* One entity; -c: a communicator holding just this rank pair. */
        MPI_Comm base = MPI_COMM_WORLD;
        if (opt.comm_per_pair) {
            MPI_Comm_split(MPI_COMM_WORLD, rank / 2, rank, &pair_split);
            base = pair_split;
        }
        if (opt.overtaking)
            make_comm(base, &shared);
        else
            shared = base;
        pairs[0].id = rank / 2;
        pairs[0].tag = 0;
        pairs[0].ack_tag = 1;
        pairs[0].comm = shared;
    } else {
        if (!opt.comm_per_pair && opt.overtaking)
            make_comm(MPI_COMM_WORLD, &shared);
        for (int i = 0; i < T; i++) {
            pairs[i].id = i;
            pairs[i].tag = i;
            pairs[i].ack_tag = T + i;
            if (opt.comm_per_pair)
                make_comm(MPI_COMM_WORLD, &pairs[i].comm);
            else
                pairs[i].comm = shared;
        }
    }
    for (int i = 0; i < T; i++) {
        int r;
        MPI_Comm_rank(pairs[i].comm, &r);
        pairs[i].peer = r ^ 1;          /* 2k <-> 2k+1 in every communicator */
        pairs[i].windows = 0;
        pairs[i].mismatches = 0;
    }
    int asserts_seen = opt.overtaking ? asserts_reported(pairs[0].comm) : 0;

    double elapsed;
    if (opt.process) {
        (is_sender ? sender : receiver)(&pairs[0]);    /* sets t_start */
        elapsed = now() - t_start;
    } else {
        pthread_barrier_init(&start_gate, NULL, (unsigned)T + 1);
        for (int i = 0; i < T; i++) {
            int rc = pthread_create(&pairs[i].thread, NULL,
                                    is_sender ? sender : receiver, &pairs[i]);
            if (rc != 0) {
                fprintf(stderr, "multirate: rank %d: pthread_create: %s\n",
                        rank, strerror(rc));
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
        /* Workers wait at the gate after their warm-up; only the main thread
         * talks to MPI here, then opens the gate for the timed part. */
        pthread_barrier_wait(&start_gate);
        MPI_Barrier(MPI_COMM_WORLD);
        t_start = now();
        pthread_barrier_wait(&start_gate);
        for (int i = 0; i < T; i++)
            pthread_join(pairs[i].thread, NULL);
        elapsed = now() - t_start;
        pthread_barrier_destroy(&start_gate);
    }

    /* Receivers count the messages (senders agree: same windows). */
    long mismatches = 0, msgs_local = 0;
    for (int i = 0; i < T; i++) {
        mismatches += pairs[i].mismatches;
        if (!is_sender)
            msgs_local += pairs[i].windows * opt.window;
        if (opt.comm_per_pair && !opt.process)
            MPI_Comm_free(&pairs[i].comm);
    }
    if (shared != MPI_COMM_WORLD && shared != pair_split)
        MPI_Comm_free(&shared);
    if (pair_split != MPI_COMM_NULL)
        MPI_Comm_free(&pair_split);
    free(pairs);

    /* The run lasts as long as its slowest rank. */
    double seconds;
    long total_mismatches, msgs;
    MPI_Reduce(&elapsed, &seconds, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    MPI_Reduce(&mismatches, &total_mismatches, 1, MPI_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);
    MPI_Reduce(&msgs_local, &msgs, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);

    /* Busy threads on this node vs. CPUs: beyond one per CPU the rate
     * mostly measures the OS scheduler (and the library's lock hand-offs). */
    MPI_Comm node;
    int ranks_on_node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL,
                        &node);
    MPI_Comm_size(node, &ranks_on_node);
    MPI_Comm_free(&node);

    if (rank == 0) {
        const int pairs_t = opt.process ? nranks / 2 : T;   /* the T of the table */
        const char *mode = opt.process ? "process" : "thread";
        const char *comm = opt.comm_per_pair ? "per-pair" : "shared";
        double rate = seconds > 0 ? (double)msgs / seconds / 1e6 : 0.0;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        long busy = (long)T * ranks_on_node;

        if (!opt.quiet) {
            char lib[MPI_MAX_LIBRARY_VERSION_STRING];
            int len;
            MPI_Get_library_version(lib, &len);
            tidy_library_version(lib);
            printf("# %s, thread level %s\n", lib,
                   provided == MPI_THREAD_MULTIPLE ? "MPI_THREAD_MULTIPLE"
                                                   : "below MULTIPLE (process mode)");
            printf("# %s mode: %d rank%s, %d pair%s of %s; %s\n", mode, nranks,
                   nranks == 1 ? "" : "s", (nranks / 2) * T,
                   (nranks / 2) * T == 1 ? "" : "s",
                   opt.process ? "ranks (one entity per rank)" : "threads",
                   opt.comm_per_pair ? "a communicator per pair"
                                     : opt.overtaking ? "one shared duplicate of MPI_COMM_WORLD"
                                                      : "all pairs on MPI_COMM_WORLD");
            if (opt.overtaking)
                printf("# overtaking allowed: MPI_Comm_get_info reports %d of %d "
                       "assertions (allow_overtaking, no_any_tag, no_any_source) "
                       "as true%s\n", asserts_seen, NASSERT,
                       asserts_seen < NASSERT ? " (the library may ignore the others)" : "");
            printf("# %ld busy thread%s on this node (%d per rank x %d ranks) on %ld "
                   "core%s: %s\n", busy, busy == 1 ? "" : "s", T, ranks_on_node,
                   cpus, cpus == 1 ? "" : "s",
                   busy > cpus ? "OVERSUBSCRIBED, the rate mostly measures scheduling"
                               : "not oversubscribed");
            if (opt.seconds > 0)
                printf("multirate: T=%d, %d B, window %d, ~%.3g s: %ld msgs in %.3f s = "
                       "%.3f M msg/s\n", pairs_t, opt.size, opt.window, opt.seconds,
                       msgs, seconds, rate);
            else
                printf("multirate: T=%d, %d B, window %d, %ld windows: %ld msgs in "
                       "%.3f s = %.3f M msg/s\n", pairs_t, opt.size, opt.window,
                       opt.iters, msgs, seconds, rate);
        }
        printf("multirate mode=%s T=%d size=%d window=%d comm=%s overtaking=%d "
               "msgs=%ld seconds=%.6f mmsgs_per_s=%.6f ranks=%d threads_per_rank=%d "
               "cores=%ld mismatches=%ld\n", mode, pairs_t, opt.size, opt.window,
               comm, opt.overtaking, msgs, seconds, rate, nranks, T, cpus,
               total_mismatches);
        if (total_mismatches != 0)
            fprintf(stderr, "multirate: ERROR: %ld mismatches (payload bytes, message slots, "
                    "sources or tags that differ from what was sent)\n", total_mismatches);
        fflush(stdout);
    }

    MPI_Bcast(&total_mismatches, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return total_mismatches != 0 ? 1 : 0;
}
