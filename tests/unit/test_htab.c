/* Unit tests of the handle side table (src/core/htab.c): lookups stay right
 * and memory stays bounded under insert/remove churn, replaced tables are
 * freed only after every lookup that could read them has left, concurrent
 * readers always find the stable entries, and many threads inserting,
 * removing and looking up at once always get the right answer; a thread's
 * memo of its last lookup goes stale with any removal. No MPI needed. */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/htab.h"
#include "unit.h"


typedef struct ent {
    msh_hent h;
    int payload;
} ent;

static ent *ent_new(uint64_t key)
{
    ent *e = calloc(1, sizeof *e);
    if (!e)
        abort();
    e->h.key = key;
    e->payload = (int)(key * 7);
    return e;
}

static void free_cb(msh_hent *e, void *arg)
{
    ++*(int *)arg;
    free(e);
}

/* For entries that are not the table's to free. */
static void count_cb(msh_hent *e, void *arg)
{
    (void)e;
    ++*(int *)arg;
}

/* Handles look like MPICH ints or Open MPI pointers: both kinds of key. */
static uint64_t key_of(uint64_t i, int ptrlike) { return ptrlike ? 0x55d0c0de0000ull + i * 0x1a0 : 0x84000000ull + i; }

enum { NSTABLE = 10 };

/* A constant population with create/free churn (MPI_Comm_dup/free in a
 * loop): the table keeps its size, the tombstones go away, no replaced
 * table is kept, lookups stay right. */
static void test_churn(int ptrlike)
{
    msh_htab h = MSH_HTAB_INIT;
    ent *stable[NSTABLE];
    for (int i = 0; i < NSTABLE; i++)
        EXPECT(msh_htab_insert(&h, &(stable[i] = ent_new(key_of((uint64_t)i, ptrlike)))->h) == MPI_SUCCESS);
    msh_htab_info a, b;
    msh_htab_get_info(&h, &a);
    size_t max_bytes = 0;
    for (uint64_t c = 0; c < 100000; c++) {
        uint64_t k = key_of(1000 + c, ptrlike);
        ent *e = ent_new(k);
        EXPECT(msh_htab_insert(&h, &e->h) == MPI_SUCCESS);
        EXPECT(msh_htab_lookup(&h, k) == &e->h);
        EXPECT(msh_htab_lookup(&h, stable[c % NSTABLE]->h.key) == &stable[c % NSTABLE]->h);
        EXPECT(msh_htab_remove(&h, k) == &e->h);
        EXPECT(msh_htab_lookup(&h, k) == NULL);
        EXPECT(msh_htab_remove(&h, k) == NULL);
        free(e);
        msh_htab_get_info(&h, &b);
        if (b.bytes > max_bytes)
            max_bytes = b.bytes;
        if (failures > 20)
            break;
    }
    msh_htab_get_info(&h, &b);
    EXPECT(b.gens > a.gens + 1000);  /* tombstones were rehashed away, often */
    EXPECT(b.cap == a.cap);          /* at the population's size */
    EXPECT(b.live == NSTABLE);
    EXPECT(b.retired == 0);          /* no reader inside: nothing kept */
    EXPECT(max_bytes <= 2 * a.bytes);
    EXPECT(msh_htab_bytes_total() == b.bytes);
    for (int i = 0; i < NSTABLE; i++)
        EXPECT(msh_htab_lookup(&h, stable[i]->h.key) == &stable[i]->h);
    int n = 0;
    msh_htab_drain(&h, free_cb, &n);
    EXPECT(n == NSTABLE);
    EXPECT(msh_htab_bytes_total() == 0);
}

/* Grow to many entries, then free most: the table shrinks back. */
static void test_grow_shrink(void)
{
    msh_htab h = MSH_HTAB_INIT;
    enum { N = 20000 };
    ent **es = calloc(N, sizeof *es);
    for (uint64_t i = 0; i < N; i++)
        EXPECT(msh_htab_insert(&h, &(es[i] = ent_new(key_of(i, 1)))->h) == MPI_SUCCESS);
    msh_htab_info big, small;
    msh_htab_get_info(&h, &big);
    EXPECT(big.live == N && big.cap >= 2 * N);
    for (uint64_t i = 0; i < N; i++)
        EXPECT(msh_htab_lookup(&h, key_of(i, 1)) == &es[i]->h);
    for (uint64_t i = 5; i < N; i++) {
        EXPECT(msh_htab_remove(&h, key_of(i, 1)) == &es[i]->h);
        free(es[i]);
    }
    msh_htab_get_info(&h, &small);
    EXPECT(small.live == 5);
    EXPECT(small.cap == 64);
    EXPECT(small.retired == 0);
    EXPECT(small.bytes < big.bytes / 100);
    for (uint64_t i = 0; i < 5; i++)
        EXPECT(msh_htab_lookup(&h, key_of(i, 1)) == &es[i]->h);
    EXPECT(msh_htab_lookup(&h, key_of(7, 1)) == NULL);
    int n = 0;
    msh_htab_drain(&h, free_cb, &n);
    EXPECT(n == 5);
    free(es);
}

/* A reader parked inside a read section (a lookup preempted mid-probe)
 * keeps every table replaced meanwhile; once it leaves, the next write
 * frees them all. */
static pthread_mutex_t park_mtx = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_state; /* 0 start, 1 inside, 2 may leave, 3 left */

static void *parked_reader(void *arg)
{
    (void)arg;
    msh_reader *r;
    uint64_t s = msh_htab_read_begin(&r);
    pthread_mutex_lock(&park_mtx);
    park_state = 1;
    pthread_cond_broadcast(&park_cv);
    while (park_state != 2)
        pthread_cond_wait(&park_cv, &park_mtx);
    msh_htab_read_end(r, s);
    park_state = 3;
    pthread_cond_broadcast(&park_cv);
    pthread_mutex_unlock(&park_mtx);
    return NULL;
}

static void set_park(int want, int wait_for)
{
    pthread_mutex_lock(&park_mtx);
    if (want >= 0) {
        park_state = want;
        pthread_cond_broadcast(&park_cv);
    }
    while (wait_for >= 0 && park_state != wait_for)
        pthread_cond_wait(&park_cv, &park_mtx);
    pthread_mutex_unlock(&park_mtx);
}

static void churn(msh_htab *h, uint64_t from, uint64_t n)
{
    for (uint64_t c = from; c < from + n; c++) {
        ent *e = ent_new(key_of(c, 0));
        EXPECT(msh_htab_insert(h, &e->h) == MPI_SUCCESS);
        EXPECT(msh_htab_remove(h, e->h.key) == &e->h);
        free(e);
    }
}

static void test_grace(void)
{
    msh_htab h = MSH_HTAB_INIT;
    ent *s = ent_new(key_of(1, 0));
    EXPECT(msh_htab_insert(&h, &s->h) == MPI_SUCCESS);
    pthread_t th;
    park_state = 0;
    EXPECT(pthread_create(&th, NULL, parked_reader, NULL) == 0);
    set_park(-1, 1);
    msh_htab_info a, b;
    churn(&h, 100, 1000);
    msh_htab_get_info(&h, &a);
    EXPECT(a.retired > 10);          /* kept: the parked lookup may read them */
    EXPECT(msh_htab_lookup(&h, s->h.key) == &s->h);
    set_park(2, 3);
    churn(&h, 5000, 1);              /* the next write reclaims */
    msh_htab_get_info(&h, &b);
    EXPECT(b.retired == 0);
    EXPECT(b.bytes < a.bytes);
    pthread_join(th, NULL);
    int n = 0;
    msh_htab_drain(&h, free_cb, &n);
    EXPECT(n == 1);
}

/* Readers look up stable entries while a writer churns: always found,
 * never another's; afterwards nothing retired is left. */
static msh_htab conc = MSH_HTAB_INIT;
static ent *conc_stable[NSTABLE];
static atomic_int conc_stop;
static atomic_long conc_bad;

static void *conc_reader(void *arg)
{
    (void)arg;
    long bad = 0;
    for (unsigned i = 0; !atomic_load_explicit(&conc_stop, memory_order_relaxed); i++) {
        ent *want = conc_stable[i % NSTABLE];
        ent *got = (ent *)msh_htab_lookup(&conc, want->h.key);
        if (got != want || got->payload != (int)(want->h.key * 7))
            bad++;
        if (msh_htab_lookup(&conc, key_of(999999999, 0)) != NULL)
            bad++;
    }
    atomic_fetch_add(&conc_bad, bad);
    return NULL;
}

static void test_concurrent(void)
{
    for (int i = 0; i < NSTABLE; i++)
        EXPECT(msh_htab_insert(&conc, &(conc_stable[i] = ent_new(key_of((uint64_t)i, 0)))->h) == MPI_SUCCESS);
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        EXPECT(pthread_create(&th[i], NULL, conc_reader, NULL) == 0);
    churn(&conc, 1000, 100000);
    atomic_store(&conc_stop, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    EXPECT(atomic_load(&conc_bad) == 0);
    churn(&conc, 200000, 1);
    msh_htab_info b;
    msh_htab_get_info(&conc, &b);
    EXPECT(b.retired == 0);
    EXPECT(b.cap == 64 && b.live == NSTABLE);
    int n = 0;
    msh_htab_drain(&conc, free_cb, &n);
    EXPECT(n == NSTABLE);
}

/* Many threads insert, remove and look up at once, each the only writer of
 * its own keys (as only a communicator's constructor and MPI_Comm_free
 * write its entry), while the table grows, shrinks and is rebuilt under
 * them. Each key has a version, odd while its owner is inserting or
 * removing it: a lookup bracketed by two equal even versions must find
 * exactly the entry (present) or nothing (absent); one during which the
 * key changed may give either, but never another entry. Entries are
 * never freed during the run, so that a lookup racing a removal reads no
 * freed memory (in the shim the program orders them). Afterwards, the
 * generations replaced under the readers are all reclaimed by the next
 * write. Seeded (UNIT_SEED=n repeats a run). */
enum { MT_THREADS = 8, MT_WRITERS = 2, MT_KEYS = 96, MT_OPS = 120000 };

static msh_htab mt = MSH_HTAB_INIT;
static ent mt_ent[MT_THREADS][MT_KEYS];
static _Atomic unsigned mt_ver[MT_THREADS][MT_KEYS];
static uint64_t mt_seed;
static atomic_long mt_bad, mt_bracketed, mt_found_other;
static pthread_barrier_t mt_start;
static atomic_int mt_writers_left = MT_WRITERS;

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dULL;
}

static uint64_t mt_key(int t, int k) { return key_of((uint64_t)(t * MT_KEYS + k), t % 2); }

/* Owner only: insert or remove its key k, the version odd meanwhile. The
 * odd store comes before the table write, so a reader whose lookup sees
 * the write also sees the version move (the slot's release/acquire). */
static void mt_toggle(int t, int k)
{
    unsigned v = atomic_load_explicit(&mt_ver[t][k], memory_order_relaxed);
    atomic_store_explicit(&mt_ver[t][k], v + 1, memory_order_relaxed);
    if (v % 4 == 0) {
        if (msh_htab_insert(&mt, &mt_ent[t][k].h) != MPI_SUCCESS)
            atomic_fetch_add(&mt_bad, 1);
    } else if (msh_htab_remove(&mt, mt_ent[t][k].h.key) != &mt_ent[t][k].h) {
        atomic_fetch_add(&mt_bad, 1);
    }
    atomic_store_explicit(&mt_ver[t][k], v + 2, memory_order_release);
}

/* Look up key k of thread t; returns 1 when the answer is wrong. */
static int mt_check(int t, int k, long *bracketed)
{
    unsigned v1 = atomic_load_explicit(&mt_ver[t][k], memory_order_acquire);
    ent *got = (ent *)msh_htab_lookup(&mt, mt_key(t, k));
    unsigned v2 = atomic_load_explicit(&mt_ver[t][k], memory_order_acquire);
    if (got && got != &mt_ent[t][k]) {
        atomic_fetch_add(&mt_found_other, 1);
        return 1; /* another entry, whatever the timing */
    }
    if (got && got->payload != (int)(got->h.key * 7))
        return 1;
    if (v1 != v2 || v1 % 2)
        return 0; /* changed meanwhile: either answer is right */
    ++*bracketed;
    return (v1 % 4 == 2) != (got != NULL);
}

static void *mt_worker(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t rs = mt_seed * 0x9e3779b97f4a7c15ULL + (uint64_t)me + 1;
    long bad = 0, bracketed = 0;
    /* All start together, and readers go on until the writers are done:
     * every rebuild happens while others read. */
    pthread_barrier_wait(&mt_start);
    for (int op = 0; op < MT_OPS || (me >= MT_WRITERS && atomic_load(&mt_writers_left) > 0); op++) {
        uint64_t x = xorshift(&rs);
        int k = (int)((x >> 8) % MT_KEYS);
        /* Threads 0 and 1 mostly write, the others mostly read: were all
         * to write often, most would wait on the table's mutex instead of
         * reading, and a rebuild is only tested while others read. */
        if (me < MT_WRITERS ? x % 2 == 0 : x % 64 == 0) {
            mt_toggle(me, k);
            continue;
        }
        switch ((x >> 1) % 16) {
        case 0: case 1: case 2:
            bad += mt_check(me, k, &bracketed); /* own key: always bracketed */
            break;
        case 3:
            /* A burst: fill then empty a run of own keys, so the table
             * grows and shrinks (rebuilds) under the other readers. */
            if (((x >> 20) % 64) == 0) {
                for (int j = 0; j < MT_KEYS; j++)
                    if (atomic_load_explicit(&mt_ver[me][j], memory_order_relaxed) % 4 == 0)
                        mt_toggle(me, j);
                for (int j = 0; j < MT_KEYS; j++)
                    bad += mt_check(me, j, &bracketed);
                for (int j = 0; j < MT_KEYS; j++)
                    if (atomic_load_explicit(&mt_ver[me][j], memory_order_relaxed) % 4 == 2)
                        mt_toggle(me, j);
            }
            break;
        case 4: case 5: case 6: case 7:
            /* A key that is (nearly) never moving: a reader's. */
            bad += mt_check(MT_WRITERS + (int)((x >> 40) % (MT_THREADS - MT_WRITERS)), k, &bracketed);
            break;
        default:
            bad += mt_check((int)((x >> 40) % MT_THREADS), k, &bracketed);
            break;
        }
        /* Not a key anyone inserts. */
        if (op % 64 == 0 && msh_htab_lookup(&mt, key_of(999999999, 1)) != NULL)
            bad++;
    }
    if (me < MT_WRITERS)
        atomic_fetch_sub(&mt_writers_left, 1);
    atomic_fetch_add(&mt_bad, bad);
    atomic_fetch_add(&mt_bracketed, bracketed);
    return NULL;
}

static void test_mt(void)
{
    for (int t = 0; t < MT_THREADS; t++)
        for (int k = 0; k < MT_KEYS; k++) {
            mt_ent[t][k].h.key = mt_key(t, k);
            mt_ent[t][k].payload = (int)(mt_ent[t][k].h.key * 7);
        }
    msh_htab_info a, b;
    msh_htab_get_info(&mt, &a);
    pthread_t th[MT_THREADS];
    EXPECT(pthread_barrier_init(&mt_start, NULL, MT_THREADS) == 0);
    for (int t = 0; t < MT_THREADS; t++)
        EXPECT(pthread_create(&th[t], NULL, mt_worker, (void *)(intptr_t)t) == 0);
    for (int t = 0; t < MT_THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&mt_start);
    EXPECT(atomic_load(&mt_bad) == 0);
    EXPECT(atomic_load(&mt_found_other) == 0);
    /* The checks were not vacuous, and the table was replaced many times
     * while the others were reading. */
    EXPECT(atomic_load(&mt_bracketed) > MT_THREADS * MT_OPS / 4);
    msh_htab_get_info(&mt, &b);
    EXPECT(b.gens > a.gens + 50);
    /* Quiescent: every key's final state is in the table, and the next
     * write reclaims every replaced generation. */
    size_t present = 0;
    for (int t = 0; t < MT_THREADS; t++)
        for (int k = 0; k < MT_KEYS; k++) {
            int in = atomic_load(&mt_ver[t][k]) % 4 == 2;
            present += (size_t)in;
            EXPECT(msh_htab_lookup(&mt, mt_key(t, k)) == (in ? &mt_ent[t][k].h : NULL));
        }
    churn(&mt, 300000, 1);
    msh_htab_get_info(&mt, &b);
    EXPECT(b.retired == 0);
    EXPECT(b.live == present);
    int n = 0;
    msh_htab_drain(&mt, count_cb, &n);
    EXPECT(n == (int)present);
    printf("test_htab: %d threads, %ld bracketed lookups checked, %llu generations\n", MT_THREADS,
           atomic_load(&mt_bracketed), (unsigned long long)(b.gens - a.gens));
}

/* The memo (msh_htab_lookup_memo): a repeated lookup returns the entry it
 * remembered; once the key is removed and inserted again for another
 * entry (a freed handle given to a new communicator), the new one; a key
 * not in the table is never remembered; a removal of another key makes
 * the memo look again, and it still finds its entry. */
static void test_memo(void)
{
    msh_htab h = MSH_HTAB_INIT;
    msh_htab_memo m = { 0, NULL, 0 };
    ent *a = ent_new(key_of(1, 0)), *other = ent_new(key_of(2, 0));
    EXPECT(msh_htab_insert(&h, &a->h) == MPI_SUCCESS);
    EXPECT(msh_htab_insert(&h, &other->h) == MPI_SUCCESS);
    EXPECT(msh_htab_lookup_memo(&h, key_of(1, 0), &m) == &a->h);
    EXPECT(m.e == &a->h);
    EXPECT(msh_htab_lookup_memo(&h, key_of(1, 0), &m) == &a->h);
    EXPECT(msh_htab_remove(&h, key_of(1, 0)) == &a->h);
    free(a);
    EXPECT(msh_htab_lookup_memo(&h, key_of(1, 0), &m) == NULL);
    ent *b = ent_new(key_of(1, 0));
    EXPECT(msh_htab_insert(&h, &b->h) == MPI_SUCCESS);
    EXPECT(msh_htab_lookup_memo(&h, key_of(1, 0), &m) == &b->h);
    EXPECT(msh_htab_lookup_memo(&h, key_of(3, 0), &m) == NULL);
    EXPECT(m.e == &b->h); /* a miss leaves the memo as it was */
    EXPECT(msh_htab_remove(&h, key_of(2, 0)) == &other->h);
    free(other);
    EXPECT(msh_htab_lookup_memo(&h, key_of(1, 0), &m) == &b->h);
    int n = 0;
    msh_htab_drain(&h, free_cb, &n);
    EXPECT(n == 1);
}

int main(void)
{
    const char *env = getenv("UNIT_SEED");
    mt_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_htab: seed %llu (UNIT_SEED=%llu repeats this run)\n", (unsigned long long)mt_seed,
           (unsigned long long)mt_seed);
    test_churn(0);
    test_churn(1);
    test_grow_shrink();
    test_grace();
    test_concurrent();
    test_mt();
    test_memo();
    if (failures) {
        fprintf(stderr, "test_htab: %d check(s) failed\n", failures);
        return 1;
    }
    printf("ok test_htab\n");
    return 0;
}
