/* Process-wide state of the shim: set up in MPI_Init*, torn down in
 * MPI_Finalize. */
#ifndef MSH_CORE_RUNTIME_H
#define MSH_CORE_RUNTIME_H

#include <stdatomic.h>

typedef enum {
    MSH_STATE_UNINIT = 0, /* before MPI_Init* */
    MSH_STATE_ACTIVE,     /* intercepting */
    MSH_STATE_DISABLED,   /* MPISHIM_DISABLE=1: pure pass-through */
    MSH_STATE_FINALIZED,
} msh_state;

typedef struct msh_runtime {
    _Atomic int state;     /* msh_state */
    int thread_requested;  /* what the program asked for */
    int thread_provided;   /* what the host gave */
    int world_rank;
    int world_size;
} msh_runtime;

extern msh_runtime msh_rt;

/* Parse the configuration once (idempotent, thread-safe). Exits the process
 * with a one-line message on a malformed MPISHIM_* value. */
void msh_runtime_configure(void);

/* Stop with a clear message if the process holds two MPI libraries (a shim
 * built for one host preloaded into a program of the other). */
void msh_runtime_check_host(void);

#endif
