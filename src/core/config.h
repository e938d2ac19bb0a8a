/* mpishim configuration: every MPISHIM_* variable is described once, in the
 * table in config.c, and parsed there at init. */
#ifndef MSH_CORE_CONFIG_H
#define MSH_CORE_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define MSH_MAX_VCIS 64

typedef enum { MSH_MAP_COMM, MSH_MAP_TAG, MSH_MAP_PEER, MSH_MAP_HASH, MSH_MAP_THREAD } msh_map_policy;
typedef enum { MSH_PROGRESS_GLOBAL, MSH_PROGRESS_VCI, MSH_PROGRESS_THREAD } msh_progress_policy;
typedef enum { MSH_WAIT_SPIN, MSH_WAIT_BLOCK, MSH_WAIT_ADAPTIVE } msh_wait_policy;
typedef enum { MSH_HOST_THREAD_MULTIPLE, MSH_HOST_THREAD_SERIALIZED } msh_host_thread;
typedef enum { MSH_PART_SHIM, MSH_PART_NATIVE } msh_part_impl;
typedef enum { MSH_WIN_ROUTE_TARGET, MSH_WIN_ROUTE_THREAD } msh_win_route;
typedef enum { MSH_WIN_FENCE_HOST, MSH_WIN_FENCE_PASSIVE } msh_win_fence_mode;
typedef enum { MSH_WIN_FLUSH_LOCAL_AUTO, MSH_WIN_FLUSH_LOCAL_HOST, MSH_WIN_FLUSH_LOCAL_FLUSH } msh_win_flush_local;

/* MPISHIM_ASSERT flags (and the matching mpi_assert_* info keys). */
enum {
    MSH_ASSERT_NO_ANY_TAG       = 1u << 0,
    MSH_ASSERT_NO_ANY_SOURCE    = 1u << 1,
    MSH_ASSERT_ALLOW_OVERTAKING = 1u << 2,
};

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
    /* Which fields came from the environment (bit i = table entry i). */
    unsigned long       from_env;
} msh_config;

/* The configuration of this process, filled by msh_cfg_init(). */
extern msh_config msh_cfg;

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

/* Levenshtein distance between two NUL-terminated strings (capped at 255 chars). */
int msh_edit_distance(const char *a, const char *b);

#endif
