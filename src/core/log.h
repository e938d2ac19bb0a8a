/* Messages to the user: one line each, prefixed "mpishim: ". */
#ifndef MSH_CORE_LOG_H
#define MSH_CORE_LOG_H

#include <stdarg.h>
#include <stddef.h>

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

/* Write in[0..inlen) (stopping early at a NUL) into out as C-style
 * escapes: \n \t \r \\ \' and \xNN for other control bytes; bytes >= 0x80
 * (UTF-8) are kept. For values and names from the environment echoed in a
 * message, so that they cannot end its line. Always NUL-terminates (outlen
 * > 0), never writes half an escape; returns the input bytes consumed. */
size_t msh_escape(char *out, size_t outlen, const char *in, size_t inlen);

#endif
