/*
 * startup.c - what a job pays to start and end: MPI_Init_thread
 * (MPI_THREAD_MULTIPLE) and MPI_Finalize, nothing between.
 *
 * Rank 0 prints one line:
 *   startup: shim=S lane=L premain=P init=I finalize=F
 * premain: seconds from the process's start to main (the dynamic loader and
 * every library constructor, the largest over the ranks; the kernel counts
 * a process's start in clock ticks, so this is good to 1/CLK_TCK s); init:
 * the longest MPI_Init_thread over the ranks; finalize: rank 0's
 * MPI_Finalize. The whole job's wall time is measured by run_startup.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

/* Seconds since this process started, on the clock /proc counts it with. */
static double since_start(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Field 22, counted after the command's closing parenthesis (the
     * command itself may hold spaces). */
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long long start = 0;
    int field = 2;
    for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
        if (++field == 22) {
            start = strtoull(tok, NULL, 10);
            break;
        }
    struct timespec ts;
    clock_gettime(CLOCK_BOOTTIME, &ts);
    double up = (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
    return up - (double)start / (double)sysconf(_SC_CLK_TCK);
}

int main(int argc, char **argv)
{
    double premain = since_start();
    double t0 = now();
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    double mine[2] = { now() - t0, premain }, most[2];
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Reduce(mine, most, 2, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    const char *(*lane)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mpishim_lane");
    const char *ln = lane ? lane() : NULL;
    char name[64];
    snprintf(name, sizeof name, "%s", ln && *ln ? ln : "none");
    int active = shim_active();
    double t1 = now();
    MPI_Finalize();
    double fin = now() - t1;
    if (rank == 0)
        printf("startup: shim=%d lane=%s premain=%.4f init=%.4f finalize=%.4f\n",
               active, name, most[1], most[0], fin);
    return 0;
}
