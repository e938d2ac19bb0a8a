/* Derived datatypes through the shim: a strided vector of doubles and a
 * resized struct {int, double, char[5]}.  Data lands only in the typemap
 * (gaps and padding keep their sentinel), and MPI_Get_count/MPI_Get_elements
 * report datatype vs. basic-element counts, including a partial last
 * element (count MPI_UNDEFINED), MPI_BOTTOM with absolute addresses, and
 * types freed while operations that use them are pending (the shim's lanes
 * once read a freed type: a segfault in MPICH's persistent-request test).
 * Ring topology: send right, receive left. */
#include "testutil.h"

#include <stddef.h>

#define VCOUNT 5  /* blocks per vector */
#define VBLOCK 2  /* doubles per block */
#define VSTRIDE 4 /* doubles between block starts */
#define VEXT ((VCOUNT - 1) * VSTRIDE + VBLOCK) /* extent in doubles: 18 */
#define NVEC 3
#define SENTINEL -12345.5

static int rank, size, left, right;

/* Is double index i (within NVEC back-to-back vectors) part of the typemap? */
static int in_vector(int i)
{
    int j = i % VEXT;
    return (j % VSTRIDE) < VBLOCK;
}

static double dval(int src, int i) { return src * 1000.0 + i + 0.25; }

static void vectors(void)
{
    MPI_Datatype vec;
    double sbuf[NVEC * VEXT], rbuf[NVEC * VEXT + 4];
    MPI_Status st;
    int cnt, el, sz;
    MPI_Aint lb, ext;

    CHECK_MPI(MPI_Type_vector(VCOUNT, VBLOCK, VSTRIDE, MPI_DOUBLE, &vec));
    CHECK_MPI(MPI_Type_commit(&vec));
    CHECK_MPI(MPI_Type_size(vec, &sz));
    CHECK_MPI(MPI_Type_get_extent(vec, &lb, &ext));
    CHECK(sz == VCOUNT * VBLOCK * (int)sizeof(double), "vector size %d", sz);
    CHECK(lb == 0 && ext == VEXT * (MPI_Aint)sizeof(double), "vector extent %ld",
          (long)ext);

    for (int i = 0; i < NVEC * VEXT; i++)
        sbuf[i] = dval(rank, i);

    /* (1) vector -> vector */
    for (int i = 0; i < NVEC * VEXT + 4; i++)
        rbuf[i] = SENTINEL;
    CHECK_MPI(MPI_Sendrecv(sbuf, NVEC, vec, right, 1, rbuf, NVEC, vec, left, 1, MPI_COMM_WORLD,
                           &st));
    CHECK_MPI(MPI_Get_count(&st, vec, &cnt));
    CHECK_MPI(MPI_Get_elements(&st, vec, &el));
    CHECK(cnt == NVEC, "vector->vector: Get_count %d, expected %d", cnt, NVEC);
    CHECK(el == NVEC * VCOUNT * VBLOCK, "vector->vector: Get_elements %d, expected %d", el,
          NVEC * VCOUNT * VBLOCK);
    for (int i = 0; i < NVEC * VEXT + 4; i++) {
        if (i < NVEC * VEXT && in_vector(i))
            CHECK(rbuf[i] == dval(left, i), "vector->vector: rbuf[%d] = %g, expected %g", i,
                  rbuf[i], dval(left, i));
        else
            CHECK(rbuf[i] == SENTINEL, "vector->vector: gap rbuf[%d] overwritten with %g", i,
                  rbuf[i]);
    }

    /* (2) vector -> contiguous doubles (packing order = typemap order) */
    {
        double c[NVEC * VCOUNT * VBLOCK + 3];
        for (int i = 0; i < NVEC * VCOUNT * VBLOCK + 3; i++)
            c[i] = SENTINEL;
        MPI_Request r;
        CHECK_MPI(MPI_Irecv(c, NVEC * VCOUNT * VBLOCK + 3, MPI_DOUBLE, left, 2, MPI_COMM_WORLD,
                            &r));
        CHECK_MPI(MPI_Send(sbuf, NVEC, vec, right, 2, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_MPI(MPI_Get_count(&st, MPI_DOUBLE, &cnt));
        CHECK(cnt == NVEC * VCOUNT * VBLOCK, "vector->double: Get_count %d", cnt);
        int k = 0;
        for (int i = 0; i < NVEC * VEXT; i++)
            if (in_vector(i)) {
                CHECK(c[k] == dval(left, i), "vector->double: c[%d] = %g, expected %g", k, c[k],
                      dval(left, i));
                k++;
            }
        for (; k < NVEC * VCOUNT * VBLOCK + 3; k++)
            CHECK(c[k] == SENTINEL, "vector->double: c[%d] written past the message", k);
    }

    /* (3) partial: 13 doubles into room for NVEC vectors -> count UNDEFINED,
     * elements 13, only the first 13 typemap slots written. */
    {
        const int n = 13;
        for (int i = 0; i < NVEC * VEXT + 4; i++)
            rbuf[i] = SENTINEL;
        CHECK_MPI(MPI_Sendrecv(sbuf, n, MPI_DOUBLE, right, 3, rbuf, NVEC, vec, left, 3,
                               MPI_COMM_WORLD, &st));
        CHECK_MPI(MPI_Get_count(&st, vec, &cnt));
        CHECK_MPI(MPI_Get_elements(&st, vec, &el));
        CHECK(cnt == MPI_UNDEFINED, "partial vector: Get_count %d, expected MPI_UNDEFINED", cnt);
        CHECK(el == n, "partial vector: Get_elements %d, expected %d", el, n);
        int k = 0;
        for (int i = 0; i < NVEC * VEXT + 4; i++) {
            if (i < NVEC * VEXT && in_vector(i) && k < n) {
                CHECK(rbuf[i] == dval(left, k), "partial vector: rbuf[%d] = %g, expected %g", i,
                      rbuf[i], dval(left, k));
                k++;
            } else {
                CHECK(rbuf[i] == SENTINEL, "partial vector: rbuf[%d] overwritten", i);
            }
        }
    }
    CHECK_MPI(MPI_Type_free(&vec));
    CHECK(vec == MPI_DATATYPE_NULL, "Type_free did not null the handle");
}

/* ---- struct ---------------------------------------------------------- */

struct rec {
    int a;
    double b;
    char c[5];
};
#define NREC 4

static void structs(void)
{
    MPI_Datatype tmp, rt;
    int bl[3] = {1, 1, 5};
    MPI_Aint disp[3] = {offsetof(struct rec, a), offsetof(struct rec, b), offsetof(struct rec, c)};
    MPI_Datatype types[3] = {MPI_INT, MPI_DOUBLE, MPI_CHAR};
    int sz, cnt, el;
    MPI_Aint lb, ext;
    MPI_Status st;

    CHECK_MPI(MPI_Type_create_struct(3, bl, disp, types, &tmp));
    CHECK_MPI(MPI_Type_create_resized(tmp, 0, (MPI_Aint)sizeof(struct rec), &rt));
    CHECK_MPI(MPI_Type_free(&tmp)); /* rt stays valid */
    CHECK_MPI(MPI_Type_commit(&rt));
    CHECK_MPI(MPI_Type_size(rt, &sz));
    CHECK_MPI(MPI_Type_get_extent(rt, &lb, &ext));
    CHECK(sz == (int)(sizeof(int) + sizeof(double) + 5), "struct size %d", sz);
    CHECK(lb == 0 && ext == (MPI_Aint)sizeof(struct rec), "struct extent %ld", (long)ext);

    struct rec s[NREC], r[NREC + 1];
    memset(s, 0, sizeof s);
    for (int i = 0; i < NREC; i++) {
        s[i].a = rank * 100 + i;
        s[i].b = rank + i * 0.5;
        for (int j = 0; j < 5; j++)
            s[i].c[j] = (char)('a' + (rank + i + j) % 26);
    }
    memset(r, 0xAB, sizeof r); /* padding and the spare record must survive */

    MPI_Request rq[2];
    CHECK_MPI(MPI_Irecv(r, NREC + 1, rt, left, 10, MPI_COMM_WORLD, &rq[0]));
    CHECK_MPI(MPI_Isend(s, NREC, rt, right, 10, MPI_COMM_WORLD, &rq[1]));
    MPI_Status sts[2];
    CHECK_MPI(MPI_Waitall(2, rq, sts));
    st = sts[0];
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == 10, "struct: status src %d tag %d",
          st.MPI_SOURCE, st.MPI_TAG);
    CHECK_MPI(MPI_Get_count(&st, rt, &cnt));
    CHECK_MPI(MPI_Get_elements(&st, rt, &el));
    CHECK(cnt == NREC, "struct: Get_count %d, expected %d", cnt, NREC);
    CHECK(el == NREC * 7, "struct: Get_elements %d, expected %d", el, NREC * 7);

    const unsigned char *bytes = (const unsigned char *)r;
    for (int i = 0; i < NREC; i++) {
        CHECK(r[i].a == left * 100 + i, "struct %d: a = %d", i, r[i].a);
        CHECK(r[i].b == left + i * 0.5, "struct %d: b = %g", i, r[i].b);
        for (int j = 0; j < 5; j++)
            CHECK(r[i].c[j] == (char)('a' + (left + i + j) % 26), "struct %d: c[%d] = %d", i, j,
                  r[i].c[j]);
        /* the padding between/after members is not in the typemap */
        size_t base = (size_t)i * sizeof(struct rec);
        for (size_t o = sizeof(int); o < offsetof(struct rec, b); o++)
            CHECK(bytes[base + o] == 0xAB, "struct %d: padding byte %zu overwritten", i, o);
        for (size_t o = offsetof(struct rec, c) + 5; o < sizeof(struct rec); o++)
            CHECK(bytes[base + o] == 0xAB, "struct %d: tail padding byte %zu overwritten", i, o);
    }
    for (size_t o = 0; o < sizeof(struct rec); o++)
        CHECK(bytes[NREC * sizeof(struct rec) + o] == 0xAB, "spare record byte %zu overwritten", o);

    /* partial last element: 10 ints received as contiguous(3, MPI_INT)
     * -> Get_count MPI_UNDEFINED, Get_elements 10. */
    {
        MPI_Datatype tri;
        int si[10], ri[16];
        CHECK_MPI(MPI_Type_contiguous(3, MPI_INT, &tri));
        CHECK_MPI(MPI_Type_commit(&tri));
        for (int i = 0; i < 10; i++)
            si[i] = rank * 50 + i;
        for (int i = 0; i < 16; i++)
            ri[i] = -1;
        CHECK_MPI(MPI_Sendrecv(si, 10, MPI_INT, right, 11, ri, 5, tri, left, 11, MPI_COMM_WORLD,
                               &st));
        CHECK_MPI(MPI_Get_count(&st, tri, &cnt));
        CHECK_MPI(MPI_Get_elements(&st, tri, &el));
        CHECK(cnt == MPI_UNDEFINED, "contig(3) partial: Get_count %d, expected MPI_UNDEFINED",
              cnt);
        CHECK(el == 10, "contig(3) partial: Get_elements %d, expected 10", el);
        for (int i = 0; i < 16; i++)
            CHECK(ri[i] == (i < 10 ? left * 50 + i : -1), "contig(3) partial: ri[%d] = %d", i,
                  ri[i]);
        CHECK_MPI(MPI_Type_free(&tri));
    }
    CHECK_MPI(MPI_Type_free(&rt));
}

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

/* MPI_BOTTOM with a struct type of absolute addresses, both ways: an int
 * and a double of separate variables, sent and received in place; then a
 * receive of an int alone into the same type (a partial element). */
static void bottom(void)
{
    int si = rank * 7 + 1, ri = -1;
    double sd = rank + 0.5, rd = SENTINEL;
    int bl[2] = { 1, 1 };
    MPI_Aint sdisp[2], rdisp[2];
    MPI_Datatype types[2] = { MPI_INT, MPI_DOUBLE }, st_t, rt_t;
    MPI_Status st;
    int el;

    CHECK_MPI(MPI_Get_address(&si, &sdisp[0]));
    CHECK_MPI(MPI_Get_address(&sd, &sdisp[1]));
    CHECK_MPI(MPI_Get_address(&ri, &rdisp[0]));
    CHECK_MPI(MPI_Get_address(&rd, &rdisp[1]));
    CHECK_MPI(MPI_Type_create_struct(2, bl, sdisp, types, &st_t));
    CHECK_MPI(MPI_Type_create_struct(2, bl, rdisp, types, &rt_t));
    CHECK_MPI(MPI_Type_commit(&st_t));
    CHECK_MPI(MPI_Type_commit(&rt_t));

    CHECK_MPI(MPI_Sendrecv(MPI_BOTTOM, 1, st_t, right, 21, MPI_BOTTOM, 1, rt_t, left, 21, MPI_COMM_WORLD, &st));
    CHECK(ri == left * 7 + 1, "bottom: int %d, expected %d", ri, left * 7 + 1);
    CHECK(rd == left + 0.5, "bottom: double %g, expected %g", rd, left + 0.5);

    ri = -1;
    rd = SENTINEL;
    CHECK_MPI(MPI_Sendrecv(&si, 1, MPI_INT, right, 22, MPI_BOTTOM, 1, rt_t, left, 22, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_elements(&st, rt_t, &el));
    CHECK(el == 1, "bottom partial: Get_elements %d, expected 1", el);
    CHECK(ri == left * 7 + 1, "bottom partial: int %d, expected %d", ri, left * 7 + 1);
    CHECK(rd == SENTINEL, "bottom partial: double %g overwritten", rd);

    CHECK_MPI(MPI_Type_free(&st_t));
    CHECK_MPI(MPI_Type_free(&rt_t));
}

/* A derived type of no bytes (every block empty) from and into NULL, as
 * MPI allows: the message is empty. MPICH's MPI_Pack refuses a NULL buffer
 * even then, so a lane that packed it failed the send (MPICH's own
 * datatype/hindexed_zeros over tcp). Blocking, nonblocking and buffered. */
static void empty_type(void)
{
    int bl[3] = { 0, 0, 0 };
    MPI_Aint disp[3] = { 0, 64, 128 };
    MPI_Datatype z;
    MPI_Status st;
    MPI_Request req;
    int cnt = -1;

    CHECK_MPI(MPI_Type_create_hindexed(3, bl, disp, MPI_INT, &z));
    CHECK_MPI(MPI_Type_commit(&z));
    CHECK_MPI(MPI_Irecv(NULL, 2, z, left, 23, MPI_COMM_WORLD, &req));
    CHECK_MPI(MPI_Send(NULL, 1, z, right, 23, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Wait(&req, &st));
    CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
    CHECK(cnt == 0 && st.MPI_SOURCE == left && st.MPI_TAG == 23, "empty type: count %d source %d tag %d", cnt,
          st.MPI_SOURCE, st.MPI_TAG);

    char bbuf[MPI_BSEND_OVERHEAD + 64];
    void *was;
    int wsize;
    CHECK_MPI(MPI_Buffer_attach(bbuf, sizeof bbuf));
    CHECK_MPI(MPI_Bsend(NULL, 3, z, right, 24, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(NULL, 1, z, left, 24, MPI_COMM_WORLD, &st));
    CHECK_MPI(MPI_Get_count(&st, z, &cnt));
    CHECK(cnt == 0 && st.MPI_TAG == 24, "empty type, buffered: count %d tag %d", cnt, st.MPI_TAG);
    CHECK_MPI(MPI_Buffer_detach(&was, &wsize));
    CHECK_MPI(MPI_Type_free(&z));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;

    vectors();
    structs();
    bottom();
    freed_types();
    empty_type();

    test_finish("p2p_datatype");
    return 0;
}
