/* Blocking collectives whose messages carry zero bytes, written two ways:
 * count 1 of a zero-size datatype (MPI_Type_contiguous(0, ...)) on one side
 * and count 0 of MPI_INT on the other. Both are the empty type signature, so
 * they match (MPI 4.0 sec. 6.1.1: signatures of sender and receiver must be
 * equal). Each case also runs the form MPICH's test coll/alltoallw_zeros
 * uses (MPI_IN_PLACE, one parity of ranks with each way).
 *
 * Why: the shim runs a blocking collective as its nonblocking twin plus a
 * wait, so that no thread blocks in the host. Open MPI 4.1's MPI_Ialltoallv posts a receive
 * for every nonzero count, so "1 of a zero-size type" on the receive side
 * against "0 of MPI_INT" on the send side waits for a message nobody sends:
 * raw MPI_Alltoallv returns, MPI_Ialltoallv never completes. Under the shim
 * MPI_Alltoallv must still return.
 *
 * Only forms both hosts' blocking calls complete are used: raw Open MPI 4.1.4
 * hangs in blocking Gatherv/Scatterv/Allgatherv/Bcast and raw MPICH 4.0.2 in
 * Gather(v)/Scatter(v) when the root's side is the zero-size type, so those
 * directions are left out (the shim does not have to mend the host's hangs).
 *
 * Every receive buffer starts filled with a sentinel: zero bytes received
 * must leave it untouched. An MPI_Allreduce with data after each case shows
 * the communicator still works. */
#include "testutil.h"

#define SENTINEL 0x5a5a5a5a
#define MAXP 64

static int rank, size;
static MPI_Datatype zt; /* zero-size type */
static int ones[MAXP], zeros[MAXP], displs[MAXP];
static MPI_Aint adispls[MAXP];
static MPI_Datatype zts[MAXP], ints[MAXP];
static int rbuf[MAXP];

static void fill(void)
{
    for (int i = 0; i < MAXP; i++)
        rbuf[i] = SENTINEL;
}

static void after(const char *what)
{
    for (int i = 0; i < MAXP; i++)
        CHECK(rbuf[i] == SENTINEL, "%s: receive buffer element %d changed to %#x by a zero-byte message",
              what, i, (unsigned)rbuf[i]);
    int in = rank + 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&in, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    CHECK(sum == size * (size + 1) / 2, "%s: the Allreduce after it gave %d, expected %d", what, sum,
          size * (size + 1) / 2);
}

/* flip = 0: senders use (1, zt), receivers (0, MPI_INT); flip = 1: reverse. */
static void run_cases(int flip, MPI_Comm cart)
{
    int sbuf[MAXP] = { 0 };
    const int *sc = flip ? zeros : ones, *rc = flip ? ones : zeros;
    int sc1 = flip ? 0 : 1, rc1 = flip ? 1 : 0;
    MPI_Datatype st = flip ? MPI_INT : zt, rt = flip ? zt : MPI_INT;
    const MPI_Datatype *sts = flip ? ints : zts, *rts = flip ? zts : ints;
    char what[96];
#define STEP(name)                                                             \
    do {                                                                       \
        snprintf(what, sizeof what, "%s, flip %d", name, flip);                \
        test_step = name;                                                      \
        fill();                                                                \
    } while (0)

    STEP("MPI_Alltoallv");
    CHECK_MPI(MPI_Alltoallv(sbuf, sc, displs, st, rbuf, rc, displs, rt, MPI_COMM_WORLD));
    after(what);
    STEP("MPI_Alltoallw");
    CHECK_MPI(MPI_Alltoallw(sbuf, sc, displs, sts, rbuf, rc, displs, rts, MPI_COMM_WORLD));
    after(what);
    STEP("MPI_Alltoall");
    CHECK_MPI(MPI_Alltoall(sbuf, sc1, st, rbuf, rc1, rt, MPI_COMM_WORLD));
    after(what);
    STEP("MPI_Allgather");
    CHECK_MPI(MPI_Allgather(sbuf, sc1, st, rbuf, rc1, rt, MPI_COMM_WORLD));
    after(what);
    STEP("MPI_Neighbor_alltoallv");
    CHECK_MPI(MPI_Neighbor_alltoallv(sbuf, sc, displs, st, rbuf, rc, displs, rt, cart));
    after(what);
    STEP("MPI_Neighbor_alltoallw");
    CHECK_MPI(MPI_Neighbor_alltoallw(sbuf, sc, adispls, sts, rbuf, rc, adispls, rts, cart));
    after(what);
    STEP("MPI_Neighbor_alltoall");
    CHECK_MPI(MPI_Neighbor_alltoall(sbuf, sc1, st, rbuf, rc1, rt, cart));
    after(what);
    if (!flip) { /* the root's side zero-size hangs some raw hosts (above) */
        STEP("MPI_Gatherv");
        CHECK_MPI(MPI_Gatherv(sbuf, sc1, st, rbuf, rc, displs, rt, size - 1, MPI_COMM_WORLD));
        after(what);
        STEP("MPI_Scatterv");
        CHECK_MPI(MPI_Scatterv(sbuf, sc, displs, st, rbuf, rc1, rt, 0, MPI_COMM_WORLD));
        after(what);
        STEP("MPI_Allgatherv");
        CHECK_MPI(MPI_Allgatherv(sbuf, sc1, st, rbuf, rc, displs, rt, MPI_COMM_WORLD));
        after(what);
        STEP("MPI_Bcast");
        CHECK_MPI(MPI_Bcast(rbuf, rank == 0 ? 1 : 0, rank == 0 ? zt : MPI_INT, 0, MPI_COMM_WORLD));
        after(what);
    }

    /* MPICH's coll/alltoallw_zeros: in place, odd ranks one way, even ranks
     * the other. */
    const int *mine = rank % 2 ? rc : sc;
    STEP("MPI_Alltoallv in place");
    CHECK_MPI(MPI_Alltoallv(MPI_IN_PLACE, NULL, NULL, MPI_DATATYPE_NULL, rbuf, mine, displs,
                            rank % 2 ? rt : st, MPI_COMM_WORLD));
    after(what);
    STEP("MPI_Alltoallw in place");
    CHECK_MPI(MPI_Alltoallw(MPI_IN_PLACE, NULL, NULL, NULL, rbuf, mine, displs, rank % 2 ? rts : sts,
                            MPI_COMM_WORLD));
    after(what);
#undef STEP
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("coll_zero_bytes", 60);
    CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    CHECK_MPI(MPI_Comm_size(MPI_COMM_WORLD, &size));
    CHECK(size <= MAXP, "at most %d ranks", MAXP);
    CHECK_MPI(MPI_Type_contiguous(0, MPI_INT, &zt));
    CHECK_MPI(MPI_Type_commit(&zt));
    for (int i = 0; i < MAXP; i++) {
        ones[i] = 1;
        zeros[i] = 0;
        displs[i] = 0;
        adispls[i] = 0;
        zts[i] = zt;
        ints[i] = MPI_INT;
    }
    MPI_Comm cart;
    int dims[1] = { size }, periods[1] = { 1 };
    CHECK_MPI(MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart));

    for (int flip = 0; flip < 2; flip++)
        run_cases(flip, cart);

    test_step = "finish";
    CHECK_MPI(MPI_Comm_free(&cart));
    CHECK_MPI(MPI_Type_free(&zt));
    test_watchdog("coll_zero_bytes", 0);
    test_finish("coll_zero_bytes");
    return 0;
}
