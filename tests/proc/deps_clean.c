/* deps_clean: what a process under the shim carries that the raw host does
 * not. Rank 0 prints, after MPI_Init_thread(MULTIPLE):
 *   "mapped <object> <path>" for every libfabric/PSM/InfiniPath object
 *   mapped, and
 *   "handler <signal> <object>" for every signal with a handler installed,
 * named by the object that holds the handler (dladdr). tests/run.sh runs it
 * raw and under the shim: no "mapped" line may appear, and the handler lines
 * must be the same (the shim installs none, and loads nothing that does);
 * with a libfabric lane open, libfabric may be mapped, and on a node
 * without a PSM adapter only the shim's PSM stand-ins with it.
 * Run by tests/run.sh only (tests/proc/), not in the tests/mpi loop. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <mpi.h>

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

static const char *base(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int main(int argc, char **argv)
{
    int provided, rank;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
        FILE *f = fopen("/proc/self/maps", "r");
        char line[1024], last[1024] = "";
        while (f && fgets(line, sizeof line, f)) {
            char *path = strchr(line, '/');
            if (!path)
                continue;
            path[strcspn(path, "\n")] = '\0';
            /* One line per object, not per mapped segment. */
            if (strcmp(path, last) != 0 &&
                (strstr(path, "libfabric") || strstr(path, "libpsm") || strstr(path, "infinipath")))
                printf("mapped %s %s\n", base(path), path);
            snprintf(last, sizeof last, "%s", path);
        }
        if (f)
            fclose(f);
        for (int s = 1; s < 32; s++) {
            struct sigaction sa;
            if (sigaction(s, NULL, &sa) != 0)
                continue;
            void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
            if (h == (void *)SIG_DFL || h == (void *)SIG_IGN)
                continue;
            Dl_info di;
            const char *owner = dladdr(h, &di) && di.dli_fname ? base(di.dli_fname) : "?";
            printf("handler %d %s\n", s, owner);
        }
        printf("OK deps_clean\n");
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}
