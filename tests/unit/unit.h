/* What every unit test shares: EXPECT counts a failed check and goes on
 * (not assert(): the checks must run with -DNDEBUG too); main returns
 * failures != 0 after printing its summary line. */
#ifndef MSH_TESTS_UNIT_H
#define MSH_TESTS_UNIT_H

#include <stdio.h>

static int failures;

#define EXPECT(cond)                                                         \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                      \
        }                                                                    \
    } while (0)

#endif
