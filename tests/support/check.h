/* SPDX-License-Identifier: MIT */
/*
 * A small test harness for leash's tests.
 *
 * Each case runs in a forked child, so a crash, an abort or a hang in one
 * case becomes one FAIL line and the following cases still run. A test
 * program looks like:
 *
 *     TEST(t_lock_unlock) { CHECK(1 + 1 == 2); }
 *     TEST(t_slow)        { ... }
 *
 *     int main(int argc, char **argv)
 *     {
 *         return test_main(argc, argv, (test_case[]){
 *             TEST_CASE(t_lock_unlock),
 *             TEST_CASE_T(t_slow, 10),
 *             {0},
 *         });
 *     }
 *
 * Command line: names of cases to run (default: all), --list to print the
 * names, --no-fork to run the cases in the test process itself (for a
 * debugger; no time limits, and the first failure ends the run).
 *
 * Output, on stdout, one line per case and a summary:
 *
 *     PASS t_lock_unlock (12 ms)
 *     FAIL t_slow: tests/test_x.c:42: CHECK(n == 3) failed
 *     1 passed, 1 failed
 *
 * The exit status is 0 only when every selected case passed.
 */
#ifndef LEASH_TESTS_CHECK_H
#define LEASH_TESTS_CHECK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct test_case {
    const char *name;
    void (*fn)(void);
    int timeout_s; /* 0: TEST_DEFAULT_TIMEOUT_S */
} test_case;

#define TEST_DEFAULT_TIMEOUT_S 60

/* How late a loop timer or a wake-up may come on a loaded 2-core machine:
 * the scheduler sets this, not leash. Upper bounds on "how late" add it;
 * lower bounds ("never early") stay exact. */
#define TEST_SLACK_MS 100

#define TEST(name) static void name(void)
#define TEST_CASE(name) \
    { #name, name, 0 }
#define TEST_CASE_T(name, seconds) \
    { #name, name, (seconds) }

/* Runs the cases of a list that ends with an entry whose name is NULL.
 * Returns the process exit status: 0 all passed, 1 a case failed, 2 bad
 * command line. */
int test_main(int argc, char **argv, const test_case *cases);

/* Milliseconds of CLOCK_MONOTONIC. */
int64_t test_now_ms(void);

/* The case that runs now (inside its function), for a table of cases that
 * share one function; NULL outside a case. */
const test_case *test_current(void);

/* A folder for the files of the running case: a folder that test_main
 * made for this run and removes at the end, else $TMPDIR, else /tmp. */
const char *test_tmpdir(void);

/* Sleeps ms milliseconds, on through interrupting signals. */
void test_sleep_ms(int ms);

/* Removes path and, for a folder, everything below it, without following
 * links; what cannot be removed stays, silently. */
void test_remove_tree(const char *path);

#if defined(__GNUC__) || defined(__clang__)
#define TEST_NORETURN_ __attribute__((noreturn))
#define TEST_PRINTF_(f, a) __attribute__((format(printf, f, a)))
#else
#define TEST_NORETURN_
#define TEST_PRINTF_(f, a)
#endif

/* Report a failed check and end the case with exit(1). Not called
 * directly; use the macros below. */
/* Called once when a case fails, before the failure is printed: a suite
 * prints what helps to read it (fixture.c: the leash log of the case). */
extern void (*test_on_fail)(void);
TEST_NORETURN_ void test_fail_(const char *file, int line, const char *what);
TEST_NORETURN_ void test_failf_(const char *file, int line, const char *what, const char *fmt, ...)
    TEST_PRINTF_(4, 5);

#define CHECK(cond)                                             \
    do {                                                        \
        if (!(cond))                                            \
            test_fail_(__FILE__, __LINE__, "CHECK(" #cond ")"); \
    } while (0)

/* CHECK_MSG(cond, fmt, ...): the message is a printf format and its
 * arguments. */
#define CHECK_MSG(cond, ...)                                                      \
    do {                                                                          \
        if (!(cond))                                                              \
            test_failf_(__FILE__, __LINE__, "CHECK_MSG(" #cond ")", __VA_ARGS__); \
    } while (0)

/* Both sides are evaluated once and compared as long long. */
#define CHECK_EQ_INT(a, b)                                                                  \
    do {                                                                                    \
        long long check_a_ = (long long)(a);                                                \
        long long check_b_ = (long long)(b);                                                \
        if (check_a_ != check_b_)                                                           \
            test_failf_(__FILE__, __LINE__, "CHECK_EQ_INT(" #a ", " #b ")", "%lld != %lld", \
                        check_a_, check_b_);                                                \
    } while (0)

/* Two NULLs are equal; a NULL and a string are not. */
#define CHECK_STR_EQ(a, b) \
    test_check_str_eq_(__FILE__, __LINE__, "CHECK_STR_EQ(" #a ", " #b ")", (a), (b))

void test_check_str_eq_(const char *file, int line, const char *what, const char *a, const char *b);

#ifdef __cplusplus
}
#endif

#endif
