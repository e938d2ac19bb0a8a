/* Probe family through the shim: MPI_Probe, MPI_Iprobe, MPI_Mprobe+MPI_Mrecv,
 * MPI_Improbe+MPI_Imrecv, with specific and wildcard source/tag.  The size
 * of each message is learned from the probe status and the receive buffer is
 * allocated exactly that big.  Ring: send to right, receive from left, so each
 * rank has exactly one sender and wildcard probes see that sender's messages
 * in send order. */
#include "testutil.h"

#if defined(OPEN_MPI) && OPEN_MPI
#define OMPI_HOST 1
#else
#define OMPI_HOST 0
#endif
/* A step of the matched probes (Mprobe, Improbe). */
#define MATCHED(i) ((i) == P_MPROBE || (i) == P_MPROBE_ANY || (i) == P_IMPROBE || (i) == P_IMPROBE_ANY)

#define NSTEP 8
#define TAG0 100

enum { P_PROBE, P_PROBE_ANY, P_IPROBE, P_IPROBE_ANY, P_MPROBE, P_MPROBE_ANY, P_IMPROBE,
       P_IMPROBE_ANY };

static int msg_len(int i)
{
    static const int len[NSTEP] = {1, 17, 50000 /* rendezvous */, 3, 4096, 0, 70000, 9};
    return len[i];
}

static int val(int src, int i, int j) { return src * 7919 + i * 104729 + j; }

/* Check the probe status and return an exactly-sized receive buffer. */
static int *probe_checked(const MPI_Status *st, int left, int i, int *cnt_out)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == left, "step %d: probe source %d, expected %d", i, st->MPI_SOURCE,
          left);
    CHECK(st->MPI_TAG == TAG0 + i, "step %d: probe tag %d, expected %d", i, st->MPI_TAG,
          TAG0 + i);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == msg_len(i), "step %d: probe count %d, expected %d", i, cnt, msg_len(i));
    *cnt_out = cnt;
    int *buf = malloc(sizeof(int) * (size_t)(cnt > 0 ? cnt : 1));
    CHECK(buf, "out of memory");
    return buf;
}

static void verify(const int *buf, const MPI_Status *st, int left, int i, int cnt)
{
    int rc = -1;
    CHECK(st->MPI_SOURCE == left && st->MPI_TAG == TAG0 + i, "step %d: recv status src %d tag %d",
          i, st->MPI_SOURCE, st->MPI_TAG);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &rc));
    CHECK(rc == cnt, "step %d: recv count %d, probe said %d", i, rc, cnt);
    for (int j = 0; j < cnt; j++)
        CHECK(buf[j] == val(left, i, j), "step %d: word %d is %d", i, j, buf[j]);
}

int main(int argc, char **argv)
{
    int rank, size;
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    int right = (rank + 1) % size, left = (rank - 1 + size) % size;

    /* Send all messages up front (nonblocking). */
    int *sbuf[NSTEP];
    MPI_Request sreq[NSTEP];
    for (int i = 0; i < NSTEP; i++) {
        sbuf[i] = malloc(sizeof(int) * (size_t)(msg_len(i) + 1));
        CHECK(sbuf[i], "out of memory");
        for (int j = 0; j < msg_len(i); j++)
            sbuf[i][j] = val(rank, i, j);
        CHECK_MPI(MPI_Isend(sbuf[i], msg_len(i), MPI_INT, right, TAG0 + i, MPI_COMM_WORLD,
                            &sreq[i]));
    }

    for (int i = 0; i < NSTEP; i++) {
        MPI_Status st, rst;
        int cnt = -1, flag = 0, *buf = NULL;
        int src = (i % 2) ? MPI_ANY_SOURCE : left;
        int tag = (i % 2) ? MPI_ANY_TAG : TAG0 + i;
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Request rreq = MPI_REQUEST_NULL;

        /* A probe need not set MPI_ERROR (only the calls that complete
         * several requests must): a value put there stays after Mprobe
         * and Improbe on both hosts, and after every probe on Open MPI;
         * MPICH 4.0's Probe and Iprobe write MPI_SUCCESS there. */
        st.MPI_ERROR = MPI_ERR_DIMS;
        switch (i) {
        case P_PROBE:
        case P_PROBE_ANY:
            CHECK_MPI(MPI_Probe(src, tag, MPI_COMM_WORLD, &st));
            CHECK(st.MPI_ERROR == MPI_ERR_DIMS || (!OMPI_HOST && !MATCHED(i) && st.MPI_ERROR == MPI_SUCCESS),
                  "step %d: the probe set MPI_ERROR to %d", i, st.MPI_ERROR);
            buf = probe_checked(&st, left, i, &cnt);
            /* receive exactly what was probed: same source and tag */
            CHECK_MPI(MPI_Recv(buf, cnt, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &rst));
            break;
        case P_IPROBE:
        case P_IPROBE_ANY:
            while (!flag)
                CHECK_MPI(MPI_Iprobe(src, tag, MPI_COMM_WORLD, &flag, &st));
            CHECK(st.MPI_ERROR == MPI_ERR_DIMS || (!OMPI_HOST && !MATCHED(i) && st.MPI_ERROR == MPI_SUCCESS),
                  "step %d: the probe set MPI_ERROR to %d", i, st.MPI_ERROR);
            buf = probe_checked(&st, left, i, &cnt);
            CHECK_MPI(MPI_Recv(buf, cnt, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, &rst));
            break;
        case P_MPROBE:
        case P_MPROBE_ANY:
            CHECK_MPI(MPI_Mprobe(src, tag, MPI_COMM_WORLD, &msg, &st));
            CHECK(msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC,
                  "step %d: Mprobe returned a null message handle", i);
            CHECK(st.MPI_ERROR == MPI_ERR_DIMS || (!OMPI_HOST && !MATCHED(i) && st.MPI_ERROR == MPI_SUCCESS),
                  "step %d: the probe set MPI_ERROR to %d", i, st.MPI_ERROR);
            buf = probe_checked(&st, left, i, &cnt);
            CHECK_MPI(MPI_Mrecv(buf, cnt, MPI_INT, &msg, &rst));
            CHECK(msg == MPI_MESSAGE_NULL, "step %d: Mrecv did not reset the message handle", i);
            break;
        case P_IMPROBE:
        case P_IMPROBE_ANY:
            while (!flag)
                CHECK_MPI(MPI_Improbe(src, tag, MPI_COMM_WORLD, &flag, &msg, &st));
            CHECK(msg != MPI_MESSAGE_NULL && msg != MPI_MESSAGE_NO_PROC,
                  "step %d: Improbe returned a null message handle", i);
            CHECK(st.MPI_ERROR == MPI_ERR_DIMS || (!OMPI_HOST && !MATCHED(i) && st.MPI_ERROR == MPI_SUCCESS),
                  "step %d: the probe set MPI_ERROR to %d", i, st.MPI_ERROR);
            buf = probe_checked(&st, left, i, &cnt);
            CHECK_MPI(MPI_Imrecv(buf, cnt, MPI_INT, &msg, &rreq));
            CHECK(msg == MPI_MESSAGE_NULL, "step %d: Imrecv did not reset the message handle", i);
            CHECK_MPI(MPI_Wait(&rreq, &rst));
            CHECK(rreq == MPI_REQUEST_NULL, "step %d: Wait did not free the request", i);
            break;
        }
        verify(buf, &rst, left, i, cnt);
        free(buf);
    }
    CHECK_MPI(MPI_Waitall(NSTEP, sreq, MPI_STATUSES_IGNORE));
    for (int i = 0; i < NSTEP; i++)
        free(sbuf[i]);

    /* Everything was consumed: a probe for a tag never sent must not match. */
    {
        int flag = 1;
        MPI_Message msg = MPI_MESSAGE_NULL;
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "Iprobe found a message with tag 999 that nobody sent");
        flag = 1;
        CHECK_MPI(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg,
                              MPI_STATUS_IGNORE));
        CHECK(!flag, "Improbe found a message after all were received");
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    }

    /* MPI_PROC_NULL: Mprobe returns MPI_MESSAGE_NO_PROC, Mrecv on it is a no-op
     * with a PROC_NULL status (MPI 3.1 sec. 3.8.2/3.8.3). */
    {
        MPI_Message msg = MPI_MESSAGE_NULL;
        MPI_Status st;
        int cnt = -1, dummy = 12345, flag = 0;
        st.MPI_SOURCE = -999;
        st.MPI_TAG = -999;
        CHECK_MPI(MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NO_PROC, "Mprobe(MPI_PROC_NULL) did not return MPI_MESSAGE_NO_PROC");
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Mprobe(PROC_NULL) status source %d", st.MPI_SOURCE);
        CHECK(st.MPI_TAG == MPI_ANY_TAG, "Mprobe(PROC_NULL) status tag %d", st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 0, "Mprobe(PROC_NULL) count %d", cnt);

        st.MPI_SOURCE = -999;
        CHECK_MPI(MPI_Mrecv(&dummy, 1, MPI_INT, &msg, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG,
              "Mrecv(NO_PROC) status src %d tag %d", st.MPI_SOURCE, st.MPI_TAG);
        CHECK(msg == MPI_MESSAGE_NULL, "Mrecv(NO_PROC) did not reset the handle");
        CHECK(dummy == 12345, "Mrecv(NO_PROC) wrote to the buffer");

        msg = MPI_MESSAGE_NULL;
        CHECK_MPI(MPI_Improbe(MPI_PROC_NULL, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &msg, &st));
        CHECK(flag, "Improbe(PROC_NULL) flag false");
        CHECK(msg == MPI_MESSAGE_NO_PROC, "Improbe(PROC_NULL) did not return MPI_MESSAGE_NO_PROC");
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Improbe(PROC_NULL) status source %d",
              st.MPI_SOURCE);
        MPI_Request r = MPI_REQUEST_NULL;
        CHECK_MPI(MPI_Imrecv(&dummy, 1, MPI_INT, &msg, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "Imrecv(NO_PROC) status source %d", st.MPI_SOURCE);
        CHECK(dummy == 12345, "Imrecv(NO_PROC) wrote to the buffer");
    }

    test_finish("p2p_probe");
    return 0;
}
