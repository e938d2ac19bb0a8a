/* rma_threads: one-sided communication from many threads of each rank.
 *
 * Every rank exposes a window; in one MPI_Win_lock_all epoch, each of T
 * OpenMP threads of every rank writes its own slot of the next rank's
 * window with MPI_Put and adds to a counter at rank 0 with MPI_Accumulate
 * (MPI_SUM: accumulates to one location are atomic), flushing after each
 * round. After a barrier every rank checks what its left neighbour's
 * threads wrote, and rank 0 checks the counter.
 *
 *   mpirun -np 2 ./rma_threads [threads] [rounds]      (default 4 threads, 100 rounds)
 *   mpishim mpirun -np 2 ./rma_threads                  (the same under the shim)
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#define SLOT 8 /* longs per thread */

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4, rounds = argc > 2 ? atoi(argv[2]) : 100;
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || threads < 1) {
        if (rank == 0)
            fprintf(stderr, "rma_threads: needs MPI_THREAD_MULTIPLE and at least 1 thread\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Window layout: [0] the counter (used at rank 0), then a SLOT per thread. */
    long *base;
    MPI_Win win;
    MPI_Aint bytes = (MPI_Aint)sizeof(long) * (1 + (MPI_Aint)threads * SLOT);
    /* Rounded up to a cache line: MPICH 4.0.2 misplaces remote accesses to
     * the second rank of a node when an MPI_Win_allocate size is not a
     * multiple of 16 bytes (observed with this program). */
    bytes = (bytes + 63) / 64 * 64;
    MPI_Win_allocate(bytes, sizeof(long), MPI_INFO_NULL, MPI_COMM_WORLD, &base, &win);
    for (int i = 0; i < 1 + threads * SLOT; i++)
        base[i] = -1;
    base[0] = 0;
    MPI_Barrier(MPI_COMM_WORLD);

    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    double t0 = MPI_Wtime();
    MPI_Win_lock_all(0, win);
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        long mine[SLOT], one = 1;
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < SLOT; k++)
                mine[k] = (long)rank * 1000000 + t * 1000 + r * SLOT + k; /* unique per rank, thread, round */
            MPI_Put(mine, SLOT, MPI_LONG, right, 1 + (MPI_Aint)t * SLOT, SLOT, MPI_LONG, win);
            MPI_Accumulate(&one, 1, MPI_LONG, 0, 0, 1, MPI_LONG, MPI_SUM, win);
            /* mine is reused next round: the Put must be done with it. */
            MPI_Win_flush(right, win);
            MPI_Win_flush(0, win);
        }
    }
    MPI_Win_unlock_all(win);
    double secs = MPI_Wtime() - t0;
    MPI_Barrier(MPI_COMM_WORLD);

    /* The last round of every thread of the left neighbour is what stays. */
    long bad = 0;
    MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win); /* a local access epoch for reading the window */
    for (int t = 0; t < threads; t++)
        for (int k = 0; k < SLOT; k++)
            bad += base[1 + t * SLOT + k] != (long)left * 1000000 + t * 1000 + (rounds - 1) * SLOT + k;
    if (rank == 0)
        bad += base[0] != (long)size * threads * rounds;
    MPI_Win_unlock(rank, win);
    long all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("rma_threads: %d ranks x %d threads, %d rounds of Put + Accumulate + flush in %.3f s: %s\n", size,
               threads, rounds, secs, all_bad == 0 ? "windows and counter verified" : "WRONG RESULTS");
    MPI_Win_free(&win);
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
