/* Handle side tables (see htab.h for the design and the grace argument). */
#include "core/htab.h"

#include <linux/membarrier.h>
#include <mpi.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

msh_hent msh_htab_tomb;
#define TOMB (&msh_htab_tomb)

enum { MIN_CAP = 64 };

/* Bytes held by all tables: relaxed, a statistic only. */
static _Atomic size_t g_bytes;

/* ------------------------------------------------------------ readers */

MSH_TLS msh_reader *msh_htab_me;

/* Append-only list: a writer walks it without the mutex. A record is
 * published (seq_cst) before its thread's first read section, and the
 * writer reads the list head seq_cst after publishing a table: a section
 * that loaded the old table comes before that read in the total order, so
 * the writer finds its record (htab.h). */
static _Atomic(msh_reader *) g_readers;
static pthread_mutex_t g_readers_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t g_reader_key;
static pthread_once_t g_reader_once = PTHREAD_ONCE_INIT;

/* Thread exit: the record goes back to the pool. Its number is even (no
 * lookup is in progress) and keeps growing under its next owner, so a
 * snapshot taken of it stays meaningful. */
static void reader_release(void *p)
{
    msh_reader *r = p;
    pthread_mutex_lock(&g_readers_mtx);
    r->busy = 0;
    pthread_mutex_unlock(&g_readers_mtx);
}

int msh_htab_asym;

static void reader_key_init(void)
{
    if (pthread_key_create(&g_reader_key, reader_release) != 0)
        abort(); /* only fails when the process is out of keys or memory */
    /* Registration is required before the expedited command may be used;
     * a kernel or sandbox without it leaves the seq_cst fallback. */
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0) == 0)
        msh_htab_asym = 1;
}

msh_reader *msh_htab_reader_register(void)
{
    pthread_once(&g_reader_once, reader_key_init);
    pthread_mutex_lock(&g_readers_mtx);
    msh_reader *r;
    for (r = atomic_load_explicit(&g_readers, memory_order_relaxed); r; r = r->next)
        if (!r->busy)
            break;
    if (!r) {
        r = aligned_alloc(MSH_CACHELINE, sizeof *r);
        if (!r)
            abort(); /* a lookup cannot fail; 64 bytes once per thread */
        atomic_init(&r->seq, 0);
        r->next = atomic_load_explicit(&g_readers, memory_order_relaxed);
        atomic_store_explicit(&g_readers, r, memory_order_seq_cst);
    }
    r->busy = 1;
    pthread_mutex_unlock(&g_readers_mtx);
    pthread_setspecific(g_reader_key, r);
    msh_htab_me = r;
    return r;
}

/* ------------------------------------------------------------ generations */

static size_t gen_bytes(const struct msh_htab_gen *t)
{
    return sizeof *t + t->cap * sizeof *t->slots + t->nwait * sizeof *t->wait;
}

static struct msh_htab_gen *gen_new(size_t cap)
{
    struct msh_htab_gen *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    t->cap = cap;
    t->shift = 64;
    for (size_t c = cap; c > 1; c >>= 1)
        t->shift--;
    atomic_fetch_add_explicit(&g_bytes, gen_bytes(t), memory_order_relaxed);
    return t;
}

static void gen_free(struct msh_htab_gen *t)
{
    atomic_fetch_sub_explicit(&g_bytes, gen_bytes(t), memory_order_relaxed);
    free(t->wait);
    free(t->slots);
    free(t);
}

/* Under the mutex; t has a free slot (load <= 1/2). */
static void put_locked(struct msh_htab_gen *t, msh_hent *e)
{
    size_t mask = t->cap - 1;
    size_t i = msh_htab_slot(t, e->key);
    while (atomic_load_explicit(&t->slots[i].e, memory_order_relaxed))
        i = (i + 1) & mask;
    t->slots[i].key = e->key;
    /* Release: the key above is visible to whoever sees the entry. */
    atomic_store_explicit(&t->slots[i].e, e, memory_order_release);
    t->used++;
    t->live++;
}

/* Smallest table with room for live + 1 entries at most a quarter full. */
static size_t cap_for(size_t live)
{
    size_t cap = MIN_CAP;
    while ((live + 1) * 4 > cap)
        cap *= 2;
    return cap;
}

/* Free the retired generations whose grace period is over: every reader
 * seen inside a lookup when it was replaced has left that lookup. */
static void reclaim_locked(msh_htab *h)
{
    struct msh_htab_gen **pp = &h->retired;
    while (*pp) {
        struct msh_htab_gen *g = *pp;
        size_t k = 0;
        /* Acquire: pairs with read_end's release, so the reader's loads
         * from g happen before the free. */
        while (!g->pinned && k < g->nwait && atomic_load_explicit(&g->wait[k].r->seq, memory_order_acquire) != g->wait[k].seq)
            k++;
        if (g->pinned || k < g->nwait) {      /* someone is still in the lookup that may read g */
            pp = &g->retired;
            continue;
        }
        *pp = g->retired;
        gen_free(g);
    }
}

/* Move t's live entries into a new table of cap slots and publish it; t
 * is retired with a snapshot of the readers inside a lookup right now.
 * MPI_SUCCESS, or MPI_ERR_NO_MEM with t still current. */
static int rebuild_locked(msh_htab *h, struct msh_htab_gen *t, size_t cap)
{
    struct msh_htab_gen *n = gen_new(cap);
    if (!n)
        return MPI_ERR_NO_MEM;
    if (t)
        for (size_t i = 0; i < t->cap; i++) {
            msh_hent *x = atomic_load_explicit(&t->slots[i].e, memory_order_relaxed);
            if (x && x != TOMB)
                put_locked(n, x);
        }
    h->gens++;
    /* seq_cst: the new table is complete when a reader sees it, and the
     * reader scan below is ordered after it (htab.h). */
    atomic_store_explicit(&h->cur, n, memory_order_seq_cst);
    if (!t)
        return MPI_SUCCESS;

    /* Readers store their odd number without a barrier when asym: a full
     * barrier on every running thread between the publication above and
     * the scan below restores the Dekker order (htab.h). If the call
     * fails, t stays for the life of the table. */
    pthread_once(&g_reader_once, reader_key_init);
    int pin = msh_htab_asym && syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0) != 0;

    /* The reader scan, after the publication (see htab.h). One pass: a
     * reader seen even is outside or already sees n. */
    msh_reader *head = atomic_load_explicit(&g_readers, memory_order_seq_cst);
    size_t nreaders = 0;
    for (msh_reader *r = head; r; r = r->next)
        nreaders++;
    t->wait = nreaders && !pin ? malloc(nreaders * sizeof *t->wait) : NULL;
    if (pin || (nreaders && !t->wait)) {
        t->pinned = 1; /* no snapshot, no proof: kept until drain */
    } else {
        size_t k = 0;
        for (msh_reader *r = head; r; r = r->next) {
            uint64_t s = atomic_load_explicit(&r->seq, memory_order_seq_cst);
            if (s & 1)
                t->wait[k++] = (struct msh_wait){ r, s };
        }
        t->nwait = k;
        if (k == 0) {
            free(t->wait);
            t->wait = NULL;
        }
        atomic_fetch_add_explicit(&g_bytes, k * sizeof *t->wait, memory_order_relaxed);
    }
    t->retired = h->retired;
    h->retired = t;
    return MPI_SUCCESS;
}

int msh_htab_insert(msh_htab *h, msh_hent *e)
{
    pthread_mutex_lock(&h->mtx);
    reclaim_locked(h);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    if (!t || (t->used + 1) * 2 > t->cap) {
        /* Sized for the live entries: tombstones are dropped, and a table
         * that churns at a constant population keeps its size. */
        int rc = rebuild_locked(h, t, cap_for(t ? t->live : 0));
        if (rc != MPI_SUCCESS) {
            pthread_mutex_unlock(&h->mtx);
            return rc;
        }
        t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    }
    put_locked(t, e);
    pthread_mutex_unlock(&h->mtx);
    return MPI_SUCCESS;
}

msh_hent *msh_htab_remove(msh_htab *h, uint64_t key)
{
    msh_hent *found = NULL;
    pthread_mutex_lock(&h->mtx);
    reclaim_locked(h);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    if (t) {
        size_t mask = t->cap - 1;
        for (size_t i = msh_htab_slot(t, key);; i = (i + 1) & mask) {
            msh_hent *x = atomic_load_explicit(&t->slots[i].e, memory_order_relaxed);
            if (!x)
                break;
            if (x != TOMB && t->slots[i].key == key) {
                atomic_store_explicit(&t->slots[i].e, TOMB, memory_order_release);
                t->live--;
                found = x;
                /* Before the caller can free it: every memo of it is stale. */
                atomic_fetch_add_explicit(&h->removals, 1, memory_order_release);
                break;
            }
        }
        /* Shrink a mostly empty table; failure to allocate just keeps it. */
        if (found && t->cap > MIN_CAP && t->live * 8 < t->cap)
            (void)rebuild_locked(h, t, cap_for(t->live));
    }
    pthread_mutex_unlock(&h->mtx);
    return found;
}

msh_hent *msh_htab_lookup_remember(msh_htab *h, uint64_t key, msh_htab_memo *m, uint64_t removals)
{
    msh_hent *e = msh_htab_lookup(h, key);
    if (e)
        *m = (msh_htab_memo){ key, e, removals };
    return e;
}

void msh_htab_drain(msh_htab *h, void (*fn)(msh_hent *e, void *arg), void *arg)
{
    pthread_mutex_lock(&h->mtx);
    atomic_fetch_add_explicit(&h->removals, 1, memory_order_release);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    atomic_store_explicit(&h->cur, NULL, memory_order_release);
    if (t) {
        for (size_t i = 0; i < t->cap; i++) {
            msh_hent *x = atomic_load_explicit(&t->slots[i].e, memory_order_relaxed);
            if (x && x != TOMB)
                fn(x, arg);
        }
        gen_free(t);
    }
    while (h->retired) {
        struct msh_htab_gen *old = h->retired;
        h->retired = old->retired;
        gen_free(old);
    }
    pthread_mutex_unlock(&h->mtx);
}

void msh_htab_get_info(msh_htab *h, msh_htab_info *out)
{
    pthread_mutex_lock(&h->mtx);
    memset(out, 0, sizeof *out);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    if (t) {
        out->cap = t->cap;
        out->live = t->live;
        out->bytes = gen_bytes(t);
    }
    for (struct msh_htab_gen *g = h->retired; g; g = g->retired) {
        out->retired++;
        out->bytes += gen_bytes(g);
    }
    out->gens = h->gens;
    pthread_mutex_unlock(&h->mtx);
}

size_t msh_htab_bytes_total(void)
{
    return atomic_load_explicit(&g_bytes, memory_order_relaxed);
}
