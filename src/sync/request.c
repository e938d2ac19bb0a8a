/* The request arena, its global pool, and the per-VCI request caches (see
 * request.h). */
#include "sync/request.h"

#include <pthread.h>
#include <string.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "sync/cache.h"
#include "vci/vci.h"

msh_req_arena msh_reqs;
#if !defined(MPICH)
/* Until init, a value no user pointer is at or above. */
uintptr_t msh_req_hspace = UINTPTR_MAX - MSH_REQ_CODES;
#endif

/* Requests given back by VCI caches that grew too large. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static msh_request *pool_free;
static int pool_nfree;

int msh_req_arena_init(void)
{
    if (msh_reqs.base)
        return 0;
    size_t bytes = msh_req_arena_bytes();
    /* Address space only: pages are committed when first touched. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
#if !defined(MPICH)
    /* Handle codes are offsets into this range: address space only, no
     * access, so a handle that reaches the host faults at once. */
    void *hs = mmap(NULL, MSH_REQ_CODES, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (hs == MAP_FAILED) {
        munmap(p, bytes);
        return -1;
    }
    msh_req_hspace = (uintptr_t)hs;
#endif
    msh_reqs.base = p;
    msh_reqs.capacity = MSH_REQ_MAX;
    /* Index 0 is never handed out: no code is 0 in its index bits. Index
     * 1 is the finished sends' request (MSH_REQ_SENT_IDX). */
    msh_request *sent = &msh_reqs.base[MSH_REQ_SENT_IDX];
    sent->idx = MSH_REQ_SENT_IDX;
    sent->kind = MSH_KIND_SEND;
    sent->vci = 0;
    sent->host = MPI_REQUEST_NULL;
    atomic_store_explicit(&sent->gen, 1, memory_order_relaxed);
    msh_req_complete_here(sent); /* status zeroed by mmap */
    atomic_store_explicit(&msh_reqs.bumped, MSH_REQ_SENT_IDX + 1, memory_order_relaxed);
    return 0;
}

void msh_req_arena_fini(void)
{
    /* Kept mapped: a late MPI_Request_c2f or a handle check after finalize
     * must still read valid memory. Only the pool is reset. */
    pthread_mutex_lock(&pool_lock);
    pool_free = NULL;
    pool_nfree = 0;
    pthread_mutex_unlock(&pool_lock);
}

msh_request *msh_req_pool_take(int n, int *got)
{
    msh_request *head = NULL;
    int k = 0;
    pthread_mutex_lock(&pool_lock);
    while (k < n && pool_free) {
        msh_request *r = pool_free;
        pool_free = r->next;
        r->next = head;
        head = r;
        k++;
    }
    pool_nfree -= k;
    pthread_mutex_unlock(&pool_lock);
    if (k < n) {
        uint32_t want = (uint32_t)(n - k);
        uint32_t first = atomic_fetch_add_explicit(&msh_reqs.bumped, want, memory_order_relaxed);
        if (first + want > msh_reqs.capacity) {
            atomic_fetch_sub_explicit(&msh_reqs.bumped, want, memory_order_relaxed);
        } else {
            for (uint32_t i = 0; i < want; i++) {
                msh_request *r = &msh_reqs.base[first + i];
                memset(r, 0, sizeof *r);
                r->idx = first + i;
                atomic_init(&r->gen, 1);
                r->next = head;
                head = r;
                k++;
            }
        }
    }
    *got = k;
    return head;
}

void msh_req_pool_give(msh_request *chain, int n)
{
    if (!chain)
        return;
    msh_request *tail = chain;
    while (tail->next)
        tail = tail->next;
    pthread_mutex_lock(&pool_lock);
    tail->next = pool_free;
    pool_free = chain;
    pool_nfree += n;
    pthread_mutex_unlock(&pool_lock);
}

/* ------------------------------------------------------------ per-VCI caches' rare parts (cache.h) */

int msh_vci_cache_refill(msh_vci *v)
{
    int got = 0;
    v->cache = msh_req_pool_take(MSH_CACHE_BATCH, &got);
    v->ncache = got;
    v->st.cache_refills++;
    return v->cache ? 0 : -1;
}

/* The cache grew past its limit: return half to the global pool so that
 * a VCI that frees what another allocates does not hoard. */
void msh_vci_cache_trim(msh_vci *v)
{
    int give = v->ncache / 2;
    msh_request *chain = v->cache, *last = chain;
    for (int i = 1; i < give; i++)
        last = last->next;
    v->cache = last->next;
    last->next = NULL;
    v->ncache -= give;
    msh_req_pool_give(chain, give);
}
