/* mpishim public extension API.
 *
 * A program never needs this header to use mpishim (preloading or relinking
 * is enough); it is for programs and tools that want to ask the shim about
 * itself. Link with -lmpishim, or look the symbols up with dlsym() to stay
 * independent of it. */
#ifndef MPISHIM_H
#define MPISHIM_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPISHIM_VERSION "0.1.0"

/* 1 when the shim intercepts MPI calls in this process, 0 when it was loaded
 * but MPISHIM_DISABLE=1 made it a pure pass-through. Callable before MPI_Init. */
int mpishim_active(void);

/* 1 when the shim's runtime (VCIs, sync-object progress) handles this
 * process's calls: every rank of the job asked for MPI_THREAD_MULTIPLE and
 * the shim is not disabled. 0 before MPI_Init_thread and after
 * MPI_Finalize. */
int mpishim_runtime(void);

/* 1 when the shim's own partitioned layer serves MPI_Psend_init,
 * MPI_Precv_init and the calls on their requests in this process; 0 when
 * the host's own does (MPISHIM_PART=native, or auto with the runtime off,
 * on a host that has them), when the shim is disabled, or before MPI_Init
 * and after MPI_Finalize. */
int mpishim_part_layer(void);

/* 1 while the runtime is on and still on its solo fast path (no two threads
 * have yet been inside MPI at once, MPISHIM_SOLO): calls then go to the
 * host directly, blocking ones block in the host. 0 otherwise. */
int mpishim_solo(void);

/* The library's version string (MPISHIM_VERSION of the build). */
const char *mpishim_version(void);

/* Print the effective configuration (every MPISHIM_* variable, its value
 * and whether it came from the environment), one variable per line. */
void mpishim_print_config(FILE *out);

/* Print every MPI call this build of the shim defines and what it does
 * with it, one "MPI_X kind" line each, sorted by name. Kinds: pass (the
 * host's call, after the calling thread's queued posts; with a serialized
 * host, under its lock), local (the host's call, draining nothing: it
 * involves no message), direct (the host's call, nothing around it), waits
 * (the host's call, lanes read meanwhile), collective (a blocking
 * collective run as its nonblocking form and a shim wait), rma-data and
 * rma-acc (routed to an internal window), and the runtime's own calls: p2p,
 * completion, comm, init, part, window, hand. Callable at any time. */
void mpishim_print_calls(FILE *out);

/* The lane that carries this process's point-to-point messages outside the
 * host (MPISHIM_FABRIC): "ucx", or the libfabric provider ("shm",
 * "tcp;ofi_rxm", ...); NULL when none is open (off, the program did not
 * ask for MPI_THREAD_MULTIPLE, or a process could not open it). Valid
 * between MPI_Init_thread and MPI_Finalize. */
const char *mpishim_lane(void);

/* Bytes the shim's handle side tables (communicators, windows) hold now:
 * the current tables and replaced ones still in their grace period, and
 * what a lane keeps of each communicator (also of a freed one while
 * operations started on it are in flight). For leak checks; bounded by the
 * live communicators and windows, not by how many were ever created. */
size_t mpishim_table_bytes(void);

/* MPI-4 partitioned communication (MPI 4.0, chapter 4), final signatures.
 * A host mpi.h of MPI 3.x (Open MPI 4.1) lacks them: this header declares
 * them there, and libmpishim.so implements them on every host. With an
 * MPI-4 host the declarations come from mpi.h itself. */
#if !defined(MPI_VERSION) || MPI_VERSION < 4
#define MPISHIM_DECLARES_PARTITIONED 1
int MPI_Psend_init(const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int dest, int tag,
                   MPI_Comm comm, MPI_Info info, MPI_Request *request);
int MPI_Precv_init(void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int source, int tag,
                   MPI_Comm comm, MPI_Info info, MPI_Request *request);
int MPI_Pready(int partition, MPI_Request request);
int MPI_Pready_range(int partition_low, int partition_high, MPI_Request request);
int MPI_Pready_list(int length, const int array_of_partitions[], MPI_Request request);
int MPI_Parrived(MPI_Request request, int partition, int *flag);
#endif

#ifdef __cplusplus
}
#endif

#endif
