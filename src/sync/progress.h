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
 * object (msh_spin) still yield: without it, one that takes and drops a
 * lock in a tight loop could keep a thread on another core from ever
 * getting that lock. */
int msh_sync_hogged(void);
/* Times hog mode began (MPISHIM_STATS). */
uint64_t msh_sync_hog_periods(void);

/* A wait that tests in a loop, without a sync object (blocking probes,
 * MPI_Isendrecv pairs, partitioned requests, host requests the host must
 * not block on): msh_spin_idle after each test that found nothing, then
 * msh_spin_end. A round advances partitioned receives still waiting for
 * their header (msh_sweep_wanted) or progresses vci's domain, and gives
 * the core away by a progress owner's rule: every round while the rank's
 * spinning threads outnumber its cores, less often while the yields find
 * nobody to run. From its first round the waiter counts as spinning. */
typedef struct msh_spin {
    int vci;     /* whose domain a round progresses */
    int counted; /* among the spinning threads */
} msh_spin;
#define MSH_SPIN_ON(vci) { (vci), 0 }
void msh_spin_idle(msh_spin *s);
void msh_spin_end(msh_spin *s);
/* Threads now in a progress owner's loop or between a msh_spin wait's
 * first round and its end (tests/unit/test_spin.c). */
int msh_progress_spinners(void);

/* Wait until s has counted `needed` completions, progressing or waiting as
 * the policies say. */
void msh_sync_wait(msh_sync *s, int needed);

/* Wait until s has counted exactly `claimed` completions and no progress
 * thread can touch s any more; then s may go out of scope. */
void msh_sync_finish(msh_sync *s, int claimed);

/* One progress pass for a thread that tests rather than waits: polls if no
 * one owns the domain of vci, else does nothing. Returns completions seen. */
int msh_progress_try(int vci);

/* The progress pass of a test (MPI_Test and its kin, MPI_Waitsome's first
 * look, a request's status) of requests pending on the VCIs in vcis (bit
 * i: VCI i; one of them is vci): msh_progress_try's, or with a progress
 * thread a poll of each of those VCIs, and every poll looks at all of a
 * VCI's tracked operations. So a thread alone in MPI finds an operation
 * complete once the host (or lane) has completed it, as with the host's own
 * test, however many others are pending; where another program thread owns
 * the domain, its next pass reports it (a test returns at once). key: the
 * tested handle (an array's first pending one); with a progress thread,
 * tests of the same key in a row, with no post between, poll only now and
 * then (progress.c); MPI_REQUEST_NULL: always poll (a blocking call's
 * first look).
 * Returns completions seen. */
int msh_progress_test(int vci, uint64_t vcis, MPI_Request key);

/* This thread's posts and starts, counted: a test after the thread posted
 * anything (a blocking send the host finished at its post may have
 * finished a tested receive) is not part of a polling loop. */
extern MSH_TLS unsigned msh_progress_posts;
static inline void msh_progress_note_post(void)
{
    msh_progress_posts++;
}

/* Around a program thread's host call that runs the host's progress
 * engine (a blocking call that may wait for other processes, a wait or
 * test of a request the shim did not make): while one runs, the progress
 * thread, if any, leaves the host alone (progress.c says why and when not).
 * int e = msh_progress_host_enter(); rc = PMPI_...; msh_progress_host_exit(e); */
extern int msh_progress_thread_on; /* written at init and finalize only */
int msh_progress_host_enter_slow(void);
void msh_progress_host_exit_slow(void);
static inline int msh_progress_host_enter(void)
{
    return MSH_UNLIKELY(msh_progress_thread_on) ? msh_progress_host_enter_slow() : 0;
}
static inline void msh_progress_host_exit(int entered)
{
    if (MSH_UNLIKELY(entered))
        msh_progress_host_exit_slow();
}

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
 * as msh_progress_poll_lanes, and, if sweep, the partitioned sweep while a
 * receive waits for its header. Returns completions and channels set up. */
int msh_progress_assist(int sweep);

/* After MPI_Comm_free: what the transports keep of freed communicators and
 * no request uses any more is freed, each VCI looked at under its lock
 * (nothing is, when this thread holds one: a callback inside a shim call). */
void msh_progress_reclaim_comms(void);

#endif
