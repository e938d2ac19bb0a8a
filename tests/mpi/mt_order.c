/* Message order under concurrency (MPI non-overtaking rule), with the
 * traffic spread over internal duplicates in every way the shim offers.
 *
 * Ranks pair up (0<->1, 2<->3, ...; an odd last rank sits out).  NTHREADS
 * threads per rank; thread t exchanges NMSG messages in each direction with
 * thread t of the peer, on tags t*4+k, k = i mod 4 (round robin over four
 * tags per thread).  Every message carries (source rank, thread, tag,
 * per-tag sequence number).  Receives always name the source and the tag
 * (no wildcards, so the program is legal under every MPISHIM_ASSERT); within
 * a window they are posted in a tag-shuffled order (all of one tag, then
 * the next), so per-tag order is what decides which receive gets which
 * message.  The receiver checks, per (source thread, tag), that sequence
 * numbers increase by exactly 1, plus source/tag/count of the status and
 * every payload word.
 *
 * Windows of WIN messages rotate over four styles:
 *   0: Irecv batch, blocking MPI_Send in order, Waitall
 *   1: Isend batch, blocking MPI_Recv (tag-shuffled), Waitall
 *   2: Irecv batch, MPI_Isend+MPI_Wait one by one, Waitall
 *   3: Irecv batch and Isend batch in one array, one Waitall
 * Some messages are large (rendezvous) among the small ones.
 *
 * Phases: (0) every thread on MPI_COMM_WORLD; (1) each thread on its own
 * MPI_Comm_dup_with_info carrying the MPI-4 assertion
 * mpi_assert_no_any_tag=true (legal: nothing here uses MPI_ANY_TAG; hosts
 * before MPI-4 ignore the key); (2) all threads on one shared duplicate
 * carrying mpi_assert_no_any_tag and mpi_assert_no_any_source, where the
 * shim may hash (tag, peer) to spread the traffic.
 */
#include "testutil.h"

#include <pthread.h>
#include <stdint.h>

#define NTHREADS 4
#define NMSG 300
#define NTAG 4   /* tags per thread */
#define WIN 12   /* multiple of NTAG */
#define BIG 5000 /* ints: 20 KB, above both hosts' shared-memory eager limits */
#define HDR 4
#define NPHASE 3

static int rank, size, peer;
static MPI_Comm thread_comm[NTHREADS], shared_comm;

static int msg_len(int i) { return (i % 50 == 23) ? BIG : HDR + (i * 7) % 29; }
static int tag_of(int t, int i) { return t * NTAG + i % NTAG; }

static int word(int src, int t, int phase, int i, int j)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(t * 7 + phase * 131) * 0x85EBCA77u ^
                 (uint32_t)i * 0xC2B2AE3Du;
    return (int)(x ^ (uint32_t)j * 2654435761u);
}

static void fill(int *b, int t, int phase, int i)
{
    int n = msg_len(i);
    b[0] = rank;
    b[1] = t;
    b[2] = tag_of(t, i);
    b[3] = i / NTAG; /* sequence number within this (thread, tag) stream */
    for (int j = HDR; j < n; j++)
        b[j] = word(rank, t, phase, i, j);
}

struct rstate {
    int t, phase;
    int next_seq[NTAG]; /* per tag of this thread: next expected sequence number */
};

/* Check a received message that was meant for message index i (the
 * receive was posted for tag_of(t, i), in per-tag order). */
static void check_msg(struct rstate *s, const int *b, const MPI_Status *st, int i)
{
    int t = s->t, tag = tag_of(t, i), k = i % NTAG, cnt = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == tag,
          "phase %d thread %d msg %d: status source %d tag %d, expected %d/%d", s->phase, t, i,
          st->MPI_SOURCE, st->MPI_TAG, peer, tag);
    CHECK(b[0] == peer && b[1] == t && b[2] == tag,
          "phase %d thread %d msg %d: header says source %d thread %d tag %d, expected %d/%d/%d", s->phase, t,
          i, b[0], b[1], b[2], peer, t, tag);
    CHECK(b[3] == s->next_seq[k],
          "phase %d thread %d tag %d: sequence %d arrived where %d was next (order broken)", s->phase, t, tag,
          b[3], s->next_seq[k]);
    s->next_seq[k]++;
    CHECK_MPI(MPI_Get_count(st, MPI_INT, &cnt));
    CHECK(cnt == msg_len(i), "phase %d thread %d msg %d: count %d, expected %d", s->phase, t, i, cnt,
          msg_len(i));
    for (int j = HDR; j < cnt; j++)
        CHECK(b[j] == word(peer, t, s->phase, i, j), "phase %d thread %d msg %d: word %d is %d, expected %d",
              s->phase, t, i, j, b[j], word(peer, t, s->phase, i, j));
}

/* The order in which the receives of window [i0, i0+w) are posted: tag by
 * tag (starting tag rotates with the window), ascending within a tag. */
static void shuffled(int i0, int w, int *order)
{
    int n = 0, start = (i0 / WIN) % NTAG;
    for (int kk = 0; kk < NTAG; kk++) {
        int k = (start + kk) % NTAG;
        for (int i = i0; i < i0 + w; i++)
            if (i % NTAG == k)
                order[n++] = i;
    }
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    int *sb = malloc(sizeof(int) * (size_t)BIG * WIN), *rb = malloc(sizeof(int) * (size_t)BIG * WIN);
    CHECK(sb && rb, "out of memory");

    for (int phase = 0; phase < NPHASE; phase++) {
        MPI_Comm comm = phase == 0 ? MPI_COMM_WORLD : phase == 1 ? thread_comm[t] : shared_comm;
        struct rstate s = {.t = t, .phase = phase};
        for (int i0 = 0; i0 < NMSG; i0 += WIN) {
            int w = NMSG - i0 < WIN ? NMSG - i0 : WIN, style = (i0 / WIN) % 4, order[WIN];
            MPI_Request rq[2 * WIN];
            MPI_Status st[2 * WIN];
            shuffled(i0, w, order);
            for (int k = 0; k < w; k++) {
                fill(sb + (size_t)k * BIG, t, phase, i0 + k);
                rb[(size_t)k * BIG] = -1;
            }
#define SBUF(i) (sb + (size_t)((i)-i0) * BIG)
#define RBUF(i) (rb + (size_t)((i)-i0) * BIG)
#define RREQ(i) (rq[(i)-i0])
            if (style != 1)
                for (int k = 0; k < w; k++) {
                    int i = order[k];
                    CHECK_MPI(MPI_Irecv(RBUF(i), BIG, MPI_INT, peer, tag_of(t, i), comm, &RREQ(i)));
                }
            switch (style) {
            case 0:
                for (int i = i0; i < i0 + w; i++)
                    CHECK_MPI(MPI_Send(SBUF(i), msg_len(i), MPI_INT, peer, tag_of(t, i), comm));
                CHECK_MPI(MPI_Waitall(w, rq, st));
                break;
            case 1:
                for (int i = i0; i < i0 + w; i++)
                    CHECK_MPI(
                        MPI_Isend(SBUF(i), msg_len(i), MPI_INT, peer, tag_of(t, i), comm, &rq[w + i - i0]));
                for (int k = 0; k < w; k++) {
                    int i = order[k];
                    CHECK_MPI(MPI_Recv(RBUF(i), BIG, MPI_INT, peer, tag_of(t, i), comm, &st[i - i0]));
                }
                CHECK_MPI(MPI_Waitall(w, rq + w, MPI_STATUSES_IGNORE));
                break;
            case 2:
                for (int i = i0; i < i0 + w; i++) {
                    MPI_Request r;
                    CHECK_MPI(MPI_Isend(SBUF(i), msg_len(i), MPI_INT, peer, tag_of(t, i), comm, &r));
                    CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
                    CHECK(r == MPI_REQUEST_NULL, "MPI_Wait did not free a send request");
                }
                CHECK_MPI(MPI_Waitall(w, rq, st));
                break;
            default:
                for (int i = i0; i < i0 + w; i++)
                    CHECK_MPI(
                        MPI_Isend(SBUF(i), msg_len(i), MPI_INT, peer, tag_of(t, i), comm, &rq[w + i - i0]));
                CHECK_MPI(MPI_Waitall(2 * w, rq, st));
                break;
            }
            for (int k = style == 1 ? w : 0; k < (style == 0 || style == 2 ? w : 2 * w); k++)
                CHECK(rq[k] == MPI_REQUEST_NULL, "style %d: request %d not freed by completion", style, k);
            /* in ascending message order: per tag, sequence numbers must go up by 1 */
            for (int i = i0; i < i0 + w; i++)
                check_msg(&s, RBUF(i), &st[i - i0], i);
#undef SBUF
#undef RBUF
#undef RREQ
        }
        for (int k = 0; k < NTAG; k++)
            CHECK(s.next_seq[k] == (NMSG - k + NTAG - 1) / NTAG,
                  "phase %d thread %d tag %d: %d messages, expected %d", phase, t, tag_of(t, k),
                  s.next_seq[k], (NMSG - k + NTAG - 1) / NTAG);
    }
    free(sb);
    free(rb);
    return NULL;
}

static void check_info_key(MPI_Comm c, const char *key)
{
    /* Informational only without the shim: a host may drop keys it does not
     * use.  With the shim active it must report what the program asserted. */
    void *sym = dlsym(RTLD_DEFAULT, "mpishim_active");
    int (*fn)(void) = NULL;
    if (sym)
        memcpy(&fn, &sym, sizeof fn);
    if (!fn || fn() != 1)
        return;
    MPI_Info used;
    char v[MPI_MAX_INFO_VAL + 1];
    int flag = 0;
    CHECK_MPI(MPI_Comm_get_info(c, &used));
    CHECK_MPI(MPI_Info_get(used, key, MPI_MAX_INFO_VAL, v, &flag));
    CHECK(flag && strcmp(v, "true") == 0, "shim active: MPI_Comm_get_info lacks %s=true (flag %d)", key,
          flag);
    CHECK_MPI(MPI_Info_free(&used));
}

int main(int argc, char **argv)
{
    int provided = test_init(&argc, &argv, MPI_THREAD_MULTIPLE);
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    test_skip_below_multiple(provided, "mt_order");
    CHECK_MPI(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    /* Communicators are created collectively, before the threads start. */
    MPI_Info info;
    CHECK_MPI(MPI_Info_create(&info));
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_tag", "true"));
    for (int t = 0; t < NTHREADS; t++) {
        CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &thread_comm[t]));
        check_info_key(thread_comm[t], "mpi_assert_no_any_tag");
    }
    CHECK_MPI(MPI_Info_set(info, "mpi_assert_no_any_source", "true"));
    CHECK_MPI(MPI_Comm_dup_with_info(MPI_COMM_WORLD, info, &shared_comm));
    check_info_key(shared_comm, "mpi_assert_no_any_tag");
    check_info_key(shared_comm, "mpi_assert_no_any_source");
    CHECK_MPI(MPI_Info_free(&info));

    peer = rank ^ 1;
    if (peer < size) {
        pthread_t th[NTHREADS];
        for (int t = 0; t < NTHREADS; t++)
            CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0, "pthread_create failed");
        for (int t = 0; t < NTHREADS; t++)
            CHECK(pthread_join(th[t], NULL) == 0, "pthread_join failed");
    }

    for (int t = 0; t < NTHREADS; t++)
        CHECK_MPI(MPI_Comm_free(&thread_comm[t]));
    CHECK_MPI(MPI_Comm_free(&shared_comm));
    test_finish("mt_order");
    return 0;
}
