#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int msh_launch_rank(void)
{
    static const char *const vars[] = {
        "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "MPI_RANKID", NULL,
    };
    for (int i = 0; vars[i]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return atoi(v);
    }
    return -1;
}

static void vlog(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "mpishim: ");
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}

void msh_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void msh_log_once(const char *fmt, ...)
{
    if (msh_launch_rank() > 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}
