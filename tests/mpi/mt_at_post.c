/* Blocking calls finished at the post, and MPI_Waitall's path for arrays of
 * shim requests: the shim's runtime tests a blocking call's host
 * request as soon as it is posted and returns from there when the host has
 * already completed it (an eager send; a receive whose message has already
 * arrived), and MPI_Waitall of shim requests and null handles takes a path
 * of its own. Both must give what the host gives.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out); even ranks
 * send, odd ranks receive, NTHREADS threads each, thread t on tag t.
 *   1. The senders' threads send NMSG small messages each with MPI_Send;
 *      after a barrier (so the messages are there) the receivers' threads
 *      take them with MPI_Recv: data, order per tag, source, tag, count, and
 *      the status's MPI_ERROR left alone (MPI 4.0 section 3.2.5).
 *   2. A message longer than the receive buffer, already there: MPI_Recv
 *      returns an error of class MPI_ERR_TRUNCATE (MPI_ERRORS_RETURN),
 *      still with source, tag and MPI_ERROR untouched.
 *   3. MPI_Waitall of { Irecv, NULL, Irecv, NULL }: the null entries get
 *      the empty status (MPI_ANY_SOURCE, MPI_ANY_TAG, count 0).
 * (MPI_Waitall with a truncated receive is p2p_waitall_error's: Open MPI
 * 4.1's own Waitall hangs when the receive was truncated before the call,
 * which here happened now and then on the solo path.)
 * Under MPISHIM_STATS=1 the runner also checks that calls did finish at the
 * post (the "at_post" column), so the first path is really exercised. */
#include "testutil.h"

#include <pthread.h>

#define NTHREADS 4
#define NMSG 40
#define LEN 4
#define SENTINEL 0x5e17e1


static int rank, size, peer, sender;

static int val(int t, int i, int j) { return (t * NMSG + i) * 10 + j; }

static void *phase1(void *p)
{
    struct test_targ *a = p;
    int t = a->t, buf[LEN];
    for (int i = 0; i < NMSG; i++) {
        if (sender) {
            for (int j = 0; j < LEN; j++)
                buf[j] = val(t, i, j);
            TCHECK(MPI_Send(buf, LEN, MPI_INT, peer, t, MPI_COMM_WORLD) == MPI_SUCCESS, "thread %d: Send %d", t, i);
        }
    }
out:
    return NULL;
}

static void *phase1_recv(void *p)
{
    struct test_targ *a = p;
    int t = a->t, buf[LEN + 2];
    for (int i = 0; i < NMSG; i++) {
        MPI_Status st;
        st.MPI_ERROR = SENTINEL;
        st.MPI_SOURCE = st.MPI_TAG = -7;
        TCHECK(MPI_Recv(buf, LEN + 2, MPI_INT, peer, t, MPI_COMM_WORLD, &st) == MPI_SUCCESS, "thread %d: Recv %d",
               t, i);
        int cnt = -1;
        MPI_Get_count(&st, MPI_INT, &cnt);
        TCHECK(st.MPI_SOURCE == peer && st.MPI_TAG == t && cnt == LEN,
               "thread %d msg %d: status source %d tag %d count %d, expected %d %d %d", t, i, st.MPI_SOURCE,
               st.MPI_TAG, cnt, peer, t, LEN);
        TCHECK(st.MPI_ERROR == SENTINEL, "thread %d msg %d: MPI_Recv wrote MPI_ERROR = %d", t, i, st.MPI_ERROR);
        for (int j = 0; j < LEN; j++)
            TCHECK(buf[j] == val(t, i, j), "thread %d msg %d: word %d is %d, expected %d (order or data)", t, i,
                   j, buf[j], val(t, i, j));
    }
out:
    return NULL;
}

static int error_class(int rc)
{
    int c = -1;
    MPI_Error_class(rc, &c);
    return c;
}

static void check_empty(const MPI_Status *st, const char *what)
{
    int cnt = -1;
    MPI_Get_count(st, MPI_INT, &cnt);
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG && cnt == 0,
          "%s: status source %d tag %d count %d, expected the empty status", what, st->MPI_SOURCE, st->MPI_TAG, cnt);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("mt_at_post", 60);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    int active = !(size % 2 && rank == size - 1);
    peer = rank % 2 ? rank - 1 : rank + 1;
    sender = rank % 2 == 0;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    /* 1. */
    test_step = "1: blocking sends and receives";
    if (active && sender)
        test_run_checked_threads(NTHREADS, phase1);
    MPI_Barrier(MPI_COMM_WORLD);
    if (active && !sender)
        test_run_checked_threads(NTHREADS, phase1_recv);
    MPI_Barrier(MPI_COMM_WORLD);

    /* 2. */
    test_step = "2: truncated receive";
    int big[2 * LEN] = { 1, 2, 3, 4, 5, 6, 7, 8 }, small[LEN];
    if (active && sender)
        CHECK_MPI(MPI_Send(big, 2 * LEN, MPI_INT, peer, 100, MPI_COMM_WORLD));
    MPI_Barrier(MPI_COMM_WORLD);
    if (active && !sender) {
        MPI_Status st;
        st.MPI_ERROR = SENTINEL;
        int rc = MPI_Recv(small, LEN, MPI_INT, peer, 100, MPI_COMM_WORLD, &st);
        CHECK(error_class(rc) == MPI_ERR_TRUNCATE, "truncated MPI_Recv returned %d (class %d), expected class %d",
              rc, error_class(rc), MPI_ERR_TRUNCATE);
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 100, "truncated MPI_Recv: status source %d tag %d",
              st.MPI_SOURCE, st.MPI_TAG);
        CHECK(st.MPI_ERROR == SENTINEL, "truncated MPI_Recv wrote MPI_ERROR = %d", st.MPI_ERROR);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    /* 3. */
    test_step = "3: Waitall with null handles";
    if (active && sender) {
        int x = 11, y = 22;
        CHECK_MPI(MPI_Send(&x, 1, MPI_INT, peer, 200, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(&y, 1, MPI_INT, peer, 201, MPI_COMM_WORLD));
    } else if (active) {
        int x = 0, y = 0;
        MPI_Request rq[4] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL };
        MPI_Status st[4];
        CHECK_MPI(MPI_Irecv(&x, 1, MPI_INT, peer, 200, MPI_COMM_WORLD, &rq[0]));
        CHECK_MPI(MPI_Irecv(&y, 1, MPI_INT, peer, 201, MPI_COMM_WORLD, &rq[2]));
        CHECK_MPI(MPI_Waitall(4, rq, st));
        CHECK(x == 11 && y == 22, "Waitall with null handles: received %d %d, expected 11 22", x, y);
        CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == 200 && st[2].MPI_SOURCE == peer && st[2].MPI_TAG == 201,
              "Waitall with null handles: statuses %d/%d and %d/%d", st[0].MPI_SOURCE, st[0].MPI_TAG,
              st[2].MPI_SOURCE, st[2].MPI_TAG);
        check_empty(&st[1], "Waitall, null entry 1");
        check_empty(&st[3], "Waitall, null entry 3");
        for (int i = 0; i < 4; i++)
            CHECK(rq[i] == MPI_REQUEST_NULL, "Waitall left request %d set", i);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    test_finish("mt_at_post");
    return 0;
}
