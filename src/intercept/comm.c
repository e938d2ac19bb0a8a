/* Communicator constructors and destructors: the side table (src/vci/comm.c)
 * learns of a communicator inside the user's own collective call, and its
 * duplicates (non-default maps only) are made and freed there too (design
 * brief rule 4); the partitioned layer agrees on the communicator's id
 * there with one collective over the new communicator, and makes no
 * duplicates. With a serialized host, these host calls take the host lock
 * like every other. */
#include "intercept/passthru.h"
#include "intercept/shim.h"
#include "partitioned/cid.h"
#include "partitioned/part.h"

/* After a successful constructor: record the new communicator (or, where it
 * is MPI_COMM_NULL, take part in making its twins). */
static int registered(int rc, MPI_Comm newcomm, MPI_Comm parent, MPI_Info info, msh_comm_twin_fn twin,
                      const void *arg)
{
    if (rc != MPI_SUCCESS)
        return rc;
    int r = msh_comm_register(newcomm, parent, info, twin, arg);
    if (r == MPI_SUCCESS && newcomm != MPI_COMM_NULL)
        r = msh_part_comm_add(newcomm);
    return r == MPI_SUCCESS ? rc : msh_comm_error(parent != MPI_COMM_NULL ? parent : MPI_COMM_WORLD, r);
}

/* Without the runtime: only the partitioned layer's id. */
static int part_registered(int rc, MPI_Comm newcomm)
{
    if (rc != MPI_SUCCESS || newcomm == MPI_COMM_NULL)
        return rc;
    int r = msh_part_comm_add(newcomm);
    return r == MPI_SUCCESS ? rc : msh_comm_error(newcomm, r);
}

/* A constructor's body: the host call, then the bookkeeping, inside the
 * user's collective call, with the lanes read meanwhile (the host call
 * waits for the other members, who may need this process's lane traffic
 * first: sync/assist.h); parent:
 * the communicator whose hints the new one inherits (only MPI_Comm_dup's);
 * info: the hints given with the call; twin(arg): how its duplicates are
 * made (vci/comm.h). */
#define MSH_CTOR_TWIN(call, out, parent, info, twin, arg)            \
    do {                                                            \
        if (!msh_on()) {                                            \
            int rc0 = (call);                                       \
            return part_registered(rc0, *(out));                    \
        }                                                           \
        MSH_WAIT_ENTER();                                           \
        int rc = (call);                                            \
        rc = registered(rc, *(out), (parent), (info), (twin), (arg)); \
        MSH_WAIT_EXIT();                                            \
        return rc;                                                  \
    } while (0)

/* Most constructors are collective over one communicator, scope: their
 * twins are MPI_Comm_create over it with the new communicator's group
 * (MPI_GROUP_EMPTY where the new one is MPI_COMM_NULL, which only an
 * intracommunicator scope allows; the constructors that use this on an
 * intercommunicator, the dups, leave nobody out). */
typedef struct {
    MPI_Comm scope;
    const MPI_Comm *made;
} create_twin_arg;

static int create_twin(const void *arg, MPI_Comm *out)
{
    const create_twin_arg *a = arg;
    return msh_comm_congruent(a->scope, *a->made, out);
}

#define MSH_CTOR(scope, call, out, parent, info)                          \
    do {                                                                  \
        create_twin_arg ta_ = { (scope), (out) };                         \
        MSH_CTOR_TWIN(call, out, parent, info, create_twin, &ta_);        \
    } while (0)

MSH_EXPORT int MPI_Comm_dup(MPI_Comm comm, MPI_Comm *newcomm)
{
    MSH_CTOR(comm, PMPI_Comm_dup(comm, newcomm), newcomm, comm, MPI_INFO_NULL);
}

/* dup_with_info replaces the parent's hints with info's. */
MSH_EXPORT int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm)
{
    MSH_CTOR(comm, PMPI_Comm_dup_with_info(comm, info, newcomm), newcomm, MPI_COMM_NULL, info);
}


MSH_EXPORT int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm)
{
    MSH_CTOR(comm, PMPI_Comm_split_type(comm, split_type, key, info, newcomm), newcomm, MPI_COMM_NULL, info);
}

/* The constructors whose twins cannot be MPI_Comm_create over one scope
 * repeat themselves with the same arguments, which gives the same groups
 * in the same order: MPI_Comm_split and MPI_Comm_create (see theirs),
 * MPI_Comm_create_group (collective over the group only) and the
 * intercommunicator constructors, which make what MPI_Comm_create over
 * their input cannot. */
typedef struct {
    MPI_Comm comm;
    int color, key;
} split_arg;

/* Not MPI_Comm_create: on an intercommunicator its group must be the same
 * on every process of a side, which a split's colors are not. */
static int split_twin(const void *arg, MPI_Comm *out)
{
    const split_arg *a = arg;
    return PMPI_Comm_split(a->comm, a->color, a->key, out);
}

MSH_EXPORT int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm *newcomm)
{
    split_arg a = { comm, color, key };
    MSH_CTOR_TWIN(PMPI_Comm_split(comm, color, key, newcomm), newcomm, MPI_COMM_NULL, MPI_INFO_NULL, split_twin,
                  &a);
}

/* Again, not with the new communicator's group: on an intercommunicator
 * the processes left out would pass MPI_GROUP_EMPTY where their side's
 * members pass the group, and Open MPI 4.1 hangs (intercomm.c). */
typedef struct {
    MPI_Comm comm;
    MPI_Group group;
} create_arg;

/* Whether group has members outside comm's (local) group, which makes
 * MPI_Comm_create and MPI_Comm_create_group erroneous. MPICH refuses it in
 * MPI_Comm_create with MPI_ERR_GROUP; Open MPI 4.1 makes a communicator whose
 * outside members never join, both hosts crash in MPI_Comm_create_group;
 * and the shim's own agreement on a new communicator, collective over its
 * members, would wait for them forever. So the shim refuses it as MPICH
 * does, before the host sees the call: every member passes the same group,
 * so all refuse. Only for a communicator the shim knows (a valid handle:
 * the host reports a bad one in its own call, through its own handler) and
 * a group other than the null and empty ones. */
static int group_outside(MPI_Comm comm, MPI_Group group)
{
    long long id;
    int known = msh_part_cid_find(comm, &id) || (msh_on() && msh_comm_lookup(comm) != NULL);
    if (!known || group == MPI_GROUP_NULL || group == MPI_GROUP_EMPTY)
        return 0;
    MPI_Group local, extra;
    int n = 0;
    if (PMPI_Comm_group(comm, &local) != MPI_SUCCESS)
        return 0;
    if (PMPI_Group_difference(group, local, &extra) == MPI_SUCCESS) {
        PMPI_Group_size(extra, &n);
        PMPI_Group_free(&extra);
    }
    PMPI_Group_free(&local);
    return n > 0;
}

/* The refusal, through comm's handler, or MPI_SUCCESS to go on. */
static int refuse_outside(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
    if (MSH_LIKELY(!group_outside(comm, group)))
        return MPI_SUCCESS;
    if (newcomm)
        *newcomm = MPI_COMM_NULL;
    return msh_comm_error(comm, MPI_ERR_GROUP);
}

static int create_again(const void *arg, MPI_Comm *out)
{
    const create_arg *a = arg;
    return PMPI_Comm_create(a->comm, a->group, out);
}

MSH_EXPORT int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm)
{
#if !defined(MPICH) /* MPICH refuses it itself */
    int refused = refuse_outside(comm, group, newcomm);
    if (refused != MPI_SUCCESS)
        return refused;
#endif
    create_arg a = { comm, group };
    MSH_CTOR_TWIN(PMPI_Comm_create(comm, group, newcomm), newcomm, MPI_COMM_NULL, MPI_INFO_NULL, create_again,
                  &a);
}

typedef struct {
    MPI_Comm comm;
    MPI_Group group;
    int tag;
} create_group_arg;

static int create_group_twin(const void *arg, MPI_Comm *out)
{
    const create_group_arg *a = arg;
    return PMPI_Comm_create_group(a->comm, a->group, a->tag, out);
}

MSH_EXPORT int MPI_Comm_create_group(MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm)
{
    int refused = refuse_outside(comm, group, newcomm);
    if (refused != MPI_SUCCESS)
        return refused;
    create_group_arg a = { comm, group, tag };
    MSH_CTOR_TWIN(PMPI_Comm_create_group(comm, group, tag, newcomm), newcomm, MPI_COMM_NULL,
                  MPI_INFO_NULL, create_group_twin, &a);
}

typedef struct {
    MPI_Comm local_comm, peer_comm;
    int local_leader, remote_leader, tag;
} intercomm_create_arg;

static int intercomm_create_twin(const void *arg, MPI_Comm *out)
{
    const intercomm_create_arg *a = arg;
    return PMPI_Intercomm_create(a->local_comm, a->local_leader, a->peer_comm, a->remote_leader, a->tag, out);
}

MSH_EXPORT int MPI_Intercomm_create(MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader,
                                   int tag, MPI_Comm *newintercomm)
{
    intercomm_create_arg a = { local_comm, peer_comm, local_leader, remote_leader, tag };
    MSH_CTOR_TWIN(PMPI_Intercomm_create(local_comm, local_leader, peer_comm, remote_leader, tag, newintercomm),
                  newintercomm, MPI_COMM_NULL, MPI_INFO_NULL, intercomm_create_twin, &a);
}

typedef struct {
    MPI_Comm intercomm;
    int high;
} merge_arg;

static int merge_twin(const void *arg, MPI_Comm *out)
{
    const merge_arg *a = arg;
    return PMPI_Intercomm_merge(a->intercomm, a->high, out);
}

MSH_EXPORT int MPI_Intercomm_merge(MPI_Comm intercomm, int high, MPI_Comm *newintracomm)
{
    merge_arg a = { intercomm, high };
    MSH_CTOR_TWIN(PMPI_Intercomm_merge(intercomm, high, newintracomm), newintracomm, MPI_COMM_NULL,
                  MPI_INFO_NULL, merge_twin, &a);
}

/* MPI_Comm_idup: the host completes it later; the runtime does not
 * register the new communicator (no internal duplicate can be made inside
 * a nonblocking constructor: vci/comm.h), and the partitioned layer gives
 * it an id at the call, computed without communication (cid.c). Both hosts
 * write the new handle at the call; one that left it for the completion
 * would leave MPI_COMM_NULL here, and no id. */
static int idup_registered(int rc, MPI_Comm parent, MPI_Comm newcomm)
{
    if (rc != MPI_SUCCESS)
        return rc;
    int r = msh_part_comm_idup(parent, newcomm);
    return r == MPI_SUCCESS ? rc : msh_comm_error(parent, r);
}

#define MSH_IDUP(call, parent, out)                                  \
    do {                                                            \
        *(out) = MPI_COMM_NULL;                                     \
        int rc;                                                     \
        if (MSH_PASS_BARE()) {                                      \
            rc = (call);                                            \
        } else {                                                    \
            MSH_PASS_ENTER();                                       \
            rc = (call);                                            \
            MSH_PASS_EXIT();                                        \
        }                                                           \
        return idup_registered(rc, (parent), *(out));               \
    } while (0)

MSH_EXPORT int MPI_Comm_idup(MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request)
{
    MSH_IDUP(PMPI_Comm_idup(comm, newcomm, request), comm, newcomm);
}

#if MPI_VERSION >= 4
MSH_EXPORT int MPI_Comm_idup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request)
{
    MSH_IDUP(PMPI_Comm_idup_with_info(comm, info, newcomm, request), comm, newcomm);
}
#endif

#if MPI_VERSION >= 4
/* The constructors from groups (MPI-4, also for sessions): no parent
 * communicator, so the runtime does not register them (they carry their
 * traffic on themselves, vci/comm.h); the partitioned layer's id only,
 * agreed over the new communicator inside the call (nothing while the
 * layer is off, as in a program that never calls MPI_Init). */
#define MSH_CTOR_FROM_GROUPS(call, out)                              \
    do {                                                            \
        MSH_WAIT_ENTER();                                           \
        int rc = (call);                                            \
        rc = part_registered(rc, *(out));                           \
        MSH_WAIT_EXIT();                                            \
        return rc;                                                  \
    } while (0)

MSH_EXPORT int MPI_Comm_create_from_group(MPI_Group group, const char *stringtag, MPI_Info info,
                                          MPI_Errhandler errhandler, MPI_Comm *newcomm)
{
    MSH_CTOR_FROM_GROUPS(PMPI_Comm_create_from_group(group, stringtag, info, errhandler, newcomm), newcomm);
}

MSH_EXPORT int MPI_Intercomm_create_from_groups(MPI_Group local_group, int local_leader, MPI_Group remote_group,
                                                int remote_leader, const char *stringtag, MPI_Info info,
                                                MPI_Errhandler errhandler, MPI_Comm *newintercomm)
{
    MSH_CTOR_FROM_GROUPS(PMPI_Intercomm_create_from_groups(local_group, local_leader, remote_group, remote_leader,
                                                           stringtag, info, errhandler, newintercomm),
                         newintercomm);
}
#endif

/* MPI_Comm_free and MPI_Comm_disconnect (which also waits for the
 * communicator's pending traffic): the side tables' entries and any
 * duplicates go first, inside the user's collective call, or they would
 * outlive the communicator (and hold the host's context ids). Freeing
 * MPI_COMM_WORLD/SELF is an error the host reports; their entries stay. */
static int release(MPI_Comm *comm, int (*host_release)(MPI_Comm *))
{
    int user = *comm != MPI_COMM_WORLD && *comm != MPI_COMM_SELF && *comm != MPI_COMM_NULL;
    if (user)
        msh_part_comm_del(*comm);
    if (!msh_on())
        return host_release(comm);
    MSH_PASS_ENTER();
    if (user)
        msh_comm_unregister(*comm);
    int rc = host_release(comm);
    MSH_PASS_EXIT();
    if (user) /* after the host lock (serialized hosts): VCI locks come first */
        msh_progress_reclaim_comms();
    return rc;
}

MSH_EXPORT int MPI_Comm_free(MPI_Comm *comm) { return release(comm, PMPI_Comm_free); }

MSH_EXPORT int MPI_Comm_disconnect(MPI_Comm *comm) { return release(comm, PMPI_Comm_disconnect); }

MSH_EXPORT int MPI_Comm_set_info(MPI_Comm comm, MPI_Info info)
{
    if (!msh_on())
        return PMPI_Comm_set_info(comm, info);
    MSH_PASS_ENTER();
    int rc = PMPI_Comm_set_info(comm, info);
    if (rc == MPI_SUCCESS)
        msh_comm_set_info(comm, info);
    MSH_PASS_EXIT();
    return rc;
}

MSH_EXPORT int MPI_Comm_get_info(MPI_Comm comm, MPI_Info *info_used)
{
    if (!msh_on())
        return PMPI_Comm_get_info(comm, info_used);
    MSH_LOCAL_ENTER(); /* a query: nothing queued to wait for */
    int rc = PMPI_Comm_get_info(comm, info_used);
    if (rc == MPI_SUCCESS)
        msh_comm_add_info(comm, *info_used); /* the host may drop keys it does not know */
    MSH_LOCAL_EXIT();
    return rc;
}

MSH_EXPORT int MPI_Comm_set_errhandler(MPI_Comm comm, MPI_Errhandler errhandler)
{
    if (!msh_on())
        return PMPI_Comm_set_errhandler(comm, errhandler);
    MSH_PASS_ENTER();
    int rc = PMPI_Comm_set_errhandler(comm, errhandler);
    if (rc == MPI_SUCCESS)
        msh_comm_set_errhandler(comm, errhandler);
    MSH_PASS_EXIT();
    return rc;
}

/* Topology constructors: the same bookkeeping as the others, so that their
 * communicators get duplicates (VCIs) and a partitioned id too. */
MSH_EXPORT int MPI_Cart_create(MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder,
                               MPI_Comm *comm_cart)
{
    MSH_CTOR(comm_old, PMPI_Cart_create(comm_old, ndims, dims, periods, reorder, comm_cart), comm_cart, MPI_COMM_NULL, MPI_INFO_NULL);
}

MSH_EXPORT int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm)
{
    MSH_CTOR(comm, PMPI_Cart_sub(comm, remain_dims, newcomm), newcomm, MPI_COMM_NULL, MPI_INFO_NULL);
}

MSH_EXPORT int MPI_Graph_create(MPI_Comm comm_old, int nnodes, const int indx[], const int edges[], int reorder,
                                MPI_Comm *comm_graph)
{
    MSH_CTOR(comm_old, PMPI_Graph_create(comm_old, nnodes, indx, edges, reorder, comm_graph), comm_graph, MPI_COMM_NULL, MPI_INFO_NULL);
}

MSH_EXPORT int MPI_Dist_graph_create(MPI_Comm comm_old, int n, const int sources[], const int degrees[],
                                     const int destinations[], const int weights[], MPI_Info info, int reorder,
                                     MPI_Comm *comm_dist_graph)
{
    MSH_CTOR(comm_old, PMPI_Dist_graph_create(comm_old, n, sources, degrees, destinations, weights, info, reorder,
                                    comm_dist_graph),
             comm_dist_graph, MPI_COMM_NULL, info);
}

MSH_EXPORT int MPI_Dist_graph_create_adjacent(MPI_Comm comm_old, int indegree, const int sources[],
                                              const int sourceweights[], int outdegree, const int destinations[],
                                              const int destweights[], MPI_Info info, int reorder,
                                              MPI_Comm *comm_dist_graph)
{
    MSH_CTOR(comm_old, PMPI_Dist_graph_create_adjacent(comm_old, indegree, sources, sourceweights, outdegree, destinations,
                                             destweights, info, reorder, comm_dist_graph),
             comm_dist_graph, MPI_COMM_NULL, info);
}
