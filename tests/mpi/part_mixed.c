/* MPI-4 partitioned requests mixed with every other kind of request in the
 * multiple-completion calls.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out).  Every round
 * each rank builds one array of N = 10 handles:
 *   0 MPI_REQUEST_NULL          5 MPI_Irecv from the peer
 *   1 partitioned send          6 persistent MPI_Send_init
 *   2 MPI_Isend to the peer     7 MPI_REQUEST_NULL
 *   3 partitioned receive       8 persistent MPI_Recv_init
 *   4 a second partitioned send, never started in this round (inactive)
 *   9 a second partitioned receive, never started in this round (inactive)
 * The partitioned and persistent ones (1, 3, 6, 8) are started together
 * with one MPI_Startall (round 0 and 1; later rounds MPI_Start each), and
 * completed with, per round: MPI_Waitall, MPI_Testall (loop), MPI_Waitany
 * (loop), MPI_Waitsome (loop), MPI_Testany and MPI_Testsome (loops).  The
 * ready calls for the partitioned send come between start and completion
 * (or, for the Test* loops, only after the first test, which therefore
 * cannot complete the send: its partitions are not ready).
 *
 * Checked: every receive's data, source, tag and count; null and inactive
 * entries give the empty status (source MPI_ANY_SOURCE, tag MPI_ANY_TAG,
 * count 0) where the call reports them; MPI_Waitany/Testany/Waitsome/
 * Testsome report each active request exactly once and then MPI_UNDEFINED;
 * nonblocking handles become MPI_REQUEST_NULL, persistent and partitioned
 * ones stay valid; inactive partitioned requests are skipped.
 *
 * Then MPI_Request_get_status on partitioned requests: on a started send
 * with no partition ready it must say "not complete" (MPI_Test too); on a
 * started receive it is polled until complete without freeing or
 * deactivating the request (the later MPI_Wait still returns the status);
 * on an inactive partitioned request it says complete with the empty
 * status.  At the end MPI_Request_free on the inactive partitioned
 * requests.
 */
#include "testutil.h"
#include "mpishim.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#define N 10
#define PN 1500 /* ints in a partitioned message (6000 bytes) */
#define ON 40   /* ints in an ordinary message */
#define NROUND 6
#define SENTINEL ((int)0xDEADBEEF)
enum { TAG_PART = 1, TAG_ISEND = 2, TAG_PERS = 3, TAG_PART2 = 4 };

static int rank, size, peer;

static int word(int src, int tag, int round, int i)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(tag + 9) * 0x85EBCA77u ^
                 (uint32_t)(round + 2) * 0xC2B2AE3Du ^ (uint32_t)i * 2654435761u;
    return (int)(x ^ (x >> 12));
}

static int ps_buf[PN], pr_buf[PN], ps2_buf[PN], pr2_buf[PN];
static int is_buf[ON], ir_buf[ON], qs_buf[ON], qr_buf[ON];
static MPI_Request ps, pr, ps2, pr2, qs, qr; /* partitioned, persistent */

static int is_active(int i) { return i != 0 && i != 7 && i != 4 && i != 9; }
static int is_recv(int i) { return i == 3 || i == 5 || i == 8; }

static void check_empty(const MPI_Status *st, const char *what, int i)
{
    int n = -1;
    /* MPICH 4.0.2 leaves the request's own status: zeros for a send, the
     * matched sender's source and tag for a receive */
    if (test_part_native_mpich40() && ((i == 4 && st->MPI_SOURCE == 0 && st->MPI_TAG == 0) ||
                          (i == 9 && st->MPI_SOURCE == peer && st->MPI_TAG == TAG_PART2))) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: inactive partitioned %s (entry %d) gave status source %d tag %d, "
                                  "not the empty status", what, i == 4 ? "send" : "receive", i, st->MPI_SOURCE,
                 st->MPI_TAG);
        if (test_known_deviation(msg, "MPICH 4.0.2 partitioned communication"))
            return;
    }
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE && st->MPI_TAG == MPI_ANY_TAG,
          "%s: entry %d (null or inactive): status source %d tag %d, expected the empty status", what, i,
          st->MPI_SOURCE, st->MPI_TAG);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK(n == 0, "%s: entry %d (null or inactive): count %d, expected 0", what, i, n);
}

/* The empty status after MPI_Request_get_status / MPI_Test on an inactive
 * partitioned request; MPICH 4.0.2 leaves the status untouched there. */
static void check_empty_inactive(const MPI_Status *st, const char *what, int i)
{
    if (test_part_native_mpich40() && st->MPI_SOURCE == 0x5a5a5a5a && st->MPI_TAG == 0x5a5a5a5a) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s: status left untouched, not set empty", what);
        if (test_known_deviation(msg, "MPICH 4.0.2 partitioned communication"))
            return;
    }
    check_empty(st, what, i);
}

/* Entry i completed with status st: check what arrived. */
static void check_entry(int i, const MPI_Status *st, int round, const char *what)
{
    if (!is_recv(i))
        return;
    int tag = i == 3 ? TAG_PART : i == 5 ? TAG_ISEND : TAG_PERS, len = i == 3 ? PN : ON, n = -1;
    const int *b = i == 3 ? pr_buf : i == 5 ? ir_buf : qr_buf;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "%s round %d: entry %d status source %d tag %d, expected %d/%d", what, round, i, st->MPI_SOURCE,
          st->MPI_TAG, peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK(n == len, "%s round %d: entry %d count %d, expected %d", what, round, i, n, len);
    for (int k = 0; k < len; k++)
        CHECK(b[k] == word(peer, tag, round, k), "%s round %d: entry %d int %d is %d, expected %d", what, round, i, k,
              b[k], word(peer, tag, round, k));
}

/* After completion: nonblocking handles freed, the others kept. */
static void check_handles(const MPI_Request *r, const char *what, int round)
{
    const MPI_Request keep[N] = {MPI_REQUEST_NULL, ps, MPI_REQUEST_NULL, pr, ps2,
                                 MPI_REQUEST_NULL, qs, MPI_REQUEST_NULL, qr, pr2};
    for (int i = 0; i < N; i++)
        CHECK(r[i] == keep[i], "%s round %d: entry %d is %s after completion", what, round, i,
              keep[i] == MPI_REQUEST_NULL ? "not MPI_REQUEST_NULL" : "no longer the persistent/partitioned handle");
}

static void ready(void)
{
    /* 3 partitions of 500 ints */
    CHECK_MPI(MPI_Pready(2, ps));
    int l[2] = {0, 1};
    CHECK_MPI(MPI_Pready_list(2, l, ps));
}

static void start_round(MPI_Request *r, int round)
{
    for (int k = 0; k < PN; k++) {
        ps_buf[k] = word(rank, TAG_PART, round, k);
        pr_buf[k] = SENTINEL;
    }
    for (int k = 0; k < ON; k++) {
        is_buf[k] = word(rank, TAG_ISEND, round, k);
        qs_buf[k] = word(rank, TAG_PERS, round, k);
        ir_buf[k] = qr_buf[k] = SENTINEL;
    }
    r[0] = r[7] = MPI_REQUEST_NULL;
    r[1] = ps;
    r[3] = pr;
    r[4] = ps2;
    r[9] = pr2;
    r[6] = qs;
    r[8] = qr;
    if (round < 2) {
        MPI_Request st4[4] = {pr, qr, ps, qs};
        CHECK_MPI(MPI_Startall(4, st4));
        CHECK(st4[0] == pr && st4[1] == qr && st4[2] == ps && st4[3] == qs, "MPI_Startall changed a handle");
    } else {
        CHECK_MPI(MPI_Start(&r[3]));
        CHECK_MPI(MPI_Start(&r[8]));
        CHECK_MPI(MPI_Start(&r[1]));
        CHECK_MPI(MPI_Start(&r[6]));
    }
    CHECK_MPI(MPI_Irecv(ir_buf, ON, MPI_INT, peer, TAG_ISEND, MPI_COMM_WORLD, &r[5]));
    CHECK_MPI(MPI_Isend(is_buf, ON, MPI_INT, peer, TAG_ISEND, MPI_COMM_WORLD, &r[2]));
}

static void round_waitall(MPI_Request *r, int round)
{
    MPI_Status st[N];
    test_step = "MPI_Waitall";
    ready();
    memset(st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Waitall(N, r, st));
    for (int i = 0; i < N; i++) {
        if (is_active(i))
            check_entry(i, &st[i], round, "MPI_Waitall");
        else
            check_empty(&st[i], "MPI_Waitall", i);
    }
}

static void round_testall(MPI_Request *r, int round)
{
    MPI_Status st[N];
    int flag = 1;
    test_step = "MPI_Testall";
    /* the partitioned send cannot be complete: nothing is ready */
    CHECK_MPI(MPI_Testall(N, r, &flag, st));
    CHECK(!flag, "MPI_Testall round %d: complete before any partition was ready", round);
    CHECK(r[1] == ps && r[3] == pr, "MPI_Testall with flag = false changed a partitioned handle");
    ready();
    flag = 0;
    while (!flag) {
        memset(st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Testall(N, r, &flag, st));
    }
    for (int i = 0; i < N; i++) {
        if (is_active(i))
            check_entry(i, &st[i], round, "MPI_Testall");
        else
            check_empty(&st[i], "MPI_Testall", i);
    }
}

/* Waitany (any = 1) or Testany (any = 0) until MPI_UNDEFINED. */
static void round_any(MPI_Request *r, int round, int wait)
{
    const char *what = wait ? "MPI_Waitany" : "MPI_Testany";
    int seen[N] = {0}, got = 0, idx, flag;
    MPI_Status st;
    test_step = what;
    if (!wait) {
        /* before any partition is ready, entry 1 cannot complete */
        idx = -2;
        flag = 0;
        CHECK_MPI(MPI_Testany(N, r, &idx, &flag, &st));
        CHECK(!flag || idx != 1, "MPI_Testany round %d: the partitioned send completed before MPI_Pready", round);
        CHECK(!flag || idx != MPI_UNDEFINED, "MPI_Testany round %d: MPI_UNDEFINED with 6 requests active", round);
        if (flag && idx != MPI_UNDEFINED) {
            CHECK(idx >= 0 && idx < N && is_active(idx) && !seen[idx], "MPI_Testany round %d: index %d", round, idx);
            check_entry(idx, &st, round, what);
            seen[idx] = 1;
            got++;
        }
    }
    ready();
    while (got < 6) {
        idx = -2;
        flag = 0;
        memset(&st, 0x5a, sizeof st);
        if (wait) {
            CHECK_MPI(MPI_Waitany(N, r, &idx, &st));
            flag = 1;
        } else {
            CHECK_MPI(MPI_Testany(N, r, &idx, &flag, &st));
        }
        if (!flag)
            continue;
        CHECK(idx != MPI_UNDEFINED, "%s round %d: MPI_UNDEFINED with %d requests still active", what, round, 6 - got);
        CHECK(idx >= 0 && idx < N, "%s round %d: index %d out of range", what, round, idx);
        CHECK(is_active(idx), "%s round %d: reported the null or inactive entry %d", what, round, idx);
        CHECK(!seen[idx], "%s round %d: entry %d reported twice", what, round, idx);
        seen[idx] = 1;
        got++;
        check_entry(idx, &st, round, what);
    }
    idx = -2;
    flag = 0;
    memset(&st, 0x5a, sizeof st);
    if (wait) {
        CHECK_MPI(MPI_Waitany(N, r, &idx, &st));
        flag = 1;
    } else {
        CHECK_MPI(MPI_Testany(N, r, &idx, &flag, &st));
    }
    CHECK(flag && idx == MPI_UNDEFINED, "%s round %d: with nothing active: flag %d index %d, expected MPI_UNDEFINED",
          what, round, flag, idx);
    /* MPICH < 4.1 MPI_Testany with only null and inactive handles leaves
     * the status untouched (also seen with persistent requests, mt_mixed) */
    if (!wait && test_part_native_mpich40() && st.MPI_SOURCE == 0x5a5a5a5a && st.MPI_TAG == 0x5a5a5a5a &&
        test_known_deviation("MPI_Testany on null + inactive handles left the status unset instead of empty",
                             "MPICH < 4.1 MPIR_Testany does not treat inactive handles as null"))
        return;
    check_empty(&st, what, -1);
}

/* Waitsome (wait = 1) or Testsome until MPI_UNDEFINED. */
static void round_some(MPI_Request *r, int round, int wait)
{
    const char *what = wait ? "MPI_Waitsome" : "MPI_Testsome";
    int seen[N] = {0}, got = 0, out, idx[N];
    MPI_Status st[N];
    test_step = what;
    ready();
    while (got < 6) {
        out = -2;
        memset(st, 0x5a, sizeof st);
        if (wait)
            CHECK_MPI(MPI_Waitsome(N, r, &out, idx, st));
        else
            CHECK_MPI(MPI_Testsome(N, r, &out, idx, st));
        CHECK(out != MPI_UNDEFINED, "%s round %d: MPI_UNDEFINED with %d requests active", what, round, 6 - got);
        CHECK(out >= (wait ? 1 : 0) && out <= 6 - got, "%s round %d: outcount %d with %d active", what, round, out,
              6 - got);
        for (int k = 0; k < out; k++) {
            int i = idx[k];
            CHECK(i >= 0 && i < N && is_active(i) && !seen[i], "%s round %d: index %d (null, inactive, or twice)",
                  what, round, i);
            seen[i] = 1;
            check_entry(i, &st[k], round, what);
        }
        got += out;
    }
    out = -2;
    if (wait)
        CHECK_MPI(MPI_Waitsome(N, r, &out, idx, st));
    else
        CHECK_MPI(MPI_Testsome(N, r, &out, idx, st));
    CHECK(out == MPI_UNDEFINED, "%s round %d: outcount %d with nothing active, expected MPI_UNDEFINED", what, round,
          out);
}

/* MPI_Request_get_status and MPI_Test on partitioned requests. */
static void get_status(void)
{
    MPI_Status st;
    int flag, round = NROUND;
    MPI_Request ps_keep = ps, pr_keep = pr;

    test_step = "MPI_Request_get_status on inactive partitioned requests";
    flag = 0;
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Request_get_status(pr2, &flag, &st));
    CHECK(flag, "MPI_Request_get_status on an inactive partitioned receive: flag false");
    check_empty_inactive(&st, "MPI_Request_get_status, inactive receive", 9);
    flag = 0;
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Test(&ps2, &flag, &st));
    CHECK(flag && ps2 != MPI_REQUEST_NULL, "MPI_Test on an inactive partitioned send: flag %d, handle %s", flag,
          ps2 == MPI_REQUEST_NULL ? "freed" : "kept");
    check_empty_inactive(&st, "MPI_Test, inactive send", 4);

    for (int k = 0; k < PN; k++) {
        ps_buf[k] = word(rank, TAG_PART, round, k);
        pr_buf[k] = SENTINEL;
    }
    test_step = "MPI_Request_get_status on started partitioned requests";
    CHECK_MPI(MPI_Start(&pr));
    CHECK_MPI(MPI_Start(&ps));
    /* nothing is ready anywhere before the barrier: neither can be complete */
    flag = 1;
    CHECK_MPI(MPI_Request_get_status(ps, &flag, &st));
    CHECK(!flag, "MPI_Request_get_status: partitioned send complete with no partition ready");
    flag = 1;
    CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    CHECK(!flag, "MPI_Request_get_status: partitioned receive complete before the sender readied anything");
    flag = 1;
    CHECK_MPI(MPI_Test(&ps, &flag, &st));
    CHECK(!flag && ps == ps_keep, "MPI_Test: partitioned send complete with no partition ready");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    ready();
    flag = 0;
    while (!flag) {
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    }
    CHECK(pr == pr_keep, "MPI_Request_get_status changed the handle");
    if (test_part_native_mpich40() && st.MPI_SOURCE == 0x5a5a5a5a && st.MPI_TAG == 0x5a5a5a5a &&
        test_known_deviation("MPI_Request_get_status on a complete active partitioned receive: flag true but "
                             "the status left untouched",
                             "MPICH 4.0.2 partitioned communication")) {
        st.MPI_SOURCE = peer; /* data still checked below */
        st.MPI_TAG = TAG_PART;
        CHECK_MPI(MPI_Status_set_elements(&st, MPI_INT, PN));
    }
    check_entry(3, &st, round, "MPI_Request_get_status");
    /* still active: the completion call must still be made, and reports the same */
    flag = 0;
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    CHECK(flag, "MPI_Request_get_status: complete, then no longer");
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Wait(&pr, &st));
    check_entry(3, &st, round, "MPI_Wait after MPI_Request_get_status");
    flag = 0;
    while (!flag)
        CHECK_MPI(MPI_Request_get_status(ps, &flag, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&ps, MPI_STATUS_IGNORE));
    CHECK(ps == ps_keep && pr == pr_keep, "MPI_Wait freed a partitioned request");

    /* inactive again */
    flag = 0;
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Request_get_status(pr, &flag, &st));
    CHECK(flag, "MPI_Request_get_status on a completed partitioned receive: flag false");
    check_empty_inactive(&st, "MPI_Request_get_status, completed receive", 3);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_mixed");
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    peer = rank ^ 1;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    test_watchdog("part_mixed.c", 30);

    if (peer < size) {
        test_step = "init";
        CHECK_MPI(MPI_Psend_init(ps_buf, 3, PN / 3, MPI_INT, peer, TAG_PART, MPI_COMM_WORLD, MPI_INFO_NULL, &ps));
        CHECK_MPI(MPI_Precv_init(pr_buf, 5, PN / 5, MPI_INT, peer, TAG_PART, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));
        CHECK_MPI(MPI_Psend_init(ps2_buf, 2, PN / 2, MPI_INT, peer, TAG_PART2, MPI_COMM_WORLD, MPI_INFO_NULL, &ps2));
        CHECK_MPI(MPI_Precv_init(pr2_buf, 2, PN / 2, MPI_INT, peer, TAG_PART2, MPI_COMM_WORLD, MPI_INFO_NULL, &pr2));
        CHECK_MPI(MPI_Send_init(qs_buf, ON, MPI_INT, peer, TAG_PERS, MPI_COMM_WORLD, &qs));
        CHECK_MPI(MPI_Recv_init(qr_buf, ON, MPI_INT, peer, TAG_PERS, MPI_COMM_WORLD, &qr));

        for (int round = 0; round < NROUND; round++) {
            MPI_Request r[N];
            start_round(r, round);
            switch (round) {
            case 0: round_waitall(r, round); break;
            case 1:
                if (test_part_native_mpich40() &&
                    test_known_deviation("MPI_Testall on an array with a partitioned request returns "
                                         "MPI_ERR_IN_STATUS although every MPI_ERROR is MPI_SUCCESS, and with "
                                         "flag = false already frees completed nonblocking requests; this round "
                                         "uses MPI_Waitall instead",
                                         "MPICH 4.0.2 partitioned communication"))
                    round_waitall(r, round);
                else
                    round_testall(r, round);
                break;
            case 2: round_any(r, round, 1); break;
            case 3: round_some(r, round, 1); break;
            case 4: round_any(r, round, 0); break;
            default: round_some(r, round, 0); break;
            }
            check_handles(r, test_step, round);
        }
        get_status();

        /* the second channel was never started: it can still be used */
        test_step = "the second partitioned channel";
        {
            MPI_Status st;
            int n = -1;
            for (int k = 0; k < PN; k++) {
                ps2_buf[k] = word(rank, TAG_PART2, 0, k);
                pr2_buf[k] = SENTINEL;
            }
            MPI_Request two[2] = {pr2, ps2};
            CHECK_MPI(MPI_Startall(2, two));
            CHECK_MPI(MPI_Pready_range(0, 1, ps2));
            CHECK_MPI(MPI_Wait(&pr2, &st));
            CHECK_MPI(MPI_Wait(&ps2, MPI_STATUS_IGNORE));
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_PART2, "second channel: status source %d tag %d",
                  st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
            CHECK(n == PN, "second channel: count %d", n);
            for (int k = 0; k < PN; k++)
                CHECK(pr2_buf[k] == word(peer, TAG_PART2, 0, k), "second channel: int %d is %d, expected %d", k,
                      pr2_buf[k], word(peer, TAG_PART2, 0, k));
        }

        test_step = "MPI_Request_free on inactive requests";
        MPI_Request *all[6] = {&ps, &pr, &ps2, &pr2, &qs, &qr};
        for (int k = 0; k < 6; k++) {
            CHECK_MPI(MPI_Request_free(all[k]));
            CHECK(*all[k] == MPI_REQUEST_NULL, "MPI_Request_free did not null handle %d", k);
        }
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* the one in get_status */
    }
    test_step = "finish";
    test_watchdog("part_mixed.c", 0);
    test_finish("part_mixed");
    return 0;
}
