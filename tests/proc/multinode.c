/* Helper program of the multi-node tests (tests/multinode.sh).
 *
 *   multinode names EXPECTED_NODES
 *       Every rank reports its MPI_Get_processor_name, whether the shim is
 *       active in it, and the value of MPISHIM_SPIN_US it sees; rank 0 prints
 *       one "rank R node NAME shim S spin V" line per rank and fails unless
 *       there are exactly EXPECTED_NODES distinct names. The runner sets
 *       MPISHIM_SPIN_US (a harmless knob) on the launcher's command line to
 *       see that MPISHIM_* reaches the ranks of remote nodes.
 *
 *   multinode traffic SECONDS
 *       NTHREADS threads per rank, each on its own duplicate of
 *       MPI_COMM_WORLD, exchange checked messages with the partner rank
 *       (rank ^ 1; with a round-robin mapping over nodes the partner is on
 *       another node) for SECONDS. Rank 0 prints "running" once every rank
 *       has exchanged a first round, so that the lost-node test knows when
 *       to kill a node. A rank that loses its partner is expected to be
 *       ended by the host MPI; this program never waits without a bound
 *       of its own beyond what MPI does.
 */
#include "../mpi/testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NTHREADS 4
#define NAME_LEN 64
#define WORDS 256

static MPI_Comm tcomm[NTHREADS];
static int g_rank, g_size;
#define BATCH 200 /* exchanges per thread between two checks of the clock */

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int peer = g_rank ^ 1;
    uint32_t out[WORDS], in[WORDS];
    uint32_t it = 0;
    for (int b = 0; b < BATCH; b++, it++) {
        for (int i = 0; i < WORDS; i++)
            out[i] = ((uint32_t)g_rank << 24) ^ ((uint32_t)t << 16) ^ (it * WORDS + (uint32_t)i);
        CHECK_MPI(MPI_Sendrecv(out, WORDS, MPI_UINT32_T, peer, t, in, WORDS, MPI_UINT32_T, peer, t,
                               tcomm[t], MPI_STATUS_IGNORE));
        for (int i = 0; i < WORDS; i++)
            CHECK(in[i] == (((uint32_t)peer << 24) ^ ((uint32_t)t << 16) ^ (it * WORDS + (uint32_t)i)),
                  "thread %d iteration %u word %d: got %u", t, it, i, in[i]);
    }
    return NULL;
}

static void traffic(double seconds)
{
    CHECK(g_size % 2 == 0, "traffic needs an even number of ranks");
    for (int t = 0; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &tcomm[t]));
    /* A first round with everyone: from here on a lost node is a lost peer
     * in the middle of traffic. */
    int one = 1, sum = 0;
    CHECK_MPI(MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    if (g_rank == 0) {
        printf("running\n");
        fflush(stdout);
    }
    double end = MPI_Wtime() + seconds;
    /* Partner threads must make the same number of exchanges (a Sendrecv
     * left without its partner waits forever), so the threads run batches
     * of BATCH and rank 0's clock decides, between batches, whether all go
     * on. */
    for (;;) {
        pthread_t th[NTHREADS];
        for (int t = 0; t < NTHREADS; t++)
            CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create");
        for (int t = 0; t < NTHREADS; t++)
            pthread_join(th[t], NULL);
        int more = MPI_Wtime() < end;
        CHECK_MPI(MPI_Bcast(&more, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (!more)
            break;
    }
    for (int t = 0; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_free(&tcomm[t]));
}

static void names(int expected)
{
    char mine[NAME_LEN + 48];
    char name[MPI_MAX_PROCESSOR_NAME];
    int len = 0;
    CHECK_MPI(MPI_Get_processor_name(name, &len));
    const char *spin = getenv("MPISHIM_SPIN_US");
    memset(mine, 0, sizeof mine);
    snprintf(mine, sizeof mine, "%.*s %d %s", NAME_LEN, name, test_shim_call("mpishim_active"),
             spin ? spin : "unset");
    char *all = NULL;
    if (g_rank == 0) {
        all = calloc((size_t)g_size, sizeof mine);
        CHECK(all != NULL, "calloc");
    }
    CHECK_MPI(MPI_Gather(mine, (int)sizeof mine, MPI_CHAR, all, (int)sizeof mine, MPI_CHAR, 0, MPI_COMM_WORLD));
    if (g_rank != 0)
        return;
    int distinct = 0;
    for (int r = 0; r < g_size; r++) {
        char n[NAME_LEN + 1], v[32];
        int s = -1;
        CHECK(sscanf(all + (size_t)r * sizeof mine, "%64s %d %31s", n, &s, v) == 3, "rank %d: bad report", r);
        printf("rank %d node %s shim %d spin %s\n", r, n, s, v);
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= strncmp(all + (size_t)q * sizeof mine, n, strlen(n)) == 0 &&
                    all[(size_t)q * sizeof mine + strlen(n)] == ' ';
        distinct += !seen;
    }
    fflush(stdout);
    free(all);
    CHECK(distinct == expected, "%d distinct processor names, expected %d", distinct, expected);
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &g_rank, &g_size);
    CHECK(argc == 3, "usage: multinode names N | traffic SECONDS");
    if (strcmp(argv[1], "names") == 0)
        names(atoi(argv[2]));
    else if (strcmp(argv[1], "traffic") == 0)
        traffic(atof(argv[2]));
    else
        CHECK(0, "unknown mode %s", argv[1]);
    test_finish("multinode");
    return 0;
}
