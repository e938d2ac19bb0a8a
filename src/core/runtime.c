#include "core/runtime.h"
#include "core/common.h"
#include "core/config.h"

#include <pthread.h>

#include "mpishim.h"

msh_runtime msh_rt;

static pthread_once_t configure_once = PTHREAD_ONCE_INIT;

static void configure(void)
{
    msh_cfg_init();
}

void msh_runtime_configure(void)
{
    pthread_once(&configure_once, configure);
}

MSH_EXPORT int mpishim_active(void)
{
    msh_runtime_configure();
    return !msh_cfg.disable;
}

MSH_EXPORT const char *mpishim_version(void)
{
    return MPISHIM_VERSION;
}

MSH_EXPORT void mpishim_print_config(FILE *out)
{
    msh_runtime_configure();
    msh_cfg_print(out, &msh_cfg);
}
