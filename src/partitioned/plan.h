/* The byte arithmetic of a partitioned channel (part.c), free of MPI so
 * that tests/unit/test_partplan.c can check it for every shape.
 *
 * The sender has S partitions of pb bytes each (count times the type
 * size), total = S * pb bytes, and aggregates them in order, `group` at a
 * time, into nmsg messages: message m carries sender partitions
 * [m * group, min(S, (m + 1) * group)), which are bytes
 * [m * msg_bytes, ...) of the stream (the last message may be shorter).
 * The receiver has R partitions of rpb bytes each, possibly a different
 * split of the same bytes: receive partition i is bytes
 * [i * rpb, (i + 1) * rpb) cut at the total, and is complete once every
 * message overlapping it is done. A receive partition wholly beyond the
 * sender's data (an uneven split) overlaps no message: it is reported
 * complete with the whole stream.
 *
 * Byte counts are long long, which is MPI_Count on both hosts. */
#ifndef MSH_PARTITIONED_PLAN_H
#define MSH_PARTITIONED_PLAN_H

/* A byte range [lo, hi) and the span [first, last] of messages or
 * partitions that goes with it (first > last: none). */
typedef struct msh_prange {
    long long lo, hi;
    int first, last;
} msh_prange;

/* Sender: partitions per message, the fewest whose bytes reach minb
 * (MPISHIM_PART_MIN_BYTES), at most all S of them. */
static inline int msh_pplan_group(long long pb, long long minb, int parts)
{
    long long group = 1;
    if (pb > 0 && minb > pb)
        group = (minb + pb - 1) / pb;
    if (group > parts)
        group = parts > 0 ? parts : 1;
    return (int)group;
}

static inline int msh_pplan_nmsg(int parts, int group)
{
    return parts > 0 ? (parts + group - 1) / group : 0;
}

/* Sender: the partitions message m carries (starting at m * group). */
static inline int msh_pplan_msg_nparts(int parts, int group, int m)
{
    int first = m * group;
    return parts - first < group ? parts - first : group;
}

/* Receiver, from the sender's header: bytes of every message but maybe the
 * last. Messages hold whole sender partitions, so this is group partitions'
 * worth, not total / nmsg rounded up (which differs when S is not a
 * multiple of group). */
static inline long long msh_pplan_msg_bytes(long long total, int parts, int group, int nmsg)
{
    if (nmsg > 0 && parts > 0)
        return (total / parts) * group;
    return nmsg > 0 ? (total + nmsg - 1) / nmsg : 0;
}

/* Bytes [lo, hi) of message m in the stream. */
static inline msh_prange msh_pplan_msg_range(long long total, long long msg_bytes, int nmsg, int m)
{
    msh_prange r;
    r.lo = (long long)m * msg_bytes;
    r.hi = m == nmsg - 1 ? total : r.lo + msg_bytes;
    r.first = r.last = m;
    return r;
}

/* Receive partition i of rpb bytes: its bytes [lo, hi) of the stream and
 * the messages [first, last] that cover them (every message when it is
 * empty: see above). */
static inline msh_prange msh_pplan_recv_part(long long total, long long msg_bytes, int nmsg, long long rpb, int i)
{
    msh_prange r;
    r.lo = (long long)i * rpb;
    r.hi = r.lo + rpb < total ? r.lo + rpb : total;
    r.first = 0;
    r.last = nmsg - 1;
    if (r.lo < r.hi && msg_bytes > 0) {
        r.first = (int)(r.lo / msg_bytes);
        r.last = (int)((r.hi - 1) / msg_bytes);
        if (r.last >= nmsg)
            r.last = nmsg - 1;
    }
    return r;
}

/* The receive partitions [first, last] (of rparts, rpb bytes each) that
 * message m overlaps: those its completion may complete. */
static inline msh_prange msh_pplan_msg_rparts(long long total, long long msg_bytes, int nmsg, long long rpb,
                                              int rparts, int m)
{
    msh_prange r = msh_pplan_msg_range(total, msg_bytes, nmsg, m);
    r.first = 0;
    r.last = -1;
    if (rpb == 0 || r.lo >= r.hi)
        return r;
    r.first = (int)(r.lo / rpb);
    r.last = (int)((r.hi - 1) / rpb);
    if (r.last >= rparts)
        r.last = rparts - 1;
    return r;
}

#endif
