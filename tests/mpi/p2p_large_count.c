/* The MPI-4 large-count point-to-point calls (MPI_Send_c, MPI_Recv_c, ...)
 * mixed with the int-count ones on one communicator: a message sent by
 * either kind matches a receive of either kind, and two messages from one
 * sender with one tag arrive in the order sent whatever calls sent them
 * (non-overtaking). Under the shim's spreading maps (testlist: MAP=tag with
 * the no_any_tag assertion) every call must take the route its
 * communicator, peer and tag map to, or messages of one kind never meet
 * receives of the other. Counts are checked with MPI_Get_count(_c).
 * Then counts above INT_MAX: receives that large (a buffer reserved, not
 * touched) take small messages sent by either kind, and with
 * P2P_HUGE_MESSAGE=1 (testlist: two lines, since it moves 2 GiB) one
 * message of more than INT_MAX bytes goes each way between a large-count
 * call and an int-count call on a type that large.
 * Two ranks take part: 0 sends, 1 receives. A host below MPI 4.0 has none
 * of these calls: SKIP. */
#include "testutil.h"

#include <limits.h>
#include <sys/mman.h>

#if MPI_VERSION >= 4

#define N 4

static int rank;

static void fill(int *b, int v)
{
    for (int i = 0; i < N; i++)
        b[i] = v * 100 + i;
}

static void expect(const int *b, int v, const MPI_Status *st, int tag, const char *what)
{
    MPI_Count c = -1;
    CHECK_MPI(MPI_Get_count_c(st, MPI_INT, &c));
    CHECK(c == N, "%s: count %lld, expected %d", what, (long long)c, N);
    CHECK(st->MPI_SOURCE == 0 && st->MPI_TAG == tag, "%s: source %d tag %d", what, st->MPI_SOURCE, st->MPI_TAG);
    for (int i = 0; i < N; i++)
        CHECK(b[i] == v * 100 + i, "%s: element %d is %d, expected %d", what, i, b[i], v * 100 + i);
}

/* Case k: the sender's call and the receiver's call, by number. */
static void one_case(int k, MPI_Comm comm)
{
    int b[N], b2[N];
    int tag = 1 + k;
    MPI_Request q;
    MPI_Status st;
    test_step = "case";
    if (rank == 0) {
        fill(b, k);
        switch (k) {
        case 0: CHECK_MPI(MPI_Send_c(b, N, MPI_INT, 1, tag, comm)); break;
        case 1: CHECK_MPI(MPI_Send(b, N, MPI_INT, 1, tag, comm)); break;
        case 2:
            CHECK_MPI(MPI_Isend_c(b, N, MPI_INT, 1, tag, comm, &q));
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            break;
        case 3: CHECK_MPI(MPI_Ssend_c(b, N, MPI_INT, 1, tag, comm)); break;
        case 4:
            CHECK_MPI(MPI_Send_init_c(b, N, MPI_INT, 1, tag, comm, &q));
            CHECK_MPI(MPI_Start(&q));
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            CHECK_MPI(MPI_Request_free(&q));
            break;
        case 5: /* two messages, large-count first: order kept */
            CHECK_MPI(MPI_Send_c(b, N, MPI_INT, 1, tag, comm));
            fill(b2, k + 50);
            CHECK_MPI(MPI_Send(b2, N, MPI_INT, 1, tag, comm));
            break;
        case 6: /* and int-count first */
            CHECK_MPI(MPI_Isend(b, N, MPI_INT, 1, tag, comm, &q));
            fill(b2, k + 50);
            CHECK_MPI(MPI_Send_c(b2, N, MPI_INT, 1, tag, comm));
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            break;
        case 7:
            CHECK_MPI(MPI_Sendrecv_c(b, N, MPI_INT, 1, tag, NULL, 0, MPI_INT, MPI_PROC_NULL, 0, comm,
                                     MPI_STATUS_IGNORE));
            break;
        default: CHECK_MPI(MPI_Send(b, N, MPI_INT, 1, tag, comm)); break;
        }
        return;
    }
    memset(b, 0, sizeof b);
    switch (k) {
    case 0: CHECK_MPI(MPI_Recv(b, N, MPI_INT, 0, tag, comm, &st)); break;
    case 1: CHECK_MPI(MPI_Recv_c(b, N, MPI_INT, 0, tag, comm, &st)); break;
    case 2: CHECK_MPI(MPI_Recv(b, N, MPI_INT, 0, tag, comm, &st)); break;
    case 3:
        CHECK_MPI(MPI_Irecv_c(b, N, MPI_INT, 0, tag, comm, &q));
        CHECK_MPI(MPI_Wait(&q, &st));
        break;
    case 4:
        CHECK_MPI(MPI_Recv_init_c(b, N, MPI_INT, 0, tag, comm, &q));
        CHECK_MPI(MPI_Start(&q));
        CHECK_MPI(MPI_Wait(&q, &st));
        CHECK_MPI(MPI_Request_free(&q));
        break;
    case 5:
    case 6:
        CHECK_MPI(MPI_Recv_c(b, N, MPI_INT, 0, tag, comm, &st));
        expect(b, k, &st, tag, "first of two");
        CHECK_MPI(MPI_Recv(b, N, MPI_INT, 0, tag, comm, &st));
        k += 50;
        break;
    case 7:
        CHECK_MPI(MPI_Sendrecv_c(NULL, 0, MPI_INT, MPI_PROC_NULL, 0, b, N, MPI_INT, 0, tag, comm, &st));
        break;
    default: {
        MPI_Message m;
        CHECK_MPI(MPI_Mprobe(0, tag, comm, &m, &st));
        CHECK_MPI(MPI_Mrecv_c(b, N, MPI_INT, &m, &st));
        break;
    }
    }
    expect(b, k, &st, tag, "received");
}

/* Bytes of the large receives: more than an int counts. */
#define BIG ((MPI_Count)INT_MAX + 16)

/* Room for BIG bytes that costs nothing until touched. */
static char *reserve(void)
{
    void *p = mmap(NULL, (size_t)BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED, "mmap of %lld bytes failed", (long long)BIG);
    return p;
}

/* Case k of the small messages into receives of BIG bytes. */
static void big_receive_case(int k, MPI_Comm comm, char *big)
{
    int b[N];
    int tag = 100 + k;
    MPI_Request q;
    MPI_Status st;
    test_step = "large receive";
    if (rank == 0) {
        fill(b, k);
        switch (k) {
        case 0: CHECK_MPI(MPI_Send(b, N, MPI_INT, 1, tag, comm)); break;
        case 1:
            CHECK_MPI(MPI_Isend_c(b, N, MPI_INT, 1, tag, comm, &q));
            CHECK_MPI(MPI_Wait(&q, MPI_STATUS_IGNORE));
            break;
        default: CHECK_MPI(MPI_Ssend(b, N, MPI_INT, 1, tag, comm)); break;
        }
        return;
    }
    switch (k) {
    case 0: CHECK_MPI(MPI_Recv_c(big, BIG, MPI_BYTE, 0, tag, comm, &st)); break;
    case 1:
        CHECK_MPI(MPI_Recv_init_c(big, BIG, MPI_BYTE, 0, tag, comm, &q));
        CHECK_MPI(MPI_Start(&q));
        CHECK_MPI(MPI_Wait(&q, &st));
        CHECK_MPI(MPI_Request_free(&q));
        break;
    default: {
        MPI_Message m;
        CHECK_MPI(MPI_Mprobe(0, tag, comm, &m, &st));
        CHECK_MPI(MPI_Mrecv_c(big, BIG, MPI_BYTE, &m, &st));
        break;
    }
    }
    memcpy(b, big, sizeof b);
    expect(b, k, &st, tag, "large receive");
}

/* One message of BIG bytes from rank 0 to 1, then back: sent by a
 * large-count call and received by an int-count call on a type of BIG
 * bytes, and the other way round. The ends and a middle byte are marked. */
static void huge_case(int way, MPI_Comm comm, char *big)
{
    static const MPI_Count at[3] = { 0, BIG / 2 + 3, BIG - 1 };
    int tag = 200 + way, from = way, to = 1 - way;
    MPI_Datatype t;
    MPI_Status st;
    test_step = "huge message";
    CHECK_MPI(MPI_Type_contiguous_c(BIG, MPI_BYTE, &t));
    CHECK_MPI(MPI_Type_commit(&t));
    if (rank == from) {
        for (int i = 0; i < 3; i++)
            big[at[i]] = (char)(way * 10 + i + 1);
        if (way == 0)
            CHECK_MPI(MPI_Send_c(big, BIG, MPI_BYTE, to, tag, comm));
        else
            CHECK_MPI(MPI_Send(big, 1, t, to, tag, comm));
    } else {
        for (int i = 0; i < 3; i++)
            big[at[i]] = 0;
        if (way == 0)
            CHECK_MPI(MPI_Recv(big, 1, t, from, tag, comm, &st));
        else
            CHECK_MPI(MPI_Recv_c(big, BIG, MPI_BYTE, from, tag, comm, &st));
        MPI_Count c = -1;
        CHECK_MPI(MPI_Get_count_c(&st, MPI_BYTE, &c));
        CHECK(c == BIG, "huge message %d: count %lld, expected %lld", way, (long long)c, (long long)BIG);
        CHECK(st.MPI_SOURCE == from && st.MPI_TAG == tag, "huge message %d: source %d tag %d", way, st.MPI_SOURCE,
              st.MPI_TAG);
        for (int i = 0; i < 3; i++)
            CHECK(big[at[i]] == (char)(way * 10 + i + 1), "huge message %d: byte %lld is %d", way,
                  (long long)at[i], big[at[i]]);
    }
    CHECK_MPI(MPI_Type_free(&t));
}

int main(int argc, char **argv)
{
    int size;
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    const char *h = getenv("P2P_HUGE_MESSAGE");
    int huge = h && strcmp(h, "1") == 0;
    /* 2 GiB each way takes about a minute raw (MPICH, 2-core VM) and longer
     * under ThreadSanitizer, which checks every byte copied; the ranks that
     * only wait for it (np > 2) wait as long. */
    test_watchdog("p2p_large_count", huge ? 300 : 60);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    MPI_Comm comm;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    if (size >= 2 && rank < 2)
        for (int k = 0; k < 9; k++)
            one_case(k, comm);
    if (size >= 2 && rank < 2) {
        char *big = reserve();
        for (int k = 0; k < 3; k++)
            big_receive_case(k, comm, big);
        if (huge)
            for (int way = 0; way < 2; way++)
                huge_case(way, comm, big);
        munmap(big, (size_t)BIG);
    }
    CHECK_MPI(MPI_Comm_free(&comm));
    test_finish("p2p_large_count");
    return 0;
}

#else

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("SKIP p2p_large_count: the host implements MPI %d.%d, without large-count calls\n", MPI_VERSION,
               MPI_SUBVERSION);
    MPI_Finalize();
    return 0;
}

#endif
