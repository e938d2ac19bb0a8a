/* Communicator management through the shim: intercommunicators (create,
 * traffic with remote-group ranks, merge + allreduce) and the intracomm
 * constructors (dup, dup_with_info, idup, split, split_type, create,
 * create_group), info and names, rooted collectives over an
 * intercommunicator, with traffic on each and isolation of a
 * dup from its parent.  A shim that maps communicators (e.g. a table keyed
 * by handle) must translate ranks and contexts right for every one. */
#include <string.h>

#include "testutil.h"


static int wrank, wsize;

/* One ring step on comm: payload {magic, sender rank}; checks status too. */
static void ring_traffic(MPI_Comm comm, int tag, int magic, const char *what)
{
    int r, n, v[2], g[2] = {-1, -1};
    MPI_Status st;
    test_rank_size(comm, &r, &n);
    int right = (r + 1) % n, left = (r - 1 + n) % n;
    v[0] = magic;
    v[1] = r;
    CHECK_MPI(MPI_Sendrecv(v, 2, MPI_INT, right, tag, g, 2, MPI_INT, left, tag, comm, &st));
    CHECK(g[0] == magic && g[1] == left, "%s: got {%d,%d}, expected {%d,%d}", what, g[0], g[1],
          magic, left);
    CHECK(st.MPI_SOURCE == left && st.MPI_TAG == tag, "%s: status src %d tag %d", what,
          st.MPI_SOURCE, st.MPI_TAG);
}

/* Every process sends to every remote rank of the intercommunicator on
 * tags 0..3 and receives from each by source and tag, in reverse order:
 * payload {sender's local rank, tag}. */
static void inter_traffic(MPI_Comm inter, const char *what)
{
    int lr, ls, rs;
    test_rank_size(inter, &lr, &ls);
    CHECK_MPI(MPI_Comm_remote_size(inter, &rs));
    CHECK(rs <= 16, "%s: remote size %d", what, rs);
    int sb[16][4][2], rb[2];
    MPI_Request rq[64];
    for (int j = 0; j < rs; j++)
        for (int t = 0; t < 4; t++) {
            sb[j][t][0] = lr;
            sb[j][t][1] = t;
            CHECK_MPI(MPI_Isend(sb[j][t], 2, MPI_INT, j, t, inter, &rq[4 * j + t]));
        }
    for (int j = rs - 1; j >= 0; j--)
        for (int t = 3; t >= 0; t--) {
            MPI_Status st;
            CHECK_MPI(MPI_Recv(rb, 2, MPI_INT, j, t, inter, &st));
            CHECK(rb[0] == j && rb[1] == t && st.MPI_SOURCE == j && st.MPI_TAG == t,
                  "%s: from %d tag %d got {%d,%d}, status source %d tag %d", what, j, t, rb[0], rb[1], st.MPI_SOURCE,
                  st.MPI_TAG);
        }
    CHECK_MPI(MPI_Waitall(4 * rs, rq, MPI_STATUSES_IGNORE));
}

/* Rooted collectives over an intercommunicator, every rank of each side
 * in turn the root (MPI_ROOT), its side's other ranks MPI_PROC_NULL with
 * count 0 and no buffer (MPI leaves their other arguments insignificant;
 * mpi4py passes exactly that). Open MPI 4.1's nonblocking forms take part
 * or not by each rank's own count, so such ranks fell out of step with
 * the rest: the next rooted collective hung, raw with MPI_Ibcast and under
 * a shim that makes MPI_Bcast as MPI_Ibcast + a wait. */
static void rooted_collectives(MPI_Comm inter, int color, int lrank, int lsize, int rsize)
{
    int v[4], got[64], one = -1;
    for (int round = 0; round < 3; round++)
        for (int side = 0; side < 2; side++) {
            int n = side == color ? lsize : rsize;
            for (int root = 0; root < n; root++) {
                int mine = side == color, me_root = mine && root == lrank;
                int r = mine ? (me_root ? MPI_ROOT : MPI_PROC_NULL) : root;
                int want[4] = { side, root, round, 42 };
                test_step = "intercomm MPI_Bcast";
                if (me_root)
                    CHECK_MPI(MPI_Bcast(want, 4, MPI_INT, r, inter));
                else if (mine)
                    CHECK_MPI(MPI_Bcast(NULL, 0, MPI_INT, r, inter));
                else {
                    memset(v, 0xff, sizeof v);
                    CHECK_MPI(MPI_Bcast(v, 4, MPI_INT, r, inter));
                    CHECK(!memcmp(v, want, sizeof v), "Bcast round %d from side %d root %d: {%d,%d,%d,%d}", round,
                          side, root, v[0], v[1], v[2], v[3]);
                }
                test_step = "intercomm MPI_Gather";
                int val = 1000 * round + 10 * lrank + side;
                if (me_root) {
                    CHECK_MPI(MPI_Gather(NULL, 0, MPI_INT, got, 1, MPI_INT, r, inter));
                    for (int j = 0; j < rsize; j++)
                        CHECK(got[j] == 1000 * round + 10 * j + side, "Gather round %d: slot %d holds %d", round, j,
                              got[j]);
                } else if (mine)
                    CHECK_MPI(MPI_Gather(NULL, 0, MPI_INT, NULL, 0, MPI_INT, r, inter));
                else
                    CHECK_MPI(MPI_Gather(&val, 1, MPI_INT, NULL, 0, MPI_INT, r, inter));
                test_step = "intercomm MPI_Scatter";
                if (me_root) {
                    for (int j = 0; j < rsize; j++)
                        got[j] = 7 * j + round;
                    CHECK_MPI(MPI_Scatter(got, 1, MPI_INT, NULL, 0, MPI_INT, r, inter));
                } else if (mine)
                    CHECK_MPI(MPI_Scatter(NULL, 0, MPI_INT, NULL, 0, MPI_INT, r, inter));
                else {
                    CHECK_MPI(MPI_Scatter(NULL, 0, MPI_INT, &one, 1, MPI_INT, r, inter));
                    CHECK(one == 7 * lrank + round, "Scatter round %d: got %d, expected %d", round, one,
                          7 * lrank + round);
                }
                test_step = "intercomm MPI_Reduce";
                if (me_root) {
                    CHECK_MPI(MPI_Reduce(&val, &one, 1, MPI_INT, MPI_SUM, r, inter)); /* MPICH wants buffers there */
                    CHECK(one == rsize * (rsize - 1) / 2 + round * rsize, "Reduce round %d: sum %d", round, one);
                } else if (mine)
                    CHECK_MPI(MPI_Reduce(NULL, NULL, 0, MPI_INT, MPI_SUM, r, inter));
                else {
                    val = lrank + round;
                    CHECK_MPI(MPI_Reduce(&val, &one, 1, MPI_INT, MPI_SUM, r, inter));
                }
            }
        }
    test_step = "intercomm";
}

static void intercomm(void)
{
    int color = wrank % 2;
    int n_even = (wsize + 1) / 2, n_odd = wsize / 2;
    MPI_Comm local, inter, merged;
    int lrank, lsize, rsize, flag = 0;

    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, wrank, &local));
    test_rank_size(local, &lrank, &lsize);
    CHECK(lrank == wrank / 2 && lsize == (color ? n_odd : n_even), "split: rank %d size %d",
          lrank, lsize);
    ring_traffic(local, 3, 300 + color, "split half");

    /* leaders: local rank 0 of each half = world rank 0 (even) / 1 (odd) */
    CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, color ? 0 : 1, 77, &inter));
    CHECK_MPI(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag, "Intercomm_create result is not an intercommunicator");
    int irank, isize;
    test_rank_size(inter, &irank, &isize);
    CHECK(irank == lrank && isize == lsize, "intercomm local rank %d size %d", irank, isize);
    CHECK_MPI(MPI_Comm_remote_size(inter, &rsize));
    CHECK(rsize == (color ? n_even : n_odd), "remote size %d, expected %d", rsize,
          color ? n_even : n_odd);

    /* remote group rank j is world rank 2j + (1 - color) */
    {
        MPI_Group rg, wg;
        int rr[64], wr[64];
        CHECK(rsize <= 64, "too many ranks");
        CHECK_MPI(MPI_Comm_remote_group(inter, &rg));
        CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        for (int j = 0; j < rsize; j++)
            rr[j] = j;
        CHECK_MPI(MPI_Group_translate_ranks(rg, rsize, rr, wg, wr));
        for (int j = 0; j < rsize; j++)
            CHECK(wr[j] == 2 * j + (1 - color), "remote rank %d is world %d", j, wr[j]);
        CHECK_MPI(MPI_Group_free(&rg));
        CHECK_MPI(MPI_Group_free(&wg));
    }

    /* every process sends to every remote rank; receives by specific remote
     * rank: status.MPI_SOURCE is a REMOTE GROUP rank, not a world rank */
    {
        int sb[64][3], rb[3];
        MPI_Request rq[64];
        MPI_Status st;
        for (int j = 0; j < rsize; j++) {
            sb[j][0] = lrank;
            sb[j][1] = wrank;
            sb[j][2] = j;
            CHECK_MPI(MPI_Isend(sb[j], 3, MPI_INT, j, 5, inter, &rq[j]));
        }
        for (int j = rsize - 1; j >= 0; j--) {
            CHECK_MPI(MPI_Recv(rb, 3, MPI_INT, j, 5, inter, &st));
            CHECK(st.MPI_SOURCE == j && st.MPI_TAG == 5, "inter recv from %d: status src %d tag %d",
                  j, st.MPI_SOURCE, st.MPI_TAG);
            CHECK(rb[0] == j && rb[1] == 2 * j + (1 - color) && rb[2] == lrank,
                  "inter recv from %d: payload {%d,%d,%d}", j, rb[0], rb[1], rb[2]);
        }
        CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));

        /* again with ANY_SOURCE */
        int seen[64] = {0};
        for (int j = 0; j < rsize; j++)
            CHECK_MPI(MPI_Isend(sb[j], 3, MPI_INT, j, 6, inter, &rq[j]));
        for (int j = 0; j < rsize; j++) {
            CHECK_MPI(MPI_Recv(rb, 3, MPI_INT, MPI_ANY_SOURCE, 6, inter, &st));
            CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < rsize, "inter ANY_SOURCE: source %d",
                  st.MPI_SOURCE);
            CHECK(rb[0] == st.MPI_SOURCE, "inter ANY_SOURCE: status source %d, payload rank %d",
                  st.MPI_SOURCE, rb[0]);
            CHECK(!seen[st.MPI_SOURCE]++, "inter ANY_SOURCE: %d twice", st.MPI_SOURCE);
        }
        CHECK_MPI(MPI_Waitall(rsize, rq, MPI_STATUSES_IGNORE));
    }
    CHECK_MPI(MPI_Barrier(inter));
    rooted_collectives(inter, color, lrank, lsize, rsize);

    /* A duplicate of the intercommunicator, and a split of it into two
     * intercommunicators where a half has two ranks or more. */
    MPI_Comm idup, isplit;
    CHECK_MPI(MPI_Comm_dup(inter, &idup));
    inter_traffic(idup, "intercomm dup");
    CHECK_MPI(MPI_Comm_split(inter, lrank % 2, lrank, &isplit));
    CHECK(isplit != MPI_COMM_NULL, "intercomm split: no communicator");
    inter_traffic(isplit, "intercomm split");
    CHECK_MPI(MPI_Comm_free(&isplit));
    CHECK_MPI(MPI_Comm_free(&idup));
    /* MPI_Comm_create on it with each side's local rank 0 only: the others
     * get MPI_COMM_NULL (on an intercommunicator every process of a side
     * passes the same group). */
    MPI_Group lg, first;
    MPI_Comm icreate;
    int zero = 0;
    CHECK_MPI(MPI_Comm_group(inter, &lg));
    CHECK_MPI(MPI_Group_incl(lg, 1, &zero, &first));
    CHECK_MPI(MPI_Comm_create(inter, first, &icreate));
    CHECK((icreate == MPI_COMM_NULL) == (lrank != 0), "intercomm create: local rank %d got %s", lrank,
          icreate == MPI_COMM_NULL ? "MPI_COMM_NULL" : "a communicator");
    if (icreate != MPI_COMM_NULL) {
        inter_traffic(icreate, "intercomm create");
        CHECK_MPI(MPI_Comm_free(&icreate));
    }
    CHECK_MPI(MPI_Group_free(&first));
    CHECK_MPI(MPI_Group_free(&lg));

    /* merge: the even half (high = 0) is ordered first */
    CHECK_MPI(MPI_Intercomm_merge(inter, color, &merged));
    int mrank, msize;
    test_rank_size(merged, &mrank, &msize);
    CHECK(msize == wsize, "merged size %d", msize);
    CHECK(mrank == (color ? n_even + lrank : lrank), "merged rank %d, expected %d", mrank,
          color ? n_even + lrank : lrank);
    int sum = -1, all[64];
    CHECK_MPI(MPI_Allreduce(&wrank, &sum, 1, MPI_INT, MPI_SUM, merged));
    CHECK(sum == wsize * (wsize - 1) / 2, "merged Allreduce sum %d", sum);
    CHECK_MPI(MPI_Allgather(&wrank, 1, MPI_INT, all, 1, MPI_INT, merged));
    for (int i = 0; i < wsize; i++)
        CHECK(all[i] == (i < n_even ? 2 * i : 2 * (i - n_even) + 1),
              "merged rank %d holds world rank %d", i, all[i]);
    ring_traffic(merged, 8, 800, "merged");

    CHECK_MPI(MPI_Comm_free(&merged));
    CHECK_MPI(MPI_Comm_free(&inter));
    CHECK_MPI(MPI_Comm_free(&local));
    CHECK(merged == MPI_COMM_NULL && inter == MPI_COMM_NULL && local == MPI_COMM_NULL,
          "Comm_free did not null the handles");
}

/* A message on a dup must never match a receive on the parent. */
static void dup_isolation(MPI_Comm dup)
{
    int right = (wrank + 1) % wsize, left = (wrank - 1 + wsize) % wsize;
    int a = 1000 + wrank, b = 2000 + wrank, got = -1, flag = 1;
    MPI_Request rq;
    MPI_Status st;

    CHECK_MPI(MPI_Isend(&a, 1, MPI_INT, right, 42, dup, &rq));
    CHECK_MPI(MPI_Probe(left, 42, dup, &st)); /* it has arrived (on dup) ... */
    CHECK_MPI(MPI_Iprobe(left, 42, MPI_COMM_WORLD, &flag, &st));
    CHECK(!flag, "message sent on a dup is visible on the parent communicator");
    /* Not where the program asserted it never uses MPI_ANY_TAG (its env line in testlist). */
    const char *asserts = getenv("MPISHIM_ASSERT");
    if (!asserts || !strstr(asserts, "no_any_tag")) {
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "wildcard Iprobe on the parent sees a message sent on a dup");
    }
    CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD)); /* nobody sends on WORLD before all checked */

    /* same source and tag on the parent: each receive gets its own comm's data */
    CHECK_MPI(MPI_Send(&b, 1, MPI_INT, right, 42, MPI_COMM_WORLD));
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, left, 42, MPI_COMM_WORLD, &st));
    CHECK(got == 2000 + left, "parent receive got %d (dup message leaked?)", got);
    CHECK_MPI(MPI_Recv(&got, 1, MPI_INT, left, 42, dup, &st));
    CHECK(got == 1000 + left, "dup receive got %d", got);
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
}

/* If the host reports our hint back it must be unchanged; MPI lets an
 * implementation drop hints it does not use, so absence is fine. */
static void check_info(MPI_Comm comm, const char *what)
{
    MPI_Info got = MPI_INFO_NULL;
    int nkeys = -1, flag = 0;
    char val[64];
    CHECK_MPI(MPI_Comm_get_info(comm, &got));
    CHECK(got != MPI_INFO_NULL, "%s: Comm_get_info returned MPI_INFO_NULL", what);
    CHECK_MPI(MPI_Info_get_nkeys(got, &nkeys));
    CHECK(nkeys >= 0, "%s: nkeys %d", what, nkeys);
    CHECK_MPI(MPI_Info_get(got, "mpishim_test_hint", (int)sizeof val - 1, val, &flag));
    if (flag)
        CHECK(strcmp(val, "42") == 0, "%s: hint came back as '%s'", what, val);
    CHECK_MPI(MPI_Info_free(&got));
}

static void intracomms(void)
{
    MPI_Comm dup, dupi, idup, shm, cr, cg;
    MPI_Request rq;
    MPI_Info info;
    int res, len, r, n;
    char name[MPI_MAX_OBJECT_NAME];

    /* names */
    CHECK_MPI(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0 && len == (int)strlen(name),
          "MPI_COMM_WORLD is named '%s' (len %d)", name, len);

    /* dup */
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK(res == MPI_CONGRUENT, "dup compare %d, expected MPI_CONGRUENT", res);
    CHECK_MPI(MPI_Comm_set_name(dup, "mpishim-dup"));
    CHECK_MPI(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "mpishim-dup") == 0 && len == 11, "dup name '%s' len %d", name, len);
    ring_traffic(dup, 1, 101, "dup");
    dup_isolation(dup);

    /* dup_with_info, set_info/get_info */
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpishim_test_hint", "42"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &dupi));
    CHECK_MPI(MPI_Comm_compare(MPI_COMM_WORLD, dupi, &res));
    CHECK(res == MPI_CONGRUENT, "dup_with_info compare %d", res);
    check_info(dupi, "dup_with_info");
    CHECK_MPI(MPI_Comm_set_info(dup, info));
    check_info(dup, "set_info");
    CHECK_MPI(MPI_Info_free(&info));
    ring_traffic(dupi, 2, 102, "dup_with_info");

    /* idup */
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &idup, &rq));
    CHECK_MPI(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    CHECK_MPI(MPI_Comm_compare(dup, idup, &res));
    CHECK(res == MPI_CONGRUENT, "idup compare %d", res);
    ring_traffic(idup, 3, 103, "idup");

    /* split_type SHARED, keyed by world rank: order must follow the key */
    CHECK_MPI(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, wrank, MPI_INFO_NULL,
                                  &shm));
    CHECK(shm != MPI_COMM_NULL, "split_type(SHARED) returned MPI_COMM_NULL");
    test_rank_size(shm, &r, &n);
    CHECK(n >= 1 && n <= wsize, "shared comm size %d", n);
    {
        int w[64];
        CHECK_MPI(MPI_Allgather(&wrank, 1, MPI_INT, w, 1, MPI_INT, shm));
        CHECK(w[r] == wrank, "shared comm rank %d holds world rank %d", r, w[r]);
        for (int i = 1; i < n; i++)
            CHECK(w[i] > w[i - 1], "shared comm not ordered by key");
    }
    ring_traffic(shm, 4, 104, "split_type");

    /* create: even world ranks; odd ranks get MPI_COMM_NULL */
    {
        MPI_Group wg, eg;
        int ev[64], ne = 0;
        for (int i = 0; i < wsize; i += 2)
            ev[ne++] = i;
        CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
        CHECK_MPI(MPI_Group_incl(wg, ne, ev, &eg));
        CHECK_MPI(MPI_Comm_create(MPI_COMM_WORLD, eg, &cr));
        if (wrank % 2) {
            CHECK(cr == MPI_COMM_NULL, "Comm_create gave a non-member a communicator");
        } else {
            CHECK(cr != MPI_COMM_NULL, "Comm_create gave a member MPI_COMM_NULL");
            test_rank_size(cr, &r, &n);
            CHECK(r == wrank / 2 && n == ne, "Comm_create rank %d size %d", r, n);
            ring_traffic(cr, 5, 105, "Comm_create");
            CHECK_MPI(MPI_Comm_free(&cr));
        }

        /* create_group: ranks size-1 .. 1 (reversed, without 0), members only */
        MPI_Group rg;
        int rev[64], nr = 0;
        for (int i = wsize - 1; i >= 1; i--)
            rev[nr++] = i;
        CHECK_MPI(MPI_Group_incl(wg, nr, rev, &rg));
        if (wrank != 0) {
            CHECK_MPI(MPI_Comm_create_group(MPI_COMM_WORLD, rg, 9, &cg));
            CHECK(cg != MPI_COMM_NULL, "Comm_create_group gave a member MPI_COMM_NULL");
            test_rank_size(cg, &r, &n);
            CHECK(r == wsize - 1 - wrank && n == nr, "create_group rank %d size %d", r, n);
            ring_traffic(cg, 6, 106, "Comm_create_group");
            CHECK_MPI(MPI_Comm_free(&cg));
            CHECK(cg == MPI_COMM_NULL, "Comm_free did not null create_group comm");
        }
        CHECK_MPI(MPI_Group_free(&rg));
        CHECK_MPI(MPI_Group_free(&eg));
        CHECK_MPI(MPI_Group_free(&wg));
    }

    /* the dups still work after the others came and went */
    ring_traffic(dup, 7, 107, "dup (late)");

    CHECK_MPI(MPI_Comm_free(&shm));
    CHECK_MPI(MPI_Comm_free(&idup));
    CHECK_MPI(MPI_Comm_free(&dupi));
    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK(shm == MPI_COMM_NULL && idup == MPI_COMM_NULL && dupi == MPI_COMM_NULL &&
              dup == MPI_COMM_NULL,
          "Comm_free did not null the handles");
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &wrank, &wsize);
    CHECK(wsize >= 2 && wsize <= 64, "needs 2..64 ranks, got %d", wsize);

    intercomm();
    intracomms();

    test_finish("intercomm");
    return 0;
}
