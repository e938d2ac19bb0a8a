/* mpishim configuration: every MPISHIM_* variable is described once, in the
 * table in config.c, and parsed there at init. */
#ifndef MSH_CORE_CONFIG_H
#define MSH_CORE_CONFIG_H

#include <mpi.h>
#include <stddef.h>
#include <stdio.h>

#define MSH_MAX_VCIS 64

typedef enum { MSH_MAP_COMM, MSH_MAP_TAG, MSH_MAP_PEER, MSH_MAP_HASH, MSH_MAP_THREAD } msh_map_policy;
/* COMBINE and OFFLOAD progress as GLOBAL and THREAD do, and queue the
 * point-to-point posts that can be queued (sync/queue.h). */
typedef enum {
    MSH_PROGRESS_GLOBAL,
    MSH_PROGRESS_VCI,
    MSH_PROGRESS_THREAD,
    MSH_PROGRESS_COMBINE,
    MSH_PROGRESS_OFFLOAD,
} msh_progress_policy;
typedef enum { MSH_WAIT_SPIN, MSH_WAIT_BLOCK, MSH_WAIT_ADAPTIVE } msh_wait_policy;
typedef enum { MSH_HOST_THREAD_MULTIPLE, MSH_HOST_THREAD_SERIALIZED } msh_host_thread;
typedef enum { MSH_PART_SHIM, MSH_PART_NATIVE, MSH_PART_AUTO } msh_part_impl;
typedef enum { MSH_WIN_ROUTE_TARGET, MSH_WIN_ROUTE_THREAD } msh_win_route;
typedef enum { MSH_WIN_FENCE_HOST, MSH_WIN_FENCE_PASSIVE, MSH_WIN_FENCE_ALL } msh_win_fence_mode;
typedef enum { MSH_WIN_FLUSH_LOCAL_AUTO, MSH_WIN_FLUSH_LOCAL_HOST, MSH_WIN_FLUSH_LOCAL_FLUSH } msh_win_flush_local;
typedef enum { MSH_COLL_NONBLOCKING, MSH_COLL_HOST, MSH_COLL_AUTO } msh_coll_form;
/* MPISHIM_FABRIC: off, the libfabric provider family the VCIs' own
 * endpoints use (transport/fabric.c), or UCX workers (transport/ucx.c). */
typedef enum { MSH_FABRIC_OFF, MSH_FABRIC_AUTO, MSH_FABRIC_SHM, MSH_FABRIC_TCP, MSH_FABRIC_VERBS, MSH_FABRIC_UCX } msh_fabric;

/* MPISHIM_ASSERT flags (and the matching mpi_assert_* info keys); bit i is
 * the i-th word of MPISHIM_ASSERT in config.c's table. */
enum {
    MSH_ASSERT_NO_ANY_TAG       = 1u << 0,
    MSH_ASSERT_NO_ANY_SOURCE    = 1u << 1,
    MSH_ASSERT_ALLOW_OVERTAKING = 1u << 2,
};

/* One id per MPISHIM_* variable, in the order of the table in config.c
 * (bit id of msh_config.from_env). */
typedef enum {
    MSH_CFG_DISABLE,
    MSH_CFG_VERBOSE,
    MSH_CFG_STATS,
    MSH_CFG_SOLO,
    MSH_CFG_NUM_VCIS,
    MSH_CFG_MAP,
    MSH_CFG_ASSERT,
    MSH_CFG_PROGRESS,
    MSH_CFG_SWEEP_POLLS,
    MSH_CFG_WAIT,
    MSH_CFG_SPIN_US,
    MSH_CFG_HOST_THREAD,
    MSH_CFG_PART,
    MSH_CFG_PART_MIN_BYTES,
    MSH_CFG_WIN_K,
    MSH_CFG_WIN_ROUTE,
    MSH_CFG_WIN_FENCE,
    MSH_CFG_WIN_FLUSH_LOCAL,
    MSH_CFG_WATCHDOG,
    MSH_CFG_PROGRESS_CPU,
    MSH_CFG_HOG_MS,
    MSH_CFG_COLL,
    MSH_CFG_FABRIC,
    MSH_CFG_NVARS
} msh_cfg_id;

typedef struct msh_config {
    int                 disable;        /* MPISHIM_DISABLE */
    int                 verbose;        /* MPISHIM_VERBOSE */
    int                 stats;          /* MPISHIM_STATS */
    int                 solo;           /* MPISHIM_SOLO */
    int                 num_vcis;       /* MPISHIM_NUM_VCIS; 0 = auto */
    msh_map_policy      map;            /* MPISHIM_MAP */
    unsigned            asserts;        /* MPISHIM_ASSERT */
    msh_progress_policy progress;       /* MPISHIM_PROGRESS */
    int                 sweep_polls;    /* MPISHIM_SWEEP_POLLS */
    msh_wait_policy     wait;           /* MPISHIM_WAIT */
    int                 spin_us;        /* MPISHIM_SPIN_US */
    msh_host_thread     host_thread;    /* MPISHIM_HOST_THREAD */
    msh_part_impl       part;           /* MPISHIM_PART */
    size_t              part_min_bytes; /* MPISHIM_PART_MIN_BYTES */
    int                 win_k;          /* MPISHIM_WIN_K; 0 = auto */
    msh_win_route       win_route;      /* MPISHIM_WIN_ROUTE */
    msh_win_fence_mode  win_fence;      /* MPISHIM_WIN_FENCE */
    msh_win_flush_local win_flush_local;/* MPISHIM_WIN_FLUSH_LOCAL */
    int                 watchdog;       /* MPISHIM_WATCHDOG: seconds, 0 = off */
    int                 progress_cpu;   /* MPISHIM_PROGRESS_CPU: a CPU, -1 = auto */
    int                 hog_ms;         /* MPISHIM_HOG_MS: hog mode's period, 0 = off */
    msh_coll_form       coll;           /* MPISHIM_COLL */
    msh_fabric          fabric;         /* MPISHIM_FABRIC */
    /* Which fields came from the environment (bit i = table entry i). */
    unsigned long       from_env;
} msh_config;

/* The configuration of this process, filled by msh_cfg_init(). */
extern msh_config msh_cfg;

/* A progress thread owns progress (thread, offload). */
static inline int msh_progress_has_thread(void)
{
    return msh_cfg.progress == MSH_PROGRESS_THREAD || msh_cfg.progress == MSH_PROGRESS_OFFLOAD;
}

/* Defaults for every field. */
void msh_cfg_defaults(msh_config *cfg);

/* Parse an environment array (NAME=VALUE strings, NULL-terminated) into cfg.
 * Returns 0 on success. On a malformed value returns -1 and writes one line
 * (no newline) into err naming the variable and the accepted values.
 * Unknown MPISHIM_* names are reported through warn (may be NULL), one call
 * per name, with the closest known name. */
int msh_cfg_parse(msh_config *cfg, char *const *envp, char *err, size_t errlen,
                  void (*warn)(const char *line, void *arg), void *warn_arg);

/* Parse the process environment into msh_cfg; on error print the line and
 * exit(1) (init cannot continue with a configuration the user did not mean). */
void msh_cfg_init(void);

/* Print the effective configuration, one variable per line. */
void msh_cfg_print(FILE *out, const msh_config *cfg);
/* The reference of every variable (default, values, info keys, what it
 * does), as Markdown (man = 0) or as the body of a man page section. */
void msh_cfg_doc(FILE *out, int man);

/* The variable's name ("MPISHIM_..."). */
const char *msh_cfg_name(msh_cfg_id id);

/* The word of an enum variable's value (or of a flag variable's bit), as
 * the variable spells it; "?" when id has no such word. */
const char *msh_cfg_word(msh_cfg_id id, int value);

/* Info keys. A variable with an info key in the table takes the same
 * values, by the same parser, per object (window, request, communicator):
 * the key's value goes through the variable's own parser. A flag variable
 * (MPISHIM_ASSERT) has one boolean key per flag instead, the table's prefix
 * plus the flag's word (mpi_assert_no_any_tag), taking the boolean values
 * of the boolean variables.
 *
 * The i-th info key of variable id into buf; -1 when it has no i-th key. */
int msh_cfg_info_key(msh_cfg_id id, int i, char *buf, size_t len);

/* The string level shared with the environment: apply the value val of
 * variable id's info key key to cfg's field. 0 on success; -1 when key is
 * not one of id's keys or val is not accepted, cfg unchanged, and (err not
 * NULL) one line in err: "info key K='V' ignored; accepted values: ...". */
int msh_cfg_info_value(msh_config *cfg, msh_cfg_id id, const char *key, const char *val, char *err,
                       size_t errlen);

/* For each of variable id's info keys present in info (MPI_INFO_NULL: none),
 * apply its value to cfg's field; a value the variable would not accept is
 * ignored with the line above (msh_log_once). Returns how many keys were
 * applied. The caller passes cfg with the field's starting value (usually
 * msh_cfg's) and holds whatever lock host calls need (PMPI_Info_get). */
int msh_cfg_from_info(MPI_Info info, msh_cfg_id id, msh_config *cfg);

/* Levenshtein distance between two NUL-terminated strings (capped at 255 chars). */
int msh_edit_distance(const char *a, const char *b);

#endif
