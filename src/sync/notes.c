/* Notes on pending requests (see notes.h). */
#include "sync/notes.h"

#include <stdatomic.h>
#include <sys/mman.h>

int msh_notes_on;

static msh_note *info;
static size_t info_bytes;
static _Atomic uint32_t now_tick;
static MSH_TLS const msh_request *last_noted; /* see msh_watchdog_posted */

void msh_watchdog_note_(const msh_request *r, int peer, int tag, MPI_Comm comm)
{
    msh_note *i = &info[r->idx];
    i->peer = peer;
    i->tag = tag;
    i->comm = comm;
    i->noted = 1;
    last_noted = r;
}

void msh_watchdog_posted_(const msh_request *r)
{
    msh_note *i = &info[r->idx];
    i->tick = atomic_load_explicit(&now_tick, memory_order_relaxed);
    if (last_noted != r && !r->persistent)
        i->noted = 0;
    last_noted = NULL;
}

int msh_notes_start(void)
{
    if (info)
        return 0;
    size_t bytes = (size_t)msh_reqs.capacity * sizeof(msh_note);
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    info = p;
    info_bytes = bytes;
    return 0;
}

void msh_notes_stop(void)
{
    if (!info || msh_notes_on)
        return; /* once notes were taken, the table stays */
    munmap(info, info_bytes);
    info = NULL;
}

const msh_note *msh_note_of(const msh_request *r)
{
    return &info[r->idx];
}

uint32_t msh_notes_tick(void)
{
    return atomic_fetch_add_explicit(&now_tick, 1, memory_order_relaxed) + 1;
}
