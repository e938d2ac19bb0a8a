/* Communicator construction from several threads at once (MPI_THREAD_MULTIPLE).
 *
 * Every rank runs NT threads; thread t first gets its own parent
 * communicator (MPI_Comm_dup of MPI_COMM_WORLD, made by the main thread in
 * thread order, so every rank makes them in the same order). Then all
 * threads at once, NITER times: MPI_Comm_dup of the parent, or every 4th
 * iteration an MPI_Comm_split of it (two colours, reversed key), check the
 * new communicator's size and rank, every 50th iteration an MPI_Allreduce
 * on it (the sum of world ranks of its members), then MPI_Comm_free.
 *
 * MPI allows this: collectives on one communicator are called by one thread
 * per rank, in the same order on every rank. A layer that makes hidden
 * collective constructors inside these calls (duplicates over the new
 * communicator) lets the threads' hidden calls interleave differently on
 * different ranks and hang: the runner's timeout catches that.
 */
#include "testutil.h"


#include <pthread.h>

#define NT 2
/* Constructors per thread. Above 2 ranks MPICH 4.0's context-id agreement
 * takes tens of ms per constructor here (4 ranks on 2 cores), and a
 * spreading map triples the constructors: fewer there, to fit the runner's
 * timeout. Open MPI 4.1.4 hung at 300 with the earlier duplicates. */
static int NITER = 300;

static int rank, size;
static MPI_Comm parent[NT];

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < NITER; i++) {
        MPI_Comm c = MPI_COMM_NULL;
        int split = i % 4 == 3;
        int color = rank % 2;
        if (split)
            CHECK_MPI(MPI_Comm_split(parent[t], color, size - rank, &c));
        else
            CHECK_MPI(MPI_Comm_dup(parent[t], &c));
        CHECK(c != MPI_COMM_NULL, "thread %d iteration %d: no communicator", t, i);
        int cr = -1, cs = -1;
        CHECK_MPI(MPI_Comm_size(c, &cs));
        CHECK_MPI(MPI_Comm_rank(c, &cr));
        int want_size = split ? (size + 1 - color) / 2 : size;
        CHECK(cs == want_size, "thread %d iteration %d: size %d, expected %d", t, i, cs, want_size);
        if (!split)
            CHECK(cr == rank, "thread %d iteration %d: rank %d in a dup, expected %d", t, i, cr, rank);
        if (i % 50 == 49) {
            int sum = -1, want = 0;
            for (int r = 0; r < size; r++)
                if (!split || r % 2 == color)
                    want += r;
            CHECK_MPI(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
            CHECK(sum == want, "thread %d iteration %d: allreduce %d, expected %d", t, i, sum, want);
        }
        CHECK_MPI(MPI_Comm_free(&c));
        CHECK(c == MPI_COMM_NULL, "thread %d iteration %d: handle not reset by MPI_Comm_free", t, i);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_skip_below_multiple(provided, "comm_threads");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
#ifdef MPICH_VERSION
    if (size > 2)
        NITER = 100;
#endif
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &parent[t]));
    pthread_t th[NT];
    for (int t = 0; t < NT; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
    for (int t = 0; t < NT; t++)
        pthread_join(th[t], NULL);
    for (int t = 0; t < NT; t++)
        CHECK_MPI(MPI_Comm_free(&parent[t]));
    test_finish("comm_threads");
    return 0;
}
