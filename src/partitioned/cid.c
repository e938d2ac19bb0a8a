/* Communicator ids for the partitioned layer (see channel.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/htab.h"
#include "core/runtime.h"
#include "partitioned/cid.h"
#include "partitioned/part.h"
#include "sync/wait.h"
#include "vci/vci.h"

/* A user communicator is known by an id its members agree on inside the user's
 * constructor with one plain collective over the new communicator (only
 * the constructing thread knows it, so nothing can interleave with it):
 * its leader's world rank and a number that leader has never handed out
 * before, so ids never repeat in the job. No hidden constructor runs
 * inside a user's constructor. */
typedef struct pcomm {
    msh_hent h; /* keyed by the communicator handle */
    long long id;
} pcomm;

/* One entry per live communicator, looked up by MPI_Psend_init and
 * MPI_Precv_init and removed by MPI_Comm_free: a hash table, since a
 * program may hold many thousands (a list made every free a scan). */
static msh_htab pcs = MSH_HTAB_INIT;
static _Atomic unsigned next_cseq;
static int cid_on; /* between msh_part_cid_init and msh_part_cid_fini */

static long long fresh_cid(void)
{
    unsigned s = atomic_fetch_add_explicit(&next_cseq, 1, memory_order_relaxed);
    return ((long long)(msh_rt.world_rank + 1) << 32) | (long long)s;
}

/* Collective over c, inside its constructor: the members agree on an id. */
static int agree_cid(MPI_Comm c, long long *id)
{
    int inter = 0, r = 0, rc;
    rc = PMPI_Comm_test_inter(c, &inter);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_rank(c, &r);
    if (rc != MPI_SUCCESS)
        return rc;
    long long mine = r == 0 ? fresh_cid() : -1;
    if (!inter) {
        *id = mine;
        return PMPI_Bcast(id, 1, MPI_LONG_LONG, 0, c);
    }
    /* An intercommunicator's allreduce gives each group the other group's
     * result: the first brings the remote leader's id, the second (each
     * side passing on what it got) its own leader's. Both sides then hold
     * the same two ids and take the smaller. */
    long long remote = -1, own = -1;
    rc = PMPI_Allreduce(&mine, &remote, 1, MPI_LONG_LONG, MPI_MAX, c);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Allreduce(&remote, &own, 1, MPI_LONG_LONG, MPI_MAX, c);
    *id = own < remote ? own : remote;
    return rc;
}

int msh_part_cid_put(MPI_Comm c, long long id)
{
    pcomm *p = malloc(sizeof *p);
    if (!p)
        return MPI_ERR_NO_MEM;
    p->h.key = msh_handle_key(&c, sizeof c);
    p->id = id;
    /* A handle the program freed without the shim seeing it (by a path it
     * does not intercept) may come back for a new communicator: the new
     * id replaces the old. */
    free(msh_htab_remove(&pcs, p->h.key));
    int rc = msh_htab_insert(&pcs, &p->h);
    if (rc != MPI_SUCCESS)
        free(p);
    return rc;
}

int msh_part_comm_add(MPI_Comm c)
{
    if (!cid_on || c == MPI_COMM_NULL)
        return MPI_SUCCESS;
    long long id = -1;
    int locked = msh_host_enter();
    int rc = agree_cid(c, &id);
    msh_host_exit(locked);
    return rc == MPI_SUCCESS ? msh_part_cid_put(c, id) : rc;
}

int msh_part_cid_find(MPI_Comm c, long long *id)
{
    /* Not concurrent with c's removal: MPI forbids freeing a communicator
     * while another call uses it. */
    const pcomm *p = (const pcomm *)msh_htab_lookup(&pcs, msh_handle_key(&c, sizeof c));
    if (p)
        *id = p->id;
    return p != NULL;
}

void msh_part_comm_del(MPI_Comm c)
{
    /* Channels keep their id and world ranks: nothing else to undo, also
     * for channels still alive on c. */
    free(msh_htab_remove(&pcs, msh_handle_key(&c, sizeof c)));
}

int msh_part_cid_init(void)
{
    cid_on = 1;
    int rc = msh_part_cid_put(MPI_COMM_WORLD, MSH_PART_CID_WORLD);
    return rc == MPI_SUCCESS ? msh_part_cid_put(MPI_COMM_SELF, MSH_PART_CID_SELF) : rc;
}

/* ------------------------------------------------------------ nonblocking constructors */

/* MPI_Comm_idup(_with_info): the members agree on the new communicator's id
 * as agree_cid does, in steps that never block: the host's constructor,
 * then a nonblocking broadcast over the new communicator (an
 * intercommunicator: two allreduces), which is the first collective on it
 * on every member, since the program may use it only once the request
 * completes. Whichever thread finds a step done starts the next, from any
 * call that waits (MPI's progress rule: a member may be waiting on another
 * request while this one's peers wait for its step); agreements in flight
 * count in msh_part_nsetup, so that blocking calls poll and sweep them. The
 * program's request (kind MSH_KIND_CTOR) completes once the id is known. */
typedef enum { STEP_CTOR, STEP_BCAST, STEP_RED1, STEP_RED2, STEP_DONE } nb_step;

typedef struct nbctor {
    msh_request *r;           /* the program's request; ext points here */
    MPI_Comm *out;            /* where the host puts the new communicator */
    MPI_Comm parent;          /* where the request's own errors are raised */
    MPI_Request host;         /* the current step's */
    nb_step step;
    int freed;                /* MPI_Request_free'd in flight: retired by the sweep */
    int own_err;              /* an error of the shim's own (no memory), which the host did not raise */
    long long mine, remote, own;
    MPI_Status st;            /* the constructor's */
    struct nbctor *next;      /* in flight */
} nbctor;

/* The agreements in flight; everything in an nbctor up to its completion. */
static pthread_mutex_t nb_lock = PTHREAD_MUTEX_INITIALIZER;
static nbctor *nb_head;
static _Atomic int nb_inflight; /* the list's length, read without the lock */

static int nb_agree_start(nbctor *s)
{
    MPI_Comm c = *s->out;
    int inter = 0, r = 0;
    int rc = PMPI_Comm_test_inter(c, &inter);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_rank(c, &r);
    if (rc != MPI_SUCCESS)
        return rc;
    s->mine = r == 0 ? fresh_cid() : -1;
    if (!inter) {
        s->step = STEP_BCAST;
        s->remote = s->mine;
        return PMPI_Ibcast(&s->remote, 1, MPI_LONG_LONG, 0, c, &s->host);
    }
    s->step = STEP_RED1; /* as agree_cid */
    return PMPI_Iallreduce(&s->mine, &s->remote, 1, MPI_LONG_LONG, MPI_MAX, c, &s->host);
}

/* The id is known (or a step failed): record it. */
static int nb_put(nbctor *s, long long id)
{
    int rc = msh_part_cid_put(*s->out, id);
    s->own_err = rc != MPI_SUCCESS;
    return rc;
}

/* Moves s on as far as it goes now; 1 once it is done (its status then
 * holds the outcome). Under nb_lock and the host lock. */
static int nb_advance(nbctor *s)
{
    int rc = MPI_SUCCESS;
    while (rc == MPI_SUCCESS) {
        int flag = 0;
        rc = PMPI_Test(&s->host, &flag, s->step == STEP_CTOR ? &s->st : MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            break; /* the host raised it on the communicator */
        if (!flag)
            return 0;
        if (s->step == STEP_CTOR) {
            if (*s->out == MPI_COMM_NULL)
                break;
            rc = nb_agree_start(s);
        } else if (s->step == STEP_RED1) {
            s->step = STEP_RED2;
            rc = PMPI_Iallreduce(&s->remote, &s->own, 1, MPI_LONG_LONG, MPI_MAX, *s->out, &s->host);
        } else {
            rc = nb_put(s, s->step == STEP_BCAST || s->remote < s->own ? s->remote : s->own);
            break;
        }
    }
    s->step = STEP_DONE;
    s->st.MPI_ERROR = rc;
    return 1;
}

/* One pass over the agreements in flight. A finished one leaves the list
 * before its request is published complete (its retirement frees it);
 * freed ones are retired here, after the locks. wait: take nb_lock even
 * if another thread holds it (a waiter on one of them), else skip. */
static int nb_sweep(int wait)
{
    if (wait)
        pthread_mutex_lock(&nb_lock);
    else if (pthread_mutex_trylock(&nb_lock) != 0)
        return 0;
    nbctor *orphans = NULL;
    int n = 0;
    int locked = msh_host_enter();
    for (nbctor **pp = &nb_head; *pp;) {
        nbctor *s = *pp;
        if (!nb_advance(s)) {
            pp = &s->next;
            continue;
        }
        *pp = s->next;
        n++;
        atomic_fetch_sub_explicit(&nb_inflight, 1, memory_order_relaxed);
        atomic_fetch_sub_explicit(&msh_part_nsetup, 1, memory_order_relaxed);
        s->r->status = s->st;
        /* raised by the call that retires it (sync/request.h), unless freed */
        s->r->q.own_error = (uint8_t)(s->own_err && !s->freed);
        s->r->q.comm = s->parent;
        msh_req_complete_here(s->r);
        if (s->freed) {
            s->next = orphans;
            orphans = s;
        }
    }
    msh_host_exit(locked);
    pthread_mutex_unlock(&nb_lock);
    while (orphans) {
        nbctor *s = orphans;
        orphans = s->next;
        MPI_Request h = msh_req_handle(s->r);
        msh_req_retire(s->r, &h, MPI_STATUS_IGNORE, MSH_RAISE_REQUEST);
    }
    return n;
}

int msh_part_cid_sweep(void)
{
    return atomic_load_explicit(&nb_inflight, memory_order_relaxed) ? nb_sweep(0) : 0;
}

static int ctor_progress(msh_request *r, int blocking)
{
    (void)blocking;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING)
        nb_sweep(1);
    return atomic_load_explicit(&r->state, memory_order_acquire) != MSH_REQ_PENDING;
}

/* MPI_Request_free in flight (which MPI calls erroneous for a collective's
 * request): the agreement still finishes, swept, and is retired then. */
static int ctor_free(msh_request *r, MPI_Request *handle)
{
    pthread_mutex_lock(&nb_lock);
    int pending = atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING;
    if (pending)
        ((nbctor *)r->ext)->freed = 1;
    pthread_mutex_unlock(&nb_lock);
    if (!pending) {
        MPI_Status ignored;
        msh_req_retire(r, handle, &ignored, MSH_RAISE_REQUEST);
    }
    *handle = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

/* The host's answer for its step's request. */
static int ctor_cancel(msh_request *r)
{
    int rc = MPI_SUCCESS;
    pthread_mutex_lock(&nb_lock);
    nbctor *s = r->ext;
    if (atomic_load_explicit(&r->state, memory_order_acquire) == MSH_REQ_PENDING && s->host != MPI_REQUEST_NULL) {
        int locked = msh_host_enter();
        rc = PMPI_Cancel(&s->host);
        msh_host_exit(locked);
    }
    pthread_mutex_unlock(&nb_lock);
    return rc;
}

static MPI_Comm ctor_comm(msh_request *r)
{
    return r->ext ? ((nbctor *)r->ext)->parent : MPI_COMM_WORLD;
}

static void ctor_release(msh_request *r)
{
    free(r->ext);
    r->ext = NULL;
    atomic_fetch_sub_explicit(&msh_part_nlive, 1, memory_order_relaxed);
}

const msh_req_ops msh_ctor_req_ops = {
    .progress = ctor_progress,
    .wait = msh_polled_wait,
    .test = msh_polled_test,
    .get_status = msh_polled_get_status,
    .start = msh_no_start,
    .free = ctor_free,
    .cancel = ctor_cancel,
    .empty_status = msh_empty_status,
    .error_comm = ctor_comm,
    .release = ctor_release,
};

int msh_part_comm_iadd(MPI_Comm parent, MPI_Comm *out, MPI_Request host, MPI_Request *request)
{
    if (!cid_on) {
        *request = host;
        return MPI_SUCCESS;
    }
    nbctor *s = calloc(1, sizeof *s);
    msh_request *r = s ? msh_req_take(0) : NULL;
    if (!r) {
        /* No memory: the constructor goes on without an id (partitioned
         * init on the new communicator says so). */
        free(s);
        *request = host;
        return MPI_SUCCESS;
    }
    s->r = r;
    s->out = out;
    s->parent = parent;
    s->host = host;
    s->step = STEP_CTOR;
    r->kind = MSH_KIND_CTOR;
    r->ext = s;
    atomic_fetch_add_explicit(&msh_part_nlive, 1, memory_order_relaxed);
    atomic_store_explicit(&r->state, MSH_REQ_PENDING, memory_order_release);
    pthread_mutex_lock(&nb_lock);
    s->next = nb_head;
    nb_head = s;
    atomic_fetch_add_explicit(&nb_inflight, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&msh_part_nsetup, 1, memory_order_relaxed);
    pthread_mutex_unlock(&nb_lock);
    *request = msh_req_handle(r);
    return MPI_SUCCESS;
}

static void drop_entry(msh_hent *e, void *arg)
{
    (void)arg;
    free(e);
}

void msh_part_cid_fini(void)
{
    cid_on = 0;
    msh_htab_drain(&pcs, drop_entry, NULL);
}
