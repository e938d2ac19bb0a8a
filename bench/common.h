/*
 * common.h - helpers the bench programs share (multirate.c, partitioned.c,
 * rma.c), so that each exists once.
 *
 * Header-only and static inline on purpose: every benchmark stays a single
 * source file that bench/Makefile compiles with one MPICC line per host
 * (no object to build per MPI and link), and static inline lets a program
 * use only some of the helpers without unused-function warnings, which
 * -Werror would make fatal.
 *
 * Include it after the system headers, with _GNU_SOURCE defined first (for
 * RTLD_DEFAULT).  now() and shim_active() are for every program.  The error
 * helpers (die, xcalloc, check_mpi) print the program's name and rank: a
 * program that wants them defines BENCH_PROG ("rma") before the include,
 * which also gives it the file-scope `rank` they print; main sets it with
 * MPI_Comm_rank.
 */
#ifndef MPISHIM_BENCH_COMMON_H
#define MPISHIM_BENCH_COMMON_H

#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Seconds on CLOCK_MONOTONIC (one clock for all processes of a node). */
static inline double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when libmpishim.so is loaded and active (its mpishim_active() says so),
 * 0 otherwise, e.g. when the program runs on the host MPI alone. */
static inline int shim_active(void)
{
    int (*active)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "mpishim_active");
    return active ? active() : 0;
}

/* qsort's comparison for doubles, ascending. */
static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1], n > 0, which it sorts in place (an even n: the
 * mean of the middle two). */
static inline double bench_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#ifdef BENCH_PROG

static int rank; /* in MPI_COMM_WORLD, set by main; die() prints it */

/* "BENCH_PROG: rank R: msg" on stderr, then MPI_Abort: exit code 2. */
static inline void die(const char *msg)
{
    fprintf(stderr, BENCH_PROG ": rank %d: %s\n", rank, msg);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* calloc that never returns NULL (nor takes 0 for an answer). */
static inline void *xcalloc(size_t n, size_t sz)
{
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p)
        die("out of memory");
    return p;
}

/* die() with MPI's error string unless rc is MPI_SUCCESS. */
static inline void check_mpi(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char s[MPI_MAX_ERROR_STRING + 128];
        char e[MPI_MAX_ERROR_STRING];
        int n = 0;
        MPI_Error_string(rc, e, &n);
        snprintf(s, sizeof s, "%s failed: %s", what, e);
        die(s);
    }
}

#endif /* BENCH_PROG */

#endif /* MPISHIM_BENCH_COMMON_H */
