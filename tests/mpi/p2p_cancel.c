/* Cancelling receives and MPI_Request_get_status through the shim.
 * A shim that tracks requests must let a cancelled receive go away without
 * it later swallowing a real message, and must not free a request on
 * MPI_Request_get_status. Ring topology: send right, receive left. */
#include "testutil.h"

#define TAG_NEVER 999 /* nobody sends this until the cancels are done */

static int rank, size, left, right;

static void cancel_one(int src, const char *what)
{
    int buf = -1, flag = 0;
    MPI_Request r;
    MPI_Status st;
    CHECK_MPI(MPI_Irecv(&buf, 1, MPI_INT, src, TAG_NEVER, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK(r != MPI_REQUEST_NULL, "%s: MPI_Cancel freed the request", what);
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "%s: Wait on cancelled request did not free it", what);
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "%s: MPI_Test_cancelled false for a receive that cannot match", what);
    CHECK(buf == -1, "%s: cancelled receive wrote %d to the buffer", what, buf);
}

static void cancels(void)
{
    cancel_one(left, "specific source");
    cancel_one(MPI_ANY_SOURCE, "ANY_SOURCE");

    /* Cancel completed via Test loop instead of Wait. */
    {
        int buf = -1, flag = 0, cflag = 0;
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(&buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Cancel(&r));
        while (!flag)
            CHECK_MPI(MPI_Test(&r, &flag, &st));
        CHECK(r == MPI_REQUEST_NULL, "Test on cancelled request did not free it");
        CHECK_MPI(MPI_Test_cancelled(&st, &cflag));
        CHECK(cflag, "Test path: MPI_Test_cancelled false");
    }

    /* Persistent receive: cancel an active instance, the request stays
     * allocated (inactive) and can be started again for a real message. */
    {
        int buf = -1, cflag = 0;
        MPI_Request pr;
        MPI_Status st;
        CHECK_MPI(MPI_Recv_init(&buf, 1, MPI_INT, left, TAG_NEVER + 1, MPI_COMM_WORLD, &pr));
        CHECK_MPI(MPI_Start(&pr));
        CHECK_MPI(MPI_Cancel(&pr));
        CHECK_MPI(MPI_Wait(&pr, &st));
        CHECK(pr != MPI_REQUEST_NULL, "Wait freed a persistent request");
        CHECK_MPI(MPI_Test_cancelled(&st, &cflag));
        CHECK(cflag, "persistent: MPI_Test_cancelled false");

        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* all cancels done before any send */
        int v = 4000 + rank;
        CHECK_MPI(MPI_Start(&pr));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, right, TAG_NEVER + 1, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&pr, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &cflag));
        CHECK(!cflag, "persistent restart: Test_cancelled true for a delivered message");
        CHECK(buf == 4000 + left, "persistent restart: got %d, expected %d", buf, 4000 + left);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == TAG_NEVER + 1,
              "persistent restart: status src %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Request_free(&pr));
        CHECK(pr == MPI_REQUEST_NULL, "Request_free did not null the handle");
    }

    /* Now the tag that was cancelled is really sent: exactly one message each
     * must arrive, with the right payload (no stale cancelled receive eats it). */
    {
        int v[2] = {rank, 31337}, r[2] = {-1, -1}, cflag = 1, cnt = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Sendrecv(v, 2, MPI_INT, right, TAG_NEVER, r, 2, MPI_INT, left, TAG_NEVER,
                               MPI_COMM_WORLD, &st));
        CHECK(r[0] == left && r[1] == 31337, "after cancel: got {%d,%d}", r[0], r[1]);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == TAG_NEVER, "after cancel: status src %d tag %d",
              st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 2, "after cancel: count %d", cnt);
        CHECK_MPI(MPI_Test_cancelled(&st, &cflag));
        CHECK(!cflag, "Test_cancelled true for a normal receive");

        int flag = 1;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "an unexpected extra message is pending after the exchange");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
}

static void get_status(void)
{
    int buf = -1, flag = 1;
    MPI_Request r;
    MPI_Status st;

    /* MPI_REQUEST_NULL: flag true, empty status */
    flag = 0;
    CHECK_MPI(MPI_Request_get_status(MPI_REQUEST_NULL, &flag, &st));
    CHECK(flag, "Request_get_status(REQUEST_NULL) flag false");
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
          "Request_get_status(REQUEST_NULL) status src %d tag %d", st.MPI_SOURCE, st.MPI_TAG);

    CHECK_MPI(MPI_Irecv(&buf, 1, MPI_INT, left, 60, MPI_COMM_WORLD, &r));
    /* Nothing is sent before the barrier below, so this cannot be complete. */
    flag = 1;
    CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(!flag, "Request_get_status: active receive reported complete before any send");
    CHECK(r != MPI_REQUEST_NULL, "Request_get_status freed an active request");

    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    int v = 6000 + rank;
    CHECK_MPI(MPI_Send(&v, 1, MPI_INT, right, 60, MPI_COMM_WORLD));

    for (flag = 0; !flag;)
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(r != MPI_REQUEST_NULL, "Request_get_status freed a completed request");
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 60, "get_status: status src %d tag %d",
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK(buf == 6000 + left, "get_status: buffer %d", buf);

    /* Calling it again is allowed and still reports completion. */
    flag = 0;
    CHECK_MPI(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
    CHECK(flag, "second Request_get_status not complete");

    /* The request must still be waitable exactly once. */
    st.MPI_SOURCE = -999;
    CHECK_MPI(MPI_Wait(&r, &st));
    CHECK(r == MPI_REQUEST_NULL, "Wait did not free the request");
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 60, "Wait after get_status: src %d tag %d",
          st.MPI_SOURCE, st.MPI_TAG);
}

/* A receive whose message was already there, cancelled before it is
 * waited on: the cancel succeeds without effect, the data arrives, and the
 * status says not cancelled. (The shim's UCX lane finishes such a receive
 * inside its post; the cancel once reached the host with a word the host
 * never made: "Invalid MPI_Request" from MPICH, a segfault in Open MPI.) */
__attribute__((unused)) static void cancel_done_recv(void)
{
    int x = 7 + rank, y = -1, flag = 1;
    MPI_Request rq;
    MPI_Status st;
    CHECK_MPI(MPI_Isend(&x, 1, MPI_INT, 0, 40, MPI_COMM_SELF, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, 0, 40, MPI_COMM_SELF, &rq));
    CHECK_MPI(MPI_Cancel(&rq));
    CHECK_MPI(MPI_Wait(&rq, &st));
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag && y == x, "cancelled done receive: cancelled %d, received %d, expected %d", flag, y, x);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;

    cancels();
    get_status();
#if defined(OPEN_MPI) && OPEN_MPI
    cancel_done_recv(); /* MPICH 4.0.2 itself hangs in the Wait that follows such a cancel */
#endif

    test_finish("p2p_cancel");
    return 0;
}
