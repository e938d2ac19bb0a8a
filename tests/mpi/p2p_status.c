/* Status objects and the completion family through the shim.
 * A shim that copies/translates requests or statuses must keep source, tag
 * and count right, honour MPI_STATUS(ES)_IGNORE, and handle MPI_REQUEST_NULL
 * entries in request arrays (they must yield "empty" statuses and never be
 * reported as completed indices). Ring topology: send right, receive left. */
#include "testutil.h"

static int rank, size, left, right;

/* A status filled with junk, so that "not written" is detectable. */
static void junk(MPI_Status *st)
{
    memset(st, 0x5a, sizeof *st);
}

static void check_recv_status(const MPI_Status *st, int src, int tag, int count, const char *what)
{
    int c = -1;
    CHECK(st->MPI_SOURCE == src, "%s: status source %d, expected %d", what, st->MPI_SOURCE, src);
    CHECK(st->MPI_TAG == tag, "%s: status tag %d, expected %d", what, st->MPI_TAG, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &c));
    CHECK(c == count, "%s: count %d, expected %d", what, c, count);
}

/* The "empty status" of MPI 3.1 sec. 3.7.3: ANY_SOURCE, ANY_TAG, count 0. */
static void check_empty_status(const MPI_Status *st, const char *what)
{
    int c = -1;
    CHECK(st->MPI_SOURCE == MPI_ANY_SOURCE, "%s: empty status source %d", what, st->MPI_SOURCE);
    CHECK(st->MPI_TAG == MPI_ANY_TAG, "%s: empty status tag %d", what, st->MPI_TAG);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &c));
    CHECK(c == 0, "%s: empty status count %d", what, c);
}

/* Get_count / Get_elements when fewer elements arrive than the buffer holds. */
static void short_messages(void)
{
    int sbuf[7], rbuf[100], e = -1;
    MPI_Status st;
    for (int i = 0; i < 7; i++)
        sbuf[i] = rank * 100 + i;
    for (int i = 0; i < 100; i++)
        rbuf[i] = -1;
    junk(&st);
    CHECK_MPI(MPI_Sendrecv(sbuf, 7, MPI_INT, right, 11, rbuf, 100, MPI_INT, left, 11,
                           MPI_COMM_WORLD, &st));
    check_recv_status(&st, left, 11, 7, "short recv");
    CHECK_MPI(MPI_Get_elements(&st, MPI_INT, &e));
    CHECK(e == 7, "Get_elements %d, expected 7", e);
    for (int i = 0; i < 7; i++)
        CHECK(rbuf[i] == left * 100 + i, "short recv word %d = %d", i, rbuf[i]);
    for (int i = 7; i < 100; i++)
        CHECK(rbuf[i] == -1, "short recv wrote past the message at %d", i);

    /* same with MPI_STATUS_IGNORE on both sides of the API */
    CHECK_MPI(MPI_Sendrecv(sbuf, 3, MPI_INT, right, 12, rbuf, 100, MPI_INT, left, 12,
                           MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    CHECK(rbuf[2] == left * 100 + 2, "STATUS_IGNORE recv payload %d", rbuf[2]);
    MPI_Request rq;
    CHECK_MPI(MPI_Irecv(rbuf, 100, MPI_INT, left, 13, MPI_COMM_WORLD, &rq));
    CHECK_MPI(MPI_Send(sbuf, 5, MPI_INT, right, 13, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK(rq == MPI_REQUEST_NULL, "Wait(STATUS_IGNORE) did not free the request");
    CHECK(rbuf[4] == left * 100 + 4, "Wait(STATUS_IGNORE) payload %d", rbuf[4]);
}

/* Sendrecv and Sendrecv_replace around the ring. */
static void ring(void)
{
    int v[4], r[4];
    MPI_Status st;
    for (int i = 0; i < 4; i++)
        v[i] = rank * 10 + i;

    junk(&st);
    CHECK_MPI(MPI_Sendrecv(v, 4, MPI_INT, right, 21, r, 4, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG,
                           MPI_COMM_WORLD, &st));
    check_recv_status(&st, left, 21, 4, "Sendrecv");
    for (int i = 0; i < 4; i++)
        CHECK(r[i] == left * 10 + i, "Sendrecv word %d = %d", i, r[i]);

    /* Replace: after size-1 hops each rank holds the data of rank+1. */
    for (int hop = 1; hop < size; hop++) {
        junk(&st);
        CHECK_MPI(MPI_Sendrecv_replace(v, 4, MPI_INT, right, 30 + hop, left, 30 + hop,
                                       MPI_COMM_WORLD, &st));
        check_recv_status(&st, left, 30 + hop, 4, "Sendrecv_replace");
        int origin = (rank - hop + size) % size;
        for (int i = 0; i < 4; i++)
            CHECK(v[i] == origin * 10 + i, "Sendrecv_replace hop %d word %d = %d", hop, i, v[i]);
    }
}

/* Null requests alone: Wait/Test/Waitany/Testany/Waitsome/Testsome/Waitall. */
static void all_null(void)
{
    MPI_Request r[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    MPI_Status st, sts[3];
    int idx = 12345, flag = 0, outc = 12345, ind[3];

    junk(&st);
    CHECK_MPI(MPI_Wait(&r[0], &st));
    check_empty_status(&st, "Wait(REQUEST_NULL)");
    junk(&st);
    CHECK_MPI(MPI_Test(&r[0], &flag, &st));
    CHECK(flag, "Test(REQUEST_NULL) flag false");
    check_empty_status(&st, "Test(REQUEST_NULL)");

    junk(&st);
    CHECK_MPI(MPI_Waitany(3, r, &idx, &st));
    CHECK(idx == MPI_UNDEFINED, "Waitany(all null) index %d, expected MPI_UNDEFINED", idx);
    check_empty_status(&st, "Waitany(all null)");

    idx = 12345;
    flag = 0;
    junk(&st);
    CHECK_MPI(MPI_Testany(3, r, &idx, &flag, &st));
    CHECK(flag, "Testany(all null) flag false");
    CHECK(idx == MPI_UNDEFINED, "Testany(all null) index %d, expected MPI_UNDEFINED", idx);
    check_empty_status(&st, "Testany(all null)");

    CHECK_MPI(MPI_Waitsome(3, r, &outc, ind, sts));
    CHECK(outc == MPI_UNDEFINED, "Waitsome(all null) outcount %d", outc);
    outc = 12345;
    CHECK_MPI(MPI_Testsome(3, r, &outc, ind, sts));
    CHECK(outc == MPI_UNDEFINED, "Testsome(all null) outcount %d", outc);

    for (int i = 0; i < 3; i++)
        junk(&sts[i]);
    CHECK_MPI(MPI_Waitall(3, r, sts));
    for (int i = 0; i < 3; i++)
        check_empty_status(&sts[i], "Waitall(all null)");
    flag = 0;
    CHECK_MPI(MPI_Testall(3, r, &flag, sts));
    CHECK(flag, "Testall(all null) flag false");

    CHECK_MPI(MPI_Waitall(0, r, MPI_STATUSES_IGNORE)); /* count 0 is legal */
}

/* Mixed arrays: NULL, recv, NULL, send, recv, NULL, send.  Index 1/4 are
 * receives (tags base, base+1), 3/6 the matching sends. */
#define NR 7
static int rbuf[2][3], sbuf[2][3];

static void post_mixed(MPI_Request *r, int base)
{
    for (int i = 0; i < NR; i++)
        r[i] = MPI_REQUEST_NULL;
    for (int k = 0; k < 2; k++) {
        rbuf[k][0] = rbuf[k][1] = rbuf[k][2] = -1;
        sbuf[k][0] = rank;
        sbuf[k][1] = base + k;
        sbuf[k][2] = 77;
    }
    CHECK_MPI(MPI_Irecv(rbuf[0], 3, MPI_INT, left, base, MPI_COMM_WORLD, &r[1]));
    CHECK_MPI(MPI_Irecv(rbuf[1], 3, MPI_INT, left, base + 1, MPI_COMM_WORLD, &r[4]));
    CHECK_MPI(MPI_Isend(sbuf[1], 2, MPI_INT, right, base + 1, MPI_COMM_WORLD, &r[6]));
    CHECK_MPI(MPI_Isend(sbuf[0], 3, MPI_INT, right, base, MPI_COMM_WORLD, &r[3]));
}

/* Record completion of index i; receives get their status checked. */
static void completed(int i, const MPI_Status *st, int *done, int base, const char *what)
{
    CHECK(i == 1 || i == 3 || i == 4 || i == 6, "%s: completed index %d is a null slot", what, i);
    CHECK(!done[i], "%s: index %d reported complete twice", what, i);
    done[i] = 1;
    if (st && (i == 1 || i == 4)) {
        int k = (i == 1) ? 0 : 1;
        check_recv_status(st, left, base + k, k ? 2 : 3, what);
    }
}

static void check_mixed_data(int base, const char *what)
{
    CHECK(rbuf[0][0] == left && rbuf[0][1] == base && rbuf[0][2] == 77, "%s: recv 0 payload", what);
    CHECK(rbuf[1][0] == left && rbuf[1][1] == base + 1 && rbuf[1][2] == -1,
          "%s: recv 1 payload", what);
}

static void mixed_arrays(void)
{
    MPI_Request r[NR];
    MPI_Status st, sts[NR];
    int done[NR], idx, flag, outc, ind[NR], base;

    /* Waitany until MPI_UNDEFINED */
    base = 100;
    post_mixed(r, base);
    memset(done, 0, sizeof done);
    for (int n = 0;; n++) {
        junk(&st);
        CHECK_MPI(MPI_Waitany(NR, r, &idx, &st));
        if (idx == MPI_UNDEFINED)
            break;
        CHECK(n < 4, "Waitany returned more than 4 completions");
        CHECK(r[idx] == MPI_REQUEST_NULL, "Waitany did not free request %d", idx);
        completed(idx, &st, done, base, "Waitany");
    }
    CHECK(done[1] && done[3] && done[4] && done[6], "Waitany missed a request");
    check_mixed_data(base, "Waitany");

    /* Testany until (flag && MPI_UNDEFINED) */
    base = 200;
    post_mixed(r, base);
    memset(done, 0, sizeof done);
    for (;;) {
        junk(&st);
        flag = 0;
        CHECK_MPI(MPI_Testany(NR, r, &idx, &flag, &st));
        if (flag && idx == MPI_UNDEFINED)
            break;
        if (flag)
            completed(idx, &st, done, base, "Testany");
        else
            CHECK(idx == MPI_UNDEFINED, "Testany flag false but index %d", idx);
    }
    CHECK(done[1] && done[3] && done[4] && done[6], "Testany missed a request");
    check_mixed_data(base, "Testany");

    /* Waitsome until MPI_UNDEFINED */
    base = 300;
    post_mixed(r, base);
    memset(done, 0, sizeof done);
    for (;;) {
        CHECK_MPI(MPI_Waitsome(NR, r, &outc, ind, sts));
        if (outc == MPI_UNDEFINED)
            break;
        CHECK(outc >= 1 && outc <= 4, "Waitsome outcount %d", outc);
        for (int j = 0; j < outc; j++)
            completed(ind[j], &sts[j], done, base, "Waitsome");
    }
    CHECK(done[1] && done[3] && done[4] && done[6], "Waitsome missed a request");
    check_mixed_data(base, "Waitsome");

    /* Testsome (with MPI_STATUSES_IGNORE) until MPI_UNDEFINED */
    base = 400;
    post_mixed(r, base);
    memset(done, 0, sizeof done);
    for (;;) {
        CHECK_MPI(MPI_Testsome(NR, r, &outc, ind, MPI_STATUSES_IGNORE));
        if (outc == MPI_UNDEFINED)
            break;
        CHECK(outc >= 0 && outc <= 4, "Testsome outcount %d", outc);
        for (int j = 0; j < outc; j++)
            completed(ind[j], NULL, done, base, "Testsome");
    }
    CHECK(done[1] && done[3] && done[4] && done[6], "Testsome missed a request");
    check_mixed_data(base, "Testsome");

    /* Testall until flag; null slots get empty statuses */
    base = 500;
    post_mixed(r, base);
    for (flag = 0; !flag;) {
        for (int i = 0; i < NR; i++)
            junk(&sts[i]);
        CHECK_MPI(MPI_Testall(NR, r, &flag, sts));
    }
    for (int i = 0; i < NR; i++)
        CHECK(r[i] == MPI_REQUEST_NULL, "Testall left request %d active", i);
    check_recv_status(&sts[1], left, base, 3, "Testall[1]");
    check_recv_status(&sts[4], left, base + 1, 2, "Testall[4]");
    check_empty_status(&sts[0], "Testall[0] (null)");
    check_empty_status(&sts[5], "Testall[5] (null)");
    check_mixed_data(base, "Testall");

    /* Waitall with statuses, then with MPI_STATUSES_IGNORE */
    base = 600;
    post_mixed(r, base);
    for (int i = 0; i < NR; i++)
        junk(&sts[i]);
    CHECK_MPI(MPI_Waitall(NR, r, sts));
    check_recv_status(&sts[1], left, base, 3, "Waitall[1]");
    check_recv_status(&sts[4], left, base + 1, 2, "Waitall[4]");
    check_empty_status(&sts[2], "Waitall[2] (null)");
    check_mixed_data(base, "Waitall");

    base = 700;
    post_mixed(r, base);
    CHECK_MPI(MPI_Waitall(NR, r, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NR; i++)
        CHECK(r[i] == MPI_REQUEST_NULL, "Waitall(IGNORE) left request %d active", i);
    check_mixed_data(base, "Waitall(STATUSES_IGNORE)");

    /* Single Wait / Test on a real receive */
    base = 800;
    post_mixed(r, base);
    junk(&st);
    CHECK_MPI(MPI_Wait(&r[1], &st));
    check_recv_status(&st, left, base, 3, "Wait");
    for (flag = 0; !flag;) {
        junk(&st);
        CHECK_MPI(MPI_Test(&r[4], &flag, &st));
    }
    CHECK(r[4] == MPI_REQUEST_NULL, "Test did not free a completed request");
    check_recv_status(&st, left, base + 1, 2, "Test");
    CHECK_MPI(MPI_Waitall(NR, r, MPI_STATUSES_IGNORE));
    check_mixed_data(base, "Wait/Test");
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;

    short_messages();
    ring();
    all_null();
    mixed_arrays();

    test_finish("p2p_status");
    return 0;
}
