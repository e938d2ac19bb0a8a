/* Spreading maps (MPISHIM_MAP tag, peer, hash, thread) on one shared
 * communicator whose info keys assert no_any_tag, no_any_source and
 * allow_overtaking, with and without a lane.
 *
 * 1. Threads that reach MPI in different orders on the two sides of a
 *    pair. Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out);
 *    NTHREADS threads per rank, thread t exchanges NMSG messages each way
 *    with thread t of the peer on tags t*NTAG + k. The threads make their
 *    first send one at a time, in ascending order on even ranks and in
 *    descending order on odd ones, so that a VCI chosen by arrival order
 *    (the thread map's own VCI) differs between the two sides: VCI i of
 *    one process reaches only VCI i of another on a lane, so a send and
 *    its receive must be routed by what both sides know (ranks, tag).
 *    Overtaking is allowed, so order is not checked: every message must
 *    arrive once, with its status and every payload word right.
 * 2. With a lane open: the program's MPI_Comm_dup and MPI_Comm_split run no
 *    host communicator constructor beyond the program's own (the lane
 *    spreads a communicator over the VCIs' endpoints without internal
 *    duplicates). The host's constructors are counted by defining them
 *    here, which puts these definitions ahead of the host library's for the
 *    shim as well.
 *
 * A hang fails by the watchdog, naming the step. */
#include "testutil.h"

#include <pthread.h>
#include <stdatomic.h>

#define NTHREADS 4
#define NTAG 3
#define NMSG 240
#define WIN 24     /* multiple of NTAG */
#define BIG 6000   /* ints: above both hosts' and both lanes' eager limits */
#define HDR 4      /* source rank, thread, tag, sequence number */

static int rank, size, peer;
static MPI_Comm shared;

/* ------------------------------------------------ host constructor counts */

static _Atomic int host_ctors;

#define COUNTED(name, params, args)                                       \
    int P##name params                                                    \
    {                                                                     \
        static int(*next) params;                                         \
        if (!next) {                                                      \
            void *s = dlsym(RTLD_NEXT, "P" #name);                        \
            memcpy(&next, &s, sizeof next);                               \
        }                                                                 \
        atomic_fetch_add(&host_ctors, 1);                                 \
        return next args;                                                 \
    }

COUNTED(MPI_Comm_create, (MPI_Comm c, MPI_Group g, MPI_Comm *out), (c, g, out))
COUNTED(MPI_Comm_split, (MPI_Comm c, int color, int key, MPI_Comm *out), (c, color, key, out))
COUNTED(MPI_Comm_create_group, (MPI_Comm c, MPI_Group g, int tag, MPI_Comm *out), (c, g, tag, out))
COUNTED(MPI_Comm_dup, (MPI_Comm c, MPI_Comm *out), (c, out))
COUNTED(MPI_Comm_dup_with_info, (MPI_Comm c, MPI_Info info, MPI_Comm *out), (c, info, out))

static const char *lane(void)
{
    void *sym = dlsym(RTLD_DEFAULT, "mpishim_lane");
    const char *(*fn)(void) = NULL;
    if (sym)
        memcpy(&fn, &sym, sizeof fn);
    return fn ? fn() : NULL;
}

/* ------------------------------------------------ threads */

static pthread_mutex_t turn_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t turn_cv = PTHREAD_COND_INITIALIZER;
static int turn;

static int msg_len(int i) { return i % 40 == 39 ? BIG : HDR + i % 5; }
static int word(int src, int t, int i, int j) { return ((src * NTHREADS + t) * NMSG + i) * 11 + j; }

static void fill(int *b, int t, int i)
{
    int tag = t * NTAG + i % NTAG;
    b[0] = rank, b[1] = t, b[2] = tag, b[3] = i;
    for (int j = HDR; j < msg_len(i); j++)
        b[j] = word(rank, t, i, j);
}

/* One received message of thread t on tag: its status and payload; seen
 * counts each sequence number. */
static int check_msg(struct test_targ *a, const int *b, const MPI_Status *st, int tag, char *seen)
{
    int t = a->t, cnt = -1;
    MPI_Get_count(st, MPI_INT, &cnt);
    TCHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag, "thread %d tag %d: status source %d tag %d", t, tag,
           st->MPI_SOURCE, st->MPI_TAG);
    TCHECK(cnt >= HDR && b[0] == peer && b[1] == t && b[2] == tag,
           "thread %d tag %d: count %d, header %d %d %d (a message of another thread or tag)", t, tag, cnt, b[0],
           b[1], b[2]);
    int i = b[3];
    TCHECK(i >= 0 && i < NMSG && i % NTAG == tag - t * NTAG && !seen[i], "thread %d tag %d: sequence %d %s", t,
           tag, i, i >= 0 && i < NMSG && seen[i] ? "twice" : "out of range");
    seen[i] = 1;
    TCHECK(cnt == msg_len(i), "thread %d msg %d: count %d, expected %d", t, i, cnt, msg_len(i));
    for (int j = HDR; j < cnt; j++)
        TCHECK(b[j] == word(peer, t, i, j), "thread %d msg %d: word %d corrupt", t, i, j);
    return 1;
out:
    return 0;
}

static void *worker(void *p)
{
    struct test_targ *a = p;
    int t = a->t;
    int pos = rank % 2 == 0 ? t : NTHREADS - 1 - t;
    int *sb = malloc(sizeof(int) * BIG * WIN), *rb = malloc(sizeof(int) * BIG * WIN);
    char seen[NMSG] = { 0 };
    TCHECK(sb && rb, "out of memory");

    /* The first send, in this rank's order of threads. */
    pthread_mutex_lock(&turn_mu);
    while (turn != pos)
        pthread_cond_wait(&turn_cv, &turn_mu);
    pthread_mutex_unlock(&turn_mu);
    MPI_Request first;
    fill(sb, t, 0);
    int rc = MPI_Isend(sb, msg_len(0), MPI_INT, peer, t * NTAG, shared, &first);
    pthread_mutex_lock(&turn_mu);
    turn++;
    pthread_cond_broadcast(&turn_cv);
    pthread_mutex_unlock(&turn_mu);
    TCHECK(rc == MPI_SUCCESS, "thread %d: first Isend rc %d", t, rc);
    MPI_Status st;
    rc = MPI_Recv(rb, BIG, MPI_INT, peer, t * NTAG, shared, &st);
    TCHECK(rc == MPI_SUCCESS, "thread %d: first Recv rc %d", t, rc);
    if (!check_msg(a, rb, &st, t * NTAG, seen))
        goto out;
    rc = MPI_Wait(&first, MPI_STATUS_IGNORE);
    TCHECK(rc == MPI_SUCCESS, "thread %d: first Wait rc %d", t, rc);

    /* The rest in windows: receives first, then sends, every tag mixed. */
    for (int i0 = 1; i0 < NMSG; i0 += WIN) {
        MPI_Request rq[2 * WIN];
        MPI_Status sts[2 * WIN];
        int w = NMSG - i0 < WIN ? NMSG - i0 : WIN;
        for (int k = 0; k < w; k++) {
            int tag = t * NTAG + (i0 + k) % NTAG;
            rc = MPI_Irecv(rb + (size_t)k * BIG, BIG, MPI_INT, peer, tag, shared, &rq[k]);
            TCHECK(rc == MPI_SUCCESS, "thread %d msg %d: Irecv rc %d", t, i0 + k, rc);
        }
        for (int k = 0; k < w; k++) {
            int i = i0 + k;
            fill(sb + (size_t)k * BIG, t, i);
            rc = MPI_Isend(sb + (size_t)k * BIG, msg_len(i), MPI_INT, peer, t * NTAG + i % NTAG, shared, &rq[w + k]);
            TCHECK(rc == MPI_SUCCESS, "thread %d msg %d: Isend rc %d", t, i, rc);
        }
        rc = MPI_Waitall(2 * w, rq, sts);
        TCHECK(rc == MPI_SUCCESS, "thread %d msgs %d..: Waitall rc %d", t, i0, rc);
        for (int k = 0; k < w; k++)
            if (!check_msg(a, rb + (size_t)k * BIG, &sts[k], t * NTAG + (i0 + k) % NTAG, seen))
                goto out;
    }
    for (int i = 0; i < NMSG; i++)
        TCHECK(seen[i], "thread %d: message %d never came", t, i);
out:
    free(sb);
    free(rb);
    return NULL;
}

static void exchange(void)
{
    turn = 0;
    test_run_checked_threads(NTHREADS, worker);
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_spread");
    test_watchdog("mt_spread", 90);
    const char *ln = lane();

    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_allow_overtaking", "true"));

    test_step = "MPI_Comm_dup_with_info";
    int before = atomic_load(&host_ctors);
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &shared));
    int made = atomic_load(&host_ctors) - before;
    /* One: the program's own (the shim forwards it to the host's). */
    CHECK(!ln || made == 1, "lane %s: MPI_Comm_dup_with_info made %d host communicators, expected 1", ln, made);

    test_step = "MPI_Comm_split";
    MPI_Comm half;
    before = atomic_load(&host_ctors);
    CHECK_MPI(MPI_Comm_split(shared, rank % 2, rank, &half));
    made = atomic_load(&host_ctors) - before;
    CHECK(!ln || made == 1, "lane %s: MPI_Comm_split made %d host communicators, expected 1", ln, made);
    CHECK_MPI(MPI_Comm_free(&half));
    CHECK_MPI(MPI_Info_free(&info));

    if (rank < size - size % 2) {
        peer = rank ^ 1;
        test_step = "exchange on the shared communicator";
        exchange();
    }
    test_step = "MPI_Comm_free";
    CHECK_MPI(MPI_Comm_free(&shared));
    test_step = "finish";
    test_finish("mt_spread");
    return 0;
}
