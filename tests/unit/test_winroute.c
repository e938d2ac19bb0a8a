/* Unit tests of one-sided routing (src/vci/win.h) for a window with K = 4
 * internal windows: while one thread alone makes Puts and Gets they stay on
 * window 0 (the user's), whatever the target; once a second thread makes
 * one, Puts and Gets of every thread go to their target's window, and stay
 * there. Accumulates always go to their target's window, and mark the
 * window as having operations beyond window 0 (which flushes look at).
 * In a target's lock epoch that holds window 0 alone, an operation routed
 * to the target's window asks for that window to be locked first.
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

/* Routing with no lock epoch to extend. */
static MPI_Win data(int t)
{
    msh_win *extend = NULL;
    MPI_Win w = msh_win_route_data(wins[0], t, &extend);
    EXPECT(extend == NULL);
    return w;
}

static MPI_Win acc(int t)
{
    msh_win *extend = NULL;
    MPI_Win w = msh_win_route_acc(wins[0], t, &extend);
    EXPECT(extend == NULL);
    return w;
}

/* Every target from this thread goes to window 0 (want_solo) or to its own. */
static void expect_routes(int want_solo)
{
    for (int t = 0; t < NRANKS; t++) {
        MPI_Win got = data(t);
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
    EXPECT(same(acc(0), wins[0]));
    EXPECT(atomic_load(&entry.acc_others) == 0);
    EXPECT(same(acc(1), wins[1]));
    EXPECT(atomic_load(&entry.acc_others) == 1);

    pthread_t th;
    EXPECT(pthread_create(&th, NULL, second_thread, NULL) == 0);
    pthread_join(th, NULL);
    EXPECT(atomic_load(&entry.spread) == 1);
    expect_routes(0); /* the first thread spreads too, from now on */

    /* MPI_PROC_NULL and ranks outside the group: the user's window. */
    EXPECT(same(data(MPI_PROC_NULL), wins[0]));
    EXPECT(same(data(NRANKS), wins[0]));

    /* Lock epochs to targets 1 (window 0 locked alone) and 2 (its own
     * window locked too): only an operation to 1 asks for the extension;
     * one to 4 (window 0) does not, whatever its epoch. */
    static msh_win_tlock tl[NRANKS];
    atomic_store(&tl[1].state, MSH_WIN_TL_W0);
    atomic_store(&tl[2].state, MSH_WIN_TL_BOTH);
    atomic_store(&tl[4].state, MSH_WIN_TL_W0);
    atomic_store(&entry.tl, tl);
    atomic_store(&entry.nlocked, 3);
    msh_win *extend = NULL;
    EXPECT(same(msh_win_route_data(wins[0], 1, &extend), wins[1]) && extend == &entry);
    extend = NULL;
    EXPECT(same(msh_win_route_acc(wins[0], 1, &extend), wins[1]) && extend == &entry);
    EXPECT(same(data(2), wins[2]) && same(acc(2), wins[2]));
    EXPECT(same(data(4), wins[0]) && same(acc(4), wins[0]));
    EXPECT(same(data(3), wins[3])); /* no epoch of its own: lock_all, fence or PSCW */
    atomic_store(&entry.nlocked, 0);
    EXPECT(same(data(1), wins[1])); /* no epoch open through the table */

    msh_htab_remove(&msh_win_table, entry.h.key);
    if (failures == 0)
        printf("ok test_winroute\n");
    return failures != 0;
}
