/* Unit tests of the partitioned byte arithmetic (src/partitioned/plan.h)
 * for every S x R up to 64 sender and receiver partitions, several
 * partition sizes and aggregations (MPISHIM_PART_MIN_BYTES), receive splits
 * that divide the total and ones that do not:
 *   - a message's bytes as the receiver expects them are exactly the bytes
 *     of the sender partitions the sender puts in it;
 *   - the messages, and the receive partitions, cover every byte of the
 *     stream exactly once, contiguous and in order;
 *   - messages arriving in a random order (seeded; UNIT_SEED=n repeats a
 *     run), each receive partition is reported complete exactly when every
 *     byte in it has arrived, by Parrived's rule (all covering messages
 *     done) and by the staged receiver's unpack-after-message rule (once
 *     each). The truth is computed here from the sender's view, not with
 *     plan.h. No MPI needed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "partitioned/plan.h"
#include "unit.h"


enum { MAXP = 64 };

static uint64_t rng;
static uint64_t next_rand(void)
{
    /* xorshift64* */
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 0x2545f4914f6cdd1dULL;
}

static long configs, arrivals;

static int fail(const char *what, int S, int R, long long pb, int group, long long rpb, int idx)
{
    failures++;
    fprintf(stderr, "FAIL %s: S %d R %d, %lld bytes per sender partition, %d per message, %lld per receive "
                    "partition, at %d\n", what, S, R, pb, group, rpb, idx);
    return 1;
}

static long long min_ll(long long a, long long b) { return a < b ? a : b; }
static long long max_ll(long long a, long long b) { return a > b ? a : b; }

/* One shape; returns nonzero after the first failure (the rest would only
 * repeat it). */
static int check(int S, int R, long long pb, long long minb, long long rpb)
{
    configs++;
    const long long total = (long long)S * pb;
    /* Sender side, as msh_part_init_req plans it. */
    int group = msh_pplan_group(pb, minb, S);
    int nmsg = msh_pplan_nmsg(S, group);
    if (group < 1 || group > S)
        return fail("group out of range", S, R, pb, group, rpb, 0);
    /* The fewest partitions that reach minb, unless that is more than S
     * (or the partitions are empty: one each). */
    if (pb == 0 && group != 1)
        return fail("empty partitions aggregated", S, R, pb, group, rpb, 0);
    if (pb > 0 && group < S && (long long)group * pb < minb)
        return fail("message below MPISHIM_PART_MIN_BYTES", S, R, pb, group, rpb, 0);
    if (group > 1 && (long long)(group - 1) * pb >= minb)
        return fail("more partitions per message than needed", S, R, pb, group, rpb, 0);
    if (nmsg < 1 || (long long)(nmsg - 1) * group >= S || (long long)nmsg * group < S)
        return fail("message count", S, R, pb, group, rpb, 0);

    /* What the sender puts in each message: bytes [slo, shi). */
    long long slo[MAXP], shi[MAXP];
    int sent = 0;
    for (int m = 0; m < nmsg; m++) {
        int n = msh_pplan_msg_nparts(S, group, m);
        if (n < 1 || n > group)
            return fail("partitions in a message", S, R, pb, group, rpb, m);
        slo[m] = (long long)sent * pb;
        shi[m] = (long long)(sent + n) * pb;
        sent += n;
    }
    if (sent != S)
        return fail("messages do not carry every sender partition once", S, R, pb, group, rpb, sent);

    /* Receiver side, from the header (S, group, nmsg, total). */
    long long msg_bytes = msh_pplan_msg_bytes(total, S, group, nmsg);
    long long prev = 0;
    for (int m = 0; m < nmsg; m++) {
        msh_prange r = msh_pplan_msg_range(total, msg_bytes, nmsg, m);
        if (r.lo != slo[m] || r.hi != shi[m])
            return fail("receiver's message bytes differ from the sender's", S, R, pb, group, rpb, m);
        if (r.lo != prev || r.hi < r.lo)
            return fail("messages not contiguous and in order", S, R, pb, group, rpb, m);
        prev = r.hi;
    }
    if (prev != total)
        return fail("messages do not end at the total", S, R, pb, group, rpb, nmsg);

    /* Receive partitions: contiguous, in order, from 0 to the total; the
     * empty ones (beyond the data of an uneven split) only at the end. */
    long long rlo[MAXP], rhi[MAXP];
    prev = 0;
    for (int i = 0; i < R; i++) {
        rlo[i] = min_ll((long long)i * rpb, total); /* the truth, from the sender's view */
        rhi[i] = min_ll((long long)(i + 1) * rpb, total);
        msh_prange r = msh_pplan_recv_part(total, msg_bytes, nmsg, rpb, i);
        long long lo = r.lo, hi = max_ll(r.lo, r.hi);
        if (min_ll(lo, total) != rlo[i] || min_ll(hi, total) != rhi[i])
            return fail("receive partition bytes", S, R, pb, group, rpb, i);
        if (rlo[i] != prev)
            return fail("receive partitions not contiguous and in order", S, R, pb, group, rpb, i);
        prev = rhi[i];
        /* Its messages are exactly those overlapping it. */
        for (int m = 0; m < nmsg; m++) {
            int overlaps = max_ll(rlo[i], slo[m]) < min_ll(rhi[i], shi[m]);
            int listed = m >= r.first && m <= r.last;
            if (rlo[i] < rhi[i] && overlaps != listed)
                return fail("messages listed for a receive partition", S, R, pb, group, rpb, i);
            if (rlo[i] == rhi[i] && !listed) /* empty: waits for the whole stream */
                return fail("empty receive partition not waiting for every message", S, R, pb, group, rpb, i);
        }
    }
    if (prev != total && (long long)R * rpb >= total)
        return fail("receive partitions do not reach the total", S, R, pb, group, rpb, R);

    /* Arrivals in a random order. */
    int order[MAXP], done[MAXP] = { 0 }, unpacked[MAXP] = { 0 };
    long long got[MAXP] = { 0 };
    for (int m = 0; m < nmsg; m++)
        order[m] = m;
    for (int m = nmsg - 1; m > 0; m--) {
        int j = (int)(next_rand() % (uint64_t)(m + 1));
        int t = order[m];
        order[m] = order[j];
        order[j] = t;
    }
    for (int step = 0; step < nmsg; step++) {
        int m = order[step];
        done[m] = 1;
        arrivals++;
        for (int i = 0; i < R; i++)
            got[i] += max_ll(0, min_ll(rhi[i], shi[m]) - max_ll(rlo[i], slo[m]));
        /* The staged receiver: what message m's completion unpacks. */
        msh_prange span = msh_pplan_msg_rparts(total, msg_bytes, nmsg, rpb, R, m);
        for (int i = span.first; i <= span.last; i++) {
            if (i < 0 || i >= R)
                return fail("message completes a partition out of range", S, R, pb, group, rpb, i);
            msh_prange r = msh_pplan_recv_part(total, msg_bytes, nmsg, rpb, i);
            int all = 1;
            for (int k = r.first; k <= r.last && all; k++)
                all = done[k];
            if (r.lo < r.hi && all && unpacked[i]++)
                return fail("receive partition unpacked twice", S, R, pb, group, rpb, i);
        }
        for (int i = 0; i < R; i++) {
            int truth = rlo[i] < rhi[i] ? got[i] == rhi[i] - rlo[i] : step == nmsg - 1;
            msh_prange r = msh_pplan_recv_part(total, msg_bytes, nmsg, rpb, i);
            int all = 1; /* Parrived's rule */
            for (int k = r.first; k <= r.last && all; k++)
                all = done[k];
            if (all != truth)
                return fail(all ? "receive partition reported before its bytes arrived"
                                : "receive partition not reported though its bytes arrived",
                            S, R, pb, group, rpb, i);
            if (rlo[i] < rhi[i] && unpacked[i] != truth)
                return fail(truth ? "staged receive partition complete but not unpacked"
                                  : "staged receive partition unpacked early",
                            S, R, pb, group, rpb, i);
        }
    }
    return 0;
}

int main(void)
{
    const char *env = getenv("UNIT_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_partplan: seed %llu (UNIT_SEED=%llu repeats this run)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    rng = seed * 0x9e3779b97f4a7c15ULL + 1; /* never 0 */

    /* Bytes per sender partition (0: a count of 0, every partition and
     * message empty); the receive splits of the same total:
     * even where R divides it, else rounded up (the last partition short,
     * trailing ones empty). */
    static const long long pbs[] = { 0, 1, 3, 8, 1000 };
    for (int S = 1; S <= MAXP; S++)
        for (int R = 1; R <= MAXP; R++)
            for (size_t pi = 0; pi < sizeof pbs / sizeof pbs[0]; pi++) {
                long long pb = pbs[pi], total = (long long)S * pb;
                /* No aggregation, 2 and 3 partitions (the second just short of
                 * a third), 7, everything in one message. */
                const long long minbs[] = { 0, 2 * pb, 3 * pb - 1, 7 * pb, 1LL << 40 };
                long long rpb = (total + R - 1) / R;
                for (size_t mi = 0; mi < sizeof minbs / sizeof minbs[0]; mi++)
                    if (check(S, R, pb, minbs[mi], rpb) && failures > 20)
                        goto out;
            }
out:
    if (failures) {
        fprintf(stderr, "test_partplan: %d check(s) failed (seed %llu)\n", failures, (unsigned long long)seed);
        return 1;
    }
    printf("ok test_partplan (%ld shapes, %ld arrivals)\n", configs, arrivals);
    return 0;
}
