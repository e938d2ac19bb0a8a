/* Hooks around every generated pass-through wrapper (tools/wrapgen.py).
 *
 * They are the one place where a call the shim does not otherwise handle
 * could be serialized when the host runs below MPI_THREAD_MULTIPLE
 * (MPISHIM_HOST_THREAD=serialized). Serializing needs the core runtime's
 * nonblocking conversion first (a thread blocked in the host must not hold
 * the lock: design brief rule 2), so for now they expand to nothing and the
 * wrappers are exact forwards. */
#ifndef MSH_INTERCEPT_PASSTHRU_H
#define MSH_INTERCEPT_PASSTHRU_H

#define MSH_PASS_ENTER() ((void)0)
#define MSH_PASS_EXIT()  ((void)0)

/* Names of the generated wrappers, for mpishim-info. */
extern const char *const msh_passthru_names[];
extern const int msh_passthru_count;

#endif
