/*
 * topo.c - machine queries: cores / PUs in our CPU binding (hwloc) and the
 * libfabric providers with their transmit-context limits.
 *
 * Build: -lhwloc, plus -DHAVE_LIBFABRIC -lfabric for the fabric queries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE             /* sched_getaffinity, CPU_ALLOC */
#endif

#include "core/topo.h"

#include <hwloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef HAVE_LIBFABRIC
#include <rdma/fabric.h>
#endif

/* ------------------------------------------------------------------------ */
/* CPU topology                                                             */
/* ------------------------------------------------------------------------ */

/* Everything the CPU queries report, filled once by topo_init(). */
static struct {
    int  cores;
    int  pus;
    int  from_hwloc;            /* 0: figures come from the fallback */
    char cpuset[256];           /* hwloc bitmap string, e.g. 0x00000003 */
    char version[32];           /* hwloc release, e.g. 2.9.0 */
} g_topo;

static pthread_once_t g_topo_once = PTHREAD_ONCE_INIT;

/* CPUs in our sched_getaffinity mask, or 0 if it cannot be read.  The mask
 * is grown until it is big enough for the kernel (machines > 1024 CPUs). */
static int affinity_count(void)
{
    for (int ncpu = 1024; ncpu <= (1 << 20); ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (set == NULL)
            return 0;
        size_t sz = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(sz, set);
        int rc = sched_getaffinity(0, sz, set);
        int n = (rc == 0) ? CPU_COUNT_S(sz, set) : 0;
        CPU_FREE(set);
        if (rc == 0)
            return n;
        /* EINVAL means the mask was too small: try a bigger one. */
    }
    return 0;
}

/* Fill g_topo from hwloc.  Returns 0 on success, -1 if hwloc failed. */
static int topo_from_hwloc(void)
{
    hwloc_topology_t topo;
    if (hwloc_topology_init(&topo) != 0)
        return -1;
    /* Only cores and PUs matter: skipping caches makes the load cheaper. */
    hwloc_topology_set_cache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    hwloc_topology_set_icache_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_NONE);
    if (hwloc_topology_load(topo) != 0) {
        hwloc_topology_destroy(topo);
        return -1;
    }

    int rc = -1;
    hwloc_bitmap_t set = hwloc_bitmap_alloc();
    if (set == NULL)
        goto out;

    /* Our binding; if it cannot be read (e.g. topology from an XML file),
     * everything we are allowed to run on. */
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    if (hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) != 0)
        hwloc_bitmap_copy(set, allowed);
    hwloc_bitmap_and(set, set, allowed);

    int pus = hwloc_bitmap_weight(set);
    if (pus <= 0)
        goto out;

    /* A core counts if any of its PUs is in the binding. */
    int cores = 0;
    hwloc_obj_t core = NULL;
    while ((core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core)))
        if (core->cpuset && hwloc_bitmap_intersects(core->cpuset, set))
            cores++;
    if (cores == 0)             /* some platforms expose no Core objects */
        cores = pus;

    g_topo.pus = pus;
    g_topo.cores = cores < pus ? cores : pus;
    hwloc_bitmap_snprintf(g_topo.cpuset, sizeof g_topo.cpuset, set);

    /* The release ("2.9.0") is only known from the root object's info;
     * the API version is the fallback. */
    const char *ver = hwloc_obj_get_info_by_name(hwloc_get_root_obj(topo),
                                                 "hwlocVersion");
    if (ver != NULL && ver[0] != '\0') {
        snprintf(g_topo.version, sizeof g_topo.version, "%s", ver);
    } else {
        unsigned api = hwloc_get_api_version();
        snprintf(g_topo.version, sizeof g_topo.version, "API %u.%u",
                 (api >> 16) & 0xffu, (api >> 8) & 0xffu);
    }
    g_topo.from_hwloc = 1;
    rc = 0;

out:
    if (set != NULL)
        hwloc_bitmap_free(set);
    hwloc_topology_destroy(topo);
    return rc;
}

static void topo_init(void)
{
    if (topo_from_hwloc() == 0)
        return;
    /* No hwloc view: one core per CPU we may run on, or 1. */
    int n = affinity_count();
    if (n < 1)
        n = 1;
    g_topo.cores = n;
    g_topo.pus = n;
    g_topo.from_hwloc = 0;
}

int msh_topo_cores(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.cores;
}

int msh_topo_pus(void)
{
    pthread_once(&g_topo_once, topo_init);
    return g_topo.pus;
}

void msh_topo_describe(char *buf, size_t len)
{
    if (buf == NULL || len == 0)
        return;
    pthread_once(&g_topo_once, topo_init);
    const char *cs = g_topo.cores == 1 ? "" : "s";
    const char *ps = g_topo.pus == 1 ? "" : "s";
    if (g_topo.from_hwloc)
        snprintf(buf, len, "%d core%s / %d PU%s in cpuset %s (hwloc %s)",
                 g_topo.cores, cs, g_topo.pus, ps, g_topo.cpuset,
                 g_topo.version);
    else
        snprintf(buf, len, "%d core%s / %d PU%s (sched_getaffinity; "
                 "hwloc unavailable)", g_topo.cores, cs, g_topo.pus, ps);
}

/* ------------------------------------------------------------------------ */
/* libfabric providers                                                      */
/* ------------------------------------------------------------------------ */

#ifdef HAVE_LIBFABRIC

/* Ask for API 1.5 when the headers have it (the version the query semantics
 * below, e.g. mr_mode bits, were written against); older headers get their
 * own version. */
#if FI_MAJOR_VERSION > 1 || (FI_MAJOR_VERSION == 1 && FI_MINOR_VERSION >= 5)
#define MSH_FI_API FI_VERSION(1, 5)
#else
#define MSH_FI_API FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#endif

static void copy_name(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static int same_prov(const msh_fabric_prov *a, const msh_fabric_prov *b)
{
    return strcmp(a->prov_name, b->prov_name) == 0 &&
           strcmp(a->fabric_name, b->fabric_name) == 0 &&
           strcmp(a->domain_name, b->domain_name) == 0 &&
           a->max_ep_tx_ctx == b->max_ep_tx_ctx &&
           a->tx_ctx_cnt == b->tx_ctx_cnt;
}

int msh_fabric_query(msh_fabric_prov *out, int max)
{
    if (out == NULL || max <= 0)
        return 0;

    struct fi_info *hints = fi_allocinfo();
    if (hints == NULL)
        return 0;
    hints->caps = FI_MSG | FI_TAGGED;
    hints->ep_attr->type = FI_EP_RDM;
    /* This is a capacity survey, not an endpoint we will open: accept every
     * mode and memory-registration requirement so that no provider is
     * hidden for asking something of the application (verbs needs
     * FI_MR_LOCAL, many want FI_CONTEXT, ...). */
    hints->mode = ~0ULL;
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_RAW | FI_MR_VIRT_ADDR |
                                  FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                                  FI_MR_MMU_NOTIFY | FI_MR_RMA_EVENT |
                                  FI_MR_ENDPOINT;

    struct fi_info *info = NULL;
    int rc = fi_getinfo(MSH_FI_API, NULL, NULL, 0, hints, &info);
    fi_freeinfo(hints);
    if (rc != 0 || info == NULL)    /* -FI_ENODATA: no provider matches */
        return 0;

    int n = 0;
    for (struct fi_info *fi = info; fi != NULL && n < max; fi = fi->next) {
        msh_fabric_prov p;
        memset(&p, 0, sizeof p);
        if (fi->fabric_attr != NULL) {
            copy_name(p.prov_name, sizeof p.prov_name, fi->fabric_attr->prov_name);
            copy_name(p.fabric_name, sizeof p.fabric_name, fi->fabric_attr->name);
        }
        if (fi->domain_attr != NULL) {
            copy_name(p.domain_name, sizeof p.domain_name, fi->domain_attr->name);
            p.max_ep_tx_ctx = fi->domain_attr->max_ep_tx_ctx;
            p.tx_ctx_cnt = fi->domain_attr->tx_ctx_cnt;
        }
        if (p.prov_name[0] == '\0')
            continue;
        /* fi_getinfo lists one entry per address format and interface
         * variant; keep each distinct line once. */
        int dup = 0;
        for (int i = 0; i < n && !dup; i++)
            dup = same_prov(&out[i], &p);
        if (!dup)
            out[n++] = p;
    }
    fi_freeinfo(info);
    return n;
}

/*
 * Rule for the pool cap.
 *
 * The cap is meant to reflect hardware transmit streams (no more VCIs than
 * the NIC has queues), so software providers are ignored: "shm"/"sm2" only
 * reach the local node, and "sockets", "tcp", "udp" and "net" emulate RDM
 * over the kernel stack with context counts that describe no hardware
 * (typically large arbitrary numbers).  A layered name such as
 * "tcp;ofi_rxm" is skipped when any component is a software provider, so
 * "verbs;ofi_rxm" counts and "udp;ofi_rxd" does not.
 *
 * For each remaining entry the number of streams is the domain's
 * tx_ctx_cnt (transmit queues the domain supports), or max_ep_tx_ctx when
 * tx_ctx_cnt is 0; entries reporting 0 for both or an absurd value
 * (>= 2^31, i.e. "no limit") say nothing and are ignored.  The result is
 * the smallest over those entries (conservative when several NICs or
 * providers exist), or 0 when none is left.
 */
static const char *const software_provs[] = {
    "shm", "sm2", "sockets", "tcp", "udp", "net",
};

static int is_software_prov(const char *name)
{
    /* Walk the ';'-separated components without copying the name. */
    for (const char *tok = name; *tok != '\0'; ) {
        size_t len = strcspn(tok, ";");
        for (size_t i = 0; i < sizeof software_provs / sizeof *software_provs; i++)
            if (strlen(software_provs[i]) == len &&
                strncmp(tok, software_provs[i], len) == 0)
                return 1;
        tok += len;
        if (*tok == ';')
            tok++;
    }
    return 0;
}

enum { MSH_FABRIC_MAX = 256 };
static size_t g_tx_cap;
static pthread_once_t g_tx_once = PTHREAD_ONCE_INIT;

static void tx_cap_init(void)
{
    static msh_fabric_prov provs[MSH_FABRIC_MAX];   /* only touched once */
    int n = msh_fabric_query(provs, MSH_FABRIC_MAX);
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        if (is_software_prov(provs[i].prov_name))
            continue;
        size_t c = provs[i].tx_ctx_cnt ? provs[i].tx_ctx_cnt
                                       : provs[i].max_ep_tx_ctx;
        if (c == 0 || c >= ((size_t)1 << 31))
            continue;
        if (cap == 0 || c < cap)
            cap = c;
    }
    g_tx_cap = cap;
}

size_t msh_fabric_tx_cap(void)
{
    pthread_once(&g_tx_once, tx_cap_init);
    return g_tx_cap;
}

#else /* !HAVE_LIBFABRIC */

int msh_fabric_query(msh_fabric_prov *out, int max)
{
    (void)out;
    (void)max;
    return -1;
}

size_t msh_fabric_tx_cap(void)
{
    return 0;
}

#endif /* HAVE_LIBFABRIC */

int msh_topo_default_vcis(int max)
{
    int n = msh_topo_cores();
    /* Asking libfabric costs ~0.1 s at start-up; only a pool of more than
     * one VCI can be capped. */
    size_t cap = n > 1 ? msh_fabric_tx_cap() : 0;
    if (cap > 0 && (size_t)n > cap)
        n = (int)cap;
    if (n > max)
        n = max;
    return n < 1 ? 1 : n;
}
