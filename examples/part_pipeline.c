/* part_pipeline: an MPI-4 partitioned "early bird" pipeline.
 *
 * Rank 0 produces a buffer of P partitions with OpenMP threads and hands
 * each partition to MPI with MPI_Pready as soon as its thread has filled
 * it, instead of waiting for the whole buffer. Rank 1 polls MPI_Parrived and
 * consumes each partition as soon as it is there, in whatever order they
 * come. One persistent partitioned request per side is started once per
 * round. Every partition's data is checked.
 *
 * On a host without MPI-4 partitioned calls (Open MPI 4.1) mpishim provides
 * them: link with -lmpishim (mpishim.h declares them) and run under the
 * shim; without it the program says so and exits.
 *
 *   mpishim mpirun -np 2 ./part_pipeline [partitions] [rounds]   (default 16, 20)
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#if MPI_VERSION < 4
#include "mpishim.h"
#endif

#define N 1024 /* doubles per partition */

static double value(int round, int part, int k)
{
    return round * 1e6 + part * 1e3 + k;
}

int main(int argc, char **argv)
{
    int parts = argc > 1 ? atoi(argv[1]) : 16, rounds = argc > 2 ? atoi(argv[2]) : 20;
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#if MPI_VERSION < 4
    if (!mpishim_active()) {
        if (rank == 0)
            printf("part_pipeline: this MPI (%d.%d) has no partitioned communication; run it under mpishim\n",
                   MPI_VERSION, MPI_SUBVERSION);
        MPI_Finalize();
        return 0;
    }
#endif
    if (provided < MPI_THREAD_MULTIPLE || size < 2 || parts < 1) {
        if (rank == 0)
            fprintf(stderr, "part_pipeline: needs MPI_THREAD_MULTIPLE, 2 ranks and at least 1 partition\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    double *buf = malloc(sizeof(double) * N * (size_t)parts);
    MPI_Request req = MPI_REQUEST_NULL;
    long bad = 0, consumed = 0;
    if (rank == 0)
        MPI_Psend_init(buf, parts, N, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    else if (rank == 1)
        MPI_Precv_init(buf, parts, N, MPI_DOUBLE, 0, 7, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    char *seen = calloc((size_t)parts, 1);

    double t0 = MPI_Wtime();
    for (int r = 0; r < rounds && rank < 2; r++) {
        MPI_Start(&req);
        if (rank == 0) {
            /* Each thread fills its partitions and marks each one ready
             * at once: the first ones travel while the last are computed. */
#pragma omp parallel for schedule(dynamic, 1)
            for (int p = 0; p < parts; p++) {
                for (int k = 0; k < N; k++)
                    buf[(size_t)p * N + k] = value(r, p, k);
                MPI_Pready(p, req);
            }
        } else {
            /* Consume partitions in the order they arrive. */
            for (int p = 0; p < parts; p++)
                seen[p] = 0;
            for (int left = parts; left > 0;) {
                for (int p = 0; p < parts; p++) {
                    int flag = 0;
                    if (seen[p] || (MPI_Parrived(req, p, &flag), !flag))
                        continue;
                    for (int k = 0; k < N; k++)
                        bad += buf[(size_t)p * N + k] != value(r, p, k);
                    seen[p] = 1;
                    consumed++;
                    left--;
                }
            }
        }
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    double secs = MPI_Wtime() - t0;
    if (req != MPI_REQUEST_NULL)
        MPI_Request_free(&req);

    long all_bad = 0;
    MPI_Reduce(&bad, &all_bad, 1, MPI_LONG, MPI_SUM, 1, MPI_COMM_WORLD);
    if (rank == 1)
        printf("part_pipeline: %d rounds of %d partitions x %d doubles in %.3f s, %ld partitions consumed as "
               "they arrived: %s\n",
               rounds, parts, N, secs, consumed,
               all_bad == 0 && consumed == (long)rounds * parts ? "data verified" : "WRONG DATA");
    free(seen);
    free(buf);
    MPI_Finalize();
    return all_bad == 0 ? 0 : 1;
}
