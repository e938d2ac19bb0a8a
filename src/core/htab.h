/* Side tables keyed by MPI handles (communicators, windows).
 *
 * Open addressing with linear probing. Readers never lock; inserts and
 * removals take a mutex (they happen only inside collective constructors
 * and destructors). An entry is removed only by the call that frees its
 * object (MPI_Comm_free, MPI_Win_free), which the program may not overlap
 * with other uses of that object.
 *
 * Memory stays bounded under create/free churn: a removal leaves a
 * tombstone, and when live entries plus tombstones pass half the table the
 * next insert rebuilds it sized for the live entries only (at most a
 * quarter full, at least 64 slots); a removal that leaves the table under
 * 1/8 full rebuilds it smaller. A replaced table ("generation") may still
 * be read by a lookup that loaded it just before, so it is freed only after
 * a grace period (read sections, below), checked at every later insert and
 * removal.
 *
 * Read sections: every thread that looks up has a reader record whose
 * sequence number is odd while it is inside a lookup. Replacing a table
 * publishes the new one, then snapshots the records that are odd (seq_cst
 * on both sides, the Dekker pattern): a lookup that was not seen inside
 * already sees the new table; one that was is done with the old table once
 * its number has changed. The barrier that pattern needs is paid by the
 * writer, which is rare (a table rebuild), through Linux's membarrier; a
 * lookup then costs two plain stores more than a bare probe. Where
 * membarrier is unavailable, the reader's store is seq_cst (an xchg on
 * x86, about 10 ns).
 *
 * Keys are kept in the slots, so a lookup never reads an entry other than
 * the one it returns: the caller may free an entry as soon as remove
 * returned it.
 *
 * An entry is any structure whose first member is an msh_hent. */
#ifndef MSH_CORE_HTAB_H
#define MSH_CORE_HTAB_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "core/common.h"

typedef struct msh_hent {
    uint64_t key;
} msh_hent;

/* One slot: the key is written before the entry pointer is published and
 * never changes within a generation (a slot is not reused until rebuild). */
typedef struct msh_hslot {
    _Atomic(msh_hent *) e;           /* NULL: empty; &msh_htab_tomb: removed */
    uint64_t key;
} msh_hslot;

/* A reader record (one per thread that ever looked up; reused after the
 * thread exits). Own cache line: only its thread writes it. */
typedef struct msh_reader {
    _Alignas(MSH_CACHELINE) _Atomic uint64_t seq; /* odd: inside a lookup */
    struct msh_reader *next;         /* registry list, append-only */
    int busy;                        /* owned by a live thread (registry mutex) */
} msh_reader;

struct msh_htab_gen;

typedef struct msh_htab {
    _Atomic(struct msh_htab_gen *) cur;
    /* Entries removed (or drained) so far, advanced before the remover
     * gets the entry back: what a memo's entry is checked against. */
    _Atomic uint64_t removals;
    pthread_mutex_t mtx;
    struct msh_htab_gen *retired;    /* replaced, waiting for their grace period */
    uint64_t gens;                   /* generations made so far (tests, stats) */
} msh_htab;

#define MSH_HTAB_INIT { NULL, 0, PTHREAD_MUTEX_INITIALIZER, NULL, 0 }

struct msh_htab_gen {
    size_t cap;                      /* power of two */
    unsigned shift;                  /* 64 - log2(cap) */
    size_t used;                     /* live entries + tombstones */
    size_t live;
    msh_hslot *slots;
    struct msh_htab_gen *retired;    /* next older retired generation */
    size_t nwait;                    /* readers seen inside when it was replaced */
    int pinned;                      /* no snapshot (out of memory): freed by drain */
    struct msh_wait { msh_reader *r; uint64_t seq; } *wait;
};

extern msh_hent msh_htab_tomb;
extern MSH_TLS msh_reader *msh_htab_me;
/* 1 when membarrier(PRIVATE_EXPEDITED) is registered: readers then need
 * no hardware barrier. Set once before the first read section. */
extern int msh_htab_asym;
msh_reader *msh_htab_reader_register(void);

static inline uint32_t msh_mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

/* The key of a handle (an int in MPICH, a pointer in Open MPI). */
static inline uint64_t msh_handle_key(const void *h, size_t n)
{
    uint64_t k = 0;
    memcpy(&k, h, n < sizeof k ? n : sizeof k);
    return k;
}

static inline uint32_t msh_key_hash(uint64_t k) { return msh_mix((uint32_t)(k ^ (k >> 29))); }

/* Slot of a key: Fibonacci hashing, one multiply on the lookup path (the
 * high bits of the product mix every bit of the handle). */
static inline size_t msh_htab_slot(const struct msh_htab_gen *t, uint64_t key)
{
    return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> t->shift);
}

/* Enter a read section; returns the value to pass to msh_htab_read_end. */
static inline uint64_t msh_htab_read_begin(msh_reader **rp)
{
    msh_reader *r = msh_htab_me;
    if (MSH_UNLIKELY(!r))
        r = msh_htab_reader_register();
    *rp = r;
    /* Only this thread writes seq, so no read-modify-write is needed. The
     * odd number must be visible before the table load below (Dekker with
     * the writer's publication and scan). With membarrier, the writer
     * forces that order onto every running thread after publishing, so
     * here the compiler's order is enough; without it, the store and the
     * table load are seq_cst like the writer's, and the single total order
     * gives it. (No thread fence: ThreadSanitizer does not model them.) */
    uint64_t s = atomic_load_explicit(&r->seq, memory_order_relaxed) + 1;
    if (MSH_LIKELY(msh_htab_asym)) {
        atomic_store_explicit(&r->seq, s, memory_order_relaxed);
        atomic_signal_fence(memory_order_seq_cst);
    } else {
        atomic_store_explicit(&r->seq, s, memory_order_seq_cst);
    }
    return s;
}

static inline void msh_htab_read_end(msh_reader *r, uint64_t s)
{
    /* Release: every read of the table happens before a writer that sees
     * the new number frees it. */
    atomic_store_explicit(&r->seq, s + 1, memory_order_release);
}

/* The entry with key, or NULL. Lock-free: one acquire load of the table
 * and one probe in the common case, inside a read section. */
static inline msh_hent *msh_htab_lookup(msh_htab *h, uint64_t key)
{
    msh_reader *r;
    uint64_t s = msh_htab_read_begin(&r);
    msh_hent *found = NULL;
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_seq_cst); /* see read_begin */
    if (MSH_LIKELY(t != NULL)) {
        size_t mask = t->cap - 1;
        for (size_t i = msh_htab_slot(t, key);; i = (i + 1) & mask) {
            msh_hent *e = atomic_load_explicit(&t->slots[i].e, memory_order_acquire);
            if (!e)
                break;
            if (e != &msh_htab_tomb && t->slots[i].key == key) {
                found = e;
                break;
            }
        }
    }
    msh_htab_read_end(r, s);
    return found;
}

/* A thread's last lookup in one table (a thread-local of the caller's):
 * a thread that looks up one key again and again (most point-to-point
 * posts name the communicator of the one before) pays two compares
 * instead of the probe and its read section. The entry holds while no
 * entry of the table has been removed since it was found: a key removed
 * and inserted again for another object (MPICH hands a freed handle to
 * the next communicator) misses the memo. The count is read before the
 * table, so a removal that overlaps the lookup leaves a memo that is
 * already stale. Using an entry while another thread removes it is the
 * caller's error, as it is without the memo. */
typedef struct msh_htab_memo {
    uint64_t key;
    msh_hent *e;       /* NULL: nothing remembered */
    uint64_t removals; /* the table's count when e was found */
} msh_htab_memo;

/* The lookup that fills the memo (found entries only). */
msh_hent *msh_htab_lookup_remember(msh_htab *h, uint64_t key, msh_htab_memo *m, uint64_t removals);

static inline msh_hent *msh_htab_lookup_memo(msh_htab *h, uint64_t key, msh_htab_memo *m)
{
    uint64_t n = atomic_load_explicit(&h->removals, memory_order_acquire);
    if (MSH_LIKELY(m->key == key && m->removals == n && m->e != NULL))
        return m->e;
    return msh_htab_lookup_remember(h, key, m, n);
}

/* MPI_SUCCESS or MPI_ERR_NO_MEM. */
int msh_htab_insert(msh_htab *h, msh_hent *e);
/* Unlink and return the entry with key, or NULL. The entry is no longer
 * read by the table once this returns. */
msh_hent *msh_htab_remove(msh_htab *h, uint64_t key);
/* Call fn on every live entry (which fn may free), then free every table.
 * No lookup may run concurrently (MPI_Finalize). */
void msh_htab_drain(msh_htab *h, void (*fn)(msh_hent *e, void *arg), void *arg);

/* For statistics and tests: the slots of the current table (0 if none),
 * its live entries, the replaced tables not yet freed, and the bytes held
 * by this table (current + retired). */
typedef struct msh_htab_info {
    size_t cap, live, retired, bytes;
    uint64_t gens;
} msh_htab_info;
void msh_htab_get_info(msh_htab *h, msh_htab_info *out);

/* Bytes held by every side table of the process (mpishim_table_bytes). */
size_t msh_htab_bytes_total(void);

#endif
