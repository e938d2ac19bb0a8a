/* Requests started by one thread and completed by another.  A shim that
 * keeps per-thread request state (thread-local pools, a per-thread sync
 * object, a request that remembers the thread that posted it) must still
 * let any thread complete any request.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  On each
 * rank thread A only posts, thread B only completes; once A has posted the
 * last request of a phase it leaves MPI (it waits on a thread barrier or a
 * condition variable), so the progress those requests still need can only
 * come from B's completion calls.
 *   1. MPI_Irecv/MPI_Isend posted by A, handed to B through a queue
 *      (mutex + condition variable); B completes receives with MPI_Wait or
 *      an MPI_Test loop, sends with MPI_Wait.
 *   2. Windows of Irecv+Isend published by A through a C11 atomic counter
 *      (release/acquire); B completes a window with MPI_Waitall, an
 *      MPI_Testall loop or MPI_Waitsome.
 *   3. Persistent requests created by A (MPI_Send_init/MPI_Recv_init) and
 *      started by A every round (MPI_Start or MPI_Startall); B completes them
 *      (MPI_Waitall, MPI_Wait each, MPI_Testall loop) and hands them back; at
 *      the end B frees them with MPI_Request_free.
 * Statuses (source, tag, count), handle states (null / inactive) and every
 * payload word are checked.  Some messages are large (rendezvous).
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define N1 64     /* phase 1 messages per direction */
#define N2 96     /* phase 2 messages per direction */
#define W2 8      /* phase 2 window */
#define NR 60     /* phase 3 rounds */
#define BIG 16384 /* ints: 64 KB */
#define TAG1 51
#define TAG2 52
#define TAG3 53

static int rank, size, peer;
static pthread_barrier_t bar;

static int msg_len(int phase, int i) { return (i % 16 == 9) ? BIG : 2 + (i * 11 + phase) % 37; }

static int word(int src, int phase, int i, int j)
{
    uint32_t x =
        (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(phase + 1) * 0x85EBCA77u ^ (uint32_t)i * 0xC2B2AE3Du;
    return (int)(x ^ (uint32_t)j * 2654435761u);
}

static int *make_msg(int phase, int i)
{
    int n = msg_len(phase, i);
    int *b = malloc(sizeof(int) * (size_t)n);
    CHECK(b, "out of memory");
    for (int j = 0; j < n; j++)
        b[j] = word(rank, phase, i, j);
    return b;
}

static void check_recv(int phase, int i, const int *b, const MPI_Status *st, int tag)
{
    int n = msg_len(phase, i), cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "phase %d msg %d: status source %d tag %d, expected %d/%d", phase, i, st->MPI_SOURCE, st->MPI_TAG,
          peer, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == n, "phase %d msg %d: count %d, expected %d", phase, i, cnt, n);
    for (int j = 0; j < n; j++)
        CHECK(b[j] == word(peer, phase, i, j), "phase %d msg %d: word %d is %d, expected %d", phase, i, j,
              b[j], word(peer, phase, i, j));
}

/* ------------------------------------------------------------ phase 1: queue */
struct item {
    MPI_Request r;
    int is_recv, i;
};
static struct item queue[2 * N1];
static int q_head, q_tail;
static pthread_mutex_t q_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cv = PTHREAD_COND_INITIALIZER;
static int *p1_rbuf[N1], *p1_sbuf[N1];

static void push(struct item it)
{
    pthread_mutex_lock(&q_mu);
    queue[q_tail++] = it;
    pthread_cond_signal(&q_cv);
    pthread_mutex_unlock(&q_mu);
}

static struct item pop(void)
{
    pthread_mutex_lock(&q_mu);
    while (q_head == q_tail)
        pthread_cond_wait(&q_cv, &q_mu);
    struct item it = queue[q_head++];
    pthread_mutex_unlock(&q_mu);
    return it;
}

static void phase1_a(void)
{
    for (int i = 0; i < N1; i++) {
        struct item r = {MPI_REQUEST_NULL, 1, i}, s = {MPI_REQUEST_NULL, 0, i};
        p1_rbuf[i] = calloc((size_t)msg_len(1, i), sizeof(int));
        CHECK(p1_rbuf[i], "out of memory");
        p1_sbuf[i] = make_msg(1, i);
        CHECK_MPI(MPI_Irecv(p1_rbuf[i], msg_len(1, i), MPI_INT, peer, TAG1, MPI_COMM_WORLD, &r.r));
        CHECK_MPI(MPI_Isend(p1_sbuf[i], msg_len(1, i), MPI_INT, peer, TAG1, MPI_COMM_WORLD, &s.r));
        push(r);
        push(s);
    }
}

static void phase1_b(void)
{
    for (int k = 0; k < 2 * N1; k++) {
        struct item it = pop();
        MPI_Status st;
        CHECK(it.r != MPI_REQUEST_NULL, "phase 1: handed-over request is MPI_REQUEST_NULL");
        if (it.is_recv && it.i % 2) {
            int flag = 0;
            while (!flag) {
                CHECK_MPI(MPI_Test(&it.r, &flag, &st));
                if (!flag)
                    sched_yield();
            }
        } else {
            CHECK_MPI(MPI_Wait(&it.r, &st));
        }
        CHECK(it.r == MPI_REQUEST_NULL, "phase 1 msg %d: completion did not free the request", it.i);
        if (it.is_recv) {
            check_recv(1, it.i, p1_rbuf[it.i], &st, TAG1);
            free(p1_rbuf[it.i]);
        } else {
            free(p1_sbuf[it.i]);
        }
    }
}

/* ------------------------------------------------------------ phase 2: atomic */
static MPI_Request p2_req[2 * N2]; /* [2i] receive, [2i+1] send */
static int *p2_rbuf[N2], *p2_sbuf[N2];
static atomic_int p2_published; /* number of messages whose requests are visible to B */

static void phase2_a(void)
{
    for (int i = 0; i < N2; i++) {
        p2_rbuf[i] = calloc((size_t)msg_len(2, i), sizeof(int));
        CHECK(p2_rbuf[i], "out of memory");
        p2_sbuf[i] = make_msg(2, i);
        CHECK_MPI(MPI_Irecv(p2_rbuf[i], msg_len(2, i), MPI_INT, peer, TAG2, MPI_COMM_WORLD, &p2_req[2 * i]));
        CHECK_MPI(
            MPI_Isend(p2_sbuf[i], msg_len(2, i), MPI_INT, peer, TAG2, MPI_COMM_WORLD, &p2_req[2 * i + 1]));
        if ((i + 1) % W2 == 0 || i + 1 == N2)
            atomic_store_explicit(&p2_published, i + 1, memory_order_release);
    }
}

static void phase2_b(void)
{
    for (int i0 = 0; i0 < N2; i0 += W2) {
        int w = N2 - i0 < W2 ? N2 - i0 : W2, style = (i0 / W2) % 3;
        MPI_Request *rq = &p2_req[2 * i0];
        MPI_Status st[2 * W2];
        while (atomic_load_explicit(&p2_published, memory_order_acquire) < i0 + w)
            sched_yield();
        if (style == 0) {
            CHECK_MPI(MPI_Waitall(2 * w, rq, st));
        } else if (style == 1) {
            int flag = 0;
            while (!flag) {
                CHECK_MPI(MPI_Testall(2 * w, rq, &flag, st));
                if (!flag)
                    sched_yield();
            }
        } else {
            int left = 2 * w, out = 0, idx[2 * W2];
            MPI_Status sst[2 * W2];
            while (left > 0) {
                CHECK_MPI(MPI_Waitsome(2 * w, rq, &out, idx, sst));
                CHECK(out >= 1 && out <= left, "phase 2: Waitsome outcount %d with %d pending", out, left);
                for (int k = 0; k < out; k++) {
                    CHECK(idx[k] >= 0 && idx[k] < 2 * w && rq[idx[k]] == MPI_REQUEST_NULL,
                          "phase 2: Waitsome index %d not completed", idx[k]);
                    st[idx[k]] = sst[k];
                }
                left -= out;
            }
            CHECK_MPI(MPI_Waitsome(2 * w, rq, &out, idx, sst));
            CHECK(out == MPI_UNDEFINED, "phase 2: Waitsome on all-null array: outcount %d", out);
        }
        for (int k = 0; k < w; k++) {
            int i = i0 + k;
            CHECK(rq[2 * k] == MPI_REQUEST_NULL && rq[2 * k + 1] == MPI_REQUEST_NULL,
                  "phase 2 msg %d: request not freed (style %d)", i, style);
            check_recv(2, i, p2_rbuf[i], &st[2 * k], TAG2);
            free(p2_rbuf[i]);
            free(p2_sbuf[i]);
        }
    }
}

/* ------------------------------------------------------------ phase 3: persistent */
static MPI_Request p3_req[2]; /* [0] receive, [1] send */
static int *p3_rbuf, *p3_sbuf;
static int p3_started = -1, p3_done = -1; /* round numbers, under p3_mu */
static pthread_mutex_t p3_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t p3_cv = PTHREAD_COND_INITIALIZER;

static void phase3_a(void)
{
    p3_rbuf = malloc(sizeof(int) * BIG);
    p3_sbuf = malloc(sizeof(int) * BIG);
    CHECK(p3_rbuf && p3_sbuf, "out of memory");
    /* A persistent send has a fixed count: BIG ints (rendezvous) every
     * round, with contents that depend on the round. */
    CHECK_MPI(MPI_Recv_init(p3_rbuf, BIG, MPI_INT, peer, TAG3, MPI_COMM_WORLD, &p3_req[0]));
    CHECK_MPI(MPI_Send_init(p3_sbuf, BIG, MPI_INT, peer, TAG3, MPI_COMM_WORLD, &p3_req[1]));
    for (int round = 0; round < NR; round++) {
        pthread_mutex_lock(&p3_mu);
        while (p3_done != round - 1)
            pthread_cond_wait(&p3_cv, &p3_mu);
        pthread_mutex_unlock(&p3_mu);
        for (int j = 0; j < BIG; j++)
            p3_sbuf[j] = word(rank, 3, round, j);
        memset(p3_rbuf, 0, sizeof(int) * BIG);
        if (round % 2) {
            CHECK_MPI(MPI_Startall(2, p3_req));
        } else {
            CHECK_MPI(MPI_Start(&p3_req[0]));
            CHECK_MPI(MPI_Start(&p3_req[1]));
        }
        pthread_mutex_lock(&p3_mu);
        p3_started = round;
        pthread_cond_broadcast(&p3_cv);
        pthread_mutex_unlock(&p3_mu);
    }
}

static void phase3_b(void)
{
    for (int round = 0; round < NR; round++) {
        MPI_Status st[2];
        int cnt = -1;
        pthread_mutex_lock(&p3_mu);
        while (p3_started != round)
            pthread_cond_wait(&p3_cv, &p3_mu);
        pthread_mutex_unlock(&p3_mu);
        switch (round % 3) {
        case 0: CHECK_MPI(MPI_Waitall(2, p3_req, st)); break;
        case 1:
            CHECK_MPI(MPI_Wait(&p3_req[1], &st[1]));
            CHECK_MPI(MPI_Wait(&p3_req[0], &st[0]));
            break;
        default: {
            int flag = 0;
            while (!flag) {
                CHECK_MPI(MPI_Testall(2, p3_req, &flag, st));
                if (!flag)
                    sched_yield();
            }
        }
        }
        CHECK(p3_req[0] != MPI_REQUEST_NULL && p3_req[1] != MPI_REQUEST_NULL,
              "phase 3 round %d: completion freed a persistent request", round);
        CHECK(st[0].MPI_SOURCE == peer && st[0].MPI_TAG == TAG3, "phase 3 round %d: status source %d tag %d",
              round, st[0].MPI_SOURCE, st[0].MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st[0], MPI_INT, &cnt));
        CHECK(cnt == BIG, "phase 3 round %d: count %d, expected %d", round, cnt, BIG);
        for (int j = 0; j < BIG; j++)
            CHECK(p3_rbuf[j] == word(peer, 3, round, j), "phase 3 round %d: word %d is %d", round, j,
                  p3_rbuf[j]);
        pthread_mutex_lock(&p3_mu);
        p3_done = round;
        pthread_cond_broadcast(&p3_cv);
        pthread_mutex_unlock(&p3_mu);
    }
    /* inactive persistent requests created by A, freed by B */
    CHECK_MPI(MPI_Request_free(&p3_req[0]));
    CHECK_MPI(MPI_Request_free(&p3_req[1]));
    CHECK(p3_req[0] == MPI_REQUEST_NULL && p3_req[1] == MPI_REQUEST_NULL,
          "MPI_Request_free did not null the persistent handles");
    free(p3_rbuf);
    free(p3_sbuf);
}

static void *thread_a(void *unused)
{
    (void)unused;
    phase1_a();
    pthread_barrier_wait(&bar);
    phase2_a();
    pthread_barrier_wait(&bar);
    phase3_a();
    pthread_barrier_wait(&bar);
    return NULL;
}

static void *thread_b(void *unused)
{
    (void)unused;
    phase1_b();
    pthread_barrier_wait(&bar);
    phase2_b();
    pthread_barrier_wait(&bar);
    phase3_b();
    pthread_barrier_wait(&bar);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_handoff");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    peer = rank ^ 1;
    if (peer < size) {
        pthread_t ta, tb;
        CHECK(pthread_barrier_init(&bar, NULL, 2) == 0, "pthread_barrier_init failed");
        CHECK(pthread_create(&ta, NULL, thread_a, NULL) == 0, "pthread_create failed");
        CHECK(pthread_create(&tb, NULL, thread_b, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(ta, NULL) == 0, "pthread_join failed");
        CHECK(pthread_join(tb, NULL) == 0, "pthread_join failed");
        pthread_barrier_destroy(&bar);
    }

    test_finish("mt_handoff");
    return 0;
}
