/* Shim request objects and their handles.
 *
 * Every host request the shim creates is owned by a shim request; the user
 * holds a shim handle, never the host's. Handles must be told apart from
 * host handles in a few instructions, because host requests the shim never
 * saw (MPI-IO, generalized requests, ...) reach the same completion calls.
 * A handle carries a 30-bit code: the request's arena index (22 bits, never
 * 0) and its slot's generation (8 bits, 1..255), which moves on each time
 * the slot is recycled, so a stale copy of a handle, or a made-up value in
 * the range, names no live request and is refused with MPI_ERR_REQUEST
 * instead of touching whatever request holds the slot now.
 *   - MPICH: MPI_Request is an int whose top two bits give the handle kind;
 *     kind 0 ("invalid") is never a live host request, so the handle is the
 *     code itself. Its index bits are never 0, so it never equals a null
 *     handle (MPI_REQUEST_NULL is 0x2c000000: kind 0, index 0).
 *   - Open MPI: MPI_Request is a pointer; the handle is the code's offset
 *     into a reserved, inaccessible 1 GiB address range, so "is it ours" is
 *     a range check and the host faults at once if one ever reaches it.
 * Objects are recycled through per-VCI caches (request.c) refilled in batches
 * from a global pool, as MPICH's per-VCI request caches are. */
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
    MSH_KIND_PAIR,  /* MPI-4 nonblocking send-receive (intercept/isendrecv.c): ext holds its two host requests */
    MSH_KIND_COUNT,
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
    _Atomic uint16_t gen;             /* slot generation, 1..MSH_REQ_GEN_MAX, in the handle */
    uint32_t idx;                     /* position in the arena (never 0) */
    struct msh_sync *_Atomic sync;    /* waiter attached, NULL, or MSH_SYNC_CLAIMED */
    union {
        struct msh_request *next;     /* cache free list (state FREE) */
        void *ext;                    /* MSH_KIND_PART and the kinds after it: the kind's own state */
    };
    MPI_Status status;                /* valid in MSH_REQ_COMPLETE */
    /* Second line: a queued post's arguments (sync/queue.h), read by the
     * thread that drains the queue; untouched by every other path but
     * errors (own_error). */
    struct {
        const void *buf;
        MPI_Comm comm;                /* the route's host communicator */
        MPI_Datatype dt;
        int count, peer, tag;
        uint8_t recv, ssend;
        /* A transport's own error in status, to raise on comm when the
         * request is retired (msh_tp_done.own_error): set and read only
         * with an error, so the message path never touches this line. */
        uint8_t own_error;
    } q;
} msh_request;

_Static_assert(sizeof(msh_request) == 2 * MSH_CACHELINE,
               "a shim request: one cache line for every path, one for queued posts");

/* The arena: reserved once at init, committed by the kernel as touched. */
typedef struct msh_req_arena {
    msh_request *base;
    uint32_t capacity;       /* entries reserved */
    _Atomic uint32_t bumped; /* entries handed out so far */
} msh_req_arena;

extern msh_req_arena msh_reqs;

#define MSH_REQ_IDX_BITS 22
#define MSH_REQ_IDX_MASK ((1u << MSH_REQ_IDX_BITS) - 1)
#define MSH_REQ_MAX (1u << MSH_REQ_IDX_BITS) /* 4 M simultaneous requests (512 MiB of address space) */
#define MSH_REQ_GEN_MAX 255u
#define MSH_REQ_CODES (1u << 30)             /* index and generation */

#if !defined(MPICH) && !defined(OPEN_MPI)
#error "mpishim knows the request handles of Open MPI and MPICH only"
#endif

#if !defined(MPICH)
extern uintptr_t msh_req_hspace; /* the reserved handle range */
#endif

/* r finished where it was posted or started, before its handle reached the
 * program, so no waiter can be attached: its completion is claimed, then it
 * is published complete (release: whoever sees MSH_REQ_COMPLETE sees its
 * status and the claim). The one store order for every such place. */
static inline void msh_req_complete_here(msh_request *r)
{
    atomic_store_explicit(&r->sync, MSH_SYNC_CLAIMED, memory_order_relaxed);
    atomic_store_explicit(&r->state, MSH_REQ_COMPLETE, memory_order_release);
}

static inline MPI_Request msh_req_handle(const msh_request *r)
{
    uint32_t code = (uint32_t)atomic_load_explicit(&r->gen, memory_order_relaxed) << MSH_REQ_IDX_BITS | r->idx;
#if defined(MPICH)
    return (MPI_Request)code;
#else
    return (MPI_Request)(void *)(msh_req_hspace + code);
#endif
}

/* The request behind every handle of a send that its transport finished
 * inside the post (a lane's short sends): arena slot MSH_REQ_SENT_IDX,
 * complete from the start, with an empty status (all fields zero), and
 * never retired, freed or cancelled (retire_held, msh_req_free and
 * msh_req_cancel leave it alone), so that such a send needs no request of
 * its own, nor its retirement; the hosts do the same for a send done at the
 * call (Open MPI 4.1 and MPICH 4.0 return one shared completed request).
 * The status of a completed send tells only that it was not cancelled. */
#define MSH_REQ_SENT_IDX 1u

static inline int msh_req_is_sent(const msh_request *r)
{
    return r->idx == MSH_REQ_SENT_IDX;
}

/* The handle of every send finished inside its post (MSH_REQ_SENT_IDX). */
static inline MPI_Request msh_req_sent_handle(void)
{
    return msh_req_handle(&msh_reqs.base[MSH_REQ_SENT_IDX]);
}

/* Whether h lies in the shim's handle range; its code then. */
static inline int msh_req_code(MPI_Request h, uint32_t *code)
{
#if defined(MPICH)
    uint32_t u = (uint32_t)h;
    *code = u;
    return u < MSH_REQ_CODES && (u & MSH_REQ_IDX_MASK) != 0;
#else
    uintptr_t off = (uintptr_t)(void *)h - msh_req_hspace;
    *code = (uint32_t)off;
    return off < MSH_REQ_CODES;
#endif
}

/* The live request a code names, or NULL: index out of use, another
 * generation (the slot was recycled), or the slot is free. */
static inline msh_request *msh_req_live(uint32_t code)
{
    uint32_t i = code & MSH_REQ_IDX_MASK;
    if (i == 0 || i >= atomic_load_explicit(&msh_reqs.bumped, memory_order_relaxed))
        return NULL;
    msh_request *r = &msh_reqs.base[i];
    if (atomic_load_explicit(&r->gen, memory_order_relaxed) != code >> MSH_REQ_IDX_BITS ||
        atomic_load_explicit(&r->state, memory_order_relaxed) == MSH_REQ_FREE)
        return NULL;
    return r;
}

/* The shim request behind a handle; NULL for a host handle, a null handle,
 * or a handle of the shim's that names no live request (msh_req_invalid
 * tells that case apart). */
static inline msh_request *msh_req_of(MPI_Request h)
{
    uint32_t code;
    return msh_req_code(h, &code) ? msh_req_live(code) : NULL;
}

/* h is in the shim's range but names no live request: a stale copy of a
 * completed or freed request's handle, or a made-up value. Never to be
 * given to the host (Open MPI would dereference it). */
static inline int msh_req_invalid(MPI_Request h)
{
    uint32_t code;
    return msh_req_code(h, &code) && !msh_req_live(code);
}

/* Outstanding handles of r become stale (r is freed, or is about to go
 * back to a cache). */
static inline void msh_req_new_gen(msh_request *r)
{
    unsigned g = atomic_load_explicit(&r->gen, memory_order_relaxed) + 1u;
    atomic_store_explicit(&r->gen, (uint16_t)(g > MSH_REQ_GEN_MAX ? 1u : g), memory_order_relaxed);
}

/* Under AddressSanitizer (make check-asan), a request in a cache or the
 * pool has its host handle, sync pointer and status poisoned, so that a
 * use after retire is reported where it happens. The fields a handle check
 * and the free lists read (state, gen, idx, next) stay readable; poisoning
 * works on 8-byte granules, which these fields' offsets respect. */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
static inline void msh_req_poison(msh_request *r)
{
    ASAN_POISON_MEMORY_REGION(&r->host, sizeof r->host);
    ASAN_POISON_MEMORY_REGION((void *)&r->sync, sizeof r->sync);
    ASAN_POISON_MEMORY_REGION(&r->status, sizeof r->status);
}
static inline void msh_req_unpoison(msh_request *r)
{
    ASAN_UNPOISON_MEMORY_REGION(&r->host, sizeof r->host);
    ASAN_UNPOISON_MEMORY_REGION((void *)&r->sync, sizeof r->sync);
    ASAN_UNPOISON_MEMORY_REGION(&r->status, sizeof r->status);
}
#else
static inline void msh_req_poison(msh_request *r) { (void)r; }
static inline void msh_req_unpoison(msh_request *r) { (void)r; }
#endif

/* r goes back to a cache or the pool. */
static inline void msh_req_release(msh_request *r)
{
    msh_req_new_gen(r);
    atomic_store_explicit(&r->state, MSH_REQ_FREE, memory_order_relaxed);
}

/* Fortran handles of shim handles (MPI_Request_c2f/f2c), live or not, so
 * that a conversion round-trips and errors show where the handle is used.
 * MPICH's Fint is the C handle itself; on Open MPI, msh_fint_of_code. */
static inline int msh_req_c2f(MPI_Request h, MPI_Fint *f)
{
    uint32_t code;
    if (!msh_req_code(h, &code))
        return 0;
#if defined(MPICH)
    *f = (MPI_Fint)h;
#else
    *f = (MPI_Fint)msh_fint_of_code(code);
#endif
    return 1;
}

static inline int msh_req_f2c(MPI_Fint f, MPI_Request *h)
{
#if defined(MPICH)
    uint32_t code;
    *h = (MPI_Request)f;
    return msh_req_code(*h, &code);
#else
    long long code = msh_code_of_fint(f);
    if (code < 0 || code >= (long long)MSH_REQ_CODES)
        return 0;
    *h = (MPI_Request)(void *)(msh_req_hspace + (uintptr_t)code);
    return 1;
#endif
}

/* Payload bytes of count elements of dt (MPISHIM_STATS), 0 if unknown. */
static inline uint64_t msh_payload_bytes(MPI_Count count, MPI_Datatype dt)
{
    MPI_Count sz = 0;
    if (count <= 0 || PMPI_Type_size_x(dt, &sz) != MPI_SUCCESS || sz < 0)
        return 0;
    return (uint64_t)sz * (uint64_t)count;
}

/* Reserve the arena (once, at init). Returns 0 or -1. */
int msh_req_arena_init(void);

/* The address space msh_req_arena_init reserves. */
static inline size_t msh_req_arena_bytes(void)
{
    return (size_t)MSH_REQ_MAX * sizeof(msh_request);
}
void msh_req_arena_fini(void);

/* Global pool: take up to n fresh or recycled requests (linked through
 * ->next), return a chain. Thread-safe (global mutex, batched). */
msh_request *msh_req_pool_take(int n, int *got);
void msh_req_pool_give(msh_request *chain, int n);

/* A VCI's request cache: sync/cache.h (the fields are in vci/vci.h; the
 * VCI layer below stores them without knowing what a request is). Its
 * operations in flight are tracked by its transport, with the request as
 * context (msh_vci_pending_add in sync.h). */

/* ------------------------------------------------------------ per-kind operations */

/* What a request of one kind does when the program calls on it, as Open
 * MPI's requests carry req_start, req_free and req_cancel: the completion
 * entry points (src/intercept/complete.c) and the array engine call these
 * and never switch on the kind. The kinds backed by a host request (send,
 * receive, collective, persistent send and receive) share one table
 * (sync/wait.c); the partitioned layer, above this one, registers its own at
 * init with msh_req_ops_register, the request layer's one upward hook. */
typedef struct msh_req_ops {
    /* Advance a pending request by its own means; 1 when it is complete.
     * NULL for kinds the progress engine completes (waiters may sleep on
     * those; a request with progress is polled). */
    int (*progress)(msh_request *r, int blocking);
    /* MPI_Wait, MPI_Test, MPI_Request_get_status on an active request
     * (the entry points answer for an inactive one). */
    int (*wait)(msh_request *r, MPI_Request *handle, MPI_Status *status);
    int (*test)(msh_request *r, MPI_Request *handle, int *flag, MPI_Status *status);
    int (*get_status)(msh_request *r, int *flag, MPI_Status *status);
    int (*start)(msh_request *r); /* a persistent, inactive request */
    int (*free)(msh_request *r, MPI_Request *handle);
    int (*cancel)(msh_request *r);
    void (*empty_status)(MPI_Status *status); /* an inactive request's */
    MPI_Comm (*error_comm)(msh_request *r);   /* where its request errors are raised */
    /* What the kind holds besides the request (its ext), given back when
     * msh_req_retire retires it, whichever call does (its own wait and
     * test, or the array calls); NULL: nothing. */
    void (*release)(msh_request *r);
} msh_req_ops;

extern const msh_req_ops *msh_req_kinds[MSH_KIND_COUNT];

static inline const msh_req_ops *msh_req_ops_of(const msh_request *r)
{
    return msh_req_kinds[r->kind];
}

/* Polled, not notified: a waiter must not sleep on its sync object. */
static inline int msh_req_polled(const msh_request *r)
{
    return msh_req_ops_of(r)->progress != NULL;
}

/* Before the runtime starts and any request of that kind exists. */
void msh_req_ops_register(msh_req_kind kind, const msh_req_ops *ops);

#endif
