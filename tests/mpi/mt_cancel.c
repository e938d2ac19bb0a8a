/* MPI_Cancel of receives while other threads communicate.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  Threads 1
 * and 2 of every rank ping-pong with the peer (MPI_Sendrecv, tags 1 and 2)
 * the whole time; thread 0 does the cancels, thread 3 helps it:
 *   A. pending receives that nothing can match (tag TAG_NEVER, nobody sends
 *      it yet), specific source and MPI_ANY_SOURCE, on MPI_COMM_WORLD and on
 *      a duplicate: MPI_Cancel then MPI_Wait / an MPI_Test loop; one kind is
 *      posted by thread 0 and cancelled + completed by thread 3 (MPI_Wait,
 *      an MPI_Test loop, MPI_Waitany with a null entry).  Every time
 *      MPI_Test_cancelled is true, the buffer is untouched and the handle is
 *      MPI_REQUEST_NULL afterwards.
 *   B. the communicators still work: after a handshake (so no TAG_NEVER
 *      message can exist before every cancel is done) TAG_NEVER is really
 *      exchanged on both communicators; exactly the sent message arrives
 *      (no cancelled receive swallowed it).
 *   C. cancel of a receive that has ALREADY matched: both sides post the
 *      receive, then MPI_Ssend to the peer (it completes only once the
 *      peer's receive has matched it), then an ack; after the peer's ack
 *      our receive is known to be matched, so MPI_Cancel must fail:
 *      MPI_Test_cancelled false, data and status intact.  Small and
 *      rendezvous-size messages.
 *   D. the same with a plain MPI_Send + ack: there either outcome is legal,
 *      but exactly one: cancelled (buffer untouched, and the message is then
 *      received by a new receive) or not (data in the buffer).
 * At the end, after a barrier, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG)
 * finds nothing left over.  A watchdog reports a hang (e.g. a message lost
 * to a cancelled receive) with the step it was in.
 */
#include "testutil.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define NCHAT 200
#define NPEND 24
#define NMATCH 8
#define BIG (64 * 1024) /* ints: 256 KB */
#define TAG_NEVER 900
#define TAG_SYNC 901
#define TAG_M 902 /* part C data */
#define TAG_ACK 903
#define TAG_D 904 /* part D data */
#define TAG_DACK 905
#ifndef WATCHDOG_S
#define WATCHDOG_S 100 /* seconds; below the runner's 120 s timeout */
#endif

static int rank, size, peer;
static MPI_Comm dupc;
static const char *_Atomic step = "start";

static void on_alarm(int sig)
{
    (void)sig;
    char msg[200];
    int n = snprintf(msg, sizeof msg, "FAIL mt_cancel.c: watchdog (%d s): rank %d hung in step: %s\n",
                     WATCHDOG_S, rank, atomic_load(&step));
    ssize_t w = write(2, msg, (size_t)(n > 0 ? n : 0));
    (void)w;
    _exit(1);
}

static int val(int src, int what, int i, int j)
{
    return (int)((uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(what * 1000 + i) * 0x85EBCA77u ^
                 (uint32_t)j * 2654435761u);
}

/* ------------------------------------------------------------ chatter */
static void *chatter(void *arg)
{
    int tag = (int)(intptr_t)arg;
    for (int i = 0; i < NCHAT; i++) {
        int out[4], in[4] = {-1, -1, -1, -1}, cnt = -1;
        MPI_Status st;
        for (int j = 0; j < 4; j++)
            out[j] = val(rank, tag, i, j);
        CHECK_MPI(MPI_Sendrecv(out, 4, MPI_INT, peer, tag, in, 4, MPI_INT, peer, tag, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag, "chatter tag %d msg %d: status source %d tag %d",
              tag, i, st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 4, "chatter tag %d msg %d: count %d", tag, i, cnt);
        for (int j = 0; j < 4; j++)
            CHECK(in[j] == val(peer, tag, i, j), "chatter tag %d msg %d: word %d is %d", tag, i, j, in[j]);
    }
    return NULL;
}

/* ------------------------------------------------------------ thread 3: cancels for thread 0 */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static MPI_Request handed = MPI_REQUEST_NULL;
static int handed_full, handed_done, helper_quit;
static int handed_cancelled;

static void *helper(void *unused)
{
    (void)unused;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (!handed_full && !helper_quit)
            pthread_cond_wait(&cv, &mu);
        if (helper_quit && !handed_full) {
            pthread_mutex_unlock(&mu);
            return NULL;
        }
        MPI_Request r = handed;
        pthread_mutex_unlock(&mu);

        MPI_Status st;
        int c = 0;
        CHECK_MPI(MPI_Cancel(&r));
        CHECK(r != MPI_REQUEST_NULL, "helper: MPI_Cancel freed the request");
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL, "helper: MPI_Wait on a cancelled request did not free it");
        CHECK_MPI(MPI_Test_cancelled(&st, &c));

        pthread_mutex_lock(&mu);
        handed_full = 0;
        handed_done = 1;
        handed_cancelled = c;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
    }
}

/* ------------------------------------------------------------ thread 0 */
static void part_a(void)
{
    atomic_store(&step, "A: cancel pending receives");
    for (int i = 0; i < NPEND; i++) {
        int buf[2] = {-1, -1}, c = 0, kind = i % 4;
        MPI_Comm comm = (i / 4) % 2 ? dupc : MPI_COMM_WORLD;
        int src = (i / 8) % 2 ? MPI_ANY_SOURCE : peer;
        MPI_Request r;
        MPI_Status st;
        CHECK_MPI(MPI_Irecv(buf, 2, MPI_INT, src, TAG_NEVER, comm, &r));
        if (i % 2)
            sched_yield(); /* let the chatter threads run in between */
        if (kind == 3) { /* cancelled and completed by thread 3 */
            pthread_mutex_lock(&mu);
            handed = r;
            handed_done = 0;
            handed_full = 1;
            pthread_cond_broadcast(&cv);
            while (!handed_done)
                pthread_cond_wait(&cv, &mu);
            c = handed_cancelled;
            pthread_mutex_unlock(&mu);
            CHECK(c, "A%d: MPI_Test_cancelled false for a receive cancelled by another thread", i);
        } else {
            CHECK_MPI(MPI_Cancel(&r));
            CHECK(r != MPI_REQUEST_NULL, "A%d: MPI_Cancel freed the request", i);
            if (kind == 0) {
                CHECK_MPI(MPI_Wait(&r, &st));
            } else if (kind == 1) {
                int flag = 0;
                while (!flag)
                    CHECK_MPI(MPI_Test(&r, &flag, &st));
            } else {
                int idx = -1;
                MPI_Request arr[2] = {MPI_REQUEST_NULL, r};
                CHECK_MPI(MPI_Waitany(2, arr, &idx, &st));
                CHECK(idx == 1, "A%d: MPI_Waitany index %d", i, idx);
                r = arr[1];
            }
            CHECK(r == MPI_REQUEST_NULL, "A%d: completion of a cancelled request did not free it", i);
            CHECK_MPI(MPI_Test_cancelled(&st, &c));
            CHECK(c, "A%d: MPI_Test_cancelled false for a receive that nothing could match", i);
        }
        CHECK(buf[0] == -1 && buf[1] == -1, "A%d: cancelled receive wrote {%d, %d}", i, buf[0], buf[1]);
    }
}

static void part_b(void)
{
    atomic_store(&step, "B: handshake after the cancels");
    int x = rank, y = -1;
    CHECK_MPI(MPI_Sendrecv(&x, 1, MPI_INT, peer, TAG_SYNC, &y, 1, MPI_INT, peer, TAG_SYNC, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE));
    CHECK(y == peer, "B: handshake got %d", y);
    atomic_store(&step, "B: TAG_NEVER really exchanged after the cancels");
    for (int k = 0; k < 2; k++) {
        MPI_Comm comm = k ? dupc : MPI_COMM_WORLD;
        int out[2] = {val(rank, 50, k, 0), val(rank, 50, k, 1)}, in[3] = {-1, -1, -1}, cnt = -1, c = 1;
        MPI_Status st;
        CHECK_MPI(MPI_Sendrecv(out, 2, MPI_INT, peer, TAG_NEVER, in, 3, MPI_INT, peer, TAG_NEVER, comm, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_NEVER, "B%d: status source %d tag %d", k,
              st.MPI_SOURCE, st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == 2, "B%d: count %d", k, cnt);
        CHECK(in[0] == val(peer, 50, k, 0) && in[1] == val(peer, 50, k, 1) && in[2] == -1,
              "B%d: got {%d, %d, %d}", k, in[0], in[1], in[2]);
        CHECK_MPI(MPI_Test_cancelled(&st, &c));
        CHECK(!c, "B%d: MPI_Test_cancelled true for a normal receive", k);
    }
}

static void part_c(int *rb, int *sb)
{
    atomic_store(&step, "C: cancel a matched receive (MPI_Ssend + ack)");
    for (int i = 0; i < NMATCH; i++) {
        int n = (i % 2) ? BIG : 3, cnt = -1, c = 1, ack = -1, one = 1;
        MPI_Request r;
        MPI_Status st;
        for (int j = 0; j < n; j++) {
            sb[j] = val(rank, 60, i, j);
            rb[j] = -1;
        }
        CHECK_MPI(MPI_Irecv(rb, n, MPI_INT, peer, TAG_M, MPI_COMM_WORLD, &r));
        /* completes only when the peer's receive has matched it */
        CHECK_MPI(MPI_Ssend(sb, n, MPI_INT, peer, TAG_M, MPI_COMM_WORLD));
        CHECK_MPI(MPI_Sendrecv(&one, 1, MPI_INT, peer, TAG_ACK, &ack, 1, MPI_INT, peer, TAG_ACK,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        /* the peer's MPI_Ssend returned: our receive r has matched */
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK(r == MPI_REQUEST_NULL, "C%d: MPI_Wait did not free the request", i);
        CHECK_MPI(MPI_Test_cancelled(&st, &c));
        CHECK(!c, "C%d: MPI_Cancel succeeded on a receive that had already matched (MPI_Ssend completed)", i);
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_M, "C%d: status source %d tag %d", i, st.MPI_SOURCE,
              st.MPI_TAG);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == n, "C%d: count %d, expected %d", i, cnt, n);
        for (int j = 0; j < n; j++)
            CHECK(rb[j] == val(peer, 60, i, j), "C%d: word %d is %d", i, j, rb[j]);
    }
}

static void part_d(int *rb, int *sb)
{
    atomic_store(&step, "D: cancel after MPI_Send + ack");
    for (int i = 0; i < NMATCH; i++) {
        int n = (i % 2) ? 3 : BIG, cnt = -1, c = -1, ack = -1, one = 1;
        MPI_Request r, s;
        MPI_Status st;
        for (int j = 0; j < n; j++) {
            sb[j] = val(rank, 70, i, j);
            rb[j] = -1;
        }
        CHECK_MPI(MPI_Irecv(rb, n, MPI_INT, peer, TAG_D, MPI_COMM_WORLD, &r));
        CHECK_MPI(MPI_Isend(sb, n, MPI_INT, peer, TAG_D, MPI_COMM_WORLD, &s));
        CHECK_MPI(MPI_Sendrecv(&one, 1, MPI_INT, peer, TAG_DACK, &ack, 1, MPI_INT, peer, TAG_DACK,
                               MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Cancel(&r));
        CHECK_MPI(MPI_Wait(&r, &st));
        CHECK_MPI(MPI_Test_cancelled(&st, &c));
        if (c) { /* legal: then no part of the buffer was touched and the message is still there */
            for (int j = 0; j < n; j++)
                CHECK(rb[j] == -1, "D%d: cancelled receive wrote word %d", i, j);
            CHECK_MPI(MPI_Recv(rb, n, MPI_INT, peer, TAG_D, MPI_COMM_WORLD, &st));
        }
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_D, "D%d: status source %d tag %d (cancelled %d)", i,
              st.MPI_SOURCE, st.MPI_TAG, c);
        CHECK_MPI(MPI_Get_count(&st, MPI_INT, &cnt));
        CHECK(cnt == n, "D%d: count %d, expected %d", i, cnt, n);
        for (int j = 0; j < n; j++)
            CHECK(rb[j] == val(peer, 70, i, j), "D%d: word %d is %d (cancelled %d)", i, j, rb[j], c);
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
    }
}

static void *canceller(void *unused)
{
    (void)unused;
    int *rb = malloc(sizeof(int) * BIG), *sb = malloc(sizeof(int) * BIG);
    CHECK(rb && sb, "out of memory");
    part_a();
    part_b();
    part_c(rb, sb);
    part_d(rb, sb);
    free(rb);
    free(sb);
    pthread_mutex_lock(&mu);
    helper_quit = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_cancel");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dupc));
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);

    peer = rank ^ 1;
    if (peer < size) {
        pthread_t th[4];
        CHECK(pthread_create(&th[0], NULL, canceller, NULL) == 0, "pthread_create failed");
        CHECK(pthread_create(&th[1], NULL, chatter, (void *)(intptr_t)1) == 0, "pthread_create failed");
        CHECK(pthread_create(&th[2], NULL, chatter, (void *)(intptr_t)2) == 0, "pthread_create failed");
        CHECK(pthread_create(&th[3], NULL, helper, NULL) == 0, "pthread_create failed");
        for (int t = 0; t < 4; t++)
            CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");
    }

    atomic_store(&step, "final barrier and leftover check");
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    for (int k = 0; k < 2; k++) {
        int flag = 1;
        CHECK_MPI(
            MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, k ? dupc : MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE));
        CHECK(!flag, "a message is left over on %s after everything was received",
              k ? "the duplicate" : "MPI_COMM_WORLD");
    }
    CHECK_MPI(MPI_Comm_free(&dupc));
    test_finish("mt_cancel");
    alarm(0);
    return 0;
}
