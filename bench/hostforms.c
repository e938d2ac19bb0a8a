/*
 * hostforms.c - what the host MPI charges for a blocking call against its
 * nonblocking form plus a test loop. The shim's rule that no thread blocks
 * in the host makes every blocking call under the shim's runtime a nonblocking call plus
 * a wait; this measures the floor that puts under the threads.c pattern's
 * blocking phase, on the raw host (run it without the shim).
 *
 * 2 ranks, one thread, 8-byte messages on MPI_COMM_WORLD: rank 0 sends N
 * messages, rank 1 receives them, in four modes:
 *   send-recv     MPI_Send            / MPI_Recv
 *   send-irecv    MPI_Send            / MPI_Irecv + MPI_Test until done
 *   isend-recv    MPI_Isend + MPI_Test / MPI_Recv
 *   isend-irecv   MPI_Isend + MPI_Test / MPI_Irecv + MPI_Test
 * Each mode runs REPS times (after one untimed warm-up pass); the line gives
 * the median nanoseconds per message measured on the receiver.
 *
 * Then the same for blocking collectives, which the runtime makes as their
 * nonblocking twin plus a wait with MPISHIM_COLL=nonblocking, and under the
 * default (auto) once a process of the communicator has had threads in MPI
 * at once:
 * MPI_Allreduce (4 B and 4 KiB of floats), MPI_Bcast (4 B, 4 KiB) and
 * MPI_Barrier, blocking against MPI_I<call> + MPI_Wait, N / 20 calls per
 * pass, rank 0's clock.
 *
 * Usage: mpirun -np 2 hostforms [-n N] [-r REPS]   (defaults N = 1000000, REPS = 5)
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_PROG "hostforms"
#include "common.h"

static void test_until_done(MPI_Request *r)
{
    int f = 0;
    while (!f)
        check_mpi(MPI_Test(r, &f, MPI_STATUS_IGNORE), "MPI_Test");
}

static double run_mode(int isend, int irecv, int n)
{
    char buf[8] = { 0 };
    MPI_Request r;
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t = now();
    for (int i = 0; i < n; i++) {
        if (rank == 0 && isend) {
            check_mpi(MPI_Isend(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD, &r), "MPI_Isend");
            test_until_done(&r);
        } else if (rank == 0) {
            check_mpi(MPI_Send(buf, 8, MPI_BYTE, 1, 0, MPI_COMM_WORLD), "MPI_Send");
        } else if (irecv) {
            check_mpi(MPI_Irecv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &r), "MPI_Irecv");
            test_until_done(&r);
        } else {
            check_mpi(MPI_Recv(buf, 8, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        }
    }
    return (now() - t) / n * 1e9;
}

/* One collective, blocking (nb = 0) or nonblocking + MPI_Wait; count floats. */
enum { COLL_ALLREDUCE, COLL_BCAST, COLL_BARRIER };
static double run_coll(int which, int count, int nb, int n)
{
    static float a[1024], b[1024];
    MPI_Request r;
    check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t = now();
    for (int i = 0; i < n; i++) {
        if (which == COLL_ALLREDUCE && nb) {
            check_mpi(MPI_Iallreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r), "MPI_Iallreduce");
        } else if (which == COLL_ALLREDUCE) {
            check_mpi(MPI_Allreduce(a, b, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        } else if (which == COLL_BCAST && nb) {
            check_mpi(MPI_Ibcast(a, count, MPI_FLOAT, 0, MPI_COMM_WORLD, &r), "MPI_Ibcast");
        } else if (which == COLL_BCAST) {
            check_mpi(MPI_Bcast(a, count, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
        } else if (nb) {
            check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &r), "MPI_Ibarrier");
        } else {
            check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        }
        if (nb)
            check_mpi(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
    }
    return (now() - t) / n * 1e9;
}

int main(int argc, char **argv)
{
    int provided, size, c, n = 1000000, reps = 5;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    while ((c = getopt(argc, argv, "n:r:")) != -1) {
        if (c == 'n')
            n = atoi(optarg);
        else if (c == 'r')
            reps = atoi(optarg);
        else
            die("usage: hostforms [-n N] [-r REPS]");
    }
    if (size != 2 || n < 1 || reps < 1 || reps > 99)
        die("needs exactly 2 ranks, N >= 1 and 1 <= REPS <= 99");
    static const char *names[4] = { "send-recv", "send-irecv", "isend-recv", "isend-irecv" };
    for (int m = 0; m < 4; m++) {
        double ns[99];
        run_mode(m & 2, m & 1, n / 10 + 1); /* warm-up */
        for (int k = 0; k < reps; k++)
            ns[k] = run_mode(m & 2, m & 1, n);
        qsort(ns, (size_t)reps, sizeof ns[0], bench_cmp_double);
        if (rank == 1)
            printf("hostforms: %-12s %8.1f ns/msg (median of %d x %d messages, receiver's clock)\n", names[m],
                   ns[reps / 2], reps, n);
    }
    fflush(stdout);
    static const struct { const char *name; int which, count; } colls[] = {
        { "allreduce 4B", COLL_ALLREDUCE, 1 }, { "allreduce 4K", COLL_ALLREDUCE, 1024 },
        { "bcast 4B", COLL_BCAST, 1 },         { "bcast 4K", COLL_BCAST, 1024 },
        { "barrier", COLL_BARRIER, 0 },
    };
    int nc = n / 20 + 1;
    for (size_t k = 0; k < sizeof colls / sizeof colls[0]; k++) {
        double ns[2][99];
        for (int nb = 0; nb < 2; nb++) {
            run_coll(colls[k].which, colls[k].count, nb, nc / 10 + 1); /* warm-up */
            for (int j = 0; j < reps; j++)
                ns[nb][j] = run_coll(colls[k].which, colls[k].count, nb, nc);
            qsort(ns[nb], (size_t)reps, sizeof ns[nb][0], bench_cmp_double);
        }
        if (rank == 0)
            printf("hostforms: %-12s %8.1f ns blocking, %8.1f ns nonblocking + wait (median of %d x %d calls)\n",
                   colls[k].name, ns[0][reps / 2], ns[1][reps / 2], reps, nc);
    }
    MPI_Finalize();
    return 0;
}
