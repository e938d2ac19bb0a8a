/* Shim request objects and their handles.
 *
 * Every host request the shim creates is owned by a shim request; the user
 * holds a shim handle (design brief rule 3). Handles must be told apart from
 * host handles in a few instructions, because host requests the shim never
 * saw (MPI-IO, generalized requests, ...) reach the same completion calls:
 *   - Open MPI: MPI_Request is a pointer; shim requests live in one reserved
 *     arena, so "is it ours" is a range check.
 *   - MPICH: MPI_Request is an int whose top two bits give the handle kind;
 *     kind 0 ("invalid") is never a live host request, so shim handles are
 *     0x14000000 | index (kind 0, object bits 0x5) and never collide with
 *     MPI_REQUEST_NULL (0x2c000000).
 * Objects are recycled through per-VCI caches (src/vci) refilled in batches
 * from a global pool (file 003, Table 1 and Fig. 7). */
#ifndef MSH_SYNC_REQUEST_H
#define MSH_SYNC_REQUEST_H

#include <mpi.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "core/common.h"

struct msh_sync;
struct msh_vci;

typedef enum {
    MSH_REQ_FREE = 0, /* in a cache */
    MSH_REQ_PENDING,  /* host request posted, not yet seen complete */
    MSH_REQ_COMPLETE, /* complete, status valid, not yet returned to the user */
    MSH_REQ_INACTIVE, /* persistent and not started (or completed and returned) */
} msh_req_state;

typedef enum {
    MSH_KIND_SEND = 0,
    MSH_KIND_RECV,
    MSH_KIND_COLL,  /* collective or other host operation */
    MSH_KIND_PSEND, /* persistent */
    MSH_KIND_PRECV,
    MSH_KIND_PART,  /* partitioned (src/partitioned): ext is its channel */
} msh_req_kind;

/* Value of msh_request.sync once progress has claimed the request's
 * completion: a waiter that finds it knows the request is complete. */
#define MSH_SYNC_CLAIMED ((struct msh_sync *)(uintptr_t)1)

typedef struct msh_request {
    _Alignas(MSH_CACHELINE)
    MPI_Request host;                 /* host request (valid while pending / persistent) */
    _Atomic int state;                /* msh_req_state */
    uint8_t kind;                     /* msh_req_kind */
    uint8_t persistent;
    uint8_t freed;                    /* MPI_Request_free'd while active: release at completion */
    uint8_t procnull;                 /* persistent with an MPI_PROC_NULL peer */
    int16_t vci;                      /* VCI whose pending set / cache owns it */
    uint32_t idx;                     /* position in the arena */
    struct msh_sync *_Atomic sync;    /* waiter attached, NULL, or MSH_SYNC_CLAIMED */
    union {
        struct msh_request *next;     /* cache free list (state FREE) */
        void *ext;                    /* MSH_KIND_PART: its channel */
    };
    MPI_Status status;                /* valid in MSH_REQ_COMPLETE */
} msh_request;

/* The arena: reserved once at init, committed by the kernel as touched. */
typedef struct msh_req_arena {
    msh_request *base;
    uint32_t capacity;       /* entries reserved */
    _Atomic uint32_t bumped; /* entries handed out so far */
} msh_req_arena;

extern msh_req_arena msh_reqs;

#define MSH_REQ_MAX (1u << 22) /* 4 M simultaneous requests (512 MiB of address space) */

#if defined(MPICH)
#define MSH_MPICH_REQ_TAG  0x14000000
#define MSH_MPICH_REQ_MASK 0xfc000000u
#elif !defined(OPEN_MPI)
#error "mpishim knows the request handles of Open MPI and MPICH only"
#endif

static inline MPI_Request msh_req_handle(const msh_request *r)
{
#if defined(MPICH)
    return (MPI_Request)(MSH_MPICH_REQ_TAG | (int)r->idx);
#else
    return (MPI_Request)(void *)r;
#endif
}

/* The shim request behind a handle, or NULL for a host handle. */
static inline msh_request *msh_req_of(MPI_Request h)
{
#if defined(MPICH)
    if (MSH_LIKELY(((unsigned)h & MSH_MPICH_REQ_MASK) == MSH_MPICH_REQ_TAG)) {
        uint32_t i = (unsigned)h & ~MSH_MPICH_REQ_MASK;
        return i < atomic_load_explicit(&msh_reqs.bumped, memory_order_relaxed) ? &msh_reqs.base[i] : NULL;
    }
    return NULL;
#else
    uintptr_t off = (uintptr_t)(void *)h - (uintptr_t)msh_reqs.base;
    if (off < (uintptr_t)msh_reqs.capacity * sizeof(msh_request) && off % sizeof(msh_request) == 0)
        return (msh_request *)(void *)h;
    return NULL;
#endif
}

/* Fortran handles of shim requests (MPI_Request_c2f/f2c). MPICH's Fint is
 * the C handle itself; Open MPI's are small non-negative indices, so shim
 * requests take the negative numbers below -1. */
static inline MPI_Fint msh_req_c2f(const msh_request *r)
{
#if defined(MPICH)
    return (MPI_Fint)msh_req_handle(r);
#else
    return (MPI_Fint)(-(int64_t)r->idx - 2);
#endif
}

static inline msh_request *msh_req_of_f(MPI_Fint f)
{
#if defined(MPICH)
    return msh_req_of((MPI_Request)f);
#else
    if (f < -1) {
        uint32_t i = (uint32_t)(-(int64_t)f - 2);
        if (i < atomic_load_explicit(&msh_reqs.bumped, memory_order_relaxed))
            return &msh_reqs.base[i];
    }
    return NULL;
#endif
}

/* Reserve the arena (once, at init). Returns 0 or -1. */
int msh_req_arena_init(void);
void msh_req_arena_fini(void);

/* Global pool: take up to n fresh or recycled requests (linked through
 * ->next), return a chain. Thread-safe (global mutex, batched). */
msh_request *msh_req_pool_take(int n, int *got);
void msh_req_pool_give(msh_request *chain, int n);

#endif
