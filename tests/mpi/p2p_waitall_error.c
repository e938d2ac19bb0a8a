/* MPI_Waitall when a request in the array has already failed at the call.
 *
 * Open MPI 4.1.4 at the multiple thread level never returns from
 * MPI_Waitall if one of its requests completed with an error before the call
 * (a truncated receive), whatever the other requests do (found 2026-11-24; its Wait,
 * Waitany, Waitsome and Testall return). The shim hands arrays of host
 * requests (the solo fast path) to the host and used the host's Waitall for
 * MPI_Sendrecv when the send and receive take different routes, so it hung
 * there too. Pairs: even ranks send, odd ranks receive; every case ends with
 * the data and statuses checked.
 *   1. Waitall { receive still pending, receive already truncated }.
 *   2. Waitall { receive complete, receive truncated }, both before the call.
 *   3. The same with MPI_STATUSES_IGNORE.
 *   4. MPI_Sendrecv whose receive is truncated by a message already there
 *      (both ranks of a pair; the runner adds a run with MPISHIM_MAP=tag,
 *      where sends and receives of different tags take different routes).
 * The runner raises the program to the multiple thread level; raw Open MPI
 * 4.1 would hang there, so on the host itself (the shim disabled or absent)
 * cases 1-3 are skipped with a KNOWN-DEVIATION line. MPICH 4.0's Waitall
 * passes; its MPI_Sendrecv emulated with Waitall left the send pending. */
#include "testutil.h"

#define SMALL 4
#define BIG 8

static int rank, size, partner, sender, provided;

/* Wait until the host or the shim has finished request q, without
 * completing it (MPI_Request_get_status leaves the handle alone). Once the
 * request is done, MPICH 4.0 returns its error from the call, Open MPI 4.1
 * MPI_SUCCESS; the shim must answer as its host does. */
static void until_done(MPI_Request q, int truncated)
{
    int flag = 0, rc;
    do
        rc = MPI_Request_get_status(q, &flag, MPI_STATUS_IGNORE);
    while (rc == MPI_SUCCESS && !flag);
    int cls = -1;
    MPI_Error_class(rc, &cls);
#if defined(MPICH)
    int want = truncated ? MPI_ERR_TRUNCATE : MPI_SUCCESS;
#else
    int want = MPI_SUCCESS;
    (void)truncated;
#endif
    CHECK(cls == want, "MPI_Request_get_status of a finished %s receive returned %d (class %d), expected class %d",
          truncated ? "truncated" : "plain", rc, cls, want);
}

static void check_truncated(const MPI_Status *st, int tag, const char *what)
{
    int cls = -1;
    MPI_Error_class(st->MPI_ERROR, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "%s: truncated receive's MPI_ERROR %d (class %d), expected class %d", what,
          st->MPI_ERROR, cls, MPI_ERR_TRUNCATE);
    CHECK(st->MPI_SOURCE == partner && st->MPI_TAG == tag, "%s: truncated receive's status source %d tag %d", what,
          st->MPI_SOURCE, st->MPI_TAG);
}

static void check_in_status(int rc, const char *what)
{
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_IN_STATUS, "%s returned %d (class %d), expected MPI_ERR_IN_STATUS", what, rc, cls);
}

/* Cases 1-3 on the receiving side. */
static void waitall_case(int which, int tag)
{
    int one = 0, small[SMALL];
    MPI_Request q[2];
    MPI_Status st[2];
    CHECK_MPI(MPI_Irecv(&one, 1, MPI_INT, partner, tag, MPI_COMM_WORLD, &q[0]));
    CHECK_MPI(MPI_Irecv(small, SMALL, MPI_INT, partner, tag + 1, MPI_COMM_WORLD, &q[1]));
    until_done(q[1], 1);
    if (which != 1)
        until_done(q[0], 0);
    int rc = MPI_Waitall(2, q, which == 3 ? MPI_STATUSES_IGNORE : st);
    check_in_status(rc, "MPI_Waitall");
    if (which != 3) {
        /* MPI 4.0 section 3.7.5: MPI_SUCCESS for the one that completed,
         * or MPI_ERR_PENDING if it had neither failed nor completed. */
        CHECK(st[0].MPI_ERROR == MPI_SUCCESS || (which == 1 && st[0].MPI_ERROR == MPI_ERR_PENDING),
              "case %d: the plain receive's MPI_ERROR is %d", which, st[0].MPI_ERROR);
        check_truncated(&st[1], tag + 1, which == 1 ? "case 1" : "case 2");
        if (st[0].MPI_ERROR == MPI_ERR_PENDING)
            CHECK_MPI(MPI_Wait(&q[0], &st[0]));
        CHECK(st[0].MPI_SOURCE == partner && st[0].MPI_TAG == tag, "case %d: plain receive's status %d/%d", which,
              st[0].MPI_SOURCE, st[0].MPI_TAG);
    }
    CHECK(q[0] == MPI_REQUEST_NULL, "case %d: the completed request is still set", which);
    CHECK(one == 1000 + which, "case %d: received %d, expected %d", which, one, 1000 + which);
}

int main(int argc, char **argv)
{
    provided = test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size % 2 == 0, "needs an even number of ranks, got %d", size);
    test_watchdog("p2p_waitall_error", 60);
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    partner = rank ^ 1;
    sender = rank % 2 == 0;
    int big[BIG];
    for (int i = 0; i < BIG; i++)
        big[i] = i;

    int skip = 0;
#if defined(OPEN_MPI) && OPEN_MPI && OMPI_MAJOR_VERSION < 5
    skip = test_host_native() && provided > MPI_THREAD_SERIALIZED &&
           test_known_deviation("MPI_Waitall over a request that failed before the call never returns at the "
                                "multiple thread level (cases 1-3 not run)",
                                "Open MPI 4.1.4");
#endif

    for (int which = 1; which <= 3 && !skip; which++) {
        static const char *const steps[] = {"", "case 1: truncated + pending", "case 2: truncated + complete",
                                            "case 3: statuses ignored"};
        test_step = steps[which];
        int tag = 100 * which, v = 1000 + which;
        if (sender) {
            CHECK_MPI(MPI_Send(big, BIG, MPI_INT, partner, tag + 1, MPI_COMM_WORLD));
            if (which != 1)
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, partner, tag, MPI_COMM_WORLD));
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            if (which == 1) {
                /* Late, so that the receiver is (most likely) in its Waitall
                 * with this receive pending; early, case 2 is run instead. */
                test_sleep_ms(30);
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, partner, tag, MPI_COMM_WORLD));
            }
        } else {
            CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
            waitall_case(which, tag);
        }
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* 4. Sendrecv; the message to truncate is there before the call. */
    test_step = "case 4: Sendrecv with a truncated receive";
    int small[SMALL], v = 4000 + rank, got = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Send(big, BIG, MPI_INT, partner, 400, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    st.MPI_ERROR = 0x5e17e1;
    int rc = MPI_Sendrecv(&v, 1, MPI_INT, partner, 401, small, SMALL, MPI_INT, partner, 400, MPI_COMM_WORLD, &st);
    int cls = -1;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_TRUNCATE, "MPI_Sendrecv with a truncated receive returned %d (class %d)", rc, cls);
    CHECK(st.MPI_SOURCE == partner && st.MPI_TAG == 400, "MPI_Sendrecv: status source %d tag %d", st.MPI_SOURCE,
          st.MPI_TAG);
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, partner, 401, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(got == 4000 + partner, "MPI_Sendrecv's send delivered %d, expected %d", got, 4000 + partner);

    test_watchdog("p2p_waitall_error", 0);
    test_finish("p2p_waitall_error");
    return 0;
}
