/* The request arena and its global pool (see request.h). */
#include "sync/request.h"

#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

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
    size_t bytes = (size_t)MSH_REQ_MAX * sizeof(msh_request);
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
    /* Index 0 is never handed out: no code is 0 in its index bits. */
    atomic_store_explicit(&msh_reqs.bumped, 1, memory_order_relaxed);
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
