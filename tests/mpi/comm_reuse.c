/* A communicator's handle freed and given to a new communicator: what the
 * shim knew of the old one must not stick to the new one. Each round makes
 * A (MPI_Comm_dup_with_info, mpi_assert_no_any_tag: a wildcard tag on it is
 * refused), exchanges a message on A, frees it, makes B with a plain
 * MPI_Comm_dup (MPICH hands out the freed handle again; Open MPI's may land
 * on the freed object's address), and receives on B with MPI_ANY_TAG, which
 * must work: the data, source and tag are checked. With
 * MPI_THREAD_MULTIPLE a second thread of rank 1 receives on A and then on
 * B after the main thread freed A and made B (pthread barriers order the
 * two threads, as the standard asks of a program). The rounds
 * where B got A's handle are counted and printed, not required. */
#include "testutil.h"

#include <pthread.h>

#define ROUNDS 100

static MPI_Comm shared_comm;
static pthread_barrier_t bar;

/* Rank 1's receive with a wildcard tag, checked (round r, message m). */
static void recv_any_tag(MPI_Comm c, int r, int m)
{
    int v = -1;
    MPI_Status st;
    MPI_Request q;
    CHECK_MPI(MPI_Irecv(&v, 1, MPI_INT, 0, MPI_ANY_TAG, c, &q));
    CHECK_MPI(MPI_Wait(&q, &st));
    CHECK(v == r * 10 + m && st.MPI_SOURCE == 0 && st.MPI_TAG == 20 + m,
          "round %d message %d: got %d from %d tag %d", r, m, v, st.MPI_SOURCE, st.MPI_TAG);
}

/* Rank 1's receive with the tag named, on the communicator that asserted
 * no wildcard tag. */
static void recv_tagged(MPI_Comm c, int r, int m)
{
    int v = -1;
    MPI_Status st;
    CHECK_MPI(MPI_Recv(&v, 1, MPI_INT, 0, 20 + m, c, &st));
    CHECK(v == r * 10 + m && st.MPI_SOURCE == 0 && st.MPI_TAG == 20 + m,
          "round %d message %d on the asserting communicator: got %d from %d tag %d", r, m, v, st.MPI_SOURCE,
          st.MPI_TAG);
}

static void *second(void *arg)
{
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_wait(&bar); /* A made */
        recv_tagged(shared_comm, r, 1);
        pthread_barrier_wait(&bar); /* done with A */
        pthread_barrier_wait(&bar); /* A freed, B made in its place, message 0 taken */
        recv_any_tag(shared_comm, r, 2);
        pthread_barrier_wait(&bar); /* done with B */
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_SINGLE);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int threaded = provided == MPI_THREAD_MULTIPLE;
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    pthread_t t;
    if (threaded && rank == 1) {
        pthread_barrier_init(&bar, NULL, 2);
        CHECK(pthread_create(&t, NULL, second, NULL) == 0, "pthread_create failed");
    }
    int reused = 0;
    for (int r = 0; r < ROUNDS; r++) {
        MPI_Comm a, b;
        CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &a));
        MPI_Comm a_handle = a;
        int nmsg = threaded ? 2 : 1; /* message 1 is the second thread's */
        if (rank == 0) {
            for (int m = 0; m < nmsg; m++) {
                int v = r * 10 + m;
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, 20 + m, a));
            }
        } else if (rank == 1) {
            if (threaded) {
                shared_comm = a;
                pthread_barrier_wait(&bar);
            }
            recv_tagged(a, r, 0);
            if (threaded)
                pthread_barrier_wait(&bar);
        }
        CHECK_MPI(MPI_Comm_free(&a));
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &b));
        reused += b == a_handle;
        if (rank == 0) {
            int v = r * 10;
            CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, 20, b));
            if (threaded) {
                v = r * 10 + 2;
                CHECK_MPI(MPI_Send(&v, 1, MPI_INT, 1, 22, b));
            }
        } else if (rank == 1) {
            recv_any_tag(b, r, 0); /* before the second thread's: matches message 0 */
            if (threaded) {
                shared_comm = b;
                pthread_barrier_wait(&bar);
                pthread_barrier_wait(&bar);
            }
        }
        CHECK_MPI(MPI_Comm_free(&b));
    }
    if (threaded && rank == 1) {
        pthread_join(t, NULL);
        pthread_barrier_destroy(&bar);
    }
    CHECK_MPI(MPI_Info_free(&info));
    if (rank == 1)
        printf("comm_reuse: %d of %d new communicators had the freed one's handle\n", reused, ROUNDS);
    test_finish("comm_reuse");
    return 0;
}
