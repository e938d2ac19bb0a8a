/*
 * ctors.c - what a communicator constructor costs, T threads constructing at once.
 *
 *   mpirun -np P ctors [-t T] [-n pairs]
 *
 * Every thread of every rank gets a parent communicator of its own (a
 * duplicate of MPI_COMM_WORLD whose info asserts mpi_assert_no_any_tag, so
 * that a shim may spread the children over its VCIs, which they inherit
 * from MPI_Comm_dup), and makes n MPI_Comm_dup + MPI_Comm_free pairs of it
 * (default 300), the threads of a rank starting together. What a program
 * that makes communicators as it goes pays per communicator, and whether
 * threads constructing at once wait for each other. MPI_THREAD_MULTIPLE
 * always.
 *
 * The pairs are timed in CHUNKS runs of n / CHUNKS each, and a thread's
 * figure is its median run: one run of 300 pairs lasts a few milliseconds,
 * so a single descheduling (a time slice, 4 ms) decided the whole figure.
 *
 * One result line on rank 0, the slowest thread of any rank (its median
 * run; mean: its whole time over n):
 *   ctors shim=0|1 ranks=P threads=T pairs=N us_per_pair=X mean_us_per_pair=Y
 */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROG "ctors"
#include "common.h"

#define CHUNKS 10

static int nthreads = 1, pairs = 300;
static MPI_Comm *parents;
static double *elapsed; /* per thread: seconds for its pairs */
static double *median;  /* per thread: seconds a pair, its median run */
static pthread_barrier_t bar;

static void *run(void *arg)
{
    int t = (int)(long)arg, k = pairs < CHUNKS ? pairs : CHUNKS, done = 0;
    double per[CHUNKS];
    pthread_barrier_wait(&bar);
    double t0 = now();
    for (int j = 0; j < k; j++) {
        int n = (pairs - done) / (k - j); /* the rest shared out: every run has n or n + 1 */
        double c0 = now();
        for (int i = 0; i < n; i++) {
            MPI_Comm c;
            check_mpi(MPI_Comm_dup(parents[t], &c), "MPI_Comm_dup");
            check_mpi(MPI_Comm_free(&c), "MPI_Comm_free");
        }
        per[j] = (now() - c0) / n;
        done += n;
    }
    elapsed[t] = now() - t0;
    median[t] = bench_median(per, k);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size, c;
    while ((c = getopt(argc, argv, "t:n:")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'n': pairs = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: ctors [-t threads] [-n pairs]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE)
        die("the host does not provide MPI_THREAD_MULTIPLE");
    if (nthreads < 1 || nthreads > 256 || pairs < 1)
        die("-t must be 1..256 and -n at least 1");
    parents = xcalloc((size_t)nthreads, sizeof *parents);
    elapsed = xcalloc((size_t)nthreads, sizeof *elapsed);
    median = xcalloc((size_t)nthreads, sizeof *median);
    MPI_Info info;
    MPI_Info_create(&info);
    MPI_Info_set(info, "mpi_assert_no_any_tag", "true");
    for (int t = 0; t < nthreads; t++)
        check_mpi(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &parents[t]), "MPI_Comm_dup_with_info");
    MPI_Info_free(&info);
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    pthread_t *th = xcalloc((size_t)nthreads, sizeof *th);
    MPI_Barrier(MPI_COMM_WORLD);
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, run, (void *)(long)t) != 0)
            die("pthread_create failed");
    double slowest[2] = { 0, 0 }, all[2] = { 0, 0 }; /* median run, whole time */
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        if (median[t] > slowest[0])
            slowest[0] = median[t];
        if (elapsed[t] > slowest[1])
            slowest[1] = elapsed[t];
    }
    MPI_Reduce(slowest, all, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("ctors shim=%d ranks=%d threads=%d pairs=%d us_per_pair=%.2f mean_us_per_pair=%.2f\n", shim_active(),
               size, nthreads, pairs, all[0] * 1e6, all[1] / pairs * 1e6);
    for (int t = 0; t < nthreads; t++)
        MPI_Comm_free(&parents[t]);
    free(th);
    free(parents);
    free(elapsed);
    free(median);
    MPI_Finalize();
    return 0;
}
