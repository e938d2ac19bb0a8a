/* Communicator side table (see comm.h). */
#include "vci/comm.h"

#include <pthread.h>
#include <stdlib.h>

#include "core/log.h"

msh_htab msh_comm_table = MSH_HTAB_INIT;
MSH_TLS msh_htab_memo msh_comm_memo;
_Atomic int msh_comm_gate;

#define WILDCARD_ASSERTS (MSH_ASSERT_NO_ANY_TAG | MSH_ASSERT_NO_ANY_SOURCE)

void msh_comm_init(void)
{
    if (msh_cfg.asserts & WILDCARD_ASSERTS)
        atomic_fetch_add_explicit(&msh_comm_gate, 1, memory_order_relaxed);
    /* MPISHIM_STATS=1 counts pending requests, which the inline solo paths
     * would hand out uncounted (msh_solo_enter_req in sync/solo.h). */
    if (msh_cfg.stats)
        atomic_fetch_add_explicit(&msh_comm_gate, 1, memory_order_relaxed);
}

static void free_entry(msh_comm *mc);

/* Count mc in msh_comm_gate while its routes or checks are not trivial. */
static void gate_update(msh_comm *mc)
{
    int g = mc->nways > 0 || (mc->asserts & WILDCARD_ASSERTS);
    if (g != mc->gated)
        atomic_fetch_add_explicit(&msh_comm_gate, g - mc->gated, memory_order_relaxed);
    mc->gated = g;
}

static _Atomic int next_home;

MSH_TLS int msh_thread_vci = -1;
static _Atomic int next_thread_vci;

int msh_thread_vci_assign(void)
{
    msh_thread_vci = atomic_fetch_add_explicit(&next_thread_vci, 1, memory_order_relaxed) % msh_pool.n;
    return msh_thread_vci;
}

/* msh_route_of's other cases, out of line: a communicator the shim does not
 * know, or one spread over duplicates or a lane's VCIs. */
void msh_route_spread(MPI_Comm c, const msh_comm *mc, int src, int dst, int tag, msh_route *rt)
{
    if (!mc) {
        rt->vci = msh_vci_get((int)(msh_handle_hash(c) % (uint32_t)msh_pool.n));
        rt->comm = c;
        return;
    }
    uint32_t key = 0;
    if (mc->asserts & MSH_ASSERT_NO_ANY_TAG && mc->map != MSH_MAP_PEER)
        key = (uint32_t)tag;
    if (mc->asserts & MSH_ASSERT_NO_ANY_SOURCE && mc->map != MSH_MAP_TAG)
        key = msh_mix(key * 0x9e3779b1U ^ msh_mix((uint32_t)src * 0x85ebca6bU ^ (uint32_t)dst));
    int k = (int)(mc->map == MSH_MAP_TAG ? key : msh_mix(key)) % mc->nways;
    if (k < 0)
        k += mc->nways;
    rt->comm = mc->ndups ? mc->dups[k] : c;
    if (mc->map == MSH_MAP_THREAD && mc->ndups) {
        int t = msh_thread_vci >= 0 ? msh_thread_vci : msh_thread_vci_assign();
        rt->vci = msh_vci_get(t);
    } else {
        rt->vci = msh_vci_get(k % msh_pool.n);
    }
}

/* ------------------------------------------------------------ info */

/* The mpi_assert_* keys set to true in info: MPISHIM_ASSERT's info keys,
 * one boolean per flag, parsed as the MPISHIM_* booleans are
 * (src/core/config.c). */
unsigned msh_info_asserts(MPI_Info info)
{
    msh_config c = msh_cfg;
    c.asserts = 0; /* the keys' part alone; callers add MPISHIM_ASSERT */
    msh_cfg_from_info(info, MSH_CFG_ASSERT, &c);
    return c.asserts;
}

int msh_comm_congruent(MPI_Comm scope, MPI_Comm like, MPI_Comm *out)
{
    MPI_Group g = MPI_GROUP_EMPTY;
    int rc = like != MPI_COMM_NULL ? PMPI_Comm_group(like, &g) : MPI_SUCCESS;
    if (rc != MPI_SUCCESS)
        return rc;
    rc = PMPI_Comm_create(scope, g, out);
    if (g != MPI_GROUP_EMPTY)
        PMPI_Group_free(&g);
    if (rc != MPI_SUCCESS || *out == MPI_COMM_NULL)
        return rc;
    MPI_Errhandler eh;
    if (PMPI_Comm_get_errhandler(like, &eh) == MPI_SUCCESS) {
        PMPI_Comm_set_errhandler(*out, eh);
        PMPI_Errhandler_free(&eh);
    }
    return MPI_SUCCESS;
}

int msh_comm_twin_self(const void *arg, MPI_Comm *out)
{
    MPI_Comm c = *(const MPI_Comm *)arg;
    return msh_comm_congruent(c, c, out);
}

/* The k twins of c (non-NULL c only; on a process c excludes, the twins are
 * made and come back MPI_COMM_NULL). */
static int make_twins(MPI_Comm c, int k, msh_comm_twin_fn twin, const void *arg, MPI_Comm *dups)
{
    for (int i = 0; i < k; i++) {
        MPI_Comm d = MPI_COMM_NULL;
        int rc = twin(arg, &d);
        if (rc == MPI_SUCCESS && (d == MPI_COMM_NULL) != (c == MPI_COMM_NULL))
            rc = MPI_ERR_INTERN; /* not congruent: the constructor was not repeatable */
        if (rc != MPI_SUCCESS) {
            if (d != MPI_COMM_NULL)
                PMPI_Comm_free(&d);
            while (dups && i-- > 0)
                PMPI_Comm_free(&dups[i]);
            return rc;
        }
        if (dups)
            dups[i] = d;
    }
    return MPI_SUCCESS;
}

int msh_comm_register(MPI_Comm c, MPI_Comm parent, MPI_Info info, msh_comm_twin_fn twin, const void *arg)
{
    msh_comm *pc = parent != MPI_COMM_NULL ? msh_comm_lookup(parent) : NULL;
    unsigned info_asserts = (pc ? pc->info_asserts : 0) | msh_info_asserts(info);
    unsigned asserts = msh_cfg.asserts | info_asserts;
    msh_map_policy map = msh_map_effective(msh_cfg.map, asserts);
    /* Spread over K ways, one per VCI. Without a lane each way is a
     * duplicate, made here, inside the user's collective constructor, in
     * the same order on every rank (rule 4). With one (open on every
     * process or on none) the ways are the VCIs' endpoints: no duplicate,
     * so no process of the call makes one, members or not. */
    int ways = map != MSH_MAP_COMM && msh_pool.n > 1 && twin ? msh_pool.n : 0;
    int k = msh_tp_direct ? ways : 0;
    if (c == MPI_COMM_NULL)
        return make_twins(c, k, twin, arg, NULL);
    msh_comm *mc = calloc(1, sizeof *mc);
    if (!mc)
        return MPI_ERR_NO_MEM;
    mc->user = c;
    mc->h.key = msh_handle_key(&c, sizeof c);
    mc->vci = atomic_fetch_add_explicit(&next_home, 1, memory_order_relaxed) % msh_pool.n;
    mc->info_asserts = info_asserts;
    mc->asserts = asserts;
    mc->map = map;
    PMPI_Comm_rank(c, &mc->rank);
    PMPI_Comm_size(c, &mc->size);
    PMPI_Comm_test_inter(c, &mc->inter);
    if (k > 0) {
        mc->dups = calloc((size_t)k, sizeof *mc->dups);
        int rc = mc->dups ? make_twins(c, k, twin, arg, mc->dups) : MPI_ERR_NO_MEM;
        if (rc != MPI_SUCCESS) {
            free(mc->dups);
            free(mc);
            return rc;
        }
        mc->ndups = k;
    }
    /* Which transport carries each (collective over c, like the twins). */
    int nat = (mc->asserts & MSH_ASSERT_NO_ANY_TAG) != 0;
    int rc = msh_tp_comm_add(c, mc->inter, nat);
    for (int i = 0; i < mc->ndups && rc == MPI_SUCCESS; i++)
        rc = msh_tp_comm_add(mc->dups[i], mc->inter, nat);
    if (rc != MPI_SUCCESS) {
        free_entry(mc);
        return rc;
    }
    /* A lane reaches only the same VCI of another process: the home the
     * members agree on, not this process's own rotation. */
    int home = msh_tp_comm_home(c, msh_pool.n);
    if (home >= 0)
        mc->vci = home;
    mc->tp_rec = msh_tp_comm_record(c);
    /* The lane carries c or not, the same on every member: only what it
     * carries spreads over its VCIs. */
    mc->nways = k ? k : mc->tp_rec ? ways : 0;
    if (ways && !mc->nways)
        mc->map = MSH_MAP_COMM;
    gate_update(mc); /* before the entry is visible: a plain route never skips its checks */
    rc = msh_htab_insert(&msh_comm_table, &mc->h);
    if (rc != MPI_SUCCESS)
        free_entry(mc);
    return rc;
}

static void free_entry(msh_comm *mc)
{
    if (mc->gated)
        atomic_fetch_sub_explicit(&msh_comm_gate, 1, memory_order_relaxed);
    msh_tp_comm_remove(mc->user);
    for (int i = 0; i < mc->ndups; i++) {
        msh_tp_comm_remove(mc->dups[i]);
        PMPI_Comm_free(&mc->dups[i]);
    }
    free(mc->dups);
    free(mc);
}

void msh_comm_unregister(MPI_Comm c)
{
    msh_comm *mc = (msh_comm *)msh_htab_remove(&msh_comm_table, msh_handle_key(&c, sizeof c));
    if (mc)
        free_entry(mc);
}

static void fini_entry(msh_hent *e, void *arg)
{
    msh_comm *mc = (msh_comm *)e;
    if (mc->user != MPI_COMM_WORLD && mc->user != MPI_COMM_SELF)
        ++*(int *)arg;
    free_entry(mc);
}

int msh_comm_fini(void)
{
    int left = 0;
    msh_htab_drain(&msh_comm_table, fini_entry, &left);
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
    gate_update(mc);
}

void msh_comm_add_info(MPI_Comm c, MPI_Info info)
{
    msh_comm *mc = msh_comm_lookup(c);
    if (!mc || info == MPI_INFO_NULL)
        return;
    char key[64];
    for (int i = 0; msh_cfg_info_key(MSH_CFG_ASSERT, i, key, sizeof key) == 0; i++)
        if (mc->info_asserts & (1u << i))
            PMPI_Info_set(info, key, "true");
}

void msh_comm_set_errhandler(MPI_Comm c, MPI_Errhandler eh)
{
    msh_comm *mc = msh_comm_lookup(c);
    if (!mc)
        return;
    for (int i = 0; i < mc->ndups; i++)
        PMPI_Comm_set_errhandler(mc->dups[i], eh);
}
