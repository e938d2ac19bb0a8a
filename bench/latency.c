/*
 * latency.c - ping-pong latency between two ranks, T thread pairs at once.
 *
 *   mpirun -np 2 latency [-t T] [-s bytes] [-n iters] [-r reps] [-p] [-q]
 *
 * Thread i of rank 0 and thread i of rank 1 bounce one message of `bytes`
 * bytes n times (MPI_Send then MPI_Recv on rank 0, the reverse on rank 1),
 * each pair on a communicator of its own (a duplicate of MPI_COMM_WORLD,
 * so that a shim can give each pair a VCI); MPI_THREAD_MULTIPLE always, as
 * a threaded program asks. An untimed warm-up of iters/10 (at most 100)
 * round trips sets n: iters, or fewer where the slowest pair would take
 * more than 0.2 s (threads that outnumber cores can make a round trip take
 * milliseconds).
 * A repetition starts all pairs together (barriers) and ends when the last
 * is done: its time on rank 0 over n round trips is the half round trip of
 * T pairs at once (pairs that take turns show as slower, where each pair's
 * own loop would not). The result is the median repetition, in
 * microseconds. Every received message is checked: its length
 * (MPI_Get_count), its source and tag, and its first and last byte, which
 * carry the iteration (zeroed before each receive); a mismatch exits 3
 * after the result line. With -p a blocking MPI_Probe for the message
 * comes before each MPI_Recv (the probe's status is checked too): a probe
 * waits by testing, a receive on a sync object.
 *
 * One result line on rank 0:
 *   latency shim=0|1 threads=T bytes=S iters=N reps=R probe=0|1 half_rtt_us=X failures=F
 * (iters as asked; n may be fewer, see above).
 */
#include <mpi.h>

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROG "latency"
#include "common.h"

static int nthreads = 1, bytes = 8, iters = 10000, reps = 7, probe;
static MPI_Comm *comms;
static pthread_barrier_t bar;
static double *times; /* per repetition: seconds per half round trip, all pairs at once */
static double *pair_half; /* per pair: its warm-up's seconds per round trip */
#define REP_BUDGET_S 0.2
static int failures;  /* updated under fail_mtx */
static pthread_mutex_t fail_mtx = PTHREAD_MUTEX_INITIALIZER;

/* A received message's status and, with data set, its marks. */
static void check(const unsigned char *b, const MPI_Status *st, int peer, int it, int data)
{
    int n = -1;
    MPI_Get_count(st, MPI_BYTE, &n);
    unsigned char want = (unsigned char)(it % 255 + 1);
    if (n != bytes || st->MPI_SOURCE != peer || st->MPI_TAG != it % 32767 ||
        (data && (b[0] != want || b[bytes - 1] != want))) {
        pthread_mutex_lock(&fail_mtx);
        if (failures++ < 5)
            fprintf(stderr, "latency: rank %d: iteration %d: count %d source %d tag %d (want %d %d %d)\n", rank,
                    it, n, st->MPI_SOURCE, st->MPI_TAG, bytes, peer, it % 32767);
        pthread_mutex_unlock(&fail_mtx);
    }
}

static void bounce(MPI_Comm c, unsigned char *b, int n)
{
    int peer = 1 - rank;
    MPI_Status st;
    for (int it = 0; it < n; it++) {
        /* Rank 0 sends the iteration's mark, rank 1 sends back what it
         * got; each zeroes the bytes checked before its receive. */
        if (rank == 0) {
            if (bytes > 0)
                b[0] = b[bytes - 1] = (unsigned char)(it % 255 + 1);
            check_mpi(MPI_Send(b, bytes, MPI_BYTE, peer, it % 32767, c), "MPI_Send");
        }
        if (bytes > 0)
            b[0] = b[bytes - 1] = 0;
        if (probe) {
            check_mpi(MPI_Probe(peer, it % 32767, c, &st), "MPI_Probe");
            check(b, &st, peer, it, 0);
        }
        check_mpi(MPI_Recv(b, bytes, MPI_BYTE, peer, it % 32767, c, &st), "MPI_Recv");
        check(b, &st, peer, it, bytes > 0);
        if (rank == 1)
            check_mpi(MPI_Send(b, bytes, MPI_BYTE, peer, it % 32767, c), "MPI_Send");
    }
}

static void *pair(void *arg)
{
    int i = (int)(intptr_t)arg;
    unsigned char *b = xcalloc((size_t)bytes, 1);
    int w = iters / 10 < 100 ? iters / 10 + 1 : 100, n = iters;
    double t0 = now();
    bounce(comms[i], b, w); /* warm-up */
    pair_half[i] = (now() - t0) / w; /* here: the pair's seconds per round trip */
    pthread_barrier_wait(&bar);
    double per = 0;
    for (int k = 0; k < nthreads; k++)
        per = pair_half[k] > per ? pair_half[k] : per;
    if (rank == 0 && per * iters > REP_BUDGET_S)
        n = (int)(REP_BUDGET_S / per) + 1;
    /* Rank 0's n for the pair, on the pair's communicator (a tag bounce() never uses). */
    if (rank == 0)
        check_mpi(MPI_Send(&n, 1, MPI_INT, 1, 32767, comms[i]), "MPI_Send");
    else
        check_mpi(MPI_Recv(&n, 1, MPI_INT, 0, 32767, comms[i], MPI_STATUS_IGNORE), "MPI_Recv");
    for (int r = 0; r < reps; r++) {
        pthread_barrier_wait(&bar);
        if (i == 0)
            check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        pthread_barrier_wait(&bar);
        t0 = now();
        bounce(comms[i], b, n);
        pthread_barrier_wait(&bar);
        if (i == 0)
            times[r] = (now() - t0) / n / 2;
    }
    free(b);
    return NULL;
}

static int posint(const char *s, int lo)
{
    char *e;
    long v = strtol(s, &e, 10);
    if (*s == '\0' || *e != '\0' || v < lo || v > 1 << 30) {
        fprintf(stderr, "latency: '%s' is not a number >= %d\n", s, lo);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    int opt;
    while ((opt = getopt(argc, argv, "t:s:n:r:pq")) != -1) {
        switch (opt) {
        case 't': nthreads = posint(optarg, 1); break;
        case 's': bytes = posint(optarg, 0); break;
        case 'n': iters = posint(optarg, 1); break;
        case 'r': reps = posint(optarg, 1); break;
        case 'p': probe = 1; break;
        case 'q': break; /* accepted for the run scripts' sake: the output is one line anyway */
        default:
            fprintf(stderr, "usage: latency [-t threads] [-s bytes] [-n iters] [-r reps] [-p] [-q]\n");
            return 2;
        }
    }
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size != 2)
        die("needs exactly 2 ranks");
    if (nthreads > 1 && provided < MPI_THREAD_MULTIPLE)
        die("the MPI does not provide MPI_THREAD_MULTIPLE");
    comms = xcalloc((size_t)nthreads, sizeof *comms);
    for (int i = 0; i < nthreads; i++)
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comms[i]), "MPI_Comm_dup");
    times = xcalloc((size_t)reps, sizeof *times);
    pair_half = xcalloc((size_t)nthreads, sizeof *pair_half);
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    pthread_t *th = xcalloc((size_t)nthreads, sizeof *th);
    for (int i = 1; i < nthreads; i++)
        if (pthread_create(&th[i], NULL, pair, (void *)(intptr_t)i) != 0)
            die("pthread_create failed");
    pair((void *)(intptr_t)0);
    for (int i = 1; i < nthreads; i++)
        pthread_join(th[i], NULL);
    int all = 0;
    check_mpi(MPI_Reduce(&failures, &all, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    qsort(times, (size_t)reps, sizeof *times, bench_cmp_double);
    if (rank == 0)
        printf("latency shim=%d threads=%d bytes=%d iters=%d reps=%d probe=%d half_rtt_us=%.3f failures=%d\n",
               shim_active(), nthreads, bytes, iters, reps, probe, times[reps / 2] * 1e6, all);
    for (int i = 0; i < nthreads; i++)
        MPI_Comm_free(&comms[i]);
    MPI_Finalize();
    return all ? 3 : 0;
}
