/* mpishim public extension API.
 *
 * A program never needs this header to use mpishim (preloading or relinking
 * is enough); it is for programs and tools that want to ask the shim about
 * itself. Link with -lmpishim, or look the symbols up with dlsym() to stay
 * independent of it. */
#ifndef MPISHIM_H
#define MPISHIM_H

#include <mpi.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MPISHIM_VERSION "0.1.0"

/* 1 when the shim intercepts MPI calls in this process, 0 when it was loaded
 * but MPISHIM_DISABLE=1 made it a pure pass-through. Callable before MPI_Init. */
int mpishim_active(void);

/* 1 when the shim's runtime (VCIs, sync-object progress) handles this
 * process's calls: the program asked for MPI_THREAD_MULTIPLE and the shim
 * is not disabled. 0 before MPI_Init_thread and after MPI_Finalize. */
int mpishim_runtime(void);

/* The library's version string (MPISHIM_VERSION of the build). */
const char *mpishim_version(void);

/* Print the effective configuration (every MPISHIM_* variable, its value
 * and whether it came from the environment), one variable per line. */
void mpishim_print_config(FILE *out);

#ifdef __cplusplus
}
#endif

#endif
