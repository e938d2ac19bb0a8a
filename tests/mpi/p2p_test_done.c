/* A test of a request whose operation is complete returns true at once.
 * MPI_Test, MPI_Testall/any/some and MPI_Request_get_status report a
 * request complete when its operation is; the hosts do so for a send to
 * the process itself once the matching receive has returned, and programs
 * rely on it (a single test after the receive, not a loop). A shim that
 * leaves the discovery to another thread (a progress thread, a waiter that
 * owns progress), or that polls only the oldest of many pending requests,
 * must still answer that test from the host's state.
 *
 * Every rank on its own, to itself (nothing depends on another process's
 * timing), ROUNDS times for each size (8 B eager; 1 MiB, which the hosts
 * send by rendezvous) and each send mode (MPI_Isend, MPI_Ibsend,
 * MPI_Issend):
 *   1. post the send, receive it with a blocking MPI_Recv, check the data,
 *      then make one call of each completion kind on it (MPI_Test, MPI_Testall,
 *      MPI_Testany, MPI_Testsome, MPI_Request_get_status; a new send each)
 *      and require flag true (or the index, or one done);
 *   2. MPI_Waitsome and MPI_Testsome return every request that is
 *      complete, not only the first found: NRECV receives from itself on
 *      tags 0..NRECV-1, then synchronous sends (each returns once its
 *      receive has matched) to a set of them, a millisecond apart, then one
 *      call must return exactly that set, with the data and each status's
 *      tag, set after set on the same array (the tests of one array in a
 *      row, with sends between, are not a polling loop); on MPI_COMM_WORLD
 *      and on a duplicate of MPI_COMM_SELF;
 *   3. NSHORT short sends to itself at once, then MPI_Testall: the hosts
 *      finish such a send inside its post, so either Testall finds them
 *      all complete, or none is: MPI_Testany and MPI_Testsome right after
 *      it must not find any (a request whose completion another thread's
 *      poll was publishing at that moment was missed by Testall, then
 *      found), SHORT_ROUNDS times;
 *   4. all three again with BACKLOG receives pending on MPI_COMM_WORLD on a tag
 *      nobody sends (older than the rest: the oldest request never
 *      completes), cancelled at the end (each must report cancelled). */
#include "testutil.h"

#include <stdlib.h>

#define ROUNDS 20
#define BACKLOG 16
#define BIG (1 << 20)
#define TAG 7
#define NEVER_TAG 99
#define NRECV 6
#define NSHORT 6
#define SHORT_ROUNDS 2000

enum { SEND, BSEND, SSEND, NMODES };
static const char *mode_name[NMODES] = { "MPI_Isend", "MPI_Ibsend", "MPI_Issend" };

static int rank;
static char *sbuf, *rbuf;

static void post(int mode, int n, MPI_Request *r)
{
    switch (mode) {
    case SEND:  CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, r)); break;
    case BSEND: CHECK_MPI(MPI_Ibsend(sbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, r)); break;
    default:    CHECK_MPI(MPI_Issend(sbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, r)); break;
    }
}

static void round_trip(int mode, int n, int kind, int round, int backlog)
{
    MPI_Request s;
    for (int i = 0; i < n; i++)
        sbuf[i] = (char)(round * 31 + i + mode);
    memset(rbuf, 0, (size_t)n);
    post(mode, n, &s);
    MPI_Status st;
    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == TAG, "%s: status source %d tag %d", mode_name[mode],
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK(memcmp(sbuf, rbuf, (size_t)n) == 0, "%s of %d bytes: wrong data", mode_name[mode], n);
    int flag = test_one_completion(kind, &s);
    CHECK(flag, "%s of %d bytes to self, after its MPI_Recv returned%s (round %d): %s says not complete",
          mode_name[mode], n, backlog ? " with older receives pending" : "", round, test_kind_name(kind));
}

static void some(int wait, MPI_Request *r, int *outcount, int *idx, MPI_Status *st)
{
    if (wait)
        CHECK_MPI(MPI_Waitsome(NRECV, r, outcount, idx, st));
    else
        CHECK_MPI(MPI_Testsome(NRECV, r, outcount, idx, st));
}

static void some_sets(MPI_Comm comm, int wait)
{
    const char *call = wait ? "MPI_Waitsome" : "MPI_Testsome";
    int me;
    CHECK_MPI(MPI_Comm_rank(comm, &me));
    static const int sets[][NRECV + 1] = { { 5, -1 }, { 3, 1, 2, -1 }, { 0, 4, -1 } };
    int in[NRECV], out = 7;
    MPI_Request r[NRECV];
    for (int i = 0; i < NRECV; i++)
        CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, me, i, comm, &r[i]));
    for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        int want = 0;
        for (int k = 0; sets[s][k] >= 0; k++, want++) {
            if (k > 0)
                test_sleep_ms(1); /* time for a progress thread to report the previous ones */
            CHECK_MPI(MPI_Ssend(&out, 1, MPI_INT, me, sets[s][k], comm));
        }
        int outcount = 0, idx[NRECV];
        MPI_Status st[NRECV];
        some(wait, r, &outcount, idx, st);
        CHECK(outcount == want, "%s after %d synchronous sends to self returned %d requests", call, want,
              outcount);
        for (int k = 0; k < outcount; k++) {
            int member = 0;
            for (int j = 0; sets[s][j] >= 0; j++)
                member |= sets[s][j] == idx[k];
            CHECK(member, "%s returned request %d, not one sent to", call, idx[k]);
            CHECK(st[k].MPI_TAG == idx[k] && in[idx[k]] == out, "%s: request %d has tag %d, data %d", call, idx[k],
                  st[k].MPI_TAG, in[idx[k]]);
            CHECK(r[idx[k]] == MPI_REQUEST_NULL, "%s left request %d active", call, idx[k]);
        }
    }
    int outcount = 0, idx[NRECV];
    some(wait, r, &outcount, idx, MPI_STATUSES_IGNORE);
    CHECK(outcount == MPI_UNDEFINED, "%s over finished requests returned %d, not MPI_UNDEFINED", call, outcount);
}

static void short_sends(int round)
{
    MPI_Request q[NSHORT];
    int in = 0;
    for (int k = 0; k < NSHORT; k++)
        CHECK_MPI(MPI_Isend(sbuf, 8, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &q[k]));
    int flag = 0, idx = MPI_UNDEFINED, outcount = 0, ind[NSHORT];
    CHECK_MPI(MPI_Testall(NSHORT, q, &flag, MPI_STATUSES_IGNORE));
    if (!flag) {
        CHECK_MPI(MPI_Testany(NSHORT, q, &idx, &flag, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Testsome(NSHORT, q, &outcount, ind, MPI_STATUSES_IGNORE));
        CHECK(!flag && (outcount == 0 || outcount == MPI_UNDEFINED),
              "round %d: MPI_Testall said %d short sends to self were not all complete, then MPI_Testany found "
              "request %d complete and MPI_Testsome %d more",
              round, NSHORT, flag ? idx : -1, outcount);
    }
    for (int k = 0; k < NSHORT; k++) {
        CHECK_MPI(MPI_Recv(rbuf, 8, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        in += memcmp(rbuf, sbuf, 8) == 0;
    }
    CHECK(in == NSHORT, "round %d: %d of %d short messages to self arrived intact", round, in, NSHORT);
    CHECK_MPI(MPI_Waitall(NSHORT, q, MPI_STATUSES_IGNORE));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("p2p_test_done", 120);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    sbuf = malloc(BIG);
    rbuf = malloc(BIG);
    int bsize = BIG + MPI_BSEND_OVERHEAD;
    char *bbuf = malloc((size_t)bsize);
    CHECK(sbuf && rbuf && bbuf, "out of memory");
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));

    MPI_Comm self;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_SELF, &self));
    int never[BACKLOG];
    MPI_Request pending[BACKLOG];
    for (int backlog = 0; backlog <= 1; backlog++) {
        test_step = backlog ? "with a backlog" : "alone";
        if (backlog)
            for (int i = 0; i < BACKLOG; i++)
                CHECK_MPI(MPI_Irecv(&never[i], 1, MPI_INT, rank, NEVER_TAG, MPI_COMM_WORLD, &pending[i]));
        for (int mode = 0; mode < NMODES; mode++)
            for (int big = 0; big <= 1; big++)
                for (int kind = 0; kind < TEST_NKINDS; kind++)
                    for (int round = 0; round < ROUNDS; round++)
                        round_trip(mode, big ? BIG : 8, kind, round, backlog);
        for (int round = 0; round < ROUNDS; round++) {
            for (int wait = 0; wait <= 1; wait++) {
                some_sets(MPI_COMM_WORLD, wait);
                some_sets(self, wait);
            }
        }
        for (int round = 0; round < SHORT_ROUNDS; round++)
            short_sends(round);
        if (backlog)
            test_cancel_all(BACKLOG, pending);
    }

    CHECK_MPI(MPI_Comm_free(&self));

    void *b;
    int bs;
    CHECK_MPI(MPI_Buffer_detach(&b, &bs));
    free(bbuf);
    free(sbuf);
    free(rbuf);
    test_finish("p2p_test_done");
    return 0;
}
