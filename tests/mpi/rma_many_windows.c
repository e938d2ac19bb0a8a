/* A program may keep as many windows alive as the host allows it. Each
 * internal window the shim adds to a user window, and the communicator
 * under them, takes one of the host's communicator context ids (MPICH has
 * 2048 per process), so the shim must stop splitting windows before the
 * host runs out: 600 windows made with MPI_Win_create on MPI_COMM_WORLD,
 * all alive at once (with 4 internal windows each and no limit, MPICH
 * aborts with "Too many communicators"). At more than 2 ranks only 10: on
 * this project's 2 cores, 4 ranks of MPICH take 0.1 s per window, raw.
 * Then one fence epoch on the first,
 * a middle and the last window: each rank puts a value naming the window
 * and itself into its right neighbour's window, and checks what its left
 * neighbour put into its own. Freed in reverse order. Each window's int
 * has a page of its own: on Debian's MPICH 4.0.2 (ch4:ucx) a put into one
 * of many windows whose memory shares a page with others' did not land,
 * raw and under the shim alike. */
#include <stdlib.h>

#include "testutil.h"


int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_watchdog("rma_many_windows", 120);
    int me, np;
    test_rank_size(MPI_COMM_WORLD, &me, &np);
    const int nwin = np <= 2 ? 600 : 10;
    MPI_Win *w = malloc(nwin * sizeof *w);
    int **buf = malloc(nwin * sizeof *buf);
    CHECK(w && buf, "out of memory");
    for (int i = 0; i < nwin; i++) {
        CHECK(posix_memalign((void **)&buf[i], 4096, sizeof(int)) == 0, "out of memory");
        *buf[i] = -1;
    }

    test_step = "MPI_Win_create, all windows alive";
    for (int i = 0; i < nwin; i++)
        CHECK_MPI(MPI_Win_create(buf[i], sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &w[i]));

    test_step = "a put in the first, a middle and the last window";
    const int some[3] = { 0, nwin / 2, nwin - 1 };
    int right = (me + 1) % np, left = (me + np - 1) % np;
    int vals[3];
    for (int j = 0; j < 3; j++) {
        CHECK_MPI(MPI_Win_fence(0, w[some[j]]));
        vals[j] = me * 100000 + some[j];
        CHECK_MPI(MPI_Put(&vals[j], 1, MPI_INT, right, 0, 1, MPI_INT, w[some[j]]));
        CHECK_MPI(MPI_Win_fence(0, w[some[j]]));
        CHECK(*buf[some[j]] == left * 100000 + some[j], "window %d holds %d, expected %d", some[j], *buf[some[j]],
              left * 100000 + some[j]);
    }

    test_step = "MPI_Win_free, every window";
    for (int i = nwin - 1; i >= 0; i--)
        CHECK_MPI(MPI_Win_free(&w[i]));
    for (int i = 0; i < nwin; i++)
        free(buf[i]);
    free(w);
    free(buf);
    test_finish("rma_many_windows");
    return 0;
}
