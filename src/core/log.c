#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

size_t msh_escape(char *out, size_t outlen, const char *in, size_t inlen)
{
    if (outlen == 0)
        return 0;
    size_t o = 0, i = 0;
    for (; i < inlen && in[i]; i++) {
        unsigned char ch = (unsigned char)in[i];
        char esc[5];
        size_t n;
        switch (ch) {
        case '\n':  memcpy(esc, "\\n", n = 2); break;
        case '\t':  memcpy(esc, "\\t", n = 2); break;
        case '\r':  memcpy(esc, "\\r", n = 2); break;
        case '\\': memcpy(esc, "\\\\", n = 2); break;
        case '\'': memcpy(esc, "\\'", n = 2); break;
        default:
            if (ch < 0x20 || ch == 0x7f) {
                snprintf(esc, sizeof esc, "\\x%02x", ch);
                n = 4;
            } else {
                esc[0] = (char)ch;
                n = 1;
            }
        }
        if (o + n >= outlen)
            break;
        memcpy(out + o, esc, n);
        o += n;
    }
    out[o] = '\0';
    return i;
}

static void vlog(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "mpishim: ");
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    /* One message, one line, whatever text reached it unescaped (a path,
     * a host string): a stray control byte becomes '?'. */
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f)
            line[i] = '?';
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
