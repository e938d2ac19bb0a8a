/* The partitioned layer's header dispatcher (see channel.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "partitioned/channel.h"
#include "sync/sync.h"
#include "vci/vci.h"

/* A wildcard receive on hdrc; whoever polls matches what it brings
 * against receive channels in Precv_init order (the posted list) or keeps
 * it (the unexpected list), by (communicator id, world source, user tag).
 * MPI orders headers from one source on hdrc, so channels match in init
 * order per (source, communicator, tag), as MPI's non-overtaking rule
 * asks. The dispatcher never takes a channel's lock: it fills rhdr and
 * sets hdr_in, and the channel sets itself up.
 *
 * When it is posted: a host may scan every unexpected message of the
 * process for each receive (UCX under MPICH does, for any receive: MPICH's
 * tag masks are never full), so where headers sit among the data matters.
 * A sender that runs far ahead of its receiver (its eager messages
 * complete at once) leaves each header behind the data of the channels
 * before it: taking every header as it came cost one scan past all that
 * data per header, quadratic in the channels in flight. A sender that
 * initializes many channels before sending on any leaves the headers in
 * front of the data, where every data receive of the receiver would scan
 * past those not taken yet. So the receive is posted whenever a channel
 * waits for its header, and beyond that, to take headers early, only
 * while posting it stays cheap (DISP_CHEAP_US: a post that scanned a long
 * queue, or found nothing in one, stops that until a cheap post). */
#define DISP_CHEAP_US 1.0
typedef struct hdr_msg {
    struct hdr_msg *next;
    int src;
    long long h[HDR_N];
} hdr_msg;

static pthread_mutex_t disp_lock = PTHREAD_MUTEX_INITIALIZER;
static long long disp_buf[HDR_N];
static MPI_Request disp_req = MPI_REQUEST_NULL; /* the wildcard receive while posted */
static int disp_broken; /* the host refused it once: said, and not tried again */
static int disp_cheap;  /* the last post was cheap: take headers early */
static msh_part *posted_head, *posted_tail;
static hdr_msg *unexp_head, *unexp_tail;

static int hdr_matches(const msh_part *p, long long cid, int src, long long tag)
{
    return p->cid == cid && p->wpeer == src && (long long)p->tag == tag;
}

/* Under disp_lock: post the wildcard receive, if it is not posted, when a
 * channel waits for its header or the last post was cheap. */
static void disp_start(void)
{
    if (disp_req != MPI_REQUEST_NULL || disp_broken || (!posted_head && !disp_cheap))
        return;
    int locked = msh_host_enter();
    double t0 = msh_now_us();
    int rc = PMPI_Irecv(disp_buf, HDR_N, MPI_LONG_LONG, MPI_ANY_SOURCE, MPI_ANY_TAG, msh_part_hdrc, &disp_req);
    disp_cheap = msh_now_us() - t0 < DISP_CHEAP_US;
    msh_host_exit(locked);
    if (rc != MPI_SUCCESS) {
        disp_req = MPI_REQUEST_NULL;
        disp_broken = 1;
        msh_log("partitioned layer: cannot post the header receive; partitioned receives will not complete");
    }
}

void msh_part_disp_stop(void)
{
    pthread_mutex_lock(&disp_lock);
    if (disp_req != MPI_REQUEST_NULL) {
        PMPI_Cancel(&disp_req);
        PMPI_Wait(&disp_req, MPI_STATUS_IGNORE);
    }
    while (unexp_head) {
        hdr_msg *m = unexp_head;
        unexp_head = m->next;
        free(m);
    }
    unexp_tail = NULL;
    posted_head = posted_tail = NULL;
    pthread_mutex_unlock(&disp_lock);
}

/* Under disp_lock: hand a header to the first posted channel it matches,
 * else keep it. */
static void disp_deliver(int src, const long long *h)
{
    msh_part *prev = NULL;
    for (msh_part *p = posted_head; p; prev = p, p = p->pnext)
        if (hdr_matches(p, h[1], src, h[2])) {
            if (prev)
                prev->pnext = p->pnext;
            else
                posted_head = p->pnext;
            if (posted_tail == p)
                posted_tail = prev;
            p->pnext = NULL;
            p->posted = 0;
            memcpy(p->rhdr, h, sizeof p->rhdr);
            atomic_store_explicit(&p->hdr_in, 1, memory_order_release);
            return;
        }
    hdr_msg *m = malloc(sizeof *m);
    if (!m) {
        msh_log("partitioned layer: out of memory keeping a header; a partitioned receive will not complete");
        return;
    }
    m->next = NULL;
    m->src = src;
    memcpy(m->h, h, sizeof m->h);
    if (unexp_tail)
        unexp_tail->next = m;
    else
        unexp_head = m;
    unexp_tail = m;
}

/* Take the headers that have arrived; never blocks (skips when another
 * thread is at it). */
void msh_part_disp_poll(void)
{
    if (pthread_mutex_trylock(&disp_lock) != 0)
        return;
    while (disp_req != MPI_REQUEST_NULL) {
        int f = 0;
        MPI_Status st;
        int locked = msh_host_enter();
        int rc = PMPI_Test(&disp_req, &f, &st);
        msh_host_exit(locked);
        if (rc != MPI_SUCCESS) {
            msh_log("partitioned layer: header receive failed (error %d)", rc);
            disp_req = MPI_REQUEST_NULL;
            disp_broken = 1;
            break;
        }
        if (!f)
            break;
        if (disp_buf[0] == HDR_MAGIC)
            disp_deliver(st.MPI_SOURCE, disp_buf);
        disp_start();
    }
    pthread_mutex_unlock(&disp_lock);
}

/* Receiver init: take the oldest matching header already here, or queue. */
void msh_part_disp_post(msh_part *p)
{
    pthread_mutex_lock(&disp_lock);
    hdr_msg *prev = NULL;
    for (hdr_msg *m = unexp_head; m; prev = m, m = m->next)
        if (hdr_matches(p, m->h[1], m->src, m->h[2])) {
            if (prev)
                prev->next = m->next;
            else
                unexp_head = m->next;
            if (unexp_tail == m)
                unexp_tail = prev;
            memcpy(p->rhdr, m->h, sizeof p->rhdr);
            free(m);
            atomic_store_explicit(&p->hdr_in, 1, memory_order_release);
            pthread_mutex_unlock(&disp_lock);
            return;
        }
    p->pnext = NULL;
    p->posted = 1;
    if (posted_tail)
        posted_tail->pnext = p;
    else
        posted_head = p;
    posted_tail = p;
    disp_start();
    pthread_mutex_unlock(&disp_lock);
}

/* Receiver free: off the posted list if still on it. */
void msh_part_disp_unpost(msh_part *p)
{
    pthread_mutex_lock(&disp_lock);
    if (p->posted) {
        msh_part *prev = NULL;
        for (msh_part *q = posted_head; q; prev = q, q = q->pnext)
            if (q == p) {
                if (prev)
                    prev->pnext = q->pnext;
                else
                    posted_head = q->pnext;
                if (posted_tail == q)
                    posted_tail = prev;
                break;
            }
        p->posted = 0;
    }
    pthread_mutex_unlock(&disp_lock);
}
