/* Message ordering (non-overtaking) through the shim.
 *
 * Part 1: for every ordered pair of ranks, NMSG messages with one tag are
 *         received in send order; sizes vary so eager and rendezvous
 *         messages interleave (a classic place to break ordering).
 * Part 2: mixed send modes and tags; the receiver asks for tags in a
 *         different order than sent, both with pre-posted receives and with
 *         messages already waiting (unexpected queue).
 */
#include "testutil.h"

#define NMSG 1000
#define BIG_INTS 16384 /* 64 KiB: above the eager limit of both hosts */
#define TAG1 7

static int msg_len(int k)
{
    return (k % 97 == 0) ? BIG_INTS : 3 + (k % 5); /* ints */
}

static int payload(int src, int k, int i)
{
    return src * 1000003 + k * 131 + i;
}

static void part1_same_tag(int rank, int size)
{
    int *rbuf = malloc(sizeof(int) * BIG_INTS);
    int **sbufs = malloc(sizeof(int *) * NMSG);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * NMSG);
    CHECK(rbuf && sbufs && reqs, "out of memory");

    for (int d = 1; d < size; d++) {
        int to = (rank + d) % size, from = (rank - d + size) % size;

        for (int k = 0; k < NMSG; k++) {
            int n = msg_len(k);
            sbufs[k] = malloc(sizeof(int) * (size_t)n);
            CHECK(sbufs[k], "out of memory");
            sbufs[k][0] = k; /* sequence number */
            sbufs[k][1] = rank;
            for (int i = 2; i < n; i++)
                sbufs[k][i] = payload(rank, k, i);
            CHECK_MPI(MPI_Isend(sbufs[k], n, MPI_INT, to, TAG1, MPI_COMM_WORLD, &reqs[k]));
        }

        for (int k = 0; k < NMSG; k++) {
            MPI_Status st;
            int cnt = -1;
            CHECK_MPI(MPI_Recv(rbuf, BIG_INTS, MPI_INT, from, TAG1, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
            CHECK(rbuf[0] == k, "d=%d from %d: expected seq %d, got %d (overtaking)",
                  d, from, k, rbuf[0]);
            CHECK(rbuf[1] == from, "seq %d: payload sender %d != %d", k, rbuf[1], from);
            CHECK(cnt == msg_len(k), "seq %d: count %d != %d", k, cnt, msg_len(k));
            CHECK(st.MPI_SOURCE == from && st.MPI_TAG == TAG1,
                  "seq %d: status src %d tag %d", k, st.MPI_SOURCE, st.MPI_TAG);
            for (int i = 2; i < cnt; i++)
                CHECK(rbuf[i] == payload(from, k, i), "seq %d word %d corrupt", k, i);
        }

        CHECK_MPI(MPI_Waitall(NMSG, reqs, MPI_STATUSES_IGNORE));
        for (int k = 0; k < NMSG; k++)
            free(sbufs[k]);
    }
    free(reqs);
    free(sbufs);
    free(rbuf);
}

/* Part 2 ---------------------------------------------------------------- */

#define N2 60
#define NTAGS 5
#define P2_BIG 20000 /* ints; a few rendezvous messages among small ones */

static int p2_tag(int k) { return 100 + k % NTAGS; }
static int p2_len(int k) { return (k % 11 == 3) ? P2_BIG : 4; }

static void p2_fill(int *buf, int rank, int k)
{
    int n = p2_len(k);
    buf[0] = k;
    buf[1] = rank;
    buf[2] = p2_tag(k);
    for (int i = 3; i < n; i++)
        buf[i] = payload(rank, k, i);
}

static void p2_verify(const int *buf, const MPI_Status *st, int from, int k)
{
    int cnt = -1;
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(buf[0] == k, "tag %d from %d: expected msg %d got %d", p2_tag(k), from, k, buf[0]);
    CHECK(buf[1] == from && buf[2] == p2_tag(k), "msg %d: header %d/%d", k, buf[1], buf[2]);
    CHECK(st->MPI_SOURCE == from && st->MPI_TAG == p2_tag(k),
          "msg %d: status src %d tag %d", k, st->MPI_SOURCE, st->MPI_TAG);
    CHECK(cnt == p2_len(k), "msg %d: count %d != %d", k, cnt, p2_len(k));
    for (int i = 3; i < cnt; i++)
        CHECK(buf[i] == payload(from, k, i), "msg %d word %d corrupt", k, i);
}

/* Receive order: tags from highest to lowest, within a tag in send order. */
static void recv_order(int *order)
{
    int n = 0;
    for (int t = NTAGS - 1; t >= 0; t--)
        for (int k = 0; k < N2; k++)
            if (k % NTAGS == t)
                order[n++] = k;
}

static void part2_mixed(int rank, int size)
{
    int *sbuf[N2], *rbuf[N2], order[N2];
    MPI_Request sreq[N2], rreq[N2];
    MPI_Status rst[N2];

    for (int k = 0; k < N2; k++) {
        sbuf[k] = malloc(sizeof(int) * (size_t)p2_len(k));
        rbuf[k] = malloc(sizeof(int) * P2_BIG);
        CHECK(sbuf[k] && rbuf[k], "out of memory");
    }
    recv_order(order);

    for (int d = 1; d < size; d++) {
        int to = (rank + d) % size, from = (rank - d + size) % size;

        /* (a) receives pre-posted by tag, in reversed tag order; sender mixes
         * Send/Isend/Issend (blocking Send is safe: every receive is posted). */
        for (int j = 0; j < N2; j++) {
            int k = order[j];
            CHECK_MPI(MPI_Irecv(rbuf[k], P2_BIG, MPI_INT, from, p2_tag(k), MPI_COMM_WORLD,
                                &rreq[k]));
        }
        for (int k = 0; k < N2; k++) {
            p2_fill(sbuf[k], rank, k);
            sreq[k] = MPI_REQUEST_NULL;
            switch (k % 3) {
            case 0:
                CHECK_MPI(MPI_Isend(sbuf[k], p2_len(k), MPI_INT, to, p2_tag(k), MPI_COMM_WORLD,
                                    &sreq[k]));
                break;
            case 1:
                CHECK_MPI(MPI_Issend(sbuf[k], p2_len(k), MPI_INT, to, p2_tag(k),
                                     MPI_COMM_WORLD, &sreq[k]));
                break;
            default:
                CHECK_MPI(MPI_Send(sbuf[k], p2_len(k), MPI_INT, to, p2_tag(k), MPI_COMM_WORLD));
                break;
            }
        }
        CHECK_MPI(MPI_Waitall(N2, rreq, rst));
        for (int k = 0; k < N2; k++)
            p2_verify(rbuf[k], &rst[k], from, k);
        CHECK_MPI(MPI_Waitall(N2, sreq, MPI_STATUSES_IGNORE));

        /* (b) messages sent first (Isend/Issend only, so nothing can block),
         * then blocking receives by tag in reversed tag order. */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        for (int k = 0; k < N2; k++) {
            p2_fill(sbuf[k], rank, k);
            if (k % 2)
                CHECK_MPI(MPI_Issend(sbuf[k], p2_len(k), MPI_INT, to, p2_tag(k),
                                     MPI_COMM_WORLD, &sreq[k]));
            else
                CHECK_MPI(MPI_Isend(sbuf[k], p2_len(k), MPI_INT, to, p2_tag(k), MPI_COMM_WORLD,
                                    &sreq[k]));
        }
        for (int j = 0; j < N2; j++) {
            int k = order[j];
            MPI_Status st;
            memset(rbuf[k], 0xff, sizeof(int) * 4);
            CHECK_MPI(MPI_Recv(rbuf[k], P2_BIG, MPI_INT, from, p2_tag(k), MPI_COMM_WORLD, &st));
            p2_verify(rbuf[k], &st, from, k);
        }
        CHECK_MPI(MPI_Waitall(N2, sreq, MPI_STATUSES_IGNORE));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    for (int k = 0; k < N2; k++) {
        free(sbuf[k]);
        free(rbuf[k]);
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);

    part1_same_tag(rank, size);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    part2_mixed(rank, size);

    test_finish("p2p_order");
    return 0;
}
