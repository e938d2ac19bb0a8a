/* halo_omp: a 2-D Jacobi sweep whose OpenMP threads exchange their own halos.
 *
 * The pattern of MPI+threads stencil codes. The NX x NY grid is cut into
 * horizontal slabs, one per rank, and every slab into vertical strips, one
 * per OpenMP thread. Before each sweep every thread swaps the top and bottom
 * rows of its own strip with the same thread of the ranks above and below,
 * on a communicator of its own (so MPI_THREAD_MULTIPLE, and no master thread
 * funnelling every message). Then each thread updates its strip.
 *
 * At the end every rank checks its slab against a serial sweep of the whole
 * grid, which it computes itself: any halo that arrived late, from the wrong
 * thread or into the wrong place changes the numbers.
 *
 *   mpirun -np 2 ./halo_omp [threads] [sweeps]        (default 4 threads, 50 sweeps)
 *   mpishim mpirun -np 2 ./halo_omp                    (the same under the shim)
 */
#include <mpi.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NX 48 /* rows */
#define NY 64 /* columns */

/* Fixed values on the grid's edge; the inside starts at 0. */
static double edge(int i, int j)
{
    return (double)(i * 3 + j * 2);
}

static int on_edge(int i, int j)
{
    return i == 0 || j == 0 || i == NX - 1 || j == NY - 1;
}

/* The reference: the same sweeps over the whole grid, one thread. */
static void serial(double *u, int sweeps)
{
    double *v = malloc(sizeof(double) * NX * NY);
    for (int i = 0; i < NX; i++)
        for (int j = 0; j < NY; j++)
            u[i * NY + j] = v[i * NY + j] = on_edge(i, j) ? edge(i, j) : 0.0;
    for (int s = 0; s < sweeps; s++) {
        for (int i = 1; i < NX - 1; i++)
            for (int j = 1; j < NY - 1; j++)
                v[i * NY + j] = 0.25 * (u[(i - 1) * NY + j] + u[(i + 1) * NY + j] + u[i * NY + j - 1] + u[i * NY + j + 1]);
        memcpy(u, v, sizeof(double) * NX * NY);
    }
    free(v);
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : 4, sweeps = argc > 2 ? atoi(argv[2]) : 50;
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (provided < MPI_THREAD_MULTIPLE || threads < 1 || threads > NY || size > NX) {
        if (rank == 0)
            fprintf(stderr, "halo_omp: needs MPI_THREAD_MULTIPLE, 1..%d threads and at most %d ranks\n", NY, NX);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* This rank's rows [r0, r1), stored with one halo row above and below. */
    int r0 = rank * NX / size, r1 = (rank + 1) * NX / size, rows = r1 - r0;
    double *u = calloc((size_t)(rows + 2) * NY, sizeof(double));
    double *v = calloc((size_t)(rows + 2) * NY, sizeof(double));
    for (int i = 0; i < rows + 2; i++)
        for (int j = 0; j < NY; j++) {
            int gi = r0 + i - 1;
            u[i * NY + j] = v[i * NY + j] = gi >= 0 && gi < NX && on_edge(gi, j) ? edge(gi, j) : 0.0;
        }
    int up = rank > 0 ? rank - 1 : MPI_PROC_NULL, down = rank < size - 1 ? rank + 1 : MPI_PROC_NULL;

    /* A communicator per thread: thread t of every rank talks on comm[t]. */
    MPI_Comm *comm = malloc(sizeof(MPI_Comm) * (size_t)threads);
    for (int t = 0; t < threads; t++)
        MPI_Comm_dup(MPI_COMM_WORLD, &comm[t]);

    double t0 = MPI_Wtime();
#pragma omp parallel num_threads(threads)
    {
        int t = omp_get_thread_num();
        int c0 = t * NY / threads, c1 = (t + 1) * NY / threads, w = c1 - c0;
        for (int s = 0; s < sweeps; s++) {
            /* My strip of my first row goes up, the strip of the row above
             * me comes from there; likewise downwards. */
            MPI_Sendrecv(&u[1 * NY + c0], w, MPI_DOUBLE, up, 0, &u[(rows + 1) * NY + c0], w, MPI_DOUBLE, down, 0,
                         comm[t], MPI_STATUS_IGNORE);
            MPI_Sendrecv(&u[rows * NY + c0], w, MPI_DOUBLE, down, 1, &u[0 * NY + c0], w, MPI_DOUBLE, up, 1, comm[t],
                         MPI_STATUS_IGNORE);
            /* A strip's edge columns read the neighbouring strips' cells:
             * every thread's halos must be in before anyone updates. */
#pragma omp barrier
            for (int i = 1; i <= rows; i++) {
                int gi = r0 + i - 1;
                for (int j = c0; j < c1; j++)
                    if (!on_edge(gi, j))
                        v[i * NY + j] = 0.25 * (u[(i - 1) * NY + j] + u[(i + 1) * NY + j] + u[i * NY + j - 1] +
                                                u[i * NY + j + 1]);
            }
#pragma omp barrier
#pragma omp single
            {
                double *x = u;
                u = v;
                v = x;
            }
        }
    }
    double secs = MPI_Wtime() - t0;

    double *ref = malloc(sizeof(double) * NX * NY), maxdiff = 0;
    serial(ref, sweeps);
    for (int i = 1; i <= rows; i++)
        for (int j = 0; j < NY; j++) {
            double d = u[i * NY + j] - ref[(r0 + i - 1) * NY + j];
            maxdiff = d < 0 ? (-d > maxdiff ? -d : maxdiff) : (d > maxdiff ? d : maxdiff);
        }
    double worst = 0;
    MPI_Reduce(&maxdiff, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (rank == 0)
        printf("halo_omp: %d ranks x %d threads, %d x %d grid, %d sweeps in %.3f s: %s\n", size, threads, NX, NY,
               sweeps, secs, worst == 0 ? "matches the serial sweep, verified" : "DIFFERS from the serial sweep");
    for (int t = 0; t < threads; t++)
        MPI_Comm_free(&comm[t]);
    free(comm);
    free(ref);
    free(u);
    free(v);
    MPI_Finalize();
    return worst == 0 ? 0 : 1;
}
