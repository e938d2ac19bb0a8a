/* The VCI pool: virtual communication interfaces, after Zambre,
 * Chandramowliswharan and Balaji, "How I Learned to Stop Worrying about
 * User-Visible Endpoints and Love MPI" (ICS 2020).
 *
 * A VCI is the unit of shim-level concurrency: its own lock (held only for
 * short calls that never block, so no thread waits inside the host while
 * holding it), its transport instance with the operations in flight, its
 * request cache, and its counters. Each is cache-line aligned so that
 * threads working on different VCIs do not share lines. */
#ifndef MSH_VCI_VCI_H
#define MSH_VCI_VCI_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "core/common.h"
#include "core/lock.h"
#include "core/runtime.h"
#include "transport/transport.h"

/* Shim requests belong to the sync layer above (sync/request.h); a VCI
 * only stores pointers to them, in its cache, which the sync layer manages
 * (msh_vci_req_get and the others there). */
struct msh_request;

typedef struct msh_vci_stats {
    uint64_t sends, recvs, colls;  /* operations posted */
    uint64_t bytes;                /* payload posted (with MPISHIM_STATS=1) */
    uint64_t polls, empty_polls;   /* transport polls with operations in flight */
    uint64_t completions;
    uint64_t now;                  /* blocking calls the host completed at the post (now_test in intercept/p2p.c) */
    uint64_t cache_hits, cache_refills;
} msh_vci_stats;

typedef struct msh_vci {
    _Alignas(MSH_CACHELINE) msh_block own_lock;
    /* The one host lock when the host is serialized (every VCI takes it
     * instead of own_lock), else NULL. */
    pthread_mutex_t *serial;
    int idx;
    /* What moves this VCI's messages, and tracks its operations in flight
     * (src/transport/transport.h). */
    msh_tp *tp;
    /* Request cache. */
    struct msh_request *cache;
    int ncache;
    msh_vci_stats st;          /* written under lock */
    /* The thread holding lock (its msh_vci_self address), or NULL: lets a
     * thread tell that it holds this lock already (sync/queue.c). */
    _Atomic(void *) holder;
    /* Posts queued for this VCI (MPISHIM_PROGRESS=combine/offload,
     * sync/queue.h): a lock-free stack, newest first. Own cache line: every
     * poster writes it. */
    _Alignas(MSH_CACHELINE) struct msh_request *_Atomic qhead;
    /* Set (under the lock) while a drainer posts what it took off qhead:
     * an empty queue does not mean its posts reached the transport. */
    atomic_int qposting;
} msh_vci;

typedef struct msh_vci_pool {
    int n;                     /* number of VCIs */
    msh_vci *v;
    int serialized;            /* host runs below MULTIPLE: one host lock for everything */
    pthread_mutex_t host_lock; /* recursive: the host may call MPI_* back from inside PMPI_* */
} msh_vci_pool;

extern msh_vci_pool msh_pool;

/* How often this thread holds the host lock (msh_host_enter): such a
 * thread must progress by itself, never sleep (src/sync/progress.c), since
 * every other thread's progress needs the lock it holds. */
extern MSH_TLS int msh_host_lock_depth;

/* Whether host calls are serialized by the shim now (the runtime is on
 * over a serialized host): what msh_host_enter locks for. */
static inline int msh_host_serial(void)
{
    return MSH_UNLIKELY(msh_pool.serialized) && msh_on();
}

/* Around a host call the shim makes outside a VCI lock: with a serialized
 * host (MPISHIM_HOST_THREAD=serialized, or a host below MULTIPLE) every
 * host call is made under the one host lock. Recursive, because a host may
 * call MPI_* entry points from inside its own functions (ROMIO does, and
 * generalized requests' callbacks may). Returns whether it locked; pass
 * that to msh_host_exit, so that the pair stays matched even if the
 * runtime state changed in between. */
static inline int msh_host_enter(void)
{
    if (MSH_LIKELY(!msh_host_serial()))
        return 0;
    pthread_mutex_lock(&msh_pool.host_lock);
    msh_host_lock_depth++;
    return 1;
}

static inline void msh_host_exit(int locked)
{
    if (locked) {
        msh_host_lock_depth--;
        pthread_mutex_unlock(&msh_pool.host_lock);
    }
}

int msh_vci_pool_init(int n, int serialized);
/* At finalize: returns the number of requests still pending (leaked by the
 * program) so that finalize can report them. Frees nothing (see vci.c). */
int msh_vci_pool_fini(void);

static inline msh_vci *msh_vci_get(int i) { return &msh_pool.v[i]; }

/* Its address names the calling thread (msh_vci.holder). */
extern MSH_TLS char msh_vci_self;

static inline void msh_vci_lock(msh_vci *v)
{
    if (MSH_UNLIKELY(v->serial))
        pthread_mutex_lock(v->serial);
    else
        msh_block_take(&v->own_lock, (uintptr_t)&msh_vci_self);
    atomic_store_explicit(&v->holder, &msh_vci_self, memory_order_relaxed);
}

/* 1: taken; 0: held by another thread; MSH_VCI_OWNER_IN: not taken, after
 * this thread held the lock underneath for a moment (msh_block_try). */
#define MSH_VCI_OWNER_IN MSH_BLOCK_OWNER_IN

static inline int msh_vci_try(msh_vci *v)
{
    int got = MSH_UNLIKELY(v->serial) ? pthread_mutex_trylock(v->serial) == 0
                                      : msh_block_try(&v->own_lock, (uintptr_t)&msh_vci_self);
    if (got > 0)
        atomic_store_explicit(&v->holder, &msh_vci_self, memory_order_relaxed);
    return got;
}

static inline int msh_vci_trylock(msh_vci *v)
{
    return msh_vci_try(v) > 0;
}

/* After MSH_VCI_OWNER_IN: msh_block_owner_stays. */
static inline int msh_vci_owner_stays(msh_vci *v)
{
    return msh_block_owner_stays(&v->own_lock);
}

/* For a progress sweep: what v's lock shows since this sweeper's last look
 * (*seen, the sweeper's own); a serial VCI has no bias (msh_block_look). */
static inline enum msh_block_look msh_vci_look(const msh_vci *v, unsigned *seen)
{
    return v->serial ? MSH_BLOCK_UNBIASED
                     : msh_block_look(&v->own_lock, (uintptr_t)&msh_vci_self, seen);
}

static inline int msh_vci_held_by_me(msh_vci *v)
{
    return atomic_load_explicit(&v->holder, memory_order_relaxed) == &msh_vci_self;
}

/* Whether the calling holder of v's lock entered by its bias. */
static inline int msh_vci_by_bias(const msh_vci *v)
{
    return msh_block_by_bias(&v->own_lock);
}

/* Releases v's lock and nothing else: the sync layer's msh_vci_unlock
 * (sync/queue.h) adds what queued posting needs. */
static inline void msh_vci_release(msh_vci *v)
{
    atomic_store_explicit(&v->holder, NULL, memory_order_relaxed);
    if (MSH_UNLIKELY(v->serial))
        pthread_mutex_unlock(v->serial);
    else
        msh_block_give(&v->own_lock);
}

#endif
