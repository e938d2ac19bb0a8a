/* The cross Send/Recv case (Vasile, "Multithreading MPI Communication",
 * after Balaji et al.):
 *
 *     Process 0                      Process 1
 *     Thread 0        Thread 1       Thread 0        Thread 1
 *     MPI_Recv(src=1) MPI_Send(1)    MPI_Recv(src=0) MPI_Send(0)
 *
 * "An implementation must ensure that this example never deadlocks for any
 * ordering of thread execution": a thread blocked inside one MPI call must
 * not stop another thread's MPI call from making progress.  An MPI (or a
 * shim) that holds one lock for the whole duration of a blocking call
 * deadlocks here.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  On each
 * rank two threads:
 *   A: MPI_Send(TAG_A) to the peer, then MPI_Recv(TAG_B) from the peer
 *   B: MPI_Recv(TAG_A) from the peer, then MPI_Send(TAG_B) to the peer
 * A's send on one rank is matched by B's receive on the other.  With a
 * message that needs a rendezvous (1 MiB, or MPI_Ssend), A's send cannot
 * complete until the peer's B has entered MPI_Recv, while the peer's A sits
 * in its own blocking send: if a blocked A kept B out of MPI, both ranks
 * would wait forever.
 *
 * The order in which A and B enter MPI is forced per iteration and per rank
 * (A first and B a little later, B first, or no delay), so every combination
 * of the example's "orderings of thread execution" on the two ranks is run; once
 * with 1 MiB MPI_Send (rendezvous on both hosts) and once with 64-byte
 * MPI_Ssend (synchronous whatever the eager limit).  Payload, status source,
 * tag and count are checked.  A watchdog turns a deadlock into a clear
 * failure naming the iteration instead of a runner timeout.
 */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#define TAG_A 11
#define TAG_B 12
#define BIG_WORDS (1024 * 1024 / 4) /* 1 MiB of uint32_t */
#define SMALL_WORDS 16              /* 64 bytes, sent with MPI_Ssend */
#define NMODE 3                     /* 0: A enters first, 1: B enters first, 2: no delay */
#define NITER (NMODE * NMODE)       /* every (mode on even rank, mode on odd rank) pair */
#define DELAY_US 3000
#ifndef WATCHDOG_S
#define WATCHDOG_S 100 /* seconds; below the runner's 120 s timeout */
#endif

static int rank, size, peer;
static pthread_barrier_t bar;
static uint32_t *sbuf_a, *sbuf_b, *rbuf_a, *rbuf_b;
static _Atomic int cur_round = -1, cur_iter = -1;

static void on_alarm(int sig)
{
    (void)sig;
    char msg[200];
    int n = snprintf(msg, sizeof msg,
                     "FAIL mt_cross.c: watchdog (%d s): rank %d stuck in round %d iteration %d "
                     "(cross Send/Recv deadlock)\n",
                     WATCHDOG_S, rank, atomic_load(&cur_round), atomic_load(&cur_iter));
    ssize_t w = write(2, msg, (size_t)(n > 0 ? n : 0));
    (void)w;
    _exit(1);
}

static uint32_t val(int src, int which, int round, int iter, int j)
{
    uint32_t x = (uint32_t)src * 0x9E3779B1u ^ (uint32_t)(which + 1) * 0x85EBCA77u ^
                 (uint32_t)(round * 64 + iter) * 0xC2B2AE3Du;
    return x ^ ((uint32_t)j * 2654435761u);
}

static void fill(uint32_t *b, int n, int which, int round, int iter)
{
    for (int j = 0; j < n; j++)
        b[j] = val(rank, which, round, iter, j);
}

static void verify(const uint32_t *b, int n, const MPI_Status *st, int tag, int which, int round, int iter,
                   const char *who)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "%s round %d iter %d: status source %d tag %d, expected %d/%d", who, round, iter, st->MPI_SOURCE,
          st->MPI_TAG, peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_UINT32_T, &cnt));
    CHECK(cnt == n, "%s round %d iter %d: count %d, expected %d", who, round, iter, cnt, n);
    for (int j = 0; j < n; j++)
        CHECK(b[j] == val(peer, which, round, iter, j),
              "%s round %d iter %d: word %d is 0x%08x, expected 0x%08x", who, round, iter, j, (unsigned)b[j],
              (unsigned)val(peer, which, round, iter, j));
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* The forced entry order on this rank for (round, iter): 0 = A first,
 * 1 = B first, 2 = both at once.  Even and odd ranks use different
 * sequences so that all NMODE x NMODE combinations occur. */
static int mode_of(int iter) { return (rank & 1) ? (iter + iter / NMODE) % NMODE : iter % NMODE; }

static int words(int round) { return round == 0 ? BIG_WORDS : SMALL_WORDS; }

static void do_send(const uint32_t *b, int n, int tag, int round)
{
    if (round == 0)
        CHECK_MPI(MPI_Send(b, n, MPI_UINT32_T, peer, tag, MPI_COMM_WORLD));
    else
        CHECK_MPI(MPI_Ssend(b, n, MPI_UINT32_T, peer, tag, MPI_COMM_WORLD));
}

static void *thread_a(void *unused)
{
    (void)unused;
    for (int round = 0; round < 2; round++) {
        int n = words(round);
        for (int iter = 0; iter < NITER; iter++) {
            MPI_Status st;
            fill(sbuf_a, n, 0, round, iter);
            memset(rbuf_a, 0, sizeof(uint32_t) * (size_t)n);
            pthread_barrier_wait(&bar);
            if (mode_of(iter) == 1)
                sleep_us(DELAY_US); /* let B block in MPI_Recv first */
            do_send(sbuf_a, n, TAG_A, round);
            CHECK_MPI(MPI_Recv(rbuf_a, n, MPI_UINT32_T, peer, TAG_B, MPI_COMM_WORLD, &st));
            verify(rbuf_a, n, &st, TAG_B, 1, round, iter, "thread A");
            pthread_barrier_wait(&bar);
        }
    }
    return NULL;
}

static void *thread_b(void *unused)
{
    (void)unused;
    for (int round = 0; round < 2; round++) {
        int n = words(round);
        for (int iter = 0; iter < NITER; iter++) {
            MPI_Status st;
            fill(sbuf_b, n, 1, round, iter);
            memset(rbuf_b, 0, sizeof(uint32_t) * (size_t)n);
            atomic_store(&cur_round, round);
            atomic_store(&cur_iter, iter);
            pthread_barrier_wait(&bar);
            if (mode_of(iter) == 0)
                sleep_us(DELAY_US); /* let A block in MPI_Send first */
            CHECK_MPI(MPI_Recv(rbuf_b, n, MPI_UINT32_T, peer, TAG_A, MPI_COMM_WORLD, &st));
            verify(rbuf_b, n, &st, TAG_A, 0, round, iter, "thread B");
            do_send(sbuf_b, n, TAG_B, round);
            pthread_barrier_wait(&bar);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_cross");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);

    peer = rank ^ 1;
    if (peer < size) {
        sbuf_a = malloc(sizeof(uint32_t) * BIG_WORDS);
        sbuf_b = malloc(sizeof(uint32_t) * BIG_WORDS);
        rbuf_a = malloc(sizeof(uint32_t) * BIG_WORDS);
        rbuf_b = malloc(sizeof(uint32_t) * BIG_WORDS);
        CHECK(sbuf_a && sbuf_b && rbuf_a && rbuf_b, "out of memory");
        CHECK(pthread_barrier_init(&bar, NULL, 2) == 0, "pthread_barrier_init failed");
        pthread_t ta, tb;
        CHECK(pthread_create(&ta, NULL, thread_a, NULL) == 0, "pthread_create failed");
        CHECK(pthread_create(&tb, NULL, thread_b, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(ta, NULL) == 0, "pthread_join failed");
        CHECK(pthread_join(tb, NULL) == 0, "pthread_join failed");
        pthread_barrier_destroy(&bar);
        free(sbuf_a);
        free(sbuf_b);
        free(rbuf_a);
        free(rbuf_b);
    }

    test_finish("mt_cross");
    alarm(0);
    return 0;
}
