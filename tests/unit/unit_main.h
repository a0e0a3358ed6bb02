/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the main of every cmocka suite. */
#ifndef NBDSTRIPE_TEST_UNIT_MAIN_H
#define NBDSTRIPE_TEST_UNIT_MAIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <setjmp.h>
#include <cmocka.h>

/* A test entry with its suite's fixture: the functions setup and
 * teardown of the test file, around each test.  CMakeLists.txt reads
 * these entries as it reads cmocka_unit_test ones.
 */
#define fixture_test(f) cmocka_unit_test_setup_teardown (f, setup, teardown)

/* Run every test, or with an argument only the test of that exact name (so
 * that CTest can register each test separately).  An unknown name is an
 * error rather than a silent "0 tests run".
 */
static inline int
run_unit_tests (const char *group, const struct CMUnitTest *tests, size_t nr,
                int argc, char **argv)
{
  if (argc < 2)
    return _cmocka_run_group_tests (group, tests, nr, NULL, NULL);
  for (size_t i = 0; i < nr; ++i)
    if (strcmp (tests[i].name, argv[1]) == 0)
      return _cmocka_run_group_tests (group, &tests[i], 1, NULL, NULL);
  fprintf (stderr, "%s: no test named %s\n", argv[0], argv[1]);
  return 2;
}

#endif /* NBDSTRIPE_TEST_UNIT_MAIN_H */
