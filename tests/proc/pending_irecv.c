/* pending_irecv: rank 0 leaves a receive that nothing matches pending at
 * MPI_Finalize (one thread, MPI_THREAD_MULTIPLE: the solo path). With
 * MPISHIM_STATS=1 the shim must report it; tests/run.sh checks the line.
 * Run by tests/run.sh only (tests/proc/). */
#include <mpi.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    int provided, rank, buf = 0;
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, 4242, MPI_COMM_WORLD, &req);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        printf("OK pending_irecv\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
