/* Communicator side table (see comm.h). */
#include "vci/comm.h"

#include <pthread.h>
#include <stdlib.h>
#include <strings.h>

#include "core/log.h"

/* Open addressing with linear probing. Readers never lock: a table that is
 * replaced by a larger one stays allocated until finalize, and an entry is
 * freed only by MPI_Comm_free, which the program may not overlap with other
 * uses of that communicator. */
typedef struct comm_table {
    size_t cap;                     /* power of two */
    size_t used;                    /* live entries + tombstones */
    _Atomic(msh_comm *) *slots;
    struct comm_table *retired;     /* older tables, freed at finalize */
} comm_table;

static msh_comm tombstone;
#define TOMB (&tombstone)

static _Atomic(comm_table *) table;
static pthread_mutex_t table_mtx = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int next_home;

MSH_TLS int msh_thread_vci = -1;
static _Atomic int next_thread_vci;

int msh_thread_vci_assign(void)
{
    msh_thread_vci = atomic_fetch_add_explicit(&next_thread_vci, 1, memory_order_relaxed) % msh_pool.n;
    return msh_thread_vci;
}

static comm_table *table_new(size_t cap)
{
    comm_table *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->slots = calloc(cap, sizeof *t->slots);
    if (!t->slots) {
        free(t);
        return NULL;
    }
    t->cap = cap;
    return t;
}

msh_comm *msh_comm_lookup(MPI_Comm c)
{
    comm_table *t = atomic_load_explicit(&table, memory_order_acquire);
    if (MSH_UNLIKELY(!t))
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = msh_handle_hash(c) & mask;; i = (i + 1) & mask) {
        msh_comm *e = atomic_load_explicit(&t->slots[i], memory_order_acquire);
        if (!e)
            return NULL;
        if (e != TOMB && e->user == c)
            return e;
    }
}

/* Under table_mtx. */
static void insert_locked(comm_table *t, msh_comm *mc)
{
    size_t mask = t->cap - 1;
    size_t i = msh_handle_hash(mc->user) & mask;
    while (atomic_load_explicit(&t->slots[i], memory_order_relaxed))
        i = (i + 1) & mask;
    atomic_store_explicit(&t->slots[i], mc, memory_order_release);
    t->used++;
}

static int insert(msh_comm *mc)
{
    pthread_mutex_lock(&table_mtx);
    comm_table *t = atomic_load_explicit(&table, memory_order_relaxed);
    if (!t || (t->used + 1) * 2 > t->cap) {
        /* Rebuild larger, dropping tombstones; publish when complete. */
        size_t cap = t ? t->cap * 2 : 64;
        comm_table *n = table_new(cap);
        if (!n) {
            pthread_mutex_unlock(&table_mtx);
            return MPI_ERR_NO_MEM;
        }
        if (t) {
            for (size_t i = 0; i < t->cap; i++) {
                msh_comm *e = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
                if (e && e != TOMB)
                    insert_locked(n, e);
            }
            n->retired = t;
        }
        atomic_store_explicit(&table, n, memory_order_release);
        t = n;
    }
    insert_locked(t, mc);
    pthread_mutex_unlock(&table_mtx);
    return MPI_SUCCESS;
}

static msh_comm *remove_entry(MPI_Comm c)
{
    pthread_mutex_lock(&table_mtx);
    comm_table *t = atomic_load_explicit(&table, memory_order_relaxed);
    msh_comm *found = NULL;
    if (t) {
        size_t mask = t->cap - 1;
        for (size_t i = msh_handle_hash(c) & mask;; i = (i + 1) & mask) {
            msh_comm *e = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
            if (!e)
                break;
            if (e != TOMB && e->user == c) {
                atomic_store_explicit(&t->slots[i], TOMB, memory_order_release);
                found = e;
                break;
            }
        }
    }
    pthread_mutex_unlock(&table_mtx);
    return found;
}

/* ------------------------------------------------------------ info */

static const struct {
    const char *key;
    unsigned flag;
} assert_keys[] = {
    { "mpi_assert_no_any_tag", MSH_ASSERT_NO_ANY_TAG },
    { "mpi_assert_no_any_source", MSH_ASSERT_NO_ANY_SOURCE },
    { "mpi_assert_allow_overtaking", MSH_ASSERT_ALLOW_OVERTAKING },
};
#define NKEYS (sizeof assert_keys / sizeof assert_keys[0])

unsigned msh_info_asserts(MPI_Info info)
{
    unsigned flags = 0;
    if (info == MPI_INFO_NULL)
        return 0;
    for (size_t k = 0; k < NKEYS; k++) {
        char val[16];
        int flag = 0;
        if (PMPI_Info_get(info, assert_keys[k].key, (int)sizeof val - 1, val, &flag) == MPI_SUCCESS && flag &&
            strcasecmp(val, "true") == 0)
            flags |= assert_keys[k].flag;
    }
    return flags;
}

/* The mapping a communicator gets: MPISHIM_MAP where its assertions make it
 * legal, else comm (rule 1). */
static msh_map_policy effective_map(unsigned asserts)
{
    int tag_ok = !!(asserts & MSH_ASSERT_NO_ANY_TAG);
    int src_ok = !!(asserts & MSH_ASSERT_NO_ANY_SOURCE);
    switch (msh_cfg.map) {
    case MSH_MAP_TAG:    return tag_ok ? MSH_MAP_TAG : MSH_MAP_COMM;
    case MSH_MAP_PEER:   return src_ok ? MSH_MAP_PEER : MSH_MAP_COMM;
    case MSH_MAP_HASH:
        if (tag_ok && src_ok)
            return MSH_MAP_HASH;
        return tag_ok ? MSH_MAP_TAG : src_ok ? MSH_MAP_PEER : MSH_MAP_COMM;
    case MSH_MAP_THREAD:
        return tag_ok && src_ok && (asserts & MSH_ASSERT_ALLOW_OVERTAKING) ? MSH_MAP_THREAD : MSH_MAP_COMM;
    case MSH_MAP_COMM:
    default:             return MSH_MAP_COMM;
    }
}

int msh_comm_register(MPI_Comm c, MPI_Comm parent, MPI_Info info)
{
    if (c == MPI_COMM_NULL)
        return MPI_SUCCESS;
    msh_comm *mc = calloc(1, sizeof *mc);
    if (!mc)
        return MPI_ERR_NO_MEM;
    mc->user = c;
    mc->vci = atomic_fetch_add_explicit(&next_home, 1, memory_order_relaxed) % msh_pool.n;
    msh_comm *pc = parent != MPI_COMM_NULL ? msh_comm_lookup(parent) : NULL;
    mc->info_asserts = (pc ? pc->info_asserts : 0) | msh_info_asserts(info);
    mc->asserts = msh_cfg.asserts | mc->info_asserts;
    mc->map = effective_map(mc->asserts);
    PMPI_Comm_rank(c, &mc->rank);
    if (mc->map != MSH_MAP_COMM && msh_pool.n > 1) {
        /* Spread over K duplicates, one per VCI: made here, inside the
         * user's collective constructor, in the same order on every rank. */
        int k = msh_pool.n;
        mc->dups = calloc((size_t)k, sizeof *mc->dups);
        if (!mc->dups) {
            free(mc);
            return MPI_ERR_NO_MEM;
        }
        for (int i = 0; i < k; i++) {
            int rc = PMPI_Comm_dup(c, &mc->dups[i]);
            if (rc != MPI_SUCCESS) {
                while (i-- > 0)
                    PMPI_Comm_free(&mc->dups[i]);
                free(mc->dups);
                free(mc);
                return rc;
            }
        }
        mc->ndups = k;
    }
    int rc = insert(mc);
    if (rc != MPI_SUCCESS) {
        for (int i = 0; i < mc->ndups; i++)
            PMPI_Comm_free(&mc->dups[i]);
        free(mc->dups);
        free(mc);
    }
    return rc;
}

static void free_entry(msh_comm *mc)
{
    for (int i = 0; i < mc->ndups; i++)
        PMPI_Comm_free(&mc->dups[i]);
    free(mc->dups);
    free(mc);
}

void msh_comm_unregister(MPI_Comm c)
{
    msh_comm *mc = remove_entry(c);
    if (mc)
        free_entry(mc);
}

int msh_comm_fini(void)
{
    int left = 0;
    pthread_mutex_lock(&table_mtx);
    comm_table *t = atomic_load_explicit(&table, memory_order_relaxed);
    if (t) {
        for (size_t i = 0; i < t->cap; i++) {
            msh_comm *e = atomic_load_explicit(&t->slots[i], memory_order_relaxed);
            if (e && e != TOMB) {
                if (e->user != MPI_COMM_WORLD && e->user != MPI_COMM_SELF)
                    left++;
                free_entry(e);
            }
        }
        while (t) {
            comm_table *old = t->retired;
            free(t->slots);
            free(t);
            t = old;
        }
    }
    atomic_store_explicit(&table, NULL, memory_order_release);
    pthread_mutex_unlock(&table_mtx);
    return left;
}

void msh_comm_set_info(MPI_Comm c, MPI_Info info)
{
    msh_comm *mc = msh_comm_lookup(c);
    if (!mc)
        return;
    /* Set_info replaces the hints; the mapping chosen at creation stays,
     * so a spreading communicator keeps the assertions it relies on. */
    unsigned keep = mc->map == MSH_MAP_COMM ? 0 : (mc->asserts & ~msh_cfg.asserts);
    mc->info_asserts = msh_info_asserts(info) | keep;
    mc->asserts = msh_cfg.asserts | mc->info_asserts;
}

void msh_comm_add_info(MPI_Comm c, MPI_Info info)
{
    msh_comm *mc = msh_comm_lookup(c);
    if (!mc || info == MPI_INFO_NULL)
        return;
    for (size_t k = 0; k < NKEYS; k++)
        if (mc->info_asserts & assert_keys[k].flag)
            PMPI_Info_set(info, assert_keys[k].key, "true");
}

void msh_comm_set_errhandler(MPI_Comm c, MPI_Errhandler eh)
{
    msh_comm *mc = msh_comm_lookup(c);
    if (!mc)
        return;
    for (int i = 0; i < mc->ndups; i++)
        PMPI_Comm_set_errhandler(mc->dups[i], eh);
}
