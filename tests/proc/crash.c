/* crash: rank 0 (or a singleton) writes through a null pointer after
 * MPI_Init_thread(MULTIPLE). tests/run.sh checks that the process dies by
 * SIGSEGV under the shim exactly as it does without it: no library the shim
 * brings may turn the signal into an exit status. With the argument "recv"
 * the other ranks wait in MPI_Recv from rank 0 meanwhile (on a lane, when
 * one is open): the job must still end as raw, not hang. With "kill"
 * rank 0 dies by SIGKILL instead, which no handler sees (what a lane
 * leaves behind then). Run by tests/run.sh only. */
#include <mpi.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int recv = argc > 1 && strcmp(argv[1], "recv") == 0;
    if (recv)
        MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        if (recv)
            usleep(200000); /* the others are in MPI_Recv by then */
        if (argc > 1 && strcmp(argv[1], "kill") == 0)
            raise(SIGKILL);
        volatile int *volatile p = NULL; /* both volatile: gcc drops the store otherwise */
        *p = 1;
    }
    if (recv) {
        int v;
        MPI_Recv(&v, 1, MPI_INT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
