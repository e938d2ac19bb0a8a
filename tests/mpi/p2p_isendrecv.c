/* MPI-4's MPI_Isendrecv and MPI_Isendrecv_replace (and their large-count
 * forms) against the blocking and int-count calls on one communicator:
 * each rank exchanges with its neighbours in a ring, the partner using
 * another call, data and status checked. Under the shim's spreading maps
 * (testlist) the send and the receive of one call may map to different
 * routes; each must take the route a plain send or receive with the same
 * peer and tag would. Exchanges completed by the array calls (Waitall,
 * Testall, Waitany, Waitsome, Testsome, Testany) keep their data and
 * statuses, and give back what they held: many of them grow the heap by no
 * more than a few bytes each. A host below MPI 4.0 has none of these calls:
 * SKIP. */
#include "testutil.h"

#include <malloc.h>

#if MPI_VERSION >= 4

#define N 5

static int rank, size;

static void check_buf(const int *b, int from, int round, const MPI_Status *st, int tag, const char *what)
{
    for (int i = 0; i < N; i++)
        CHECK(b[i] == from * 1000 + round * 10 + i, "%s: element %d is %d", what, i, b[i]);
    int c = -1;
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &c));
    if (st->MPI_SOURCE == from && st->MPI_TAG == tag && c == N)
        return;
    /* MPICH 4.0's MPI_Isendrecv leaves the status untouched: it holds what
     * an earlier operation left there. The shim's runtime fills it in. */
    if (strcmp(what, "Irecv + Send") != 0 && TEST_HOST_MPICH40 && test_host_native() &&
        test_known_deviation("MPI_Isendrecv(_replace) did not fill the status", "MPICH 4.0.2, observed raw"))
        return;
    CHECK(0, "%s: source %d tag %d count %d, expected %d %d %d", what, st->MPI_SOURCE, st->MPI_TAG, c, from, tag, N);
}

static void fill(int *b, int round)
{
    for (int i = 0; i < N; i++)
        b[i] = rank * 1000 + round * 10 + i;
}

/* MPI_Cancel of an exchange whose receive nothing matches (nobody sends
 * tag 60): the receive half is cancelled, the send half still goes, and
 * the right neighbour takes it with a plain receive. Then MPI_Request_free
 * of an active exchange: both halves still happen. The left neighbour's
 * synchronous send of tag 63 completes only once the freed receive has
 * matched it, so after the barrier no message is left over. */
static void cancel_and_free(MPI_Comm comm, int right, int left)
{
    int sb[N], rb[N], got[N], ss[N];
    static int freed_rb[N];
    MPI_Status st;
    MPI_Request q;

    test_step = "cancel";
    fill(sb, 5);
    CHECK_MPI(MPI_Isendrecv(sb, N, MPI_INT, right, 61, rb, N, MPI_INT, left, 60, comm, &q));
    CHECK_MPI(MPI_Recv(got, N, MPI_INT, left, 61, comm, &st));
    check_buf(got, left, 5, &st, 61, "Recv of a cancelled exchange's send");
    CHECK_MPI(MPI_Cancel(&q));
    CHECK_MPI(MPI_Wait(&q, &st));
    int cancelled = 0;
    CHECK_MPI(MPI_Test_cancelled(&st, &cancelled));
    CHECK(cancelled, "cancelled exchange: MPI_Test_cancelled is false");
    CHECK(q == MPI_REQUEST_NULL, "cancelled exchange: MPI_Wait left the handle");

    test_step = "free";
    fill(sb, 6);
    CHECK_MPI(MPI_Isendrecv(sb, N, MPI_INT, right, 62, freed_rb, N, MPI_INT, left, 63, comm, &q));
    CHECK_MPI(MPI_Request_free(&q));
    CHECK(q == MPI_REQUEST_NULL, "MPI_Request_free left the exchange's handle");
    fill(ss, 7);
    CHECK_MPI(MPI_Ssend(ss, N, MPI_INT, right, 63, comm));
    CHECK_MPI(MPI_Recv(got, N, MPI_INT, left, 62, comm, &st));
    check_buf(got, left, 6, &st, 62, "Recv of a freed exchange's send");
    CHECK_MPI(MPI_Barrier(comm));
    int left_over = 1;
    CHECK_MPI(MPI_Iprobe(left, 63, comm, &left_over, &st)); /* no wildcards: the testlist's maps refuse them */
    CHECK(!left_over, "the freed exchange's receive left its message unmatched");
}

/* One exchange of each form, completed together by the array call `how`
 * (0 Waitall, 1 Testall, 2 Waitany, 3 Waitsome, 4 Testsome, 5 Testany). */
static void by_array(MPI_Comm comm, int right, int left, int how, int round)
{
    static const char *const name[] = {"Waitall", "Testall", "Waitany", "Waitsome", "Testsome", "Testany"};
    int sb[N], rb[N], xb[N];
    MPI_Request q[2];
    MPI_Status st[2], got[2];
    fill(sb, round);
    fill(xb, round + 1);
    memset(rb, 0, sizeof rb);
    CHECK_MPI(MPI_Isendrecv(sb, N, MPI_INT, right, 20, rb, N, MPI_INT, left, 20, comm, &q[0]));
    CHECK_MPI(MPI_Isendrecv_replace(xb, N, MPI_INT, right, 21, left, 21, comm, &q[1]));
    int left_to_do = 2, flag = 0, idx = -1, out = 0, ids[2];
    switch (how) {
    case 0:
        CHECK_MPI(MPI_Waitall(2, q, got));
        break;
    case 1:
        while (!flag)
            CHECK_MPI(MPI_Testall(2, q, &flag, got));
        break;
    default:
        while (left_to_do > 0) {
            if (how == 2 || how == 5) {
                flag = 1;
                if (how == 2)
                    CHECK_MPI(MPI_Waitany(2, q, &idx, st));
                else
                    CHECK_MPI(MPI_Testany(2, q, &idx, &flag, st));
                if (!flag || idx == MPI_UNDEFINED)
                    continue;
                got[idx] = st[0];
                left_to_do--;
                continue;
            }
            if (how == 3)
                CHECK_MPI(MPI_Waitsome(2, q, &out, ids, st));
            else
                CHECK_MPI(MPI_Testsome(2, q, &out, ids, st));
            CHECK(out != MPI_UNDEFINED, "%s: MPI_UNDEFINED with an exchange pending", name[how]);
            for (int k = 0; k < out; k++)
                got[ids[k]] = st[k];
            left_to_do -= out;
        }
        break;
    }
    CHECK(q[0] == MPI_REQUEST_NULL && q[1] == MPI_REQUEST_NULL, "%s left a handle", name[how]);
    check_buf(rb, left, round, &got[0], 20, name[how]);
    check_buf(xb, left, round + 1, &got[1], 21, name[how]);
}

static void arrays(MPI_Comm comm, int right, int left)
{
    test_step = "arrays";
    for (int how = 0; how < 6; how++)
        by_array(comm, right, left, how, 20 + 2 * how);
    /* The heap after many, against the heap after a few (the hosts' and the
     * shim's caches warm): an exchange that kept its bookkeeping would add
     * some 80 bytes each (the hosts' own growth here: up to 25 KiB).
     * mallinfo2 counts glibc's heap; under a sanitizer's allocator it says
     * 0 and this check says nothing. */
    enum { MANY = 1000 };
    if (size > 2)
        return; /* the same per exchange at any size: the 2-rank runs say it, in less time */
    size_t before = mallinfo2().uordblks;
    for (int i = 0; i < MANY; i++)
        by_array(comm, right, left, i % 6, 40 + 2 * (i % 20));
    size_t after = mallinfo2().uordblks;
    long grew = after > before ? (long)(after - before) : 0;
    CHECK(grew < 80 * 1024, "%d exchanges completed by array calls grew the heap by %ld bytes (%ld each)",
          2 * MANY, grew, grew / (2 * MANY));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("p2p_isendrecv", 60);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    MPI_Comm comm;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comm));
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int sb[N], rb[N];
    MPI_Status st;
    MPI_Request q;
    for (int round = 0; round < 4; round++) {
        /* Send to the right with tag 10+round, receive from the left with
         * tag 10+round: every rank uses the call of this round. */
        int tag = 10 + round, sendtag = tag, recvtag = tag;
        if (round == 3) { /* different tags: the two halves on different routes under MAP=tag */
            sendtag = 40;
            recvtag = 40;
        }
        fill(sb, round);
        memset(rb, 0, sizeof rb);
        test_step = "round";
        switch (round) {
        case 0:
            CHECK_MPI(MPI_Isendrecv(sb, N, MPI_INT, right, sendtag, rb, N, MPI_INT, left, recvtag, comm, &q));
            CHECK_MPI(MPI_Wait(&q, &st));
            check_buf(rb, left, round, &st, recvtag, "Isendrecv");
            break;
        case 1:
            CHECK_MPI(MPI_Isendrecv_c(sb, N, MPI_INT, right, sendtag, rb, N, MPI_INT, left, recvtag, comm, &q));
            CHECK_MPI(MPI_Wait(&q, &st));
            check_buf(rb, left, round, &st, recvtag, "Isendrecv_c");
            break;
        case 2:
            CHECK_MPI(MPI_Isendrecv_replace(sb, N, MPI_INT, right, sendtag, left, recvtag, comm, &q));
            CHECK_MPI(MPI_Wait(&q, &st));
            check_buf(sb, left, round, &st, recvtag, "Isendrecv_replace");
            break;
        default:
            /* Mixed with plain calls: even ranks use the nonblocking
             * exchange, odd ranks a plain Irecv and Send. */
            if (rank % 2 == 0 || size % 2) {
                CHECK_MPI(MPI_Isendrecv_replace_c(sb, N, MPI_INT, right, sendtag, left, recvtag, comm, &q));
                CHECK_MPI(MPI_Wait(&q, &st));
                check_buf(sb, left, round, &st, recvtag, "Isendrecv_replace_c");
            } else {
                CHECK_MPI(MPI_Irecv(rb, N, MPI_INT, left, recvtag, comm, &q));
                CHECK_MPI(MPI_Send(sb, N, MPI_INT, right, sendtag, comm));
                CHECK_MPI(MPI_Wait(&q, &st));
                check_buf(rb, left, round, &st, recvtag, "Irecv + Send");
            }
            break;
        }
    }

    arrays(comm, right, left);

    if (TEST_HOST_MPICH40 && test_host_native() &&
        test_known_deviation("MPI_Cancel and MPI_Request_free of an MPI_Isendrecv request abort "
                             "(unknown type of request)",
                             "MPICH 4.0.2, observed raw"))
        ; /* the exchanges below could not be finished */
    else
        cancel_and_free(comm, right, left);
    CHECK_MPI(MPI_Comm_free(&comm));
    test_finish("p2p_isendrecv");
    return 0;
}

#else

int main(int argc, char **argv)
{
    int rank;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        printf("SKIP p2p_isendrecv: the host implements MPI %d.%d, without MPI_Isendrecv\n", MPI_VERSION,
               MPI_SUBVERSION);
    MPI_Finalize();
    return 0;
}

#endif
