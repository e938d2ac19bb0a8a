/* MPI_Init*, MPI_Query_thread, MPI_Finalize: where the runtime starts and
 * ends. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/error.h"
#include "core/log.h"
#include "core/topo.h"
#include "intercept/isendrecv.h"
#include "intercept/passthru.h"
#include "intercept/shim.h"
#include "intercept/status.h"
#include "intercept/wrap.h"
#include "vci/win.h"
#include "partitioned/part.h"
#include "mpishim.h"
#include "sync/assist.h"
#include "sync/watchdog.h"

static const char *thread_level_name(int level)
{
    switch (level) {
    case MPI_THREAD_SINGLE:     return "single";
    case MPI_THREAD_FUNNELED:   return "funneled";
    case MPI_THREAD_SERIALIZED: return "serialized";
    case MPI_THREAD_MULTIPLE:   return "multiple";
    default:                    return "?";
    }
}

/* This rank's proposal for the form of blocking collectives (runtime_start):
 * 2 the host's (MPISHIM_COLL=host, where it can be), 1 per communicator
 * (auto, where the solo path can be on: the same conditions as
 * msh_solo_start's), 0 the nonblocking twin. */
static int coll_wanted(int serialized)
{
    int solo = msh_cfg.solo && !serialized && msh_cfg.progress != MSH_PROGRESS_THREAD &&
               msh_cfg.progress != MSH_PROGRESS_OFFLOAD && msh_cfg.fabric == MSH_FABRIC_OFF;
    int queued = msh_cfg.progress == MSH_PROGRESS_COMBINE || msh_cfg.progress == MSH_PROGRESS_OFFLOAD;
    if (msh_cfg.coll == MSH_COLL_HOST && !serialized && !queued)
        return 2;
    return msh_cfg.coll != MSH_COLL_NONBLOCKING && solo ? 1 : 0;
}

/* What every rank settles with the others right after the
 * host's init, in one MPI_Allreduce (MPI_MIN) over MPI_COMM_WORLD: whether
 * the runtime starts (only if every rank asked for MPI_THREAD_MULTIPLE, got
 * at least MPI_THREAD_SERIALIZED from its host and could reserve its
 * request arena: a rank with the runtime on sends on its VCIs'
 * duplicates, which a rank that forwards would never receive from), the
 * pool size (duplicates are chosen by hashing modulo it), the form of
 * blocking collectives (0 nonblocking, 1 auto, 2 host) and whether the
 * fabric opens (collective). The host's blocking collectives are not made
 * for good while the host is serialized (the host lock would be held for
 * the whole call, which can wait for another thread's message), nor for
 * every call while posts are queued (config.c gives `host` the global
 * policy); auto's host calls drain the thread's queued posts first
 * (wrap.h). Each condition travels on its own, so that the log can say
 * which one kept the runtime off. */
typedef struct {
    int runtime, nvcis, coll, fabric;
    int asked, host_level, arena, enabled; /* 1 where every rank met that condition */
} agreed;

/* A rank with MPISHIM_DISABLE takes part too (asking for nothing): where
 * one rank passes every call through, every rank must (a rank that
 * tracks windows or keeps the partitioned layer makes collectives that
 * one would not). */
static agreed agree_at_init(int asked, int host_level, int serialized)
{
    int enabled = !msh_cfg.disable;
    asked = asked && enabled;
    int arena = 1;
    if (asked && host_level && msh_req_arena_init() != 0) {
        /* Before the agreement: a rank alone without the runtime would
         * leave the others waiting for what it never sends. */
        msh_log("cannot reserve the request arena (%zu MiB of address space); the runtime stays off on every rank",
                msh_req_arena_bytes() >> 20);
        arena = 0;
    }
    int want = asked && host_level && arena;
    int a[8] = { want, INT_MAX, INT_MAX, INT_MAX, asked, host_level, arena, enabled };
    if (want) { /* the others matter only when the runtime starts */
        a[1] = msh_cfg.num_vcis ? msh_cfg.num_vcis : msh_topo_default_vcis(MSH_MAX_VCIS);
        a[2] = coll_wanted(serialized);
        a[3] = msh_cfg.fabric != MSH_FABRIC_OFF;
    }
    PMPI_Allreduce(MPI_IN_PLACE, a, 8, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    return (agreed){ .runtime = a[0], .nvcis = a[1], .coll = a[2], .fabric = a[3],
                     .asked = a[4], .host_level = a[5], .arena = a[6], .enabled = a[7] };
}

/* Why the runtime is off, for MPISHIM_VERBOSE (rank 0's view). */
static const char *off_reason(int requested, const agreed *ag)
{
    if (msh_cfg.disable)
        return ag->enabled ? "MPISHIM_DISABLE" : "MPISHIM_DISABLE on a rank";
    if (requested != MPI_THREAD_MULTIPLE)
        return "the program did not ask for MPI_THREAD_MULTIPLE";
    if (!ag->asked)
        return "a rank did not ask for MPI_THREAD_MULTIPLE";
    if (!ag->host_level)
        return "a rank's host provides less than MPI_THREAD_SERIALIZED";
    if (!ag->arena)
        return "a rank could not reserve its request arena";
    return "it could not start";
}

/* Build the VCI pool, the progress domains and the entries of the
 * predefined communicators, with what the ranks agreed. */
static int runtime_start(int serialized, agreed ag)
{
    int n = ag.nvcis;
    if (msh_cfg.fabric != MSH_FABRIC_OFF && !ag.fabric) {
        msh_log_once("MPISHIM_FABRIC is off: a rank did not set it");
        msh_cfg.fabric = MSH_FABRIC_OFF; /* the fabric's open is collective */
    }
    msh_rt.coll_mode = ag.coll == 2 ? MSH_COLL_HOST : ag.coll == 1 ? MSH_COLL_AUTO : MSH_COLL_NONBLOCKING;
    if (msh_cfg.coll == MSH_COLL_HOST && ag.coll != 2)
        msh_log_once("MPISHIM_COLL=host is not in effect (the host is serialized, posts are queued, or a rank did "
                     "not set it): blocking collectives use %s",
                     ag.coll ? "the host's form per communicator while its processes are alone (auto)"
                             : "their nonblocking form");
    if (msh_vci_pool_init(n, serialized) != 0) {
        msh_log("cannot create %d VCIs", n);
        return -1;
    }
    msh_queue_init(); /* before the progress thread reads its settings */
    if (msh_progress_init() != 0) {
        msh_log("cannot set up progress (MPISHIM_PROGRESS=%s)",
                msh_cfg_word(MSH_CFG_PROGRESS, (int)msh_cfg.progress));
        return -1;
    }
    msh_comm_init();
    MPI_Comm world = MPI_COMM_WORLD, self = MPI_COMM_SELF;
    msh_comm_register(world, MPI_COMM_NULL, MPI_INFO_NULL, msh_comm_twin_self, &world);
    msh_comm_register(self, MPI_COMM_NULL, MPI_INFO_NULL, msh_comm_twin_self, &self);
    msh_coll_world = msh_comm_lookup(MPI_COMM_WORLD);
    msh_solo_start(serialized);
    if (msh_watchdog_start(msh_cfg.watchdog) != 0)
        msh_log("cannot start the watchdog (MPISHIM_WATCHDOG); running without it");
    msh_state_set(MSH_STATE_RUNTIME); /* msh_on() from here on */
    if (!serialized)
        msh_win_direct_runtime(1);
    return 0;
}

/* MPICH's ch4:ucx device, whose deviations two corrections follow: the
 * flush_local one (src/vci/win.h) and a truncated receive's count
 * (intercept/status.h). Asked of the host once. */
static int host_is_mpich_ucx(void)
{
    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (PMPI_Get_library_version(lib, &len) != MPI_SUCCESS)
        return 0;
    return strstr(lib, "MPICH") != NULL && strstr(lib, "ch4:ucx") != NULL;
}

/* MPISHIM_WIN_FLUSH_LOCAL=auto: MPICH's ch4:ucx device, whose flush_local
 * can leave a Get unfinished (src/vci/win.h; MPICH 4.0.2 here). */
static int flush_local_wanted(int mpich_ucx)
{
    if (msh_cfg.win_flush_local != MSH_WIN_FLUSH_LOCAL_AUTO)
        return msh_cfg.win_flush_local == MSH_WIN_FLUSH_LOCAL_FLUSH;
    return mpich_ucx;
}

/* What follows a successful host init, for both MPI_Init and MPI_Init_thread. */
static int after_host_init(int requested, int host_provided, int *provided)
{
    /* What the sync layer calls up for (partitioned requests work with the
     * runtime off too): before the runtime's progress thread can read it. */
    msh_sync_set_upper(&(msh_sync_upper){ .sweep = msh_part_sweep, .sweep_wanted = &msh_part_nsetup });
    msh_req_ops_register(MSH_KIND_PART, &msh_part_req_ops);
#if MPI_VERSION >= 4
    msh_req_ops_register(MSH_KIND_PAIR, &msh_pair_req_ops);
#endif
    msh_rt.thread_requested = requested;
    msh_rt.thread_provided = host_provided;
    PMPI_Comm_rank(MPI_COMM_WORLD, &msh_rt.world_rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &msh_rt.world_size);
    int *ub = NULL, have_ub = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &have_ub);
    msh_rt.tag_ub = have_ub && ub ? *ub : 32767; /* the least MPI allows */

    /* The runtime serves programs whose ranks all asked for MULTIPLE; it
     * gives them MULTIPLE even from a host that only serializes (rule 7). */
    int rc = MPI_SUCCESS;
    int serialized = host_provided < MPI_THREAD_MULTIPLE || msh_cfg.host_thread == MSH_HOST_THREAD_SERIALIZED;
    agreed ag = agree_at_init(requested == MPI_THREAD_MULTIPLE, host_provided >= MPI_THREAD_SERIALIZED, serialized);
    if (!ag.enabled && !msh_cfg.disable) {
        if (msh_rt.world_rank == 0)
            msh_log("MPISHIM_DISABLE is set on a rank: every rank passes its calls through");
        msh_cfg.disable = 1;
    }
    if (!msh_cfg.disable) {
        if (ag.runtime && runtime_start(serialized, ag) != 0) {
            /* The other ranks start theirs: forwarding from here would
             * leave them waiting. Fail the call (fatal by default), as a
             * host that cannot set up does. */
            msh_log("rank %d: cannot start the runtime the ranks agreed on (set MPISHIM_DISABLE=1 to run "
                    "without the shim)",
                    msh_rt.world_rank);
            rc = msh_error_comm(MPI_COMM_WORLD, MPI_ERR_OTHER);
        } else if (ag.runtime && provided) {
            *provided = MPI_THREAD_MULTIPLE;
        }
    }
    /* Every program the shim is not disabled for, as the Win_allocate fix. */
    if (!msh_cfg.disable) {
        int mpich_ucx = host_is_mpich_ucx();
        if (flush_local_wanted(mpich_ucx))
            atomic_store_explicit(&msh_win_local_as_flush, 1, memory_order_relaxed);
        msh_status_init(mpich_ucx); /* a truncated receive's count (status.h) */
    }
    if (!msh_on())
        msh_state_set(msh_cfg.disable ? MSH_STATE_DISABLED : MSH_STATE_ACTIVE);
    msh_part_init(ag.runtime); /* collective: the two MPI_COMM_WORLD duplicates all partitioned traffic uses */

    if (msh_cfg.verbose && msh_rt.world_rank == 0) {
        char lib[MPI_MAX_LIBRARY_VERSION_STRING];
        int len = 0, v = 0, sv = 0;
        PMPI_Get_library_version(lib, &len);
        PMPI_Get_version(&v, &sv);
        lib[strcspn(lib, "\n")] = '\0';
        fprintf(stderr,
                "mpishim %s %s: host \"%s\", MPI %d.%d, %d ranks, thread level requested %s, host provided %s\n",
                MPISHIM_VERSION, msh_cfg.disable ? "disabled (pass-through)" : "active", lib, v, sv,
                msh_rt.world_size, thread_level_name(requested), thread_level_name(host_provided));
        if (msh_on())
            fprintf(stderr, "  runtime: %d VCIs, %s host access\n", msh_pool.n,
                    msh_pool.serialized ? "serialized" : "concurrent");
        else
            fprintf(stderr, "  runtime: off (%s): calls are forwarded unchanged\n", off_reason(requested, &ag));
        msh_cfg_print(stderr, &msh_cfg);
        fflush(stderr);
    }
    return rc;
}

MSH_EXPORT int MPI_Init(int *argc, char ***argv)
{
    msh_runtime_configure();
    msh_runtime_check_host();
    int rc = PMPI_Init(argc, argv);
    if (rc == MPI_SUCCESS) {
        int provided = MPI_THREAD_SINGLE;
        PMPI_Query_thread(&provided);
        rc = after_host_init(MPI_THREAD_SINGLE, provided, NULL);
    }
    return rc;
}

MSH_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    msh_runtime_configure();
    msh_runtime_check_host();
    int ask = required;
    if (!msh_cfg.disable && required == MPI_THREAD_MULTIPLE && msh_cfg.host_thread == MSH_HOST_THREAD_SERIALIZED)
        ask = MPI_THREAD_SERIALIZED;
    int rc = PMPI_Init_thread(argc, argv, ask, provided);
    if (rc == MPI_SUCCESS)
        rc = after_host_init(required, *provided, provided);
    return rc;
}

MSH_EXPORT int mpishim_runtime(void)
{
    return msh_on();
}

MSH_EXPORT int mpishim_part_layer(void)
{
    return msh_part_layer_on();
}

MSH_EXPORT void mpishim_print_calls(FILE *out)
{
    for (int i = 0; i < msh_call_kind_count; i++)
        fprintf(out, "%-36s %s\n", msh_call_kinds[i][0], msh_call_kinds[i][1]);
}

MSH_EXPORT int MPI_Query_thread(int *provided)
{
    if (msh_on())
        return (*provided = MPI_THREAD_MULTIPLE), MPI_SUCCESS;
    return PMPI_Query_thread(provided);
}

/* Per-VCI counters, one write per rank (MPISHIM_STATS=1). */
static void print_stats(int leaked_reqs, int leaked_comms)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    fprintf(f, "mpishim stats, rank %d: %d VCIs, progress %s%s, wait %s, host access %s\n", msh_rt.world_rank,
            msh_pool.n, msh_cfg_word(MSH_CFG_PROGRESS, (int)msh_cfg.progress),
            msh_progress_per_vci && msh_cfg.progress != MSH_PROGRESS_VCI ? " (an owner per VCI: lanes)" : "",
            msh_cfg_word(MSH_CFG_WAIT, (int)msh_cfg.wait), msh_pool.serialized ? "serialized" : "concurrent");
    const char *lane = msh_tp_fabric_provider();
    if (lane)
        fprintf(f, "  lane: %s (its column: sends and receives it carried, the rest went to the host)\n", lane);
    fprintf(f, "  %4s %10s %10s %8s %12s %10s %10s %10s %10s %8s %10s%s\n", "vci", "sends", "recvs", "colls", "bytes",
            "polls", "empty", "completed", "cache_hit", "refills", "at_post", lane ? "       lane" : "");
    for (int i = 0; i < msh_pool.n; i++) {
        const msh_vci_stats *s = &msh_pool.v[i].st;
        fprintf(f, "  %4d %10llu %10llu %8llu %12llu %10llu %10llu %10llu %10llu %8llu %10llu", i,
                (unsigned long long)s->sends, (unsigned long long)s->recvs, (unsigned long long)s->colls,
                (unsigned long long)s->bytes, (unsigned long long)s->polls, (unsigned long long)s->empty_polls,
                (unsigned long long)s->completions, (unsigned long long)s->cache_hits,
                (unsigned long long)s->cache_refills, (unsigned long long)s->now);
        if (lane)
            fprintf(f, " %10llu", msh_pool.v[i].tp ? msh_pool.v[i].tp->carried : 0ULL);
        fputc('\n', f);
    }
    fprintf(f, "  %6s %10s %10s %10s %10s\n", "domain", "ownership", "handoffs", "sleeps", "wakeups");
    for (int i = 0; i < msh_progress_ndomains(); i++) {
        const msh_domain_stats *s = &msh_progress_domain(i)->st;
        fprintf(f, "  %6d %10llu %10llu %10llu %10llu\n", i, (unsigned long long)s->ownerships,
                (unsigned long long)s->handoffs, (unsigned long long)s->sleeps, (unsigned long long)s->wakeups);
    }
    if (!msh_pool.serialized) {
        fprintf(f, "  %4s %10s %10s\n", "lock", "biased", "revoked");
        for (int i = 0; i < msh_pool.n; i++) {
            const msh_block *b = &msh_pool.v[i].own_lock;
            fprintf(f, "  %4d %10llu %10llu\n", i, (unsigned long long)b->grants, (unsigned long long)b->revocations);
        }
    }
    if (msh_sync_hog_periods())
        fprintf(f, "  a thread outside MPI kept a core: waits stopped yielding %llu times (%d ms each)\n",
                (unsigned long long)msh_sync_hog_periods(), msh_cfg.hog_ms);
    if (msh_progress_has_thread())
        fprintf(f, "  progress thread: slept %llu times with nothing pending\n",
                (unsigned long long)msh_progress_idle_sleeps());
    fprintf(f, "  blocking collectives: %llu the host's call, %llu the nonblocking form (MPISHIM_COLL=%s)\n",
            (unsigned long long)atomic_load(&msh_coll_forms[1]), (unsigned long long)atomic_load(&msh_coll_forms[0]),
            msh_cfg_word(MSH_CFG_COLL, msh_rt.coll_mode));
    fprintf(f, "  at finalize: %d requests still pending, %d communicators not freed by the program\n",
            leaked_reqs, leaked_comms);
    fclose(f);
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
    free(buf);
}

MSH_EXPORT int MPI_Finalize(void)
{
    msh_part_fini();
    int wins = msh_win_fini();
    if (wins && (msh_cfg.stats || msh_cfg.verbose))
        msh_log("rank %d: %d windows were not freed by the program", msh_rt.world_rank, wins);
    if (msh_on()) {
        msh_assist_stop();
        msh_watchdog_stop();
        msh_progress_fini();
        msh_queue_fini();
        int pending = msh_vci_pool_fini(); /* counts; the VCIs stay valid (vci.c) */
        atomic_store_explicit(&msh_solo_on, 0, memory_order_release);
        msh_state_set(MSH_STATE_ACTIVE); /* from here on, everything is forwarded */
        if (!msh_pool.serialized)
            msh_win_direct_runtime(0);
        int comms = msh_comm_fini();
        if (msh_cfg.stats)
            print_stats(pending, comms);
        else if (pending)
            msh_log("rank %d: %d requests were still pending at MPI_Finalize (MPISHIM_STATS=1 shows more)",
                    msh_rt.world_rank, pending);
        msh_req_arena_fini();
    }
    int rc = PMPI_Finalize();
    msh_state_set(MSH_STATE_FINALIZED);
    return rc;
}
