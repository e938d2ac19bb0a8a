/* MPI-4 partitioned communication on several communicators between the
 * same two processes with the same user tag: matching must never cross
 * communicators, and on one communicator channels match in init order.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out). Channels, all
 * with tag 7, each with its own data and its own layout (partitions x
 * ints), so a channel matched to the wrong sender shows wrong data or a
 * truncation error:
 *   A1, A2  on A = MPI_Comm_dup(MPI_COMM_WORLD) (two channels, init order)
 *   B       on B = MPI_Comm_split(MPI_COMM_WORLD, 0, rank)
 *   W       on MPI_COMM_WORLD
 *   I       on an intercommunicator between even and odd world ranks
 *           (peer: the same local rank in the remote group), when the
 *           world size is even
 *   G       on G = MPI_Comm_create_from_group(MPI_COMM_WORLD's group)
 *           (MPI 4.0 hosts)
 *   D1, D2  on two MPI_Comm_idup(MPI_COMM_WORLD), D2 by
 *           MPI_Comm_idup_with_info on MPI 4.0 hosts
 *   DA      on MPI_Comm_idup(A), made before D1 on even ranks and between
 *           D1 and D2 on odd ones (legal: they have different parents;
 *           on Open MPI before 5 before D1 on every rank, see below)
 *   DD      on MPI_Comm_idup(D1), an idup of an idup
 *   DI      on MPI_Comm_idup(I), when there is I
 * The receiver initializes its receives in one order, the sender its
 * sends in another (rorder, sorder); per round every channel is started,
 * readied, completed and checked (data, source, tag, count). Three
 * rounds. B is released with MPI_Comm_disconnect.
 */
#include "testutil.h"
#include "mpishim.h"

#include <stdint.h>

#define NCH 11
#define TAG 7
#define NROUND 3

static int rank, size, wpeer;

struct chan {
    const char *name;
    MPI_Comm comm;
    int peer;          /* in comm (remote group for the intercommunicator) */
    int parts, cnt;    /* both sides use the same layout */
    int *sbuf, *rbuf;
    MPI_Request s, r;
};

static int word(int src, int ch, int round, int i)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(ch + 5) * 0x85EBCA77u ^
                 (uint32_t)(round + 3) * 0xC2B2AE3Du ^ (uint32_t)i * 2654435761u;
    return (int)(x ^ (x >> 13));
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_comms");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    wpeer = rank ^ 1;
    int active = wpeer < size;

    MPI_Comm a, b, local = MPI_COMM_NULL, inter = MPI_COMM_NULL;
    CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &a));
    CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, rank, &b));
    int have_inter = size % 2 == 0;
    if (have_inter) {
        CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &local));
        CHECK_MPI(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, rank % 2 ? 0 : 1, 99, &inter));
    }
    MPI_Comm g = MPI_COMM_NULL;
#if MPI_VERSION >= 4
    MPI_Group wg;
    CHECK_MPI(MPI_Comm_group(MPI_COMM_WORLD, &wg));
    CHECK_MPI(MPI_Comm_create_from_group(wg, "org.mpishim.test.part_comms", MPI_INFO_NULL, MPI_ERRORS_RETURN, &g));
    CHECK_MPI(MPI_Group_free(&wg));
#endif
    /* The idups: every member makes those on one parent in the same order,
     * but the order across parents differs between even and odd ranks.
     * Open MPI 4.1 now and then never completes idups on different
     * parents made in different orders, also without the shim (both ranks
     * in its progress; docs/design.md), which the standard allows: there
     * DA comes first on every rank. */
#if defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION < 5
    int da_first = 1;
#else
    int da_first = rank % 2 == 0;
#endif
    MPI_Comm d1, d2, da, dd, di = MPI_COMM_NULL;
    MPI_Request dr[5] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL,
                         MPI_REQUEST_NULL};
    if (da_first)
        CHECK_MPI(MPI_Comm_idup(a, &da, &dr[2]));
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &d1, &dr[0]));
    if (!da_first)
        CHECK_MPI(MPI_Comm_idup(a, &da, &dr[2]));
#if MPI_VERSION >= 4
    CHECK_MPI(MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &d2, &dr[1]));
#else
    CHECK_MPI(MPI_Comm_idup(MPI_COMM_WORLD, &d2, &dr[1]));
#endif
    if (have_inter)
        CHECK_MPI(MPI_Comm_idup(inter, &di, &dr[4]));
    CHECK_MPI(MPI_Waitall(5, dr, MPI_STATUSES_IGNORE));
    CHECK_MPI(MPI_Comm_idup(d1, &dd, &dr[3]));
    CHECK_MPI(MPI_Wait(&dr[3], MPI_STATUS_IGNORE));

    MPI_Comm all[] = {a, b, MPI_COMM_WORLD, inter, g, d1, d2, da, dd, di};
    for (int i = 0; i < 10; i++)
        if (all[i] != MPI_COMM_NULL)
            CHECK_MPI(MPI_Comm_set_errhandler(all[i], MPI_ERRORS_RETURN));

    /* A channel without its communicator (I with an odd world size, G
     * before MPI 4.0) sits out. */
    struct chan ch[NCH] = {
        {"A1", a, wpeer, 3, 40, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"A2", a, wpeer, 5, 24, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"B", b, wpeer, 2, 60, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"W", MPI_COMM_WORLD, wpeer, 4, 30, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"I", inter, rank / 2, 6, 20, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"G", g, wpeer, 4, 12, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"D1", d1, wpeer, 3, 16, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"D2", d2, wpeer, 2, 36, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"DA", da, wpeer, 5, 10, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"DD", dd, wpeer, 7, 9, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
        {"DI", di, rank / 2, 6, 8, NULL, NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL},
    };
#define EACH_CHANNEL(c) for (int c = 0; c < NCH; c++) if (ch[c].comm != MPI_COMM_NULL)
    static const int rorder[NCH] = {8, 4, 2, 10, 3, 5, 6, 0, 9, 1, 7},
                     sorder[NCH] = {0, 7, 3, 5, 9, 2, 1, 10, 6, 4, 8};

    if (active) {
        EACH_CHANNEL(c) {
            size_t n = (size_t)ch[c].parts * (size_t)ch[c].cnt;
            ch[c].sbuf = malloc(n * sizeof(int));
            ch[c].rbuf = malloc(n * sizeof(int));
            CHECK(ch[c].sbuf && ch[c].rbuf, "malloc");
        }
        for (int k = 0; k < NCH; k++) {
            struct chan *c = &ch[rorder[k]];
            if (c->comm != MPI_COMM_NULL)
                CHECK_MPI(MPI_Precv_init(c->rbuf, c->parts, c->cnt, MPI_INT, c->peer, TAG, c->comm, MPI_INFO_NULL,
                                         &c->r));
        }
        for (int k = 0; k < NCH; k++) {
            struct chan *c = &ch[sorder[k]];
            if (c->comm != MPI_COMM_NULL)
                CHECK_MPI(MPI_Psend_init(c->sbuf, c->parts, c->cnt, MPI_INT, c->peer, TAG, c->comm, MPI_INFO_NULL,
                                         &c->s));
        }
        for (int round = 0; round < NROUND; round++) {
            EACH_CHANNEL(c) {
                int n = ch[c].parts * ch[c].cnt;
                for (int i = 0; i < n; i++) {
                    ch[c].sbuf[i] = word(rank, c, round, i);
                    ch[c].rbuf[i] = -1;
                }
                CHECK_MPI(MPI_Start(&ch[c].r));
                CHECK_MPI(MPI_Start(&ch[c].s));
            }
            /* Ready in reverse channel order: the data of the last
             * initialized channels goes first. */
            for (int c = NCH - 1; c >= 0; c--)
                if (ch[c].comm != MPI_COMM_NULL)
                    CHECK_MPI(MPI_Pready_range(0, ch[c].parts - 1, ch[c].s));
            EACH_CHANNEL(c) {
                MPI_Status st;
                int rc = MPI_Wait(&ch[c].r, &st);
                CHECK(rc == MPI_SUCCESS, "round %d channel %s: receive failed (error %d)", round, ch[c].name, rc);
                CHECK_MPI(MPI_Wait(&ch[c].s, MPI_STATUS_IGNORE));
                int n = ch[c].parts * ch[c].cnt, got = -1;
                CHECK(st.MPI_SOURCE == ch[c].peer, "round %d channel %s: source %d, expected %d", round,
                      ch[c].name, st.MPI_SOURCE, ch[c].peer);
                CHECK(st.MPI_TAG == TAG, "round %d channel %s: tag %d", round, ch[c].name, st.MPI_TAG);
                CHECK_MPI(MPI_Get_count(&st, MPI_INT, &got));
                CHECK(got == n, "round %d channel %s: count %d, expected %d", round, ch[c].name, got, n);
                for (int i = 0; i < n; i++)
                    CHECK(ch[c].rbuf[i] == word(wpeer, c, round, i),
                          "round %d channel %s: int %d is %d, expected %d (a message of another channel?)", round,
                          ch[c].name, i, ch[c].rbuf[i], word(wpeer, c, round, i));
            }
        }
        EACH_CHANNEL(c) {
            CHECK_MPI(MPI_Request_free(&ch[c].r));
            CHECK_MPI(MPI_Request_free(&ch[c].s));
            free(ch[c].sbuf);
            free(ch[c].rbuf);
        }
    }
    CHECK_MPI(MPI_Comm_free(&dd));
    CHECK_MPI(MPI_Comm_free(&d1));
    CHECK_MPI(MPI_Comm_free(&d2));
    CHECK_MPI(MPI_Comm_free(&da));
    if (have_inter) {
        CHECK_MPI(MPI_Comm_free(&di));
        CHECK_MPI(MPI_Comm_free(&inter));
        CHECK_MPI(MPI_Comm_free(&local));
    }
    if (g != MPI_COMM_NULL)
        CHECK_MPI(MPI_Comm_free(&g));
    CHECK_MPI(MPI_Comm_disconnect(&b)); /* frees like MPI_Comm_free */
    CHECK(b == MPI_COMM_NULL, "MPI_Comm_disconnect left the handle");
    CHECK_MPI(MPI_Comm_free(&a));
    test_finish("part_comms");
    return 0;
}
