/* Shared progress across communicators (Zambre et al., ICS 2020, on
 * per-VCI progress and its deadlock).  Progressing only the
 * VCI of the request a thread waits on deadlocks these correct programs; a
 * runtime needs some global progress (a sweep over all VCIs every so often).
 *
 * Two communicators commA and commB (duplicates of MPI_COMM_WORLD: with the
 * default MPISHIM_MAP=comm and two or more VCIs the shim puts them on
 * different VCIs), two threads per rank, ranks in pairs (0<->1, 2<->3, ...;
 * an odd last rank sits out).  Even rank e, odd rank o.
 *
 * Part 1, symmetric (both ranks block in an MPI_Ssend on one communicator
 * while their only posted receive is on the other):
 *     e thread 0: MPI_Ssend(commA -> o)          o thread 1: MPI_Ssend(commB -> e)
 *     e thread 1: MPI_Irecv(commB <- o, r)       o thread 0: MPI_Irecv(commA <- e, r)
 *                 (waits for thread 0)                       (waits for thread 1)
 *                 MPI_Wait(r)                                MPI_Wait(r)
 * The receive is posted before the local sender starts (thread barrier),
 * and waited on only after the local MPI_Ssend has returned (second thread
 * barrier).  While the Ssends block, each rank's only MPI call in progress is
 * its MPI_Ssend, polling its own communicator: the peer's Ssend on the
 * other communicator can only be matched (and acknowledged) if that call
 * also progresses the other communicator.  Per-VCI-only progress deadlocks.
 *
 * Part 2, the paper's case exactly (the roles alternate so both ranks play each):
 *     sender, thread 0: MPI_Ssend(comm1); MPI_Ssend(comm2)
 *     receiver, thread 0: MPI_Irecv(comm1, req1); barrier; barrier; MPI_Wait(req1)
 *     receiver, thread 1: MPI_Irecv(comm2, req2); barrier; MPI_Wait(req2); barrier
 * The first Ssend (comm1) must return while the receiver's only active call
 * is MPI_Wait(req2) on comm2.
 *
 * Which duplicate is "A"/"comm1" alternates per iteration, and the message
 * is either one int or 256 KiB (rendezvous).  Payload, source, tag and count
 * are checked; a watchdog names the part and iteration of a deadlock.
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define NITER 12
#define BIG_WORDS (64 * 1024) /* 256 KiB of int32 */
#define TAG1 21
#define TAG2 22
#ifndef WATCHDOG_S
#define WATCHDOG_S 100 /* seconds; below the runner's 120 s timeout */
#endif

static int rank, size, peer, even;
static MPI_Comm dupc[2];
static pthread_barrier_t bar;
static int32_t *sbuf[2], *rbuf[2];
static _Atomic int cur_part = 0, cur_iter = -1;

static void on_alarm(int sig)
{
    (void)sig;
    char msg[200];
    int n = snprintf(msg, sizeof msg,
                     "FAIL mt_ssend_two_comms.c: watchdog (%d s): rank %d stuck in part %d "
                     "iteration %d (no shared progress across communicators?)\n",
                     WATCHDOG_S, rank, atomic_load(&cur_part), atomic_load(&cur_iter));
    ssize_t w = write(2, msg, (size_t)(n > 0 ? n : 0));
    (void)w;
    _exit(1);
}

static int32_t val(int src, int part, int iter, int which, int j)
{
    uint32_t x =
        (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(part * 1000 + iter * 10 + which) * 0x85EBCA77u;
    return (int32_t)(x ^ ((uint32_t)j * 2654435761u));
}

static int words(int iter) { return (iter % 2) ? BIG_WORDS : 1; }

/* The communicator playing "A" (or comm1) in this iteration, and "B" (comm2). */
static MPI_Comm comm_a(int iter) { return dupc[(iter / 2) % 2]; }
static MPI_Comm comm_b(int iter) { return dupc[1 - (iter / 2) % 2]; }

static void ssend(int slot, int part, int iter, int which, MPI_Comm c, int tag)
{
    int n = words(iter);
    for (int j = 0; j < n; j++)
        sbuf[slot][j] = val(rank, part, iter, which, j);
    CHECK_MPI(MPI_Ssend(sbuf[slot], n, MPI_INT32_T, peer, tag, c));
}

static void verify(int slot, const MPI_Status *st, int part, int iter, int which, int tag)
{
    int n = words(iter), cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "part %d iter %d msg %d: status source %d tag %d, expected %d/%d", part, iter, which,
          st->MPI_SOURCE, st->MPI_TAG, peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT32_T, &cnt));
    CHECK(cnt == n, "part %d iter %d msg %d: count %d, expected %d", part, iter, which, cnt, n);
    for (int j = 0; j < n; j++)
        CHECK(rbuf[slot][j] == val(peer, part, iter, which, j),
              "part %d iter %d msg %d: word %d is %d, expected %d", part, iter, which, j, (int)rbuf[slot][j],
              (int)val(peer, part, iter, which, j));
}

/* Part 1: on the even rank thread 0 sends on A and thread 1 receives on B;
 * on the odd rank thread 1 sends on B and thread 0 receives on A. */
static void part1(int t, int iter)
{
    int n = words(iter);
    int sender = even ? (t == 0) : (t == 1);
    if (sender) {
        pthread_barrier_wait(&bar); /* the local receive is posted */
        if (even)
            ssend(t, 1, iter, 0, comm_a(iter), TAG1);
        else
            ssend(t, 1, iter, 1, comm_b(iter), TAG2);
        pthread_barrier_wait(&bar); /* let the receiver wait */
    } else {
        MPI_Request r;
        MPI_Status st;
        memset(rbuf[t], 0, sizeof(int32_t) * (size_t)n);
        if (even)
            CHECK_MPI(MPI_Irecv(rbuf[t], n, MPI_INT32_T, peer, TAG2, comm_b(iter), &r));
        else
            CHECK_MPI(MPI_Irecv(rbuf[t], n, MPI_INT32_T, peer, TAG1, comm_a(iter), &r));
        pthread_barrier_wait(&bar);
        pthread_barrier_wait(&bar); /* the local MPI_Ssend has returned */
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL, "part 1 iter %d: MPI_Wait did not free the request", iter);
        if (even)
            verify(t, &st, 1, iter, 1, TAG2);
        else
            verify(t, &st, 1, iter, 0, TAG1);
    }
}

/* Part 2: the even rank sends in even iterations, the odd rank in odd ones. */
static void part2(int t, int iter)
{
    int n = words(iter);
    int i_send = (iter % 2 == 0) == (even != 0);
    MPI_Comm c1 = comm_a(iter), c2 = comm_b(iter);
    if (i_send) {
        if (t == 0) {
            ssend(0, 2, iter, 1, c1, TAG1);
            ssend(0, 2, iter, 2, c2, TAG2);
        }
        /* thread 1 of the sender has nothing to do (the paper's rank 0 is single-threaded) */
    } else {
        MPI_Request r;
        MPI_Status st;
        memset(rbuf[t], 0, sizeof(int32_t) * (size_t)n);
        if (t == 0) {
            CHECK_MPI(MPI_Irecv(rbuf[0], n, MPI_INT32_T, peer, TAG1, c1, &r)); /* req1 */
            pthread_barrier_wait(&bar);
            pthread_barrier_wait(&bar);
            CHECK_MPI(MPI_Wait(&r, &st));
            verify(0, &st, 2, iter, 1, TAG1);
        } else {
            CHECK_MPI(MPI_Irecv(rbuf[1], n, MPI_INT32_T, peer, TAG2, c2, &r)); /* req2 */
            pthread_barrier_wait(&bar);
            CHECK_MPI(MPI_Wait(&r, &st)); /* must let Ssend(comm1) complete */
            pthread_barrier_wait(&bar);
            verify(1, &st, 2, iter, 2, TAG2);
        }
        CHECK(r == MPI_REQUEST_NULL, "part 2 iter %d: MPI_Wait did not free the request", iter);
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int iter = 0; iter < NITER; iter++) {
        if (t == 0) {
            atomic_store(&cur_part, 1);
            atomic_store(&cur_iter, iter);
        }
        pthread_barrier_wait(&bar);
        part1(t, iter);
    }
    for (int iter = 0; iter < NITER; iter++) {
        if (t == 0) {
            atomic_store(&cur_part, 2);
            atomic_store(&cur_iter, iter);
        }
        pthread_barrier_wait(&bar);
        part2(t, iter);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_ssend_two_comms");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dupc[0]));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dupc[1]));
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);

    peer = rank ^ 1;
    even = (rank % 2) == 0;
    if (peer < size) {
        for (int i = 0; i < 2; i++) {
            sbuf[i] = malloc(sizeof(int32_t) * BIG_WORDS);
            rbuf[i] = malloc(sizeof(int32_t) * BIG_WORDS);
            CHECK(sbuf[i] && rbuf[i], "out of memory");
        }
        CHECK(pthread_barrier_init(&bar, NULL, 2) == 0, "pthread_barrier_init failed");
        pthread_t th[2];
        for (int t = 0; t < 2; t++)
            CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create failed");
        for (int t = 0; t < 2; t++)
            CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");
        pthread_barrier_destroy(&bar);
        for (int i = 0; i < 2; i++) {
            free(sbuf[i]);
            free(rbuf[i]);
        }
    }

    CHECK_MPI(MPI_Comm_free(&dupc[0]));
    CHECK_MPI(MPI_Comm_free(&dupc[1]));
    CHECK(dupc[0] == MPI_COMM_NULL && dupc[1] == MPI_COMM_NULL, "MPI_Comm_free did not null the handles");
    test_finish("mt_ssend_two_comms");
    alarm(0);
    return 0;
}
