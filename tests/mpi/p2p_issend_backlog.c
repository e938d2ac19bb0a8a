/* Many synchronous sends that wait for receives the peer posts later.
 *
 * Even rank s Issends NMSG messages with tag A to s + 1, then NMSG with tag
 * B, and waits for all of them. The receiver posts the NMSG receives for B
 * first, waits for them, and only then posts those for A. This is correct
 * MPI: the B messages match at once, and the A sends complete once their
 * receives are posted. A transport that spends a resource of its own per
 * outstanding synchronous send (a posted receive for its acknowledgement,
 * say) runs out of it while the A sends wait, and then cannot send B: the
 * fabric lane did, with libfabric's tcp;ofi_rxm (its receive queue holds
 * about a thousand receives), and both ranks hung. Each message carries its
 * sequence number, so order and data are checked too. Also on threads: T
 * threads per rank do the same on tags of their own. */
#include "testutil.h"

#define NMSG 3000
#define TAG_A 11
#define TAG_B 12

static int rank, size;

#define NTHREADS 3

static void pairwise(int tid)
{
    int peer = rank % 2 == 0 ? rank + 1 : rank - 1;
    if (peer >= size) /* the last of an odd number */
        return;
    int ta = TAG_A + 10 * tid, tb = TAG_B + 10 * tid;
    int *buf = malloc(sizeof(int) * 2 * NMSG);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * NMSG);
    CHECK(buf && reqs, "out of memory");
    if (rank % 2 == 0) {
        for (int k = 0; k < 2 * NMSG; k++) {
            buf[k] = rank * 1000003 + tid * 100003 + k;
            CHECK_MPI(MPI_Issend(&buf[k], 1, MPI_INT, peer, k < NMSG ? ta : tb, MPI_COMM_WORLD, &reqs[k]));
        }
        CHECK_MPI(MPI_Waitall(2 * NMSG, reqs, MPI_STATUSES_IGNORE));
    } else {
        for (int k = 0; k < 2 * NMSG; k++)
            buf[k] = -1;
        for (int k = 0; k < NMSG; k++)
            CHECK_MPI(MPI_Irecv(&buf[NMSG + k], 1, MPI_INT, peer, tb, MPI_COMM_WORLD, &reqs[k]));
        CHECK_MPI(MPI_Waitall(NMSG, reqs, MPI_STATUSES_IGNORE));
        for (int k = 0; k < NMSG; k++)
            CHECK_MPI(MPI_Irecv(&buf[k], 1, MPI_INT, peer, ta, MPI_COMM_WORLD, &reqs[k]));
        CHECK_MPI(MPI_Waitall(NMSG, reqs, MPI_STATUSES_IGNORE));
        for (int k = 0; k < 2 * NMSG; k++)
            CHECK(buf[k] == peer * 1000003 + tid * 100003 + k, "thread %d: message %d (tag %s) holds %d, expected %d",
                  tid, k, k < NMSG ? "A" : "B", buf[k], peer * 1000003 + tid * 100003 + k);
    }
    free(buf);
    free(reqs);
}

static void *thread_main(void *arg)
{
    pairwise((int)(intptr_t)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_watchdog("p2p_issend_backlog", 100);

    test_step = "one thread";
    pairwise(0);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    if (provided == MPI_THREAD_MULTIPLE) {
        test_step = "threads";
        test_run_threads(NTHREADS, thread_main);
    }
    test_finish("p2p_issend_backlog");
    return 0;
}
