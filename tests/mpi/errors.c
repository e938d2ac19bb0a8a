/* Error classes through the shim, with MPI_ERRORS_RETURN.  A shim must hand
 * the MPI library's error code back unchanged (so MPI_Error_class still
 * works), must not turn a returned error into an abort, and must invoke a
 * user-defined error handler with the communicator the user passed.
 * The classes asserted are the ones the MPI standard prescribes. */
#include "testutil.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

static int rank, size, left, right;

static void expect_class(int rc, int want, const char *want_name, const char *what)
{
    int cls = -1, len = -1;
    char str[MPI_MAX_ERROR_STRING];
    CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected class %s", what, want_name);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    str[0] = '\0';
    CHECK_MPI(MPI_Error_string(rc, str, &len));
    CHECK(len > 0 && len < MPI_MAX_ERROR_STRING && (int)strlen(str) == len,
          "%s: MPI_Error_string gave len %d for code %d", what, len, rc);
    CHECK(cls == want, "%s: error class %d, expected %s (%d); code %d: %s", what, cls, want_name,
          want, rc, str);
}
#define EXPECT(call, cls, what)                         \
    do {                                                \
        test_step = what;                                    \
        expect_class((call), (cls), #cls, (what));      \
    } while (0)

/* user-defined handler: records what it was called with */
static int handler_calls, handler_code;
static MPI_Comm handler_comm = MPI_COMM_NULL;

static void my_handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_code = *code;
    handler_comm = *comm;
}

static void classes(void)
{
    int buf[4] = {0}, ub = 0, flag = 0;
    void *attr = NULL;
    MPI_Status st;
    MPI_Request rq = MPI_REQUEST_NULL;

    EXPECT(MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "Send to rank=size");
    EXPECT(MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD), MPI_ERR_RANK, "Send to rank=-7");
    EXPECT(MPI_Recv(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD, &st), MPI_ERR_RANK,
           "Recv from rank=size");
    EXPECT(MPI_Send(buf, 1, MPI_INT, right, -5, MPI_COMM_WORLD), MPI_ERR_TAG, "Send tag=-5");
    EXPECT(MPI_Isend(buf, 1, MPI_INT, right, -5, MPI_COMM_WORLD, &rq), MPI_ERR_TAG,
           "Isend tag=-5");

    CHECK_MPI(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag));
    CHECK(flag && attr != NULL, "MPI_TAG_UB attribute missing");
    ub = *(int *)attr;
    CHECK(ub >= 32767, "MPI_TAG_UB is %d, the standard requires at least 32767", ub);
    if (ub < INT_MAX) {
        EXPECT(MPI_Recv(buf, 1, MPI_INT, left, ub + 1, MPI_COMM_WORLD, &st), MPI_ERR_TAG,
               "Recv tag=MPI_TAG_UB+1");
        EXPECT(MPI_Send(buf, 1, MPI_INT, right, ub + 1, MPI_COMM_WORLD), MPI_ERR_TAG,
               "Send tag=MPI_TAG_UB+1");
        EXPECT(MPI_Iprobe(left, ub + 1, MPI_COMM_WORLD, &flag, &st), MPI_ERR_TAG, "Iprobe tag=MPI_TAG_UB+1");
    } else if (rank == 0) {
        printf("note: MPI_TAG_UB == INT_MAX, tag > MPI_TAG_UB case not applicable\n");
    }

    EXPECT(MPI_Send(buf, 1, MPI_INT, right, 0, MPI_COMM_NULL), MPI_ERR_COMM, "Send on MPI_COMM_NULL");
    EXPECT(MPI_Send(buf, -1, MPI_INT, right, 0, MPI_COMM_WORLD), MPI_ERR_COUNT, "Send count=-1");
    EXPECT(MPI_Recv(buf, -1, MPI_INT, left, 0, MPI_COMM_WORLD, &st), MPI_ERR_COUNT,
           "Recv count=-1");
    EXPECT(MPI_Send(buf, 1, MPI_DATATYPE_NULL, right, 0, MPI_COMM_WORLD), MPI_ERR_TYPE,
           "Send MPI_DATATYPE_NULL");
    EXPECT(MPI_Recv(buf, 1, MPI_DATATYPE_NULL, left, 0, MPI_COMM_WORLD, &st), MPI_ERR_TYPE,
           "Recv MPI_DATATYPE_NULL");
    /* Count 0 with MPI_DATATYPE_NULL: MPICH takes it as an empty message,
     * Open MPI refuses it; the shim does what its host does. */
#if defined(OPEN_MPI) && OPEN_MPI
    EXPECT(MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, right, 1, NULL, 0, MPI_DATATYPE_NULL, left, 1, MPI_COMM_WORLD,
                        &st),
           MPI_ERR_TYPE, "Sendrecv count 0 MPI_DATATYPE_NULL");
#else
    test_step = "Sendrecv count 0 MPI_DATATYPE_NULL";
    CHECK_MPI(MPI_Sendrecv(NULL, 0, MPI_DATATYPE_NULL, right, 1, NULL, 0, MPI_DATATYPE_NULL, left, 1,
                           MPI_COMM_WORLD, &st));
#endif
    EXPECT(MPI_Iprobe(size, 0, MPI_COMM_WORLD, &flag, &st), MPI_ERR_RANK, "Iprobe source=size");

    /* MPI_COMM_SELF has its own handler: errors there must return too */
    EXPECT(MPI_Send(buf, 1, MPI_INT, 1, 0, MPI_COMM_SELF), MPI_ERR_RANK,
           "Send to rank 1 on MPI_COMM_SELF");
    test_step = "classes done";
}

/* A group with members outside the communicator is erroneous in
 * MPI_Comm_create and MPI_Comm_create_group. MPICH refuses the first with
 * MPI_ERR_GROUP; Open MPI 4.1 makes a communicator whose outside members
 * never join, and both hosts crash in the second. Under the shim both are
 * refused with MPI_ERR_GROUP on every member, before anything is made (the
 * shim agrees on every new communicator over it, which would wait for the
 * members that never come), and the communicator still works after. */
static void constructor_groups(void)
{
    MPI_Comm half, made = MPI_COMM_NULL;
    MPI_Group world_group;
    /* The shim knows the communicator (its runtime or its partitioned
     * layer keeps an entry for it): with neither, as a single-threaded
     * program on MPICH, the calls are the host's own. */
    int shim = test_shim_call("mpishim_runtime") || test_shim_call("mpishim_part_layer");
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half));
    CHECK_MPI(MPI_Comm_set_errhandler(half, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group));
#if defined(MPICH)
    int host_refuses = 1;
#else
    int host_refuses = 0;
#endif
    if (shim || host_refuses) {
        EXPECT(MPI_Comm_create(half, world_group, &made), MPI_ERR_GROUP,
               "Comm_create with a group larger than the communicator");
        CHECK(made == MPI_COMM_NULL, "Comm_create refused, yet gave a communicator");
    }
    if (shim) {
        EXPECT(MPI_Comm_create_group(half, world_group, 7, &made), MPI_ERR_GROUP,
               "Comm_create_group with a group larger than the communicator");
        CHECK(made == MPI_COMM_NULL, "Comm_create_group refused, yet gave a communicator");
    }
    /* a subset is still accepted, and the refusals left nothing behind */
    MPI_Group half_group;
    int hrank = -1, hsize = 0, sum = 0;
    CHECK_MPI(MPI_Comm_group(half, &half_group));
    test_step = "Comm_create with the communicator's own group after refusals";
    CHECK_MPI(MPI_Comm_create(half, half_group, &made));
    CHECK(made != MPI_COMM_NULL, "Comm_create with its own group gave MPI_COMM_NULL");
    test_rank_size(made, &hrank, &hsize);
    CHECK_MPI(MPI_Allreduce(&hrank, &sum, 1, MPI_INT, MPI_SUM, made));
    CHECK(sum == hsize * (hsize - 1) / 2, "Allreduce on the made communicator: %d", sum);
    CHECK_MPI(MPI_Comm_free(&made));
    CHECK_MPI(MPI_Group_free(&half_group));
    CHECK_MPI(MPI_Group_free(&world_group));
    CHECK_MPI(MPI_Comm_free(&half));
    test_step = "constructor groups done";
}

static void error_strings(void)
{
    static const int cls[] = {MPI_SUCCESS, MPI_ERR_RANK, MPI_ERR_TAG, MPI_ERR_COMM,
                              MPI_ERR_COUNT, MPI_ERR_TYPE, MPI_ERR_OTHER};
    for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++) {
        char s[MPI_MAX_ERROR_STRING];
        int len = -1, c = -1;
        s[0] = '\0';
        CHECK_MPI(MPI_Error_string(cls[i], s, &len));
        CHECK(len > 0 && (int)strlen(s) == len, "Error_string(%d) empty or wrong length %d",
              cls[i], len);
        CHECK_MPI(MPI_Error_class(cls[i], &c));
        CHECK(c == cls[i], "Error_class of class %d is %d", cls[i], c);
    }
}

static void user_handler(void)
{
    MPI_Comm dup;
    MPI_Errhandler eh, got;
    int buf = 0, cls = -1, res = -1;

    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    CHECK_MPI(MPI_Comm_create_errhandler(my_handler, &eh));
    CHECK_MPI(MPI_Comm_set_errhandler(dup, eh));

    test_step = "Send to rank=size on dup with user handler";
    int rc = MPI_Send(&buf, 1, MPI_INT, size, 0, dup);
    CHECK(handler_calls == 1, "user error handler called %d times, expected 1", handler_calls);
    CHECK_MPI(MPI_Error_class(handler_code, &cls));
    CHECK(cls == MPI_ERR_RANK, "user handler got class %d, expected MPI_ERR_RANK", cls);
    CHECK_MPI(MPI_Comm_compare(handler_comm, dup, &res));
    CHECK(res == MPI_IDENT, "user handler got another communicator (compare %d)", res);
    CHECK(rc != MPI_SUCCESS, "call returned MPI_SUCCESS after invoking the handler");
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_RANK, "call returned class %d after the handler", cls);

    /* explicit invocation */
    handler_calls = 0;
    CHECK_MPI(MPI_Comm_call_errhandler(dup, MPI_ERR_OTHER));
    CHECK(handler_calls == 1 && handler_code == MPI_ERR_OTHER,
          "Comm_call_errhandler: %d calls, code %d", handler_calls, handler_code);

    CHECK_MPI(MPI_Comm_get_errhandler(dup, &got));
    CHECK(got == eh, "Comm_get_errhandler returned another handler");
    CHECK_MPI(MPI_Errhandler_free(&got));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free did not null the handle");

    /* the communicator keeps its (freed-by-user) handler and still works */
    handler_calls = 0;
    int v = 500 + rank, g = -1;
    CHECK_MPI(MPI_Sendrecv(&v, 1, MPI_INT, right, 3, &g, 1, MPI_INT, left, 3, dup,
                           MPI_STATUS_IGNORE));
    CHECK(g == 500 + left && handler_calls == 0, "traffic on dup: got %d, %d handler calls", g,
          handler_calls);

    /* An error found when the message arrives (truncation) reaches the
     * handler too, once, in the call that completes the receive. Not yet
     * through MPICH's own point-to-point under the shim, whose internal
     * completion call raises it elsewhere (docs/design.md, known limits):
     * checked there with a lane (MPISHIM_FABRIC) only. */
    const char *lane = getenv("MPISHIM_FABRIC");
#if defined(MPICH)
    int check_trunc = lane && strcmp(lane, "off") != 0;
#else
    int check_trunc = 1;
    (void)lane;
#endif
    test_step = "truncated receive on dup with user handler";
    int four[4] = { rank, rank, rank, rank }, two[2] = { -1, -1 };
    MPI_Request sq;
    CHECK_MPI(MPI_Isend(four, 4, MPI_INT, right, 4, dup, &sq));
    rc = MPI_Recv(two, 2, MPI_INT, left, 4, dup, MPI_STATUS_IGNORE);
    if (check_trunc) {
        CHECK(handler_calls == 1, "truncation: user error handler called %d times, expected 1", handler_calls);
        CHECK_MPI(MPI_Error_class(handler_code, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE, "truncation: user handler got class %d, expected MPI_ERR_TRUNCATE", cls);
        CHECK_MPI(MPI_Comm_compare(handler_comm, dup, &res));
        CHECK(res == MPI_IDENT, "truncation: user handler got another communicator (compare %d)", res);
    }
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TRUNCATE, "truncation: MPI_Recv returned class %d", cls);
    CHECK_MPI(MPI_Wait(&sq, MPI_STATUS_IGNORE));

    /* Two truncations completed by one MPI_Waitall: one handler call, where
     * the host makes it. Open MPI 4.1 calls the requests' communicator's
     * handler with the first failed request's class; MPICH 4.0 calls
     * MPI_COMM_WORLD's with MPI_ERR_IN_STATUS. */
    test_step = "two truncations in one MPI_Waitall";
    MPI_Errhandler eh2;
    CHECK_MPI(MPI_Comm_create_errhandler(my_handler, &eh2));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh2));
    handler_calls = 0;
    handler_comm = MPI_COMM_NULL;
    MPI_Request rq[2], sq2[2];
    MPI_Status st2[2];
    int a[2] = { -1, -1 }, b[2] = { -1, -1 };
    CHECK_MPI(MPI_Isend(four, 4, MPI_INT, right, 5, dup, &sq2[0]));
    CHECK_MPI(MPI_Isend(four, 4, MPI_INT, right, 5, dup, &sq2[1]));
    CHECK_MPI(MPI_Irecv(a, 2, MPI_INT, left, 5, dup, &rq[0]));
    CHECK_MPI(MPI_Irecv(b, 2, MPI_INT, left, 5, dup, &rq[1]));
    rc = MPI_Waitall(2, rq, st2);
    int calls = handler_calls, code = handler_code;
    MPI_Comm hcomm = handler_comm;
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_IN_STATUS, "Waitall of two truncations returned class %d", cls);
    /* MPICH 4.0 stops at the first failed request: the second is then
     * MPI_ERR_PENDING, still active (the standard allows both). */
    for (int i = 0; i < 2; i++) {
        CHECK_MPI(MPI_Error_class(st2[i].MPI_ERROR, &cls));
        CHECK(cls == MPI_ERR_TRUNCATE || (i == 1 && cls == MPI_ERR_PENDING && rq[i] != MPI_REQUEST_NULL),
              "Waitall of two truncations: status %d has class %d", i, cls);
        CHECK((cls == MPI_ERR_PENDING) == (rq[i] != MPI_REQUEST_NULL),
              "Waitall of two truncations: request %d is %s with class %d", i,
              rq[i] == MPI_REQUEST_NULL ? "freed" : "not freed", cls);
    }
    /* Through the host's own point-to-point under the shim, each failed
     * request may call the handler by itself (Open MPI's Waitall is made of
     * one MPI_Wait each, since its own can hang after a failure; MPICH's
     * internal completion raises per poll): exactly once is checked raw and
     * with a lane. */
    int once = test_host_native() || (lane && strcmp(lane, "off") != 0);
    if (check_trunc || test_host_native()) {
        CHECK(once ? calls == 1 : calls >= 1, "Waitall of two truncations: %d handler calls, expected %s", calls,
              once ? "1" : "1 or more");
        CHECK_MPI(MPI_Error_class(code, &cls));
#if defined(MPICH)
        CHECK(cls == MPI_ERR_IN_STATUS, "Waitall of two truncations: handler got class %d", cls);
        CHECK(hcomm == MPI_COMM_WORLD, "Waitall of two truncations: handler not called on MPI_COMM_WORLD");
#else
        CHECK(cls == MPI_ERR_TRUNCATE, "Waitall of two truncations: handler got class %d", cls);
        CHECK_MPI(MPI_Comm_compare(hcomm, dup, &res));
        CHECK(res == MPI_IDENT, "Waitall of two truncations: handler got another communicator (compare %d)", res);
#endif
    }
    if (rq[1] != MPI_REQUEST_NULL) {
        CHECK_MPI(MPI_Error_class(MPI_Wait(&rq[1], &st2[1]), &cls));
        CHECK(cls == MPI_ERR_TRUNCATE, "the pending second truncation: MPI_Wait returned class %d", cls);
    }
    CHECK_MPI(MPI_Waitall(2, sq2, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Errhandler_free(&eh2));
    CHECK_MPI(MPI_Comm_free(&dup));
}

int main(int argc, char **argv)
{
    MPI_Errhandler eh;

    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    right = (rank + 1) % size;
    left = (rank - 1 + size) % size;

    test_watchdog("errors.c", 20);

    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    CHECK_MPI(MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "MPI_COMM_WORLD handler is not MPI_ERRORS_RETURN");
    CHECK_MPI(MPI_Errhandler_free(&eh));

    classes();
    constructor_groups();
    error_strings();
    user_handler();

    /* after all those errors ordinary traffic still works and nothing stray
     * (e.g. a half-posted erroneous request) is left to match */
    {
        int v[2] = {rank, 4242}, g[2] = {-1, -1}, flag = 1;
        MPI_Status st;
        test_step = "final exchange";
        CHECK_MPI(MPI_Sendrecv(v, 2, MPI_INT, right, 0, g, 2, MPI_INT, left, 0, MPI_COMM_WORLD,
                               &st));
        CHECK(g[0] == left && g[1] == 4242 && st.MPI_SOURCE == left && st.MPI_TAG == 0,
              "exchange after errors: got {%d,%d} from %d tag %d", g[0], g[1], st.MPI_SOURCE,
              st.MPI_TAG);
        CHECK_MPI(MPI_Barrier(MPI_COMM_WORLD));
        CHECK_MPI(MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st));
        CHECK(!flag, "a message from an erroneous send was delivered (src %d tag %d)",
              st.MPI_SOURCE, st.MPI_TAG);
    }

    test_watchdog("errors.c", 0);
    test_finish("errors");
    return 0;
}
