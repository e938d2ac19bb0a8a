/* Persistent requests and the send modes through the shim.
 * Persistent: Send/Ssend/Bsend/Rsend_init + Recv_init, MPI_Start/MPI_Startall
 * over several rounds with new data each round (the shim must not cache the
 * first round's data or drop the request after one use), Request_free on
 * inactive requests.  Modes: Bsend/Ibsend (must complete before the receiver
 * posts), Rsend/Irsend (receiver pre-posts, barrier, then ready send),
 * Ssend/Issend (must NOT complete before the receive is posted).
 * Ring topology: send right, receive left. */
#include "testutil.h"

#include <time.h>

#define N 1000     /* ints per message */
#define BIGN 50000 /* ints: above eager limits, for the buffered-mode checks */
#define ROUNDS 5

static int rank, size, left, right;

static int val(int src, int round, int i) { return src * 1000000 + round * 10000 + i; }

static void fill(int *b, int n, int round)
{
    for (int i = 0; i < n; i++)
        b[i] = val(rank, round, i);
}

static void verify(const int *b, int n, int round, const MPI_Status *st, int tag, const char *what)
{
    int cnt = -1;
    for (int i = 0; i < n; i++)
        CHECK(b[i] == val(left, round, i), "%s round %d: word %d is %d, expected %d", what, round,
              i, b[i], val(left, round, i));
    if (st) {
        CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
        CHECK(cnt == n, "%s round %d: count %d", what, round, cnt);
        CHECK(st->MPI_SOURCE == left && st->MPI_TAG == tag, "%s round %d: status src %d tag %d",
              what, round, st->MPI_SOURCE, st->MPI_TAG);
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = {0, ms * 1000000L};
    nanosleep(&ts, NULL);
}

/* Send_init/Ssend_init/Bsend_init + Recv_init, MPI_Start, several rounds. */
static void persistent_mode(int mode, const char *what)
{
    static int sb[N], rb[N];
    MPI_Request sreq, rreq;
    MPI_Status st;
    int tag = 10 + mode;

    switch (mode) {
    case 0: CHECK_MPI(MPI_Send_init(sb, N, MPI_INT, right, tag, MPI_COMM_WORLD, &sreq)); break;
    case 1: CHECK_MPI(MPI_Ssend_init(sb, N, MPI_INT, right, tag, MPI_COMM_WORLD, &sreq)); break;
    case 2: CHECK_MPI(MPI_Bsend_init(sb, N, MPI_INT, right, tag, MPI_COMM_WORLD, &sreq)); break;
    default: CHECK_MPI(MPI_Rsend_init(sb, N, MPI_INT, right, tag, MPI_COMM_WORLD, &sreq)); break;
    }
    CHECK_MPI(MPI_Recv_init(rb, N, MPI_INT, left, tag, MPI_COMM_WORLD, &rreq));

    for (int round = 0; round < ROUNDS; round++) {
        fill(sb, N, round); /* new data each round, same buffer */
        memset(rb, 0, sizeof rb);
        CHECK_MPI(MPI_Start(&rreq));
        if (mode == 3) /* ready mode: the peer's receive must be posted first */
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Start(&sreq));
        CHECK_MPI(MPI_Wait(&sreq, MPI_STATUS_IGNORE));
        CHECK(sreq != MPI_REQUEST_NULL, "%s: Wait freed the persistent send request", what);
        CHECK_MPI(MPI_Wait(&rreq, &st));
        CHECK(rreq != MPI_REQUEST_NULL, "%s: Wait freed the persistent recv request", what);
        verify(rb, N, round, &st, tag, what);
        /* nobody reuses sb before everyone has received this round */
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* Waiting on an inactive persistent request returns at once, empty status. */
    st.MPI_SOURCE = -999;
    CHECK_MPI(MPI_Wait(&rreq, &st));
    CHECK(st.MPI_SOURCE == MPI_ANY_SOURCE && st.MPI_TAG == MPI_ANY_TAG,
          "%s: Wait on inactive persistent request: status src %d tag %d", what, st.MPI_SOURCE,
          st.MPI_TAG);

    CHECK_MPI(MPI_Request_free(&sreq));
    CHECK_MPI(MPI_Request_free(&rreq));
    CHECK(sreq == MPI_REQUEST_NULL && rreq == MPI_REQUEST_NULL, "%s: Request_free did not null",
          what);
}

/* Startall over a mix of persistent sends and receives, several rounds. */
static void persistent_startall(void)
{
    enum { NB = 3 };
    static int sb[NB][N], rb[NB][N];
    MPI_Request req[2 * NB];
    MPI_Status st[2 * NB];

    for (int k = 0; k < NB; k++) {
        CHECK_MPI(MPI_Recv_init(rb[k], N, MPI_INT, left, 40 + k, MPI_COMM_WORLD, &req[k]));
        if (k == 1)
            CHECK_MPI(MPI_Ssend_init(sb[k], N, MPI_INT, right, 40 + k, MPI_COMM_WORLD, &req[NB + k]));
        else
            CHECK_MPI(MPI_Send_init(sb[k], N, MPI_INT, right, 40 + k, MPI_COMM_WORLD, &req[NB + k]));
    }
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < NB; k++) {
            fill(sb[k], N, round * 10 + k);
            memset(rb[k], 0, sizeof rb[k]);
        }
        CHECK_MPI(MPI_Startall(2 * NB, req));
        CHECK_MPI(MPI_Waitall(2 * NB, req, st));
        for (int k = 0; k < NB; k++)
            verify(rb[k], N, round * 10 + k, &st[k], 40 + k, "Startall");
        for (int k = 0; k < 2 * NB; k++)
            CHECK(req[k] != MPI_REQUEST_NULL, "Waitall freed persistent request %d", k);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }
    for (int k = 0; k < 2 * NB; k++) {
        CHECK_MPI(MPI_Request_free(&req[k]));
        CHECK(req[k] == MPI_REQUEST_NULL, "Request_free did not null request %d", k);
    }
}

/* Blocking and nonblocking buffered/ready/synchronous sends. */
static void send_modes(void)
{
    static int sb[BIGN], rb[BIGN];
    MPI_Status st;
    MPI_Request r, s;

    /* Bsend is local: it must return before the receiver has posted anything
     * (the receiver only posts after the barrier). Large, so it is buffered. */
    fill(sb, BIGN, 1);
    CHECK_MPI(MPI_Bsend(sb, BIGN, MPI_INT, right, 50, MPI_COMM_WORLD));
    fill(sb, BIGN, 99); /* reusing the buffer must not affect the message */
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(rb, BIGN, MPI_INT, left, 50, MPI_COMM_WORLD, &st));
    verify(rb, BIGN, 1, &st, 50, "Bsend");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Ibsend: Wait completes locally, before the receive is posted. */
    fill(sb, BIGN, 2);
    CHECK_MPI(MPI_Ibsend(sb, BIGN, MPI_INT, right, 51, MPI_COMM_WORLD, &s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    fill(sb, BIGN, 98);
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(rb, BIGN, MPI_INT, left, 51, MPI_COMM_WORLD, &st));
    verify(rb, BIGN, 2, &st, 51, "Ibsend");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Rsend: receive pre-posted, barrier, then the ready send. */
    fill(sb, N, 3);
    CHECK_MPI(MPI_Irecv(rb, N, MPI_INT, left, 52, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Rsend(sb, N, MPI_INT, right, 52, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    verify(rb, N, 3, &st, 52, "Rsend");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Irsend */
    fill(sb, N, 4);
    CHECK_MPI(MPI_Irecv(rb, N, MPI_INT, left, 53, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    CHECK_MPI(MPI_Irsend(sb, N, MPI_INT, right, 53, MPI_COMM_WORLD, &s));
    CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Wait(&r, &st));
    verify(rb, N, 4, &st, 53, "Irsend");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Ssend: receive pre-posted so the ring cannot deadlock. */
    fill(sb, N, 5);
    CHECK_MPI(MPI_Irecv(rb, N, MPI_INT, left, 54, MPI_COMM_WORLD, &r));
    CHECK_MPI(MPI_Ssend(sb, N, MPI_INT, right, 54, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&r, &st));
    verify(rb, N, 5, &st, 54, "Ssend");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));

    /* Issend of a tiny message (would go eagerly as a standard send): it must
     * not complete while the receiver has not posted a matching receive. */
    {
        int one = 7000 + rank, got = -1, flag = 0;
        CHECK_MPI(MPI_Issend(&one, 1, MPI_INT, right, 55, MPI_COMM_WORLD, &s));
        for (int i = 0; i < 20 && !flag; i++) {
            CHECK_MPI(MPI_Test(&s, &flag, MPI_STATUS_IGNORE));
            sleep_ms(1);
        }
        CHECK(!flag, "Issend completed before the matching receive was posted");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, left, 55, MPI_COMM_WORLD, &st));
        CHECK(got == 7000 + left, "Issend payload %d", got);
        CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 55, "Issend status src %d tag %d",
              st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;

    /* Room for a few outstanding buffered messages of either size. */
    int psz = 0;
    CHECK_MPI(MPI_Pack_size(BIGN, MPI_INT, MPI_COMM_WORLD, &psz));
    int bsize = 4 * (psz + MPI_BSEND_OVERHEAD);
    char *bbuf = malloc((size_t)bsize);
    CHECK(bbuf, "out of memory");
    CHECK_MPI(MPI_Buffer_attach(bbuf, bsize));

    persistent_mode(0, "Send_init");
    persistent_mode(1, "Ssend_init");
    persistent_mode(2, "Bsend_init");
    persistent_mode(3, "Rsend_init");
    persistent_startall();
    send_modes();

    void *det = NULL;
    int detsz = 0;
    CHECK_MPI(MPI_Buffer_detach(&det, &detsz));
    CHECK(det == bbuf && detsz == bsize, "Buffer_detach returned %d bytes / other buffer", detsz);
    free(bbuf);

    test_finish("p2p_persistent");
    return 0;
}
