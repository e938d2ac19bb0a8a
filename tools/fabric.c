/*
 * fabric.c - the libfabric providers and their transmit-context limits, for
 * mpishim-info. Not part of libmpishim.so: loading Debian's libfabric maps
 * PSM libraries that install signal handlers and cost start-up time in every
 * process (src/core/topo.c).
 *
 * Build: -DHAVE_LIBFABRIC -lfabric for the query; without, the functions
 * report "not built in".
 */
#include "fabric.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef HAVE_LIBFABRIC
#include <rdma/fabric.h>
#endif

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

