/*
 * colls.c - what a blocking collective costs one thread, raw and under the
 * shim (its default MPISHIM_COLL=auto makes a one-thread program's blocking
 * collectives the host's own calls; MPISHIM_COLL=nonblocking makes them the
 * nonblocking twin plus a wait).
 *
 * MPI_THREAD_MULTIPLE, one thread per rank, MPI_COMM_WORLD: MPI_Allreduce
 * (4 B and 4 KiB of floats), MPI_Bcast from rank 0 (4 B, 4 KiB) and
 * MPI_Barrier, N calls each after N / 10 untimed ones, a barrier before
 * each timed loop, rank 0's clock. One line:
 *   colls: shim=S allreduce4=NS allreduce4k=NS bcast4=NS bcast4k=NS barrier=NS
 * in nanoseconds per call (bench/run_colls.sh takes medians over runs).
 *
 * Usage: mpirun -np P colls [-n N]   (default N = 20000)
 */
#include <stdlib.h>
#include <unistd.h>

#define BENCH_PROG "colls"
#include "common.h"

enum { ALLREDUCE, BCAST, BARRIER };

static double loop(int which, int count, int n)
{
    static float a[1024], b[1024];
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t = now();
    for (int i = 0; i < n; i++) {
        if (which == ALLREDUCE)
            check_mpi(MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        else if (which == BCAST)
            check_mpi(MPI_Bcast(a, count, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
        else
            check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
    return (now() - t) / n * 1e9;
}

int main(int argc, char **argv)
{
    int provided, c, n = 20000;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    while ((c = getopt(argc, argv, "n:")) != -1) {
        if (c == 'n')
            n = atoi(optarg);
        else
            die("usage: colls [-n N]");
    }
    if (n < 1 || provided != MPI_THREAD_MULTIPLE)
        die("needs N >= 1 and MPI_THREAD_MULTIPLE");
    static const struct { const char *name; int which, count; } runs[] = {
        { "allreduce4", ALLREDUCE, 1 }, { "allreduce4k", ALLREDUCE, 1024 }, { "bcast4", BCAST, 1 },
        { "bcast4k", BCAST, 1024 },     { "barrier", BARRIER, 0 },
    };
    double ns[5];
    for (int k = 0; k < 5; k++) {
        loop(runs[k].which, runs[k].count, n / 10 + 1); /* warm-up */
        ns[k] = loop(runs[k].which, runs[k].count, n);
    }
    if (rank == 0) {
        printf("colls: shim=%d", shim_active());
        for (int k = 0; k < 5; k++)
            printf(" %s=%.1f", runs[k].name, ns[k]);
        printf("\n");
    }
    MPI_Finalize();
    return 0;
}
