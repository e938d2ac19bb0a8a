/* idle_progress: under a progress thread (MPISHIM_PROGRESS=thread or
 * offload) the thread must sleep while the rank has nothing in flight, and
 * every later post must wake it. Two threads per rank exchange checked
 * messages with the other rank, then every thread stays out of MPI for
 * 200 ms (the progress thread finds nothing pending and sleeps), three
 * times. tests/run.sh checks the data lines and, with MPISHIM_STATS=1,
 * that each rank's progress thread slept; a lost wake-up hangs the second
 * round. Run by tests/run.sh only (tests/proc/). */
#include <mpi.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 3
#define MSGS 64
#define NTHREADS 2

static int rank, peer;
static pthread_barrier_t bar;
static int bad;

static void *worker(void *arg)
{
    int t = (int)(long)arg;
    for (int round = 0; round < ROUNDS; round++) {
        int out[MSGS], in[MSGS];
        MPI_Request rq[2 * MSGS];
        MPI_Status st[2 * MSGS];
        for (int i = 0; i < MSGS; i++) {
            out[i] = rank * 1000000 + round * 10000 + t * 1000 + i;
            in[i] = -1;
            MPI_Irecv(&in[i], 1, MPI_INT, peer, t * MSGS + i, MPI_COMM_WORLD, &rq[i]);
        }
        for (int i = 0; i < MSGS; i++)
            MPI_Isend(&out[i], 1, MPI_INT, peer, t * MSGS + i, MPI_COMM_WORLD, &rq[MSGS + i]);
        MPI_Waitall(2 * MSGS, rq, st);
        for (int i = 0; i < MSGS; i++)
            if (in[i] != peer * 1000000 + round * 10000 + t * 1000 + i)
                __atomic_fetch_add(&bad, 1, __ATOMIC_RELAXED);
        pthread_barrier_wait(&bar);
        /* Out of MPI: nothing pending on this rank. */
        struct timespec ts = { 0, 200 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || size != 2) {
        fprintf(stderr, "idle_progress: needs MPI_THREAD_MULTIPLE and 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    pthread_barrier_init(&bar, NULL, NTHREADS);
    pthread_t th[NTHREADS];
    for (long t = 0; t < NTHREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    if (bad)
        printf("FAIL idle_progress rank %d: %d wrong payloads\n", rank, bad);
    else
        printf("OK idle_progress rank %d: %d rounds\n", rank, ROUNDS);
    fflush(stdout);
    MPI_Finalize();
    return bad != 0;
}
