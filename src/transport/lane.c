/* What every lane shares (lane.h): the communicators it carries, the
 * named-type cache's slow path, packing. */
#include "transport/lane.h"

#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/log.h"
#include "core/topo.h"

msh_htab msh_lane_comms = MSH_HTAB_INIT;

static struct {
    char provider[64];
    int open;
    int cid_bits, cid_shift, max_size, any_tag;
    int wsize, wrank;
} lane;
static unsigned next_cid = 1; /* this process's counter, as rank 0 of a new communicator */
static pthread_mutex_t cid_mtx = PTHREAD_MUTEX_INITIALIZER;
static _Atomic size_t entry_bytes; /* of every entry not yet freed */

size_t msh_lane_entry_bytes(void) { return atomic_load_explicit(&entry_bytes, memory_order_relaxed); }

static size_t entry_size(const msh_lane_comm *lc) { return sizeof *lc + sizeof(int) * (size_t)lc->size; }

int msh_lane_tag_ub = 32767;

void msh_lane_open(const char *provider, int cid_bits, int cid_shift, int max_size, int any_tag)
{
    snprintf(lane.provider, sizeof lane.provider, "%s", provider);
    lane.cid_bits = cid_bits;
    lane.cid_shift = cid_shift;
    lane.max_size = max_size;
    lane.any_tag = any_tag;
    PMPI_Comm_size(MPI_COMM_WORLD, &lane.wsize);
    PMPI_Comm_rank(MPI_COMM_WORLD, &lane.wrank);
    int *ub = NULL, flag = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &flag);
    msh_lane_tag_ub = flag && ub ? *ub : 32767;
    lane.open = 1;
}

void msh_lane_shut(void)
{
    lane.open = 0;
}

const char *msh_lane_provider(void)
{
    return lane.open ? lane.provider : NULL;
}

int msh_lane_all_ok(int ok)
{
    int all = 0;
    ok = ok != 0;
    PMPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all;
}

void *msh_lane_tp_alloc(size_t size)
{
    size = (size + MSH_CACHELINE - 1) / MSH_CACHELINE * MSH_CACHELINE;
    void *p = aligned_alloc(MSH_CACHELINE, size);
    if (p)
        memset(p, 0, size);
    return p;
}

void msh_lane_tp_opened(msh_lane_tp *l, msh_tp *host, const msh_lane_ops *ops, const msh_tp_ops *tp_ops, int idx)
{
    l->host = host;
    l->ops = ops;
    l->base.ops = tp_ops;
    l->base.idx = idx;
    msh_lane_set_tracked(l);
    msh_tp_direct = 0;
}

/* The launcher's count of each node's processes where every process has
 * one (Open MPI's mpirun, MPICH's Hydra), else MPI_Comm_split_type. The
 * count first: a communicator made and freed over MPI_COMM_WORLD that the
 * program never made changes the host's own state (Open MPI 4.1 numbers
 * its internal messages on a communicator with a counter that every
 * construction over it moves on; docs/design.md, Known limits). */
int msh_lane_one_node(void)
{
    int wsize = 0, n = msh_topo_local_ranks(), all = 0;
    PMPI_Comm_size(MPI_COMM_WORLD, &wsize);
    PMPI_Allreduce(&n, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all > 0)
        return all == wsize;
    MPI_Comm node;
    if (PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) != MPI_SUCCESS)
        return 0;
    PMPI_Comm_size(node, &n);
    PMPI_Comm_free(&node);
    PMPI_Allreduce(&n, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return all == wsize;
}

/* A communicator's members in the world, or -1 if one is not in it (a
 * spawned or connected process). */
static int world_ranks(MPI_Comm c, msh_lane_comm *lc)
{
    MPI_Group g, wg;
    PMPI_Comm_group(c, &g);
    PMPI_Comm_group(MPI_COMM_WORLD, &wg);
    int *in = malloc(sizeof *in * (size_t)lc->size);
    int ok = in != NULL;
    if (ok) {
        for (int i = 0; i < lc->size; i++)
            in[i] = i;
        PMPI_Group_translate_ranks(g, lc->size, in, wg, lc->world);
        for (int i = 0; i < lc->size; i++)
            ok &= lc->world[i] != MPI_UNDEFINED;
    }
    free(in);
    PMPI_Group_free(&g);
    PMPI_Group_free(&wg);
    return ok ? 0 : -1;
}

int msh_lane_comm_add(MPI_Comm c, int inter, int no_any_tag)
{
    if (!lane.open || c == MPI_COMM_NULL || inter)
        return MPI_SUCCESS;
    int size, rank;
    PMPI_Comm_size(c, &size);
    PMPI_Comm_rank(c, &rank);
    msh_lane_comm *lc = size <= lane.max_size ? malloc(sizeof *lc + sizeof(int) * (size_t)size) : NULL;
    /* {id proposed by rank 0, a member cannot take part}, agreed by one
     * reduction on c: collective over c and nothing else, so threads
     * making communicators at once cannot deadlock here. The id is rank
     * 0's world rank and the next number of its own counter: unique. */
    long v[2] = { 0, 1 };
    if (lc) {
        atomic_init(&lc->gone, 0);
        lc->in_use = 0;
        lc->retired = NULL;
        lc->comm = c;
        lc->size = size;
        lc->rank = rank;
        v[1] = world_ranks(c, lc) != 0;
    }
    if (!lane.any_tag && !no_any_tag)
        v[1] = 1;
    if (rank == 0) {
        int bits = 1;
        while ((1 << bits) < lane.wsize)
            bits++;
        unsigned n = 0;
        if (bits < lane.cid_bits) {
            pthread_mutex_lock(&cid_mtx);
            n = next_cid < (1u << (lane.cid_bits - bits)) ? next_cid++ : 0;
            pthread_mutex_unlock(&cid_mtx);
        }
        v[0] = n ? (long)(((unsigned long)lane.wrank << (lane.cid_bits - bits)) | n) : 0;
        v[1] |= n == 0; /* ids used up: the host carries it */
    }
    long agreed[2];
    int rc = PMPI_Allreduce(v, agreed, 2, MPI_LONG, MPI_MAX, c);
    if (rc != MPI_SUCCESS || agreed[1] || !lc) {
        free(lc);
        return rc;
    }
    lc->cid = (uint64_t)agreed[0];
    lc->cid_bits = lc->cid << lane.cid_shift;
    lc->h.key = msh_handle_key(&c, sizeof c);
    if (msh_htab_insert(&msh_lane_comms, &lc->h) != 0) {
        free(lc);
        return MPI_ERR_NO_MEM; /* the others carry it: this one cannot */
    }
    atomic_fetch_add_explicit(&entry_bytes, entry_size(lc), memory_order_relaxed);
    return MPI_SUCCESS;
}

int msh_lane_comm_home(MPI_Comm c, int n)
{
    msh_lane_comm *lc = lane.open ? msh_lane_comm_of(c) : NULL;
    return lc && n > 0 ? (int)(lc->cid % (uint64_t)n) : -1;
}

/* A communicator the program freed leaves the table at once, but its
 * entry stays while requests use it: MPI lets an operation started on it
 * complete after MPI_Comm_free, and requests in flight, on any VCI, point
 * at the entry. Counting them would put an atomic on the cache line every
 * VCI using the communicator shares, at every message; instead a later
 * MPI_Comm_free looks at every VCI's requests, under that VCI's lock, and
 * frees the entries none uses. No request starts using a freed entry
 * meanwhile: only operations started before the free use it, and those are
 * in their VCI's slots from their post to their end. */
static struct {
    pthread_mutex_t mu;      /* head */
    pthread_mutex_t reclaim; /* one reclaimer at a time: cand and every in_use */
    msh_lane_comm *head;     /* freed by the program, not yet looked at */
    msh_lane_comm *cand;     /* the reclaimer's */
} retired = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, NULL, NULL };

static void retired_push(msh_lane_comm *list)
{
    if (!list)
        return;
    msh_lane_comm *tail = list;
    while (tail->retired)
        tail = tail->retired;
    pthread_mutex_lock(&retired.mu);
    tail->retired = retired.head;
    retired.head = list;
    pthread_mutex_unlock(&retired.mu);
}

void msh_lane_comm_remove(MPI_Comm c)
{
    if (!lane.open)
        return;
    msh_lane_comm *lc = (msh_lane_comm *)msh_htab_remove(&msh_lane_comms, msh_handle_key(&c, sizeof c));
    if (!lc)
        return;
    atomic_store_explicit(&lc->gone, 1, memory_order_relaxed); /* published by retired.mu */
    retired_push(lc); /* a list of one: retired is NULL since msh_lane_comm_add */
}

int msh_lane_reclaim_begin(void)
{
    if (!lane.open || pthread_mutex_trylock(&retired.reclaim) != 0)
        return 0; /* the other reclaimer will look at these too, or the next one */
    pthread_mutex_lock(&retired.mu);
    retired.cand = retired.head;
    retired.head = NULL;
    pthread_mutex_unlock(&retired.mu);
    if (!retired.cand) {
        pthread_mutex_unlock(&retired.reclaim);
        return 0;
    }
    for (msh_lane_comm *lc = retired.cand; lc; lc = lc->retired)
        lc->in_use = 0;
    return 1;
}

void msh_lane_q_mark(msh_lane_q *q)
{
    for (int i = 0; i < q->nslots; i++) {
        msh_lane_req *r = q->slots[i];
        /* gone: a live entry's line is read at every message; leave it be */
        if (r && r->lc && atomic_load_explicit(&r->lc->gone, memory_order_relaxed))
            r->lc->in_use = 1;
    }
}

void msh_lane_reclaim_end(int all)
{
    msh_lane_comm *keep = NULL, *next;
    for (msh_lane_comm *lc = retired.cand; lc; lc = next) {
        next = lc->retired;
        if (all && !lc->in_use) {
            atomic_fetch_sub_explicit(&entry_bytes, entry_size(lc), memory_order_relaxed);
            free(lc);
        } else {
            lc->retired = keep;
            keep = lc;
        }
    }
    retired.cand = NULL;
    retired_push(keep);
    pthread_mutex_unlock(&retired.reclaim);
}

/* dt's combiner, and the lengths of its contents (ints, addresses, large
 * counts, types): MPICH refuses the int query for a type made by a
 * large-count call. */
static int envelope(MPI_Datatype dt, MPI_Count n[4], int *combiner)
{
#if MPI_VERSION >= 4
    return PMPI_Type_get_envelope_c(dt, &n[0], &n[1], &n[2], &n[3], combiner);
#else
    int ni, na, nd;
    int rc = PMPI_Type_get_envelope(dt, &ni, &na, &nd, combiner);
    n[0] = ni, n[1] = na, n[2] = 0, n[3] = nd;
    return rc;
#endif
}

int msh_lane_type_named(MPI_Datatype dt)
{
    MPI_Count len[4];
    int combiner;
    return envelope(dt, len, &combiner) == MPI_SUCCESS && combiner == MPI_COMBINER_NAMED;
}

int msh_lane_named_miss(msh_lane_named *n, unsigned k, MPI_Datatype dt, int *size)
{
    if (!msh_lane_type_named(dt) || PMPI_Type_size(dt, size) != MPI_SUCCESS)
        return 0;
    n->e[k].dt = dt;
    n->e[k].size = *size;
    n->e[k].used = 1;
    return 1;
}

/* MPI_Pack_size, MPI_Pack and MPI_Unpack where sizes may pass INT_MAX: the
 * host's large-count calls where it has them (MPI 4); else runs of
 * elements of at most INT_MAX packed bytes each, where one element
 * larger than that cannot be packed at all (MPI_ERR_COUNT). */
#if MPI_VERSION >= 4
static int pack_size(MPI_Count count, MPI_Datatype dt, MPI_Count *size)
{
    return PMPI_Pack_size_c(count, dt, MPI_COMM_WORLD, size);
}

static int pack(const void *ubuf, MPI_Count count, MPI_Datatype dt, void *out, MPI_Count outsize, MPI_Count *pos)
{
    return PMPI_Pack_c(ubuf, count, dt, out, outsize, pos, MPI_COMM_WORLD);
}

static int unpack(const void *in, MPI_Count insize, void *ubuf, MPI_Count count, MPI_Datatype dt)
{
    MPI_Count pos = 0;
    return PMPI_Unpack_c(in, insize, &pos, ubuf, count, dt, MPI_COMM_WORLD);
}
#else
/* Elements per run, and the type's extent (the step between runs). */
static int run_of(MPI_Datatype dt, int *per, MPI_Aint *extent)
{
    MPI_Count sz = 0;
    MPI_Aint lb;
    int esize = 0;
    /* a packed size below the type's: the int wrapped */
    if (PMPI_Type_size_x(dt, &sz) != MPI_SUCCESS || sz > INT_MAX ||
        PMPI_Pack_size(1, dt, MPI_COMM_WORLD, &esize) != MPI_SUCCESS || esize < sz ||
        PMPI_Type_get_extent(dt, &lb, extent) != MPI_SUCCESS)
        return MPI_ERR_COUNT;
    *per = esize > 0 ? INT_MAX / esize : INT_MAX;
    return MPI_SUCCESS;
}

static inline int run_len(MPI_Count count, MPI_Count i, int per)
{
    return count - i < per ? (int)(count - i) : per;
}

static inline int clamp_int(MPI_Count n)
{
    return n > INT_MAX ? INT_MAX : (int)n;
}

static int pack_size(MPI_Count count, MPI_Datatype dt, MPI_Count *size)
{
    int per, s = 0;
    MPI_Aint extent;
    int rc = run_of(dt, &per, &extent);
    *size = 0;
    for (MPI_Count i = 0; rc == MPI_SUCCESS && i < count; i += per)
        if ((rc = PMPI_Pack_size(run_len(count, i, per), dt, MPI_COMM_WORLD, &s)) == MPI_SUCCESS)
            *size += s;
    return rc;
}

static int pack(const void *ubuf, MPI_Count count, MPI_Datatype dt, void *out, MPI_Count outsize, MPI_Count *pos)
{
    int per;
    MPI_Aint extent;
    int rc = run_of(dt, &per, &extent);
    for (MPI_Count i = 0; rc == MPI_SUCCESS && i < count; i += per) {
        int p = 0;
        rc = PMPI_Pack((const void *)((uintptr_t)ubuf + (uintptr_t)(i * extent)), run_len(count, i, per), dt,
                       (char *)out + *pos, clamp_int(outsize - *pos), &p, MPI_COMM_WORLD);
        *pos += p;
    }
    return rc;
}

static int unpack(const void *in, MPI_Count insize, void *ubuf, MPI_Count count, MPI_Datatype dt)
{
    int per;
    MPI_Aint extent;
    MPI_Count pos = 0;
    int rc = run_of(dt, &per, &extent);
    for (MPI_Count i = 0; rc == MPI_SUCCESS && i < count; i += per) {
        int p = 0;
        rc = PMPI_Unpack((const char *)in + pos, clamp_int(insize - pos), &p,
                         (void *)((uintptr_t)ubuf + (uintptr_t)(i * extent)), run_len(count, i, per), dt,
                         MPI_COMM_WORLD);
        pos += p;
    }
    return rc;
}
#endif

/* MPICH's MPI_Pack and MPI_Unpack refuse MPI_BOTTOM (a null pointer) as
 * the user's buffer, whose type then holds absolute addresses: the same
 * data is described from the lowest of them instead, by a type of one
 * element that shifts count dt back (*shifted, for the caller to free;
 * MPI_DATATYPE_NULL when nothing changed). */
static int from_bottom(void **buf, MPI_Count *count, MPI_Datatype *dt, MPI_Datatype *shifted)
{
    *shifted = MPI_DATATYPE_NULL;
    MPI_Aint lb = 0, extent = 0;
    if (*buf != MPI_BOTTOM || *count <= 0 || PMPI_Type_get_true_extent(*dt, &lb, &extent) != MPI_SUCCESS || lb == 0)
        return MPI_SUCCESS;
    MPI_Aint disp = -lb;
#if MPI_VERSION >= 4
    MPI_Count blen = *count, cdisp = disp;
    int rc = PMPI_Type_create_struct_c(1, &blen, &cdisp, dt, shifted);
#else
    int blen = (int)*count;
    int rc = PMPI_Type_create_struct(1, &blen, &disp, dt, shifted);
#endif
    if (rc == MPI_SUCCESS && (rc = PMPI_Type_commit(shifted)) != MPI_SUCCESS)
        PMPI_Type_free(shifted);
    if (rc != MPI_SUCCESS) {
        *shifted = MPI_DATATYPE_NULL;
        return rc;
    }
    *buf = (void *)(intptr_t)lb;
    *count = 1;
    *dt = *shifted;
    return MPI_SUCCESS;
}

/* Whether one element of dt is one run of bytes from its true lower bound:
 * a named type, or a duplicate, resized type or contiguous run of one
 * whose elements abut (what the program makes to describe a struct, or to
 * send more than INT_MAX elements with an int count). Other shapes are
 * not looked into: they are packed. */
static int dense(MPI_Datatype dt, int depth)
{
    MPI_Count len[4];
    int combiner;
    if (envelope(dt, len, &combiner) != MPI_SUCCESS)
        return 0;
    if (combiner == MPI_COMBINER_NAMED)
        return 1;
    if ((combiner != MPI_COMBINER_DUP && combiner != MPI_COMBINER_CONTIGUOUS && combiner != MPI_COMBINER_RESIZED) ||
        depth > 8 || len[0] > 1 || len[1] > 2 || len[2] > 2 || len[3] != 1)
        return 0;
    int ints[1] = { 0 };
    MPI_Aint addrs[2];
    MPI_Count cnts[2] = { 0, 0 };
    MPI_Datatype inner;
#if MPI_VERSION >= 4
    if (PMPI_Type_get_contents_c(dt, len[0], len[1], len[2], len[3], ints, addrs, cnts, &inner) != MPI_SUCCESS)
        return 0;
#else
    if (PMPI_Type_get_contents(dt, (int)len[0], (int)len[1], (int)len[3], ints, addrs, &inner) != MPI_SUCCESS)
        return 0;
#endif
    MPI_Count n = combiner != MPI_COMBINER_CONTIGUOUS ? 1 : len[2] ? cnts[0] : ints[0];
    MPI_Count size = 0;
    MPI_Aint lb, extent = 0;
    int d = dense(inner, depth + 1) &&
            (n <= 1 || (PMPI_Type_size_x(inner, &size) == MPI_SUCCESS &&
                        PMPI_Type_get_extent(inner, &lb, &extent) == MPI_SUCCESS && extent == size));
    if (envelope(inner, len, &combiner) != MPI_SUCCESS || combiner != MPI_COMBINER_NAMED)
        PMPI_Type_free(&inner); /* a derived type's contents are new handles */
    return d;
}

/* count dt at ubuf as one run of bytes (dense above, elements that abut):
 * its start, and its length in *len. NULL if it is not one. */
static void *one_run(void *ubuf, MPI_Count count, MPI_Datatype dt, size_t *len)
{
    MPI_Count size = 0;
    MPI_Aint lb, extent = 0, tlb = 0, textent;
    if (!dense(dt, 0) || PMPI_Type_size_x(dt, &size) != MPI_SUCCESS ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &tlb, &textent) != MPI_SUCCESS || (count > 1 && extent != size))
        return NULL;
    *len = (size_t)(count * size);
    return (void *)((uintptr_t)ubuf + (uintptr_t)tlb); /* integers: ubuf may be MPI_BOTTOM */
}

int msh_lane_bytes_packed(int send, void *ubuf, MPI_Count count, MPI_Datatype dt, void **tmp, void **buf,
                          size_t *len)
{
    if ((*buf = one_run(ubuf, count, dt, len)))
        return MPI_SUCCESS;
    MPI_Count psize = 0, pos = 0;
    int rc = pack_size(count, dt, &psize);
    if (rc != MPI_SUCCESS)
        return rc == MPI_ERR_COUNT ? rc : MPI_ERR_TYPE;
    *tmp = malloc(psize > 0 ? (size_t)psize : 1);
    if (!*tmp)
        return MPI_ERR_NO_MEM;
    if (send && psize == 0) {
        *len = 0; /* no bytes: MPICH's MPI_Pack refuses the NULL buffer MPI allows here */
    } else if (send) {
        MPI_Datatype shifted;
        rc = from_bottom(&ubuf, &count, &dt, &shifted);
        if (rc == MPI_SUCCESS)
            rc = pack(ubuf, count, dt, *tmp, psize, &pos);
        if (shifted != MPI_DATATYPE_NULL)
            PMPI_Type_free(&shifted);
        if (rc != MPI_SUCCESS)
            return rc;
        *len = (size_t)pos;
    } else {
        *len = (size_t)psize;
    }
    *buf = *tmp;
    return MPI_SUCCESS;
}

MPI_Datatype msh_lane_keep_derived(msh_lane_req *r, MPI_Datatype dt)
{
    if (r->has_kept) {
        PMPI_Type_free(&r->kept);
        r->has_kept = 0;
    }
    if (PMPI_Type_dup(dt, &r->kept) != MPI_SUCCESS)
        return dt;
    r->has_kept = 1;
    return r->kept;
}

int msh_lane_copy(msh_lane_named *n, void *ubuf, MPI_Count count, MPI_Datatype dt, void **copy, size_t *len)
{
    void *tmp = NULL, *buf = NULL;
    int rc = msh_lane_bytes(n, 1, ubuf, count, dt, &tmp, &buf, len);
    if (rc != MPI_SUCCESS) {
        free(tmp);
        return rc;
    }
    if (!tmp) { /* the user's buffer itself */
        if (!(tmp = malloc(*len ? *len : 1)))
            return MPI_ERR_NO_MEM;
        if (*len)
            memcpy(tmp, buf, *len);
    }
    *copy = tmp;
    return MPI_SUCCESS;
}

/* The last element of a message shorter than its receive: only the rem
 * bytes that came may land in the user's buffer. MPI_SUCCESS when they all
 * did; MPI_ERR_TRUNCATE when the message ends partway through a basic
 * element, which MPICH refuses in a noncontiguous receive, having written
 * the whole basic elements before it (Open MPI delivers every byte); or the
 * error that kept them out. MPICH's unpack writes whole basic elements
 * only, and takes any length for a contiguous type, as MPICH receives one
 * straight into the buffer: the element is unpacked there directly.
 * (MPI_Get_elements cannot tell the partial case on MPICH 4.0: it
 * miscounts the doubles of a struct {4 ints; 8 doubles}.)
 * Open MPI's unpack refuses a short input: the element as the buffer holds
 * it now is packed, its first rem bytes replaced by the message's, and the
 * whole unpacked back, so that the rest of the element is written with the
 * values it had (bytes the receive owns until it completes), never bytes
 * outside the type map. Either costs the element's size, not its span,
 * which a derived type may make far larger. */
static int unpack_partial(const char *part, size_t rem, uintptr_t elem, MPI_Datatype dt, MPI_Count tsize)
{
    void *at = (void *)elem;
    MPI_Count one = 1, pos = 0;
    MPI_Datatype t = dt, shifted;
    int rc = from_bottom(&at, &one, &t, &shifted);
    if (rc != MPI_SUCCESS)
        return rc;
#if defined(MPICH)
    (void)tsize;
    if (PMPI_Unpack_c(part, (MPI_Count)rem, &pos, at, one, t, MPI_COMM_WORLD) != MPI_SUCCESS ||
        pos != (MPI_Count)rem)
        rc = MPI_ERR_TRUNCATE;
#else
    char *whole = malloc((size_t)tsize);
    if (!whole)
        rc = MPI_ERR_NO_MEM;
    else if ((rc = pack(at, one, t, whole, tsize, &pos)) == MPI_SUCCESS && pos != tsize)
        rc = MPI_ERR_INTERN; /* an element packs to its size: never seen otherwise */
    else if (rc == MPI_SUCCESS) {
        memcpy(whole, part, rem);
        rc = unpack(whole, tsize, at, one, t);
    }
    free(whole);
#endif
    if (shifted != MPI_DATATYPE_NULL)
        PMPI_Type_free(&shifted);
    return rc;
}

int msh_lane_unpack_sized(const void *tmp, size_t len, void *ubuf, MPI_Datatype dt, MPI_Count tsize, MPI_Aint extent)
{
    if (tsize <= 0)
        return MPI_SUCCESS;
    MPI_Count n = (MPI_Count)(len / (size_t)tsize), cnt = n;
    size_t rem = len % (size_t)tsize;
    MPI_Datatype t = dt, shifted;
    void *at = ubuf;
    int rc = from_bottom(&at, &cnt, &t, &shifted);
    if (rc == MPI_SUCCESS && cnt > 0)
        rc = unpack(tmp, (MPI_Count)len, at, cnt, t);
    if (shifted != MPI_DATATYPE_NULL)
        PMPI_Type_free(&shifted);
    if (rc == MPI_SUCCESS && rem)
        rc = unpack_partial((const char *)tmp + (size_t)n * (size_t)tsize, rem,
                            (uintptr_t)ubuf + (uintptr_t)((MPI_Aint)n * extent), dt, tsize);
    return rc;
}

int msh_lane_unpack(const void *tmp, size_t len, void *ubuf, MPI_Datatype dt)
{
    MPI_Count tsize = 0;
    MPI_Aint lb, extent = 0;
    PMPI_Type_size_x(dt, &tsize);
    PMPI_Type_get_extent(dt, &lb, &extent);
    return msh_lane_unpack_sized(tmp, len, ubuf, dt, tsize, extent);
}

/* ------------------------------------------------------------ requests */

int msh_lane_req_refill(msh_lane_q *q)
{
    if (q->free_head < 0) {
        int n = q->nslots ? q->nslots * 2 : 256;
        if (n >= MSH_LANE_SLOT_MAX) /* MSH_LANE_DONE's slot is never a request's */
            return -1;
        msh_lane_req **s = realloc(q->slots, sizeof *s * (size_t)n);
        if (!s)
            return -1;
        q->slots = s;
        int *fn = realloc(q->free_next, sizeof *fn * (size_t)n);
        if (!fn)
            return -1;
        q->free_next = fn;
        for (int i = q->nslots; i < n; i++) {
            q->slots[i] = NULL;
            q->free_next[i] = i + 1 < n ? i + 1 : -1;
        }
        q->free_head = q->nslots;
        q->nslots = n;
    }
    if (!q->spare) {
        msh_lane_req *r = calloc(1, q->size);
        if (!r)
            return -1;
        q->spare = r;
    }
    return 0;
}

void msh_lane_req_free(msh_lane_q *q, msh_lane_req *r)
{
    q->slots[r->slot] = NULL;
    q->free_next[r->slot] = q->free_head;
    q->free_head = r->slot;
    if (r->tmp) {
        free(r->tmp);
        r->tmp = NULL;
    }
    if (r->has_kept) {
        PMPI_Type_free(&r->kept);
        r->has_kept = 0;
    }
    if (q->drop)
        q->drop(r);
    r->next = q->spare;
    q->spare = r;
}

/* Room for more completions: out of line, so that msh_lane_finish, once
 * per message, needs no frame for it. */
static MSH_NOINLINE int grow_done(msh_lane_q *q)
{
    int n = q->capdone ? q->capdone * 2 : 64;
    msh_tp_done *d = realloc(q->done, sizeof *d * (size_t)n);
    if (!d)
        return MPI_ERR_NO_MEM;
    q->done = d;
    q->capdone = n;
    return MPI_SUCCESS;
}

static inline int push_done(msh_lane_q *q, void *ctx, msh_tp_req treq, const MPI_Status *st, MPI_Comm comm)
{
    if (MSH_UNLIKELY(q->ndone == q->capdone) && grow_done(q) != MPI_SUCCESS)
        return MPI_ERR_NO_MEM;
    /* Field by field: a compound literal is built whole, then copied. */
    msh_tp_done *d = &q->done[q->ndone++];
    d->ctx = ctx;
    d->treq = treq;
    d->status = *st;
    d->own_error = st->MPI_ERROR != MPI_SUCCESS;
    d->raise_on = comm;
    return MPI_SUCCESS;
}

static void retire(msh_lane_q *q, msh_lane_req *r)
{
    r->next = q->retired;
    q->retired = r;
}

/* What fewer messages need when they finish: packed data to free, an
 * orphan to free whole (then 1). */
static MSH_NOINLINE int finish_rare(msh_lane_q *q, msh_lane_req *r)
{
    if (r->tmp) {
        free(r->tmp);
        r->tmp = NULL;
    }
    if (!r->orphan)
        return 0;
    msh_lane_req_free(q, r);
    return 1;
}

static MSH_NOINLINE void lost_completion(int vci)
{
    msh_log("VCI %d: out of memory: a completion is lost and its wait will not return", vci);
}

void msh_lane_finish(msh_lane_q *q, msh_lane_req *r, int vci)
{
    r->active = 0;
    if (MSH_UNLIKELY(r->tmp || r->orphan) && finish_rare(q, r))
        return;
    if (r->tracked) {
        r->tracked = 0;
        if (MSH_UNLIKELY(push_done(q, r->ctx, r->persistent ? msh_lane_enc(r->slot) : MPI_REQUEST_NULL, &r->status,
                                   r->comm) != MPI_SUCCESS))
            lost_completion(vci);
        else if (!r->persistent)
            retire(q, r);
    }
}

int msh_lane_track(msh_lane_q *q, msh_lane_req *r, void *ctx)
{
    int rc = MPI_SUCCESS;
    r->ctx = ctx;
    if (r->active) {
        r->tracked = 1;
    } else {
        rc = push_done(q, ctx, r->persistent ? msh_lane_enc(r->slot) : MPI_REQUEST_NULL, &r->status, r->comm);
        if (rc == MPI_SUCCESS && !r->persistent)
            retire(q, r);
    }
    if (rc == MPI_SUCCESS)
        q->ntracked++;
    return rc;
}

/* The poke: MPI_Request_get_status of a generalized request that never
 * completes (one per VCI: two threads must not ask about one request at
 * once). Both hosts run their progress engine when the request asked about
 * is not complete; a probe does not on MPICH 4.0 (on MPI_COMM_SELF). */
static int poke_query(void *state, MPI_Status *st)
{
    (void)state;
    PMPI_Status_set_elements(st, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(st, 0);
    st->MPI_SOURCE = MPI_UNDEFINED;
    st->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
static int poke_free(void *state)
{
    (void)state;
    return MPI_SUCCESS;
}
static int poke_cancel(void *state, int complete)
{
    (void)state;
    (void)complete;
    return MPI_SUCCESS;
}

/* The host's progress is the process's, not a VCI's: one poke moves what
 * every lane poller would. T threads waiting on T VCIs at once would each
 * enter the host every MSH_LANE_POKE_POLLS polls, T times as often as one
 * waiting thread, and meet in it (MPICH's build has one global lock). So a
 * VCI's turn pokes only when no thread of the process has poked in the
 * last MSH_LANE_POKE_GAP_NS, which costs a turn (one per
 * MSH_LANE_POKE_POLLS polls) a clock read. The stamp sits on a line of its
 * own: every turn reads it, at most one a gap writes it. */
static struct {
    _Alignas(MSH_CACHELINE) _Atomic uint64_t last_ns; /* the struct fills the line */
} poke_gate;

static int poke_turn(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t last = atomic_load_explicit(&poke_gate.last_ns, memory_order_relaxed);
    if (now - last < MSH_LANE_POKE_GAP_NS)
        return 0;
    /* One of the threads whose turns came together pokes. */
    return atomic_compare_exchange_strong_explicit(&poke_gate.last_ns, &last, now, memory_order_relaxed,
                                                   memory_order_relaxed);
}

void msh_lane_poke_host(msh_lane_q *q)
{
    if (!poke_turn())
        return;
    if (q->poke == MPI_REQUEST_NULL &&
        PMPI_Grequest_start(poke_query, poke_free, poke_cancel, NULL, &q->poke) != MPI_SUCCESS) {
        q->poke = MPI_REQUEST_NULL;
        return;
    }
    int flag = 0;
    PMPI_Request_get_status(q->poke, &flag, MPI_STATUS_IGNORE);
}

static int active_orphans(const msh_lane_q *q)
{
    int n = 0;
    for (int i = 0; i < q->nslots; i++)
        n += q->slots[i] && q->slots[i]->active && q->slots[i]->orphan;
    return n;
}

/* One bound for the whole process: finalize flushes its VCIs one by one,
 * under the thread that finalizes. */
static double flush_until;

int msh_lane_flush(msh_lane_q *q, int (*progress)(void *arg), void *arg, int vci)
{
    int left = active_orphans(q);
    if (left == 0)
        return 0;
    if (flush_until == 0)
        flush_until = PMPI_Wtime() + MSH_LANE_FLUSH_S;
    while ((left = active_orphans(q)) > 0 && PMPI_Wtime() < flush_until)
        progress(arg);
    if (left > 0)
        msh_log("VCI %d: %d sends the program no longer waits for (buffered sends) did not reach their "
                "peers within %d s of MPI_Finalize, and are dropped",
                vci, left, MSH_LANE_FLUSH_S);
    return left;
}

void msh_lane_q_close(msh_lane_q *q)
{
    if (q->poke == MPI_REQUEST_NULL)
        return;
    PMPI_Grequest_complete(q->poke);
    PMPI_Wait(&q->poke, MPI_STATUS_IGNORE);
}

int msh_lane_poll(msh_lane_q *q, const msh_tp_done *hd, int nh, const msh_tp_done **done, int vci)
{
    int n = nh + q->ndone;
    if (n == 0)
        return 0;
    if (nh == 0) {
        /* Only the lane's: hand over its array as it is, and collect the
         * next ones in the other. */
        msh_tp_done *d = q->done;
        int cap = q->capdone;
        q->done = q->out;
        q->capdone = q->capout;
        q->out = d;
        q->capout = cap;
    } else if (n > q->capout) {
        msh_tp_done *o = realloc(q->out, sizeof *o * (size_t)n);
        if (!o) {
            msh_log("VCI %d: out of memory: completions lost", vci);
            return 0;
        }
        q->out = o;
        q->capout = n;
    }
    if (nh) {
        memcpy(q->out, hd, sizeof *hd * (size_t)nh);
        if (q->ndone)
            memcpy(q->out + nh, q->done, sizeof *q->done * (size_t)q->ndone);
    }
    q->ntracked -= q->ndone;
    q->ndone = 0;
    while (q->retired) { /* the engine has their completions now */
        msh_lane_req *r = q->retired;
        q->retired = r->next;
        msh_lane_req_free(q, r);
    }
    *done = q->out;
    return n;
}

void *msh_lane_tracked(const msh_lane_q *q, int k)
{
    for (int i = 0; i < q->ndone; i++)
        if (k-- == 0)
            return q->done[i].ctx;
    for (int i = 0; i < q->nslots; i++)
        if (q->slots[i] && q->slots[i]->tracked && k-- == 0)
            return q->slots[i]->ctx;
    return NULL;
}

int msh_lane_take(msh_lane_q *q, msh_lane_req *r, msh_tp_req *treq, MPI_Status *st)
{
    int rc = r->status.MPI_ERROR;
    if (st != MPI_STATUS_IGNORE)
        *st = r->status;
    if (!r->persistent) {
        msh_lane_req_free(q, r);
        *treq = MPI_REQUEST_NULL;
    }
    return rc;
}

void msh_lane_release(msh_lane_q *q, msh_lane_req *r, msh_tp_req *treq)
{
    if (r->active)
        r->orphan = 1;
    else
        msh_lane_req_free(q, r);
    *treq = MPI_REQUEST_NULL;
}

/* ------------------------------------------------------------ operations every lane shares */

int msh_lane_op_init(msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_comm *lc = msh_lane_carried(m);
    if (!lc)
        return msh_tp_init(l->host, m, treq);
    msh_lane_req *r;
    int rc = msh_lane_check(m, lc);
    return msh_lane_posted(tp, rc == MPI_SUCCESS ? msh_lane_new_req(l, l->ops, lc, m, 1, treq, &r) : rc);
}

int msh_lane_op_start(msh_tp *tp, msh_tp_req *treq)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, *treq);
    if (!r)
        return msh_tp_start(l->host, treq);
    int rc = r->active ? MPI_ERR_REQUEST : l->ops->issue(l, r);
    if (rc == MPI_SUCCESS)
        tp->carried++;
    return rc;
}

int msh_lane_op_cancel(msh_tp *tp, msh_tp_req *treq)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, *treq);
    if (!r)
        return msh_tp_cancel(l->host, treq);
    if (r->active)
        l->ops->cancel(l, r);
    return MPI_SUCCESS;
}

int msh_lane_op_probe(msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                      MPI_Status *status)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_comm *lc = source == MPI_PROC_NULL ? NULL : msh_lane_comm_of(comm);
    if (!lc)
        return msh_tp_probe(l->host, source, tag, comm, flag, message, status);
    int rc = msh_lane_check_peer(lc, source, tag, 1);
    if (rc != MPI_SUCCESS)
        return msh_lane_posted(tp, rc);
    if (l->closed)
        return MPI_ERR_OTHER;
    int err = status != MPI_STATUS_IGNORE ? msh_lane_probe_error(status->MPI_ERROR, message != NULL) : 0;
    msh_lane_req *r = NULL;
    rc = l->ops->probe(l, lc, source, tag, flag, message ? &r : NULL, status);
    msh_lane_set_tracked(l);
    if (rc != MPI_SUCCESS || !*flag)
        return rc;
    if (status != MPI_STATUS_IGNORE)
        status->MPI_ERROR = err;
    if (r) {
        r->claimed = 1;
        r->lc = lc;
        r->comm = lc->comm;
        *message = msh_lane_msg_enc(tp->idx, r->slot);
    }
    return MPI_SUCCESS;
}

int msh_lane_op_post_matched(msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                             void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    int vci, slot, rc;
    if (!msh_lane_msg_dec(*message, &vci, &slot)) {
        rc = msh_tp_post_matched(l->host, buf, count, dt, message, ctx, treq, p);
        msh_lane_set_tracked(l);
        return rc;
    }
    msh_lane_req *r = vci == tp->idx && slot < l->q.nslots ? l->q.slots[slot] : NULL;
    if (!r || !r->claimed)
        return MPI_ERR_REQUEST;
    tp->carried++;
    r->claimed = 0;
    r->mode = MSH_TP_RECV;
    r->ubuf = buf;
    r->count = count;
    r->dt = msh_lane_type_of(&l->named, r, dt, 1);
    memset(&r->status, 0, sizeof r->status);
    rc = l->ops->recv_claimed(l, r);
    if (rc == MPI_SUCCESS) {
        *message = MPI_MESSAGE_NULL;
        *treq = msh_lane_enc(r->slot);
        msh_lane_post_track(&l->q, r, ctx, treq, p);
    }
    msh_lane_set_tracked(l);
    return rc;
}

int msh_lane_op_track(msh_tp *tp, void *ctx, msh_tp_req treq)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, treq);
    int rc = r ? msh_lane_track(&l->q, r, ctx) : msh_tp_track(l->host, ctx, treq);
    msh_lane_set_tracked(l);
    return rc;
}

int msh_lane_op_poll(msh_tp *tp, const msh_tp_done **done)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    const msh_tp_done *hd = NULL;
    int nh = msh_lane_host_poll(&l->q, l->host, &hd);
    l->ops->progress(l);
    int n = msh_lane_poll(&l->q, hd, nh, done, tp->idx);
    msh_lane_set_tracked(l);
    return n;
}

void *msh_lane_op_tracked(msh_tp *tp, int k)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    if (k < l->host->ntracked)
        return msh_tp_tracked(l->host, k);
    return msh_lane_tracked(&l->q, k - l->host->ntracked);
}

int msh_lane_op_wait(msh_tp *tp, msh_tp_req *treq, MPI_Status *st)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, *treq);
    if (!r)
        return msh_tp_wait(l->host, treq, st);
    while (r->active && !l->closed)
        l->ops->progress(l);
    msh_lane_set_tracked(l);
    return msh_lane_take(&l->q, r, treq, st);
}

int msh_lane_op_test(msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *st)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, *treq);
    if (!r)
        return msh_tp_test(l->host, treq, flag, st);
    if (r->active)
        l->ops->progress(l);
    msh_lane_set_tracked(l);
    *flag = !r->active;
    return *flag ? msh_lane_take(&l->q, r, treq, st) : MPI_SUCCESS;
}

int msh_lane_op_release(msh_tp *tp, msh_tp_req *treq)
{
    msh_lane_tp *l = msh_lane_tp_of(tp);
    msh_lane_req *r = msh_lane_req_of(&l->q, *treq);
    if (!r)
        return msh_tp_release(l->host, treq);
    msh_lane_release(&l->q, r, treq);
    return MPI_SUCCESS;
}

void msh_lane_op_mark_comms(msh_tp *tp) { msh_lane_q_mark(&msh_lane_tp_of(tp)->q); }

static int flush_pass(void *l) { return ((msh_lane_tp *)l)->ops->progress(l); }

void msh_lane_op_close(msh_lane_tp *l, void (*close_ep)(msh_lane_tp *l))
{
    if (!l->closed) {
        msh_lane_flush(&l->q, flush_pass, l, l->base.idx);
        close_ep(l);
        l->closed = 1;
    }
    msh_lane_q_close(&l->q);
    msh_tp_close(l->host);
}
