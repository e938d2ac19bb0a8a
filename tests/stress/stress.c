/* mpishim stress test: randomised multithreaded MPI traffic, every payload
 * checked (run by tests/stress/run.sh, `make stress`).
 *
 *   stress [seconds]        (default 10)
 *
 * MPI_THREAD_MULTIPLE, STRESS_THREADS worker threads per rank (default 4).
 * The run is a sequence of phases separated by world barriers. In a phase
 * every worker thread t runs one batch of one operation category; the
 * category and everything both sides of a message must agree on (peers,
 * counts, tags, sizes, roots, partitions, rounds) come from a PRNG seeded
 * with (seed, phase, sender rank, t, ...), so every rank computes the same
 * plan. Purely local choices (blocking or not, which completion call, which
 * wildcard, probe flavour, order of posts) come from a per-(rank, thread)
 * PRNG seeded with (seed, rank, t): STRESS_SEED replays the same choices.
 *
 * Categories (STRESS_OPS, comma list, default all):
 *   shared      MPI_COMM_WORLD, tags shared by every thread (Multirate style):
 *               a message may match any thread's receive. Per phase either
 *               (A) specific-source tags plus ANY_SOURCE tags, or (B) per
 *               (receiver, sender) pair all ANY_TAG or all specific; counts
 *               per matching class balance, so it cannot deadlock. Receives
 *               are pre-posted Irecvs or late Mprobe/Improbe + Mrecv/Imrecv.
 *               Every payload carries (src rank, src thread, phase, seq, tag,
 *               length, checksum) and its body is regenerated and compared;
 *               per-tag sent/received counts are summed at the phase's end.
 *   p2p         the thread's own communicator (dup of WORLD at start): ordered
 *               traffic, every receive checked for its exact (sender, seq):
 *               non-overtaking per (sender thread, tag); specific, ANY_TAG and
 *               ANY_SOURCE receives mixed; Isend/Issend/Send/Ssend.
 *   probe       Probe/Iprobe/Mprobe/Improbe then Recv/Mrecv/Imrecv.
 *   cancel      receives that are never matched, cancelled while other
 *               traffic flows; MPI_Test_cancelled must say so.
 *   persistent  Send_init/Ssend_init/Recv_init, Start/Startall, several rounds.
 *   part        Psend_init/Precv_init/Pready(_range,_list)/Parrived.
 *   coll        Allreduce, Bcast, Barrier, Ibarrier on the thread's communicator.
 *   comm        Comm_dup / Comm_split / Comm_free of the thread's communicator,
 *               from every thread at once, with traffic on the new one.
 *
 * A watchdog thread ends the run (exit 3) when no thread of the rank made
 * progress for STRESS_WATCHDOG seconds (default 30), naming each thread's
 * phase, category and step; STRESS_GDB=1 also prints gdb backtraces of the
 * rank first. Every failure line carries the seed and the configuration.
 *
 * Narrowing a failure down: STRESS_OPS; STRESS_COMM_SUBSETS=0|1 (comm splits
 * into several sub-communicators; default off on Open MPI above 2 ranks);
 * STRESS_COMPLETE=0..4 forces one completion style (Waitall, Waitany,
 * Waitsome, Testall, Wait/Test each); STRESS_PART_SAME=1 gives partitioned
 * receives the sender's layout; STRESS_NO_ANY_TAG=1 never receives or probes
 * with MPI_ANY_TAG (so that the run may assert no_any_tag, which the shim's
 * shm lane needs); STRESS_DEBUG=1 prints each thread's category
 * per phase. STRESS_INJECT=drop|corrupt tests the test: rank 0 loses or
 * corrupts its first shared message in phase 3 (with shared in STRESS_OPS).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <mpi.h>
#ifdef STRESS_MPISHIM_H
#include "mpishim.h"
#endif

#if defined(MPICH_VERSION) && defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 11
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#if MPI_VERSION >= 4 || defined(MPISHIM_DECLARES_PARTITIONED)
#define HAVE_PART 1
#else
#define HAVE_PART 0
#endif

enum { C_SHARED, C_P2P, C_PROBE, C_CANCEL, C_PERSIST, C_PART, C_COLL, C_COMM, NCAT };
static const char *const cat_name[NCAT] = {"shared", "p2p", "probe", "cancel",
                                           "persistent", "part", "coll", "comm"};

#define HDRW 8 /* header words */
enum { H_MAGIC, H_SRC, H_THR, H_PHASE, H_SEQ, H_TAG, H_LEN, H_CSUM };
#define HDRB ((int)(HDRW * sizeof(uint32_t)))
#define MAGIC 0x5717E55u
#define MAXBODY 65536
#define MAXMSG (HDRB + MAXBODY)
#define NT_SPEC 4            /* shared tags received with a specific source */
#define NT_ANY 2             /* shared tags received with MPI_ANY_SOURCE */
#define NSHTAG (NT_SPEC + NT_ANY)
#define TSPAN 16             /* per-sender tag range on the own communicators */
#define CANCEL_TAG 32001     /* never sent */

/* ------------------------------------------------------------------ PRNG */
static uint64_t mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
typedef struct { uint64_t s; } rng_t;
static rng_t rng_make(uint64_t a, uint64_t b, uint64_t c, uint64_t d, uint64_t e)
{
    rng_t r = {mix64(mix64(mix64(mix64(mix64(a) ^ b) ^ c) ^ d) ^ e)};
    return r;
}
static uint32_t rnd(rng_t *r)
{
    r->s += 0x9E3779B97F4A7C15ull;
    return (uint32_t)(mix64(r->s) >> 32);
}
static int rndn(rng_t *r, int n) { return n <= 1 ? 0 : (int)(rnd(r) % (uint32_t)n); }

/* ------------------------------------------------------------------ state */
struct thr {
    int t;
    pthread_t tid;
    MPI_Comm comm;
    rng_t lr; /* local choices */
    atomic_ulong progress;
    _Atomic(const char *) step;
    atomic_int cat, peer, tag;
    char pending[512]; /* receives a blocked wait is for, for the watchdog (written before the wait) */
    unsigned long batches[NCAT];
};

static int g_rank, g_np, g_T, g_watchdog = 30;
static uint64_t g_seed;
static unsigned g_ops;
static double g_seconds = 10;
static char g_cfg[640];
static atomic_int g_phase = -1;
static atomic_int g_done;
static struct thr *g_thr; /* g_T workers, then the main thread */
static atomic_ulong g_sent[NSHTAG], g_recvd[NSHTAG];
static pthread_barrier_t g_start, g_end;
static int g_quit, g_debug, g_complete = -1;
/* comm: split into several colors (sub-communicators built and used while
 * other ranks build on the parent). Open MPI 4.1.4 itself deadlocks in its
 * context-id agreement when threads do that concurrently (raw host, no
 * shim: 4 of 4 runs at np 4; at np 2, seed 617455892 with STRESS_OPS=comm
 * hung 1 of 2 runs; open-mpi/ompi#2025), so on Open MPI it is off unless
 * STRESS_COMM_SUBSETS=1. */
#ifdef OMPI_MAJOR_VERSION
#define COMM_SUBSETS_DEFAULT "0"
#else
#define COMM_SUBSETS_DEFAULT "1"
#endif
static int g_comm_subsets;
static int g_inject; /* STRESS_INJECT=drop|corrupt: the first shared message of rank 0 in phase 3 */
static int g_no_any_tag; /* STRESS_NO_ANY_TAG=1: specific tags only (the same draws, so seeds replay) */

static void step(struct thr *th, const char *s, int peer, int tag)
{
    atomic_store(&th->step, s);
    atomic_store(&th->peer, peer);
    atomic_store(&th->tag, tag);
    atomic_fetch_add(&th->progress, 1);
}

__attribute__((format(printf, 2, 3), noreturn))
static void fail(struct thr *th, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int c = th ? atomic_load(&th->cat) : -1;
    fprintf(stderr, "FAIL stress rank %d thread %d phase %d op %s step '%s': %s [%s]\n", g_rank,
            th ? th->t : -1, atomic_load(&g_phase), c >= 0 ? cat_name[c] : "-",
            th ? atomic_load(&th->step) : "-", msg, g_cfg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    _exit(1);
}

#define CK(th, call)                                                                  \
    do {                                                                              \
        int ck_rc_ = (call);                                                          \
        if (ck_rc_ != MPI_SUCCESS) {                                                  \
            char ck_s_[MPI_MAX_ERROR_STRING];                                         \
            int ck_l_ = 0;                                                            \
            ck_s_[0] = '\0';                                                          \
            MPI_Error_string(ck_rc_, ck_s_, &ck_l_);                                  \
            fail((th), "%s returned %d (%s) at line %d", #call, ck_rc_, ck_s_, __LINE__); \
        }                                                                             \
    } while (0)

/* Note the receives (source, tag) a completion call is about to wait for. */
static void note_pending(struct thr *th, const char *what, int n, const int *src, const int *tag)
{
    int o = snprintf(th->pending, sizeof th->pending, "%s:", what);
    for (int i = 0; i < n && o < (int)sizeof th->pending - 24; i++) {
        char s[16], t[16];
        snprintf(s, sizeof s, "%d", src[i]);
        snprintf(t, sizeof t, "%d", tag[i]);
        o += snprintf(th->pending + o, sizeof th->pending - (size_t)o, " (%s,%s)",
                      src[i] == MPI_ANY_SOURCE ? "ANY" : s, tag[i] == MPI_ANY_TAG ? "ANY" : t);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "FAIL stress: out of memory\n");
        abort();
    }
    return p;
}

/* ------------------------------------------------------------------ payloads */
static uint32_t body_key(uint32_t src, uint32_t thr, uint32_t phase, uint32_t seq, uint32_t tag)
{
    return (uint32_t)mix64(((uint64_t)src << 48) ^ ((uint64_t)thr << 40) ^ ((uint64_t)phase << 20) ^
                           ((uint64_t)seq << 8) ^ (uint64_t)tag ^ g_seed);
}
static uint8_t body_byte(uint32_t key, uint32_t i)
{
    uint32_t x = key ^ (i * 2654435761u);
    x ^= x >> 15;
    x *= 0x2C1B3C6Du;
    x ^= x >> 12;
    return (uint8_t)x;
}
static uint32_t csum(const uint32_t *h, const uint8_t *body, uint32_t len)
{
    uint32_t c = 2166136261u;
    for (int i = 0; i < H_CSUM; i++)
        c = (c ^ h[i]) * 16777619u;
    for (uint32_t i = 0; i < len; i++)
        c = (c ^ body[i]) * 16777619u;
    return c;
}
/* Returns the message size in bytes. */
static int fill_msg(void *buf, int src, int thr, int phase, int seq, int tag, int len)
{
    uint32_t h[HDRW] = {MAGIC, (uint32_t)src, (uint32_t)thr, (uint32_t)phase, (uint32_t)seq,
                        (uint32_t)tag, (uint32_t)len, 0};
    uint8_t *body = (uint8_t *)buf + HDRB;
    uint32_t key = body_key(h[H_SRC], h[H_THR], h[H_PHASE], h[H_SEQ], h[H_TAG]);
    for (int i = 0; i < len; i++)
        body[i] = body_byte(key, (uint32_t)i);
    h[H_CSUM] = csum(h, body, (uint32_t)len);
    memcpy(buf, h, sizeof h);
    return HDRB + len;
}
/* Checks a received message against its own header and its envelope. */
static void check_msg(struct thr *th, const char *what, const void *buf, int nbytes, int st_src,
                      int st_tag, uint32_t *out_hdr)
{
    uint32_t h[HDRW];
    if (nbytes < HDRB)
        fail(th, "%s: %d bytes received from %d tag %d, shorter than a header", what, nbytes, st_src, st_tag);
    memcpy(h, buf, sizeof h);
    const uint8_t *body = (const uint8_t *)buf + HDRB;
    if (h[H_MAGIC] != MAGIC)
        fail(th, "%s: bad magic %#x from %d tag %d (%d bytes)", what, h[H_MAGIC], st_src, st_tag, nbytes);
    if ((int)h[H_LEN] + HDRB != nbytes)
        fail(th, "%s: %d bytes received but header says %u+%d (src %u thread %u seq %u)", what, nbytes,
             h[H_LEN], HDRB, h[H_SRC], h[H_THR], h[H_SEQ]);
    if ((int)h[H_SRC] != st_src || (int)h[H_TAG] != st_tag)
        fail(th, "%s: status says source %d tag %d, payload says source %u tag %u (thread %u seq %u)", what,
             st_src, st_tag, h[H_SRC], h[H_TAG], h[H_THR], h[H_SEQ]);
    if ((int)h[H_PHASE] != atomic_load(&g_phase))
        fail(th, "%s: message of phase %u (src %u thread %u seq %u tag %u) received in this phase", what,
             h[H_PHASE], h[H_SRC], h[H_THR], h[H_SEQ], h[H_TAG]);
    if (csum(h, body, h[H_LEN]) != h[H_CSUM])
        fail(th, "%s: checksum mismatch (src %u thread %u seq %u tag %u len %u)", what, h[H_SRC], h[H_THR],
             h[H_SEQ], h[H_TAG], h[H_LEN]);
    uint32_t key = body_key(h[H_SRC], h[H_THR], h[H_PHASE], h[H_SEQ], h[H_TAG]);
    for (uint32_t i = 0; i < h[H_LEN]; i++)
        if (body[i] != body_byte(key, i))
            fail(th, "%s: byte %u wrong (src %u thread %u seq %u tag %u len %u)", what, i, h[H_SRC], h[H_THR],
                 h[H_SEQ], h[H_TAG], h[H_LEN]);
    if (out_hdr)
        memcpy(out_hdr, h, sizeof h);
}

static int msg_count(struct thr *th, const MPI_Status *st)
{
    int n = -1;
    CK(th, MPI_Get_count(st, MPI_BYTE, &n));
    return n;
}

/* Mostly small messages, some eager-sized, a few beyond the eager limits. */
static int rand_len(rng_t *r)
{
    int k = rndn(r, 100);
    return k < 60 ? rndn(r, 257) : k < 95 ? rndn(r, 4097) : rndn(r, MAXBODY + 1);
}

/* Complete n requests with a locally chosen completion call. */
static void status_errors(struct thr *th, const char *what, int rc, int n, const MPI_Status *st)
{
    if (rc == MPI_SUCCESS)
        return;
    for (int i = 0; i < n; i++)
        if (rc == MPI_ERR_IN_STATUS && st[i].MPI_ERROR != MPI_SUCCESS && st[i].MPI_ERROR != MPI_ERR_PENDING) {
            char e[MPI_MAX_ERROR_STRING];
            int l = 0;
            e[0] = 0;
            MPI_Error_string(st[i].MPI_ERROR, e, &l);
            fail(th, "%s: request %d of %d failed: %s", what, i, n, e);
        }
    char e[MPI_MAX_ERROR_STRING];
    int l = 0;
    e[0] = 0;
    MPI_Error_string(rc, e, &l);
    char sts[256] = "";
    for (int i = 0; i < n && i < 8; i++)
        snprintf(sts + strlen(sts), sizeof sts - strlen(sts), " %d", st[i].MPI_ERROR);
    fail(th, "%s: error %d (%s); status errors:%s", what, rc, e, sts);
}

static int g_shim_active;
static void complete_all_(struct thr *th, const char *what, int n, MPI_Request *r, MPI_Status *st, int no_testall)
{
    if (n == 0)
        return;
    int how = rndn(&th->lr, 5);
    if (how == 3 && no_testall)
        how = 0;
    if (g_complete >= 0)
        how = g_complete;
    step(th, what, how, n);
    if (how == 0) {
        status_errors(th, what, MPI_Waitall(n, r, st), n, st);
    } else if (how == 1) {
        for (;;) {
            int idx;
            MPI_Status s;
            CK(th, MPI_Waitany(n, r, &idx, &s));
            if (idx == MPI_UNDEFINED)
                break;
            st[idx] = s;
        }
    } else if (how == 2) {
        int *idx = xmalloc(sizeof(int) * (size_t)n), out;
        MPI_Status *s = xmalloc(sizeof(MPI_Status) * (size_t)n);
        for (;;) {
            status_errors(th, what, MPI_Waitsome(n, r, &out, idx, s), out, s);
            if (out == MPI_UNDEFINED)
                break;
            for (int i = 0; i < out; i++)
                st[idx[i]] = s[i];
        }
        free(idx);
        free(s);
    } else if (how == 3) {
        int flag = 0;
        while (!flag) {
            status_errors(th, what, MPI_Testall(n, r, &flag, st), n, st);
            if (!flag)
                sched_yield();
        }
    } else {
        for (int i = 0; i < n; i++) {
            int flag = 0;
            if (rndn(&th->lr, 2))
                CK(th, MPI_Wait(&r[i], &st[i]));
            else
                while (!flag) {
                    CK(th, MPI_Test(&r[i], &flag, &st[i]));
                    if (!flag)
                        sched_yield();
                }
        }
    }
    atomic_fetch_add(&th->progress, 1);
}

static void complete_all(struct thr *th, const char *what, int n, MPI_Request *r, MPI_Status *st)
{
    complete_all_(th, what, n, r, st, 0);
}

/* ------------------------------------------------------------------ shared */
struct pmsg { int tag, len; };

/* Messages thread t of rank s sends to rank d in category cat of phase. */
static int plan(int cat, int phase, int s, int t, int d, int maxn, struct pmsg *m)
{
    rng_t r = rng_make(g_seed, (uint64_t)phase, (uint64_t)s, (uint64_t)t, (uint64_t)(cat * 4096 + d));
    int n = rndn(&r, maxn + 1);
    int modeA = (int)(rng_make(g_seed, (uint64_t)phase, 7, 7, 777).s & 1);
    for (int k = 0; k < n; k++) {
        if (cat == C_SHARED)
            m[k].tag = rndn(&r, modeA ? NSHTAG : NT_SPEC);
        else
            m[k].tag = s * TSPAN + rndn(&r, 4);
        m[k].len = rand_len(&r);
    }
    return n;
}

#define SH_MAXN 5
static void do_shared(struct thr *th, int phase)
{
    int me = g_rank, t = th->t;
    int modeA = (int)(rng_make(g_seed, (uint64_t)phase, 7, 7, 777).s & 1);
    int cap = g_np * SH_MAXN;
    struct pmsg m[SH_MAXN];
    int nr = 0, ns = 0;
    int *rsrc = xmalloc(sizeof(int) * (size_t)cap), *rtag = xmalloc(sizeof(int) * (size_t)cap);
    int *late = xmalloc(sizeof(int) * (size_t)cap);
    void **rbuf = xmalloc(sizeof(void *) * (size_t)cap), **sbuf = xmalloc(sizeof(void *) * (size_t)cap);
    MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)(2 * cap));
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * (size_t)(2 * cap));
    int *reqof = xmalloc(sizeof(int) * (size_t)(2 * cap)); /* request -> receive index, or -1 */

    /* Receives: thread t posts those for thread t's senders (any thread may get them). */
    for (int s = 0; s < g_np; s++) {
        int anytag = !modeA && (rng_make(g_seed, (uint64_t)phase, (uint64_t)me, (uint64_t)s, 555).s & 1) &&
                     !g_no_any_tag;
        int n = plan(C_SHARED, phase, s, t, me, SH_MAXN, m);
        for (int k = 0; k < n; k++) {
            rsrc[nr] = (modeA && m[k].tag >= NT_SPEC) ? MPI_ANY_SOURCE : s;
            rtag[nr] = anytag ? MPI_ANY_TAG : m[k].tag;
            late[nr] = rndn(&th->lr, 5) == 0;
            rbuf[nr] = xmalloc(MAXMSG);
            nr++;
        }
    }
    int nq = 0;
    for (int i = 0; i < nr; i++) {
        if (late[i])
            continue;
        step(th, "shared: MPI_Irecv", rsrc[i], rtag[i]);
        CK(th, MPI_Irecv(rbuf[i], MAXMSG, MPI_BYTE, rsrc[i], rtag[i], MPI_COMM_WORLD, &req[nq]));
        reqof[nq++] = i;
    }
    /* Sends: always nonblocking here (a late Mprobe receiver posts nothing). */
    int seq = 0;
    for (int d = 0; d < g_np; d++) {
        int n = plan(C_SHARED, phase, me, t, d, SH_MAXN, m);
        for (int k = 0; k < n; k++) {
            sbuf[ns] = xmalloc(MAXMSG);
            int bytes = fill_msg(sbuf[ns], me, t, phase, seq++, m[k].tag, m[k].len);
            if (g_inject && phase == 3 && me == 0 && k == 0) { /* testing the test */
                if (g_inject == 1) {
                    free(sbuf[ns]);
                    continue; /* a lost message */
                }
                ((uint8_t *)sbuf[ns])[bytes - 1] ^= 1; /* a corrupted one (a 0-byte body: the checksum) */
            }
            if (rndn(&th->lr, 4) == 0) {
                step(th, "shared: MPI_Issend", d, m[k].tag);
                CK(th, MPI_Issend(sbuf[ns], bytes, MPI_BYTE, d, m[k].tag, MPI_COMM_WORLD, &req[nq]));
            } else {
                step(th, "shared: MPI_Isend", d, m[k].tag);
                CK(th, MPI_Isend(sbuf[ns], bytes, MPI_BYTE, d, m[k].tag, MPI_COMM_WORLD, &req[nq]));
            }
            atomic_fetch_add(&g_sent[m[k].tag], 1);
            reqof[nq++] = -1;
            ns++;
        }
    }
    /* Late receives: matched probes, blocking or polled. */
    for (int i = 0; i < nr; i++) {
        if (!late[i])
            continue;
        MPI_Message msg;
        MPI_Status s;
        if (rndn(&th->lr, 2)) {
            step(th, "shared: MPI_Mprobe", rsrc[i], rtag[i]);
            CK(th, MPI_Mprobe(rsrc[i], rtag[i], MPI_COMM_WORLD, &msg, &s));
        } else {
            int flag = 0;
            step(th, "shared: MPI_Improbe loop", rsrc[i], rtag[i]);
            while (!flag) {
                CK(th, MPI_Improbe(rsrc[i], rtag[i], MPI_COMM_WORLD, &flag, &msg, &s));
                if (!flag)
                    sched_yield();
            }
        }
        int cnt = msg_count(th, &s);
        if (cnt > MAXMSG)
            fail(th, "shared: probed %d bytes from %d tag %d, more than any message", cnt, s.MPI_SOURCE, s.MPI_TAG);
        if (rndn(&th->lr, 2)) {
            step(th, "shared: MPI_Mrecv", s.MPI_SOURCE, s.MPI_TAG);
            CK(th, MPI_Mrecv(rbuf[i], cnt, MPI_BYTE, &msg, &st[0]));
        } else {
            MPI_Request rq;
            step(th, "shared: MPI_Imrecv+MPI_Wait", s.MPI_SOURCE, s.MPI_TAG);
            CK(th, MPI_Imrecv(rbuf[i], cnt, MPI_BYTE, &msg, &rq));
            CK(th, MPI_Wait(&rq, &st[0]));
        }
        if (st[0].MPI_SOURCE != s.MPI_SOURCE || st[0].MPI_TAG != s.MPI_TAG || msg_count(th, &st[0]) != cnt)
            fail(th, "shared: Mrecv status (%d, %d, %d bytes) differs from the probe's (%d, %d, %d bytes)",
                 st[0].MPI_SOURCE, st[0].MPI_TAG, msg_count(th, &st[0]), s.MPI_SOURCE, s.MPI_TAG, cnt);
        check_msg(th, "shared late receive", rbuf[i], cnt, st[0].MPI_SOURCE, st[0].MPI_TAG, NULL);
        if (st[0].MPI_TAG < 0 || st[0].MPI_TAG >= NSHTAG)
            fail(th, "shared: tag %d out of the shared range", st[0].MPI_TAG);
        if (rsrc[i] != MPI_ANY_SOURCE && st[0].MPI_SOURCE != rsrc[i])
            fail(th, "shared: probe for source %d returned source %d", rsrc[i], st[0].MPI_SOURCE);
        if (rtag[i] != MPI_ANY_TAG && st[0].MPI_TAG != rtag[i])
            fail(th, "shared: probe for tag %d returned tag %d", rtag[i], st[0].MPI_TAG);
        atomic_fetch_add(&g_recvd[st[0].MPI_TAG], 1);
    }
    {
        int *ps = xmalloc(sizeof(int) * (size_t)(nq + 1)), *pt = xmalloc(sizeof(int) * (size_t)(nq + 1)), np_ = 0;
        for (int q = 0; q < nq; q++)
            if (reqof[q] >= 0) {
                ps[np_] = rsrc[reqof[q]];
                pt[np_++] = rtag[reqof[q]];
            }
        note_pending(th, "pre-posted shared receives (source,tag) on MPI_COMM_WORLD", np_, ps, pt);
        free(ps);
        free(pt);
    }
    complete_all(th, "shared: completing Irecvs and Isends", nq, req, st);
    th->pending[0] = '\0';
    for (int q = 0; q < nq; q++) {
        int i = reqof[q];
        if (i < 0)
            continue;
        int cnt = msg_count(th, &st[q]);
        check_msg(th, "shared receive", rbuf[i], cnt, st[q].MPI_SOURCE, st[q].MPI_TAG, NULL);
        if (rsrc[i] != MPI_ANY_SOURCE && st[q].MPI_SOURCE != rsrc[i])
            fail(th, "shared: receive from %d completed with source %d", rsrc[i], st[q].MPI_SOURCE);
        if (rtag[i] != MPI_ANY_TAG && st[q].MPI_TAG != rtag[i])
            fail(th, "shared: receive for tag %d completed with tag %d", rtag[i], st[q].MPI_TAG);
        if (st[q].MPI_TAG < 0 || st[q].MPI_TAG >= NSHTAG)
            fail(th, "shared: tag %d out of the shared range", st[q].MPI_TAG);
        atomic_fetch_add(&g_recvd[st[q].MPI_TAG], 1);
    }
    for (int i = 0; i < nr; i++)
        free(rbuf[i]);
    for (int i = 0; i < ns; i++)
        free(sbuf[i]);
    free(rsrc); free(rtag); free(late); free(rbuf); free(sbuf); free(req); free(st); free(reqof);
}

/* ------------------------------------------------------------------ p2p */
#define P2P_MAXN 8
/* Ordered traffic on the thread's communicator; catid keeps plans apart. */
static void do_p2p(struct thr *th, int phase, int catid)
{
    int me = g_rank, t = th->t, np = g_np;
    int cap = np * P2P_MAXN;
    struct pmsg *m = xmalloc(sizeof(struct pmsg) * (size_t)cap);
    int *n = xmalloc(sizeof(int) * (size_t)np), *next = xmalloc(sizeof(int) * (size_t)np);
    int *es = xmalloc(sizeof(int) * (size_t)cap), *ek = xmalloc(sizeof(int) * (size_t)cap);
    void **rbuf = xmalloc(sizeof(void *) * (size_t)cap), **sbuf = xmalloc(sizeof(void *) * (size_t)cap);
    MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)(2 * cap));
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * (size_t)(2 * cap));

    /* Receives, each source's sequence in order, sources interleaved. */
    int total = 0;
    for (int s = 0; s < np; s++) {
        n[s] = plan(catid, phase, s, t, me, P2P_MAXN, m + s * P2P_MAXN);
        next[s] = 0;
        total += n[s];
    }
    int nr = 0;
    while (nr < total) {
        int s = rndn(&th->lr, np);
        while (next[s] == n[s])
            s = (s + 1) % np;
        int k = next[s]++;
        struct pmsg *pm = &m[s * P2P_MAXN + k];
        int kind = rndn(&th->lr, 4);
        if (kind == 2 && g_no_any_tag)
            kind = 0;
        int src = kind == 3 ? MPI_ANY_SOURCE : s, tag = kind == 2 ? MPI_ANY_TAG : pm->tag;
        es[nr] = s;
        ek[nr] = k;
        rbuf[nr] = xmalloc((size_t)(HDRB + pm->len + 64));
        step(th, kind == 3 ? "p2p: MPI_Irecv ANY_SOURCE" : kind == 2 ? "p2p: MPI_Irecv ANY_TAG" : "p2p: MPI_Irecv",
             s, pm->tag);
        CK(th, MPI_Irecv(rbuf[nr], HDRB + pm->len + 64, MPI_BYTE, src, tag, th->comm, &req[nr]));
        nr++;
    }
    /* Sends, each destination's sequence in order, destinations interleaved. */
    struct pmsg sm[P2P_MAXN];
    int nq = nr, ns = 0;
    int *sn = xmalloc(sizeof(int) * (size_t)np);
    struct pmsg *small = xmalloc(sizeof(struct pmsg) * (size_t)cap);
    int stotal = 0;
    for (int d = 0; d < np; d++) {
        sn[d] = plan(catid, phase, me, t, d, P2P_MAXN, sm);
        memcpy(small + d * P2P_MAXN, sm, sizeof sm);
        next[d] = 0;
        stotal += sn[d];
    }
    while (ns < stotal) {
        int d = rndn(&th->lr, np);
        while (next[d] == sn[d])
            d = (d + 1) % np;
        int k = next[d]++;
        struct pmsg *pm = &small[d * P2P_MAXN + k];
        sbuf[ns] = xmalloc((size_t)(HDRB + pm->len));
        int bytes = fill_msg(sbuf[ns], me, t, phase, k, pm->tag, pm->len);
        switch (rndn(&th->lr, 4)) {
        case 0:
            step(th, "p2p: MPI_Send", d, pm->tag);
            CK(th, MPI_Send(sbuf[ns], bytes, MPI_BYTE, d, pm->tag, th->comm));
            break;
        case 1:
            step(th, "p2p: MPI_Ssend", d, pm->tag);
            CK(th, MPI_Ssend(sbuf[ns], bytes, MPI_BYTE, d, pm->tag, th->comm));
            break;
        case 2:
            step(th, "p2p: MPI_Issend", d, pm->tag);
            CK(th, MPI_Issend(sbuf[ns], bytes, MPI_BYTE, d, pm->tag, th->comm, &req[nq++]));
            break;
        default:
            step(th, "p2p: MPI_Isend", d, pm->tag);
            CK(th, MPI_Isend(sbuf[ns], bytes, MPI_BYTE, d, pm->tag, th->comm, &req[nq++]));
        }
        ns++;
    }
    {
        int *ps = xmalloc(sizeof(int) * (size_t)(nr + 1)), *pt = xmalloc(sizeof(int) * (size_t)(nr + 1));
        for (int i = 0; i < nr; i++) {
            ps[i] = es[i];
            pt[i] = m[es[i] * P2P_MAXN + ek[i]].tag;
        }
        note_pending(th, "p2p receives (source,tag) on the thread's communicator, in order", nr, ps, pt);
        free(ps);
        free(pt);
    }
    complete_all(th, "p2p: completing receives and sends", nq, req, st);
    th->pending[0] = '\0';
    for (int i = 0; i < nr; i++) {
        uint32_t h[HDRW];
        int s = es[i], k = ek[i];
        check_msg(th, "p2p receive", rbuf[i], msg_count(th, &st[i]), st[i].MPI_SOURCE, st[i].MPI_TAG, h);
        if (st[i].MPI_SOURCE != s || (int)h[H_SEQ] != k || (int)h[H_THR] != t ||
            st[i].MPI_TAG != m[s * P2P_MAXN + k].tag)
            fail(th, "p2p: order violated: receive #%d from source %d expected seq %d tag %d of thread %d, "
                     "got source %d seq %u tag %d thread %u",
                 i, s, k, m[s * P2P_MAXN + k].tag, t, st[i].MPI_SOURCE, h[H_SEQ], st[i].MPI_TAG, h[H_THR]);
    }
    for (int i = 0; i < nr; i++)
        free(rbuf[i]);
    for (int i = 0; i < ns; i++)
        free(sbuf[i]);
    free(m); free(n); free(next); free(es); free(ek); free(rbuf); free(sbuf); free(req); free(st);
    free(sn); free(small);
}

/* ------------------------------------------------------------------ probe */
static void do_probe(struct thr *th, int phase)
{
    int me = g_rank, t = th->t, np = g_np;
    int cap = np * P2P_MAXN;
    struct pmsg *m = xmalloc(sizeof(struct pmsg) * (size_t)cap);
    int *n = xmalloc(sizeof(int) * (size_t)np);
    char *got = xmalloc((size_t)cap);
    void **sbuf = xmalloc(sizeof(void *) * (size_t)cap);
    MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)cap);
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * (size_t)cap);
    int total = 0, ns = 0;
    memset(got, 0, (size_t)cap);
    for (int s = 0; s < np; s++) {
        n[s] = plan(C_PROBE, phase, s, t, me, P2P_MAXN, m + s * P2P_MAXN);
        total += n[s];
    }
    for (int d = 0; d < np; d++) {
        struct pmsg sm[P2P_MAXN];
        int k, c = plan(C_PROBE, phase, me, t, d, P2P_MAXN, sm);
        for (k = 0; k < c; k++) {
            sbuf[ns] = xmalloc((size_t)(HDRB + sm[k].len));
            int bytes = fill_msg(sbuf[ns], me, t, phase, k, sm[k].tag, sm[k].len);
            step(th, "probe: MPI_Isend", d, sm[k].tag);
            CK(th, MPI_Isend(sbuf[ns], bytes, MPI_BYTE, d, sm[k].tag, th->comm, &req[ns]));
            ns++;
        }
    }
    for (int done = 0; done < total; done++) {
        /* What to probe for: anything, or one message still to come. */
        int src = MPI_ANY_SOURCE, tag = MPI_ANY_TAG, how = rndn(&th->lr, 4);
        int w = rndn(&th->lr, 4);
        if (w < 2 && g_no_any_tag)
            w += 2; /* the tag named: 2 keeps a wildcard source, 3 names both */
        if (w > 0) {
            int i = rndn(&th->lr, cap);
            while (i >= 0) {
                int s = i / P2P_MAXN, k = i % P2P_MAXN;
                if (k < n[s] && !got[i])
                    break;
                i = (i + 1) % cap;
            }
            int s = i / P2P_MAXN;
            if (w != 2)
                src = s;
            if (w != 1)
                tag = m[i].tag;
        }
        MPI_Status s, rs;
        MPI_Message msg = MPI_MESSAGE_NULL;
        int flag = 0;
        void *buf;
        int cnt;
        if (how == 0 || how == 1) {
            if (how == 0) {
                step(th, "probe: MPI_Probe", src, tag);
                CK(th, MPI_Probe(src, tag, th->comm, &s));
            } else {
                step(th, "probe: MPI_Iprobe loop", src, tag);
                while (!flag) {
                    CK(th, MPI_Iprobe(src, tag, th->comm, &flag, &s));
                    if (!flag)
                        sched_yield();
                }
            }
            cnt = msg_count(th, &s);
            buf = xmalloc((size_t)cnt);
            step(th, "probe: MPI_Recv of the probed message", s.MPI_SOURCE, s.MPI_TAG);
            CK(th, MPI_Recv(buf, cnt, MPI_BYTE, s.MPI_SOURCE, s.MPI_TAG, th->comm, &rs));
        } else {
            if (how == 2) {
                step(th, "probe: MPI_Mprobe", src, tag);
                CK(th, MPI_Mprobe(src, tag, th->comm, &msg, &s));
            } else {
                step(th, "probe: MPI_Improbe loop", src, tag);
                while (!flag) {
                    CK(th, MPI_Improbe(src, tag, th->comm, &flag, &msg, &s));
                    if (!flag)
                        sched_yield();
                }
            }
            cnt = msg_count(th, &s);
            buf = xmalloc((size_t)cnt);
            if (rndn(&th->lr, 2)) {
                step(th, "probe: MPI_Mrecv", s.MPI_SOURCE, s.MPI_TAG);
                CK(th, MPI_Mrecv(buf, cnt, MPI_BYTE, &msg, &rs));
            } else {
                MPI_Request rq;
                step(th, "probe: MPI_Imrecv+MPI_Wait", s.MPI_SOURCE, s.MPI_TAG);
                CK(th, MPI_Imrecv(buf, cnt, MPI_BYTE, &msg, &rq));
                CK(th, MPI_Wait(&rq, &rs));
            }
        }
        if (rs.MPI_SOURCE != s.MPI_SOURCE || rs.MPI_TAG != s.MPI_TAG || msg_count(th, &rs) != cnt)
            fail(th, "probe: received (%d, %d, %d bytes), probed (%d, %d, %d bytes)", rs.MPI_SOURCE, rs.MPI_TAG,
                 msg_count(th, &rs), s.MPI_SOURCE, s.MPI_TAG, cnt);
        if ((src != MPI_ANY_SOURCE && s.MPI_SOURCE != src) || (tag != MPI_ANY_TAG && s.MPI_TAG != tag))
            fail(th, "probe: asked for (%d, %d), got (%d, %d)", src, tag, s.MPI_SOURCE, s.MPI_TAG);
        uint32_t h[HDRW];
        check_msg(th, "probed receive", buf, cnt, rs.MPI_SOURCE, rs.MPI_TAG, h);
        int ss = rs.MPI_SOURCE, k = (int)h[H_SEQ];
        if ((int)h[H_THR] != t || k >= n[ss] || got[ss * P2P_MAXN + k] || m[ss * P2P_MAXN + k].tag != rs.MPI_TAG)
            fail(th, "probe: unexpected message source %d thread %u seq %d tag %d (sender planned %d)", ss,
                 h[H_THR], k, rs.MPI_TAG, n[ss]);
        /* Non-overtaking: every earlier message of that sender with this tag came first. */
        for (int j = 0; j < k; j++)
            if (m[ss * P2P_MAXN + j].tag == rs.MPI_TAG && !got[ss * P2P_MAXN + j])
                fail(th, "probe: seq %d from %d tag %d overtook seq %d", k, ss, rs.MPI_TAG, j);
        got[ss * P2P_MAXN + k] = 1;
        free(buf);
        atomic_fetch_add(&th->progress, 1);
    }
    complete_all(th, "probe: completing Isends", ns, req, st);
    for (int i = 0; i < ns; i++)
        free(sbuf[i]);
    free(m); free(n); free(got); free(sbuf); free(req); free(st);
}

/* ------------------------------------------------------------------ cancel */
static void do_cancel(struct thr *th, int phase)
{
    int n = 1 + rndn(&th->lr, 3);
    MPI_Request r[3];
    MPI_Comm c[3];
    char buf[3][64];
    for (int i = 0; i < n; i++) {
        int src = rndn(&th->lr, g_np + 1) - 1;
        if (src < 0)
            src = MPI_ANY_SOURCE;
        c[i] = rndn(&th->lr, 3) == 0 ? MPI_COMM_WORLD : th->comm;
        step(th, "cancel: MPI_Irecv that nothing matches", src, CANCEL_TAG);
        CK(th, MPI_Irecv(buf[i], 64, MPI_BYTE, src, CANCEL_TAG, c[i], &r[i]));
    }
    do_p2p(th, phase, C_CANCEL); /* traffic while they are pending */
    for (int i = 0; i < n; i++) {
        MPI_Status s;
        int flag = 0;
        step(th, "cancel: MPI_Cancel", i, CANCEL_TAG);
        CK(th, MPI_Cancel(&r[i]));
        if (rndn(&th->lr, 2)) {
            step(th, "cancel: MPI_Wait on the cancelled receive", i, CANCEL_TAG);
            CK(th, MPI_Wait(&r[i], &s));
        } else {
            step(th, "cancel: MPI_Test loop on the cancelled receive", i, CANCEL_TAG);
            while (!flag) {
                CK(th, MPI_Test(&r[i], &flag, &s));
                if (!flag)
                    sched_yield();
            }
        }
        CK(th, MPI_Test_cancelled(&s, &flag));
        if (!flag)
            fail(th, "cancel: a receive that nothing can match completed without being cancelled "
                     "(source %d tag %d)", s.MPI_SOURCE, s.MPI_TAG);
    }
}

/* ------------------------------------------------------------------ persistent */
static void do_persistent(struct thr *th, int phase)
{
    int me = g_rank, t = th->t, np = g_np;
    rng_t pr = rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)t, 400);
    int rounds = 2 + rndn(&pr, 4);
    MPI_Request *req = xmalloc(sizeof(MPI_Request) * (size_t)(2 * np));
    MPI_Status *st = xmalloc(sizeof(MPI_Status) * (size_t)(2 * np));
    void **buf = xmalloc(sizeof(void *) * (size_t)(2 * np));
    int *len = xmalloc(sizeof(int) * (size_t)(2 * np));
    for (int i = 0; i < 2 * np; i++) {
        /* 0..np-1: receive from i; np..: send to i-np. Length planned by the sender. */
        int s = i < np ? i : me, d = i < np ? me : i - np;
        rng_t lr = rng_make(g_seed, (uint64_t)phase, (uint64_t)s, (uint64_t)t, (uint64_t)(401 + d));
        len[i] = rand_len(&lr);
        buf[i] = xmalloc((size_t)(HDRB + len[i]));
        if (i < np) {
            step(th, "persistent: MPI_Recv_init", s, s * TSPAN + 5);
            CK(th, MPI_Recv_init(buf[i], HDRB + len[i], MPI_BYTE, s, s * TSPAN + 5, th->comm, &req[i]));
        } else if (rndn(&th->lr, 3) == 0) {
            step(th, "persistent: MPI_Ssend_init", d, me * TSPAN + 5);
            CK(th, MPI_Ssend_init(buf[i], HDRB + len[i], MPI_BYTE, d, me * TSPAN + 5, th->comm, &req[i]));
        } else {
            step(th, "persistent: MPI_Send_init", d, me * TSPAN + 5);
            CK(th, MPI_Send_init(buf[i], HDRB + len[i], MPI_BYTE, d, me * TSPAN + 5, th->comm, &req[i]));
        }
    }
    for (int round = 0; round < rounds; round++) {
        for (int i = np; i < 2 * np; i++)
            fill_msg(buf[i], me, t, phase, round, me * TSPAN + 5, len[i]);
        if (rndn(&th->lr, 2)) {
            step(th, "persistent: MPI_Startall", round, -1);
            CK(th, MPI_Startall(2 * np, req));
        } else {
            step(th, "persistent: MPI_Start each", round, -1);
            for (int i = 0; i < 2 * np; i++)
                CK(th, MPI_Start(&req[i]));
        }
        complete_all(th, "persistent: completing a round", 2 * np, req, st);
        for (int i = 0; i < np; i++) {
            uint32_t h[HDRW];
            check_msg(th, "persistent receive", buf[i], msg_count(th, &st[i]), st[i].MPI_SOURCE, st[i].MPI_TAG, h);
            if (st[i].MPI_SOURCE != i || (int)h[H_SEQ] != round || (int)h[H_THR] != t)
                fail(th, "persistent: round %d receive from %d got source %d thread %u round %u", round, i,
                     st[i].MPI_SOURCE, h[H_THR], h[H_SEQ]);
            memset(buf[i], 0, (size_t)HDRB);
        }
    }
    for (int i = 0; i < 2 * np; i++) {
        step(th, "persistent: MPI_Request_free", i, -1);
        CK(th, MPI_Request_free(&req[i]));
        free(buf[i]);
    }
    free(req); free(st); free(buf); free(len);
}

/* ------------------------------------------------------------------ partitioned */
#if HAVE_PART
static int part_word(int src, int t, int phase, int round, int i)
{
    return (int)(uint32_t)mix64(((uint64_t)src << 52) ^ ((uint64_t)t << 44) ^ ((uint64_t)phase << 20) ^
                                ((uint64_t)round << 16) ^ (uint64_t)i ^ g_seed);
}
static void do_part(struct thr *th, int phase)
{
    int me = g_rank, t = th->t, np = g_np;
    int dest = (me + 1) % np, src = (me + np - 1) % np;
    rng_t sp = rng_make(g_seed, (uint64_t)phase, (uint64_t)me, (uint64_t)t, 500);
    rng_t rp = rng_make(g_seed, (uint64_t)phase, (uint64_t)src, (uint64_t)t, 500);
    int sparts = 1 + rndn(&sp, 8), scnt = 1 + rndn(&sp, 512);
    int rparts = 1 + rndn(&rp, 8), rcnt = 1 + rndn(&rp, 512);
    /* The receive side's layout covers the sender's total, in 1, 2 or the same partitions. */
    {
        int total = rparts * rcnt, k = rndn(&rp, 3);
        rparts = getenv("STRESS_PART_SAME") ? rparts : k == 0 ? 1 : (k == 1 && total % 2 == 0) ? 2 : rparts;
        rcnt = total / rparts;
    }
    /* Both directions of a thread's ring run the same number of rounds. */
    int rounds = 1 + (int)(rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)t, 501).s % 3);
    int *sb = xmalloc(sizeof(int) * (size_t)(sparts * scnt)), *rb = xmalloc(sizeof(int) * (size_t)(rparts * rcnt));
    MPI_Request r[2];
    MPI_Status st[2];
    int tag = 100 + t;
    step(th, "part: MPI_Precv_init", src, tag);
    CK(th, MPI_Precv_init(rb, rparts, rcnt, MPI_INT, src, tag, th->comm, MPI_INFO_NULL, &r[0]));
    step(th, "part: MPI_Psend_init", dest, tag);
    CK(th, MPI_Psend_init(sb, sparts, scnt, MPI_INT, dest, tag, th->comm, MPI_INFO_NULL, &r[1]));
    int *order = xmalloc(sizeof(int) * (size_t)sparts);
    char *seen = xmalloc((size_t)rparts);
    for (int round = 0; round < rounds; round++) {
        for (int i = 0; i < rparts * rcnt; i++)
            rb[i] = -1;
        memset(seen, 0, (size_t)rparts);
        int nseen = 0;
        if (rndn(&th->lr, 2)) {
            step(th, "part: MPI_Startall", round, tag);
            CK(th, MPI_Startall(2, r));
        } else {
            step(th, "part: MPI_Start (receive, then send)", round, tag);
            CK(th, MPI_Start(&r[0]));
            CK(th, MPI_Start(&r[1]));
        }
        for (int i = 0; i < sparts; i++)
            order[i] = i;
        for (int i = sparts - 1; i > 0; i--) {
            int j = rndn(&th->lr, i + 1), x = order[i];
            order[i] = order[j];
            order[j] = x;
        }
        int style = rndn(&th->lr, 3);
        for (int k = 0; k < sparts; k++) {
            int p = order[k];
            for (int i = 0; i < scnt; i++)
                sb[p * scnt + i] = part_word(me, t, phase, round, p * scnt + i);
            if (style == 0 || k == 0) {
                step(th, "part: MPI_Pready", p, tag);
                CK(th, MPI_Pready(p, r[1]));
            } else if (style == 1) {
                step(th, "part: MPI_Pready_list", p, tag);
                CK(th, MPI_Pready_list(1, &p, r[1]));
            } else {
                step(th, "part: MPI_Pready_range", p, tag);
                CK(th, MPI_Pready_range(p, p, r[1]));
            }
            int q = rndn(&th->lr, rparts), f = 0;
            step(th, "part: MPI_Parrived", q, tag);
            CK(th, MPI_Parrived(r[0], q, &f));
            if (f && !seen[q]) {
                for (int i = 0; i < rcnt; i++)
                    if (rb[q * rcnt + i] != part_word(src, t, phase, round, q * rcnt + i))
                        fail(th, "part: round %d partition %d word %d wrong right after MPI_Parrived", round, q, i);
                seen[q] = 1;
                nseen++;
            }
        }
        step(th, "part: MPI_Parrived loop over the receive partitions", nseen, tag);
        while (nseen < rparts) {
            int q = rndn(&th->lr, rparts), f = 0;
            if (seen[q])
                continue;
            CK(th, MPI_Parrived(r[0], q, &f));
            if (f) {
                seen[q] = 1;
                nseen++;
                atomic_fetch_add(&th->progress, 1);
            } else {
                sched_yield();
            }
        }
        /* Debian's MPICH 4.0.2, natively: MPI_Testall over partitioned requests
         * returns MPI_ERR_IN_STATUS with every status MPI_SUCCESS; not used there. */
        complete_all_(th, "part: completing both requests", 2, r, st, !g_shim_active);
        for (int i = 0; i < rparts * rcnt; i++)
            if (rb[i] != part_word(src, t, phase, round, i))
                fail(th, "part: round %d word %d of %d from %d wrong (%d partitions of %d)", round, i,
                     rparts * rcnt, src, rparts, rcnt);
    }
    step(th, "part: MPI_Request_free", -1, tag);
    CK(th, MPI_Request_free(&r[0]));
    CK(th, MPI_Request_free(&r[1]));
    free(sb); free(rb); free(order); free(seen);
}
#endif

/* ------------------------------------------------------------------ coll */
static int coll_val(int rank, int k, int i, int phase) { return (int)(mix64((uint64_t)rank * 1000003u + (uint64_t)k * 7919u + (uint64_t)i + ((uint64_t)phase << 32)) & 0xFFFF); }

static void coll_ops(struct thr *th, MPI_Comm comm, int phase, rng_t *pr, const char *what)
{
    int me, np;
    CK(th, MPI_Comm_rank(comm, &me));
    CK(th, MPI_Comm_size(comm, &np));
    int nops = 1 + rndn(pr, 5);
    for (int k = 0; k < nops; k++) {
        int op = rndn(pr, 4);
        if (op == 0) {
            int n = 1 + rndn(pr, 64);
            int *in = xmalloc(sizeof(int) * (size_t)n), *out = xmalloc(sizeof(int) * (size_t)n);
            for (int i = 0; i < n; i++)
                in[i] = coll_val(me, k, i, phase);
            step(th, "coll/comm: MPI_Allreduce", k, n);
            CK(th, MPI_Allreduce(in, out, n, MPI_INT, MPI_SUM, comm));
            for (int i = 0; i < n; i++) {
                int e = 0;
                for (int q = 0; q < np; q++)
                    e += coll_val(q, k, i, phase);
                if (out[i] != e)
                    fail(th, "%s: MPI_Allreduce element %d of %d is %d, expected %d (size %d)", what, i, n, out[i], e, np);
            }
            free(in);
            free(out);
        } else if (op == 1) {
            int root = rndn(pr, np), len = rndn(pr, 4097);
            void *b = xmalloc((size_t)(HDRB + len));
            if (me == root)
                fill_msg(b, root, th->t, phase, k, 1000 + k, len);
            else
                memset(b, 0, (size_t)(HDRB + len));
            step(th, "coll/comm: MPI_Bcast", root, len);
            CK(th, MPI_Bcast(b, HDRB + len, MPI_BYTE, root, comm));
            check_msg(th, what, b, HDRB + len, root, 1000 + k, NULL);
            free(b);
        } else if (op == 2) {
            step(th, "coll/comm: MPI_Barrier", k, -1);
            CK(th, MPI_Barrier(comm));
        } else {
            MPI_Request r;
            MPI_Status s;
            step(th, "coll/comm: MPI_Ibarrier", k, -1);
            CK(th, MPI_Ibarrier(comm, &r));
            complete_all(th, "coll/comm: completing MPI_Ibarrier", 1, &r, &s);
        }
    }
}

static void do_coll(struct thr *th, int phase)
{
    rng_t pr = rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)th->t, 600);
    coll_ops(th, th->comm, phase, &pr, "coll");
}

/* ------------------------------------------------------------------ comm */
static void do_comm(struct thr *th, int phase)
{
    rng_t pr = rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)th->t, 700);
    int nops = 1 + rndn(&pr, 3);
    for (int k = 0; k < nops; k++) {
        MPI_Comm nc, nc2 = MPI_COMM_NULL;
        int expect = g_np;
        if (rndn(&pr, 2)) {
            step(th, "comm: MPI_Comm_dup", k, -1);
            CK(th, MPI_Comm_dup(th->comm, &nc));
        } else {
            int ncolors = 1 + rndn(&pr, 2), mycolor = -1;
            if (!g_comm_subsets)
                ncolors = 1;
            expect = 0;
            for (int q = 0; q < g_np; q++) {
                int c = (int)(rng_make(g_seed, (uint64_t)phase, (uint64_t)q, (uint64_t)th->t, (uint64_t)(710 + k)).s %
                              (uint64_t)ncolors);
                if (q == g_rank)
                    mycolor = c;
            }
            for (int q = 0; q < g_np; q++)
                if ((int)(rng_make(g_seed, (uint64_t)phase, (uint64_t)q, (uint64_t)th->t, (uint64_t)(710 + k)).s %
                          (uint64_t)ncolors) == mycolor)
                    expect++;
            step(th, "comm: MPI_Comm_split", k, mycolor);
            CK(th, MPI_Comm_split(th->comm, mycolor, rndn(&th->lr, 100), &nc));
        }
        int sz;
        CK(th, MPI_Comm_size(nc, &sz));
        if (sz != expect)
            fail(th, "comm: new communicator has %d ranks, expected %d", sz, expect);
        /* Collectives on the new communicator need the same plan on its members only. */
        int mr;
        CK(th, MPI_Comm_rank(nc, &mr));
        (void)mr;
        /* The same plan on every new communicator (not only per communicator):
         * all ranks then construct in the same order, which Open MPI 4.1's
         * context-id agreement needs even natively (see docs/design.md, known limits). */
        rng_t cp = rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)th->t, (uint64_t)(720 + k));
        if (rndn(&cp, 2)) {
            step(th, "comm: MPI_Comm_dup of the new communicator", k, -1);
            CK(th, MPI_Comm_dup(nc, &nc2));
        }
        coll_ops(th, nc2 != MPI_COMM_NULL ? nc2 : nc, phase, &cp, "comm");
        if (nc2 != MPI_COMM_NULL) {
            step(th, "comm: MPI_Comm_free (dup of new)", k, -1);
            CK(th, MPI_Comm_free(&nc2));
        }
        step(th, "comm: MPI_Comm_free", k, -1);
        CK(th, MPI_Comm_free(&nc));
    }
}

/* ------------------------------------------------------------------ threads */
static int pick_cat(int phase, int t)
{
    rng_t r = rng_make(g_seed, (uint64_t)phase, 0, (uint64_t)t, 1);
    /* weights: shared traffic most often */
    static const int w[NCAT] = {4, 3, 2, 1, 2, 1, 2, 1};
    int sum = 0;
    for (int c = 0; c < NCAT; c++)
        if (g_ops & (1u << c))
            sum += w[c];
    int x = rndn(&r, sum);
    for (int c = 0; c < NCAT; c++)
        if (g_ops & (1u << c)) {
            if (x < w[c])
                return c;
            x -= w[c];
        }
    return C_SHARED;
}

static void *worker(void *arg)
{
    struct thr *th = arg;
    for (;;) {
        pthread_barrier_wait(&g_start);
        if (g_quit)
            break;
        int phase = atomic_load(&g_phase), c = pick_cat(phase, th->t);
        atomic_store(&th->cat, c);
        th->batches[c]++;
        if (g_debug)
            fprintf(stderr, "DEBUG rank %d thread %d phase %d: %s\n", g_rank, th->t, phase, cat_name[c]);
        switch (c) {
        case C_SHARED: do_shared(th, phase); break;
        case C_P2P: do_p2p(th, phase, C_P2P); break;
        case C_PROBE: do_probe(th, phase); break;
        case C_CANCEL: do_cancel(th, phase); break;
        case C_PERSIST: do_persistent(th, phase); break;
#if HAVE_PART
        case C_PART: do_part(th, phase); break;
#endif
        case C_COLL: do_coll(th, phase); break;
        case C_COMM: do_comm(th, phase); break;
        default: break;
        }
        atomic_store(&th->cat, -1);
        step(th, "idle (batch done, waiting for the other threads)", -1, -1);
        pthread_barrier_wait(&g_end);
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    unsigned long last = 0;
    int still = 0;
    while (!atomic_load(&g_done)) {
        sleep(1);
        unsigned long sum = 0;
        for (int i = 0; i <= g_T; i++)
            sum += atomic_load(&g_thr[i].progress);
        if (sum != last) {
            last = sum;
            still = 0;
            continue;
        }
        if (++still < g_watchdog || atomic_load(&g_done))
            continue;
        for (int i = 0; i <= g_T; i++) {
            struct thr *th = &g_thr[i];
            int c = atomic_load(&th->cat);
            fprintf(stderr, "WATCHDOG rank %d %s %d: phase %d op %s step '%s' (peer/arg %d, tag/arg %d)\n", g_rank,
                    i == g_T ? "main thread" : "thread", i, atomic_load(&g_phase), c >= 0 ? cat_name[c] : "-",
                    atomic_load(&th->step), atomic_load(&th->peer), atomic_load(&th->tag));
            if (th->pending[0] && c >= 0)
                fprintf(stderr, "WATCHDOG rank %d thread %d waits for %s\n", g_rank, i, th->pending);
        }
        fprintf(stderr, "FAIL stress rank %d (pid %d): watchdog: no progress for %d s in phase %d [%s]\n", g_rank,
                (int)getpid(), g_watchdog, atomic_load(&g_phase), g_cfg);
        fflush(stderr);
        const char *gdb = getenv("STRESS_GDB");
        if (gdb && strcmp(gdb, "1") == 0) {
            char cmd[256];
            snprintf(cmd, sizeof cmd, "gdb -p %d -batch -ex 'thread apply all bt' 1>&2 2>/dev/null", (int)getpid());
            if (system(cmd) != 0)
                fprintf(stderr, "(gdb failed)\n");
        }
        _exit(3);
    }
    return NULL;
}

/* ------------------------------------------------------------------ main */
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static const char *envs(const char *n, const char *dflt)
{
    const char *v = getenv(n);
    return v && v[0] ? v : dflt;
}

int main(int argc, char **argv)
{
    int provided;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "FAIL stress: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_np);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN); /* errors are failures with context */
    if (argc > 1)
        g_seconds = atof(argv[1]);
    g_T = atoi(envs("STRESS_THREADS", "4"));
    if (g_T < 1 || g_T > 64)
        g_T = 4;
    g_watchdog = atoi(envs("STRESS_WATCHDOG", "30"));
    g_debug = atoi(envs("STRESS_DEBUG", "0"));
    g_inject = strcmp(envs("STRESS_INJECT", ""), "drop") == 0 ? 1 : strcmp(envs("STRESS_INJECT", ""), "corrupt") == 0 ? 2 : 0;
    g_comm_subsets = atoi(envs("STRESS_COMM_SUBSETS", COMM_SUBSETS_DEFAULT));
    g_complete = atoi(envs("STRESS_COMPLETE", "-1")); /* force one completion style 0..4 (debugging) */
    g_no_any_tag = atoi(envs("STRESS_NO_ANY_TAG", "0"));
    if (g_watchdog < 2)
        g_watchdog = 2;

    /* Seed: STRESS_SEED, else rank 0's clock, the same on every rank. */
    unsigned long long seed = 0;
    const char *se = getenv("STRESS_SEED");
    if (se && se[0])
        seed = strtoull(se, NULL, 0);
    else if (g_rank == 0)
        seed = ((unsigned long long)time(NULL) * 1000003ull ^ (unsigned long long)getpid()) % 1000000000ull;
    MPI_Bcast(&seed, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    g_seed = seed;

    /* Categories. */
    const char *ops = envs("STRESS_OPS", "all");
    char opsbuf[256], skipped[128] = "";
    snprintf(opsbuf, sizeof opsbuf, "%s", ops);
    for (char *tok = strtok(opsbuf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int c = 0; c < NCAT; c++)
            if (strcmp(tok, "all") == 0 || strcmp(tok, cat_name[c]) == 0) {
                g_ops |= 1u << c;
                found = 1;
            }
        if (!found) {
            if (g_rank == 0)
                fprintf(stderr, "FAIL stress: STRESS_OPS: unknown category '%s' (known: all", tok);
            for (int c = 0; g_rank == 0 && c < NCAT; c++)
                fprintf(stderr, ",%s", cat_name[c]);
            if (g_rank == 0)
                fprintf(stderr, ")\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (!HAVE_PART && (g_ops & (1u << C_PART))) {
        g_ops &= ~(1u << C_PART);
        snprintf(skipped, sizeof skipped, " (part skipped: no partitioned calls in this build)");
    }
    if (g_ops == 0)
        g_ops = 1u << C_SHARED;
    char opsnow[128] = "";
    for (int c = 0; c < NCAT; c++)
        if (g_ops & (1u << c))
            snprintf(opsnow + strlen(opsnow), sizeof opsnow - strlen(opsnow), "%s%s", opsnow[0] ? "," : "", cat_name[c]);

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int liblen;
    MPI_Get_library_version(lib, &liblen);
    lib[strcspn(lib, ",\n")] = '\0';
    snprintf(g_cfg, sizeof g_cfg,
             "seed=%llu np=%d threads=%d ops=%s seconds=%g host='%.40s' MPISHIM_DISABLE=%s MPISHIM_PROGRESS=%s "
             "MPISHIM_SOLO=%s; replay: STRESS_SEED=%llu STRESS_THREADS=%d STRESS_OPS=%s STRESS_COMM_SUBSETS=%d",
             seed, g_np, g_T, opsnow, g_seconds, lib, envs("MPISHIM_DISABLE", "-"), envs("MPISHIM_PROGRESS", "-"),
             envs("MPISHIM_SOLO", "-"), seed, g_T, opsnow, g_comm_subsets);
    if (provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "FAIL stress: MPI_THREAD_MULTIPLE not provided (%d) [%s]\n", provided, g_cfg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    {
        void *sym = dlsym(RTLD_DEFAULT, "mpishim_active");
        int (*fn)(void) = NULL;
        if (sym)
            memcpy(&fn, &sym, sizeof fn);
        g_shim_active = fn ? fn() : 0;
    }
    if (g_rank == 0) {
        printf("stress: seed=%llu np=%d threads=%d ops=%s seconds=%g%s\n", seed, g_np, g_T, opsnow, g_seconds,
               skipped);
        fflush(stdout);
    }

    g_thr = calloc((size_t)g_T + 1, sizeof *g_thr);
    for (int i = 0; i <= g_T; i++) {
        g_thr[i].t = i;
        g_thr[i].lr = rng_make(g_seed, 0xABCDu, (uint64_t)g_rank, (uint64_t)i, 3);
        atomic_store(&g_thr[i].step, "start");
        atomic_store(&g_thr[i].cat, -1);
    }
    struct thr *mt = &g_thr[g_T];
    pthread_t wd;
    pthread_create(&wd, NULL, watchdog, NULL);
    for (int i = 0; i < g_T; i++) {
        step(mt, "MPI_Comm_dup of MPI_COMM_WORLD for a thread", i, -1);
        CK(mt, MPI_Comm_dup(MPI_COMM_WORLD, &g_thr[i].comm));
        CK(mt, MPI_Comm_set_errhandler(g_thr[i].comm, MPI_ERRORS_RETURN));
    }
    pthread_barrier_init(&g_start, NULL, (unsigned)g_T + 1);
    pthread_barrier_init(&g_end, NULL, (unsigned)g_T + 1);
    for (int i = 0; i < g_T; i++)
        pthread_create(&g_thr[i].tid, NULL, worker, &g_thr[i]);

    double t0 = now();
    int phase;
    for (phase = 0;; phase++) {
        int go = now() - t0 < g_seconds || phase < 2;
        step(mt, "MPI_Bcast: next phase?", phase, -1);
        CK(mt, MPI_Bcast(&go, 1, MPI_INT, 0, MPI_COMM_WORLD));
        if (!go)
            break;
        for (int i = 0; i < NSHTAG; i++) {
            atomic_store(&g_sent[i], 0);
            atomic_store(&g_recvd[i], 0);
        }
        atomic_store(&g_phase, phase);
        step(mt, "waiting for the worker threads", phase, -1);
        pthread_barrier_wait(&g_start);
        pthread_barrier_wait(&g_end);
        /* Nothing lost: per shared tag, messages sent == received, over all ranks. */
        long cnt[2 * NSHTAG], sum[2 * NSHTAG];
        for (int i = 0; i < NSHTAG; i++) {
            cnt[i] = (long)atomic_load(&g_sent[i]);
            cnt[NSHTAG + i] = (long)atomic_load(&g_recvd[i]);
        }
        step(mt, "phase end: MPI_Allreduce of the shared counts", phase, -1);
        CK(mt, MPI_Allreduce(cnt, sum, 2 * NSHTAG, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
        for (int i = 0; i < NSHTAG; i++)
            if (sum[i] != sum[NSHTAG + i])
                fail(mt, "phase end: shared tag %d: %ld messages sent, %ld received", i, sum[i], sum[NSHTAG + i]);
        /* Nothing extra: no message may be left over (every receive is done);
         * before the barrier, so that no rank can have begun the next phase.
         * (Not without wildcard tags: the shared counts still balance.) */
        for (int i = 0; i <= g_T && !g_no_any_tag; i++) {
            int flag = 0;
            MPI_Status s;
            MPI_Comm c = i == g_T ? MPI_COMM_WORLD : g_thr[i].comm;
            CK(mt, MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c, &flag, &s));
            if (flag)
                fail(mt, "phase end: a stray message (source %d tag %d, %d bytes) on %s %d", s.MPI_SOURCE,
                     s.MPI_TAG, msg_count(mt, &s), i == g_T ? "MPI_COMM_WORLD" : "the communicator of thread", i);
        }
        step(mt, "phase end: MPI_Barrier", phase, -1);
        CK(mt, MPI_Barrier(MPI_COMM_WORLD));
    }
    g_quit = 1;
    pthread_barrier_wait(&g_start);
    for (int i = 0; i < g_T; i++)
        pthread_join(g_thr[i].tid, NULL);

    unsigned long b[NCAT] = {0}, tb[NCAT];
    for (int i = 0; i < g_T; i++)
        for (int c = 0; c < NCAT; c++)
            b[c] += g_thr[i].batches[c];
    step(mt, "end: MPI_Reduce of the batch counts", phase, -1);
    CK(mt, MPI_Reduce(b, tb, NCAT, MPI_UNSIGNED_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
    for (int i = 0; i < g_T; i++) {
        step(mt, "end: MPI_Comm_free of a thread's communicator", i, -1);
        CK(mt, MPI_Comm_free(&g_thr[i].comm));
    }
    step(mt, "end: MPI_Barrier", phase, -1);
    CK(mt, MPI_Barrier(MPI_COMM_WORLD));
    if (g_rank == 0) {
        char line[512];
        int o = snprintf(line, sizeof line, "OK stress: %d phases in %.1f s, batches", phase, now() - t0);
        for (int c = 0; c < NCAT; c++)
            if (g_ops & (1u << c))
                o += snprintf(line + o, sizeof line - (size_t)o, " %s=%lu", cat_name[c], tb[c]);
        printf("%s [seed=%llu]\n", line, seed);
        fflush(stdout);
    }
    step(mt, "MPI_Finalize", phase, -1);
    MPI_Finalize();
    atomic_store(&g_done, 1);
    return 0;
}
