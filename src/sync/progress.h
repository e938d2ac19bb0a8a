/* The progress engine: polling the VCIs' transports, progress ownership
 * per domain with its handoff to sleeping waiters, the waits on sync
 * objects, and the progress thread (MPISHIM_PROGRESS=thread, offload). The
 * sync objects and domains themselves are in sync.h. */
#ifndef MSH_SYNC_PROGRESS_H
#define MSH_SYNC_PROGRESS_H

#include "sync/sync.h"
#include "vci/vci.h"

int msh_progress_init(void);   /* after the VCI pool */
void msh_progress_fini(void);  /* stops the progress thread, if any */

/* Hog mode: a thread outside MPI keeps taking the core this rank's
 * threads yield (progress.c). While it lasts, progress owners do not yield
 * and adaptive waiters do not spin. The loops that test without a sync
 * object (msh_idle, blocking probes) still yield: without it, one that
 * takes and drops a lock in a tight loop could keep a thread on another
 * core from ever getting that lock. */
int msh_sync_hogged(void);
/* Times hog mode began (MPISHIM_STATS). */
uint64_t msh_sync_hog_periods(void);

/* Wait until s has counted `needed` completions, progressing or waiting as
 * the policies say. */
void msh_sync_wait(msh_sync *s, int needed);

/* Wait until s has counted exactly `claimed` completions and no progress
 * thread can touch s any more; then s may go out of scope. */
void msh_sync_finish(msh_sync *s, int claimed);

/* One progress pass for a thread that tests rather than waits: polls if no
 * one owns the domain of vci, else does nothing. Returns completions seen. */
int msh_progress_try(int vci);

/* One poll of v's transport (after posting v's queue), completing the shim
 * requests it reports. blocking: take v's lock, else skip v if busy.
 * Returns completions. */
int msh_progress_poll(msh_vci *v, int blocking);

/* One poll of every lane whose VCI's lock is free, whoever owns its domain,
 * for a thread that must not enter the host (sync/assist.h): no queued
 * posts, no host polls or pokes, no partitioned sweep. Returns
 * completions. */
int msh_progress_poll_lanes(void);

/* The helper's pass during a blocking host call (sync/assist.h): the lanes,
 * as msh_progress_poll_lanes, and the partitioned sweep while a receive
 * waits for its header. Returns completions and channels set up. */
int msh_progress_assist(void);

/* After MPI_Comm_free: what the transports keep of freed communicators and
 * no request uses any more is freed, each VCI looked at under its lock
 * (nothing is, when this thread holds one: a callback inside a shim call). */
void msh_progress_reclaim_comms(void);

#endif
