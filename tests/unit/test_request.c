/* Unit tests of shim request handles, the arena and the per-VCI caches
 * (src/sync/request.[ch], src/vci/vci.c). No MPI_Init is needed: handles
 * are plain values and the caches touch no host state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sync/cache.h"
#include "sync/request.h"
#include "sync/queue.h"
#include "sync/sync.h"
#include "vci/vci.h"
#include "unit.h"


#define N 3000

/* A polled kind's operations, as the partitioned layer registers its own. */
static int fake_progress(msh_request *r, int blocking)
{
    (void)r;
    (void)blocking;
    return 1;
}
static int fake_start(msh_request *r)
{
    (void)r;
    return 42;
}
static const msh_req_ops fake_ops = { .progress = fake_progress, .start = fake_start };

/* Every kind has its operations: the host-backed ones share one table whose
 * requests the progress engine completes (not polled); a registered kind's
 * come from its table. */
static void check_kinds(void)
{
    static msh_request r;
    const msh_req_kind host_kinds[] = { MSH_KIND_SEND, MSH_KIND_RECV, MSH_KIND_COLL, MSH_KIND_PSEND, MSH_KIND_PRECV };
    for (size_t i = 0; i < sizeof host_kinds / sizeof host_kinds[0]; i++) {
        r.kind = (uint8_t)host_kinds[i];
        const msh_req_ops *o = msh_req_ops_of(&r);
        EXPECT(o != NULL && o == msh_req_kinds[MSH_KIND_SEND]);
        EXPECT(o && o->progress == NULL && o->wait && o->test && o->get_status && o->start && o->free && o->cancel &&
               o->empty_status && o->error_comm);
        EXPECT(!msh_req_polled(&r));
    }
    msh_req_ops_register(MSH_KIND_PART, &fake_ops);
    r.kind = MSH_KIND_PART;
    EXPECT(msh_req_ops_of(&r) == &fake_ops);
    EXPECT(msh_req_polled(&r));
    EXPECT(msh_req_ops_of(&r)->start(&r) == 42);
}

int main(void)
{
    check_kinds();

    EXPECT(msh_req_arena_init() == 0);
    EXPECT(msh_vci_pool_init(2, 0) == 0);
    msh_vci *v0 = msh_vci_get(0), *v1 = msh_vci_get(1);

    /* The null handle and values that are not shim handles are not ours. */
    EXPECT(msh_req_of(MPI_REQUEST_NULL) == NULL);
#if defined(MPICH)
    MPI_Request foreign = (MPI_Request)0xac000003; /* what a live MPICH request looks like */
    EXPECT(msh_req_of((MPI_Request)0xec000010) == NULL);
#else
    long on_stack[16];
    MPI_Request foreign = (MPI_Request)(void *)&on_stack[3];
#endif
    EXPECT(msh_req_of(foreign) == NULL);
    EXPECT(!msh_req_invalid(foreign) && !msh_req_invalid(MPI_REQUEST_NULL));
#if defined(MPICH)
    /* Kind-0 values with index 0 (null handles of every kind) are the host's. */
    EXPECT(!msh_req_invalid((MPI_Request)0x14000000) && !msh_req_invalid((MPI_Request)0x0c000000));
#endif

    /* Many requests: distinct, aligned, each handle decodes to itself and
     * never equals MPI_REQUEST_NULL; Fortran handles round-trip. */
    static msh_request *got[N];
    for (int i = 0; i < N; i++) {
        msh_vci *v = i % 2 ? v1 : v0;
        msh_vci_lock(v);
        got[i] = msh_vci_req_get(v);
        msh_vci_unlock(v);
        EXPECT(got[i] != NULL);
        if (!got[i])
            return 1;
        EXPECT(((uintptr_t)got[i] % MSH_CACHELINE) == 0);
        EXPECT(got[i]->vci == (i % 2));
        EXPECT(msh_req_invalid(msh_req_handle(got[i]))); /* free until posted */
        atomic_store(&got[i]->state, MSH_REQ_PENDING);
        MPI_Request h = msh_req_handle(got[i]);
        EXPECT(h != MPI_REQUEST_NULL);
        EXPECT(msh_req_of(h) == got[i]);
        MPI_Fint f = 0;
        MPI_Request back = MPI_REQUEST_NULL;
        EXPECT(msh_req_c2f(h, &f) && msh_req_f2c(f, &back) && back == h);
        EXPECT(!msh_req_invalid(h));
        EXPECT(atomic_load(&got[i]->sync) == NULL);
    }
    for (int i = 0; i < N; i++)
        for (int j = i + 1; j < i + 8 && j < N; j++)
            EXPECT(got[i] != got[j]);
    uint32_t bumped = atomic_load(&msh_reqs.bumped);
    EXPECT(bumped >= N);

    /* Give them all back to VCI 0: the cache keeps at most its limit and
     * returns the rest to the global pool, which VCI 1 then reuses instead
     * of growing the arena. */
    msh_vci_lock(v0);
    for (int i = 0; i < N; i++)
        msh_vci_req_put(v0, got[i]);
    msh_vci_unlock(v0);
    EXPECT(v0->ncache <= 1024);
    msh_vci_lock(v1);
    int drained = v1->ncache;
    for (int i = 0; i < drained; i++)
        msh_vci_req_get(v1);
    for (int i = 0; i < N / 2; i++)
        EXPECT(msh_vci_req_get(v1) != NULL);
    msh_vci_unlock(v1);
    EXPECT(atomic_load(&msh_reqs.bumped) == bumped);

    /* A recycled slot gets a new generation: the old handle names nothing
     * (stale), the new one differs; a free slot's handle is refused too. */
    msh_vci_lock(v0);
    msh_request *a = msh_vci_req_get(v0);
    atomic_store(&a->state, MSH_REQ_PENDING);
    MPI_Request old = msh_req_handle(a);
    EXPECT(msh_req_of(old) == a);
    msh_vci_req_put(v0, a);
    EXPECT(msh_req_of(old) == NULL && msh_req_invalid(old));
    msh_request *b = msh_vci_req_get(v0); /* the cache is LIFO: the same slot */
    EXPECT(b == a);
    atomic_store(&b->state, MSH_REQ_PENDING);
    EXPECT(msh_req_handle(b) != old && msh_req_of(msh_req_handle(b)) == b && msh_req_of(old) == NULL);
    for (unsigned g = 0; g < 2 * MSH_REQ_GEN_MAX; g++) {
        msh_req_new_gen(b);
        unsigned gen = atomic_load(&b->gen);
        EXPECT(gen >= 1 && gen <= MSH_REQ_GEN_MAX);
        EXPECT(msh_req_handle(b) != MPI_REQUEST_NULL);
    }
    msh_vci_req_put(v0, b);
    msh_vci_unlock(v0);

    /* The transport's tracked set grows and keeps entries in order. */
    msh_vci_lock(v0);
    for (int i = 0; i < 600; i++) {
        msh_request *r = msh_vci_req_get(v0);
        r->host = MPI_REQUEST_NULL;
        EXPECT(msh_vci_pending_add(v0, r) == MPI_SUCCESS);
        EXPECT(msh_tp_tracked(v0->tp, i) == r);
    }
    EXPECT(v0->tp->ntracked == 600 && !msh_tp_idle(v0->tp) && msh_tp_tracked(v0->tp, 600) == NULL);
    msh_tp_set_tracked(v0->tp, 0);
    msh_vci_unlock(v0);

    EXPECT(msh_vci_pool_fini() == 0);
    if (failures) {
        fprintf(stderr, "test_request: %d failure(s)\n", failures);
        return 1;
    }
    printf("ok test_request\n");
    return 0;
}
