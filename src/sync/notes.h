/* What each pending request is (peer, tag, communicator, when it was
 * posted), noted on the post paths for the watchdog's report (watchdog.h).
 * Nothing is noted unless the watchdog runs: the post paths pay one
 * predictable branch. */
#ifndef MSH_SYNC_NOTES_H
#define MSH_SYNC_NOTES_H

#include <mpi.h>
#include <stdint.h>

#include "core/common.h"
#include "sync/request.h"

/* Non-zero while notes are taken (read on post paths). */
extern int msh_notes_on;

/* Per arena slot, written and read under the request's VCI lock. */
typedef struct msh_note {
    int peer, tag;
    MPI_Comm comm;
    uint32_t tick;  /* when it entered a transport's tracked set */
    uint8_t noted;  /* peer/tag/comm are known */
} msh_note;

void msh_watchdog_note_(const msh_request *r, int peer, int tag, MPI_Comm comm);
void msh_watchdog_posted_(const msh_request *r);

/* What a pending request is (post paths, VCI lock held). */
static inline void msh_watchdog_note(const msh_request *r, int peer, int tag, MPI_Comm comm)
{
    if (MSH_UNLIKELY(msh_notes_on))
        msh_watchdog_note_(r, peer, tag, comm);
}

/* When a request was handed to its transport (its age in the report). What
 * was noted applies if this thread noted r just before (a fresh post) or r
 * is persistent (noted at init); else the slot's old note is dropped. */
static inline void msh_watchdog_posted(const msh_request *r)
{
    if (MSH_UNLIKELY(msh_notes_on))
        msh_watchdog_posted_(r);
}

/* For the watchdog: the table (one entry per arena slot, mapped lazily)
 * before msh_notes_on is set, 0 or -1; r's note; the clock, advanced by one
 * tick per call. The table stays mapped after msh_notes_stop: a post racing
 * with finalize may still write it. */
int msh_notes_start(void);
void msh_notes_stop(void);
const msh_note *msh_note_of(const msh_request *r);
uint32_t msh_notes_tick(void);

#endif
