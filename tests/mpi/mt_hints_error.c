/* Wildcards against assertions: what the shim must reject, and what must
 * keep working.
 *
 * An assertion (MPISHIM_ASSERT for every communicator, or the MPI-4 info
 * keys mpi_assert_no_any_tag / mpi_assert_no_any_source on one
 * communicator) lets the shim spread traffic by tag or source; a receive or
 * probe that uses the forbidden wildcard anyway is a user error the shim
 * reports through the communicator's error handler: MPI_ERR_TAG for
 * MPI_ANY_TAG, MPI_ERR_RANK for MPI_ANY_SOURCE.  Without the shim (or with
 * MPISHIM_DISABLE=1) MPISHIM_ASSERT means nothing and the same wildcard
 * calls must simply work.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out); two threads
 * per rank run concurrently, errors come back with MPI_ERRORS_RETURN:
 *   thread 0, MPI_COMM_WORLD: MPI_Recv, MPI_Irecv, MPI_Probe, MPI_Iprobe,
 *     MPI_Mprobe, MPI_Improbe, MPI_Recv_init with MPI_ANY_TAG (specific
 *     source), then the same with MPI_ANY_SOURCE (specific tag).  The peer
 *     really sent a matching message each time.  If the shim is active and
 *     MPISHIM_ASSERT names no_any_tag (no_any_source), each call must fail
 *     with class MPI_ERR_TAG (MPI_ERR_RANK) and the message is then received
 *     with a specific tag/source; otherwise each call must succeed and get
 *     that message (status source/tag/count, payload).
 *   thread 1, on MPI_Comm_dup_with_info(WORLD, {mpi_assert_no_any_tag=true})
 *     and on a duplicate with {mpi_assert_no_any_source=true}: when the shim
 *     is active (whatever MPISHIM_ASSERT says) MPI_ANY_TAG (MPI_ANY_SOURCE)
 *     receives/probes on them fail with MPI_ERR_TAG (MPI_ERR_RANK), through
 *     the user error handler installed on that communicator (called with
 *     that communicator), and MPI_Comm_get_info reports the key as "true"
 *     (the shim records it even where the host drops unknown keys).  Without
 *     the shim the wildcard calls are skipped: on a communicator that
 *     asserts the contrary they are erroneous and a host may do anything.
 *     Receives with a specific tag and source work in every case.
 * After every error, normal communication on that communicator is checked.
 * The mpi_assert_* keys take the booleans the MPISHIM_* booleans take
 * (src/core/config.c): 1|yes|on|true and 0|no|off|false, any case; with the
 * shim active a true one is reported by MPI_Comm_get_info, and any other
 * value is ignored with one warning line on rank 0.
 */
#include "testutil.h"

#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <strings.h>

#define NOPS 7
#define TAG_T 100 /* + op: section "MPI_ANY_TAG on WORLD" */
#define TAG_S 200 /* + op: section "MPI_ANY_SOURCE on WORLD" */
#define TAG_W 300
#define TAG_NT 400
#define TAG_NS 500

enum { OP_RECV, OP_IRECV, OP_PROBE, OP_IPROBE, OP_MPROBE, OP_IMPROBE, OP_RECV_INIT };
static const char *opname[NOPS] = {"MPI_Recv",   "MPI_Irecv",   "MPI_Probe",    "MPI_Iprobe",
                                   "MPI_Mprobe", "MPI_Improbe", "MPI_Recv_init"};

static int rank, size, peer, shim_active, env_no_tag, env_no_src;
static MPI_Comm c_nt, c_ns;

/* ------------------------------------------------------------ helpers */
static int env_has(const char *word)
{
    const char *e = getenv("MPISHIM_ASSERT");
    if (!e)
        return 0;
    size_t wl = strlen(word);
    for (const char *p = e; *p;) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        const char *q = p;
        while (*q && *q != ',')
            q++;
        const char *end = q;
        while (end > p && isspace((unsigned char)end[-1]))
            end--;
        if ((size_t)(end - p) == wl && strncasecmp(p, word, wl) == 0)
            return 1;
        p = q;
    }
    return 0;
}

static void expect_class(int rc, int want, const char *want_name, const char *what)
{
    int cls = -1, len = 0;
    char str[MPI_MAX_ERROR_STRING] = "";
    CHECK(rc != MPI_SUCCESS, "%s: returned MPI_SUCCESS, expected an error of class %s", what, want_name);
    CHECK_MPI(MPI_Error_class(rc, &cls));
    MPI_Error_string(rc, str, &len);
    CHECK(cls == want, "%s: error class %d, expected %s (%d); code %d: %s", what, cls, want_name, want, rc,
          str);
}

static int val(int src, int tag, int j) { return src * 1000003 + tag * 101 + j; }

static void check_msg(const int *b, const MPI_Status *st, int src, int tag, const char *what)
{
    int cnt = -1;
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag, "%s: status source %d tag %d, expected %d/%d", what,
          st->MPI_SOURCE, st->MPI_TAG, src, tag);
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == 2, "%s: count %d, expected 2", what, cnt);
    CHECK(b[0] == val(src, tag, 0) && b[1] == val(src, tag, 1), "%s: payload {%d, %d}", what, b[0], b[1]);
}

/* Run op with the given source/tag (one of them a wildcard) on comm; on
 * success receive the message and check it is (peer, want_tag).  Returns
 * the call's error code (MPI_SUCCESS or the error of the wildcard call). */
static int wild_op(int op, int src, int tag, MPI_Comm comm, int want_tag, const char *what)
{
    int b[2] = {-1, -1}, rc, flag = 0;
    MPI_Status st;
    MPI_Request r = MPI_REQUEST_NULL;
    MPI_Message m = MPI_MESSAGE_NULL;
    switch (op) {
    case OP_RECV: rc = MPI_Recv(b, 2, MPI_INT, src, tag, comm, &st); break;
    case OP_IRECV:
        rc = MPI_Irecv(b, 2, MPI_INT, src, tag, comm, &r);
        if (rc == MPI_SUCCESS)
            CHECK_MPI(MPI_Wait(&r, &st));
        break;
    case OP_PROBE:
        rc = MPI_Probe(src, tag, comm, &st);
        if (rc == MPI_SUCCESS) {
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == want_tag, "%s: probe status source %d tag %d", what,
                  st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Recv(b, 2, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, comm, &st));
        }
        break;
    case OP_IPROBE:
        while ((rc = MPI_Iprobe(src, tag, comm, &flag, &st)) == MPI_SUCCESS && !flag)
            sched_yield();
        if (rc == MPI_SUCCESS) {
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == want_tag, "%s: probe status source %d tag %d", what,
                  st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Recv(b, 2, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, comm, &st));
        }
        break;
    case OP_MPROBE:
        rc = MPI_Mprobe(src, tag, comm, &m, &st);
        if (rc == MPI_SUCCESS)
            CHECK_MPI(MPI_Mrecv(b, 2, MPI_INT, &m, &st));
        break;
    case OP_IMPROBE:
        while ((rc = MPI_Improbe(src, tag, comm, &flag, &m, &st)) == MPI_SUCCESS && !flag)
            sched_yield();
        if (rc == MPI_SUCCESS) {
            CHECK_MPI(MPI_Imrecv(b, 2, MPI_INT, &m, &r));
            CHECK_MPI(MPI_Wait(&r, &st));
        }
        break;
    default:
        rc = MPI_Recv_init(b, 2, MPI_INT, src, tag, comm, &r);
        if (rc == MPI_SUCCESS) {
            CHECK_MPI(MPI_Start(&r));
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK_MPI(MPI_Request_free(&r));
        }
        break;
    }
    if (rc == MPI_SUCCESS)
        check_msg(b, &st, peer, want_tag, what);
    return rc;
}

/* Receive the message a rejected wildcard call left behind. */
static void recv_specific(MPI_Comm comm, int tag, const char *what)
{
    int b[2] = {-1, -1};
    MPI_Status st;
    CHECK_MPI(MPI_Recv(b, 2, MPI_INT, peer, tag, comm, &st));
    check_msg(b, &st, peer, tag, what);
}

static void exchange_ok(MPI_Comm comm, int tag, const char *what)
{
    int out[2] = {val(rank, tag, 0), val(rank, tag, 1)}, in[2] = {-1, -1};
    MPI_Status st;
    CHECK_MPI(MPI_Sendrecv(out, 2, MPI_INT, peer, tag, in, 2, MPI_INT, peer, tag, comm, &st));
    check_msg(in, &st, peer, tag, what);
}

static void send_all(MPI_Comm comm, int tag0, int n, MPI_Request *rq, int (*buf)[2])
{
    for (int k = 0; k < n; k++) {
        buf[k][0] = val(rank, tag0 + k, 0);
        buf[k][1] = val(rank, tag0 + k, 1);
        CHECK_MPI(MPI_Isend(buf[k], 2, MPI_INT, peer, tag0 + k, comm, &rq[k]));
    }
}

/* ------------------------------------------------------------ thread 0: WORLD */
static void *world_thread(void *unused)
{
    (void)unused;
    char what[160];
    MPI_Request rq[NOPS];
    int sbuf[NOPS][2];

    /* MPI_ANY_TAG, specific source */
    send_all(MPI_COMM_WORLD, TAG_T, NOPS, rq, sbuf);
    for (int op = 0; op < NOPS; op++) {
        snprintf(what, sizeof what, "WORLD %s(source=peer, MPI_ANY_TAG)%s", opname[op],
                 env_no_tag ? " with MPISHIM_ASSERT=no_any_tag" : "");
        int rc = wild_op(op, peer, MPI_ANY_TAG, MPI_COMM_WORLD, TAG_T + op, what);
        if (env_no_tag) {
            expect_class(rc, MPI_ERR_TAG, "MPI_ERR_TAG", what);
            recv_specific(MPI_COMM_WORLD, TAG_T + op, what);
        } else {
            CHECK(rc == MPI_SUCCESS, "%s: returned error %d without the assertion", what, rc);
        }
        exchange_ok(MPI_COMM_WORLD, TAG_W, "WORLD exchange after MPI_ANY_TAG call");
    }
    CHECK_MPI(MPI_Waitall(NOPS, rq, MPI_STATUSES_IGNORE));

    /* MPI_ANY_SOURCE, specific tag */
    send_all(MPI_COMM_WORLD, TAG_S, NOPS, rq, sbuf);
    for (int op = 0; op < NOPS; op++) {
        snprintf(what, sizeof what, "WORLD %s(MPI_ANY_SOURCE, tag=%d)%s", opname[op], TAG_S + op,
                 env_no_src ? " with MPISHIM_ASSERT=no_any_source" : "");
        int rc = wild_op(op, MPI_ANY_SOURCE, TAG_S + op, MPI_COMM_WORLD, TAG_S + op, what);
        if (env_no_src) {
            expect_class(rc, MPI_ERR_RANK, "MPI_ERR_RANK", what);
            recv_specific(MPI_COMM_WORLD, TAG_S + op, what);
        } else {
            CHECK(rc == MPI_SUCCESS, "%s: returned error %d without the assertion", what, rc);
        }
        exchange_ok(MPI_COMM_WORLD, TAG_W, "WORLD exchange after MPI_ANY_SOURCE call");
    }
    CHECK_MPI(MPI_Waitall(NOPS, rq, MPI_STATUSES_IGNORE));
    return NULL;
}

/* ------------------------------------------------------------ thread 1: info keys */
static atomic_int handler_calls, handler_last_code;
static pthread_mutex_t handler_mu = PTHREAD_MUTEX_INITIALIZER;
static MPI_Comm handler_last_comm = MPI_COMM_NULL; /* under handler_mu */

static void comm_handler(MPI_Comm *comm, int *code, ...)
{
    pthread_mutex_lock(&handler_mu);
    handler_last_comm = *comm;
    pthread_mutex_unlock(&handler_mu);
    atomic_store(&handler_last_code, *code);
    atomic_fetch_add(&handler_calls, 1);
}

static void check_info(MPI_Comm c, const char *key)
{
    MPI_Info used;
    char v[MPI_MAX_INFO_VAL + 1] = "";
    int flag = 0;
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    CHECK_MPI(MPI_Info_get(used, key, MPI_MAX_INFO_VAL, v, &flag));
    CHECK(flag && strcmp(v, "true") == 0, "shim active: MPI_Comm_get_info reports %s=%s, expected true", key,
          flag ? v : "(not set)");
    CHECK_MPI(MPI_Info_free(&used));
}

/* One rejected wildcard call on c: class and the handler call. */
static void expect_rejected(int rc, MPI_Comm c, int cls, const char *cls_name, const char *what)
{
    expect_class(rc, cls, cls_name, what);
    CHECK(atomic_load(&handler_last_code) == rc,
          "%s: the communicator's error handler got code %d, the call returned %d", what,
          atomic_load(&handler_last_code), rc);
    pthread_mutex_lock(&handler_mu);
    int same = handler_last_comm == c;
    handler_last_comm = MPI_COMM_NULL;
    pthread_mutex_unlock(&handler_mu);
    CHECK(same, "%s: the error handler was not called with the user's communicator", what);
}

static void *info_thread(void *unused)
{
    (void)unused;
    MPI_Request rq[3];
    int sbuf[3][2], rc, flag = 0, calls = 0;
    MPI_Message m = MPI_MESSAGE_NULL;
    MPI_Request r = MPI_REQUEST_NULL;
    int b[2];

    /* mpi_assert_no_any_tag */
    send_all(c_nt, TAG_NT, 3, rq, sbuf);
    if (shim_active) {
        check_info(c_nt, "mpi_assert_no_any_tag");
        rc = MPI_Recv(b, 2, MPI_INT, peer, MPI_ANY_TAG, c_nt, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_nt, MPI_ERR_TAG, "MPI_ERR_TAG", "no_any_tag comm: MPI_Recv(MPI_ANY_TAG)");
        rc = MPI_Irecv(b, 2, MPI_INT, peer, MPI_ANY_TAG, c_nt, &r);
        expect_rejected(rc, c_nt, MPI_ERR_TAG, "MPI_ERR_TAG", "no_any_tag comm: MPI_Irecv(MPI_ANY_TAG)");
        rc = MPI_Iprobe(peer, MPI_ANY_TAG, c_nt, &flag, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_nt, MPI_ERR_TAG, "MPI_ERR_TAG", "no_any_tag comm: MPI_Iprobe(MPI_ANY_TAG)");
        rc = MPI_Improbe(peer, MPI_ANY_TAG, c_nt, &flag, &m, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_nt, MPI_ERR_TAG, "MPI_ERR_TAG", "no_any_tag comm: MPI_Improbe(MPI_ANY_TAG)");
        calls += 4;
        CHECK(atomic_load(&handler_calls) == calls,
              "no_any_tag comm: error handler called %d times for %d errors", atomic_load(&handler_calls),
              calls);
    }
    /* specific receives work, in every case */
    recv_specific(c_nt, TAG_NT, "no_any_tag comm: MPI_Recv(peer, tag)");
    {
        MPI_Status st;
        b[0] = b[1] = -1;
        CHECK_MPI(MPI_Irecv(b, 2, MPI_INT, peer, TAG_NT + 1, c_nt, &r));
        CHECK_MPI(MPI_Wait(&r, &st));
        check_msg(b, &st, peer, TAG_NT + 1, "no_any_tag comm: MPI_Irecv(peer, tag)");
        CHECK_MPI(MPI_Mprobe(peer, TAG_NT + 2, c_nt, &m, &st));
        b[0] = b[1] = -1;
        CHECK_MPI(MPI_Mrecv(b, 2, MPI_INT, &m, &st));
        check_msg(b, &st, peer, TAG_NT + 2, "no_any_tag comm: MPI_Mprobe+MPI_Mrecv(peer, tag)");
    }
    CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    exchange_ok(c_nt, TAG_NT + 9, "no_any_tag comm: exchange after the errors");

    /* mpi_assert_no_any_source */
    send_all(c_ns, TAG_NS, 3, rq, sbuf);
    if (shim_active) {
        check_info(c_ns, "mpi_assert_no_any_source");
        rc = MPI_Recv(b, 2, MPI_INT, MPI_ANY_SOURCE, TAG_NS, c_ns, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_ns, MPI_ERR_RANK, "MPI_ERR_RANK",
                        "no_any_source comm: MPI_Recv(MPI_ANY_SOURCE)");
        rc = MPI_Irecv(b, 2, MPI_INT, MPI_ANY_SOURCE, TAG_NS, c_ns, &r);
        expect_rejected(rc, c_ns, MPI_ERR_RANK, "MPI_ERR_RANK",
                        "no_any_source comm: MPI_Irecv(MPI_ANY_SOURCE)");
        rc = MPI_Probe(MPI_ANY_SOURCE, TAG_NS, c_ns, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_ns, MPI_ERR_RANK, "MPI_ERR_RANK",
                        "no_any_source comm: MPI_Probe(MPI_ANY_SOURCE)");
        rc = MPI_Mprobe(MPI_ANY_SOURCE, TAG_NS, c_ns, &m, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_ns, MPI_ERR_RANK, "MPI_ERR_RANK",
                        "no_any_source comm: MPI_Mprobe(MPI_ANY_SOURCE)");
        calls += 4;
        CHECK(atomic_load(&handler_calls) == calls,
              "no_any_source comm: error handler called %d times for %d errors", atomic_load(&handler_calls),
              calls);
    }
    recv_specific(c_ns, TAG_NS, "no_any_source comm: MPI_Recv(peer, tag)");
    {
        MPI_Status st;
        int f = 0;
        while (!f)
            CHECK_MPI(MPI_Iprobe(peer, TAG_NS + 1, c_ns, &f, &st));
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == TAG_NS + 1,
              "no_any_source comm: MPI_Iprobe status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
        recv_specific(c_ns, TAG_NS + 1, "no_any_source comm: MPI_Iprobe(peer, tag) + MPI_Recv");
        recv_specific(c_ns, TAG_NS + 2, "no_any_source comm: MPI_Recv(peer, tag)");
    }
    CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    exchange_ok(c_ns, TAG_NS + 9, "no_any_source comm: exchange after the errors");
    CHECK(atomic_load(&handler_calls) == calls, "error handler called %d times, expected %d",
          atomic_load(&handler_calls), calls);
    return NULL;
}

/* Before the threads start the main thread is alone in MPI, so with
 * MPISHIM_SOLO=1 these calls take the shim's solo path, which must refuse
 * the same wildcards as the runtime (it skips the communicator lookup only
 * while no communicator asserts anything). A wrongly accepted MPI_Recv
 * hangs: the runner's timeout fails the test. */
static void solo_phase(void)
{
    MPI_Request r = MPI_REQUEST_NULL;
    int b[2], rc;
    if (shim_active) {
        rc = MPI_Irecv(b, 2, MPI_INT, peer, MPI_ANY_TAG, c_nt, &r);
        expect_rejected(rc, c_nt, MPI_ERR_TAG, "MPI_ERR_TAG", "solo: no_any_tag comm: MPI_Irecv(MPI_ANY_TAG)");
        rc = MPI_Recv(b, 2, MPI_INT, MPI_ANY_SOURCE, TAG_NS, c_ns, MPI_STATUS_IGNORE);
        expect_rejected(rc, c_ns, MPI_ERR_RANK, "MPI_ERR_RANK", "solo: no_any_source comm: MPI_Recv(MPI_ANY_SOURCE)");
    }
    if (env_no_tag) {
        rc = MPI_Irecv(b, 2, MPI_INT, peer, MPI_ANY_TAG, MPI_COMM_WORLD, &r);
        expect_class(rc, MPI_ERR_TAG, "MPI_ERR_TAG", "solo: WORLD MPI_Irecv(MPI_ANY_TAG), MPISHIM_ASSERT=no_any_tag");
    }
    if (env_no_src) {
        rc = MPI_Recv(b, 2, MPI_INT, MPI_ANY_SOURCE, TAG_S, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        expect_class(rc, MPI_ERR_RANK, "MPI_ERR_RANK",
                     "solo: WORLD MPI_Recv(MPI_ANY_SOURCE), MPISHIM_ASSERT=no_any_source");
    }
    atomic_store(&handler_calls, 0); /* the threads count their own */
}

/* One duplicate per value of mpi_assert_allow_overtaking (no traffic on it:
 * the point is how the value is read). */
static void assert_values(void)
{
    static const struct {
        const char *val;
        int ok, set;
    } cases[] = {
        { "true", 1, 1 }, { "TRUE", 1, 1 }, { "yes", 1, 1 }, { "1", 1, 1 }, { "On", 1, 1 },
        { "false", 1, 0 }, { "0", 1, 0 }, { "no", 1, 0 }, { "maybe", 0, 0 }, { "2", 0, 0 },
    };
    const char *key = "mpi_assert_allow_overtaking";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        MPI_Info info, used;
        MPI_Comm c;
        char line[160], v[MPI_MAX_INFO_VAL + 1] = "";
        int flag = 0;
        snprintf(line, sizeof line, "mpishim: info key %s='%s' ignored; accepted values: ", key, cases[i].val);
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, key, cases[i].val));
        if (rank == 0)
            test_capture_stderr_begin();
        CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c));
        if (rank == 0) {
            int n = test_capture_stderr_end(line), want = shim_active && !cases[i].ok;
            CHECK(n == want, "%s='%s': %d warning lines, expected %d", key, cases[i].val, n, want);
        }
        CHECK_MPI(MPI_Info_free(&info));
        CHECK_MPI(MPI_Comm_get_info(c, &used));
        CHECK_MPI(MPI_Info_get(used, key, MPI_MAX_INFO_VAL, v, &flag));
        CHECK_MPI(MPI_Info_free(&used));
        /* Only the true ones: for the others the host's own reading shows
         * (both hosts report "2" as true, as their hint parsers take any
         * nonzero number). */
        if (shim_active && cases[i].set)
            CHECK(flag && strcmp(v, "true") == 0, "%s='%s': MPI_Comm_get_info reports %s, expected true", key,
                  cases[i].val, flag ? v : "(not set)");
        CHECK_MPI(MPI_Comm_free(&c));
    }
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_hints_error");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    void *sym = dlsym(RTLD_DEFAULT, "mpishim_active");
    int (*fn)(void) = NULL;
    if (sym)
        memcpy(&fn, &sym, sizeof fn);
    shim_active = fn != NULL && fn() == 1;
    env_no_tag = shim_active && env_has("no_any_tag");
    env_no_src = shim_active && env_has("no_any_source");

    MPI_Info info;
    MPI_Errhandler eh;
    CHECK_MPI(MPI_Comm_create_errhandler(comm_handler, &eh));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c_nt));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &c_ns));
    CHECK_MPI(MPI_Info_free(&info));
    CHECK_MPI(MPI_Comm_set_errhandler(c_nt, eh));
    CHECK_MPI(MPI_Comm_set_errhandler(c_ns, eh));
    CHECK_MPI(MPI_Errhandler_free(&eh));
    assert_values();

    peer = rank ^ 1;
    if (peer < size) {
        solo_phase();
        pthread_t t0, t1;
        CHECK(pthread_create(&t0, NULL, world_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_create(&t1, NULL, info_thread, NULL) == 0, "pthread_create failed");
        CHECK(pthread_join(t0, NULL) == 0, "pthread_join failed");
        CHECK(pthread_join(t1, NULL) == 0, "pthread_join failed");
    }

    CHECK_MPI(MPI_Comm_free(&c_nt));
    CHECK_MPI(MPI_Comm_free(&c_ns));
    test_finish("mt_hints_error");
    return 0;
}
