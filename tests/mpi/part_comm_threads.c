/* Partitioned channels on communicators that threads create concurrently
 * (MPI_THREAD_MULTIPLE).
 *
 * Every rank runs NT threads, each with its own parent (MPI_Comm_dup of
 * MPI_COMM_WORLD made in thread order by the main thread). All threads at
 * once, NITER times: MPI_Comm_dup of the parent (every 3rd iteration an
 * MPI_Comm_split of it with one colour and reversed keys, so ranks differ
 * from world ranks; every 3rd another an MPI_Comm_idup of it, completed
 * with MPI_Wait, whose id each member works out alone), then a partitioned exchange on the new communicator
 * with the partner (world rank ^ 1, found through the group), the same
 * user tag in every thread, 3 send partitions against 2 receive
 * partitions, data checked; then MPI_Comm_free, with the partitioned
 * requests freed before. Channels of different threads run between the
 * same two processes with the same tag at the same time: only the
 * communicator tells them apart. Ranks pair up (an odd last rank only
 * constructs).
 */
#include "testutil.h"
#include "mpishim.h"

#include <pthread.h>
#include <stdint.h>

#define NT 2
#define NITER 60
#define TAG 3
#define N 48 /* ints per message */

static int rank, size;
static MPI_Comm parent[NT];

static int word(int src, int t, int i, int k)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(t + 7) * 0x85EBCA77u ^
                 (uint32_t)(i + 3) * 0xC2B2AE3Du ^ (uint32_t)k * 2654435761u;
    return (int)(x ^ (x >> 15));
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int wpeer = rank ^ 1;
    int sbuf[N], rbuf[N];
    for (int i = 0; i < NITER; i++) {
        MPI_Comm c = MPI_COMM_NULL;
        if (i % 3 == 2) {
            CHECK_MPI(MPI_Comm_split(parent[t], 0, size - rank, &c));
        } else if (i % 3 == 1) {
            MPI_Request r;
            CHECK_MPI(MPI_Comm_idup(parent[t], &c, &r));
            CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        } else
            CHECK_MPI(MPI_Comm_dup(parent[t], &c));
        if (wpeer < size) {
            /* The partner's rank in c. */
            MPI_Group wg, cg;
            int peer = -1;
            CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
            CHECK_MPI(MPI_Comm_group(c, &cg));
            CHECK_MPI(MPI_Group_translate_ranks(wg, 1, &wpeer, cg, &peer));
            CHECK_MPI(MPI_Group_free(&wg));
            CHECK_MPI(MPI_Group_free(&cg));
            for (int k = 0; k < N; k++) {
                sbuf[k] = word(rank, t, i, k);
                rbuf[k] = -1;
            }
            MPI_Request s, r;
            CHECK_MPI(MPI_Precv_init(rbuf, 2, N / 2, MPI_INT, peer, TAG, c, MPI_INFO_NULL, &r));
            CHECK_MPI(MPI_Psend_init(sbuf, 3, N / 3, MPI_INT, peer, TAG, c, MPI_INFO_NULL, &s));
            CHECK_MPI(MPI_Start(&r));
            CHECK_MPI(MPI_Start(&s));
            CHECK_MPI(MPI_Pready_range(0, 2, s));
            MPI_Status st;
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG, "thread %d iteration %d: source %d tag %d", t, i,
                  st.MPI_SOURCE, st.MPI_TAG);
            for (int k = 0; k < N; k++)
                CHECK(rbuf[k] == word(wpeer, t, i, k),
                      "thread %d iteration %d: int %d is %d, expected %d (another thread's channel?)", t, i, k,
                      rbuf[k], word(wpeer, t, i, k));
            CHECK_MPI(MPI_Request_free(&s));
            CHECK_MPI(MPI_Request_free(&r));
        }
        CHECK_MPI(MPI_Comm_free(&c));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_without_partitioned("part_comm_threads");
    test_skip_below_multiple(provided, "part_comm_threads");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &parent[t]));
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_free(&parent[t]));
    test_finish("part_comm_threads");
    return 0;
}
