/* fatal_call: an error the shim raises itself, under the default (fatal)
 * error handler, must name the MPI call the program made. Run with
 * MPISHIM_ASSERT=no_any_tag: rank 0's MPI_Recv with MPI_ANY_TAG is refused
 * by the shim (MPI_ERR_TAG through MPI_COMM_WORLD's handler), the other
 * ranks wait in a barrier that never completes. tests/run.sh checks that the
 * job failed and that the line "mpishim: rank 0: error in MPI_Recv: ..."
 * was printed (the host's own report names MPI_Comm_call_errhandler, the
 * call the shim raised the error with). Run by tests/run.sh only. */
#include <mpi.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    int provided, rank, size, buf = 0;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (rank == 0) {
        MPI_Recv(&buf, 1, MPI_INT, size - 1, MPI_ANY_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        printf("NOT-ABORTED MPI_Recv returned\n");
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
