/* Unit tests of the MPISHIM_* parser (src/core/config.c): no MPI needed. */
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
    EXPECT(c.progress == MSH_PROGRESS_GLOBAL);
    EXPECT(c.wait == MSH_WAIT_ADAPTIVE);
    EXPECT(c.host_thread == MSH_HOST_THREAD_MULTIPLE);
    EXPECT(c.part == MSH_PART_SHIM);
    EXPECT(c.from_env == 0);
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
    EXPECT(c.win_flush_local == MSH_WIN_FLUSH_LOCAL_AUTO);
    EXPECT(parse1(&c, "MPISHIM_WIN_FLUSH_LOCAL=flush", err, sizeof err) == 0 &&
           c.win_flush_local == MSH_WIN_FLUSH_LOCAL_FLUSH);
    EXPECT(parse1(&c, "MPISHIM_WIN_FLUSH_LOCAL=host", err, sizeof err) == 0 &&
           c.win_flush_local == MSH_WIN_FLUSH_LOCAL_HOST);
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
    test_malformed();
    test_unknown();
    test_escaped();
    test_edit_distance();
    test_print();
    if (failures) {
        fprintf(stderr, "test_config: %d failure(s)\n", failures);
        return 1;
    }
    printf("ok test_config\n");
    return 0;
}
