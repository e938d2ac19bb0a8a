/* Unit tests of communicator routing (src/vci/comm.h): the duplicate a
 * send from rank a to rank b with tag t goes to is the one the matching
 * receive at b (source a, tag t) goes to, under every map policy and
 * assertion set; that is the ordering rule the shim relies on (MPI matches
 * only within one communicator). A receive's wildcard is allowed only where
 * the effective map keeps every message it could match on one duplicate.
 *
 * No MPI calls: the two processes' entries are built by hand as
 * msh_comm_register would, each with its own duplicate handles (handles are
 * local; duplicate i is the same communicator on every rank because all
 * ranks make them in the same order), home VCI and thread VCI. With a lane
 * an entry has no duplicates: the way is the VCI (VCI i of one process
 * reaches VCI i of another), so there the VCI must agree, also under the
 * thread map. The call convention is p2p.c's: a sender routes (my rank,
 * dest, tag), a receiver (source, my rank, tag). */
#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "vci/comm.h"
#include "vci/vci.h"
#include "unit.h"


static const struct {
    msh_map_policy map;
    const char *name;
} maps[] = {
    { MSH_MAP_COMM, "comm" }, { MSH_MAP_TAG, "tag" }, { MSH_MAP_PEER, "peer" },
    { MSH_MAP_HASH, "hash" }, { MSH_MAP_THREAD, "thread" },
};
enum { NMAPS = sizeof maps / sizeof maps[0] };

#define BOTH (MSH_ASSERT_NO_ANY_TAG | MSH_ASSERT_NO_ANY_SOURCE)
static const struct {
    unsigned asserts;
    const char *name;
} asets[] = {
    { 0, "none" },
    { MSH_ASSERT_NO_ANY_TAG, "no_any_tag" },
    { MSH_ASSERT_NO_ANY_SOURCE, "no_any_source" },
    { BOTH, "both" },
    { BOTH | MSH_ASSERT_ALLOW_OVERTAKING, "both+allow_overtaking" },
};
enum { NASETS = sizeof asets / sizeof asets[0] };

static const int nvcis[] = { 1, 2, 3, 4, 7, 16, 64 };
static const int nranks[] = { 1, 2, 3, 5, 17 };
/* Small tags and large ones (up to what MPICH's and Open MPI's tag_ub allow). */
static const int tags[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 31, 63, 64, 65,
                            100, 1000, 4095, 32767, 65535, 1 << 20, INT_MAX - 1, INT_MAX };
enum { NTAGS = sizeof tags / sizeof tags[0], MAXV = 64, MAXR = 17 };

/* A made-up handle (an int in MPICH, a pointer in Open MPI): distinct per
 * process and duplicate, so that equal handles cannot fake agreement. */
static MPI_Comm fake_comm(unsigned v)
{
    MPI_Comm c;
    memset(&c, 0, sizeof c);
    memcpy(&c, &v, sizeof v < sizeof c ? sizeof v : sizeof c);
    return c;
}

/* One process's view of the communicator. */
typedef struct side {
    msh_comm mc;
    MPI_Comm user;
    MPI_Comm dups[MAXV];
    int thread_vci;
} side;

/* As msh_comm_register builds an entry: the effective map, and one way
 * per VCI when it spreads, a duplicate each without a lane. */
static void side_init(side *s, int rank, int nv, msh_map_policy want, unsigned asserts, int lane)
{
    memset(s, 0, sizeof *s);
    s->user = fake_comm(0x84000000u + (unsigned)rank * 0x1000u);
    s->mc.user = s->user;
    s->mc.rank = rank;
    s->mc.vci = (rank * 5 + 3) % nv;          /* home VCIs differ between ranks */
    s->mc.asserts = asserts;
    s->mc.map = msh_map_effective(want, asserts);
    s->mc.nways = s->mc.map != MSH_MAP_COMM && nv > 1 ? nv : 0;
    s->mc.ndups = lane ? 0 : s->mc.nways;
    for (int i = 0; i < nv; i++)
        s->dups[i] = fake_comm(0x84000000u + (unsigned)rank * 0x1000u + 1u + (unsigned)i);
    s->mc.dups = s->mc.ndups ? s->dups : NULL;
    s->thread_vci = (rank * 7 + 1) % nv;      /* so do the threads' own VCIs */
}

static int vci_index(const msh_route *rt) { return (int)(rt->vci - msh_vci_get(0)); }

/* The way a route went on side s: the duplicate (-1 the communicator
 * itself), on a lane the VCI; -2 a handle that is neither (a bug). */
static int dup_index(const side *s, const msh_route *rt)
{
    if (rt->comm == s->user)
        return s->mc.nways && !s->mc.ndups ? vci_index(rt) : -1;
    for (int i = 0; i < s->mc.ndups; i++)
        if (rt->comm == s->dups[i])
            return i;
    return -2;
}

/* The send and receive routes as p2p.c takes them (msh_route_send and
 * msh_route_recv, which supply the side's own rank). */
static int send_dup(side *s, int dest, int tag)
{
    msh_route rt;
    msh_thread_vci = s->thread_vci;
    msh_route_send(s->user, &s->mc, dest, tag, &rt);
    return dup_index(s, &rt);
}

static int recv_dup(side *s, int source, int tag)
{
    msh_route rt;
    msh_thread_vci = s->thread_vci;
    msh_route_recv(s->user, &s->mc, source, tag, &rt);
    return dup_index(s, &rt);
}

static long checks;

/* Count a failed check, naming the configuration. */
static int lane_on; /* the configuration under test has a lane */

static void fail(const char *what, int mi, int ai, int nv, int np, int a, int b, int tag)
{
    failures++;
    fprintf(stderr, "FAIL %s: map %s, asserts %s, %d VCIs, %d ranks%s, %d -> %d tag %d\n", what, maps[mi].name,
            asets[ai].name, nv, np, lane_on ? ", lane" : "", a, b, tag);
}

static side sides[MAXR];

static void test_config(int mi, int ai, int nv, int np)
{
    unsigned as = asets[ai].asserts;
    for (int r = 0; r < np; r++)
        side_init(&sides[r], r, nv, maps[mi].map, as, lane_on);
    msh_map_policy eff = sides[0].mc.map;
    int used[MAXV] = { 0 }, nused = 0;

    for (int a = 0; a < np; a++)
        for (int b = 0; b < np; b++)
            for (int ti = 0; ti < NTAGS; ti++) {
                int t = tags[ti];
                int s = send_dup(&sides[a], b, t);
                int r = recv_dup(&sides[b], a, t);
                checks++;
                if (s != r || s == -2 || (s == -1) != (sides[a].mc.nways == 0)) {
                    fail("send and receive on different duplicates", mi, ai, nv, np, a, b, t);
                    return;
                }
                if (s >= 0 && !used[s]++)
                    nused++;

                /* Wildcards the assertions let through must not change the
                 * duplicate: the receive could match this very message. */
                int any_src = msh_wildcard_refused(as, MPI_ANY_SOURCE, t) == MPI_SUCCESS;
                int any_tag = msh_wildcard_refused(as, a, MPI_ANY_TAG) == MPI_SUCCESS;
                if (any_src && recv_dup(&sides[b], MPI_ANY_SOURCE, t) != s) {
                    fail("MPI_ANY_SOURCE allowed but routed away from the send", mi, ai, nv, np, a, b, t);
                    return;
                }
                if (any_tag && recv_dup(&sides[b], a, MPI_ANY_TAG) != s) {
                    fail("MPI_ANY_TAG allowed but routed away from the send", mi, ai, nv, np, a, b, t);
                    return;
                }
                if (any_src && any_tag && recv_dup(&sides[b], MPI_ANY_SOURCE, MPI_ANY_TAG) != s) {
                    fail("both wildcards allowed but routed away from the send", mi, ai, nv, np, a, b, t);
                    return;
                }
            }

    /* The thread map progresses on the caller's own VCI, but on a lane on
     * the way's; every other map on the duplicate's (or the home one). */
    msh_route rt;
    msh_thread_vci = sides[0].thread_vci;
    msh_route_send(sides[0].user, &sides[0].mc, 0, 5, &rt);
    int want_vci = eff == MSH_MAP_THREAD && sides[0].mc.ndups ? sides[0].thread_vci
                 : sides[0].mc.nways                          ? dup_index(&sides[0], &rt) % nv
                                                              : sides[0].mc.vci;
    EXPECT(rt.vci == msh_vci_get(want_vci));
    EXPECT(!lane_on || rt.comm == sides[0].user); /* no duplicate on a lane */

    /* Not vacuous: a spreading map does spread (the peer map needs enough
     * rank pairs for that). */
    int spreads = sides[0].mc.nways > 1 && (eff != MSH_MAP_PEER || np >= 5);
    if (spreads && nused < 2)
        fail("a spreading map used one duplicate only", mi, ai, nv, np, 0, 0, 0);
}

/* The effective map against rule 1, and the wildcard refusals against the
 * assertions, spelled out. */
static void test_rules(void)
{
    for (int mi = 0; mi < NMAPS; mi++)
        for (int ai = 0; ai < NASETS; ai++) {
            unsigned as = asets[ai].asserts;
            msh_map_policy e = msh_map_effective(maps[mi].map, as);
            int tag_ok = !!(as & MSH_ASSERT_NO_ANY_TAG), src_ok = !!(as & MSH_ASSERT_NO_ANY_SOURCE);
            /* Spreading by a term needs the assertion that rules out its wildcard. */
            EXPECT(e != MSH_MAP_TAG || tag_ok);
            EXPECT(e != MSH_MAP_PEER || src_ok);
            EXPECT(e != MSH_MAP_HASH || (tag_ok && src_ok));
            EXPECT(e != MSH_MAP_THREAD || (tag_ok && src_ok && (as & MSH_ASSERT_ALLOW_OVERTAKING)));
            /* ... and a policy the assertions allow is kept; hash falls
             * back to the term it may use. */
            int over = !!(as & MSH_ASSERT_ALLOW_OVERTAKING);
            switch (maps[mi].map) {
            case MSH_MAP_TAG:    EXPECT(e == (tag_ok ? MSH_MAP_TAG : MSH_MAP_COMM)); break;
            case MSH_MAP_PEER:   EXPECT(e == (src_ok ? MSH_MAP_PEER : MSH_MAP_COMM)); break;
            case MSH_MAP_HASH:
                EXPECT(e == (tag_ok && src_ok ? MSH_MAP_HASH : tag_ok ? MSH_MAP_TAG : src_ok ? MSH_MAP_PEER : MSH_MAP_COMM));
                break;
            case MSH_MAP_THREAD: EXPECT(e == (tag_ok && src_ok && over ? MSH_MAP_THREAD : MSH_MAP_COMM)); break;
            default:             EXPECT(e == MSH_MAP_COMM); break;
            }
            EXPECT(msh_wildcard_refused(as, MPI_ANY_SOURCE, 0) == (src_ok ? MPI_ERR_RANK : MPI_SUCCESS));
            EXPECT(msh_wildcard_refused(as, 0, MPI_ANY_TAG) == (tag_ok ? MPI_ERR_TAG : MPI_SUCCESS));
            EXPECT(msh_wildcard_refused(as, 3, 7) == MPI_SUCCESS);
        }
}

/* No entry (a communicator the shim did not see created): the
 * communicator itself, on a VCI of its handle. */
static void test_untracked(int nv)
{
    MPI_Comm c = fake_comm(0x84000123u);
    msh_route x, y;
    msh_route_of(c, NULL, 0, 1, 7, &x);
    msh_route_of(c, NULL, 1, 0, 9, &y);
    EXPECT(x.comm == c && y.comm == c && x.vci == y.vci);
    EXPECT(x.vci >= msh_vci_get(0) && x.vci < msh_vci_get(0) + nv);
}

int main(void)
{
    test_rules();
    for (size_t vi = 0; vi < sizeof nvcis / sizeof nvcis[0]; vi++) {
        int nv = nvcis[vi];
        EXPECT(msh_vci_pool_init(nv, 0) == 0);
        test_untracked(nv);
        for (lane_on = 0; lane_on < 2; lane_on++)
            for (int mi = 0; mi < NMAPS; mi++)
                for (int ai = 0; ai < NASETS; ai++)
                    for (size_t pi = 0; pi < sizeof nranks / sizeof nranks[0]; pi++)
                        test_config(mi, ai, nv, nranks[pi]);
        msh_vci_pool_fini();
        if (failures > 20)
            break;
    }
    if (failures) {
        fprintf(stderr, "test_route: %d check(s) failed\n", failures);
        return 1;
    }
    printf("ok test_route (%ld send/receive pairs)\n", checks);
    return 0;
}
