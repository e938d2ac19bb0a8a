/* Multithreaded sanity check through the shim (MPI_THREAD_MULTIPLE).
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  NTHREADS
 * threads per rank; thread t exchanges NMSG messages with tag t with thread
 * t of the peer, concurrently with the other threads.  Per-tag order and
 * payload are checked, so a shim with unsynchronised global state (request
 * tables, counters) or a lock that serialises matching wrongly shows up. */
#include "testutil.h"

#include <pthread.h>

#define NTHREADS 4
#define NMSG 200
#define BIG 8192 /* ints; every 50th message goes rendezvous */
#define NSYNC 10 /* messages exchanged with blocking MPI_Sendrecv */
#define WIN 10   /* the rest: windows of WIN Irecv/Isend pairs */

static int rank, size, peer;

static int msg_len(int i) { return (i % 50 == 49) ? BIG : 4; }
static int val(int src, int t, int i, int j) { return ((src * NTHREADS + t) * NMSG + i) * 7 + j; }

/* Check one received message (status + payload) of thread t. */
static int check_msg(struct test_targ *a, const int *rb, const MPI_Status *st, int i)
{
    int t = a->t, n = msg_len(i), cnt = -1;
    MPI_Get_count(st, MPI_INT, &cnt);
    TCHECK(st->MPI_SOURCE == peer && st->MPI_TAG == t, "thread %d msg %d: status src %d tag %d",
           t, i, st->MPI_SOURCE, st->MPI_TAG);
    TCHECK(cnt == n, "thread %d msg %d: count %d, expected %d", t, i, cnt, n);
    /* val() encodes sender thread and sequence: catches cross-thread
     * mismatches and reordering */
    TCHECK(rb[0] == val(peer, t, i, 0), "thread %d msg %d: got first word %d, expected %d", t, i,
           rb[0], val(peer, t, i, 0));
    for (int j = 1; j < n; j++)
        TCHECK(rb[j] == val(peer, t, i, j), "thread %d msg %d: word %d corrupt", t, i, j);
    return 1;
out:
    return 0;
}

static void *worker(void *p)
{
    struct test_targ *a = p;
    int t = a->t;
    int *sb = malloc(sizeof(int) * BIG * WIN), *rb = malloc(sizeof(int) * BIG * WIN);
    if (!sb || !rb) {
        snprintf(a->err, sizeof a->err, "out of memory");
        goto out;
    }

    /* First NSYNC messages as blocking Sendrecv (one round trip each), the
     * rest in windows of WIN nonblocking pairs: every round trip costs a lot
     * when 4 ranks x 4 threads share 2 cores. */
    for (int i = 0; i < NSYNC; i++) {
        int n = msg_len(i), rc;
        MPI_Status st;
        for (int j = 0; j < n; j++)
            sb[j] = val(rank, t, i, j);
        rb[0] = -1;
        rc = MPI_Sendrecv(sb, n, MPI_INT, peer, t, rb, BIG, MPI_INT, peer, t, MPI_COMM_WORLD, &st);
        TCHECK(rc == MPI_SUCCESS, "thread %d msg %d: Sendrecv rc %d", t, i, rc);
        if (!check_msg(a, rb, &st, i))
            goto out;
    }
    for (int i0 = NSYNC; i0 < NMSG; i0 += WIN) {
        MPI_Request rq[2 * WIN];
        MPI_Status sts[2 * WIN];
        int w = (NMSG - i0 < WIN) ? NMSG - i0 : WIN, rc;
        for (int k = 0; k < w; k++) {
            int i = i0 + k, n = msg_len(i);
            int *s = sb + (size_t)k * BIG, *r = rb + (size_t)k * BIG;
            for (int j = 0; j < n; j++)
                s[j] = val(rank, t, i, j);
            r[0] = -1;
            rc = MPI_Irecv(r, BIG, MPI_INT, peer, t, MPI_COMM_WORLD, &rq[k]);
            TCHECK(rc == MPI_SUCCESS, "thread %d msg %d: Irecv rc %d", t, i, rc);
            rc = MPI_Isend(s, n, MPI_INT, peer, t, MPI_COMM_WORLD, &rq[w + k]);
            TCHECK(rc == MPI_SUCCESS, "thread %d msg %d: Isend rc %d", t, i, rc);
        }
        rc = MPI_Waitall(2 * w, rq, sts);
        TCHECK(rc == MPI_SUCCESS, "thread %d msgs %d..: Waitall rc %d", t, i0, rc);
        for (int k = 0; k < w; k++)
            if (!check_msg(a, rb + (size_t)k * BIG, &sts[k], i0 + k))
                goto out;
    }

    /* a burst of unexpected messages per thread, then receive in order */
    {
        MPI_Request rq[NMSG];
        int v[NMSG];
        for (int i = 0; i < NMSG; i++) {
            v[i] = val(rank, t, i, 0);
            int rc = MPI_Isend(&v[i], 1, MPI_INT, peer, t, MPI_COMM_WORLD, &rq[i]);
            TCHECK(rc == MPI_SUCCESS, "thread %d burst %d: Isend rc %d", t, i, rc);
        }
        for (int i = 0; i < NMSG; i++) {
            int x = -1;
            int rc = MPI_Recv(&x, 1, MPI_INT, peer, t, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            TCHECK(rc == MPI_SUCCESS, "thread %d burst %d: Recv rc %d", t, i, rc);
            TCHECK(x == val(peer, t, i, 0), "thread %d burst: expected msg %d, got value %d", t, i,
                   x);
        }
        int rc = MPI_Waitall(NMSG, rq, MPI_STATUSES_IGNORE);
        TCHECK(rc == MPI_SUCCESS, "thread %d burst: Waitall rc %d", t, rc);
    }
out:
    free(sb);
    free(rb);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);

    test_skip_below_multiple(provided, "mt_basic");

    /* make sure errors come back to the threads instead of aborting there */
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    peer = rank ^ 1;
    if (peer < size) {
        test_run_checked_threads(NTHREADS, worker);
    }

    test_finish("mt_basic");
    return 0;
}
