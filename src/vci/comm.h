/* Communicator side table and VCI mapping (Zambre, Chandramowliswharan and
 * Balaji, ICS 2020, on mapping communicators to VCIs and why wildcards
 * funnel receives; MPICH ch4's "implicit" hashing as the reference).
 *
 * Every user communicator the shim saw being created has an entry: its home
 * VCI, its assertions (MPISHIM_ASSERT plus mpi_assert_* info keys) and, when
 * the mapping policy spreads its traffic over K ways, K internal duplicates
 * made inside the user's constructor call (rule 4). With a lane open the
 * ways are the VCIs' endpoints themselves (VCI i of one process reaches VCI
 * i of every other, and the lane matches on the communicator's own id), so
 * no duplicate is made: a constructor runs no host constructor beyond the
 * program's, and a communicator the lane does not carry is not spread.
 * Lookups are lock-free; inserts and removals take a mutex and happen only
 * in collective constructor and destructor calls.
 *
 * Mapping (MPISHIM_MAP), each spreading term used only where a hint rules
 * out the wildcard that would defeat it (rule 1):
 *   comm    all traffic of a communicator on the communicator itself, on its
 *           home VCI (always legal; communicators spread over the pool)
 *   tag     duplicate = tag mod K                      (needs no_any_tag)
 *   peer    duplicate = hash(sender, receiver) mod K   (needs no_any_source)
 *   hash    hash of the terms the hints allow (tag and/or peer pair)
 *   thread  the calling thread's own VCI for locks, requests and progress;
 *           duplicate as for hash (needs allow_overtaking and no wildcards);
 *           on a lane, whose VCI must be the same on both sides, as hash
 * Both sides compute the same way: the sender from (me, dest, tag), the
 * receiver from (source, me, tag). */
#ifndef MSH_VCI_COMM_H
#define MSH_VCI_COMM_H

#include <mpi.h>
#include <stdint.h>
#include <string.h>

#include "core/config.h"
#include "core/htab.h"
#include "vci/vci.h"

typedef struct msh_comm {
    msh_hent h;              /* side-table key: the handle */
    MPI_Comm user;
    int vci;                 /* home VCI */
    msh_map_policy map;      /* effective mapping for this communicator */
    unsigned asserts;        /* effective MSH_ASSERT_* (environment | info) */
    unsigned info_asserts;   /* the part that came from info keys */
    int rank;                /* this process's rank in the (local) group */
    int size;                /* size of the (local) group */
    int inter;               /* an intercommunicator */
    int nways;               /* ways its traffic spreads over (0: none, all on the home VCI) */
    int ndups;               /* nways without a lane, 0 on a lane (the VCIs are the ways) */
    int gated;               /* counted in msh_comm_gate */
    MPI_Comm *dups;          /* dup i is progressed on VCI i mod pool size */
    const void *tp_rec;      /* the transport's record of user (msh_tp_comm_record) */
    /* MPISHIM_COLL=auto (intercept/wrap.h): the blocking collectives made
     * in the host's form so far, and whether they take the nonblocking form
     * from now on. Written only inside a blocking collective on this
     * communicator, which the program orders with every other one on it:
     * relaxed. Written only while in the host's form, so the point-to-point
     * posts that read this entry share its line with no writer after. */
    _Atomic unsigned coll_calls;
    _Atomic int coll_nb;
} msh_comm;

/* Live entries that spread over duplicates or reject a wildcard, plus 1 when
 * MPISHIM_ASSERT rejects one for every communicator, plus 1 with
 * MPISHIM_STATS=1 (every request must be a counted shim request). While it is 0, every
 * route is the communicator itself and no wildcard is refused, so the solo
 * path needs no lookup. Relaxed: it changes inside collective constructors,
 * MPI_Comm_set_info and MPI_Comm_free, which the program orders before any
 * use of the communicator by another thread. */
extern _Atomic int msh_comm_gate;
static inline int msh_comm_plain(void)
{
    return atomic_load_explicit(&msh_comm_gate, memory_order_relaxed) == 0;
}
void msh_comm_init(void); /* at runtime start, before the first register */

/* The entry of a communicator, or NULL (created by a call the shim does not
 * track, or not a communicator). Lock-free; inline, since every
 * point-to-point post looks its communicator up, and through the calling
 * thread's memo of its last one (htab.h). */
extern msh_htab msh_comm_table;
extern MSH_TLS msh_htab_memo msh_comm_memo;
static inline msh_comm *msh_comm_lookup(MPI_Comm c)
{
    return (msh_comm *)msh_htab_lookup_memo(&msh_comm_table, msh_handle_key(&c, sizeof c), &msh_comm_memo);
}

/* Makes one more communicator congruent with the one the user's constructor
 * just made (same group, same ranks, MPI_COMM_NULL where that one is) by a
 * host call collective over the same processes as the user's call. */
typedef int (*msh_comm_twin_fn)(const void *arg, MPI_Comm *out);

/* Record a communicator just created by the user's collective call (c may be
 * MPI_COMM_NULL on processes the constructor left out).
 * parent: the communicator it was derived from (its info assertions are
 * inherited, MPI-4 sec. 7.4.2), or MPI_COMM_NULL; info: the constructor's
 * info argument or MPI_INFO_NULL. When the policy spreads, makes the
 * duplicates with twin(arg), on every process the user's call was
 * collective over, c or not: never a constructor over c itself, whose
 * group may differ from the call's (Open MPI 4.1 hangs when threads make
 * communicators over different groups at once, tests/mpi/comm_threads.c),
 * and never MPI_Comm_dup, which would run the user's attribute copy
 * callbacks again (tests/mpi/comm_attr.c). Returns MPI_SUCCESS or an
 * error code. */
int msh_comm_register(MPI_Comm c, MPI_Comm parent, MPI_Info info, msh_comm_twin_fn twin, const void *arg);

/* A communicator congruent with like, made by MPI_Comm_create over scope
 * (collective over scope, which contains like's group; like may be
 * MPI_COMM_NULL, then *out is too), with like's error handler: no
 * attributes are copied. */
int msh_comm_congruent(MPI_Comm scope, MPI_Comm like, MPI_Comm *out);

/* A twin function for a communicator made outside any constructor the shim
 * sees (MPI_COMM_WORLD, MPI_COMM_SELF): arg points to it, and it is its own
 * scope. */
int msh_comm_twin_self(const void *arg, MPI_Comm *out);

/* Forget c, freeing its duplicates (collective over c, called from
 * MPI_Comm_free before the host frees c). */
void msh_comm_unregister(MPI_Comm c);

/* Free every entry (MPI_Finalize); returns how many user communicators
 * were still registered (not freed by the program), world/self excluded. */
int msh_comm_fini(void);

/* Assertions named by info keys in info (MPI_INFO_NULL allowed). */
unsigned msh_info_asserts(MPI_Info info);

/* Update the assertions of c from MPI_Comm_set_info (mapping stays). */
void msh_comm_set_info(MPI_Comm c, MPI_Info info);

/* Add the recorded mpi_assert_* keys to info (MPI_Comm_get_info). */
void msh_comm_add_info(MPI_Comm c, MPI_Info info);

/* Mirror an error handler onto the duplicates. */
void msh_comm_set_errhandler(MPI_Comm c, MPI_Errhandler eh);

/* ------------------------------------------------------------ routing */

typedef struct msh_route {
    msh_vci *vci;   /* whose lock, pending set and cache to use */
    MPI_Comm comm;  /* host communicator the operation goes to */
} msh_route;

extern MSH_TLS int msh_thread_vci;
int msh_thread_vci_assign(void);

static inline uint32_t msh_handle_hash(MPI_Comm c) { return msh_key_hash(msh_handle_key(&c, sizeof c)); }

/* The mapping a communicator gets: want (MPISHIM_MAP) where asserts make
 * it legal, else the nearest that is (rule 1). Pure, so that
 * tests/unit/test_route.c checks the same rule msh_comm_register applies. */
static inline msh_map_policy msh_map_effective(msh_map_policy want, unsigned asserts)
{
    int tag_ok = !!(asserts & MSH_ASSERT_NO_ANY_TAG);
    int src_ok = !!(asserts & MSH_ASSERT_NO_ANY_SOURCE);
    switch (want) {
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

/* The error a receive's wildcard gets under asserts (MPI_ERR_RANK,
 * MPI_ERR_TAG), or MPI_SUCCESS when it is allowed. */
static inline int msh_wildcard_refused(unsigned asserts, int source, int tag)
{
    if (MSH_UNLIKELY(source == MPI_ANY_SOURCE && (asserts & MSH_ASSERT_NO_ANY_SOURCE)))
        return MPI_ERR_RANK;
    if (MSH_UNLIKELY(tag == MPI_ANY_TAG && (asserts & MSH_ASSERT_NO_ANY_TAG)))
        return MPI_ERR_TAG;
    return MPI_SUCCESS;
}

/* Route of an operation from rank src to rank dst with tag on c, whose
 * entry is mc (may be NULL). Wildcards must have been rejected already
 * where the communicator spreads. The duplicate (on a lane: the VCI)
 * depends only on the map, the assertions and (src, dst, tag), which both
 * sides agree on; never on this process's VCIs or thread (test_route.c). */
void msh_route_spread(MPI_Comm c, const msh_comm *mc, int src, int dst, int tag, msh_route *rt);
static inline void msh_route_of(MPI_Comm c, const msh_comm *mc, int src, int dst, int tag, msh_route *rt)
{
    if (MSH_LIKELY(mc && mc->nways == 0)) {
        rt->vci = msh_vci_get(mc->vci);
        rt->comm = c;
        return;
    }
    msh_route_spread(c, mc, src, dst, tag, rt);
}

/* The two sides of one route, so that a caller cannot swap source and
 * destination: a send from this process to dest, and a receive (or probe)
 * here from source. Both use this process's rank in c (0 when c is not
 * known). */
static inline void msh_route_send(MPI_Comm c, const msh_comm *mc, int dest, int tag, msh_route *rt)
{
    msh_route_of(c, mc, mc ? mc->rank : 0, dest, tag, rt);
}

static inline void msh_route_recv(MPI_Comm c, const msh_comm *mc, int source, int tag, msh_route *rt)
{
    msh_route_of(c, mc, source, mc ? mc->rank : 0, tag, rt);
}

#endif
