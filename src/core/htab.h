/* Side tables keyed by MPI handles (communicators, windows).
 *
 * Open addressing with linear probing. Readers never lock: a table that is
 * replaced by a larger one stays allocated until msh_htab_drain, and an
 * entry is removed only by the call that frees its object (MPI_Comm_free,
 * MPI_Win_free), which the program may not overlap with other uses of that
 * object. Inserts and removals take a mutex; they happen only inside
 * collective constructors and destructors.
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

struct msh_htab_gen;

typedef struct msh_htab {
    _Atomic(struct msh_htab_gen *) cur;
    pthread_mutex_t mtx;
} msh_htab;

#define MSH_HTAB_INIT { NULL, PTHREAD_MUTEX_INITIALIZER }

struct msh_htab_gen {
    size_t cap;                      /* power of two */
    unsigned shift;                  /* 64 - log2(cap) */
    size_t used;                     /* live entries + tombstones */
    _Atomic(msh_hent *) *slots;
    struct msh_htab_gen *retired;    /* older generations, freed by drain */
};

extern msh_hent msh_htab_tomb;

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

/* The entry with key, or NULL. Lock-free: one acquire load of the table and
 * one probe in the common case. */
static inline msh_hent *msh_htab_lookup(msh_htab *h, uint64_t key)
{
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_acquire);
    if (MSH_UNLIKELY(!t))
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = msh_htab_slot(t, key);; i = (i + 1) & mask) {
        msh_hent *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!e)
            return NULL;
        if (e != &msh_htab_tomb && e->key == key)
            return e;
    }
}

/* MPI_SUCCESS or MPI_ERR_NO_MEM. */
int msh_htab_insert(msh_htab *h, msh_hent *e);
/* Unlink and return the entry with key, or NULL. */
msh_hent *msh_htab_remove(msh_htab *h, uint64_t key);
/* Call fn on every live entry (which fn may free), then free the table. */
void msh_htab_drain(msh_htab *h, void (*fn)(msh_hent *e, void *arg), void *arg);

#endif
