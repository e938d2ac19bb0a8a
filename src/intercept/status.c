/* Statuses on their way back to the program (status.h). */
#include "intercept/status.h"

_Atomic int msh_status_trunc_zero;

void msh_status_init(int mpich_ucx)
{
    atomic_store_explicit(&msh_status_trunc_zero, mpich_ucx, memory_order_relaxed);
}

static int error_class(int code)
{
    int c = MPI_ERR_UNKNOWN;
    return PMPI_Error_class(code, &c) == MPI_SUCCESS ? c : MPI_ERR_UNKNOWN;
}

void msh_status_fix_one(int rc, MPI_Status *st)
{
    if (error_class(rc) == MPI_ERR_TRUNCATE)
        PMPI_Status_set_elements_x(st, MPI_BYTE, 0);
}

void msh_status_fix_array(int rc, int n, MPI_Status *sts)
{
    if (error_class(rc) != MPI_ERR_IN_STATUS)
        return;
    for (int i = 0; i < n; i++)
        if (sts[i].MPI_ERROR != MPI_SUCCESS && error_class(sts[i].MPI_ERROR) == MPI_ERR_TRUNCATE)
            PMPI_Status_set_elements_x(&sts[i], MPI_BYTE, 0);
}
