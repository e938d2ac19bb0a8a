/* crash: rank 0 (or a singleton) writes through a null pointer after
 * MPI_Init_thread(MULTIPLE). tests/run.sh checks that the process dies by
 * SIGSEGV under the shim exactly as it does without it: no library the shim
 * brings may turn the signal into an exit status. Run by tests/run.sh only. */
#include <mpi.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        volatile int *volatile p = NULL; /* both volatile: gcc drops the store otherwise */
        *p = 1;
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
