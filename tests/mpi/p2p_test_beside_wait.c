/* A test of a finished operation returns true at once while another thread
 * of the process waits on the same communicator.
 *
 * The hosts answer MPI_Test and its kin from their own state, whatever
 * other threads do, so one test after the matching receive has returned
 * finds a send to the process itself complete. A shim whose waiting thread
 * owns the progress of the communicator's VCI (it polls there for everyone)
 * must not make that test return "not complete" and leave the report to the
 * waiter's next look, which with many requests pending looks at only some.
 *
 * Every rank on its own, to itself. A waiter thread blocks in MPI_Recv on
 * MPI_COMM_WORLD for a tag that only the main thread sends at the end;
 * BACKLOG receives on a tag nobody sends are pending too (older than the
 * rest, so a poll that looks at the oldest requests finds nothing). Then
 * the main thread, ROUNDS times for each size (8 B, 1 MiB) and each send
 * mode (MPI_Isend, MPI_Issend), posts the send, receives it with a blocking
 * MPI_Recv, checks the data and makes one call of each completion kind
 * (MPI_Test, MPI_Testall, MPI_Testany, MPI_Testsome,
 * MPI_Request_get_status; a new send each), which must report it complete.
 * Before those, ROUNDS times for each completion kind, a 4-byte MPI_Isend
 * is tested once right after its post, before any receive: both hosts
 * copy a short message to the process itself inside the call, so the
 * host's own test says complete there and the shim's must too (a test that
 * left it to the waiter said "not complete" every time, under the default
 * policy as well, where posts may wait in a queue for the waiter). The
 * run with the shim disabled checks that premise on each host.
 * At the end it wakes the waiter (its data checked) and cancels the backlog
 * (each must report cancelled). */
#include "testutil.h"

#include <stdatomic.h>
#include <stdlib.h>

#define ROUNDS 20
#define BACKLOG 16
#define BIG (1 << 20)
#define TAG 7
#define NEVER_TAG 99
#define WAKE_TAG 98
#define WAKE_VALUE 4242

enum { SEND, SSEND, NMODES };
static const char *mode_name[NMODES] = { "MPI_Isend", "MPI_Issend" };

static int rank;
static char *sbuf, *rbuf;
static atomic_int waiter_started;

static void *waiter(void *arg)
{
    int *got = arg;
    atomic_store_explicit(&waiter_started, 1, memory_order_release);
    MPI_Status st;
    CHECK_MPI(MPI_Recv(got, 1, MPI_INT, rank, WAKE_TAG, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_TAG == WAKE_TAG, "waiter: status tag %d", st.MPI_TAG);
    return NULL;
}

static void round_trip(int mode, int n, int kind, int round)
{
    MPI_Request s;
    for (int i = 0; i < n; i++)
        sbuf[i] = (char)(round * 31 + i + mode);
    memset(rbuf, 0, (size_t)n);
    if (mode == SEND)
        CHECK_MPI(MPI_Isend(sbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &s));
    else
        CHECK_MPI(MPI_Issend(sbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &s));
    MPI_Status st;
    CHECK_MPI(MPI_Recv(rbuf, n, MPI_BYTE, rank, TAG, MPI_COMM_WORLD, &st));
    CHECK(st.MPI_SOURCE == rank && st.MPI_TAG == TAG, "%s: status source %d tag %d", mode_name[mode],
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK(memcmp(sbuf, rbuf, (size_t)n) == 0, "%s of %d bytes: wrong data", mode_name[mode], n);
    CHECK(test_one_completion(kind, &s),
          "%s of %d bytes to self, after its MPI_Recv returned, while another thread waits on the "
          "communicator (round %d): %s says not complete",
          mode_name[mode], n, round, test_kind_name(kind));
}

static void eager_at_once(int kind, int round)
{
    MPI_Request s;
    int v = round * 131 + kind, got = -1;
    CHECK_MPI(MPI_Isend(&v, 1, MPI_INT, rank, TAG, MPI_COMM_WORLD, &s));
    CHECK(test_one_completion(kind, &s),
          "MPI_Isend of 4 bytes to self, tested once right after its post while another thread waits on the "
          "communicator (round %d): %s says not complete",
          round, test_kind_name(kind));
    MPI_Status st;
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, rank, TAG, MPI_COMM_WORLD, &st));
    CHECK(got == v, "eager round %d: received %d, not %d", round, got, v);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("p2p_test_beside_wait", 120);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    sbuf = malloc(BIG);
    rbuf = malloc(BIG);
    CHECK(sbuf && rbuf, "out of memory");

    int never[BACKLOG];
    MPI_Request pending[BACKLOG];
    for (int i = 0; i < BACKLOG; i++)
        CHECK_MPI(MPI_Irecv(&never[i], 1, MPI_INT, rank, NEVER_TAG, MPI_COMM_WORLD, &pending[i]));

    int got = 0;
    pthread_t th;
    CHECK(pthread_create(&th, NULL, waiter, &got) == 0, "pthread_create");
    while (!atomic_load_explicit(&waiter_started, memory_order_acquire))
        test_sleep_ms(1);
    test_sleep_ms(20); /* time for the waiter to be inside its MPI_Recv */

    for (int kind = 0; kind < TEST_NKINDS; kind++)
        for (int round = 0; round < ROUNDS; round++)
            eager_at_once(kind, round);
    for (int mode = 0; mode < NMODES; mode++)
        for (int big = 0; big <= 1; big++)
            for (int kind = 0; kind < TEST_NKINDS; kind++)
                for (int round = 0; round < ROUNDS; round++)
                    round_trip(mode, big ? BIG : 8, kind, round);

    int wake = WAKE_VALUE;
    CHECK_MPI(MPI_Send(&wake, 1, MPI_INT, rank, WAKE_TAG, MPI_COMM_WORLD));
    CHECK(pthread_join(th, NULL) == 0, "pthread_join");
    CHECK(got == WAKE_VALUE, "waiter received %d, not %d", got, WAKE_VALUE);

    test_cancel_all(BACKLOG, pending);
    free(sbuf);
    free(rbuf);
    test_finish("p2p_test_beside_wait");
    return 0;
}
