/* A buffered send is complete for its sender at once, and the host delivers
 * it even when the sender calls MPI_Finalize next, without waiting for its
 * receiver first. Rank 0 bsends messages of 8 B to 1 MiB (eager and
 * rendezvous sizes of every lane) to rank 1, detaches its buffer and goes
 * straight into MPI_Finalize; rank 1 receives them only after a pause, so
 * that rank 0 is finalizing by then, and checks count, source, tag and
 * every element. Rank 1 prints the OK line; the other ranks only
 * finalize. A lost message hangs rank 1: the watchdog names the case. */
#include "testutil.h"

#define NCASE 6
static const int counts[NCASE] = { 2, 1024, 4095, 16384, 65536, 262144 }; /* ints */

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_watchdog("p2p_bsend_finalize", 60);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs 2 ranks");
    int most = counts[NCASE - 1];
    int *msg = malloc(sizeof *msg * (size_t)most);
    CHECK(msg != NULL, "out of memory");

    if (rank == 0) {
        int bytes = 0;
        for (int k = 0; k < NCASE; k++) {
            int b = 0;
            MPI_Pack_size(counts[k], MPI_INT, MPI_COMM_WORLD, &b);
            bytes += b + MPI_BSEND_OVERHEAD;
        }
        char *buf = malloc((size_t)bytes);
        CHECK(buf != NULL, "out of memory");
        CHECK_MPI(MPI_Buffer_attach(buf, bytes));
        for (int k = 0; k < NCASE; k++) {
            for (int i = 0; i < counts[k]; i++)
                msg[i] = k * 1000003 + i;
            test_step = "MPI_Bsend";
            CHECK_MPI(MPI_Bsend(msg, counts[k], MPI_INT, 1, 40 + k, MPI_COMM_WORLD));
        }
        void *back = NULL;
        int len = 0;
        test_step = "MPI_Buffer_detach";
        CHECK_MPI(MPI_Buffer_detach(&back, &len));
        CHECK(back == buf && len == bytes, "detach gave %p, %d; attached %p, %d", back, len, (void *)buf, bytes);
        free(buf);
    } else if (rank == 1) {
        test_sleep_ms(300);
        static char step[64];
        for (int k = 0; k < NCASE; k++) {
            snprintf(step, sizeof step, "MPI_Recv of message %d (%d ints)", k, counts[k]);
            test_step = step;
            memset(msg, 0xff, sizeof *msg * (size_t)counts[k]);
            MPI_Status st;
            int c = -1;
            CHECK_MPI(MPI_Recv(msg, counts[k], MPI_INT, 0, 40 + k, MPI_COMM_WORLD, &st));
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &c));
            CHECK(c == counts[k], "message %d: count %d, expected %d", k, c, counts[k]);
            CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 40 + k, "message %d: source %d tag %d, expected 0 and %d",
                  k, st.MPI_SOURCE, st.MPI_TAG, 40 + k);
            for (int i = 0; i < counts[k]; i++)
                if (msg[i] != k * 1000003 + i) {
                    CHECK(0, "message %d: element %d is %d, expected %d", k, i, msg[i], k * 1000003 + i);
                    break;
                }
        }
        printf("OK p2p_bsend_finalize\n");
        fflush(stdout);
    }
    free(msg);
    test_step = "MPI_Finalize";
    CHECK_MPI(MPI_Finalize());
    return 0;
}
