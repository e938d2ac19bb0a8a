/* Errors the shim raises itself, through a handle's error handler. With a
 * fatal handler the host prints the call that raised it, which is then the
 * shim's MPI_*_call_errhandler, not the call the program made: so the shim
 * first prints one line naming the program's call. With any other handler
 * nothing is printed (the program gets the code; MPI_Error_string names the
 * error). */
#ifndef MSH_CORE_ERROR_H
#define MSH_CORE_ERROR_H

#include <mpi.h>
#include <stddef.h>

/* Report err through c's (w's) error handler and return it. */
int msh_error_comm(MPI_Comm c, int err);
int msh_error_win(MPI_Win w, int err);

/* The MPI function of this library that the program called, found on the
 * calling thread's stack (the outermost exported MPI_* or mpi_* frame of
 * this library), or NULL. Written into buf. Slow: for error paths only. */
const char *msh_error_user_call(char *buf, size_t len);

#endif
