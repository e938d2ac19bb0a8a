/* The probe family from several threads at once.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  Six
 * threads per rank; each sends its own stream of NMSG messages to the peer
 * (all MPI_Isend up front, MPI_Waitall at the end; sizes vary, including
 * zero-length and rendezvous-size messages) and receives the peer's stream:
 *   t0: MPI_Probe(peer, TAG0), buffer sized from the status, MPI_Recv
 *   t1: MPI_Iprobe(MPI_ANY_SOURCE, TAG1) loop, MPI_Recv(status source)
 *   t2: MPI_Mprobe(peer, TAG2) + MPI_Mrecv
 *   t3: MPI_Improbe(MPI_ANY_SOURCE, TAG3) loop + MPI_Imrecv + MPI_Wait/Test
 * A plain probe followed by a receive is only safe because every thread
 * has its own tag; the matched probe (Mprobe/Improbe) is the thread-safe way
 * to learn a message's size.  Finally t4 and t5 both do
 * MPI_Mprobe(MPI_ANY_SOURCE, TAG_SHARED) + MPI_Mrecv (t5 alternates with
 * MPI_Imrecv) on the SAME tag, each for half of the peer's TAG_SHARED
 * messages: every message must be received exactly once, by the thread whose
 * probe matched it, with the size and status the probe reported.
 *
 * Every probe status and receive status is checked (source, tag, count),
 * the receive's status against the probe's, message handles become
 * MPI_MESSAGE_NULL, and every payload word is checked.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#define NMSG 40
#define NTHREADS 6
#define TAG0 30 /* threads 0..3 use TAG0 + t */
#define TAG_SHARED 40
#define TAG_NEVER 41 /* nobody sends it */
#define BIG 20000    /* ints: 80 KB */
#define HDR 2        /* shared-tag messages: {sender thread, seq} */

static int rank, size, peer;

static int msg_len(int t, int i)
{
    if (i % 10 == 3)
        return BIG;
    if (i % 10 == 5)
        return t >= 4 ? HDR : 0; /* shared-tag messages carry a header */
    return HDR + (i * 13 + t) % 40;
}

static int word(int src, int t, int i, int j)
{
    uint32_t x =
        (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(t + 1) * 0x85EBCA77u ^ (uint32_t)i * 0xC2B2AE3Du;
    return (int)(x ^ (uint32_t)j * 2654435761u);
}

static int tag_of(int t) { return t < 4 ? TAG0 + t : TAG_SHARED; }

struct targ {
    int t;
    int last[2];                 /* shared tag: last seq seen per sender thread (4, 5) */
    unsigned char seen[2][NMSG]; /* shared tag: messages this thread received */
};

static void check_status(int t, const char *what, const MPI_Status *st, int tag, int n, int i)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "thread %d msg %d: %s status source %d tag %d, expected %d/%d", t, i, what, st->MPI_SOURCE,
          st->MPI_TAG, peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == n, "thread %d msg %d: %s count %d, expected %d", t, i, what, cnt, n);
}

static void check_payload(int t, int sender_t, int i, const int *b, int n)
{
    for (int j = (sender_t >= 4 ? HDR : 0); j < n; j++)
        CHECK(b[j] == word(peer, sender_t, i, j), "thread %d: message %d of peer thread %d: word %d is %d", t,
              i, sender_t, j, b[j]);
}

static int *alloc_exact(int n)
{
    int *b = malloc(sizeof(int) * (size_t)(n > 0 ? n : 1));
    CHECK(b, "out of memory");
    return b;
}

/* One message of a distinct-tag stream (threads 0..3), expected index i. */
static void recv_distinct(int t, int i)
{
    int tag = tag_of(t), n = msg_len(t, i), cnt = -1;
    MPI_Status pst, st;
    MPI_Message msg = MPI_MESSAGE_NULL;
    int *b = NULL;
    switch (t) {
    case 0:
        CHECK_MPI(MPI_Probe(peer, tag, MPI_COMM_WORLD, &pst));
        check_status(t, "MPI_Probe", &pst, tag, n, i);
        CHECK_MPI(MPI_Get_count(&pst, MPI_INT, &cnt));
        b = alloc_exact(cnt);
        CHECK_MPI(MPI_Recv(b, cnt, MPI_INT, peer, tag, MPI_COMM_WORLD, &st));
        break;
    case 1: {
        int flag = 0;
        while (!flag) {
            CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &pst));
            if (!flag)
                sched_yield();
        }
        check_status(t, "MPI_Iprobe", &pst, tag, n, i);
        CHECK_MPI(MPI_Get_count(&pst, MPI_INT, &cnt));
        b = alloc_exact(cnt);
        CHECK_MPI(MPI_Recv(b, cnt, MPI_INT, pst.MPI_SOURCE, tag, MPI_COMM_WORLD, &st));
        break;
    }
    case 2:
        CHECK_MPI(MPI_Mprobe(peer, tag, MPI_COMM_WORLD, &msg, &pst));
        CHECK(msg != MPI_MESSAGE_NULL, "thread 2 msg %d: MPI_Mprobe gave MPI_MESSAGE_NULL", i);
        check_status(t, "MPI_Mprobe", &pst, tag, n, i);
        CHECK_MPI(MPI_Get_count(&pst, MPI_INT, &cnt));
        b = alloc_exact(cnt);
        CHECK_MPI(MPI_Mrecv(b, cnt, MPI_INT, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NULL, "thread 2 msg %d: MPI_Mrecv left the message handle set", i);
        break;
    default: {
        int flag = 0;
        MPI_Request r;
        while (!flag) {
            CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &flag, &msg, &pst));
            if (!flag)
                sched_yield();
        }
        CHECK(msg != MPI_MESSAGE_NULL, "thread 3 msg %d: MPI_Improbe flag set but no message", i);
        check_status(t, "MPI_Improbe", &pst, tag, n, i);
        CHECK_MPI(MPI_Get_count(&pst, MPI_INT, &cnt));
        b = alloc_exact(cnt);
        CHECK_MPI(MPI_Imrecv(b, cnt, MPI_INT, &msg, &r));
        CHECK(msg == MPI_MESSAGE_NULL, "thread 3 msg %d: MPI_Imrecv left the message handle set", i);
        if (i % 2) {
            CHECK_MPI(MPI_Wait(&r, &st));
        } else {
            for (flag = 0; !flag;)
                CHECK_MPI(MPI_Test(&r, &flag, &st));
        }
        CHECK(r == MPI_REQUEST_NULL, "thread 3 msg %d: request not freed", i);
        break;
    }
    }
    check_status(t, "receive", &st, tag, n, i);
    check_payload(t, t, i, b, n);
    free(b);
}

/* One message on the shared tag (threads 4, 5), received by matched probe. */
static void recv_shared(struct targ *a, int k)
{
    int t = a->t, cnt = -1, rcnt = -1;
    MPI_Status pst, st;
    MPI_Message msg = MPI_MESSAGE_NULL;
    CHECK_MPI(MPI_Mprobe(MPI_ANY_SOURCE, TAG_SHARED, MPI_COMM_WORLD, &msg, &pst));
    CHECK(msg != MPI_MESSAGE_NULL, "thread %d: MPI_Mprobe gave MPI_MESSAGE_NULL", t);
    CHECK(pst.MPI_SOURCE == peer && pst.MPI_TAG == TAG_SHARED,
          "thread %d: MPI_Mprobe status source %d tag %d", t, pst.MPI_SOURCE, pst.MPI_TAG);
    CHECK_MPI(MPI_Get_count(&pst, MPI_INT, &cnt));
    CHECK(cnt >= HDR && cnt <= BIG, "thread %d: MPI_Mprobe count %d", t, cnt);
    int *b = alloc_exact(cnt);
    if (t == 5 && k % 2) {
        MPI_Request r;
        CHECK_MPI(MPI_Imrecv(b, cnt, MPI_INT, &msg, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
    } else {
        CHECK_MPI(MPI_Mrecv(b, cnt, MPI_INT, &msg, &st));
    }
    CHECK(msg == MPI_MESSAGE_NULL, "thread %d: matched receive left the message handle set", t);
    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_SHARED, "thread %d: receive status source %d tag %d", t,
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &rcnt));
    CHECK(rcnt == cnt, "thread %d: received %d ints, the matched probe said %d", t, rcnt, cnt);
    int u = b[0], seq = b[1];
    CHECK((u == 4 || u == 5) && seq >= 0 && seq < NMSG, "thread %d: bad header {%d, %d}", t, u, seq);
    CHECK(cnt == msg_len(u, seq), "thread %d: peer thread %d msg %d has %d ints, expected %d", t, u, seq, cnt,
          msg_len(u, seq));
    CHECK(seq > a->last[u - 4], "thread %d: peer thread %d: msg %d after msg %d (order broken)", t, u, seq,
          a->last[u - 4]);
    a->last[u - 4] = seq;
    CHECK(!a->seen[u - 4][seq], "thread %d: peer thread %d msg %d received twice", t, u, seq);
    a->seen[u - 4][seq] = 1;
    check_payload(t, u, seq, b, cnt);
    free(b);
}

static void *worker(void *p)
{
    struct targ *a = p;
    int t = a->t, tag = tag_of(t);
    int *sb[NMSG];
    MPI_Request sr[NMSG];
    a->last[0] = a->last[1] = -1;

    if (t == 1) { /* nothing is ever sent with TAG_NEVER */
        int flag = 1;
        MPI_Message m = MPI_MESSAGE_NULL;
        CHECK_MPI(MPI_Iprobe(peer, TAG_NEVER, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "MPI_Iprobe found a message with a tag nobody sends");
        flag = 1;
        CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, TAG_NEVER, MPI_COMM_WORLD, &flag, &m, MPI_STATUS_IGNORE));
        CHECK(!flag, "MPI_Improbe found a message with a tag nobody sends");
    }

    for (int i = 0; i < NMSG; i++) {
        int n = msg_len(t, i);
        sb[i] = alloc_exact(n);
        for (int j = 0; j < n; j++)
            sb[i][j] = word(rank, t, i, j);
        if (t >= 4) {
            sb[i][0] = t;
            sb[i][1] = i;
        }
        CHECK_MPI(MPI_Isend(sb[i], n, MPI_INT, peer, tag, MPI_COMM_WORLD, &sr[i]));
    }
    if (t < 4)
        for (int i = 0; i < NMSG; i++)
            recv_distinct(t, i);
    else
        for (int k = 0; k < NMSG; k++) /* quota: half of the peer's 2*NMSG shared-tag messages */
            recv_shared(a, k);
    CHECK_MPI(MPI_Waitall(NMSG, sr, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NMSG; i++) {
        CHECK(sr[i] == MPI_REQUEST_NULL, "thread %d: Waitall did not free send %d", t, i);
        free(sb[i]);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_probe");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    peer = rank ^ 1;
    if (peer < size) {
        pthread_t th[NTHREADS];
        struct targ args[NTHREADS];
        memset(args, 0, sizeof args);
        for (int t = 0; t < NTHREADS; t++) {
            args[t].t = t;
            CHECK(pthread_create(&th[t], NULL, worker, &args[t]) == 0, "pthread_create failed");
        }
        for (int t = 0; t < NTHREADS; t++)
            CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");
        /* shared tag: every message of the peer's threads 4 and 5 exactly once */
        for (int u = 0; u < 2; u++)
            for (int i = 0; i < NMSG; i++) {
                int n = args[4].seen[u][i] + args[5].seen[u][i];
                CHECK(n == 1, "shared tag: peer thread %d msg %d received %d times", u + 4, i, n);
            }
    }

    test_finish("mt_probe");
    return 0;
}
