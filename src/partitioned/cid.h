/* Communicator ids for the partitioned layer (cid.c): a channel names its
 * communicator by an id every member agreed on when the communicator was
 * made, so that headers can be matched across processes. */
#ifndef MSH_PARTITIONED_CID_H
#define MSH_PARTITIONED_CID_H

#include <mpi.h>

enum { MSH_PART_CID_WORLD = 0, MSH_PART_CID_SELF = 1 };

/* Inside a user's communicator constructor, on the new communicator (the
 * shim's comm wrappers call it): its members agree on an id. Collective;
 * MPI_SUCCESS or the host's error. Nothing while the layer is off. */
int msh_part_comm_add(MPI_Comm c);
/* Inside MPI_Comm_idup(parent) on the new communicator c: its id,
 * computed by each member alone (no communication). Nothing while the
 * layer is off. */
int msh_part_comm_idup(MPI_Comm parent, MPI_Comm c);
/* When the program frees c. */
void msh_part_comm_del(MPI_Comm c);

int msh_part_cid_init(void); /* the layer serves partitioned calls: ids from now on */
int msh_part_cid_put(MPI_Comm c, long long id);
int msh_part_cid_find(MPI_Comm c, long long *id);
/* A partitioned init's communicator c and peer: c's id, and the peer's
 * rank in MPI_COMM_WORLD (MPI_PROC_NULL for MPI_PROC_NULL). MPI_SUCCESS,
 * MPI_ERR_RANK (out of range), or MPI_ERR_COMM (no id, a host query
 * failed, or the peer is not in MPI_COMM_WORLD; said in the log). */
int msh_part_comm_peer(MPI_Comm c, int peer, long long *id, int *wpeer);
void msh_part_cid_fini(void);

#endif
