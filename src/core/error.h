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
int msh_error_comm_raise(MPI_Comm c, int err);
int msh_error_win_raise(MPI_Win w, int err);

/* rc, read by an empty asm: a call whose result passes through here is not
 * in tail position, so the compiler keeps the caller's frame. The report
 * of a fatal error names the program's call from the stack
 * (msh_error_user_call), and a wrapper that ends in "return raise(...)",
 * or in "return op(...)" whose op raises, would otherwise have jumped
 * away from its own frame (MPI_Pready, MPI_Cancel and MPI_Request_free
 * were reported as "an MPI call"). */
static inline int msh_error_keep_frame(int rc)
{
    __asm__ volatile("" : "+r"(rc));
    return rc;
}
#define msh_error_comm(c, err) msh_error_keep_frame(msh_error_comm_raise((c), (err)))
#define msh_error_win(w, err) msh_error_keep_frame(msh_error_win_raise((w), (err)))

/* The MPI function of this library that the program called, found on the
 * calling thread's stack (the outermost exported MPI_* or mpi_* frame of
 * this library), or NULL. Written into buf. Slow: for error paths only. */
const char *msh_error_user_call(char *buf, size_t len);

#endif
