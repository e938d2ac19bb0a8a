/* Unit test of the engine against the transport interface
 * (src/transport/transport.h), without MPI: every VCI gets a fake
 * transport whose poll completes a random subset of what it tracks (and
 * some posts finish inside the call, MSH_TP_DONE), and many threads post,
 * wait, free, and run persistent requests through the engine
 * (msh_post_begin/commit, msh_req_wait_complete, msh_req_retire,
 * msh_req_start, msh_req_free, progress polling). Checks: every wait ends
 * (the alarm fails the test otherwise) with the status the transport
 * reported for that very operation; a request freed while active is
 * recycled once its operation completes; at the end no transport tracks
 * anything and the engine gave back every transport request it was given
 * (nothing leaked, nothing released twice).
 * MSH_TEST_SEED=n repeats a run's schedule of choices; the seed is printed
 * (thread interleavings are the scheduler's). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/config.h"
#include "sync/progress.h"
#include "sync/wait.h"
#include "vci/vci.h"
#include "unit.h"

#define NVCI 3
#define NTHREADS 6
#define ROUNDS 400
#define BATCH 4
#define SLOTS 4096     /* fake operations per transport */
#define TIMEOUT_S 60   /* MSH_TEST_TIMEOUT=s overrides (sanitizer builds) */

/* ------------------------------------------------------------ the fake transport */

typedef struct fake_op {
    int used, persistent, active, tracked, cancelled;
    int peer, tag;
} fake_op;

typedef struct fake_tp {
    msh_tp base;
    unsigned seed; /* under the VCI lock */
    void *ctx[SLOTS];
    int slot[SLOTS]; /* tracked, oldest first */
    msh_tp_done done[SLOTS];
    fake_op ops[SLOTS];
    int hint;        /* where to look for a free slot */
} fake_tp;

static _Atomic long live_ops;  /* posted or made, not yet given back */
static _Atomic long misuses;   /* an operation on a request the fake does not own */

/* MPICH's MPI_Request is an int, Open MPI's a pointer: slot + 1 fits both. */
static msh_tp_req req_of(int s) { return (msh_tp_req)(intptr_t)(s + 1); }
static int slot_of(msh_tp_req q) { return (int)(intptr_t)q - 1; }

static fake_tp *fake_of(msh_tp *tp) { return (fake_tp *)tp; }

static fake_op *op_of(fake_tp *f, msh_tp_req q)
{
    int s = slot_of(q);
    if (s < 0 || s >= SLOTS || !f->ops[s].used) {
        atomic_fetch_add(&misuses, 1);
        return NULL;
    }
    return &f->ops[s];
}

static int new_op(fake_tp *f, const msh_tp_msg *m, int persistent, msh_tp_req *treq)
{
    for (int k = 0; k < SLOTS; k++) {
        int s = (f->hint + k) % SLOTS;
        if (!f->ops[s].used) {
            f->ops[s] = (fake_op){ .used = 1, .persistent = persistent, .active = !persistent, .peer = m->peer,
                                   .tag = m->tag };
            f->hint = s + 1;
            *treq = req_of(s);
            atomic_fetch_add(&live_ops, 1);
            return MPI_SUCCESS;
        }
    }
    return MPI_ERR_NO_MEM;
}

static void drop_op(fake_op *o)
{
    o->used = 0;
    atomic_fetch_sub(&live_ops, 1);
}

static int fake_track(msh_tp *tp, void *ctx, msh_tp_req treq);

/* About a quarter of the posts finish inside the call, as a lane's short
 * sends do: the engine must complete them there, from what the post
 * reported; the others are tracked. */
static int fake_post(msh_tp *tp, const msh_tp_msg *m, void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    fake_tp *f = fake_of(tp);
    int rc = new_op(f, m, 0, treq);
    if (rc != MPI_SUCCESS)
        return rc;
    if (rand_r(&f->seed) % 4 == 0) {
        fake_op *o = op_of(f, *treq);
        memset(&p->d, 0, sizeof p->d);
        p->d.status.MPI_SOURCE = o->peer;
        p->d.status.MPI_TAG = o->tag;
        drop_op(o);
        *treq = MPI_REQUEST_NULL;
        p->how = MSH_TP_DONE;
        return MPI_SUCCESS;
    }
    rc = fake_track(tp, ctx, *treq);
    p->how = MSH_TP_TRACKED;
    return rc;
}

static int fake_init(msh_tp *tp, const msh_tp_msg *m, msh_tp_req *treq)
{
    return new_op(fake_of(tp), m, 1, treq);
}

static int fake_start(msh_tp *tp, msh_tp_req *treq)
{
    fake_op *o = op_of(fake_of(tp), *treq);
    if (!o || !o->persistent || o->active) {
        atomic_fetch_add(&misuses, 1);
        return MPI_ERR_REQUEST;
    }
    o->active = 1;
    return MPI_SUCCESS;
}

static int fake_track(msh_tp *tp, void *ctx, msh_tp_req treq)
{
    fake_tp *f = fake_of(tp);
    fake_op *o = op_of(f, treq);
    if (!o || !o->active || o->tracked) {
        atomic_fetch_add(&misuses, 1);
        return MPI_ERR_REQUEST;
    }
    int n = tp->ntracked;
    o->tracked = 1;
    f->slot[n] = slot_of(treq);
    f->ctx[n] = ctx;
    msh_tp_set_tracked(tp, n + 1);
    return MPI_SUCCESS;
}

/* About half of what is tracked completes, in any order. */
static int fake_poll(msh_tp *tp, const msh_tp_done **done)
{
    fake_tp *f = fake_of(tp);
    int n = tp->ntracked, out = 0, j = 0;
    for (int i = 0; i < n; i++) {
        fake_op *o = &f->ops[f->slot[i]];
        if (!o->cancelled && rand_r(&f->seed) % 2) {
            f->slot[j] = f->slot[i];
            f->ctx[j] = f->ctx[i];
            j++;
            continue;
        }
        msh_tp_done *d = &f->done[out++];
        memset(d, 0, sizeof *d);
        d->ctx = f->ctx[i];
        d->status.MPI_SOURCE = o->peer;
        d->status.MPI_TAG = o->tag;
        d->status.MPI_ERROR = o->cancelled ? MPI_ERR_OTHER : MPI_SUCCESS;
        o->tracked = 0;
        o->active = 0;
        o->cancelled = 0;
        if (o->persistent) {
            d->treq = req_of(f->slot[i]);
        } else {
            d->treq = MPI_REQUEST_NULL;
            drop_op(o);
        }
    }
    msh_tp_set_tracked(tp, j);
    *done = f->done;
    return out;
}

static void *fake_tracked(msh_tp *tp, int k)
{
    return k < tp->ntracked ? fake_of(tp)->ctx[k] : NULL;
}

/* Cancelled operations complete at the next poll, with an error the test
 * can see (the fake has no MPI to mark a status cancelled). */
static int fake_cancel(msh_tp *tp, msh_tp_req *treq)
{
    fake_op *o = op_of(fake_of(tp), *treq);
    if (!o || !o->tracked)
        return MPI_ERR_REQUEST;
    o->cancelled = 1;
    return MPI_SUCCESS;
}

/* The engine waits on its transport only for what it could not track
 * (never here: tracking does not fail) and for started MPI_PROC_NULL
 * requests (none here). */
static int fake_wait(msh_tp *tp, msh_tp_req *treq, MPI_Status *st)
{
    (void)tp;
    (void)treq;
    (void)st;
    atomic_fetch_add(&misuses, 1);
    return MPI_ERR_OTHER;
}

static int fake_probe(msh_tp *tp, int source, int tag, MPI_Comm comm, int *flag, MPI_Message *message,
                      MPI_Status *status)
{
    (void)tp, (void)source, (void)tag, (void)comm, (void)message, (void)status;
    *flag = 0;
    return MPI_SUCCESS;
}

static int fake_post_matched(msh_tp *tp, void *buf, MPI_Count count, MPI_Datatype dt, MPI_Message *message,
                             void *ctx, msh_tp_req *treq, msh_tp_posted *p)
{
    (void)tp, (void)buf, (void)count, (void)dt, (void)message, (void)ctx, (void)treq, (void)p;
    atomic_fetch_add(&misuses, 1);
    return MPI_ERR_OTHER;
}

static int fake_test(msh_tp *tp, msh_tp_req *treq, int *flag, MPI_Status *st)
{
    *flag = 0;
    return fake_wait(tp, treq, st);
}

static int fake_release(msh_tp *tp, msh_tp_req *treq)
{
    if (*treq == MPI_REQUEST_NULL)
        return MPI_SUCCESS;
    fake_op *o = op_of(fake_of(tp), *treq);
    if (!o || o->tracked) {
        atomic_fetch_add(&misuses, 1);
        return MPI_ERR_REQUEST;
    }
    drop_op(o);
    *treq = MPI_REQUEST_NULL;
    return MPI_SUCCESS;
}

static void fake_close(msh_tp *tp)
{
    (void)tp;
}

static const msh_tp_ops fake_ops = {
    .name = "fake", .post = fake_post, .init = fake_init, .start = fake_start, .track = fake_track,
    .poll = fake_poll, .tracked = fake_tracked, .cancel = fake_cancel, .probe = fake_probe,
    .post_matched = fake_post_matched, .wait = fake_wait, .test = fake_test,
    .release = fake_release, .close = fake_close,
};

/* ------------------------------------------------------------ threads */

static unsigned base_seed;
static _Atomic long ops_done;

/* A nonblocking operation with tag on VCI v: its request and handle. */
static msh_request *post(msh_vci *v, int persistent, int peer, int tag, MPI_Request *h)
{
    msh_request *r = msh_post_begin(v);
    EXPECT(r != NULL);
    if (!r)
        return NULL;
    msh_tp_msg m = { .peer = peer, .tag = tag, .mode = MSH_TP_RECV };
    msh_tp_posted p;
    int rc = persistent ? msh_tp_init(v->tp, &m, &r->host) : msh_tp_post(v->tp, &m, r, &r->host, &p);
    EXPECT(msh_post_commit(v, r, persistent ? MSH_KIND_PRECV : MSH_KIND_RECV, rc, persistent ? NULL : &p, h) ==
           MPI_SUCCESS);
    return r;
}

static void wait_check(msh_request *r, MPI_Request *h, int peer, int tag, int want_rc)
{
    MPI_Status st;
    msh_req_wait_complete(r);
    int rc = msh_req_retire(r, h, &st, MSH_RAISE_REQUEST);
    EXPECT(rc == want_rc);
    EXPECT(st.MPI_SOURCE == peer && st.MPI_TAG == tag);
    atomic_fetch_add(&ops_done, 1);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    unsigned seed = base_seed * 7919u + (unsigned)t;
    for (int round = 0; round < ROUNDS; round++) {
        msh_vci *v = msh_vci_get(rand_r(&seed) % NVCI);
        int tag = t * 100000 + round * 10;
        switch (rand_r(&seed) % 5) {
        case 0: { /* one operation */
            MPI_Request h;
            msh_request *r = post(v, 0, t, tag, &h);
            if (r)
                wait_check(r, &h, t, tag, MPI_SUCCESS);
            break;
        }
        case 1: { /* a batch, waited for newest first */
            MPI_Request h[BATCH];
            msh_request *r[BATCH];
            for (int i = 0; i < BATCH; i++)
                r[i] = post(msh_vci_get((v->idx + i) % NVCI), 0, t, tag + i, &h[i]);
            for (int i = BATCH - 1; i >= 0; i--)
                if (r[i])
                    wait_check(r[i], &h[i], t, tag + i, MPI_SUCCESS);
            break;
        }
        case 2: { /* freed while active: progress recycles it */
            MPI_Request h;
            msh_request *r = post(v, 0, t, tag, &h);
            if (r) {
                EXPECT(msh_req_free(r, &h) == MPI_SUCCESS);
                EXPECT(h == MPI_REQUEST_NULL);
            }
            break;
        }
        case 3: { /* persistent: started three times, then freed */
            MPI_Request h;
            msh_request *r = post(v, 1, t, tag, &h);
            if (!r)
                break;
            for (int k = 0; k < 3; k++) {
                EXPECT(msh_req_start(r) == MPI_SUCCESS);
                wait_check(r, &h, t, tag, MPI_SUCCESS);
                EXPECT(h != MPI_REQUEST_NULL);
            }
            EXPECT(msh_req_free(r, &h) == MPI_SUCCESS);
            break;
        }
        default: { /* cancelled: completes with the fake's error */
            MPI_Request h;
            msh_request *r = post(v, 0, t, tag, &h);
            if (!r)
                break;
            EXPECT(msh_req_cancel(r) == MPI_SUCCESS || msh_req_done(r));
            MPI_Status st;
            msh_req_wait_complete(r);
            int rc = msh_req_retire(r, &h, &st, MSH_RAISE_REQUEST);
            EXPECT(rc == MPI_SUCCESS || rc == MPI_ERR_OTHER);
            EXPECT(st.MPI_TAG == tag);
            atomic_fetch_add(&ops_done, 1);
            break;
        }
        }
    }
    return NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test_transport: timed out (a wait never ended)\n";
    ssize_t w = write(2, m, sizeof m - 1);
    (void)w;
    _exit(2);
}

static void run(msh_wait_policy policy, const char *name)
{
    msh_cfg.wait = policy;
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++)
        EXPECT(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < NTHREADS; t++)
        pthread_join(th[t], NULL);
    /* Requests freed while active complete with the next polls. */
    for (int k = 0; k < 10000; k++) {
        int busy = 0;
        for (int i = 0; i < NVCI; i++) {
            msh_progress_poll(msh_vci_get(i), 1);
            busy += msh_vci_get(i)->tp->ntracked;
        }
        if (!busy)
            break;
    }
    for (int i = 0; i < NVCI; i++)
        EXPECT(msh_vci_get(i)->tp->ntracked == 0 && msh_tp_idle(msh_vci_get(i)->tp));
    EXPECT(atomic_load(&live_ops) == 0);
    EXPECT(atomic_load(&misuses) == 0);
    printf("test_transport: wait %s: %ld operations waited for\n", name, atomic_load(&ops_done));
}

int main(void)
{
    const char *e = getenv("MSH_TEST_SEED");
    base_seed = e ? (unsigned)strtoul(e, NULL, 0) : (unsigned)time(NULL);
    printf("test_transport: seed %u (MSH_TEST_SEED=%u repeats it)\n", base_seed, base_seed);
    fflush(stdout);
    signal(SIGALRM, on_alarm);
    const char *to = getenv("MSH_TEST_TIMEOUT");
    alarm(to ? (unsigned)strtoul(to, NULL, 0) : TIMEOUT_S);

    EXPECT(msh_req_arena_init() == 0);
    EXPECT(msh_vci_pool_init(NVCI, 0) == 0);
    static fake_tp fakes[NVCI];
    for (int i = 0; i < NVCI; i++) {
        EXPECT(strcmp(msh_vci_get(i)->tp->ops->name, "host") == 0); /* the default */
        fakes[i].base.ops = &fake_ops;
        fakes[i].base.idx = i;
        fakes[i].seed = base_seed + (unsigned)i;
        msh_vci_get(i)->tp = &fakes[i].base;
    }
    msh_cfg.progress = MSH_PROGRESS_GLOBAL;
    msh_cfg.spin_us = 20;
    EXPECT(msh_progress_init() == 0);

    run(MSH_WAIT_BLOCK, "block");
    run(MSH_WAIT_ADAPTIVE, "adaptive");
    run(MSH_WAIT_SPIN, "spin");

    if (failures)
        printf("test_transport: FAILED (seed %u)\n", base_seed);
    else
        printf("ok test_transport\n");
    return failures != 0;
}
