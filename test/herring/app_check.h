/*
 * CHECK(cond) for the test SMDDP applications (herring_app, herring_cuda):
 * on a false cond, prints "APP rank R: FAILED cond (file:line)" to stderr
 * and exits 1. The including file defines HERRING_TEST_APP (its name, a
 * string literal) and an int g_rank visible where CHECK is used.
 */
#ifndef TEST_HERRING_APP_CHECK_H
#define TEST_HERRING_APP_CHECK_H

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            std::fprintf(stderr, HERRING_TEST_APP " rank %d: FAILED %s (%s:%d)\n",      \
                         g_rank, #cond, __FILE__, __LINE__);                            \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)

#endif
