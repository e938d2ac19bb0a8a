/* A started partitioned receive must move while its process sits in a
 * blocking call that the shim leaves to the host.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out). Each round the
 * even rank starts a partitioned receive of one 4 MiB partition and then
 * makes a blocking call that waits for every rank; the odd rank sends,
 * waits for its send and only then makes the same call. A message that
 * large goes by the host's rendezvous, so the send completes only once the
 * receiver has posted its internal receive, which the shim's layer does
 * when the channel's header has arrived: during the blocking call, as MPI's
 * progress rule asks and as the raw host does with its own partitioned
 * layer. The calls: MPI_Barrier and MPI_Allreduce (with MPISHIM_COLL=host
 * these are the host's blocking collectives), MPI_Win_fence, MPI_Comm_split
 * and MPI_Comm_dup.
 *
 * With MPI_THREAD_MULTIPLE on every rank, one more round starts the
 * receive from a second thread while the main thread is already inside
 * MPI_Comm_split, and that thread makes no MPI call until the split
 * returns: the receive must move all the same.
 *
 * Below MPI_THREAD_MULTIPLE (on any rank) the shim's runtime is off; on a
 * host with partitioned calls of its own they are the host's then, as
 * without the shim, and the test must pass as it does raw. On a host
 * without them the shim's layer cannot move the receive during such a
 * call with the runtime off (a limit the design notes state), so the test
 * says SKIP there.
 *
 * Checked: the data of every round, and that every call returns. */
#include "testutil.h"
#include "mpishim.h"

#include <stdatomic.h>

#define N (1 << 20) /* ints: 4 MiB */
#define TAG 7

enum { CALL_BARRIER, CALL_ALLREDUCE, CALL_FENCE, CALL_SPLIT, CALL_DUP, NCALL };
static const char *const call_name[NCALL] = { "MPI_Barrier", "MPI_Allreduce", "MPI_Win_fence", "MPI_Comm_split",
                                              "MPI_Comm_dup" };

static int rank, size, peer, provided;
static int *buf;
static MPI_Win win;

static void blocking_call(int call)
{
    MPI_Comm c;
    int x = 1;
    switch (call) {
    case CALL_BARRIER:   CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); break;
    case CALL_ALLREDUCE:
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
        CHECK(x == size, "MPI_Allreduce: %d, expected %d", x, size);
        break;
    case CALL_FENCE:     CHECK_MPI(MPI_Win_fence(0, win)); break;
    case CALL_SPLIT:
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &c));
        CHECK_MPI(MPI_Comm_free(&c));
        break;
    default:
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        CHECK_MPI(MPI_Comm_free(&c));
        break;
    }
}

static void fill(int round)
{
    for (int i = 0; i < N; i++)
        buf[i] = i ^ (round << 24);
}

static void check(int round, const char *what)
{
    for (int i = 0; i < N; i++)
        CHECK(buf[i] == (i ^ (round << 24)), "%s round %d: element %d is %d, expected %d", what, round, i, buf[i],
              i ^ (round << 24));
}

static void send_round(int round)
{
    MPI_Request r;
    fill(round);
    CHECK_MPI(MPI_Psend_init(buf, 1, N, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_MPI(MPI_Start(&r));
    CHECK_MPI(MPI_Pready(0, r));
    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Request_free(&r));
}

static MPI_Request recv_start(void)
{
    MPI_Request r;
    memset(buf, 0xff, N * sizeof *buf);
    CHECK_MPI(MPI_Precv_init(buf, 1, N, MPI_INT, peer, TAG, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
    CHECK_MPI(MPI_Start(&r));
    return r;
}

static void recv_finish(MPI_Request *r, int round, const char *what)
{
    MPI_Status st;
    CHECK_MPI(MPI_Wait(r, &st));
    CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG, "%s round %d: status source %d tag %d", what, round,
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Request_free(r));
    check(round, what);
}

/* The threaded round: the receive starts while the main thread is inside
 * MPI_Comm_split. */
static atomic_int split_done;
static MPI_Request late_req;

static void *late_receiver(void *arg)
{
    (void)arg;
    usleep(100 * 1000); /* the main thread is in MPI_Comm_split by now */
    late_req = recv_start();
    while (!atomic_load(&split_done))
        usleep(1000);
    return NULL;
}

int main(int argc, char **argv)
{
    provided = test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_host_calls");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    /* The threaded round needs every rank (TEST_THREAD_LEVEL=mixed). */
    CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &provided, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD));
#if MPI_VERSION < 4
    if (mpishim_active() && !mpishim_runtime()) {
        if (rank == 0)
            printf("SKIP part_host_calls: the shim's partitioned layer with its runtime off (a rank below "
                   "MPI_THREAD_MULTIPLE) on a host without partitioned calls of its own\n");
        MPI_Finalize();
        return 0;
    }
#endif
    peer = rank ^ 1;
    int active = peer < size;
    buf = malloc(N * sizeof *buf);
    CHECK(buf != NULL, "malloc");
    int wbuf = 0;
    CHECK_MPI(MPI_Win_create(&wbuf, sizeof wbuf, 1, MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    CHECK_MPI(MPI_Win_fence(0, win));

    for (int call = 0; call < NCALL; call++) {
        MPI_Request r = MPI_REQUEST_NULL;
        if (active && rank % 2 == 0)
            r = recv_start();
        else if (active)
            send_round(call);
        blocking_call(call);
        if (active && rank % 2 == 0)
            recv_finish(&r, call, call_name[call]);
    }

    if (provided == MPI_THREAD_MULTIPLE) {
        int round = NCALL;
        pthread_t th;
        if (active && rank % 2 == 0)
            CHECK(pthread_create(&th, NULL, late_receiver, NULL) == 0, "pthread_create");
        else if (active) {
            usleep(200 * 1000); /* after the receiver's thread has started its receive */
            send_round(round);
        }
        blocking_call(CALL_SPLIT);
        if (active && rank % 2 == 0) {
            atomic_store(&split_done, 1);
            pthread_join(th, NULL);
            recv_finish(&late_req, round, "receive started during MPI_Comm_split");
        }
    }

    CHECK_MPI(MPI_Win_fence(0, win));
    CHECK_MPI(MPI_Win_free(&win));
    free(buf);
    test_finish("part_host_calls");
    return 0;
}
