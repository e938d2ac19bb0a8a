/* MPISHIM_WATCHDOG: a stalled wait is reported (tests/run.sh checks the
 * report's lines; this program checks the data).
 *
 * Rank 0: two threads each wait in MPI_Recv (tags 77 and 78) for rank 1,
 * which sends only after a pause. With MPISHIM_WATCHDOG=1 the pause is
 * 2.5 s: no request of rank 0 completes for over a second, so its watchdog
 * must print what is pending (both receives, their peer, tag and
 * communicator). Then rank 0 raises SIGUSR1 while a third receive waits:
 * the watchdog reports at once, and the program must not die of the
 * signal. Without the variable the pause is short and there is no signal
 * (every other configuration of the runner). */
#include "testutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

static int rank, size;
static int watchdog;

static void *recv_main(void *arg)
{
    int tag = (int)(long)arg, v = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 1, tag, MPI_COMM_WORLD, &st));
    CHECK(v == tag * 3 && st.MPI_SOURCE == 1 && st.MPI_TAG == tag, "tag %d: got %d from %d tag %d", tag, v,
          st.MPI_SOURCE, st.MPI_TAG);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const char *w = getenv("MPISHIM_WATCHDOG");
    watchdog = w && atoi(w) > 0;
    test_skip_below_multiple(provided, "mt_watchdog");
    if (rank == 0) {
        pthread_t th[2];
        for (long t = 0; t < 2; t++)
            CHECK(pthread_create(&th[t], NULL, recv_main, (void *)(77 + t)) == 0, "pthread_create");
        for (int t = 0; t < 2; t++)
            pthread_join(th[t], NULL);
        pthread_t t3;
        CHECK(pthread_create(&t3, NULL, recv_main, (void *)79L) == 0, "pthread_create");
        if (watchdog) {
            test_sleep_ms(300);
            raise(SIGUSR1); /* the watchdog's handler: a report, not death */
            test_sleep_ms(500);
        }
        int go = 1;
        CHECK_MPI(MPI_Send(&go, 1, MPI_INT, 1, 80, MPI_COMM_WORLD));
        pthread_join(t3, NULL);
    } else if (rank == 1) {
        test_sleep_ms(watchdog ? 2500 : 10);
        for (int tag = 77; tag <= 78; tag++) {
            int v = tag * 3;
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, tag, MPI_COMM_WORLD));
        }
        int go = 0, v = 79 * 3;
        CHECK_MPI(MPI_Recv(&go, 1, MPI_INT, 0, 80, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 0, 79, MPI_COMM_WORLD));
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0)
        printf("OK mt_watchdog\n");
    MPI_Finalize();
    return 0;
}
