/* The request arena and its global pool (see request.h). */
#include "sync/request.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

msh_req_arena msh_reqs;

/* Requests given back by VCI caches that grew too large. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static msh_request *pool_free;
static int pool_nfree;

int msh_req_arena_init(void)
{
    if (msh_reqs.base)
        return 0;
    size_t bytes = (size_t)MSH_REQ_MAX * sizeof(msh_request);
    /* Address space only: pages are committed when first touched. */
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    msh_reqs.base = p;
    msh_reqs.capacity = MSH_REQ_MAX;
    atomic_store_explicit(&msh_reqs.bumped, 0, memory_order_relaxed);
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
