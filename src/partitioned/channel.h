/* A partitioned channel's state, and what the parts of the partitioned
 * layer share (part.c: channels, rounds, Pready/Parrived; cid.c: the ids of
 * communicators; dispatch.c: the header dispatcher). Internal to
 * src/partitioned. */
#ifndef MSH_PARTITIONED_CHANNEL_H
#define MSH_PARTITIONED_CHANNEL_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>

/* Header: magic, communicator id, user tag, sender partitions, partitions
 * per message, messages, total bytes, first data tag. */
enum { HDR_MAGIC = 0x50415254, HDR_N = 8 };

typedef struct part_msg {
    MPI_Request host;     /* persistent host request on datac */
    int nparts;           /* sender: user partitions in this message */
    _Atomic int ready;    /* sender: partitions readied this round */
    _Atomic int started;  /* PMPI_Start returned this round */
    _Atomic int done;     /* complete this round */
} part_msg;

typedef struct msh_part {
    int send;
    char *buf;
    int partitions;
    MPI_Count count;
    MPI_Datatype dtype;   /* a named type, or our duplicate: the user may free theirs */
    int own_type;         /* dtype is our duplicate */
    MPI_Count tsize;      /* packed bytes of one element */
    MPI_Aint extent;
    int contig;           /* elements densely packed: byte offsets address the buffer */
    int peer, tag;        /* as the user gave them */
    int wpeer;            /* peer's rank in MPI_COMM_WORLD (or MPI_PROC_NULL) */
    long long cid;        /* the user communicator's id */
    MPI_Comm comm;        /* the user's, for errors */
    /* The plan, from the sender's header. */
    int group;            /* sender partitions per message */
    int nmsg;
    MPI_Count msg_bytes;  /* bytes of every message but maybe the last */
    MPI_Count total;      /* bytes the sender sends */
    int tag_base;
    part_msg *msg;        /* nmsg of them: msg1, or allocated */
    part_msg msg1;
    long long *hdr;       /* sender: header buffer (leaked if never delivered) */
    MPI_Request hdr_req;  /* sender: the header's send */
    long long rhdr[HDR_N]; /* receiver: the header, filled by the dispatcher */
    _Atomic int hdr_in;   /* receiver: rhdr filled (release by the dispatcher) */
    struct msh_part *pnext; /* receiver: posted list, under disp_lock */
    int posted;           /* on the posted list; under disp_lock */
    _Atomic int setup;    /* receiver: header seen, receives created */
    int watched;          /* in the watch list; under watch_lock */
    int bg;               /* freed by the user while active: released when done */
    _Atomic unsigned char *readied; /* sender: per partition, this round */
    /* Receiver whose elements the sender's messages split (a type that is
     * not contiguous): messages land in a packed staging copy, and each
     * receive partition is unpacked into the buffer once all its bytes are
     * in. Parrived then reports unpacked partitions. */
    char *stage;
    _Atomic unsigned char *unpacked; /* per receive partition, this round */
    int nleft;            /* messages not done this round; under lock */
    int err;              /* first error of the round; under lock */
    MPI_Count received;   /* bytes received this round; under lock */
    pthread_mutex_t lock; /* setup and host tests of the messages */
} msh_part;

/* The two duplicates of MPI_COMM_WORLD all partitioned traffic uses, made
 * at init (part.c): one header per channel on the first, the channels'
 * internal messages on the second; peers are addressed by world rank. */
extern MPI_Comm msh_part_hdrc, msh_part_datac;

/* The header dispatcher (dispatch.c). */
void msh_part_disp_poll(void);           /* never blocks */
void msh_part_disp_post(msh_part *p);    /* receiver init: its header, now or later */
void msh_part_disp_unpost(msh_part *p);  /* receiver free */
void msh_part_disp_stop(void);           /* finalize */

#endif
