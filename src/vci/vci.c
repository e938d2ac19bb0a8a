/* VCI pool: creation, request cache, pending set (see vci.h). */
#include "vci/vci.h"

#include <stdlib.h>
#include <string.h>

#include "core/log.h"

msh_vci_pool msh_pool;
MSH_TLS int msh_host_lock_depth;

/* Cache sizes: refill this many at once; give half back above the limit. */
#define MSH_CACHE_BATCH 64
#define MSH_CACHE_LIMIT 1024

int msh_vci_pool_init(int n, int serialized)
{
    pthread_mutexattr_t ra;
    pthread_mutexattr_init(&ra);
    pthread_mutexattr_settype(&ra, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&msh_pool.host_lock, &ra);
    pthread_mutexattr_destroy(&ra);

    msh_vci *v = aligned_alloc(MSH_CACHELINE, sizeof(msh_vci) * (size_t)n);
    if (!v)
        return -1;
    memset(v, 0, sizeof(msh_vci) * (size_t)n);
    /* Adaptive mutexes spin briefly before sleeping: the critical sections
     * are short host calls, but threads may outnumber cores. */
    pthread_mutexattr_t aa;
    pthread_mutexattr_init(&aa);
    pthread_mutexattr_settype(&aa, PTHREAD_MUTEX_ADAPTIVE_NP);
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&v[i].own_lock, &aa);
        v[i].lock = serialized ? &msh_pool.host_lock : &v[i].own_lock;
        v[i].idx = i;
    }
    pthread_mutexattr_destroy(&aa);
    msh_pool.v = v;
    msh_pool.n = n;
    msh_pool.serialized = serialized;
    return 0;
}

int msh_vci_pool_fini(void)
{
    int leaked = 0;
    for (int i = 0; i < msh_pool.n; i++) {
        msh_vci *v = &msh_pool.v[i];
        leaked += v->npending;
        free(v->hreqs);
        free(v->sreqs);
        free(v->out_idx);
        free(v->out_st);
        pthread_mutex_destroy(&v->own_lock);
    }
    free(msh_pool.v);
    msh_pool.v = NULL;
    msh_pool.n = 0;
    return leaked;
}

msh_request *msh_vci_req_get(msh_vci *v)
{
    if (MSH_UNLIKELY(!v->cache)) {
        int got = 0;
        v->cache = msh_req_pool_take(MSH_CACHE_BATCH, &got);
        v->ncache = got;
        v->st.cache_refills++;
        if (!v->cache)
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

void msh_vci_req_put(msh_vci *v, msh_request *r)
{
    msh_req_release(r);
    r->host = MPI_REQUEST_NULL;
    msh_req_poison(r);
    r->next = v->cache;
    v->cache = r;
    if (++v->ncache > MSH_CACHE_LIMIT) {
        /* Return half to the global pool so that a VCI that frees what
         * another allocates does not hoard. */
        int give = v->ncache / 2;
        msh_request *chain = v->cache, *last = chain;
        for (int i = 1; i < give; i++)
            last = last->next;
        v->cache = last->next;
        last->next = NULL;
        v->ncache -= give;
        msh_req_pool_give(chain, give);
    }
}

int msh_vci_pending_add(msh_vci *v, msh_request *r)
{
    if (MSH_UNLIKELY(v->npending == v->cap)) {
        int cap = v->cap ? v->cap * 2 : 256;
        MPI_Request *h = realloc(v->hreqs, sizeof *h * (size_t)cap);
        if (h)
            v->hreqs = h;
        msh_request **s = realloc(v->sreqs, sizeof *s * (size_t)cap);
        if (s)
            v->sreqs = s;
        int *oi = realloc(v->out_idx, sizeof *oi * (size_t)cap);
        if (oi)
            v->out_idx = oi;
        MPI_Status *os = realloc(v->out_st, sizeof *os * (size_t)cap);
        if (os)
            v->out_st = os;
        if (!h || !s || !oi || !os)
            return MPI_ERR_NO_MEM;
        v->cap = cap;
    }
    v->hreqs[v->npending] = r->host;
    v->sreqs[v->npending] = r;
    v->npending++;
    return MPI_SUCCESS;
}
