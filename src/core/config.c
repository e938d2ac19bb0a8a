/* Every MPISHIM_* variable is described once in vars[] below: its type,
 * accepted values, default and info key. Parsing (of the environment and of
 * the info keys alike), the error lines, the typo warnings and the printed
 * configuration all come from that table. */
#include "core/config.h"
#include "core/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

extern char **environ;

msh_config msh_cfg;

/* Enum fields are read and written as int by the table code. */
_Static_assert(sizeof(msh_map_policy) == sizeof(int), "enum fields must be int-sized");

typedef enum { V_BOOL, V_INT, V_ENUM, V_FLAGS, V_SIZE } msh_cfg_kind;

typedef struct msh_cfg_var {
    const char        *name;
    msh_cfg_kind       kind;
    size_t             off;      /* field in msh_config */
    const char *const *words;    /* V_ENUM: value names by enum value; V_FLAGS: by bit */
    long               min, max; /* V_INT, V_SIZE */
    const char        *auto_word;/* V_INT: a word meaning auto_val ("auto"), or NULL */
    const char        *info;     /* the info key taking the same values, or NULL;
                                    V_FLAGS: the prefix of one boolean key per flag */
    int                auto_val; /* V_INT: the value auto_word stands for (0 unless set) */
} msh_cfg_var;

static const char *const map_words[]      = { "comm", "tag", "peer", "hash", "thread", NULL };
static const char *const progress_words[] = { "global", "vci", "thread", "combine", "offload", NULL };
static const char *const wait_words[]     = { "spin", "block", "adaptive", NULL };
static const char *const host_words[]     = { "multiple", "serialized", NULL };
static const char *const part_words[]     = { "shim", "native", "auto", NULL };
static const char *const route_words[]    = { "target", "thread", NULL };
static const char *const fence_words[]    = { "host", "passive", "all", NULL };
static const char *const flocal_words[]   = { "auto", "host", "flush", NULL };
static const char *const coll_words[]     = { "nonblocking", "host", "auto", NULL };
static const char *const fabric_words[]   = { "off", "auto", "shm", "tcp", "verbs", "ucx", NULL };
static const char *const assert_words[]   = { "no_any_tag", "no_any_source", "allow_overtaking", NULL };

/* Indexed by msh_cfg_id, so that an entry cannot drift from its id
 * (test_config checks there is no hole). */
#define F(field) offsetof(msh_config, field)
static const msh_cfg_var vars[] = {
    [MSH_CFG_DISABLE]         = { "MPISHIM_DISABLE",        V_BOOL,  F(disable),         NULL, 0, 1, NULL, NULL },
    [MSH_CFG_VERBOSE]         = { "MPISHIM_VERBOSE",        V_BOOL,  F(verbose),         NULL, 0, 1, NULL, NULL },
    [MSH_CFG_STATS]           = { "MPISHIM_STATS",          V_BOOL,  F(stats),           NULL, 0, 1, NULL, NULL },
    [MSH_CFG_SOLO]            = { "MPISHIM_SOLO",           V_BOOL,  F(solo),            NULL, 0, 1, NULL, NULL },
    [MSH_CFG_NUM_VCIS]        = { "MPISHIM_NUM_VCIS",       V_INT,   F(num_vcis),        NULL, 1, MSH_MAX_VCIS, "auto", NULL },
    [MSH_CFG_MAP]             = { "MPISHIM_MAP",            V_ENUM,  F(map),             map_words, 0, 0, NULL, NULL },
    [MSH_CFG_ASSERT]          = { "MPISHIM_ASSERT",         V_FLAGS, F(asserts),         assert_words, 0, 0, NULL, "mpi_assert_" },
    [MSH_CFG_PROGRESS]        = { "MPISHIM_PROGRESS",       V_ENUM,  F(progress),        progress_words, 0, 0, NULL, NULL },
    [MSH_CFG_SWEEP_POLLS]     = { "MPISHIM_SWEEP_POLLS",    V_INT,   F(sweep_polls),     NULL, 1, 1000000, NULL, NULL },
    [MSH_CFG_WAIT]            = { "MPISHIM_WAIT",           V_ENUM,  F(wait),            wait_words, 0, 0, NULL, NULL },
    [MSH_CFG_SPIN_US]         = { "MPISHIM_SPIN_US",        V_INT,   F(spin_us),         NULL, 0, 10000000, NULL, NULL },
    [MSH_CFG_HOST_THREAD]     = { "MPISHIM_HOST_THREAD",    V_ENUM,  F(host_thread),     host_words, 0, 0, NULL, NULL },
    [MSH_CFG_PART]            = { "MPISHIM_PART",           V_ENUM,  F(part),            part_words, 0, 0, NULL, NULL },
    [MSH_CFG_PART_MIN_BYTES]  = { "MPISHIM_PART_MIN_BYTES", V_SIZE,  F(part_min_bytes),  NULL, 0, 1L << 30, NULL, "mpishim_part_min_bytes" },
    [MSH_CFG_WIN_K]           = { "MPISHIM_WIN_K",          V_INT,   F(win_k),           NULL, 1, MSH_MAX_VCIS, "auto", "mpishim_win_k" },
    [MSH_CFG_WIN_ROUTE]       = { "MPISHIM_WIN_ROUTE",      V_ENUM,  F(win_route),       route_words, 0, 0, NULL, NULL },
    [MSH_CFG_WIN_FENCE]       = { "MPISHIM_WIN_FENCE",      V_ENUM,  F(win_fence),       fence_words, 0, 0, NULL, "mpishim_win_fence" },
    [MSH_CFG_WIN_FLUSH_LOCAL] = { "MPISHIM_WIN_FLUSH_LOCAL", V_ENUM,  F(win_flush_local), flocal_words, 0, 0, NULL, NULL },
    [MSH_CFG_WATCHDOG]        = { "MPISHIM_WATCHDOG",       V_INT,   F(watchdog),        NULL, 1, 86400, "off", NULL },
    [MSH_CFG_PROGRESS_CPU]    = { "MPISHIM_PROGRESS_CPU",   V_INT,   F(progress_cpu),    NULL, 0, 65535, "auto", NULL, -1 },
    [MSH_CFG_HOG_MS]          = { "MPISHIM_HOG_MS",         V_INT,   F(hog_ms),          NULL, 0, 60000, "off", NULL },
    [MSH_CFG_COLL]            = { "MPISHIM_COLL",           V_ENUM,  F(coll),            coll_words, 0, 0, NULL, NULL },
    [MSH_CFG_FABRIC]          = { "MPISHIM_FABRIC",         V_ENUM,  F(fabric),          fabric_words, 0, 0, NULL, NULL },
};
#undef F
#define NVARS (sizeof vars / sizeof vars[0])
_Static_assert(NVARS == MSH_CFG_NVARS, "one table entry per msh_cfg_id");
_Static_assert(NVARS <= sizeof(unsigned long) * CHAR_BIT, "from_env has one bit per variable");

/* What each variable does, for the generated reference (docs/configuration.md
 * and the mpishim(7) man page, printed by `mpishim-info --doc md|man`; a
 * test fails when they drift from this table). Plain text: `x` marks a
 * literal. */
static const char *const docs[] = {
    [MSH_CFG_DISABLE] = "Pure pass-through: every call goes to the host unchanged, for A/B runs with the same binary. "
                        "Set on some ranks only, every rank passes through (one MPI_Allreduce in MPI_Init tells them).",
    [MSH_CFG_VERBOSE] = "Rank 0 prints the host, the thread levels and the configuration at init (stderr).",
    [MSH_CFG_STATS] = "At finalize each rank prints per-VCI counters (sends, receives, collectives, bytes, polls, "
                      "completions, request-cache hits and refills, and `at_post`: blocking calls the host completed "
                      "as they were posted; with a lane open (`MPISHIM_FABRIC`), `lane`: the sends and receives it "
                      "carried, outside the host), per-domain progress counters (`ownership`: how often a thread "
                      "took the domain to poll, which a test on a VCI that is a domain of its own does not, so "
                      "there it counts waits; handoffs to a sleeping waiter, sleeps, wake-ups), and per VCI lock "
                      "how often one thread earned its bias (took it alone long enough to enter it without atomic "
                      "instructions, docs/design.md) and how often another thread revoked that, and warns about requests or "
                      "communicators left unfreed. Nonblocking calls and persistent inits then take the runtime "
                      "path also while the solo path is on, so that every request is counted.",
    [MSH_CFG_SOLO] = "Solo fast path: while only one thread at a time is inside MPI, its calls go straight to the "
                     "host, so a program or phase with one communicating thread pays no runtime cost. The first "
                     "time a thread finds another inside a solo call, the process switches to the runtime for good. "
                     "Never with a serialized host, a progress thread or a lane (`MPISHIM_FABRIC`), whose "
                     "messages only the runtime carries.",
    [MSH_CFG_NUM_VCIS] = "Size of the VCI pool. `auto`: the cores in the rank's cpuset (hwloc), and no more than the "
                         "node's cores divided by the ranks the launcher started on the node (Open MPI's "
                         "`OMPI_COMM_WORLD_LOCAL_SIZE`, MPICH Hydra's `MPI_LOCALNRANKS`), so that unbound ranks "
                         "share the node's cores instead of each counting all of them. All ranks agree on the "
                         "smallest value at init.",
    [MSH_CFG_MAP] = "How traffic maps to VCIs. `comm`: one VCI per user communicator, communicators spread over the "
                    "pool. The others apply only to communicators whose assertions allow them (else `comm`): `tag` "
                    "needs `no_any_tag`, `peer` needs `no_any_source`, `hash` hashes the terms the assertions allow, "
                    "`thread` (a VCI per thread) needs `allow_overtaking` and both no-wildcard assertions. Without "
                    "a lane each VCI of a spread communicator is an internal duplicate, made inside the program's "
                    "constructor; with a lane (`MPISHIM_FABRIC`) the VCIs' endpoints are the ways and no duplicate "
                    "is made, a communicator the lane does not carry is not spread, and `thread` chooses the VCI "
                    "as `hash` does (VCI i of one process reaches only VCI i of another).",
    [MSH_CFG_ASSERT] = "Assertions applied to every communicator of an unmodified program, as if given with the "
                       "MPI-4 info keys `mpi_assert_*`. A wildcard on a communicator that asserted it away fails "
                       "through the communicator's error handler (`MPI_ERR_TAG` or `MPI_ERR_RANK`).",
    [MSH_CFG_PROGRESS] = "Who progresses: one owner per process (`global`), one owner per VCI with a sweep of the "
                         "VCIs nobody owns after `MPISHIM_SWEEP_POLLS` empty polls (`vci`), or a progress thread (`thread`). "
                         "`combine` and `offload` progress as `global` and `thread` do, and no point-to-point post "
                         "waits for a VCI's lock: with `combine` a post that finds the lock free is made at once, "
                         "one that finds it held goes into a lock-free per-VCI queue that the holder drains into "
                         "the host when it unlocks; with `offload` every post is queued and the progress thread "
                         "drains them. With a lane (`MPISHIM_FABRIC`), `combine` progresses each VCI on its own, as "
                         "`vci` does: lanes share nothing, and one owner for all of them would funnel the threads "
                         "through it again. The default is `combine`: with a core per thread it kept threads that share a "
                         "communicator near or above the raw host's rate, where `global` fell to half of it (figures in "
                         "NEWS.md); and `global` when `MPISHIM_COLL=host` is set, which queued posts rule out.",
    [MSH_CFG_SWEEP_POLLS] = "With `MPISHIM_PROGRESS=vci` (and `combine` with a lane), a sweep of every VCI that no other thread progresses after this many unsuccessful polls of a progress owner, or this many unsuccessful tests (`MPI_Test` and its kin) of one thread.",
    [MSH_CFG_WAIT] = "How a thread waits while another owns progress: yield-spin (`spin`), sleep on a condition "
                     "variable (`block`), or spin `MPISHIM_SPIN_US` and then sleep (`adaptive`).",
    [MSH_CFG_SPIN_US] = "With `MPISHIM_WAIT=adaptive`, microseconds of spinning before sleeping; also how long a "
                        "blocking send or receive tests its fresh host request before it waits on a sync object.",
    [MSH_CFG_HOST_THREAD] = "Thread level the shim asks of the host. With `serialized` the shim makes every host "
                            "call under one lock of its own and still gives the program `MPI_THREAD_MULTIPLE`; a "
                            "host that offers less than `MPI_THREAD_MULTIPLE` is run this way automatically.",
    [MSH_CFG_PART] = "Partitioned communication: the shim's layer on persistent requests (`shim`), or the host's "
                     "own (`native`, MPICH 4; on Open MPI 4.1 it falls back to the shim's layer with a warning). "
                     "`auto`: the shim's layer where the runtime is on, the host's own where it is off (a rank "
                     "asked for less than `MPI_THREAD_MULTIPLE`) and the host has one; Open MPI 4.1 always "
                     "gets the shim's layer.",
    [MSH_CFG_PART_MIN_BYTES] = "A partitioned sender aggregates consecutive partitions smaller than this into one "
                               "internal message. The info key on `MPI_Psend_init` overrides it per request.",
    [MSH_CFG_WIN_K] = "Internal windows per user window. `auto`: the VCI pool size for `MPI_Win_create` and "
                      "`MPI_Win_create_dynamic` windows, 1 for `MPI_Win_allocate` and `MPI_Win_allocate_shared`; "
                      "always 1 below `MPI_THREAD_MULTIPLE`; at most the window's group size under "
                      "`MPISHIM_WIN_ROUTE=target`. The info key on a window constructor overrides it; the "
                      "ranks of a window agree on the smallest value. Each internal window beyond the first, and "
                      "the communicator under them, takes one of the host's communicator ids (MPICH has 2048): "
                      "while 512 of them are alive in a process, a new window gets no more.",
    [MSH_CFG_WIN_ROUTE] = "Which internal window a `Put`, `Get`, `Rput` or `Rget` takes once several threads use "
                          "the window: its target rank's (rank mod K) or the calling thread's. Accumulates always "
                          "take their target's.",
    [MSH_CFG_WIN_FENCE] = "How `MPI_Win_fence` is made on a window with K > 1 internal windows. `host`: the host's "
                          "fence on the user's window only; from the first fence the internal windows 1..K-1 live in "
                          "an `MPI_Win_lock_all(MPI_MODE_NOCHECK)` epoch of the shim's, flushed and synced at each "
                          "fence, until the program leaves fences for another synchronization (or fences with "
                          "`MPI_MODE_NOSUCCEED`): one host fence instead of K. `all`: the host's fence on every "
                          "internal window. `passive`: the whole window lives in one "
                          "`MPI_Win_lock_all(MPI_MODE_NOCHECK)` epoch, and a fence is a flush, a sync and a barrier "
                          "the thread waits in as in any shim wait; only for windows synchronized by fences alone. "
                          "The ranks of a window agree on the first of `all`, `host`, `passive` that one of them "
                          "asks for.",
    [MSH_CFG_WIN_FLUSH_LOCAL] = "How `MPI_Win_flush_local(_all)` is made. `host`: the host's call. `flush`: as "
                                "`MPI_Win_flush(_all)`, which completes more. `auto`: `flush` on MPICH ch4:ucx, whose "
                                "`flush_local` can return before a Get is done, `host` elsewhere.",
    [MSH_CFG_WATCHDOG] = "When requests are pending and none of the rank's requests has completed for this many "
                         "seconds, each rank prints once per stall, on stderr, what is pending per VCI and which "
                         "thread owns progress; `kill -USR1` of a rank prints the same at once. Only with the "
                         "variable set: a thread of its own and a `SIGUSR1` handler (otherwise the shim installs "
                         "none).",
    [MSH_CFG_PROGRESS_CPU] = "The CPU the progress thread (`MPISHIM_PROGRESS=thread`, `offload`) is bound to. "
                             "`auto`: the first hardware thread of the last core of the rank's binding, only when "
                             "the launcher bound the rank to two or more cores but not to the whole machine; "
                             "otherwise it is not bound.",
    [MSH_CFG_HOG_MS] = "Hog mode's period in milliseconds: when 4 of a progress owner's yields within 100 ms each "
                       "keep it off its core for 2 ms or more, for this long owners stop yielding and adaptive "
                       "waiters sleep at once. `off`: never.",
    [MSH_CFG_COLL] = "The form of blocking collectives. `auto`: per communicator, the host's blocking call while "
                     "every process of the communicator has had one thread at a time in MPI (the solo path: "
                     "a one-thread program's collectives cost what the host's do), and the nonblocking form "
                     "from the first time the processes, asked together at the communicator's 2nd, 3rd, 5th, "
                     "9th, ... 513th blocking collective and then every 1024th, find one that has not (an "
                     "`MPI_Allreduce` of one integer over it); intercommunicators and communicators the shim "
                     "did not see made (`MPI_Comm_idup`, from groups) always take the nonblocking form, as "
                     "does every communicator where the solo path is off (`MPISHIM_SOLO=0`, a progress thread, "
                     "a serialized host, a lane). `nonblocking`: the host's nonblocking twin plus a shim wait, "
                     "so a thread waiting in a collective sleeps instead of spinning in the host; an error that the "
                     "host's blocking call finds and its nonblocking twin does not is then not reported (MPICH 4.0: "
                     "`MPI_Alltoall` with receive counts shorter than what is sent returns `MPI_ERR_TRUNCATE` "
                     "blocking, success as `MPI_Ialltoall` plus a wait), and a mismatch the blocking call survives "
                     "may hang as the nonblocking twin does (Open MPI 4.1: `MPI_Reduce` with counts that differ "
                     "between ranks returns, `MPI_Ireduce` plus a wait never does); erroneous programs either "
                     "way. `host`: "
                     "the host's blocking call, at the host's speed, with its errors, for programs whose collectives "
                     "are made while their other threads are quiet. The ranks agree at init on the first of "
                     "`nonblocking`, `auto`, `host` that one of them has; `host` needs the host not serialized "
                     "and no queued posts (else `auto`: with `host` and no `MPISHIM_PROGRESS`, the policy is "
                     "`global`).",
    [MSH_CFG_FABRIC] = "Experimental. Gives every VCI a lane of its own outside the host, so that threads on "
                       "different VCIs share no lock: a UCX worker (`ucx`) or a libfabric endpoint, completion "
                       "queue and address vector (`shm`, `tcp`, `verbs`). The lane carries the point-to-point "
                       "traffic of the intra-communicators made from MPI_COMM_WORLD (inter-communicators and "
                       "communicators with spawned processes stay on the host, as do collectives, one-sided and "
                       "I/O). `off`: every VCI is a communicator of the host. `ucx`: UCX's tag matching, over "
                       "shared memory when every process is on one node (UCX_TLS, if set, chooses), else UCX's "
                       "own choice; a truncated receive delivers nothing and counts 0. `tcp`: libfabric's TCP with "
                       "reliable datagrams (`tcp;ofi_rxm`); it carries every message over TCP, also between processes "
                       "of one node and to the process itself (through the loopback interface: some 30 times the "
                       "host's shared-memory latency on the 2-core VM), so it suits one process per node. `verbs`: "
                       "InfiniBand or RoCE (`verbs;ofi_rxm`). `shm`: "
                       "libfabric's shared-memory provider (all processes on one node); before libfabric 1.19 "
                       "(Debian 12 has 1.17) it carries only communicators that assert `no_any_tag` "
                       "(MPISHIM_ASSERT or the `mpi_assert_no_any_tag` info key), because that provider applies a "
                       "stale ignore mask to messages that arrived before their receive, and probes there hold "
                       "what they find in the shim. `auto`: `ucx` where libucp loads, else `shm` when every "
                       "process is on one node, else `tcp`. Set it the same on every rank (a rank without it turns "
                       "it off for all); the lane's library is loaded only when it is not `off`, and a process "
                       "that cannot open it leaves every process on the host (said on stderr). Needs a host that "
                       "provides MPI_THREAD_MULTIPLE and a program that asks for it. While a thread sits in a host "
                       "call that waits for other processes (window synchronization, constructors, collective "
                       "I/O, ...), a helper thread reads the lanes. MPI_Finalize delivers the buffered sends still "
                       "moving on a lane before it closes (waiting up to 60 s). Start-up: the `ucx` lane adds "
                       "some 0.03 s to MPI_Init_thread, the libfabric ones some 0.05-0.08 s (on a node without "
                       "an RDMA device the shim hides /proc/kallsyms from libfabric's first query, whose verbs "
                       "provider would read it twice, and on a node without a PSM adapter it loads stand-ins "
                       "for the PSM libraries Debian's libfabric links, whose constructors sleep 0.2 s; "
                       "docs/design.md, Dependencies). Known "
                       "limit: on Open MPI 4.1 (no large-count pack calls) one element of a derived type of "
                       "more than INT_MAX bytes that is not one run of bytes is refused (MPI_ERR_COUNT). A lane "
                       "gains most with a communicator per thread (or the `no_any_tag` hint with "
                       "`MPISHIM_MAP=tag`): threads sharing one communicator share its VCI. Under the default "
                       "`MPISHIM_PROGRESS=combine` each VCI then has a progress owner of its own, as with `vci` "
                       "(figures in NEWS.md).",
};
_Static_assert(sizeof docs / sizeof docs[0] == MSH_CFG_NVARS, "a description per variable");

void msh_cfg_defaults(msh_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->solo           = 1;
    cfg->num_vcis       = 0; /* auto: msh_topo_default_vcis */
    cfg->map            = MSH_MAP_COMM;
    cfg->progress       = MSH_PROGRESS_COMBINE;
    cfg->sweep_polls    = 64;
    cfg->wait           = MSH_WAIT_ADAPTIVE;
    cfg->spin_us        = 20;
    cfg->host_thread    = MSH_HOST_THREAD_MULTIPLE;
    cfg->part           = MSH_PART_AUTO;
    cfg->part_min_bytes = 0;
    cfg->win_k          = 0; /* auto: see src/vci/win.c */
    cfg->win_route      = MSH_WIN_ROUTE_TARGET;
    cfg->win_fence      = MSH_WIN_FENCE_HOST;
    cfg->win_flush_local = MSH_WIN_FLUSH_LOCAL_AUTO;
    cfg->progress_cpu   = -1; /* auto: see msh_topo_progress_cpu */
    cfg->hog_ms         = 1000; /* see src/sync/progress.c */
    cfg->coll           = MSH_COLL_AUTO;
    cfg->fabric         = MSH_FABRIC_OFF;
}

/* ------------------------------------------------------------ helpers */

int msh_edit_distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 255), lb = strnlen(b, 255);
    int row[256];
    for (size_t j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = toupper((unsigned char)a[i - 1]) != toupper((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static void *field(msh_config *cfg, const msh_cfg_var *v) { return (char *)cfg + v->off; }
static const void *cfield(const msh_config *cfg, const msh_cfg_var *v) { return (const char *)cfg + v->off; }

/* "a|b|c" into buf. */
static const char *join_words(const char *const *w, const char *sep, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; w[i]; i++)
        n += (size_t)snprintf(buf + (n < len ? n : len - 1), n < len ? len - n : 1, "%s%s", i ? sep : "", w[i]);
    return buf;
}

static const char *accepted(const msh_cfg_var *v, char *buf, size_t len)
{
    char words[128];
    switch (v->kind) {
    case V_BOOL:  snprintf(buf, len, "0|1 (also no|yes, off|on, false|true)"); break;
    case V_INT:
        snprintf(buf, len, "%s%san integer %ld..%ld", v->auto_word ? v->auto_word : "",
                 v->auto_word ? " or " : "", v->min, v->max);
        break;
    case V_ENUM:  snprintf(buf, len, "%s", join_words(v->words, "|", words, sizeof words)); break;
    case V_FLAGS:
        snprintf(buf, len, "a list of %s separated by commas or blanks (or empty)", join_words(v->words, ", ", words, sizeof words));
        break;
    case V_SIZE:
        snprintf(buf, len, "a byte count %ld..%ld, optionally with suffix K, M or G (or KB, KiB, ...; powers of 1024)", v->min, v->max);
        break;
    }
    return buf;
}

static int word_index(const char *const *w, const char *s, size_t n)
{
    for (int i = 0; w[i]; i++)
        if (strlen(w[i]) == n && strncasecmp(w[i], s, n) == 0)
            return i;
    return -1;
}

static int parse_long(const char *s, long *out, int allow_suffix)
{
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1; /* no sign: none of our values is negative */
    errno = 0;
    char *end;
    long long x = strtoll(s, &end, 10);
    if (errno)
        return -1;
    if (allow_suffix && *end) {
        int shift = 0;
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        default: return -1;
        }
        end++;
        if (toupper((unsigned char)*end) == 'I' && toupper((unsigned char)end[1]) == 'B')
            end += 2; /* KiB */
        else if (toupper((unsigned char)*end) == 'B')
            end++;    /* KB */
        if (x > (LLONG_MAX >> shift))
            return -1;
        x <<= shift;
    }
    while (isspace((unsigned char)*end))
        end++;
    if (*end || x > LONG_MAX)
        return -1;
    *out = (long)x;
    return 0;
}

/* 1, 0, or -1 when s is not a boolean. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = { "1", "yes", "on", "true", NULL };
    static const char *const no[]  = { "0", "no", "off", "false", NULL };
    if (word_index(yes, s, strlen(s)) >= 0)
        return 1;
    if (word_index(no, s, strlen(s)) >= 0)
        return 0;
    return -1;
}

/* The one value parser: the environment and info keys both come here. On
 * failure cfg is unchanged. */
static int parse_value(msh_config *cfg, const msh_cfg_var *v, const char *s)
{
    long x;
    int i;
    switch (v->kind) {
    case V_BOOL:
        if ((i = parse_bool(s)) < 0)
            return -1;
        *(int *)field(cfg, v) = i;
        return 0;
    case V_INT:
        if (v->auto_word && strcasecmp(s, v->auto_word) == 0) {
            *(int *)field(cfg, v) = v->auto_val;
            return 0;
        }
        if (parse_long(s, &x, 0) || x < v->min || x > v->max)
            return -1;
        *(int *)field(cfg, v) = (int)x;
        return 0;
    case V_SIZE:
        if (parse_long(s, &x, 1) || x < v->min || x > v->max)
            return -1;
        *(size_t *)field(cfg, v) = (size_t)x;
        return 0;
    case V_ENUM:
        if ((i = word_index(v->words, s, strlen(s))) < 0)
            return -1;
        *(int *)field(cfg, v) = i; /* every enum field is int-sized */
        return 0;
    case V_FLAGS: {
        unsigned flags = 0;
        const char *p = s;
        while (*p) {
            while (*p == ',' || isspace((unsigned char)*p))
                p++;
            if (!*p)
                break;
            const char *e = p;
            while (*e && *e != ',' && !isspace((unsigned char)*e))
                e++;
            if ((i = word_index(v->words, p, (size_t)(e - p))) < 0)
                return -1;
            flags |= 1u << i;
            p = e;
        }
        *(unsigned *)field(cfg, v) = flags;
        return 0;
    }
    }
    return -1;
}

/* ------------------------------------------------------------ parsing */

/* "<what>='<val>' <verdict>; accepted values: ..." for the environment's
 * error and the info keys' warning alike. The value escaped (a newline in
 * it must not start a line of its own), at most 64 bytes of it. */
static void invalid_line(char *err, size_t errlen, const char *what, const char *val, const char *verdict,
                         const msh_cfg_var *v)
{
    char acc[256], shown[4 * 64 + 1];
    size_t used = msh_escape(shown, sizeof shown, val, 64);
    snprintf(err, errlen, "%s='%s%s' %s; accepted values: %s", what, shown, val[used] ? "..." : "", verdict,
             accepted(v, acc, sizeof acc));
}

int msh_cfg_parse(msh_config *cfg, char *const *envp, char *err, size_t errlen,
                  void (*warn)(const char *line, void *arg), void *warn_arg)
{
    msh_cfg_defaults(cfg);
    for (; envp && *envp; envp++) {
        const char *kv = *envp;
        if (strncmp(kv, "MPISHIM_", 8) != 0)
            continue;
        const char *eq = strchr(kv, '=');
        size_t nlen = eq ? (size_t)(eq - kv) : strlen(kv);
        const char *val = eq ? eq + 1 : "";
        size_t k;
        for (k = 0; k < NVARS; k++)
            if (strlen(vars[k].name) == nlen && strncmp(vars[k].name, kv, nlen) == 0)
                break;
        if (k == NVARS) {
            if (warn) {
                /* The name as typed, for the distance; escaped for the line. */
                char name[128], shown[128], line[320];
                snprintf(name, sizeof name, "%.*s", (int)(nlen < 100 ? nlen : 100), kv);
                msh_escape(shown, sizeof shown, kv, nlen < 100 ? nlen : 100);
                size_t best = 0;
                int bestd = 1 << 30;
                for (size_t j = 0; j < NVARS; j++) {
                    int d = msh_edit_distance(name, vars[j].name);
                    if (d < bestd) {
                        bestd = d;
                        best = j;
                    }
                }
                snprintf(line, sizeof line, "unknown variable %s ignored; did you mean %s?", shown, vars[best].name);
                warn(line, warn_arg);
            }
            continue;
        }
        if (parse_value(cfg, &vars[k], val) != 0) {
            invalid_line(err, errlen, vars[k].name, val, "is invalid", &vars[k]);
            return -1;
        }
        cfg->from_env |= 1ul << k;
    }
    /* The default policy queues posts, and queued posts rule out the host's
     * blocking collectives (intercept/init.c): a run that asks for those and
     * names no policy gets global, the same policy without the queue. */
    if (!(cfg->from_env & (1ul << MSH_CFG_PROGRESS)) && cfg->coll == MSH_COLL_HOST)
        cfg->progress = MSH_PROGRESS_GLOBAL;
    return 0;
}

static void warn_once(const char *line, void *arg)
{
    (void)arg;
    msh_log_once("%s", line);
}

void msh_cfg_init(void)
{
    char err[512];
    if (msh_cfg_parse(&msh_cfg, environ, err, sizeof err, warn_once, NULL) != 0) {
        msh_log_once("%s", err);
        exit(1);
    }
}

/* ------------------------------------------------------------ info keys */

static const msh_cfg_var *var_of(msh_cfg_id id)
{
    return (unsigned)id < NVARS ? &vars[id] : NULL;
}

const char *msh_cfg_name(msh_cfg_id id)
{
    const msh_cfg_var *v = var_of(id);
    return v ? v->name : "?";
}

const char *msh_cfg_word(msh_cfg_id id, int value)
{
    const msh_cfg_var *v = var_of(id);
    if (!v || !v->words || value < 0)
        return "?";
    for (int i = 0; v->words[i]; i++)
        if (i == value)
            return v->words[i];
    return "?";
}

int msh_cfg_info_key(msh_cfg_id id, int i, char *buf, size_t len)
{
    const msh_cfg_var *v = var_of(id);
    if (!v || !v->info || i < 0)
        return -1;
    if (v->kind == V_FLAGS) {
        for (int w = 0; v->words[w]; w++)
            if (w == i)
                return snprintf(buf, len, "%s%s", v->info, v->words[w]) < (int)len ? 0 : -1;
        return -1;
    }
    return i == 0 && snprintf(buf, len, "%s", v->info) < (int)len ? 0 : -1;
}

/* A flag variable's info key: a boolean per flag, so the error names the
 * boolean values. */
static const msh_cfg_var bool_var = { "boolean", V_BOOL, 0, NULL, 0, 1, NULL, NULL, 0 };

int msh_cfg_info_value(msh_config *cfg, msh_cfg_id id, const char *key, const char *val, char *err, size_t errlen)
{
    const msh_cfg_var *v = var_of(id);
    char k[128];
    int i = -1, b = -1;
    for (int j = 0; i < 0 && msh_cfg_info_key(id, j, k, sizeof k) == 0; j++)
        if (strcmp(k, key) == 0)
            i = j;
    if (i < 0) {
        if (err)
            snprintf(err, errlen, "info key %s is not one of %s's", key, msh_cfg_name(id));
        return -1;
    }
    if (v->kind == V_FLAGS ? (b = parse_bool(val)) < 0 : parse_value(cfg, v, val) != 0) {
        if (err) {
            char what[160];
            snprintf(what, sizeof what, "info key %s", key);
            invalid_line(err, errlen, what, val, "ignored", v->kind == V_FLAGS ? &bool_var : v);
        }
        return -1;
    }
    if (v->kind == V_FLAGS) {
        unsigned *f = (unsigned *)field(cfg, v);
        *f = b ? *f | 1u << i : *f & ~(1u << i);
    }
    return 0;
}

int msh_cfg_from_info(MPI_Info info, msh_cfg_id id, msh_config *cfg)
{
    int applied = 0;
    char key[128], val[MPI_MAX_INFO_VAL + 1], err[512];
    if (info == MPI_INFO_NULL)
        return 0;
    for (int i = 0; msh_cfg_info_key(id, i, key, sizeof key) == 0; i++) {
        int flag = 0;
        if (PMPI_Info_get(info, key, MPI_MAX_INFO_VAL, val, &flag) != MPI_SUCCESS || !flag)
            continue;
        if (msh_cfg_info_value(cfg, id, key, val, err, sizeof err) == 0)
            applied++;
        else
            msh_log_once("%s", err);
    }
    return applied;
}

/* ------------------------------------------------------------ printing */

static const char *format_value(const msh_config *cfg, const msh_cfg_var *v, char *buf, size_t len)
{
    const void *f = cfield(cfg, v);
    switch (v->kind) {
    case V_BOOL:  snprintf(buf, len, "%d", *(const int *)f); break;
    case V_INT:
        if (v->auto_word && *(const int *)f == v->auto_val)
            snprintf(buf, len, "%s", v->auto_word);
        else
            snprintf(buf, len, "%d", *(const int *)f);
        break;
    case V_SIZE:  snprintf(buf, len, "%zu", *(const size_t *)f); break;
    case V_ENUM:  snprintf(buf, len, "%s", v->words[*(const int *)f]); break;
    case V_FLAGS: {
        unsigned flags = *(const unsigned *)f;
        size_t n = 0;
        buf[0] = '\0';
        for (int i = 0; v->words[i]; i++)
            if ((flags & (1u << i)) && n < len)
                n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", v->words[i]);
        if (!flags)
            snprintf(buf, len, "(none)");
        break;
    }
    }
    return buf;
}

void msh_cfg_print(FILE *out, const msh_config *cfg)
{
    for (size_t k = 0; k < NVARS; k++) {
        char val[128];
        fprintf(out, "  %-24s %-18s %s\n", vars[k].name, format_value(cfg, &vars[k], val, sizeof val),
                (cfg->from_env & (1ul << k)) ? "(environment)" : "(default)");
    }
}

/* ------------------------------------------------------------ the reference */

/* Markdown: `x` stays as is. Man (roff): `x` becomes bold, and a leading
 * dot or quote or a backslash is escaped. */
static void doc_text(FILE *out, const char *t, int man)
{
    if (!man) {
        fputs(t, out);
        return;
    }
    int bold = 0;
    for (const char *p = t; *p; p++) {
        if (*p == '`') {
            fputs(bold ? "\\fR" : "\\fB", out);
            bold = !bold;
        } else if (*p == '\\') {
            fputs("\\e", out);
        } else if (*p == '-') {
            fputs("\\-", out);
        } else {
            fputc(*p, out);
        }
    }
}

void msh_cfg_doc(FILE *out, int man)
{
    msh_config d;
    msh_cfg_defaults(&d);
    for (size_t k = 0; k < NVARS; k++) {
        const msh_cfg_var *v = &vars[k];
        char val[128], acc[256], key[128];
        format_value(&d, v, val, sizeof val);
        accepted(v, acc, sizeof acc);
        int has_key = msh_cfg_info_key((msh_cfg_id)k, 0, key, sizeof key) == 0;
        if (man) {
            fprintf(out, ".TP\n.B %s\nDefault \\fB%s\\fR; values: ", v->name, val);
            doc_text(out, acc, 1);
            fputs(".", out);
            if (has_key) {
                fputs(" Info key: ", out);
                for (int i = 0; msh_cfg_info_key((msh_cfg_id)k, i, key, sizeof key) == 0; i++)
                    fprintf(out, "%s\\fB%s\\fR", i ? ", " : "", key);
                fputs(".", out);
            }
            fputs("\n", out);
            doc_text(out, docs[k], 1);
            fputs("\n", out);
        } else {
            fprintf(out, "### `%s`\n\n- default: `%s`\n- values: %s\n", v->name, val, acc);
            if (has_key) {
                fputs("- info key: ", out);
                for (int i = 0; msh_cfg_info_key((msh_cfg_id)k, i, key, sizeof key) == 0; i++)
                    fprintf(out, "%s`%s`", i ? ", " : "", key);
                fputs("\n", out);
            }
            fprintf(out, "\n%s\n\n", docs[k]);
        }
    }
}
