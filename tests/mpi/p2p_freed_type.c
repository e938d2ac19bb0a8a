/* Datatypes freed while operations that use them are pending or will
 * start again: MPI keeps a type alive for them, so a receive that unpacks
 * when it completes and persistent requests started after the free must
 * still see the type (the shim's lanes once read a freed type: a
 * segfault in MPICH's own persistent-request test). */
#include "testutil.h"

#define VCOUNT 5  /* blocks per vector */
#define VBLOCK 2  /* doubles per block */
#define VSTRIDE 4 /* doubles between block starts */
#define VEXT ((VCOUNT - 1) * VSTRIDE + VBLOCK) /* extent in doubles: 18 */
#define NVEC 3
#define SENTINEL -12345.5

static int rank, size, left, right;

static int in_vector(int i)
{
    int j = i % VEXT;
    return (j % VSTRIDE) < VBLOCK;
}

static double dval(int src, int i) { return src * 1000.0 + i + 0.25; }

/* A program may free a datatype while operations that use it are still
 * pending or will start again (MPI keeps the type alive for them): a
 * receive that unpacks when it completes, and persistent requests started
 * after the free, two rounds. */
static void freed_types(void)
{
    double sbuf[NVEC * VEXT], rbuf[NVEC * VEXT];
    MPI_Datatype vec;
    MPI_Request rq[2];

    CHECK_MPI(MPI_Type_vector(VCOUNT, VBLOCK, VSTRIDE, MPI_DOUBLE, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    for (int i = 0; i < NVEC * VEXT; i++) {
        sbuf[i] = dval(rank, i);
        rbuf[i] = SENTINEL;
    }
    CHECK_MPI(MPI_Irecv(rbuf, NVEC, vec, left, 30, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK_MPI(MPI_Type_vector(VCOUNT, VBLOCK, VSTRIDE, MPI_DOUBLE, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    CHECK_MPI(MPI_Send(sbuf, NVEC, vec, right, 30, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&rq[0], MPI_STATUS_IGNORE));
    for (int i = 0; i < NVEC * VEXT; i++)
        CHECK(rbuf[i] == (in_vector(i) ? dval(left, i) : SENTINEL), "freed type, Irecv: rbuf[%d] = %g", i,
              rbuf[i]);

    CHECK_MPI(MPI_Send_init(sbuf, NVEC, vec, right, 31, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Recv_init(rbuf, NVEC, vec, left, 31, MPI_COMM_WORLD, &rq[1]));
    CHECK_MPI(MPI_Type_free(&vec));
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < NVEC * VEXT; i++) {
            sbuf[i] = dval(rank, i) + 100000.0 * round;
            rbuf[i] = SENTINEL;
        }
        CHECK_MPI(MPI_Startall(2, rq));
        CHECK_MPI(MPI_Waitall(2, rq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < NVEC * VEXT; i++)
            CHECK(rbuf[i] == (in_vector(i) ? dval(left, i) + 100000.0 * round : SENTINEL),
                  "freed type, persistent round %d: rbuf[%d] = %g", round, i, rbuf[i]);
    }
    CHECK_MPI(MPI_Request_free(&rq[0]));
    CHECK_MPI(MPI_Request_free(&rq[1]));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;
    freed_types();
    test_finish("p2p_freed_type");
    return 0;
}
