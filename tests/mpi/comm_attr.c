/* Communicator constructors keep MPI's attribute rules and their results
 * work under a spreading map, which makes internal duplicates inside each
 * constructor (src/vci/comm.c):
 * - MPI_Comm_dup runs a keyval's copy callback once per attribute and
 *   MPI_Comm_free its delete callback once; MPI_Comm_split and
 *   MPI_Comm_create copy none, and MPI_Win_create copies them at most once
 *   (as the hosts do) however many internal windows the shim makes.
 *   (The shim once made its duplicates with MPI_Comm_dup of the new
 *   communicator, which ran the user's copy callback again per VCI.)
 * - A split that leaves some ranks out (MPI_UNDEFINED) and a
 *   MPI_Comm_create with a group that leaves some out: the members'
 *   traffic on many tags arrives, in order, and the left-out ranks go on;
 *   the same for a Cartesian topology that leaves a rank out, and its rows.
 */
#include "testutil.h"


static int copies, deletes;

static int copy_fn(MPI_Comm oldcomm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)oldcomm, (void)keyval, (void)extra;
    copies++;
    *(void **)out = in;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void *val, void *extra)
{
    (void)comm, (void)keyval, (void)val, (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

/* Every member sends NTAG messages on NTAG tags to every other member, in
 * two rounds per tag; receives name source and tag, so order is checked. */
#define NTAG 6
static void traffic(MPI_Comm c, const char *what)
{
    int r, n;
    test_rank_size(c, &r, &n);
    for (int peer = 0; peer < n; peer++) {
        if (peer == r)
            continue;
        int out[2 * NTAG], in[2 * NTAG];
        MPI_Request rq[4 * NTAG];
        for (int i = 0; i < 2 * NTAG; i++) {
            out[i] = 1000 * r + i;
            in[i] = -1;
        }
        for (int i = 0; i < 2 * NTAG; i++)
            CHECK_MPI(MPI_Irecv(&in[i], 1, MPI_INT, peer, i % NTAG, c, &rq[i]));
        for (int i = 0; i < 2 * NTAG; i++)
            CHECK_MPI(MPI_Isend(&out[i], 1, MPI_INT, peer, i % NTAG, c, &rq[2 * NTAG + i]));
        CHECK_MPI(MPI_Waitall(4 * NTAG, rq, MPI_STATUSES_IGNORE));
        for (int i = 0; i < 2 * NTAG; i++)
            CHECK(in[i] == 1000 * peer + i, "%s: message %d from %d carried %d, expected %d", what, i, peer, in[i],
                  1000 * peer + i);
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    int rank, size;
    test_rank_size(MPI_COMM_WORLD, &rank, &size);

    int key;
    CHECK_MPI(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, NULL));
    MPI_Comm base, dup, split, created, part;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &base));
    static int value = 42;
    CHECK_MPI(MPI_Comm_set_attr(base, key, &value));
    CHECK(copies == 0 && deletes == 0, "set_attr ran callbacks: %d copies, %d deletes", copies, deletes);

    CHECK_MPI(MPI_Comm_dup(base, &dup));
    CHECK(copies == 1, "MPI_Comm_dup ran the copy callback %d times, expected once", copies);
    void *got = NULL;
    int flag = 0;
    CHECK_MPI(MPI_Comm_get_attr(dup, key, &got, &flag));
    CHECK(flag && got == &value, "the duplicate lacks the attribute (flag %d)", flag);
    traffic(dup, "dup");

    CHECK_MPI(MPI_Comm_split(base, rank % 2, -rank, &split));
    CHECK(copies == 1, "MPI_Comm_split ran the copy callback (%d copies in all)", copies);
    CHECK_MPI(MPI_Comm_get_attr(split, key, &got, &flag));
    CHECK(!flag, "a split communicator has the parent's attribute");
    traffic(split, "split");

    /* Rank 0 left out of both: the others still get working communicators. */
    MPI_Group wg, g;
    CHECK_MPI(MPI_Comm_group(base, &wg));
    int zero = 0;
    CHECK_MPI(MPI_Group_excl(wg, 1, &zero, &g));
    CHECK_MPI(MPI_Comm_create(base, g, &created));
    CHECK((created == MPI_COMM_NULL) == (rank == 0), "MPI_Comm_create: rank %d got %s", rank,
          created == MPI_COMM_NULL ? "MPI_COMM_NULL" : "a communicator");
    CHECK_MPI(MPI_Comm_split(base, rank == 0 ? MPI_UNDEFINED : 1, rank, &part));
    CHECK((part == MPI_COMM_NULL) == (rank == 0), "MPI_Comm_split with MPI_UNDEFINED: rank %d got %s", rank,
          part == MPI_COMM_NULL ? "MPI_COMM_NULL" : "a communicator");
    if (created != MPI_COMM_NULL) {
        traffic(created, "create");
        traffic(part, "split with MPI_UNDEFINED");
    }
    CHECK(copies == 1, "MPI_Comm_create ran the copy callback (%d copies in all)", copies);

    /* A topology that leaves the last rank out (it gets MPI_COMM_NULL) and
     * may reorder the others, then its rows. */
    MPI_Comm cart = MPI_COMM_NULL, row = MPI_COMM_NULL;
    int dims[2] = { size > 2 ? 2 : 1, size > 2 ? (size - 1) / 2 : 1 }, periods[2] = { 0, 0 };
    CHECK_MPI(MPI_Cart_create(base, 2, dims, periods, 1, &cart));
    CHECK((cart == MPI_COMM_NULL) == (rank >= dims[0] * dims[1]), "MPI_Cart_create: rank %d got %s", rank,
          cart == MPI_COMM_NULL ? "MPI_COMM_NULL" : "a communicator");
    if (cart != MPI_COMM_NULL) {
        traffic(cart, "cart");
        int remain[2] = { 0, 1 };
        CHECK_MPI(MPI_Cart_sub(cart, remain, &row));
        traffic(row, "cart row");
        CHECK_MPI(MPI_Comm_free(&row));
        CHECK_MPI(MPI_Comm_free(&cart));
    }

    /* Both hosts copy the communicator inside MPI_Win_create, callbacks
     * included (once; the standard leaves it open); the shim, whose windows
     * spread over several internal ones, must not add copies. */
    MPI_Win win;
    int mem[4];
    CHECK_MPI(MPI_Win_create(mem, sizeof mem, sizeof mem[0], MPI_INFO_NULL, base, &win));
    int win_copies = copies - 1;
    CHECK(win_copies <= 1, "MPI_Win_create ran the copy callback %d times", win_copies);
    CHECK_MPI(MPI_Win_free(&win));
    CHECK(deletes == win_copies, "MPI_Win_free ran the delete callback %d times after %d copies", deletes,
          win_copies);
    copies = 1;
    deletes = 0;

    CHECK_MPI(MPI_Comm_free(&dup));
    CHECK(deletes == 1, "MPI_Comm_free of the duplicate ran the delete callback %d times, expected once", deletes);
    CHECK_MPI(MPI_Comm_free(&split));
    if (created != MPI_COMM_NULL) {
        CHECK_MPI(MPI_Comm_free(&created));
        CHECK_MPI(MPI_Comm_free(&part));
    }
    CHECK(deletes == 1, "freeing attribute-less communicators ran the delete callback (%d in all)", deletes);
    CHECK_MPI(MPI_Comm_free(&base));
    CHECK(deletes == 2 && copies == 1, "after freeing the parent: %d copies, %d deletes; expected 1 and 2", copies,
          deletes);
    CHECK_MPI(MPI_Comm_free_keyval(&key));
    MPI_Group_free(&g);
    MPI_Group_free(&wg);
    test_finish("comm_attr");
    return 0;
}
