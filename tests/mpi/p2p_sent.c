/* Completed sends and their handles: every completion call on a send that
 * finished inside its post. On a lane such a send returns one handle shared
 * by all of them (as the hosts do for a send done at the call), which no
 * completion call may retire, free or cancel: a retired copy would make the
 * next send's handle stale (MPI_ERR_REQUEST) or hand its request to two
 * owners. On the host transport the same calls run on requests of their
 * own, and must give the same results.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out); even ranks send
 * short messages, odd ranks receive them in order and check every payload.
 *   1. Each completion call on a fresh small MPI_Isend, ROUNDS times:
 *      MPI_Request_get_status (the handle stays), MPI_Test, MPI_Wait,
 *      MPI_Cancel once complete, then MPI_Wait (not cancelled),
 *      MPI_Request_free, a Fortran handle round trip, MPI_Waitany,
 *      MPI_Testsome and MPI_Waitall over arrays of such handles (every entry
 *      completed once, set to MPI_REQUEST_NULL, indices distinct).
 *   2. NTHREADS threads at once do the same with MPI_Waitall and
 *      MPI_Testall, each on its own tag (the receivers check order per
 *      tag): the shared request is read by every thread at once. */
#include "testutil.h"

#include <pthread.h>

#define ROUNDS 50
#define NTHREADS 4
#define TMSG 200
#define BATCH 8

static int rank, size, peer, sender, active;
static int freed_vals[ROUNDS];

static int payload(int tag, int i) { return tag * 100003 + i; }

/* One small send of i on tag. */
static void isend(const int *slot, int tag, MPI_Request *r)
{
    CHECK_MPI(MPI_Isend(slot, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, r));
}

static void check_done(MPI_Request r, const char *what)
{
    CHECK(r == MPI_REQUEST_NULL, "%s: the handle is not MPI_REQUEST_NULL", what);
}

/* Step 1 on the sender: 14 messages a round on tag 0. */
static void send_calls(int round, int *vals)
{
    MPI_Request r, a[4];
    MPI_Status st, sts[4];
    int flag = 0, k = 0;
    for (int i = 0; i < 14; i++)
        vals[i] = payload(0, round * 14 + i);

    isend(&vals[k++], 0, &r);
    while (!flag)
        CHECK_MPI(MPI_Request_get_status(r, &flag, &st));
    CHECK(r != MPI_REQUEST_NULL, "MPI_Request_get_status freed the request");
    CHECK_MPI(MPI_Wait(&r, &st));
    check_done(r, "MPI_Wait after MPI_Request_get_status");

    isend(&vals[k++], 0, &r);
    for (flag = 0; !flag;)
        CHECK_MPI(MPI_Test(&r, &flag, &st));
    check_done(r, "MPI_Test");

    isend(&vals[k++], 0, &r);
    for (flag = 0; !flag;) /* complete: the cancel must find it so */
        CHECK_MPI(MPI_Request_get_status(r, &flag, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Cancel(&r));
    CHECK_MPI(MPI_Wait(&r, &st));
    check_done(r, "MPI_Wait after MPI_Cancel");
    CHECK_MPI(MPI_Test_cancelled(&st, &flag));
    CHECK(!flag, "a completed send reads as cancelled");

    /* Its buffer is not written again: nothing says when a freed send is
     * done (the receiver's barrier below). */
    freed_vals[round] = vals[k++];
    isend(&freed_vals[round], 0, &r);
    CHECK_MPI(MPI_Request_free(&r));
    check_done(r, "MPI_Request_free");

    isend(&vals[k++], 0, &r);
    MPI_Fint f = MPI_Request_c2f(r);
    MPI_Request back = MPI_Request_f2c(f);
    CHECK(back == r, "a Fortran handle does not convert back to its request");
    CHECK_MPI(MPI_Wait(&back, MPI_STATUS_IGNORE));
    check_done(back, "MPI_Wait on a converted handle");

    for (int i = 0; i < 2; i++)
        isend(&vals[k++], 0, &a[i]);
    int idx = -1;
    CHECK_MPI(MPI_Waitany(2, a, &idx, &st));
    CHECK(idx == 0 || idx == 1, "MPI_Waitany index %d", idx);
    check_done(a[idx], "MPI_Waitany");
    CHECK(a[1 - idx] != MPI_REQUEST_NULL, "MPI_Waitany completed two requests");
    CHECK_MPI(MPI_Wait(&a[1 - idx], MPI_STATUS_IGNORE));

    for (int i = 0; i < 4; i++)
        isend(&vals[k++], 0, &a[i]);
    int left = 4, seen[4] = { 0 };
    while (left > 0) {
        int out = 0, ind[4];
        CHECK_MPI(MPI_Testsome(4, a, &out, ind, sts));
        CHECK(out != MPI_UNDEFINED && out >= 0 && out <= left, "MPI_Testsome outcount %d with %d left", out, left);
        for (int j = 0; j < out; j++) {
            CHECK(ind[j] >= 0 && ind[j] < 4 && !seen[ind[j]], "MPI_Testsome index %d twice or out of range", ind[j]);
            seen[ind[j]] = 1;
            check_done(a[ind[j]], "MPI_Testsome");
        }
        left -= out;
    }
    int none = 0, ind[4];
    CHECK_MPI(MPI_Testsome(4, a, &none, ind, sts));
    CHECK(none == MPI_UNDEFINED, "MPI_Testsome on spent handles gave outcount %d", none);

    for (int i = 0; i < 3; i++)
        isend(&vals[k++], 0, &a[i]);
    a[3] = MPI_REQUEST_NULL;
    CHECK_MPI(MPI_Waitall(4, a, sts));
    for (int i = 0; i < 4; i++)
        check_done(a[i], "MPI_Waitall");
}

static void recv_round(int round)
{
    for (int i = 0; i < 14; i++) {
        int v = -1;
        MPI_Status st;
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, peer, 0, MPI_COMM_WORLD, &st));
        CHECK(v == payload(0, round * 14 + i), "round %d message %d: got %d", round, i, v);
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 0, "round %d: status source %d tag %d", round,
              st.MPI_SOURCE, st.MPI_TAG);
    }
}

static void *thread_main(void *arg)
{
    int t = (int)(intptr_t)arg, tag = 1 + t;
    int vals[BATCH];
    for (int b = 0; b < TMSG / BATCH; b++) {
        if (sender) {
            MPI_Request a[BATCH];
            for (int i = 0; i < BATCH; i++) {
                vals[i] = payload(tag, b * BATCH + i);
                isend(&vals[i], tag, &a[i]);
            }
            if (b % 2) {
                CHECK_MPI(MPI_Waitall(BATCH, a, MPI_STATUSES_IGNORE));
            } else {
                for (int flag = 0; !flag;)
                    CHECK_MPI(MPI_Testall(BATCH, a, &flag, MPI_STATUSES_IGNORE));
            }
            for (int i = 0; i < BATCH; i++)
                check_done(a[i], "a thread's MPI_Waitall or MPI_Testall");
        } else {
            for (int i = 0; i < BATCH; i++) {
                int v = -1;
                CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(v == payload(tag, b * BATCH + i), "thread %d: message %d: got %d", t, b * BATCH + i, v);
            }
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    test_watchdog("p2p_sent", 60);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    sender = rank % 2 == 0;
    peer = sender ? rank + 1 : rank - 1;
    active = peer < size;

    test_step = "one thread, each completion call";
    int vals[14];
    for (int round = 0; active && round < ROUNDS; round++) {
        if (sender)
            send_calls(round, vals);
        else
            recv_round(round);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* every message of step 1 arrived */

    test_step = "threads at once";
    if (active)
        test_run_threads(NTHREADS, thread_main);
    test_finish("p2p_sent");
    return 0;
}
