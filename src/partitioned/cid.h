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
void msh_part_cid_fini(void);

#endif
