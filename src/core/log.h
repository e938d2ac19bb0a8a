/* Messages to the user: one line each, prefixed "mpishim: ". */
#ifndef MSH_CORE_LOG_H
#define MSH_CORE_LOG_H

#include <stdarg.h>

/* Rank of this process in the job as the launcher told it through the
 * environment (Open MPI, MPICH/Hydra, PMIx), or -1 if unknown. Usable
 * before MPI_Init, which is when configuration errors are found. */
int msh_launch_rank(void);

/* Write "mpishim: <msg>\n" to stderr in one write() so lines from several
 * ranks do not interleave. */
void msh_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Like msh_log, but only from launch rank 0 (or when the rank is unknown):
 * for messages every rank would print identically. */
void msh_log_once(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
