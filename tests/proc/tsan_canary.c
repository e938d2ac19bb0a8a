/* A deliberate data race in an MPI+threads program under the shim, run only
 * by `make check-tsan`, which expects ThreadSanitizer to report it.
 *
 * check-tsan tells TSan to ignore the memory accesses that the uninstrumented
 * host makes through intercepted functions (ignore_noninstrumented_modules:
 * the host's memcpy into a receive buffer is ordered before the owner's read
 * only by the host's own atomics, which TSan cannot see). This program proves
 * that setting does not blind TSan to races in instrumented code: two threads
 * exchange messages through the shim, then both touch one receive buffer with
 * no synchronisation visible to TSan: relaxed atomic flags make both
 * threads leave MPI_Waitall first (while one still sleeps inside the shim,
 * its wake-up may legitimately order the other's later access) and then put
 * the write before the read in real time, neither of which creates a
 * happens-before edge. So TSan must report the pair on every run.
 */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

static int rank, peer;
static int rbuf[2][4];
static volatile int sink;
static atomic_int left_mpi, written;

static void *worker(void *arg)
{
    int t = (int)(long)arg, sbuf[4] = {rank, t, 1, 2};
    MPI_Request rq[2];
    MPI_Status st[2];
    MPI_Irecv(rbuf[t], 4, MPI_INT, peer, t, MPI_COMM_WORLD, &rq[0]);
    MPI_Isend(sbuf, 4, MPI_INT, peer, t, MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, st);
    atomic_fetch_add_explicit(&left_mpi, 1, memory_order_relaxed);
    while (atomic_load_explicit(&left_mpi, memory_order_relaxed) < 2)
        ;
    if (t == 1) {
        rbuf[0][0] = -1; /* thread 1 overwrites thread 0's received data ... */
        atomic_store_explicit(&written, 1, memory_order_relaxed);
    } else {
        while (!atomic_load_explicit(&written, memory_order_relaxed))
            ;
        sink = rbuf[0][0]; /* ... which thread 0 then reads: the race */
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
        fprintf(stderr, "tsan_canary: needs MPI_THREAD_MULTIPLE and 2 ranks\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    peer = 1 - rank;
    pthread_t th[2];
    for (long t = 0; t < 2; t++)
        pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < 2; t++)
        pthread_join(th[t], NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("tsan_canary: finished\n");
    MPI_Finalize();
    return 0;
}
