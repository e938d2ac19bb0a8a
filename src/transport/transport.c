/* The transports a VCI can open (see transport.h). */
#include <string.h>

#include "transport/transport.h"

/* Each transport's open function, defined in its own file. */
msh_tp *msh_tp_host_open(int idx, const char **why);

static const struct {
    const char *name;
    msh_tp *(*open)(int idx, const char **why);
} transports[] = {
    { "host", msh_tp_host_open },
};

msh_tp *msh_tp_open(const char *name, int idx, const char **why)
{
    for (size_t i = 0; i < sizeof transports / sizeof transports[0]; i++)
        if (strcmp(name, transports[i].name) == 0)
            return transports[i].open(idx, why);
    *why = "no such transport";
    return NULL;
}
