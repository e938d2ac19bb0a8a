/* Communicator ids for the partitioned layer (see channel.h). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/htab.h"
#include "core/log.h"
#include "core/runtime.h"
#include "partitioned/cid.h"
#include "vci/vci.h"

/* Where a communicator's ranks (its remote group's, for an
 * intercommunicator) are in MPI_COMM_WORLD, made at the first partitioned
 * init on it: a channel's peer is then looked up, where asking the host
 * took four calls per init. */
typedef struct pranks {
    int size;
    int world[]; /* MPI_UNDEFINED: not in MPI_COMM_WORLD */
} pranks;

/* A user communicator is known by an id its members agree on inside the user's
 * constructor with one plain collective over the new communicator (only
 * the constructing thread knows it, so nothing can interleave with it):
 * its leader's world rank and a number that leader has never handed out
 * before, so ids never repeat in the job. No hidden constructor runs
 * inside a user's constructor.
 *
 * MPI_Comm_idup cannot agree on anything inside the call (its peers may
 * be inside blocking calls on other communicators until it completes), so
 * an idup's id is computed by each member alone from what all members
 * share: its parent's id and how many idups the parent made before it.
 * MPI has every member call the collectives of one communicator, idups
 * included, in the same order, so the count is the same everywhere (idups
 * on different parents may come in different orders: each parent counts
 * its own). The two are mixed into 62 bits with bit 62 set, a range agreed
 * ids never reach (they would need 2^30 processes): two idups' ids may
 * collide with a chance of about n^2 / 2^63 for n of them in the job. */
typedef struct pcomm {
    msh_hent h; /* keyed by the communicator handle */
    long long id;
    _Atomic unsigned idups; /* MPI_Comm_idup calls on this communicator so far */
    pranks *_Atomic ranks;  /* NULL until its first partitioned init */
} pcomm;

static void pcomm_free(pcomm *p)
{
    if (p)
        free(atomic_load_explicit(&p->ranks, memory_order_relaxed));
    free(p);
}

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
    atomic_init(&p->idups, 0);
    atomic_init(&p->ranks, NULL);
    /* A handle the program freed without the shim seeing it (by a path it
     * does not intercept) may come back for a new communicator: the new
     * id replaces the old. */
    pcomm_free((pcomm *)msh_htab_remove(&pcs, p->h.key));
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

/* The k-th idup's id of the communicator known by id (see pcomm): a
 * 64-bit finalizer (splitmix64's) over the pair. */
static long long idup_cid(long long id, unsigned k)
{
    uint64_t x = (uint64_t)id + 0x9E3779B97F4A7C15ull * ((uint64_t)k + 1);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    x ^= x >> 31;
    return (long long)((x & ((1ull << 62) - 1)) | 1ull << 62);
}

int msh_part_comm_idup(MPI_Comm parent, MPI_Comm c)
{
    if (!cid_on || c == MPI_COMM_NULL)
        return MPI_SUCCESS;
    /* The parent stays while its idup is made (MPI forbids freeing it
     * meanwhile), and two idups on it never overlap. A parent without an
     * id (from MPI_Comm_connect, ...) gives none: partitioned init on its
     * idups fails as on it. */
    pcomm *p = (pcomm *)msh_htab_lookup(&pcs, msh_handle_key(&parent, sizeof parent));
    if (!p)
        return MPI_SUCCESS;
    unsigned k = atomic_fetch_add_explicit(&p->idups, 1, memory_order_relaxed);
    return msh_part_cid_put(c, idup_cid(p->id, k));
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

/* c's world ranks, made by the first caller (a thread that loses the race
 * to publish them frees its own); NULL if the host refused a query or
 * memory ran out. */
static const pranks *ranks_of(pcomm *p, MPI_Comm c)
{
    pranks *pr = atomic_load_explicit(&p->ranks, memory_order_acquire);
    if (pr)
        return pr;
    int inter = 0, n = 0, *in = NULL;
    MPI_Group g = MPI_GROUP_NULL, w = MPI_GROUP_NULL;
    int locked = msh_host_enter();
    int rc = PMPI_Comm_test_inter(c, &inter);
    if (rc == MPI_SUCCESS)
        rc = inter ? PMPI_Comm_remote_group(c, &g) : PMPI_Comm_group(c, &g);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Group_size(g, &n);
    if (rc == MPI_SUCCESS)
        rc = PMPI_Comm_group(MPI_COMM_WORLD, &w);
    if (rc == MPI_SUCCESS) {
        pr = malloc(sizeof *pr + (size_t)n * sizeof pr->world[0]);
        in = malloc((size_t)(n ? n : 1) * sizeof *in);
        if (!pr || !in)
            rc = MPI_ERR_NO_MEM;
    }
    if (rc == MPI_SUCCESS) {
        pr->size = n;
        for (int i = 0; i < n; i++)
            in[i] = i;
        rc = n ? PMPI_Group_translate_ranks(g, n, in, w, pr->world) : MPI_SUCCESS;
    }
    if (g != MPI_GROUP_NULL)
        PMPI_Group_free(&g);
    if (w != MPI_GROUP_NULL)
        PMPI_Group_free(&w);
    msh_host_exit(locked);
    free(in);
    if (rc != MPI_SUCCESS) {
        free(pr);
        return NULL;
    }
    pranks *none = NULL;
    if (!atomic_compare_exchange_strong_explicit(&p->ranks, &none, pr, memory_order_acq_rel,
                                                 memory_order_acquire)) {
        free(pr);
        pr = none;
    }
    return pr;
}

int msh_part_comm_peer(MPI_Comm c, int peer, long long *id, int *wpeer)
{
    /* As in msh_part_cid_find: c outlives the call. */
    pcomm *p = (pcomm *)msh_htab_lookup(&pcs, msh_handle_key(&c, sizeof c));
    if (!p) {
        msh_log("partitioned init on a communicator the shim did not see created (from MPI_Comm_connect, "
                "MPI_Comm_accept, MPI_Comm_spawn or MPI_Comm_join, or an idup of one?)");
        return MPI_ERR_COMM;
    }
    *id = p->id;
    const pranks *pr = ranks_of(p, c);
    if (!pr)
        return MPI_ERR_COMM;
    *wpeer = MPI_PROC_NULL;
    if (peer == MPI_PROC_NULL)
        return MPI_SUCCESS;
    if (peer < 0 || peer >= pr->size)
        return MPI_ERR_RANK;
    if (pr->world[peer] == MPI_UNDEFINED) {
        msh_log("partitioned init: rank %d of this communicator is not in MPI_COMM_WORLD (dynamic processes are not supported)",
                peer);
        return MPI_ERR_COMM;
    }
    *wpeer = pr->world[peer];
    return MPI_SUCCESS;
}

void msh_part_comm_del(MPI_Comm c)
{
    /* Channels keep their id and world ranks: nothing else to undo, also
     * for channels still alive on c. */
    pcomm_free((pcomm *)msh_htab_remove(&pcs, msh_handle_key(&c, sizeof c)));
}

int msh_part_cid_init(void)
{
    cid_on = 1;
    int rc = msh_part_cid_put(MPI_COMM_WORLD, MSH_PART_CID_WORLD);
    return rc == MPI_SUCCESS ? msh_part_cid_put(MPI_COMM_SELF, MSH_PART_CID_SELF) : rc;
}

static void drop_entry(msh_hent *e, void *arg)
{
    (void)arg;
    pcomm_free((pcomm *)e);
}

void msh_part_cid_fini(void)
{
    cid_on = 0;
    msh_htab_drain(&pcs, drop_entry, NULL);
}
