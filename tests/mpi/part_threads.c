/* MPI-4 partitioned communication from many threads (MPI_THREAD_MULTIPLE):
 * the use case partitioned communication was made for.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out); every rank sends
 * one partitioned message to its peer and receives one from it per round.
 * For T = 1, 2 and 8 threads per rank, one channel pair per direction:
 * 4*T send partitions of SCOUNT ints, received as 2*T partitions of
 * 2*SCOUNT ints (a different layout, so one receive partition covers two
 * send partitions written by different threads).
 *
 * Per round the main thread starts both requests, then the T threads:
 *  - fill their own send partitions (after MPI_Start: legal, starting
 *    enables no transfer) and mark them ready, in a random (seeded) order:
 *      style 0: one MPI_Pready per partition, partitions t, t+T, ... shuffled
 *      style 1: MPI_Pready_range over the thread's contiguous block, in two
 *               ranges (second half first)
 *      style 2: one MPI_Pready_list with the thread's shuffled partitions
 *  - poll MPI_Parrived over their own receive partitions (t, t+T, ... in a
 *    shuffled order) and check every byte of a partition as soon as it is
 *    reported, then check that it stays reported.
 * The main thread then completes both requests (MPI_Wait, or MPI_Waitall on
 * odd rounds), checks the status and the whole buffer again, guard zone
 * included.  The receive buffer is reset to a sentinel before each start.
 */
#include "testutil.h"
#include "mpishim.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#define MAXT 8
#define SCOUNT 96 /* ints per send partition */
#define NROUND 6
#define GUARD 16
#define SENTINEL ((int)0xDEADBEEF)

static int rank, size, peer;

struct chan {
    int nt, tag, sparts, rparts, total;
    int *sbuf, *rbuf;
    MPI_Request s, r;
    int round;
    pthread_barrier_t go;
};

struct worker {
    struct chan *c;
    int t;
};

static int word(int src, int tag, int round, int i)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(tag + 5) * 0x85EBCA77u ^
                 (uint32_t)(round + 11) * 0xC2B2AE3Du ^ (uint32_t)i * 2654435761u;
    return (int)(x ^ (x >> 13));
}

static uint32_t rnd(uint32_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return *s;
}

static void shuffle(int *a, int n, uint32_t *seed)
{
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(rnd(seed) % (uint32_t)(i + 1)), x = a[i];
        a[i] = a[j];
        a[j] = x;
    }
}

static void check_rpart(const struct chan *c, int p, int t)
{
    int per = c->total / c->rparts;
    for (int i = p * per; i < (p + 1) * per; i++)
        CHECK(c->rbuf[i] == word(peer, c->tag, c->round, i),
              "%d threads, round %d, thread %d: receive partition %d int %d is %d, expected %d", c->nt, c->round, t,
              p, i, c->rbuf[i], word(peer, c->tag, c->round, i));
}

static void *worker(void *arg)
{
    struct worker *w = arg;
    struct chan *c = w->c;
    int t = w->t, nt = c->nt, style = c->round % 3;
    int mine[4 * MAXT], n = 0;
    uint32_t seed = 0x1234567u ^ (uint32_t)(rank * 7919 + t * 104729 + c->round * 1299709 + nt * 31);
    if (seed == 0)
        seed = 1;

    pthread_barrier_wait(&c->go); /* requests are started */

    /* send side: own partitions */
    int per_thread = c->sparts / nt;
    if (style == 1)
        for (int k = 0; k < per_thread; k++)
            mine[n++] = t * per_thread + k;
    else
        for (int p = t; p < c->sparts; p += nt)
            mine[n++] = p;
    if (style != 1)
        shuffle(mine, n, &seed);
    for (int k = 0; k < n; k++) {
        int p = mine[k];
        for (int i = p * SCOUNT; i < (p + 1) * SCOUNT; i++)
            c->sbuf[i] = word(rank, c->tag, c->round, i);
        if (style == 0)
            CHECK_MPI(MPI_Pready(p, c->s));
    }
    if (style == 1) {
        int lo = t * per_thread, mid = lo + per_thread / 2, hi = lo + per_thread - 1;
        CHECK_MPI(MPI_Pready_range(mid, hi, c->s));
        CHECK_MPI(MPI_Pready_range(lo, mid - 1, c->s));
    } else if (style == 2) {
        CHECK_MPI(MPI_Pready_list(n, mine, c->s));
    }

    /* receive side: poll own partitions, check each on arrival */
    int rmine[2 * MAXT], rn = 0, seen[2 * MAXT] = {0};
    for (int p = t; p < c->rparts; p += nt)
        rmine[rn++] = p;
    shuffle(rmine, rn, &seed);
    int left = rn;
    while (left > 0) {
        for (int k = 0; k < rn; k++) {
            int flag = 0;
            if (seen[k])
                continue;
            CHECK_MPI(MPI_Parrived(c->r, rmine[k], &flag));
            if (flag) {
                check_rpart(c, rmine[k], t);
                seen[k] = 1;
                left--;
            }
        }
        if (left > 0)
            sched_yield(); /* 2 cores, up to 32 threads */
    }
    for (int k = 0; k < rn; k++) {
        int flag = 0;
        CHECK_MPI(MPI_Parrived(c->r, rmine[k], &flag));
        CHECK(flag, "%d threads round %d: partition %d was reported, then no longer", nt, c->round, rmine[k]);
    }
    return NULL;
}

static void run(int nt)
{
    struct chan c = {.nt = nt, .tag = 10 + nt, .sparts = 4 * nt, .rparts = 2 * nt};
    c.total = c.sparts * SCOUNT;
    c.sbuf = calloc((size_t)c.total, sizeof(int)); /* zeroed: GCC 12 flags a buffer unwritten before a const parameter */
    c.rbuf = malloc(sizeof(int) * (size_t)(c.total + GUARD));
    CHECK(c.sbuf && c.rbuf, "out of memory");
    CHECK_MPI(MPI_Psend_init(c.sbuf, c.sparts, SCOUNT, MPI_INT, peer, c.tag, MPI_COMM_WORLD, MPI_INFO_NULL, &c.s));
    CHECK_MPI(MPI_Precv_init(c.rbuf, c.rparts, c.total / c.rparts, MPI_INT, peer, c.tag, MPI_COMM_WORLD,
                             MPI_INFO_NULL, &c.r));
    CHECK(pthread_barrier_init(&c.go, NULL, (unsigned)nt + 1) == 0, "pthread_barrier_init failed");

    for (int round = 0; round < NROUND; round++) {
        pthread_t th[MAXT];
        struct worker w[MAXT];
        MPI_Status st[2];
        int n = -1;
        c.round = round;
        for (int i = 0; i < c.total + GUARD; i++)
            c.rbuf[i] = SENTINEL;
        for (int t = 0; t < nt; t++) {
            w[t] = (struct worker){.c = &c, .t = t};
            CHECK(pthread_create(&th[t], NULL, worker, &w[t]) == 0, "pthread_create failed");
        }
        MPI_Request both[2] = {c.r, c.s};
        CHECK_MPI(MPI_Startall(2, both));
        pthread_barrier_wait(&c.go);
        for (int t = 0; t < nt; t++)
            CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");

        memset(st, 0x5a, sizeof st);
        if (round % 2) {
            CHECK_MPI(MPI_Waitall(2, both, st));
        } else {
            CHECK_MPI(MPI_Wait(&both[0], &st[0]));
            CHECK_MPI(MPI_Wait(&both[1], &st[1]));
        }
        CHECK(both[0] == c.r && both[1] == c.s, "completion changed a partitioned request handle");
        CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == c.tag,
              "%d threads round %d: receive status source %d tag %d, expected %d/%d", nt, round, st[0].MPI_SOURCE,
              st[0].MPI_TAG, peer, c.tag);
        CHECK_MPI(MPI_Get_count(&st[0], MPI_INT, &n));
        CHECK(n == c.total, "%d threads round %d: count %d, expected %d", nt, round, n, c.total);
        for (int p = 0; p < c.rparts; p++)
            check_rpart(&c, p, -1);
        for (int i = c.total; i < c.total + GUARD; i++)
            CHECK(c.rbuf[i] == SENTINEL, "%d threads round %d: guard int %d overwritten", nt, round, i);
    }
    CHECK_MPI(MPI_Request_free(&c.s));
    CHECK_MPI(MPI_Request_free(&c.r));
    pthread_barrier_destroy(&c.go);
    free(c.sbuf);
    free(c.rbuf);
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_without_partitioned("part_threads");
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "part_threads");
    peer = rank ^ 1;
    if (peer < size) {
        static const int nts[] = {1, 2, 8};
        for (int k = 0; k < 3; k++)
            run(nts[k]);
    }
    test_finish("part_threads");
    return 0;
}
