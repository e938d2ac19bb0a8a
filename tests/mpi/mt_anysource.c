/* MPI_ANY_SOURCE receives and specific-source receives running side by side
 * in different threads of one rank, fed by several sending threads of every
 * other rank.  (Wildcards are used, so no assertions in testlist here: the
 * shim must funnel these receives correctly.)
 *
 * Rank 0 has four receiving threads:
 *   any0: blocking MPI_Recv(MPI_ANY_SOURCE, TAG_ANY)
 *   any1: windows of MPI_Irecv(MPI_ANY_SOURCE, TAG_ANY) + MPI_Waitall
 *   src0: blocking MPI_Recv(s, TAG_SRC) for s = 1..size-1 in turn
 *   src1: MPI_Irecv(s, TAG_SRC) for every s, then MPI_Waitany until done
 * Every other rank runs NSEND threads; each sends NPER messages with TAG_ANY
 * and NPER with TAG_SRC, interleaved (MPI_Send, some MPI_Ssend, some large
 * enough for a rendezvous).  Each message carries (source rank, sending
 * thread, tag, sequence number).  Each receiving thread has a fixed quota,
 * so every message is consumed.  Checked:
 *   - status MPI_SOURCE/MPI_TAG/count agree with the message header and the
 *     receive's criteria (a TAG_SRC message never reaches a TAG_ANY receive,
 *     a specific-source receive only gets that source), payload intact;
 *   - within one receiving thread, per (source, sending thread, tag), the
 *     sequence numbers strictly increase (non-overtaking: one thread's sends
 *     are ordered, one thread's receives are ordered);
 *   - after all threads finish: every (source, sending thread, tag, seq)
 *     arrived exactly once.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NSEND 2 /* sending threads per non-zero rank */
#define NPER 60 /* messages per sending thread and tag (even) */
#define TAG_ANY 5
#define TAG_SRC 9
#define HDR 5
#define BIG 3000 /* ints: 12 KB, rendezvous on both hosts' shared memory */
#define MAXLEN BIG
#define WIN 6
#define MAXRANKS 64

static int rank, size;

static int msg_len(int tagidx, int seq)
{
    return (seq % 20 == 7 + tagidx) ? BIG : HDR + (seq * 5 + tagidx) % 23;
}

static int word(int src, int u, int tag, int seq, int j)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(u * 64 + tag) * 0x85EBCA77u ^
                 (uint32_t)seq * 0xC2B2AE3Du;
    return (int)(x ^ (uint32_t)j * 2654435761u);
}

/* ------------------------------------------------------------ senders */
static void *sender(void *arg)
{
    int u = (int)(intptr_t)arg;
    int *b = malloc(sizeof(int) * MAXLEN);
    CHECK(b, "out of memory");
    for (int seq = 0; seq < NPER; seq++) {
        for (int ti = 0; ti < 2; ti++) {
            int tagidx = (seq + u) % 2 ? 1 - ti : ti; /* vary which tag goes first */
            int tag = tagidx ? TAG_SRC : TAG_ANY, n = msg_len(tagidx, seq);
            b[0] = rank;
            b[1] = u;
            b[2] = tag;
            b[3] = seq;
            b[4] = n;
            for (int j = HDR; j < n; j++)
                b[j] = word(rank, u, tag, seq, j);
            if (seq % 3 == 2)
                CHECK_MPI(MPI_Ssend(b, n, MPI_INT, 0, tag, MPI_COMM_WORLD));
            else
                CHECK_MPI(MPI_Send(b, n, MPI_INT, 0, tag, MPI_COMM_WORLD));
        }
    }
    free(b);
    return NULL;
}

/* ------------------------------------------------------------ receivers */
struct rthread {
    int id;                       /* 0 any0, 1 any1, 2 src0, 3 src1 */
    int last[MAXRANKS][NSEND][2]; /* last sequence seen by this thread */
    unsigned char seen[MAXRANKS][NSEND][2][NPER];
};

static const char *rname[4] = {"any0", "any1", "src0", "src1"};

/* want_src: the receive's source (MPI_ANY_SOURCE allowed); want_tag: its tag. */
static void got(struct rthread *r, const int *b, const MPI_Status *st, int want_src, int want_tag)
{
    int cnt = -1, src = st->MPI_SOURCE, tag = st->MPI_TAG;
    CHECK(src >= 1 && src < size, "%s: status source %d out of range", rname[r->id], src);
    CHECK(want_src == MPI_ANY_SOURCE || src == want_src, "%s: receive for source %d got source %d",
          rname[r->id], want_src, src);
    CHECK(tag == want_tag, "%s: receive for tag %d got a message with status tag %d", rname[r->id], want_tag,
          tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt >= HDR, "%s: count %d", rname[r->id], cnt);
    int u = b[1], seq = b[3], tagidx = tag == TAG_SRC;
    CHECK(b[0] == src && b[2] == tag, "%s: header says source %d tag %d, status says source %d tag %d",
          rname[r->id], b[0], b[2], src, tag);
    CHECK(u >= 0 && u < NSEND && seq >= 0 && seq < NPER, "%s: bad header thread %d seq %d", rname[r->id], u,
          seq);
    CHECK(cnt == b[4] && cnt == msg_len(tagidx, seq),
          "%s: source %d thread %d tag %d seq %d: count %d, sent %d", rname[r->id], src, u, tag, seq, cnt,
          b[4]);
    for (int j = HDR; j < cnt; j++)
        CHECK(b[j] == word(src, u, tag, seq, j), "%s: source %d thread %d tag %d seq %d: word %d bad",
              rname[r->id], src, u, tag, seq, j);
    CHECK(seq > r->last[src][u][tagidx],
          "%s: source %d thread %d tag %d: seq %d received after seq %d (order broken)", rname[r->id], src, u,
          tag, seq, r->last[src][u][tagidx]);
    r->last[src][u][tagidx] = seq;
    CHECK(!r->seen[src][u][tagidx][seq], "%s: source %d thread %d tag %d seq %d received twice", rname[r->id],
          src, u, tag, seq);
    r->seen[src][u][tagidx][seq] = 1;
}

static void *receiver(void *arg)
{
    struct rthread *r = arg;
    int nsrc = size - 1;
    int *b = malloc(sizeof(int) * (size_t)MAXLEN * (size_t)(WIN > nsrc ? WIN : nsrc));
    CHECK(b, "out of memory");
    for (int s = 0; s < MAXRANKS; s++)
        for (int u = 0; u < NSEND; u++)
            r->last[s][u][0] = r->last[s][u][1] = -1;

    if (r->id == 0) { /* any0: half of all TAG_ANY messages, blocking */
        int quota = nsrc * NSEND * NPER / 2;
        for (int k = 0; k < quota; k++) {
            MPI_Status st;
            b[0] = -1;
            CHECK_MPI(MPI_Recv(b, MAXLEN, MPI_INT, MPI_ANY_SOURCE, TAG_ANY, MPI_COMM_WORLD, &st));
            got(r, b, &st, MPI_ANY_SOURCE, TAG_ANY);
        }
    } else if (r->id == 1) { /* any1: the other half, in Irecv windows */
        int quota = nsrc * NSEND * NPER / 2;
        for (int k0 = 0; k0 < quota; k0 += WIN) {
            int w = quota - k0 < WIN ? quota - k0 : WIN;
            MPI_Request rq[WIN];
            MPI_Status st[WIN];
            for (int k = 0; k < w; k++)
                CHECK_MPI(MPI_Irecv(b + (size_t)k * MAXLEN, MAXLEN, MPI_INT, MPI_ANY_SOURCE, TAG_ANY,
                                    MPI_COMM_WORLD, &rq[k]));
            CHECK_MPI(MPI_Waitall(w, rq, st));
            for (int k = 0; k < w; k++) /* in posting order */
                got(r, b + (size_t)k * MAXLEN, &st[k], MPI_ANY_SOURCE, TAG_ANY);
        }
    } else if (r->id == 2) { /* src0: half of each source's TAG_SRC messages */
        for (int k = 0; k < NSEND * NPER / 2; k++)
            for (int s = 1; s < size; s++) {
                MPI_Status st;
                CHECK_MPI(MPI_Recv(b, MAXLEN, MPI_INT, s, TAG_SRC, MPI_COMM_WORLD, &st));
                got(r, b, &st, s, TAG_SRC);
            }
    } else { /* src1: the other half; one receive per source, completed by Waitany */
        MPI_Request rq[MAXRANKS];
        for (int k = 0; k < NSEND * NPER / 2; k++) {
            for (int s = 1; s < size; s++)
                CHECK_MPI(MPI_Irecv(b + (size_t)(s - 1) * MAXLEN, MAXLEN, MPI_INT, s, TAG_SRC, MPI_COMM_WORLD,
                                    &rq[s - 1]));
            for (int done = 0; done < nsrc; done++) {
                int idx = -1;
                MPI_Status st;
                CHECK_MPI(MPI_Waitany(nsrc, rq, &idx, &st));
                CHECK(idx >= 0 && idx < nsrc, "src1: Waitany index %d", idx);
                CHECK(rq[idx] == MPI_REQUEST_NULL, "src1: Waitany did not free request %d", idx);
                got(r, b + (size_t)idx * MAXLEN, &st, idx + 1, TAG_SRC);
            }
            int idx = -2;
            CHECK_MPI(MPI_Waitany(nsrc, rq, &idx, MPI_STATUS_IGNORE));
            CHECK(idx == MPI_UNDEFINED, "src1: Waitany on all-null array gave index %d", idx);
        }
    }
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2 && size <= MAXRANKS, "needs 2..%d ranks, got %d", MAXRANKS, size);
    test_skip_below_multiple(provided, "mt_anysource");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    if (rank == 0) {
        static struct rthread rt[4]; /* large: not on the stack */
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            rt[i].id = i;
            CHECK(pthread_create(&th[i], NULL, receiver, &rt[i]) == 0, "pthread_create failed");
        }
        for (int i = 0; i < 4; i++)
            CHECK(pthread_join(th[i], NULL) == 0, "pthread_join failed");
        /* exactly once, over all receiving threads */
        for (int s = 1; s < size; s++)
            for (int u = 0; u < NSEND; u++)
                for (int ti = 0; ti < 2; ti++)
                    for (int seq = 0; seq < NPER; seq++) {
                        int n = 0;
                        for (int i = 0; i < 4; i++)
                            n += rt[i].seen[s][u][ti][seq];
                        CHECK(n == 1, "source %d thread %d tag %d seq %d received %d times", s, u,
                              ti ? TAG_SRC : TAG_ANY, seq, n);
                        /* and only by a thread whose receives match it */
                        CHECK(ti ? !(rt[0].seen[s][u][ti][seq] || rt[1].seen[s][u][ti][seq])
                                 : !(rt[2].seen[s][u][ti][seq] || rt[3].seen[s][u][ti][seq]),
                              "source %d thread %d tag %d seq %d went to the wrong thread", s, u,
                              ti ? TAG_SRC : TAG_ANY, seq);
                    }
    } else {
        pthread_t th[NSEND];
        for (int u = 0; u < NSEND; u++)
            CHECK(pthread_create(&th[u], NULL, sender, (void *)(intptr_t)u) == 0, "pthread_create failed");
        for (int u = 0; u < NSEND; u++)
            CHECK(pthread_join(th[u], NULL) == 0, "pthread_join failed");
    }

    test_finish("mt_anysource");
    return 0;
}
