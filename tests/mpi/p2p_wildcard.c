/* MPI_ANY_SOURCE / MPI_ANY_TAG receives through the shim.
 *
 * Phase 1 (each rank takes a turn as root): every other rank sends NMSG
 *   messages with distinct tags and lengths; root receives them all with
 *   ANY_SOURCE+ANY_TAG and checks status source/tag/count against the
 *   payload, and that per-source order is kept.
 * Phase 2: ANY_SOURCE with a specific tag, then a specific source with
 *   ANY_TAG (must return that source's remaining messages in send order).
 * Phase 3: wildcard receives pre-posted before anything is sent.
 */
#include "testutil.h"

#define NMSG 50
#define MAXLEN 64

static int p1_tag(int src, int k) { return src * 1000 + k; } /* distinct tags */
static int p1_len(int src, int k) { return 2 + (k * 7 + src) % 23; }

static void phase1(int rank, int size)
{
    int buf[MAXLEN];

    for (int root = 0; root < size; root++) {
        if (rank != root) {
            int sbuf[NMSG][MAXLEN];
            MPI_Request req[NMSG];
            for (int k = 0; k < NMSG; k++) {
                int n = p1_len(rank, k);
                sbuf[k][0] = rank;
                sbuf[k][1] = k;
                for (int i = 2; i < n; i++)
                    sbuf[k][i] = rank * 100 + k + i;
                /* mix blocking and nonblocking sends */
                if (k % 2)
                    CHECK_MPI(MPI_Isend(sbuf[k], n, MPI_INT, root, p1_tag(rank, k),
                                        MPI_COMM_WORLD, &req[k]));
                else {
                    req[k] = MPI_REQUEST_NULL;
                    CHECK_MPI(MPI_Send(sbuf[k], n, MPI_INT, root, p1_tag(rank, k),
                                       MPI_COMM_WORLD));
                }
            }
            CHECK_MPI(MPI_Waitall(NMSG, req, MPI_STATUSES_IGNORE));
        } else {
            int next[64] = {0}; /* next expected k per source */
            CHECK(size <= 64, "too many ranks");
            for (int m = 0; m < NMSG * (size - 1); m++) {
                MPI_Status st;
                int cnt = -1;
                st.MPI_SOURCE = -999;
                st.MPI_TAG = -999;
                CHECK_MPI(MPI_Recv(buf, MAXLEN, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                                   MPI_COMM_WORLD, &st));
                CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
                int src = st.MPI_SOURCE;
                CHECK(src >= 0 && src < size && src != root, "bad status source %d", src);
                CHECK(buf[0] == src, "status source %d but payload says sender %d", src, buf[0]);
                int k = buf[1];
                CHECK(k == next[src], "from %d: got msg %d, expected %d (per-source order lost)",
                      src, k, next[src]);
                next[src]++;
                CHECK(st.MPI_TAG == p1_tag(src, k), "msg %d from %d: tag %d, expected %d", k,
                      src, st.MPI_TAG, p1_tag(src, k));
                CHECK(cnt == p1_len(src, k), "msg %d from %d: count %d, expected %d", k, src,
                      cnt, p1_len(src, k));
                for (int i = 2; i < cnt; i++)
                    CHECK(buf[i] == src * 100 + k + i, "msg %d from %d: word %d corrupt", k, src,
                          i);
            }
            for (int s = 0; s < size; s++)
                CHECK(s == root || next[s] == NMSG, "source %d: only %d messages", s, next[s]);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
}

static void phase2(int rank, int size)
{
    enum { TA = 7, TB = 8, TC = 9 };
    if (rank != 0) {
        int v[3] = {rank * 10 + TA, rank * 10 + TB, rank * 10 + TC};
        MPI_Request req[3];
        CHECK_MPI(MPI_Isend(&v[0], 1, MPI_INT, 0, TA, MPI_COMM_WORLD, &req[0]));
        CHECK_MPI(MPI_Isend(&v[1], 1, MPI_INT, 0, TB, MPI_COMM_WORLD, &req[1]));
        CHECK_MPI(MPI_Isend(&v[2], 1, MPI_INT, 0, TC, MPI_COMM_WORLD, &req[2]));
        CHECK_MPI(MPI_Waitall(3, req, MPI_STATUSES_IGNORE));
    } else {
        int seen[64] = {0}, x;
        MPI_Status st;
        /* the last-sent tag first, from anyone */
        for (int m = 0; m < size - 1; m++) {
            CHECK_MPI(MPI_Recv(&x, 1, MPI_INT, MPI_ANY_SOURCE, TC, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_TAG == TC, "ANY_SOURCE/tag %d: status tag %d", TC, st.MPI_TAG);
            CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < size, "bad source %d", st.MPI_SOURCE);
            CHECK(x == st.MPI_SOURCE * 10 + TC, "tag %d from %d: payload %d", TC, st.MPI_SOURCE,
                  x);
            CHECK(!seen[st.MPI_SOURCE]++, "source %d matched twice", st.MPI_SOURCE);
        }
        /* then per source with ANY_TAG: must be TA then TB */
        for (int s = size - 1; s > 0; s--) {
            for (int t = TA; t <= TB; t++) {
                CHECK_MPI(MPI_Recv(&x, 1, MPI_INT, s, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
                CHECK(st.MPI_SOURCE == s, "source %d: status source %d", s, st.MPI_SOURCE);
                CHECK(st.MPI_TAG == t, "source %d ANY_TAG: got tag %d, expected %d", s,
                      st.MPI_TAG, t);
                CHECK(x == s * 10 + t, "source %d tag %d: payload %d", s, t, x);
            }
        }
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

static void phase3(int rank, int size)
{
    if (rank == 0) {
        int n = size - 1, buf[64], seen[64] = {0};
        MPI_Request req[64];
        MPI_Status st[64];
        for (int i = 0; i < n; i++)
            CHECK_MPI(MPI_Irecv(&buf[i], 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD,
                                &req[i]));
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* receives are posted before any send */
        CHECK_MPI(MPI_Waitall(n, req, st));
        for (int i = 0; i < n; i++) {
            int cnt = -1;
            CHECK_MPI(MPI_Get_count(&st[i], MPI_INT, &cnt));
            CHECK(cnt == 1, "count %d", cnt);
            CHECK(st[i].MPI_SOURCE > 0 && st[i].MPI_SOURCE < size, "bad source %d",
                  st[i].MPI_SOURCE);
            CHECK(st[i].MPI_TAG == 500 + st[i].MPI_SOURCE, "source %d: tag %d",
                  st[i].MPI_SOURCE, st[i].MPI_TAG);
            CHECK(buf[i] == -st[i].MPI_SOURCE, "source %d: payload %d", st[i].MPI_SOURCE,
                  buf[i]);
            CHECK(!seen[st[i].MPI_SOURCE]++, "source %d matched twice", st[i].MPI_SOURCE);
        }
    } else {
        int v = -rank;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 500 + rank, MPI_COMM_WORLD));
    }
}

int main(int argc, char **argv)
{
    int rank, size;
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2 && size <= 64, "needs 2..64 ranks, got %d", size);

    phase1(rank, size);
    phase2(rank, size);
    phase3(rank, size);

    test_finish("p2p_wildcard");
    return 0;
}
