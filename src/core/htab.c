/* Handle side tables (see htab.h). */
#include "core/htab.h"

#include <mpi.h>
#include <stdlib.h>

msh_hent msh_htab_tomb;
#define TOMB (&msh_htab_tomb)

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
    return t;
}

/* Under the mutex. */
static void put_locked(struct msh_htab_gen *t, msh_hent *e)
{
    size_t mask = t->cap - 1;
    size_t i = msh_htab_slot(t, e->key);
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed))
        i = (i + 1) & mask;
    atomic_store_explicit(&t->slots[i], e, memory_order_release);
    t->used++;
}

int msh_htab_insert(msh_htab *h, msh_hent *e)
{
    pthread_mutex_lock(&h->mtx);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    if (!t || (t->used + 1) * 2 > t->cap) {
        /* Rebuild larger, dropping tombstones; publish when complete, so a
         * reader sees either generation whole. */
        struct msh_htab_gen *n = gen_new(t ? t->cap * 2 : 64);
        if (!n) {
            pthread_mutex_unlock(&h->mtx);
            return MPI_ERR_NO_MEM;
        }
        if (t) {
            for (size_t i = 0; i < t->cap; i++) {
                msh_hent *x = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
                if (x && x != TOMB)
                    put_locked(n, x);
            }
            n->retired = t;
        }
        atomic_store_explicit(&h->cur, n, memory_order_release);
        t = n;
    }
    put_locked(t, e);
    pthread_mutex_unlock(&h->mtx);
    return MPI_SUCCESS;
}

msh_hent *msh_htab_remove(msh_htab *h, uint64_t key)
{
    msh_hent *found = NULL;
    pthread_mutex_lock(&h->mtx);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    if (t) {
        size_t mask = t->cap - 1;
        for (size_t i = msh_htab_slot(t, key);; i = (i + 1) & mask) {
            msh_hent *x = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
            if (!x)
                break;
            if (x != TOMB && x->key == key) {
                atomic_store_explicit(&t->slots[i], TOMB, memory_order_release);
                found = x;
                break;
            }
        }
    }
    pthread_mutex_unlock(&h->mtx);
    return found;
}

void msh_htab_drain(msh_htab *h, void (*fn)(msh_hent *e, void *arg), void *arg)
{
    pthread_mutex_lock(&h->mtx);
    struct msh_htab_gen *t = atomic_load_explicit(&h->cur, memory_order_relaxed);
    atomic_store_explicit(&h->cur, NULL, memory_order_release);
    if (t)
        for (size_t i = 0; i < t->cap; i++) {
            msh_hent *x = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
            if (x && x != TOMB)
                fn(x, arg);
        }
    while (t) {
        struct msh_htab_gen *old = t->retired;
        free(t->slots);
        free(t);
        t = old;
    }
    pthread_mutex_unlock(&h->mtx);
}
