/* Progress for a thread that left a receive behind and stopped calling MPI,
 * after it had used its communicator alone for a long run.
 *
 * Under MPISHIM_PROGRESS=vci the shim's VCI lock is biased to a thread that
 * takes it alone many times in a row, and a waiting thread's sweep leaves
 * alone a VCI whose bias owner entered it since the sweeper's last look
 * (that owner progresses it itself). An owner that went quiet must still be
 * swept, or this correct program deadlocks:
 *
 *   even rank, thread 0: a long ping-pong with the odd rank on A (earns the
 *                        bias), MPI_Irecv(A <- odd), then computes, calling
 *                        no MPI, until thread 1 is done; MPI_Wait
 *   even rank, thread 1: MPI_Recv(B <- odd)
 *   odd rank:            the ping-pong, MPI_Ssend(A -> even), MPI_Send(B -> even)
 *
 * The odd rank's Ssend completes only once the even rank's receive on A has
 * matched it, which needs progress on A's VCI: while thread 0 computes only
 * thread 1's wait on B can make it. A and B are duplicates of the world
 * (separate VCIs under the default MPISHIM_MAP=comm with two or more), their
 * roles swapped every iteration. Payloads, sources, tags and counts are
 * checked; the watchdog names the step of a hang. Ranks in pairs (0<->1,
 * ...); an odd last rank sits out. With MPISHIM_STATS=1 the runner also
 * checks that a bias was granted and revoked (tests/run.sh). */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define NITER 4
#define PINGPONG 300
#define TAG_PP 1
#define TAG_LEFT 2
#define TAG_B 3
#define WATCHDOG_S 100 /* below the runner's timeout */

static int rank, size, peer, even;
static MPI_Comm dupc[2];
static pthread_barrier_t bar;
static _Atomic int posted, done_b;
/* test_step (the watchdog's report) is written by one thread per rank. */

static int32_t val(int src, int iter, int tag, int k)
{
    return (int32_t)((uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(iter * 1000003 + tag * 7919 + k));
}

static void check_msg(int32_t got, const MPI_Status *st, int iter, int tag, int k)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag, "iter %d tag %d: status source %d tag %d", iter, tag,
          st->MPI_SOURCE, st->MPI_TAG);
    CHECK_MPI(MPI_Get_count(st, MPI_INT32_T, &cnt));
    CHECK(cnt == 1, "iter %d tag %d: count %d", iter, tag, cnt);
    CHECK(got == val(peer, iter, tag, k), "iter %d tag %d round %d: got %d, expected %d", iter, tag, k, (int)got,
          (int)val(peer, iter, tag, k));
}

static void *even_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int iter = 0; iter < NITER; iter++) {
        MPI_Comm a = dupc[iter % 2], b = dupc[1 - iter % 2];
        MPI_Status st;
        int32_t x;
        if (t == 0) {
            test_step = "even thread 0: ping-pong on A";
            for (int k = 0; k < PINGPONG; k++) {
                int32_t s = val(rank, iter, TAG_PP, k);
                CHECK_MPI(MPI_Send(&s, 1, MPI_INT32_T, peer, TAG_PP, a));
                CHECK_MPI(MPI_Recv(&x, 1, MPI_INT32_T, peer, TAG_PP, a, &st));
                check_msg(x, &st, iter, TAG_PP, k);
            }
            MPI_Request r;
            int32_t left = -1;
            CHECK_MPI(MPI_Irecv(&left, 1, MPI_INT32_T, peer, TAG_LEFT, a, &r));
            atomic_store(&posted, 1);
            test_step = "even rank: thread 0 computes, its receive on A left behind, while thread 1 waits "
                        "in MPI_Recv on B (no sweep of A?)";
            while (!atomic_load(&done_b))
                sched_yield();
            CHECK_MPI(MPI_Wait(&r, &st));
            check_msg(left, &st, iter, TAG_LEFT, 0);
        } else {
            while (!atomic_load(&posted))
                sched_yield();
            CHECK_MPI(MPI_Recv(&x, 1, MPI_INT32_T, peer, TAG_B, b, &st));
            check_msg(x, &st, iter, TAG_B, 0);
            atomic_store(&done_b, 1);
        }
        pthread_barrier_wait(&bar);
        if (t == 0) {
            atomic_store(&posted, 0);
            atomic_store(&done_b, 0);
        }
        pthread_barrier_wait(&bar);
    }
    return NULL;
}

static void odd_rank(void)
{
    for (int iter = 0; iter < NITER; iter++) {
        MPI_Comm a = dupc[iter % 2], b = dupc[1 - iter % 2];
        MPI_Status st;
        int32_t x;
        test_step = "odd rank: ping-pong on A";
        for (int k = 0; k < PINGPONG; k++) {
            CHECK_MPI(MPI_Recv(&x, 1, MPI_INT32_T, peer, TAG_PP, a, &st));
            check_msg(x, &st, iter, TAG_PP, k);
            int32_t s = val(rank, iter, TAG_PP, k);
            CHECK_MPI(MPI_Send(&s, 1, MPI_INT32_T, peer, TAG_PP, a));
        }
        /* Let the even rank post its receive and start computing, so that
         * the message arrives while only a sweep can match it. */
        test_sleep_ms(20);
        test_step = "odd rank: MPI_Ssend on A (the even rank's receive there is never progressed?)";
        int32_t s = val(rank, iter, TAG_LEFT, 0);
        CHECK_MPI(MPI_Ssend(&s, 1, MPI_INT32_T, peer, TAG_LEFT, a));
        test_step = "odd rank: MPI_Send on B";
        s = val(rank, iter, TAG_B, 0);
        CHECK_MPI(MPI_Send(&s, 1, MPI_INT32_T, peer, TAG_B, b));
    }
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
    test_watchdog("mt_bias_sweep", WATCHDOG_S);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    even = rank % 2 == 0;
    peer = even ? rank + 1 : rank - 1;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dupc[0]));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dupc[1]));
    if (peer < size) {
        if (even) {
            pthread_barrier_init(&bar, NULL, 2);
            test_run_threads(2, even_thread);
            pthread_barrier_destroy(&bar);
        } else {
            odd_rank();
        }
    }
    CHECK_MPI(MPI_Comm_free(&dupc[0]));
    CHECK_MPI(MPI_Comm_free(&dupc[1]));
    test_watchdog("mt_bias_sweep", 0);
    test_finish("mt_bias_sweep");
    return 0;
}
