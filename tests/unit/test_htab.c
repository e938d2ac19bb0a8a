/* Unit tests of the handle side table (src/core/htab.c): lookups stay right
 * and memory stays bounded under insert/remove churn, replaced tables are
 * freed only after every lookup that could read them has left, and
 * concurrent readers always find the stable entries. No MPI needed. */
#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

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

int main(void)
{
    test_churn(0);
    test_churn(1);
    test_grow_shrink();
    test_grace();
    test_concurrent();
    if (failures) {
        fprintf(stderr, "test_htab: %d check(s) failed\n", failures);
        return 1;
    }
    printf("ok test_htab\n");
    return 0;
}
