/* MPI-4 partitioned communication, the basics: data, partition layouts,
 * rounds, datatypes, zero-size messages, status.
 *
 * Ranks pair up (0<->1, 2<->3; an odd last rank sits out) and every rank
 * both sends to and receives from its peer on every channel.
 *
 *  - Layouts: 448 ints per message = 1*448 = 2*224 = 7*64 = 64*7; the sender
 *    uses S partitions and the receiver R, for every S x R in {1,2,7,64}^2
 *    (16 combinations), each once with the receiver on MPI_INT and once on a
 *    contiguous derived type of 7 (or 8) MPI_INTs (same type signature).
 *  - Rounds: every channel is started again with changed data.  Round 0
 *    handles one channel at a time and readies partitions in ascending
 *    order, round 1 starts every channel at once (MPI_Startall) and readies
 *    in descending order, round 2 readies with MPI_Pready_range /
 *    MPI_Pready_list and the receiver polls MPI_Parrived, checking each
 *    partition's bytes as soon as it is reported.  In rounds 0 and 2 the
 *    sender writes its buffer after MPI_Start (legal: starting a partitioned
 *    send does not enable the transfer of any part of the buffer).
 *  - Status of the receive after MPI_Wait: MPI_SOURCE, MPI_TAG,
 *    MPI_Get_count in the receiver's datatype, MPI_Get_elements (in
 *    MPI_INTs, for the derived type too); receive buffers have a guard
 *    zone that must stay untouched; persistent handles stay valid (not
 *    MPI_REQUEST_NULL) after completion.
 *  - Zero count: count 0 with 1 and 4 partitions, and 3 send partitions
 *    against 5 receive partitions; MPI_Parrived must report every
 *    partition, the count is 0 and nothing is written.
 *  - The info key mpishim_part_min_bytes on MPI_Psend_init takes what
 *    MPISHIM_PART_MIN_BYTES takes (same parser: 0..1G, suffixes K, M, G
 *    with optional B or iB, any case): a value the variable refuses is
 *    ignored with one warning line on rank 0, an accepted one with none
 *    (read by the shim's partitioned layer only); the data arrive either way.
 *  - partitions = 0 is not tested: the standard's text (MPI 4.0 sec. 4.2,
 *    4.2.1: "Valid partitioned communication operations must have one or
 *    more partitions specified", and for MPI_PSEND_INIT and MPI_PRECV_INIT
 *    "It is erroneous to provide a partitions value <= 0"; the argument
 *    tables say "non-negative", mpi-forum/mpi-issues#961 records that
 *    contradiction) makes it erroneous, and an erroneous program is no
 *    test.  The smallest legal value, 1, is part of the layouts above.
 */
#include "testutil.h"
#include "mpishim.h"

#include <stdint.h>
#include <strings.h>

#define TOTAL 448
#define GUARD 16
#define NROUND 3
#define NLAYOUT 4
#define NCHAN (NLAYOUT * NLAYOUT * 2)
#define SENTINEL ((int)0xDEADBEEF)

static const int layout[NLAYOUT] = {1, 2, 7, 64};
static int rank, size, peer;

static int word(int src, int tag, int round, int i)
{
    uint32_t x = (uint32_t)(src + 1) * 0x9E3779B1u ^ (uint32_t)(tag + 17) * 0x85EBCA77u ^
                 (uint32_t)(round + 3) * 0xC2B2AE3Du ^ (uint32_t)i * 2654435761u;
    return (int)(x ^ (x >> 15));
}

struct chan {
    int tag;
    int sparts, scount;            /* sender: sparts x scount MPI_INT */
    int rparts, rcount, relem;     /* receiver: rparts x rcount rtype, relem ints per rtype */
    MPI_Datatype rtype;
    int sbuf[TOTAL];
    int rbuf[TOTAL + GUARD];
    MPI_Request s, r;
};

static struct chan ch[NCHAN];

static void fill_send(struct chan *c, int round)
{
    for (int i = 0; i < TOTAL; i++)
        c->sbuf[i] = word(rank, c->tag, round, i);
}

static void clear_recv(struct chan *c)
{
    for (int i = 0; i < TOTAL + GUARD; i++)
        c->rbuf[i] = SENTINEL;
}

/* Receive partition p (of c->rparts) holds ints [p*per, (p+1)*per). */
static void check_rpart(const struct chan *c, int round, int p)
{
    int per = TOTAL / c->rparts;
    for (int i = p * per; i < (p + 1) * per; i++)
        CHECK(c->rbuf[i] == word(peer, c->tag, round, i),
              "tag %d (send %dx%d, recv %dx%d x %d ints) round %d partition %d: int %d is %d, expected %d", c->tag,
              c->sparts, c->scount, c->rparts, c->rcount, c->relem, round, p, i, c->rbuf[i],
              word(peer, c->tag, round, i));
}

static void check_recv(const struct chan *c, int round, const MPI_Status *st)
{
    int n = -1;
    CHECK(st->MPI_SOURCE == peer && st->MPI_TAG == c->tag, "tag %d round %d: status source %d tag %d, expected %d/%d",
          c->tag, round, st->MPI_SOURCE, st->MPI_TAG, peer, c->tag);
    CHECK_MPI(MPI_Get_count(st, c->rtype, &n));
    CHECK(n == TOTAL / c->relem, "tag %d round %d: MPI_Get_count in the receive type %d, expected %d", c->tag, round,
          n, TOTAL / c->relem);
    CHECK_MPI(MPI_Get_elements(st, c->rtype, &n));
    CHECK(n == TOTAL, "tag %d round %d: MPI_Get_elements %d, expected %d", c->tag, round, n, TOTAL);
    for (int p = 0; p < c->rparts; p++)
        check_rpart(c, round, p);
    for (int i = TOTAL; i < TOTAL + GUARD; i++)
        CHECK(c->rbuf[i] == SENTINEL, "tag %d round %d: guard int %d overwritten with %d", c->tag, round, i,
              c->rbuf[i]);
    CHECK(c->r != MPI_REQUEST_NULL && c->s != MPI_REQUEST_NULL,
          "tag %d round %d: completion freed a partitioned (persistent) request", c->tag, round);
}

/* Mark every send partition ready, in the style of the round. */
static void ready_all(struct chan *c, int round)
{
    int n = c->sparts;
    if (round == 0) {
        for (int p = 0; p < n; p++)
            CHECK_MPI(MPI_Pready(p, c->s));
    } else if (round == 1) {
        for (int p = n - 1; p >= 0; p--)
            CHECK_MPI(MPI_Pready(p, c->s));
    } else {
        /* upper half as one range (if any), the lower half as a list in
         * descending order, one-element range for a single partition */
        int half = n / 2;
        if (n == 1) {
            CHECK_MPI(MPI_Pready_range(0, 0, c->s));
            return;
        }
        CHECK_MPI(MPI_Pready_range(half, n - 1, c->s));
        int list[64];
        for (int k = 0; k < half; k++)
            list[k] = half - 1 - k;
        CHECK_MPI(MPI_Pready_list(half, list, c->s));
    }
}

/* Poll MPI_Parrived over every receive partition; check each as it arrives. */
static void poll_arrivals(struct chan *c, int round)
{
    int seen[TOTAL] = {0}, left = c->rparts;
    while (left > 0) {
        for (int p = c->rparts - 1; p >= 0; p--) {
            int flag = 0;
            if (seen[p])
                continue;
            CHECK_MPI(MPI_Parrived(c->r, p, &flag));
            if (flag) {
                check_rpart(c, round, p);
                seen[p] = 1;
                left--;
            }
        }
    }
    /* once reported, a partition stays arrived until the round completes */
    for (int p = 0; p < c->rparts; p++) {
        int flag = 0;
        CHECK_MPI(MPI_Parrived(c->r, p, &flag));
        CHECK(flag, "tag %d round %d: partition %d arrived, then MPI_Parrived says it did not", c->tag, round, p);
    }
}

static void setup_channels(void)
{
    int k = 0;
    for (int i = 0; i < NLAYOUT; i++)
        for (int j = 0; j < NLAYOUT; j++)
            for (int derived = 0; derived < 2; derived++, k++) {
                struct chan *c = &ch[k];
                c->tag = 100 + k;
                c->sparts = layout[i];
                c->scount = TOTAL / layout[i];
                c->rparts = layout[j];
                if (derived) {
                    int per = TOTAL / layout[j];
                    c->relem = per % 7 == 0 ? 7 : 8;
                    CHECK(per % c->relem == 0, "layout error");
                    CHECK_MPI(MPI_Type_contiguous(c->relem, MPI_INT, &c->rtype));
                    CHECK_MPI(MPI_Type_commit(&c->rtype));
                } else {
                    c->relem = 1;
                    c->rtype = MPI_INT;
                }
                c->rcount = TOTAL / layout[j] / c->relem;
                CHECK(c->sparts * c->scount == TOTAL && c->rparts * c->rcount * c->relem == TOTAL, "layout error");
                /* receive side first on even ranks, send side first on odd
                 * ones: initialization is local, the order must not matter */
                for (int side = 0; side < 2; side++) {
                    if ((side == 0) == (rank % 2 == 0))
                        CHECK_MPI(MPI_Precv_init(c->rbuf, c->rparts, c->rcount, c->rtype, peer, c->tag,
                                                 MPI_COMM_WORLD, MPI_INFO_NULL, &c->r));
                    else
                        CHECK_MPI(MPI_Psend_init(c->sbuf, c->sparts, c->scount, MPI_INT, peer, c->tag,
                                                 MPI_COMM_WORLD, MPI_INFO_NULL, &c->s));
                }
                CHECK(c->r != MPI_REQUEST_NULL && c->s != MPI_REQUEST_NULL, "init returned MPI_REQUEST_NULL");
            }
}

static void run_round_sequential(int round)
{
    for (int k = 0; k < NCHAN; k++) {
        struct chan *c = &ch[k];
        MPI_Status st;
        clear_recv(c);
        CHECK_MPI(MPI_Start(&c->r));
        CHECK_MPI(MPI_Start(&c->s));
        fill_send(c, round); /* after MPI_Start, before MPI_Pready */
        ready_all(c, round);
        if (round == 2)
            poll_arrivals(c, round);
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Wait(&c->r, &st));
        check_recv(c, round, &st);
        CHECK_MPI(MPI_Wait(&c->s, MPI_STATUS_IGNORE));
        CHECK(c->s != MPI_REQUEST_NULL, "MPI_Wait freed a partitioned send request");
    }
}

static void run_round_all_at_once(int round)
{
    MPI_Request all[2 * NCHAN];
    for (int k = 0; k < NCHAN; k++) {
        clear_recv(&ch[k]);
        fill_send(&ch[k], round);
        all[k] = ch[k].r;
        all[NCHAN + k] = ch[k].s;
    }
    CHECK_MPI(MPI_Startall(2 * NCHAN, all));
    for (int k = 0; k < NCHAN; k++)
        CHECK(all[k] == ch[k].r && all[NCHAN + k] == ch[k].s, "MPI_Startall changed a handle");
    for (int k = NCHAN - 1; k >= 0; k--)
        ready_all(&ch[k], round);
    for (int k = NCHAN - 1; k >= 0; k--) {
        MPI_Status st;
        memset(&st, 0x5a, sizeof st);
        CHECK_MPI(MPI_Wait(&ch[k].r, &st));
        check_recv(&ch[k], round, &st);
    }
    for (int k = 0; k < NCHAN; k++)
        CHECK_MPI(MPI_Wait(&ch[k].s, MPI_STATUS_IGNORE));
}

/* count 0: every partition still has to be readied and reported */
static void zero_count(void)
{
    static const int zl[3][2] = {{1, 1}, {4, 4}, {3, 5}};
    int sbuf[4] = {1, 2, 3, 4}, rbuf[4];
    for (int z = 0; z < 3; z++) {
        int tag = 900 + z, sp = zl[z][0], rp = zl[z][1];
        MPI_Request s, r;
        CHECK_MPI(MPI_Psend_init(sbuf, sp, 0, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &s));
        CHECK_MPI(MPI_Precv_init(rbuf, rp, 0, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        for (int round = 0; round < 2; round++) {
            MPI_Status st;
            int n = -1, left = rp, seen[8] = {0};
            for (int i = 0; i < 4; i++)
                rbuf[i] = SENTINEL;
            CHECK_MPI(MPI_Start(&r));
            CHECK_MPI(MPI_Start(&s));
            if (round == 0)
                CHECK_MPI(MPI_Pready_range(0, sp - 1, s));
            else
                for (int p = 0; p < sp; p++)
                    CHECK_MPI(MPI_Pready(p, s));
            while (left > 0)
                for (int p = 0; p < rp; p++) {
                    int flag = 0;
                    if (seen[p])
                        continue;
                    CHECK_MPI(MPI_Parrived(r, p, &flag));
                    if (flag) {
                        seen[p] = 1;
                        left--;
                    }
                }
            memset(&st, 0x5a, sizeof st);
            CHECK_MPI(MPI_Wait(&r, &st));
            CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == tag, "zero count %dx0 -> %dx0: status source %d tag %d",
                  sp, rp, st.MPI_SOURCE, st.MPI_TAG);
            CHECK_MPI(MPI_Get_count(&st, MPI_INT, &n));
            CHECK(n == 0, "zero count %dx0 -> %dx0 round %d: MPI_Get_count %d", sp, rp, round, n);
            CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
            for (int i = 0; i < 4; i++)
                CHECK(rbuf[i] == SENTINEL, "zero count %dx0 -> %dx0: receive buffer int %d written", sp, rp, i);
        }
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
        CHECK(s == MPI_REQUEST_NULL && r == MPI_REQUEST_NULL, "MPI_Request_free did not null the handles");
    }
}

/* The shim's partitioned layer serves MPI_Psend_init: the shim is active
 * and not handing partitioned calls to a host that has its own. */
static int shim_layer(void)
{
    return test_shim_call("mpishim_part_layer");
}

static void min_bytes_info(void)
{
    static const struct {
        const char *val;
        int ok;
    } cases[] = {
        { "0", 1 },   { "64", 1 },     { "16KB", 1 },  { "8K", 1 },    { "8kib", 1 }, { "2M", 1 },
        { "1G", 1 },  { "2G", 0 },     { "1T", 0 },    { "8Kx", 0 },   { "-1", 0 },   { "banana", 0 },
    };
    int layer = shim_layer();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int tag = 950 + (int)i, sbuf[8], rbuf[8];
        MPI_Info info;
        MPI_Request s, r;
        char line[160];
        snprintf(line, sizeof line, "mpishim: info key mpishim_part_min_bytes='%s' ignored; accepted values: ",
                 cases[i].val);
        for (int k = 0; k < 8; k++) {
            sbuf[k] = word(rank, tag, 0, k);
            rbuf[k] = SENTINEL;
        }
        CHECK_MPI(MPI_Info_create(&info));
        CHECK_MPI(MPI_Info_set(info, "mpishim_part_min_bytes", cases[i].val));
        if (rank == 0)
            test_capture_stderr_begin();
        CHECK_MPI(MPI_Psend_init(sbuf, 4, 2, MPI_INT, peer, tag, MPI_COMM_WORLD, info, &s));
        if (rank == 0) {
            int n = test_capture_stderr_end(line), want = layer && !cases[i].ok;
            CHECK(n == want, "mpishim_part_min_bytes='%s': %d warning lines, expected %d", cases[i].val, n, want);
        }
        CHECK_MPI(MPI_Info_free(&info));
        CHECK_MPI(MPI_Precv_init(rbuf, 2, 4, MPI_INT, peer, tag, MPI_COMM_WORLD, MPI_INFO_NULL, &r));
        CHECK_MPI(MPI_Start(&r));
        CHECK_MPI(MPI_Start(&s));
        CHECK_MPI(MPI_Pready_range(0, 3, s));
        CHECK_MPI(MPI_Wait(&s, MPI_STATUS_IGNORE));
        CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
        for (int k = 0; k < 8; k++)
            CHECK(rbuf[k] == word(peer, tag, 0, k), "mpishim_part_min_bytes='%s': int %d wrong", cases[i].val, k);
        CHECK_MPI(MPI_Request_free(&s));
        CHECK_MPI(MPI_Request_free(&r));
    }
}

int main(int argc, char **argv)
{
    test_init(&argc, &argv, MPI_THREAD_SINGLE);
    test_skip_without_partitioned("part_basic");
    test_rank_size(MPI_COMM_WORLD, &rank, &size);
    CHECK(size >= 2, "needs at least 2 ranks, got %d", size);
    peer = rank ^ 1;

    if (peer < size) {
        setup_channels();
        run_round_sequential(0);
        run_round_all_at_once(1);
        run_round_sequential(2);
        for (int k = 0; k < NCHAN; k++) {
            CHECK_MPI(MPI_Request_free(&ch[k].s));
            CHECK_MPI(MPI_Request_free(&ch[k].r));
            CHECK(ch[k].s == MPI_REQUEST_NULL && ch[k].r == MPI_REQUEST_NULL,
                  "MPI_Request_free did not null the handles");
            if (ch[k].rtype != MPI_INT)
                CHECK_MPI(MPI_Type_free(&ch[k].rtype));
        }
        zero_count();
        min_bytes_info();
    }
    test_finish("part_basic");
    return 0;
}
