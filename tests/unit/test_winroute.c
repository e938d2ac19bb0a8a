/* Unit tests of one-sided routing (src/vci/win.h) for a window with K = 4
 * internal windows: while one thread alone makes Puts and Gets they stay on
 * window 0 (the user's), whatever the target; once a second thread makes
 * one, Puts and Gets of every thread go to their target's window, and stay
 * there. Accumulates always go to their target's window, and mark the
 * window as having operations beyond window 0 (which flushes look at).
 *
 * No MPI calls: the entry is built by hand as msh_win_make would, with
 * made-up handles, and put into the window table. */
#include <mpi.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vci/win.h"
#include "unit.h"

enum { K = 4, NRANKS = 8 };

static MPI_Win wins[K];
static uint8_t tmap[NRANKS];
static msh_win entry;

static int same(MPI_Win a, MPI_Win b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

/* Every target from this thread goes to window 0 (want_solo) or to its own. */
static void expect_routes(int want_solo)
{
    for (int t = 0; t < NRANKS; t++) {
        MPI_Win got = msh_win_route_data(wins[0], t);
        EXPECT(same(got, want_solo ? wins[0] : wins[t % K]));
    }
}

static void *second_thread(void *arg)
{
    (void)arg;
    expect_routes(0); /* the second thread spreads at its first Put */
    return NULL;
}

int main(void)
{
    for (int i = 0; i < K; i++)
        memset(&wins[i], 0x10 + i, sizeof wins[i]);
    for (int r = 0; r < NRANKS; r++)
        tmap[r] = (uint8_t)(r % K);
    entry.user = wins[0];
    entry.h.key = msh_handle_key(&wins[0], sizeof wins[0]);
    entry.k = K;
    entry.wins = wins;
    entry.tmap = tmap;
    entry.nranks = NRANKS;
    entry.route = MSH_WIN_ROUTE_TARGET;
    EXPECT(msh_htab_insert(&msh_win_table, &entry.h) == MPI_SUCCESS);
    atomic_store(&msh_win_nsplit, 1);

    expect_routes(1); /* one thread: window 0 */
    expect_routes(1); /* still */
    EXPECT(atomic_load(&entry.spread) == 0);
    EXPECT(atomic_load(&entry.solo) != 0);

    /* An accumulate to rank 0 stays on window 0; to rank 1 it goes to
     * window 1 and marks the others as used. */
    EXPECT(same(msh_win_route_acc(wins[0], 0), wins[0]));
    EXPECT(atomic_load(&entry.acc_others) == 0);
    EXPECT(same(msh_win_route_acc(wins[0], 1), wins[1]));
    EXPECT(atomic_load(&entry.acc_others) == 1);

    pthread_t th;
    EXPECT(pthread_create(&th, NULL, second_thread, NULL) == 0);
    pthread_join(th, NULL);
    EXPECT(atomic_load(&entry.spread) == 1);
    expect_routes(0); /* the first thread spreads too, from now on */

    /* MPI_PROC_NULL and ranks outside the group: the user's window. */
    EXPECT(same(msh_win_route_data(wins[0], MPI_PROC_NULL), wins[0]));
    EXPECT(same(msh_win_route_data(wins[0], NRANKS), wins[0]));

    msh_htab_remove(&msh_win_table, entry.h.key);
    if (failures == 0)
        printf("ok test_winroute\n");
    return failures != 0;
}
