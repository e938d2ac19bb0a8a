/* progress_cpu: prints the CPUs the shim's progress thread (named
 * "msh-progress", MPISHIM_PROGRESS=thread or offload) may run on, read from
 * /proc, so that tests/run.sh can check MPISHIM_PROGRESS_CPU. Prints
 * "PROGRESS-THREAD rank R cpus=LIST process=LIST" (the second: the main
 * thread's), or "PROGRESS-THREAD rank R none".
 * Run by tests/run.sh only (tests/proc/). */
#include <mpi.h>

#include <dirent.h>
#include <stdio.h>
#include <string.h>

static int read_line(const char *path, const char *key, char *out, size_t len)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[512];
    int rc = -1;
    while (fgets(line, sizeof line, f)) {
        if (key && strncmp(line, key, strlen(key)) != 0)
            continue;
        const char *v = key ? line + strlen(key) : line;
        v += strspn(v, " \t");
        snprintf(out, len, "%s", v);
        out[strcspn(out, "\n")] = '\0';
        rc = 0;
        break;
    }
    fclose(f);
    return rc;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char found[256] = "";
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char path[300], comm[64];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        if (read_line(path, NULL, comm, sizeof comm) != 0 || strcmp(comm, "msh-progress") != 0)
            continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        read_line(path, "Cpus_allowed_list:", found, sizeof found);
        break;
    }
    if (d)
        closedir(d);
    char mine[256] = "?";
    read_line("/proc/self/status", "Cpus_allowed_list:", mine, sizeof mine);
    if (found[0])
        printf("PROGRESS-THREAD rank %d cpus=%s process=%s\n", rank, found, mine);
    else
        printf("PROGRESS-THREAD rank %d none\n", rank);
    fflush(stdout);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0)
        printf("OK progress_cpu\n");
    MPI_Finalize();
    return 0;
}
