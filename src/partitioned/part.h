/* MPI-4 partitioned communication layered on persistent point-to-point
 * (after Worley et al., "Design of a Portable Implementation of Partitioned
 * Point-to-Point Communication Primitives", MPIPCL).
 *
 * A partitioned request is a shim request (kind MSH_KIND_PART) whose ext
 * points to a msh_part channel. All channels share two shim-private
 * duplicates of MPI_COMM_WORLD made at init: `hdrc` carries one small header
 * per channel (communicator id, user tag, plan), `datac` the channels'
 * internal messages, each a host persistent request fixed to one tag for
 * the channel's life; peers are addressed by world rank. No user receive
 * can match either. A user communicator is known by an id its members
 * agree on inside the user's constructor (one collective over the new
 * communicator; no hidden constructor). The receiver matches headers
 * itself: one wildcard receive on hdrc, dispatched to receive channels in
 * Precv_init order by (communicator id, world source, tag), so MPI's
 * non-overtaking rule holds per communicator.
 *
 * Init is local: the sender plans its messages (partitions aggregated to at
 * least MPISHIM_PART_MIN_BYTES), creates them at once and posts the header;
 * the receiver posts the header receive and creates its receives when the
 * header arrives, from whatever call progresses the request next.
 *
 * Works with the runtime on (MPI_THREAD_MULTIPLE programs) and off: the
 * completion calls take the shim path whenever a channel is alive. */
#ifndef MSH_PARTITIONED_PART_H
#define MSH_PARTITIONED_PART_H

#include <mpi.h>
#include <stdatomic.h>

#include "partitioned/cid.h"
#include "sync/request.h"

/* Number of live channels: completion calls look for shim requests while
 * it is non-zero even without the runtime. */
extern _Atomic int msh_part_nlive;

static inline int msh_part_any(void)
{
    return atomic_load_explicit(&msh_part_nlive, memory_order_relaxed) != 0;
}

/* Started receive channels whose header has not arrived yet. Until it does
 * their internal receives are not posted, and only the shim can post them:
 * MPI's progress rule then asks every blocking call of the process to move
 * them on (a rank waiting for its own partitioned send, or in an unrelated
 * MPI_Recv, while its peer waits for this receive). While this is non-zero,
 * calls that would block in the host poll instead and sweep. */
extern _Atomic int msh_part_nsetup;

static inline int msh_part_setup_pending(void)
{
    return atomic_load_explicit(&msh_part_nsetup, memory_order_relaxed) != 0;
}

/* Advance every watched channel once; never blocks (channels busy in
 * another thread are skipped). Returns the channels that finished setup. */
int msh_part_sweep(void);

static inline int msh_req_is_part(const msh_request *r)
{
    return r && r->kind == MSH_KIND_PART;
}

/* Whether the shim's own layer serves partitioned calls in this process
 * (else the host's, MPISHIM_PART=native on an MPI-4 host). */
int msh_part_layer_on(void);

/* Communicator ids (cid.h): agreed for every communicator a constructor
 * the shim intercepts returns (collective, inside that call), dropped in
 * Comm_free and Comm_disconnect. */
void msh_part_init(int runtime); /* after host init (runtime: the ranks agreed to start it): the
                                    * channels' duplicates, the predefined ids */
void msh_part_fini(void);  /* before host finalize */

/* MPI_Psend_init (send = 1) / MPI_Precv_init on the shim's layer. */
int msh_part_init_req(int send, void *buf, int partitions, MPI_Count count, MPI_Datatype dtype, int peer, int tag,
                      MPI_Comm comm, MPI_Info info, MPI_Request *handle);

/* Operations on a partitioned shim request r. Pready/Parrived and the
 * check return an error class without calling an error handler. */
int msh_part_pready(msh_request *r, int partition);
int msh_part_check_ready(msh_request *r, int partition);
int msh_part_parrived(msh_request *r, int partition, int *flag);
MPI_Comm msh_part_comm(msh_request *r);
int msh_part_start(msh_request *r);
/* Advance setup and data; 1 when r is complete (status in r->status).
 * blocking: wait for the channel's lock rather than skip when busy. */
int msh_part_progress(msh_request *r, int blocking);
/* Retire a complete round: status out, request inactive. */
int msh_part_retire(msh_request *r, MPI_Status *status);
int msh_part_free(msh_request *r, MPI_Request *handle);
int msh_part_cancel(msh_request *r);
/* Status of an inactive partitioned request. */
void msh_part_empty_status(MPI_Status *st);

/* The operations above as the request layer calls them (partitioned/request.c),
 * registered for MSH_KIND_PART at init. */
extern const msh_req_ops msh_part_req_ops;

#endif
