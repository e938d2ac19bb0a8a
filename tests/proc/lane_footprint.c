/* lane_footprint: what the tcp lane (tcp;ofi_rxm) costs a process in
 * memory, and that the shim's choice of rxm's receive depth neither leaks
 * into the environment nor overrides the user's.
 *
 *   lane_footprint MAX_MB [VALUE]
 *
 * After MPI_Init_thread(MPI_THREAD_MULTIPLE) with MPISHIM_FABRIC=tcp, each
 * rank checks that the lane is open, that its resident memory is under
 * MAX_MB megabytes, and that FI_OFI_RXM_MSG_RX_SIZE is unset (no VALUE) or
 * still VALUE (the user's). Left to rxm's own default, every endpoint
 * posts 4096 receive buffers of 16 KiB: some 70 MB per VCI, 280 MB with
 * the 4 VCIs tests/run.sh gives it. Rank 0 prints "OK lane_footprint". */
#include <mpi.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long rss_mb(void)
{
    char line[256];
    long kb = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb < 0 ? -1 : kb / 1024;
}

int main(int argc, char **argv)
{
    int provided, rank, bad = 0;
    long max_mb = argc > 1 ? atol(argv[1]) : 0;
    const char *want = argc > 2 ? argv[2] : NULL;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    /* Found at run time: the launcher preloads the shim into this program. */
    const char *(*lane_of)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "mpishim_lane");
    const char *lane = lane_of ? lane_of() : NULL;
    if (!lane || !strstr(lane, "rxm")) {
        printf("FAIL rank %d: the lane is %s, not tcp;ofi_rxm\n", rank, lane ? lane : "(none)");
        bad = 1;
    }
    long mb = rss_mb();
    if (mb < 0 || mb >= max_mb) {
        printf("FAIL rank %d: resident memory %ld MB after MPI_Init_thread, limit %ld MB\n", rank, mb, max_mb);
        bad = 1;
    }
    const char *v = getenv("FI_OFI_RXM_MSG_RX_SIZE");
    if (want ? !v || strcmp(v, want) != 0 : v != NULL) {
        printf("FAIL rank %d: FI_OFI_RXM_MSG_RX_SIZE is %s, expected %s\n", rank, v ? v : "unset",
               want ? want : "unset");
        bad = 1;
    }
    int any = 0;
    MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any)
        printf("OK lane_footprint (rank 0: %ld MB)\n", mb);
    fflush(stdout);
    MPI_Finalize();
    return any;
}
