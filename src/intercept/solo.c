/* mpishim_solo(), the public query of the solo fast path (src/sync/solo.h). */
#include "intercept/shim.h"

MSH_EXPORT int mpishim_solo(void)
{
    return msh_on() && atomic_load_explicit(&msh_solo_on, memory_order_acquire);
}
