/* MPI-4 partitioned communication: matching.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out).
 *
 * 1. Init order.  Two channels A and B with the same (source, tag, comm),
 *    initialized A then B on both sides, must match A<->A and B<->B (MPI
 *    4.0 sec. 4.2.1/4.2.3: when communicator, tag and source do not identify
 *    the message, partitioned operations match in initialization order).
 *    A carries pattern A, B pattern B, and the two have different partition
 *    layouts on the two sides (same size, so a mismatch shows as wrong
 *    bytes, not as an error).  Over the rounds the sender starts and readies
 *    B before A (and completes B before even starting A) and the receiver
 *    starts B first or completes B first; each receiver must see its own
 *    pattern.  Every rank is both sender and receiver.
 * 2. No mixing with ordinary point-to-point.  User receives posted before
 *    the partitioned exchange on the same communicator and tag - from the
 *    peer, from MPI_ANY_SOURCE, and from MPI_ANY_SOURCE with MPI_ANY_TAG -
 *    must not match anything of it (MPI_Test says not complete; a message
 *    that MPI_Iprobe could see on the communicator would be a leak too).
 *    Then the peer sends three ordinary messages, which those receives get
 *    with their own payloads, in posting order.
 * 3. Late partner.  One side initializes, starts, readies and waits while
 *    the other side has not even called MPI_Precv_init (resp.
 *    MPI_Psend_init) yet: the late side sleeps 200 ms first.  The sleep only
 *    makes the interesting order likely; nothing measures time.  Both
 *    directions: a waiting sender, and a waiting receiver.
 * 4. Progress.  Messages of 256 KB (above every eager limit, whatever the
 *    aggregation) so a send cannot complete before the receive side acts:
 *    (a) crossed waits: both ranks wait for their partitioned send before
 *    their partitioned receive (the receive was started before: by MPI's
 *    progress rule the sends must complete); (b) the receiving rank started
 *    its partitioned receive and then blocks in an ordinary MPI_Recv for a
 *    token that the peer sends only after its partitioned send completed:
 *    the unrelated blocking call has to move the partitioned receive on.
 */
#include "testutil.h"
#include "mpishim.h"

#include <signal.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define N 1024 /* ints per message */
#define NROUND 4
#define TAG 7
#define SENTINEL ((int)0xDEADBEEF)

static int rank, size, peer;

static int word(int src, int chan, int round, int i)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(chan + 1) * 0x85EBCA77u ^
                 (uint32_t)(round + 7) * 0xC2B2AE3Du ^ (uint32_t)i * 2654435761u;
    return (int)(x ^ (x >> 16));
}

static void check_msg(const int *buf, int chan, int round, const MPI_Status *st, int tag, const char *what)
{
    int n = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag, "%s: status source %d tag %d, expected %d/%d", what,
          st->MPI_SOURCE, st->MPI_TAG, peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &n));
    CHECK(n == N, "%s: count %d, expected %d", what, n, N);
    for (int i = 0; i < N; i++) {
        if (buf[i] == word(peer, chan, round, i))
            continue;
        /* name the channel whose data arrived, if it is the other one */
        int other = buf[i] == word(peer, 1 - chan, round, i);
        CHECK(0, "%s: int %d is %d, expected %d%s", what, i, buf[i], word(peer, chan, round, i),
              other ? " (it carries the OTHER channel's pattern: matched out of init order)" : "");
    }
}

static void ready_all(MPI_Request r, int parts)
{
    CHECK_MPI(MPI_Pready_range(0, parts - 1, r));
}

/* ---------------------------------------------------------------- 1 */
static void init_order(void)
{
    /* channel A: sent as 4 x 256, received as 16 x 64; B: 8 x 128 -> 2 x 512 */
    static int sbuf[2][N], rbuf[2][N];
    static const int sparts[2] = {4, 8}, rparts[2] = {16, 2};
    MPI_Request s[2], r[2];
    char what[160];

    /* even ranks initialize their receives first, odd ranks their sends
     * first: the order between the two directions does not matter, only
     * A-before-B within each direction */
    for (int side = 0; side < 2; side++) {
        if ((side == 0) == (rank % 2 == 0)) {
            for (int c = 0; c < 2; c++)
                CHECK_MPI(MPI_Precv_init(rbuf[c], rparts[c], N / rparts[c], MPI_INT, peer, TAG, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &r[c]));
        } else {
            for (int c = 0; c < 2; c++)
                CHECK_MPI(MPI_Psend_init(sbuf[c], sparts[c], N / sparts[c], MPI_INT, peer, TAG, MPI_COMM_WORLD,
                                         MPI_INFO_NULL, &s[c]));
        }
    }

    for (int round = 0; round < NROUND; round++) {
        MPI_Status st[2];
        for (int c = 0; c < 2; c++) {
            for (int i = 0; i < N; i++) {
                sbuf[c][i] = word(rank, c, round, i);
                rbuf[c][i] = SENTINEL;
            }
        }
        memset(st, 0x5a, sizeof st);
        static const char *const steps[NROUND] = {"init order round 0", "init order round 1",
                                                  "init order round 2", "init order round 3"};
        test_step = steps[round];
        switch (round) {
        case 0: /* receiver starts A, B; sender starts and readies B first */
            CHECK_MPI(MPI_Start(&r[0]));
            CHECK_MPI(MPI_Start(&r[1]));
            CHECK_MPI(MPI_Start(&s[1]));
            ready_all(s[1], sparts[1]);
            CHECK_MPI(MPI_Start(&s[0]));
            ready_all(s[0], sparts[0]);
            CHECK_MPI(MPI_Wait(&r[0], &st[0]));
            CHECK_MPI(MPI_Wait(&r[1], &st[1]));
            CHECK_MPI(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&s[1], MPI_STATUS_IGNORE));
            break;
        case 1: /* receiver starts B first and completes B first */
            CHECK_MPI(MPI_Start(&r[1]));
            CHECK_MPI(MPI_Start(&r[0]));
            CHECK_MPI(MPI_Start(&s[1]));
            CHECK_MPI(MPI_Start(&s[0]));
            ready_all(s[1], sparts[1]);
            CHECK_MPI(MPI_Wait(&r[1], &st[1]));
            ready_all(s[0], sparts[0]);
            CHECK_MPI(MPI_Wait(&r[0], &st[0]));
            CHECK_MPI(MPI_Wait(&s[1], MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
            break;
        case 2: /* sender completes B before it even starts A; A's receive
                   is started first and idles meanwhile */
            CHECK_MPI(MPI_Start(&r[0]));
            CHECK_MPI(MPI_Start(&r[1]));
            CHECK_MPI(MPI_Start(&s[1]));
            ready_all(s[1], sparts[1]);
            CHECK_MPI(MPI_Wait(&s[1], MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&r[1], &st[1]));
            CHECK_MPI(MPI_Start(&s[0]));
            ready_all(s[0], sparts[0]);
            CHECK_MPI(MPI_Wait(&s[0], MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Wait(&r[0], &st[0]));
            break;
        default: { /* everything in one Startall / Waitall, B's entries first */
            MPI_Request all[4] = {r[1], s[1], r[0], s[0]};
            MPI_Status as[4];
            CHECK_MPI(MPI_Startall(4, all));
            ready_all(s[1], sparts[1]);
            ready_all(s[0], sparts[0]);
            CHECK_MPI(MPI_Waitall(4, all, as));
            st[1] = as[0];
            st[0] = as[2];
            break;
        }
        }
        for (int c = 0; c < 2; c++) {
            snprintf(what, sizeof what, "init order, round %d, channel %c", round, "AB"[c]);
            check_msg(rbuf[c], c, round, &st[c], TAG, what);
        }
    }
    for (int c = 0; c < 2; c++) {
        CHECK_MPI(MPI_Request_free(&s[c]));
        CHECK_MPI(MPI_Request_free(&r[c]));
    }
}

/* ---------------------------------------------------------------- 2 */
static void no_p2p_mixing(void)
{
    enum { M = 8 };
    static int pbuf_s[N], pbuf_r[N];
    int ubuf[3][M], msg[3][M];
    MPI_Request u[3], ps, pr;
    MPI_Status st;
    int flag = 1;

    for (int k = 0; k < 3; k++)
        for (int i = 0; i < M; i++)
            ubuf[k][i] = SENTINEL;
    test_step = "user receives + partitioned exchange";
    /* user receives first: specific source, any source, any source+tag */
    CHECK_MPI(MPI_Irecv(ubuf[0], M, MPI_INT, peer, TAG, MPI_COMM_WORLD, &u[0]));
    CHECK_MPI(MPI_Irecv(ubuf[1], M, MPI_INT, MPI_ANY_SOURCE, TAG, MPI_COMM_WORLD, &u[1]));
    CHECK_MPI(MPI_Irecv(ubuf[2], M, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &u[2]));

    /* then a partitioned exchange on the same communicator and tag */
    for (int i = 0; i < N; i++) {
        pbuf_s[i] = word(rank, 5, 0, i);
        pbuf_r[i] = SENTINEL;
    }
    CHECK_MPI(MPI_Precv_init(pbuf_r, 4, N / 4, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &pr));
    CHECK_MPI(MPI_Psend_init(pbuf_s, 4, N / 4, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &ps));
    CHECK_MPI(MPI_Start(&pr));
    CHECK_MPI(MPI_Start(&ps));
    for (int p = 3; p >= 0; p--)
        CHECK_MPI(MPI_Pready(p, ps));
    memset(&st, 0x5a, sizeof st);
    CHECK_MPI(MPI_Wait(&pr, &st));
    CHECK_MPI(MPI_Wait(&ps, MPI_STATUS_IGNORE));
    check_msg(pbuf_r, 5, 0, &st, TAG, "partitioned exchange behind posted user receives");
    CHECK_MPI(MPI_Request_free(&ps));
    CHECK_MPI(MPI_Request_free(&pr));

    /* nothing ordinary was sent yet: the user receives must be pending */
    for (int k = 0; k < 3; k++) {
        flag = 1;
        CHECK_MPI(MPI_Test(&u[k], &flag, &st));
        CHECK(!flag, "user receive %d (%s) completed with partitioned traffic: source %d tag %d, first int %d", k,
              k == 0 ? "peer, tag" : k == 1 ? "ANY_SOURCE, tag" : "ANY_SOURCE, ANY_TAG", st.MPI_SOURCE, st.MPI_TAG,
              ubuf[k][0]);
        CHECK(u[k] != MPI_REQUEST_NULL, "MPI_Test freed a pending receive");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    test_step = "ordinary messages after the partitioned exchange";
    /* now the ordinary messages: the receives get them, in order */
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < M; i++)
            msg[k][i] = 7000 + rank * 100 + k * 10 + i;
        CHECK_MPI(MPI_Send(msg[k], M, MPI_INT, peer, k == 2 ? TAG + 1 : TAG, MPI_COMM_WORLD));
    }
    for (int k = 0; k < 3; k++) {
        int n = -1;
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Wait(&u[k], &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == (k == 2 ? TAG + 1 : TAG),
              "user receive %d: source %d tag %d, expected %d/%d", k, st.MPI_SOURCE, st.MPI_TAG, peer,
              k == 2 ? TAG + 1 : TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == M, "user receive %d: count %d, expected %d", k, n, M);
        for (int i = 0; i < M; i++)
            CHECK(ubuf[k][i] == 7000 + peer * 100 + k * 10 + i, "user receive %d: int %d is %d, expected %d", k, i,
                  ubuf[k][i], 7000 + peer * 100 + k * 10 + i);
    }
    /* nothing left over on the communicator */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    flag = 1;
    CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "a stray message is left on MPI_COMM_WORLD: source %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
}

/* ---------------------------------------------------------------- 4 */
#define BIG (64 * 1024) /* ints: 256 KB */

static void progress(void)
{
    int *sb = calloc(BIG, sizeof(int)), *rb = calloc(BIG, sizeof(int));
    MPI_Request s, r;
    MPI_Status st;
    CHECK(sb && rb, "out of memory");
    CHECK_MPI(MPI_Psend_init(sb, 2, BIG / 2, MPI_INT, peer, 30, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
    CHECK_MPI(MPI_Precv_init(rb, 4, BIG / 4, MPI_INT, peer, 30, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < BIG; i++) {
            sb[i] = word(rank, 30, round, i);
            rb[i] = SENTINEL;
        }
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        CHECK_MPI(MPI_Pready_range(0, 1, s));
        if (round < 2) {
            test_step = round ? "progress: crossed waits (Waitall on send only)" : "progress: crossed waits";
            if (round)
                CHECK_MPI(MPI_Waitall(1, &s, MPI_STATUSES_IGNORE));
            else
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        } else {
            /* even rank: the receiver blocked in MPI_Recv; odd rank: the
             * sender, which sends the token once its send completed.  The
             * odd rank's own partitioned receive is waited for first. */
            int token = -1;
            if (rank % 2 == 0) {
                test_step = "progress: partitioned receive behind a blocking MPI_Recv";
                CHECK_MPI(MPI_Recv(&token, 1, MPI_INT, peer, 31, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
                CHECK(token == 4242, "token %d", token);
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
            } else {
                test_step = "progress: partitioned send to a rank blocked in MPI_Recv";
                CHECK_MPI(MPI_Wait(&r, &st));
                CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
                token = 4242;
                CHECK_MPI(MPI_Send(&token, 1, MPI_INT, peer, 31, MPI_COMM_WORLD));
                goto check; /* r is complete already */
            }
        }
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Wait(&r, &st));
    check:;
        int n = -1;
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 30, "progress round %d: status source %d tag %d", round,
              st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
        CHECK(n == BIG, "progress round %d: count %d, expected %d", round, n, BIG);
        for (int i = 0; i < BIG; i++)
            CHECK(rb[i] == word(peer, 30, round, i), "progress round %d: int %d is %d, expected %d", round, i, rb[i],
                  word(peer, 30, round, i));
    }
    CHECK_MPI(MPI_Request_free(&s));
    CHECK_MPI(MPI_Request_free(&r));
    free(sb);
    free(rb);
}

/* ---------------------------------------------------------------- 3 */
static void nap(void)
{
    struct timespec ts = {0, 200 * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* late == 1: this rank is the late one (sleeps before its init). */
static void late_partner(int sender, int late, int tag, int variant)
{
    static int buf[N];
    MPI_Request r;
    MPI_Status st;
    int parts = sender ? 8 : 2;
    test_step = sender ? (late ? "late sender: sender side" : "late receiver: sender side waits")
                  : (late ? "late receiver: receiver side" : "late sender: receiver side waits");
    if (late)
        nap();
    if (sender) {
        for (int i = 0; i < N; i++)
            buf[i] = word(rank, 9, variant, i);
        CHECK_MPI(MPI_Psend_init(buf, parts, N / parts, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        for (int p = 0; p < parts; p++)
            CHECK_MPI(MPI_Pready(p, r));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else {
        for (int i = 0; i < N; i++)
            buf[i] = SENTINEL;
        CHECK_MPI(MPI_Precv_init(buf, parts, N / parts, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Wait(&r, &st));
        char what[80];
        snprintf(what, sizeof what, "late %s", late ? "receiver" : "sender");
        check_msg(buf, 9, variant, &st, tag, what);
    }
    CHECK_MPI(MPI_Request_free(&r));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_match");
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    peer = rank ^ 1;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    test_watchdog("part_match.c", 30);

    if (peer < size) {
        init_order();
        no_p2p_mixing();
        /* even rank sends and waits before the odd rank's Precv_init ... */
        late_partner(rank % 2 == 0, rank % 2 == 1, 21, 0);
        /* ... and the odd rank receives and waits before the even rank's Psend_init */
        late_partner(rank % 2 == 0, rank % 2 == 0, 22, 1);
        progress();
    } else {
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* the two barriers of no_p2p_mixing */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    test_step = "finish";
    test_watchdog("part_match.c", 0);
    test_finish("part_match");
    return 0;
}
