/* fatal_part: an error the shim raises in a partitioned call, under the
 * default (fatal) error handler, must name the program's call, as
 * fatal_call checks for MPI_Recv. These calls used to end in a jump into the
 * code that raises the error, which left no frame of theirs on the stack
 * for the report to find ("error in an MPI call"). argv[1] says which
 * error rank 0 makes, once both ranks have a started partitioned request:
 *   pready   MPI_Pready of a partition out of range   (MPI_Pready)
 *   list     MPI_Pready_list with one out of range    (MPI_Pready_list)
 *   cancel   MPI_Cancel of the active request          (MPI_Cancel)
 *   free     MPI_Request_free of the active request    (MPI_Request_free)
 *   start    MPI_Start of the active request           (MPI_Start)
 *   startall MPI_Startall of the active request        (MPI_Startall)
 * tests/run.sh checks that the job failed and the line naming the call.
 * Run by tests/run.sh only. */
#include <mpi.h>
#include <mpishim.h>

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    int provided, rank, buf[8] = {0};
    const char *mode = argc > 1 ? argv[1] : "pready";
    MPI_Request req;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        MPI_Psend_init(buf, 4, 2, MPI_INT, 1, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    else if (rank == 1)
        MPI_Precv_init(buf, 4, 2, MPI_INT, 0, 3, MPI_COMM_WORLD, MPI_INFO_NULL, &req);
    if (rank <= 1)
        MPI_Start(&req);
    if (rank == 0) {
        int bad[2] = {0, 9};
        if (strcmp(mode, "list") == 0)
            MPI_Pready_list(2, bad, req);
        else if (strcmp(mode, "cancel") == 0)
            MPI_Cancel(&req);
        else if (strcmp(mode, "free") == 0)
            MPI_Request_free(&req);
        else if (strcmp(mode, "start") == 0)
            MPI_Start(&req);
        else if (strcmp(mode, "startall") == 0)
            MPI_Startall(1, &req);
        else
            MPI_Pready(4, req);
        printf("NOT-ABORTED %s returned\n", mode);
        fflush(stdout);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
