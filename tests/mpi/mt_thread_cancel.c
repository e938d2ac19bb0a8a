/* pthread_cancel of a thread blocked in MPI_Recv.
 *
 * MPI calls are not POSIX cancellation points, so a deferred cancel sent to
 * a thread blocked in MPI_Recv takes effect only at the thread's next
 * cancellation point after the call returns: the receive completes with
 * its data, and every other thread goes on. A shim whose wait sleeps in
 * pthread_cond_wait (a cancellation point) would instead unwind the thread
 * there, holding the progress domain's mutex with its on-stack sync object
 * still linked, and the other threads would hang.
 *
 * Ranks pair up (even with odd). On the even rank an "owner" thread enters
 * MPI_Recv first (it becomes the progress owner), then a "victim" thread
 * enters MPI_Recv and, with the owner polling, goes to sleep in the shim;
 * the main thread then cancels the victim and tells the odd rank to send
 * both messages. Checked: the victim's receive returned the right data
 * before the cancel acted (its join result is PTHREAD_CANCELED), the owner
 * got its message, and threaded traffic still works afterwards. A watchdog
 * turns a hang into a clear failure.
 *
 * On the shim's solo fast path (MPISHIM_SOLO, default) the first thread in
 * MPI waits in the host itself, and Open MPI's wait is a cancellation point
 * (below): so the program first makes two threads overlap in MPI until the
 * shim reports the runtime in charge (mpishim_solo() == 0), and only then
 * cancels. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#define TAG_OWN 21
#define TAG_VICTIM 22
#define TAG_GO 23
#define TAG_AFTER 24
#define N 64
#define WATCHDOG_S 60

static int rank, size, peer;
static _Atomic int victim_got, owner_got, entered;

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL mt_thread_cancel.c: watchdog: a thread hangs after pthread_cancel\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

static void check_buf(const int *b, int tag, const MPI_Status *st, const char *who)
{
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag, "%s: status source %d tag %d", who, st->MPI_SOURCE,
          st->MPI_TAG);
    for (int i = 0; i < N; i++)
        CHECK(b[i] == tag * 1000 + i, "%s: element %d is %d", who, i, b[i]);
}

/* Open MPI 4.1 itself waits in pthread_cond_wait (opal's wait_sync), so its
 * MPI_Recv is a cancellation point at MPI_THREAD_MULTIPLE (POSIX lets any
 * function be one): natively the victim dies inside the call and the
 * process then hangs (measured: raw, every run). Nothing to compare there;
 * under the shim's runtime the wait is the shim's, which is never one. */
static int native_ompi(void)
{
#if defined(OPEN_MPI)
    const char *e = getenv("TEST_EXPECT_SHIM");
    return !(e != NULL && strcmp(e, "active") == 0);
#else
    return 0;
#endif
}

static void *owner_main(void *arg)
{
    (void)arg;
    int b[N];
    MPI_Status st;
    atomic_store(&entered, 1);
    CHECK_MPI(MPI_Recv(b, N, MPI_INT, peer, TAG_OWN, MPI_COMM_WORLD, &st));
    check_buf(b, TAG_OWN, &st, "owner");
    atomic_store(&owner_got, 1);
    return NULL;
}

static void *victim_main(void *arg)
{
    (void)arg;
    int b[N];
    MPI_Status st;
    /* Deferred cancellation (the default): acts at a cancellation point. */
    atomic_store(&entered, 2);
    CHECK_MPI(MPI_Recv(b, N, MPI_INT, peer, TAG_VICTIM, MPI_COMM_WORLD, &st));
    check_buf(b, TAG_VICTIM, &st, "victim");
    atomic_store(&victim_got, 1);
    pthread_testcancel(); /* the pending cancel acts here */
    CHECK(0, "victim: pthread_testcancel returned although the thread was cancelled");
    return NULL;
}

static void send_msg(int tag)
{
    int b[N];
    for (int i = 0; i < N; i++)
        b[i] = tag * 1000 + i;
    CHECK_MPI(MPI_Send(b, N, MPI_INT, peer, tag, MPI_COMM_WORLD));
}

static void *after_main(void *arg);

/* Rounds of two threads receiving at once, until no even rank (where the
 * victim waits) is on the solo path (mpishim_solo, looked up so that the
 * program runs raw). */
static void leave_solo(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "mpishim_solo");
    int (*solo)(void) = NULL;
    if (sym)
        memcpy(&solo, &sym, sizeof solo);
    for (int round = 0;; round++) {
        int on = solo && rank % 2 == 0 && peer < size ? solo() : 0;
        CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &on, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
        if (!on)
            return;
        CHECK(round < 100, "the solo path is still on after %d rounds of overlapping threads", round);
        if (peer >= size)
            continue;
        pthread_t th[2];
        if (rank % 2 == 0) {
            for (long t = 0; t < 2; t++)
                CHECK(pthread_create(&th[t], NULL, after_main, (void *)t) == 0, "pthread_create");
            for (int t = 0; t < 2; t++)
                pthread_join(th[t], NULL);
        } else {
            test_sleep_ms(20); /* both receivers of the even rank are inside MPI by now */
            for (long t = 0; t < 2; t++)
                after_main((void *)t);
        }
    }
}

static void *after_main(void *arg)
{
    int t = (int)(long)arg, v = -1;
    if (rank % 2 == 0) {
        CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, peer, TAG_AFTER + t, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v == 100 + t, "after: thread %d got %d", t, v);
    } else {
        v = 100 + t;
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, peer, TAG_AFTER + t, MPI_COMM_WORLD));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    test_skip_below_multiple(provided, "mt_thread_cancel");
    if (native_ompi()) {
        if (rank == 0)
            printf("SKIP mt_thread_cancel: natively, Open MPI 4.1 hangs after a thread is cancelled inside MPI_Recv\n");
        MPI_Finalize();
        return 0;
    }
    signal(SIGALRM, on_alarm);
    alarm(WATCHDOG_S);
    peer = rank ^ 1;
    int active = peer < size;
    leave_solo();

    if (active && rank % 2 == 0) {
        pthread_t owner, victim;
        CHECK(pthread_create(&owner, NULL, owner_main, NULL) == 0, "pthread_create");
        while (atomic_load(&entered) < 1)
            sched_yield();
        test_sleep_ms(30); /* the owner is inside MPI_Recv and polls */
        CHECK(pthread_create(&victim, NULL, victim_main, NULL) == 0, "pthread_create");
        while (atomic_load(&entered) < 2)
            sched_yield();
        test_sleep_ms(30); /* the victim waits inside MPI_Recv (asleep in the shim) */
        CHECK(pthread_cancel(victim) == 0, "pthread_cancel");
        test_sleep_ms(10);
        send_msg(TAG_GO);
        void *res = NULL;
        CHECK(pthread_join(victim, &res) == 0, "join victim");
        CHECK(res == PTHREAD_CANCELED, "victim was not cancelled (join result %p)", res);
        CHECK(atomic_load(&victim_got), "victim cancelled before its receive returned");
        CHECK(pthread_join(owner, NULL) == 0, "join owner");
        CHECK(atomic_load(&owner_got), "owner did not get its message");
    } else if (active) {
        int go[N];
        CHECK_MPI(MPI_Recv(go, N, MPI_INT, peer, TAG_GO, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        send_msg(TAG_VICTIM);
        send_msg(TAG_OWN);
    }

    /* The shim's progress must still work for everyone. */
    if (active) {
        pthread_t th[3];
        for (long t = 0; t < 3; t++)
            CHECK(pthread_create(&th[t], NULL, after_main, (void *)t) == 0, "pthread_create");
        for (int t = 0; t < 3; t++)
            pthread_join(th[t], NULL);
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    alarm(0);
    if (rank == 0)
        printf("OK mt_thread_cancel\n");
    MPI_Finalize();
    return 0;
}
