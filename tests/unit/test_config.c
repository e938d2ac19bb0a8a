/* Unit tests of the MPISHIM_* parser (src/core/config.c) and of the info
 * keys' string level, which shares it: no MPI call made (the MPI_Info level,
 * msh_cfg_from_info, is checked by tests/mpi/rma_alloc, mt_hints_error and
 * part_basic). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/log.h"
#include "unit.h"


static char warned[1024];
static int nwarn;

static void on_warn(const char *line, void *arg)
{
    (void)arg;
    nwarn++;
    snprintf(warned, sizeof warned, "%s", line);
}

/* Parse one NAME=VALUE (plus an unrelated variable to show it is ignored). */
static int parse1(msh_config *c, const char *kv, char *err, size_t errlen)
{
    char *env[] = { (char *)"PATH=/usr/bin", (char *)kv, NULL };
    nwarn = 0;
    warned[0] = '\0';
    err[0] = '\0';
    return msh_cfg_parse(c, env, err, errlen, on_warn, NULL);
}

static void test_defaults(void)
{
    msh_config c;
    char err[256];
    char *env[] = { NULL };
    EXPECT(msh_cfg_parse(&c, env, err, sizeof err, on_warn, NULL) == 0);
    EXPECT(c.disable == 0 && c.verbose == 0 && c.stats == 0);
    EXPECT(c.num_vcis == 0); /* auto */
    EXPECT(c.map == MSH_MAP_COMM);
    EXPECT(c.asserts == 0);
    EXPECT(c.progress == MSH_PROGRESS_COMBINE);
    EXPECT(c.wait == MSH_WAIT_ADAPTIVE);
    EXPECT(c.host_thread == MSH_HOST_THREAD_MULTIPLE);
    EXPECT(c.part == MSH_PART_AUTO);
    EXPECT(c.from_env == 0);
}

/* The default policy (combine) queues posts, which rules out the host's
 * blocking collectives: MPISHIM_COLL=host without a policy gets global; a
 * policy named with it stays (and init says that COLL=host is not in effect). */
static void test_default_progress_with_coll_host(void)
{
    msh_config c;
    char err[256];
    EXPECT(parse1(&c, "MPISHIM_COLL=host", err, sizeof err) == 0 && c.coll == MSH_COLL_HOST);
    EXPECT(c.progress == MSH_PROGRESS_GLOBAL);
    EXPECT(!(c.from_env & (1ul << MSH_CFG_PROGRESS)));
    EXPECT(parse1(&c, "MPISHIM_COLL=nonblocking", err, sizeof err) == 0 && c.progress == MSH_PROGRESS_COMBINE);
    char *env[] = { (char *)"MPISHIM_PROGRESS=combine", (char *)"MPISHIM_COLL=host", NULL };
    EXPECT(msh_cfg_parse(&c, env, err, sizeof err, on_warn, NULL) == 0);
    EXPECT(c.coll == MSH_COLL_HOST && c.progress == MSH_PROGRESS_COMBINE);
    char *env2[] = { (char *)"MPISHIM_COLL=host", (char *)"MPISHIM_PROGRESS=vci", NULL };
    EXPECT(msh_cfg_parse(&c, env2, err, sizeof err, on_warn, NULL) == 0);
    EXPECT(c.coll == MSH_COLL_HOST && c.progress == MSH_PROGRESS_VCI);
}

static void test_valid(void)
{
    msh_config c;
    char err[256];
    EXPECT(parse1(&c, "MPISHIM_NUM_VCIS=8", err, sizeof err) == 0 && c.num_vcis == 8);
    EXPECT(parse1(&c, "MPISHIM_NUM_VCIS=auto", err, sizeof err) == 0 && c.num_vcis == 0);
    EXPECT(parse1(&c, "MPISHIM_NUM_VCIS=AUTO", err, sizeof err) == 0 && c.num_vcis == 0);
    EXPECT(parse1(&c, "MPISHIM_NUM_VCIS=64", err, sizeof err) == 0 && c.num_vcis == 64);
    EXPECT(parse1(&c, "MPISHIM_DISABLE=1", err, sizeof err) == 0 && c.disable == 1);
    EXPECT(parse1(&c, "MPISHIM_DISABLE=yes", err, sizeof err) == 0 && c.disable == 1);
    EXPECT(parse1(&c, "MPISHIM_DISABLE=off", err, sizeof err) == 0 && c.disable == 0);
    EXPECT(parse1(&c, "MPISHIM_MAP=hash", err, sizeof err) == 0 && c.map == MSH_MAP_HASH);
    EXPECT(parse1(&c, "MPISHIM_MAP=Thread", err, sizeof err) == 0 && c.map == MSH_MAP_THREAD);
    EXPECT(parse1(&c, "MPISHIM_PROGRESS=vci", err, sizeof err) == 0 && c.progress == MSH_PROGRESS_VCI);
    EXPECT(parse1(&c, "MPISHIM_WAIT=block", err, sizeof err) == 0 && c.wait == MSH_WAIT_BLOCK);
    EXPECT(parse1(&c, "MPISHIM_HOST_THREAD=serialized", err, sizeof err) == 0 &&
           c.host_thread == MSH_HOST_THREAD_SERIALIZED);
    EXPECT(parse1(&c, "MPISHIM_PART=native", err, sizeof err) == 0 && c.part == MSH_PART_NATIVE);
    EXPECT(parse1(&c, "MPISHIM_PART=shim", err, sizeof err) == 0 && c.part == MSH_PART_SHIM);
    EXPECT(parse1(&c, "MPISHIM_ASSERT=no_any_tag,allow_overtaking", err, sizeof err) == 0 &&
           c.asserts == (MSH_ASSERT_NO_ANY_TAG | MSH_ASSERT_ALLOW_OVERTAKING));
    EXPECT(parse1(&c, "MPISHIM_ASSERT= no_any_source , no_any_tag ", err, sizeof err) == 0 &&
           c.asserts == (MSH_ASSERT_NO_ANY_SOURCE | MSH_ASSERT_NO_ANY_TAG));
    EXPECT(parse1(&c, "MPISHIM_ASSERT=", err, sizeof err) == 0 && c.asserts == 0);
    EXPECT(parse1(&c, "MPISHIM_PART_MIN_BYTES=4096", err, sizeof err) == 0 && c.part_min_bytes == 4096);
    EXPECT(parse1(&c, "MPISHIM_PART_MIN_BYTES=64K", err, sizeof err) == 0 && c.part_min_bytes == 65536);
    EXPECT(parse1(&c, "MPISHIM_PART_MIN_BYTES=2MiB", err, sizeof err) == 0 && c.part_min_bytes == 2u << 20);
    EXPECT(parse1(&c, "MPISHIM_SPIN_US=0", err, sizeof err) == 0 && c.spin_us == 0);
    EXPECT(parse1(&c, "MPISHIM_WIN_ROUTE=thread", err, sizeof err) == 0 && c.win_route == MSH_WIN_ROUTE_THREAD);
    EXPECT(parse1(&c, "MPISHIM_WIN_FENCE=passive", err, sizeof err) == 0 && c.win_fence == MSH_WIN_FENCE_PASSIVE);
    EXPECT(parse1(&c, "MPISHIM_WIN_FENCE=host", err, sizeof err) == 0 && c.win_fence == MSH_WIN_FENCE_HOST);
    EXPECT(parse1(&c, "MPISHIM_WIN_FENCE=all", err, sizeof err) == 0 && c.win_fence == MSH_WIN_FENCE_ALL);
    EXPECT(c.win_flush_local == MSH_WIN_FLUSH_LOCAL_AUTO);
    EXPECT(parse1(&c, "MPISHIM_WIN_FLUSH_LOCAL=flush", err, sizeof err) == 0 &&
           c.win_flush_local == MSH_WIN_FLUSH_LOCAL_FLUSH);
    EXPECT(parse1(&c, "MPISHIM_WIN_FLUSH_LOCAL=host", err, sizeof err) == 0 &&
           c.win_flush_local == MSH_WIN_FLUSH_LOCAL_HOST);
    EXPECT(c.coll == MSH_COLL_AUTO);
    EXPECT(parse1(&c, "MPISHIM_COLL=auto", err, sizeof err) == 0 && c.coll == MSH_COLL_AUTO);
    EXPECT(parse1(&c, "MPISHIM_COLL=host", err, sizeof err) == 0 && c.coll == MSH_COLL_HOST);
    EXPECT(parse1(&c, "MPISHIM_COLL=nonblocking", err, sizeof err) == 0 && c.coll == MSH_COLL_NONBLOCKING);
    EXPECT(parse1(&c, "MPISHIM_COLL=blocking", err, sizeof err) != 0);
    EXPECT(parse1(&c, "MPISHIM_MAP=tag", err, sizeof err) == 0 && c.from_env != 0);
    EXPECT(nwarn == 0);
}

/* Every malformed value fails, with one line that names the variable and
 * the accepted values. */
static void test_malformed(void)
{
    static const char *const bad[] = {
        "MPISHIM_NUM_VCIS=banana", "MPISHIM_NUM_VCIS=0", "MPISHIM_NUM_VCIS=-2", "MPISHIM_NUM_VCIS=65",
        "MPISHIM_NUM_VCIS=4x", "MPISHIM_NUM_VCIS=", "MPISHIM_NUM_VCIS=99999999999999999999",
        "MPISHIM_DISABLE=maybe", "MPISHIM_DISABLE=2", "MPISHIM_MAP=random", "MPISHIM_MAP=",
        "MPISHIM_ASSERT=no_any_tag,bogus", "MPISHIM_PROGRESS=fast", "MPISHIM_WAIT=sleep",
        "MPISHIM_HOST_THREAD=single", "MPISHIM_PART=mpipcl", "MPISHIM_PART_MIN_BYTES=1T",
        "MPISHIM_PART_MIN_BYTES=-1", "MPISHIM_SWEEP_POLLS=0", "MPISHIM_SPIN_US=1.5", "MPISHIM_WIN_FENCE=lockall",
        "MPISHIM_WIN_FLUSH_LOCAL=local",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msh_config c;
        char err[512];
        int rc = parse1(&c, bad[i], err, sizeof err);
        size_t nlen = strcspn(bad[i], "=");
        if (rc != -1 || strncmp(err, bad[i], nlen) != 0 || strchr(err, '\n') || !strstr(err, "accepted values")) {
            fprintf(stderr, "FAIL malformed %s: rc=%d err='%s'\n", bad[i], rc, err);
            failures++;
        }
    }
    msh_config c;
    char err[512];
    parse1(&c, "MPISHIM_MAP=random", err, sizeof err);
    EXPECT(strstr(err, "comm|tag|peer|hash|thread") != NULL);
    parse1(&c, "MPISHIM_NUM_VCIS=banana", err, sizeof err);
    EXPECT(strstr(err, "'banana'") != NULL && strstr(err, "1..64") != NULL);
}

static void test_unknown(void)
{
    msh_config c;
    char err[256];
    EXPECT(parse1(&c, "MPISHIM_NUM_VCI=4", err, sizeof err) == 0);
    EXPECT(nwarn == 1);
    EXPECT(strstr(warned, "MPISHIM_NUM_VCI ") != NULL);
    EXPECT(strstr(warned, "did you mean MPISHIM_NUM_VCIS?") != NULL);
    EXPECT(c.num_vcis == 0); /* the typo changed nothing */
    EXPECT(parse1(&c, "MPISHIM_PROGRES=vci", err, sizeof err) == 0 && nwarn == 1);
    EXPECT(strstr(warned, "did you mean MPISHIM_PROGRESS?") != NULL);
    EXPECT(parse1(&c, "MPISHIM_STAT=1", err, sizeof err) == 0 && nwarn == 1);
    EXPECT(strstr(warned, "did you mean MPISHIM_STATS?") != NULL);
    /* Not ours: no warning. */
    EXPECT(parse1(&c, "MPISHIMX=1", err, sizeof err) == 0 && nwarn == 0);
}

/* A value or name echoed in a message is escaped: it cannot end the line
 * and start one of its own (an injected "mpishim:" line). */
static void test_escaped(void)
{
    msh_config c;
    char err[512];
    EXPECT(parse1(&c, "MPISHIM_NUM_VCIS=2\nmpishim: injected", err, sizeof err) == -1);
    EXPECT(strchr(err, '\n') == NULL);
    EXPECT(strstr(err, "MPISHIM_NUM_VCIS='2\\nmpishim: injected' is invalid") != NULL);
    EXPECT(parse1(&c, "MPISHIM_MAP=\x1b[31mred\t\\'\r", err, sizeof err) == -1);
    EXPECT(strstr(err, "MPISHIM_MAP='\\x1b[31mred\\t\\\\\\'\\r' is invalid") != NULL);
    EXPECT(parse1(&c, "MPISHIM_NUM_VCI\nmpishim: fake=1", err, sizeof err) == 0 && nwarn == 1);
    EXPECT(strchr(warned, '\n') == NULL);
    EXPECT(strstr(warned, "unknown variable MPISHIM_NUM_VCI\\nmpishim: fake ignored") != NULL);
    /* Long values are cut, and say so. */
    char kv[300];
    snprintf(kv, sizeof kv, "MPISHIM_WAIT=%0200d", 7);
    EXPECT(parse1(&c, kv, err, sizeof err) == -1);
    EXPECT(strstr(err, "...' is invalid") != NULL && strlen(err) < 300);

    char out[64];
    EXPECT(msh_escape(out, sizeof out, "a\nb\t\\\x01\x7f'\xc3\xa9", 10) > 0);
    EXPECT(strcmp(out, "a\\nb\\t\\\\\\x01\\x7f\\'\xc3\xa9") == 0); /* UTF-8 bytes kept */
    char tiny[6];
    msh_escape(tiny, sizeof tiny, "\n\n\n", 3);
    EXPECT(strcmp(tiny, "\\n\\n") == 0);           /* never half an escape */
}

static void test_edit_distance(void)
{
    EXPECT(msh_edit_distance("", "") == 0);
    EXPECT(msh_edit_distance("abc", "abc") == 0);
    EXPECT(msh_edit_distance("abc", "ABC") == 0);
    EXPECT(msh_edit_distance("kitten", "sitting") == 3);
    EXPECT(msh_edit_distance("", "abcd") == 4);
    EXPECT(msh_edit_distance("MPISHIM_MAP", "MPISHIM_WAIT") == 3);
}


/* Every field, so that a result through one path can be compared with the
 * other's whatever variable it set. */
static int same_cfg(const msh_config *a, const msh_config *b)
{
    return a->disable == b->disable && a->verbose == b->verbose && a->stats == b->stats && a->solo == b->solo &&
           a->num_vcis == b->num_vcis && a->map == b->map && a->asserts == b->asserts &&
           a->progress == b->progress && a->sweep_polls == b->sweep_polls && a->wait == b->wait &&
           a->spin_us == b->spin_us && a->host_thread == b->host_thread && a->part == b->part &&
           a->part_min_bytes == b->part_min_bytes && a->win_k == b->win_k && a->win_route == b->win_route &&
           a->win_fence == b->win_fence && a->win_flush_local == b->win_flush_local && a->watchdog == b->watchdog;
}

/* Strings for every kind of value: good and bad ones, case variants,
 * bounds, suffixes, blanks. */
static const char *const samples[] = {
    "", " ", "0", "1", "2", "4", " 4 ", "04", "+4", "-1", "4x", "1.5", "0x10", "64", "65", "86400",
    "99999999999999999999", "auto", "AUTO", "Auto", "off", "OFF", "host", "Host", "passive", "PASSIVE",
    "passive ", "passiv", "lockall", "banana", "yes", "Yes", "true", "TRUE", "false", "no", "on", "maybe",
    "8K", "8k", "8KB", "8kib", "8KiB", "8 K", "8Kx", "K", "8M", "1G", "2G", "1T", "1073741824", "1073741825",
    "2\nx",
};
#define NSAMPLES (sizeof samples / sizeof samples[0])

/* For every variable with an info key, each sample gives the same result
 * through the environment and through the key: accepted or not, and the
 * same configuration. A flag variable's keys are booleans: they follow a
 * boolean variable (MPISHIM_STATS) and set or clear their own bit. */
static void test_info_same_as_env(void)
{
    int nkeys = 0;
    for (int id = 0; id < MSH_CFG_NVARS; id++) {
        char key[128];
        for (int k = 0; msh_cfg_info_key((msh_cfg_id)id, k, key, sizeof key) == 0; k++) {
            nkeys++;
            int flags = id == MSH_CFG_ASSERT;
            for (size_t i = 0; i < NSAMPLES; i++) {
                msh_config ce, ci;
                char kv[256], err[512], ierr[512] = "";
                snprintf(kv, sizeof kv, "%s=%s", flags ? "MPISHIM_STATS" : msh_cfg_name((msh_cfg_id)id), samples[i]);
                int re = parse1(&ce, kv, err, sizeof err);
                msh_cfg_defaults(&ci);
                int ri = msh_cfg_info_value(&ci, (msh_cfg_id)id, key, samples[i], ierr, sizeof ierr);
                int same;
                if (flags) {
                    unsigned bit = 1u << k;
                    same = re == ri && (re != 0 || ci.asserts == (ce.stats ? bit : 0u));
                    /* false clears the key's bit, and only it */
                    ci.asserts = ~0u;
                    msh_cfg_info_value(&ci, (msh_cfg_id)id, key, samples[i], NULL, 0);
                    same = same && ci.asserts == (re != 0 || ce.stats ? ~0u : ~bit);
                } else {
                    same = re == ri && (re != 0 || same_cfg(&ce, &ci));
                }
                if (!same) {
                    fprintf(stderr, "FAIL info %s='%s': env rc %d, info rc %d (%s)\n", key, samples[i], re, ri,
                            ierr);
                    failures++;
                }
                if (ri != 0 && (strncmp(ierr, "info key ", 9) != 0 || strchr(ierr, '\n') ||
                                !strstr(ierr, "' ignored; accepted values: "))) {
                    fprintf(stderr, "FAIL info %s='%s': warning '%s'\n", key, samples[i], ierr);
                    failures++;
                }
            }
        }
    }
    EXPECT(nkeys == 6); /* 3 mpi_assert_*, part_min_bytes, win_k, win_fence */
}

/* What the keys accept, spelled out: the shared parser itself is checked,
 * not only that both paths agree. */
static int info1(msh_config *c, msh_cfg_id id, const char *key, const char *val, char *err, size_t errlen)
{
    msh_cfg_defaults(c);
    err[0] = '\0';
    return msh_cfg_info_value(c, id, key, val, err, errlen);
}

static void test_info_values(void)
{
    msh_config c;
    char err[512];
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", "4", err, sizeof err) == 0 && c.win_k == 4);
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", " 4 ", err, sizeof err) == 0 && c.win_k == 4);
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", "AUTO", err, sizeof err) == 0 && c.win_k == 0);
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", "64", err, sizeof err) == 0 && c.win_k == 64);
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", "65", err, sizeof err) == -1 && c.win_k == 0);
    EXPECT(strcmp(err, "info key mpishim_win_k='65' ignored; accepted values: auto or an integer 1..64") == 0);
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_k", "0", err, sizeof err) == -1);
    EXPECT(info1(&c, MSH_CFG_WIN_FENCE, "mpishim_win_fence", "Passive", err, sizeof err) == 0 &&
           c.win_fence == MSH_WIN_FENCE_PASSIVE);
    EXPECT(info1(&c, MSH_CFG_WIN_FENCE, "mpishim_win_fence", "host", err, sizeof err) == 0 &&
           c.win_fence == MSH_WIN_FENCE_HOST);
    EXPECT(info1(&c, MSH_CFG_WIN_FENCE, "mpishim_win_fence", "lockall", err, sizeof err) == -1);
    EXPECT(strcmp(err, "info key mpishim_win_fence='lockall' ignored; accepted values: host|passive|all") == 0);
    EXPECT(info1(&c, MSH_CFG_PART_MIN_BYTES, "mpishim_part_min_bytes", "8KiB", err, sizeof err) == 0 &&
           c.part_min_bytes == 8192);
    EXPECT(info1(&c, MSH_CFG_PART_MIN_BYTES, "mpishim_part_min_bytes", "1g", err, sizeof err) == 0 &&
           c.part_min_bytes == 1u << 30);
    /* Before the shared parser the key took any size (no bound) and "8Kx". */
    EXPECT(info1(&c, MSH_CFG_PART_MIN_BYTES, "mpishim_part_min_bytes", "2G", err, sizeof err) == -1 &&
           c.part_min_bytes == 0);
    EXPECT(info1(&c, MSH_CFG_PART_MIN_BYTES, "mpishim_part_min_bytes", "8Kx", err, sizeof err) == -1);
    EXPECT(info1(&c, MSH_CFG_ASSERT, "mpi_assert_no_any_source", "TRUE", err, sizeof err) == 0 &&
           c.asserts == MSH_ASSERT_NO_ANY_SOURCE);
    EXPECT(info1(&c, MSH_CFG_ASSERT, "mpi_assert_allow_overtaking", "yes", err, sizeof err) == 0 &&
           c.asserts == MSH_ASSERT_ALLOW_OVERTAKING);
    EXPECT(info1(&c, MSH_CFG_ASSERT, "mpi_assert_no_any_tag", "maybe", err, sizeof err) == -1 && c.asserts == 0);
    EXPECT(strstr(err, "info key mpi_assert_no_any_tag='maybe' ignored; accepted values: 0|1") == err);
    /* A key of another variable, or none at all. */
    EXPECT(info1(&c, MSH_CFG_WIN_K, "mpishim_win_fence", "4", err, sizeof err) == -1 && c.win_k == 0);
    EXPECT(info1(&c, MSH_CFG_MAP, "mpishim_map", "tag", err, sizeof err) == -1 && c.map == MSH_MAP_COMM);
    /* Escaped like the environment's values. */
    EXPECT(info1(&c, MSH_CFG_WIN_FENCE, "mpishim_win_fence", "host\nmpishim: x", err, sizeof err) == -1);
    EXPECT(strstr(err, "='host\\nmpishim: x' ignored") != NULL && !strchr(err, '\n'));
    char key[64];
    EXPECT(msh_cfg_info_key(MSH_CFG_ASSERT, 2, key, sizeof key) == 0 && strcmp(key, "mpi_assert_allow_overtaking") == 0);
    EXPECT(msh_cfg_info_key(MSH_CFG_ASSERT, 3, key, sizeof key) == -1);
    EXPECT(msh_cfg_info_key(MSH_CFG_WIN_K, 1, key, sizeof key) == -1);
    EXPECT(msh_cfg_info_key(MSH_CFG_NUM_VCIS, 0, key, sizeof key) == -1);
}

/* The table has an entry for every id, and its words are the enums'. */
static void test_table(void)
{
    for (int id = 0; id < MSH_CFG_NVARS; id++) {
        const char *n = msh_cfg_name((msh_cfg_id)id);
        if (!n || strncmp(n, "MPISHIM_", 8) != 0) {
            fprintf(stderr, "FAIL table entry %d has no name\n", id);
            failures++;
        }
    }
    EXPECT(strcmp(msh_cfg_name(MSH_CFG_WIN_K), "MPISHIM_WIN_K") == 0);
    EXPECT(strcmp(msh_cfg_word(MSH_CFG_PROGRESS, MSH_PROGRESS_VCI), "vci") == 0);
    EXPECT(strcmp(msh_cfg_word(MSH_CFG_WAIT, MSH_WAIT_ADAPTIVE), "adaptive") == 0);
    EXPECT(strcmp(msh_cfg_word(MSH_CFG_WAIT, 3), "?") == 0);
    EXPECT(strcmp(msh_cfg_word(MSH_CFG_NUM_VCIS, 0), "?") == 0);
    EXPECT(strcmp(msh_cfg_word(MSH_CFG_ASSERT, 1), "no_any_source") == 0); /* bit 1 = MSH_ASSERT_NO_ANY_SOURCE */
    EXPECT(MSH_ASSERT_NO_ANY_SOURCE == 1u << 1);
}

static void test_print(void)
{
    msh_config c;
    char err[256];
    EXPECT(parse1(&c, "MPISHIM_ASSERT=no_any_source,allow_overtaking", err, sizeof err) == 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    msh_cfg_print(f, &c);
    fclose(f);
    EXPECT(strstr(buf, "MPISHIM_ASSERT") != NULL);
    EXPECT(strstr(buf, "no_any_source,allow_overtaking") != NULL);
    EXPECT(strstr(buf, "(environment)") != NULL);
    EXPECT(strstr(buf, "MPISHIM_NUM_VCIS         auto") != NULL);
    free(buf);
}

int main(void)
{
    test_defaults();
    test_valid();
    test_default_progress_with_coll_host();
    test_malformed();
    test_unknown();
    test_escaped();
    test_edit_distance();
    test_print();
    test_info_same_as_env();
    test_info_values();
    test_table();
    if (failures) {
        fprintf(stderr, "test_config: %d failure(s)\n", failures);
        return 1;
    }
    printf("ok test_config\n");
    return 0;
}
