/* Helpers for the generated Fortran wrappers (gen/fwrappers.c, written by
 * tools/fwrapgen.py): each wrapper turns the INTEGER handles, statuses and
 * sentinels of an mpif.h / `use mpi` / `use mpi_f08` call into C, calls the
 * shim's MPI_X so the runtime handles it, and converts the outputs back.
 * Only included by the generated file; the generator defines MSH_F_BOTTOM /
 * MSH_F_IN_PLACE and MSH_F08_BOTTOM / MSH_F08_IN_PLACE / MSH_F08_STATUS(ES)_IGNORE
 * (the addresses of the host's Fortran sentinels) before including it. */
#ifndef MSH_FORTRAN_FWRAP_H
#define MSH_FORTRAN_FWRAP_H

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* Open MPI 4.1's mpi.h has no MPI_F_STATUS_SIZE; its Fortran status is the C
 * one read as INTEGERs (mpif-config.h: MPI_STATUS_SIZE = 6, 24 bytes). */
#ifndef MPI_F_STATUS_SIZE
#define MPI_F_STATUS_SIZE ((int)(sizeof(MPI_Status) / sizeof(MPI_Fint)))
#endif

/* INTEGER arrays (counts, displacements, dims) are passed to C as they are. */
_Static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran INTEGER is not a C int on this host");

/* INTEGER(KIND=MPI_COUNT_KIND) (the partitioned calls' count) is 8 bytes on
 * both hosts' Fortran layers: the wrappers read it as an MPI_Count. */
_Static_assert(sizeof(MPI_Count) == 8, "MPI_Count is not INTEGER(KIND=8) on this host");

/* gfortran's LOGICAL values (both hosts build their Fortran layer with it). */
#define MSH_F_TRUE 1
#define MSH_F_FALSE 0

/* Arrays up to this length are converted on the stack: no malloc on the
 * common Waitall of a small window. */
#define MSH_F_STACK 32

/* A choice buffer: the Fortran MPI_BOTTOM / MPI_IN_PLACE are addresses of
 * the host's common blocks, the C ones are constants. */
static inline void *msh_f_buf(void *b)
{
    if (b == MSH_F_BOTTOM)
        return MPI_BOTTOM;
    if (b == MSH_F_IN_PLACE)
        return MPI_IN_PLACE;
    return b;
}

/* The same for mpi_f08 entries, whose module may name other objects
 * (MSH_F08_BOTTOM / MSH_F08_IN_PLACE, defined by the generator). */
static inline void *msh_f08_buf(void *b)
{
    if (b == MSH_F08_BOTTOM)
        return MPI_BOTTOM;
    if (b == MSH_F08_IN_PLACE)
        return MPI_IN_PLACE;
    return b;
}

static inline int msh_f_len(MPI_Fint n)
{
    return n > 0 ? (int)n : 0;
}

/* Request arrays: Fortran INTEGER handles in, shim C handles for the call,
 * Fortran handles (MPI_Request_c2f, which round-trips shim requests) out. */
typedef struct {
    MPI_Request *c;
    MPI_Request stack[MSH_F_STACK];
} msh_f_reqs;

static inline int msh_f_reqs_in(msh_f_reqs *a, MPI_Fint n, const MPI_Fint *f)
{
    int len = msh_f_len(n);
    a->c = len <= MSH_F_STACK ? a->stack : malloc((size_t)len * sizeof *a->c);
    if (!a->c)
        return 0;
    for (int i = 0; i < len; i++)
        a->c[i] = MPI_Request_f2c(f[i]);
    return 1;
}

static inline void msh_f_reqs_out(const msh_f_reqs *a, MPI_Fint n, MPI_Fint *f)
{
    for (int i = 0; i < msh_f_len(n); i++)
        f[i] = MPI_Request_c2f(a->c[i]);
}

/* Status arrays; the flavour's STATUSES_IGNORE (ign: MPI_F_STATUSES_IGNORE
 * for mpif.h, the mpi_f08 module's object for mpi_f08) becomes
 * MPI_STATUSES_IGNORE. */
typedef struct {
    MPI_Status *c;
    MPI_Status stack[MSH_F_STACK];
} msh_f_stats;

static inline int msh_f_stats_in(msh_f_stats *a, MPI_Fint n, const MPI_Fint *f, const MPI_Fint *ign)
{
    int len = msh_f_len(n);
    if (f == ign) {
        a->c = MPI_STATUSES_IGNORE;
        return 1;
    }
    a->c = len <= MSH_F_STACK ? a->stack : malloc((size_t)len * sizeof *a->c);
    if (!a->c)
        return 0;
    /* The caller's statuses, so that fields a call leaves alone stay the
     * caller's (as tools/fwrapgen.py does for one status). */
    memset(a->c, 0, (size_t)len * sizeof *a->c);
    for (int i = 0; i < len; i++)
        MPI_Status_f2c(f + (size_t)i * MPI_F_STATUS_SIZE, &a->c[i]);
    return 1;
}

static inline void msh_f_stats_out(const msh_f_stats *a, int n, MPI_Fint *f, const MPI_Fint *ign)
{
    if (f == ign)
        return;
    for (int i = 0; i < n; i++)
        MPI_Status_c2f(&a->c[i], f + (size_t)i * MPI_F_STATUS_SIZE);
}

/* Index arrays (Waitsome/Testsome): C counts from 0, Fortran from 1. */
typedef struct {
    int *c;
    int stack[MSH_F_STACK];
} msh_f_ints;

static inline int msh_f_ints_in(msh_f_ints *a, MPI_Fint n)
{
    int len = msh_f_len(n);
    a->c = len <= MSH_F_STACK ? a->stack : malloc((size_t)len * sizeof *a->c);
    return a->c != NULL;
}

/* LOGICAL arrays in (MPI_Cart_create's periods): C wants int 0/1. */
static inline int msh_f_logicals_in(msh_f_ints *a, MPI_Fint n, const MPI_Fint *f)
{
    if (!msh_f_ints_in(a, n))
        return 0;
    for (int i = 0; i < msh_f_len(n); i++)
        a->c[i] = f[i] != MSH_F_FALSE;
    return 1;
}

static inline void msh_f_indices_out(const msh_f_ints *a, int n, MPI_Fint *f)
{
    for (int i = 0; i < n; i++)
        f[i] = a->c[i] + 1;
}

/* The count of entries a *some call filled: none when it says MPI_UNDEFINED. */
static inline int msh_f_filled(int outcount)
{
    return outcount == MPI_UNDEFINED || outcount < 0 ? 0 : outcount;
}

/* free() what an *_in helper took from the heap (stack and ignore: nothing). */
#define MSH_F_RELEASE(a) do { if ((a).c && (void *)(a).c != (void *)(a).stack && \
                                  (void *)(a).c != (void *)MPI_STATUSES_IGNORE) free((a).c); } while (0)

#endif
