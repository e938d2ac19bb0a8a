/* Threads whose last MPI call is still returning while the main thread
 * finalizes.
 *
 * MPICH's test threads/comm/ctxidup does this: a thread's last call is an
 * MPI_Send to its own process, the main thread receives it and goes on to
 * MPI_Finalize without joining the thread. MPI 3.1 (sec. 12.4.3) asks that
 * the other threads have completed their MPI calls first, but both hosts
 * survive the program. Under the shim with MPISHIM_PROGRESS=combine
 * the send finishes at the main thread's receive while its thread still has
 * to retire its request, into the VCI's request cache: finalize freed the
 * VCIs, so the late retire wrote into freed memory (a segfault in
 * msh_vci_req_put, or "malloc(): unaligned tcache chunk detected" in the
 * host's finalize; 1 in 3 runs of ctxidup at np 4). The shim must keep what
 * such a call still touches.
 *
 * NT threads each send one message to their own process, then return; the
 * main thread receives all of them, finalizes at once, and joins the
 * threads only after MPI_Finalize. Passes when no rank crashes. */
#include "testutil.h"

#include <pthread.h>

#define NT 8
#define ROUNDS 4

static int rank;

static void *last_send(void *arg)
{
    int v = (int)(intptr_t)arg;
    /* No CHECK: the main thread may be finalizing by the time it returns. */
    MPI_Send(&v, 1, MPI_INT, rank, 100 + v, MPI_COMM_WORLD);
    return NULL;
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("mt_finalize_late", 60);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    pthread_t th[NT];
    /* Rounds that are joined before the next, then a last one that is not
     * joined before MPI_Finalize. */
    for (int round = 0; round <= ROUNDS; round++) {
        test_step = round < ROUNDS ? "joined round" : "last round";
        for (int i = 0; i < NT; i++)
            CHECK(pthread_create(&th[i], NULL, last_send, (void *)(intptr_t)i) == 0, "pthread_create");
        for (int i = 0; i < NT; i++) {
            int got = -1;
            MPI_Status st;
            CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, rank, 100 + i, MPI_COMM_WORLD, &st));
            CHECK(got == i && st.MPI_SOURCE == rank && st.MPI_TAG == 100 + i,
                  "round %d: received %d from %d tag %d, expected %d from %d tag %d", round, got, st.MPI_SOURCE,
                  st.MPI_TAG, i, rank, 100 + i);
        }
        if (round == ROUNDS)
            break;
        for (int i = 0; i < NT; i++)
            pthread_join(th[i], NULL);
    }
    test_step = "finalize";
    test_watchdog("mt_finalize_late", 0);
    test_finish("mt_finalize_late");
    for (int i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    return 0;
}
