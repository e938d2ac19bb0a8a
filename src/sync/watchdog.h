/* The watchdog (MPISHIM_WATCHDOG=SECONDS, off by default): a thread of its
 * own that wakes every 100 ms and, when requests are pending and none of
 * this rank's requests has completed for SECONDS, prints once per stall
 * what is pending per VCI (kind, peer, tag, communicator, age) and who owns
 * progress. SIGUSR1 asks for the same report at once. Nothing of it exists
 * unless the variable is set: no thread, no signal handler, and the post
 * paths pay one predictable branch. */
#ifndef MSH_SYNC_WATCHDOG_H
#define MSH_SYNC_WATCHDOG_H

#include <mpi.h>
#include <stdatomic.h>

#include "core/common.h"

int msh_watchdog_start(int seconds); /* after the progress engine; 0 or -1 */
void msh_watchdog_stop(void);        /* before the VCI pool goes */

#endif
