/*
 * cache.h - a VCI's request cache, under the VCI's lock: the operations
 * every message takes inline, their rare parts (a refill from the global
 * pool, giving half back) out of line in request.c.
 */
#ifndef MPISHIM_SYNC_CACHE_H
#define MPISHIM_SYNC_CACHE_H

#include "sync/request.h"
#include "vci/vci.h"

/* Refill in batches of this many; give half back above the limit. */
#define MSH_CACHE_BATCH 64
#define MSH_CACHE_LIMIT 1024

/* Out of line: an empty cache takes a batch from the global pool (0), or
 * the arena is exhausted (-1); a cache past its limit gives half back. */
int msh_vci_cache_refill(msh_vci *v);
void msh_vci_cache_trim(msh_vci *v);

/* A free request from the cache, NULL if the arena is exhausted. */
static inline msh_request *msh_vci_req_get(msh_vci *v)
{
    if (MSH_UNLIKELY(!v->cache)) {
        if (msh_vci_cache_refill(v) != 0)
            return NULL;
    } else {
        v->st.cache_hits++;
    }
    msh_request *r = v->cache;
    v->cache = r->next;
    v->ncache--;
    msh_req_unpoison(r);
    r->next = NULL;
    r->vci = (int16_t)v->idx;
    r->freed = 0;
    r->persistent = 0;
    r->procnull = 0;
    atomic_store_explicit(&r->sync, NULL, memory_order_relaxed);
    return r;
}

/* Give back a request msh_vci_req_get just gave, whose handle never
 * reached the program (no new generation needed). */
static inline void msh_vci_req_unget(msh_vci *v, msh_request *r)
{
    msh_req_poison(r);
    r->next = v->cache;
    v->cache = r;
    v->ncache++;
}

/* Give a request back to the cache. */
static inline void msh_vci_req_put(msh_vci *v, msh_request *r)
{
    msh_req_release(r);
    r->host = MPI_REQUEST_NULL;
    msh_req_poison(r);
    r->next = v->cache;
    v->cache = r;
    if (MSH_UNLIKELY(++v->ncache > MSH_CACHE_LIMIT))
        msh_vci_cache_trim(v);
}

#endif
