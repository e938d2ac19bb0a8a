/*
 * testrate.c - how fast threads that wait by testing can test, T at once.
 *
 *   mpirun -np P testrate [-t T] [-d seconds] [-w]
 *
 * Every thread of every rank posts one receive that no message matches, on
 * a communicator of its own (a duplicate of MPI_COMM_WORLD per thread, so
 * that a shim can give each thread a VCI), and calls MPI_Test on it in a
 * loop for d seconds (default 1), the threads of a rank starting together;
 * then cancels it and checks that the status says cancelled. This is the
 * empty test a thread of a task runtime or a polling loop repeats while it
 * waits: what it costs, and whether T threads testing at once slow each
 * other down. MPI_THREAD_MULTIPLE always. MPI everywhere is -np T -t 1.
 *
 * -w: a waiter thread besides, blocked in MPI_Recv on thread 0's
 * communicator for a message its rank sends itself once the testers are
 * done: the tests of a program one of whose threads waits. (Under the
 * shim that thread waits inside the host, having entered MPI alone, or
 * with MPISHIM_SOLO=0 owns the progress of its VCI, and the tests beside it
 * poll by the polling-loop rule.) Not on MPICH 4.0.2 at one rank: there a
 * thread blocked in a receive from its own rank is never woken by another
 * thread's send to it (raw too), so the run hangs.
 *
 * One result line on rank 0, the mean over every thread of every rank:
 *   testrate shim=0|1 ranks=P threads=T waiter=0|1 seconds=D mtests_per_s_per_thread=X failures=F
 * (failures: receives whose cancel did not show in their status; exit 3).
 */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROG "testrate"
#include "common.h"

static int nthreads = 1;
static double seconds = 1.0;
static MPI_Comm *comms;
static double *rates;  /* per thread: tests a second */
static int *bad;       /* per thread: its cancel did not show */
static pthread_barrier_t bar;
static int with_waiter;
#define WAKE_TAG 4343

static void *waiter(void *arg)
{
    (void)arg;
    int v = 0;
    check_mpi(MPI_Recv(&v, 1, MPI_INT, rank, WAKE_TAG, comms[0], MPI_STATUS_IGNORE), "MPI_Recv (waiter)");
    return NULL;
}

static void *run(void *arg)
{
    int t = (int)(long)arg;
    int buf = 0, flag = 0, cancelled = 0;
    MPI_Request r;
    MPI_Status st;
    /* A tag nobody sends; the source is this rank, which sends nothing. */
    check_mpi(MPI_Irecv(&buf, 1, MPI_INT, rank, 4242, comms[t], &r), "MPI_Irecv");
    pthread_barrier_wait(&bar);
    double t0 = now(), t1;
    long n = 0;
    do {
        for (int i = 0; i < 64; i++)
            MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        n += 64;
        t1 = now();
    } while (t1 - t0 < seconds && !flag);
    rates[t] = (double)n / (t1 - t0);
    check_mpi(MPI_Cancel(&r), "MPI_Cancel");
    check_mpi(MPI_Wait(&r, &st), "MPI_Wait");
    MPI_Test_cancelled(&st, &cancelled);
    bad[t] = flag || !cancelled;
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size, c;
    while ((c = getopt(argc, argv, "t:d:w")) != -1) {
        switch (c) {
        case 't': nthreads = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'w': with_waiter = 1; break;
        default:
            fprintf(stderr, "usage: testrate [-t threads] [-d seconds] [-w]\n");
            return 2;
        }
    }
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE)
        die("the host does not provide MPI_THREAD_MULTIPLE");
    if (nthreads < 1 || nthreads > 256 || !(seconds > 0))
        die("-t must be 1..256 and -d above 0");
    comms = xcalloc((size_t)nthreads, sizeof *comms);
    rates = xcalloc((size_t)nthreads, sizeof *rates);
    bad = xcalloc((size_t)nthreads, sizeof *bad);
    for (int t = 0; t < nthreads; t++)
        check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]), "MPI_Comm_dup");
    pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
    pthread_t *th = xcalloc((size_t)nthreads, sizeof *th);
    pthread_t wth;
    if (with_waiter) {
        if (pthread_create(&wth, NULL, waiter, NULL) != 0)
            die("pthread_create failed");
        usleep(20000); /* into its MPI_Recv before the tests start */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int t = 0; t < nthreads; t++)
        if (pthread_create(&th[t], NULL, run, (void *)(long)t) != 0)
            die("pthread_create failed");
    double sum = 0;
    int nbad = 0;
    for (int t = 0; t < nthreads; t++) {
        pthread_join(th[t], NULL);
        sum += rates[t];
        nbad += bad[t];
    }
    if (with_waiter) {
        int v = 1;
        check_mpi(MPI_Send(&v, 1, MPI_INT, rank, WAKE_TAG, comms[0]), "MPI_Send (wake)");
        pthread_join(wth, NULL);
    }
    double all = 0;
    int allbad = 0;
    MPI_Reduce(&sum, &all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&nbad, &allbad, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("testrate shim=%d ranks=%d threads=%d waiter=%d seconds=%g mtests_per_s_per_thread=%.3f failures=%d\n",
               shim_active(), size, nthreads, with_waiter, seconds, all / (size * nthreads) / 1e6, allbad);
    for (int t = 0; t < nthreads; t++)
        MPI_Comm_free(&comms[t]);
    free(th);
    free(comms);
    free(rates);
    free(bad);
    MPI_Finalize();
    return allbad ? 3 : 0;
}
