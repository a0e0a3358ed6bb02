/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: cmocka assertions on the engine's log lines,
 * captured by tests/lib/log_capture.h.  A failed one prints every line.
 */
#ifndef NBDSTRIPE_TEST_UNIT_LOG_H
#define NBDSTRIPE_TEST_UNIT_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <setjmp.h>
#include <cmocka.h>

#include "log.h"
#include "log_capture.h"

/* An error line holds every phrase given. */
#define assert_error_logged(...)                                              \
  do {                                                                        \
    if (!log_captured_all (LOG_ERR, __VA_ARGS__, (const char *) NULL)) {      \
      log_capture_print (stderr);                                             \
      fail_msg ("no error line holds all of: %s", #__VA_ARGS__);              \
    }                                                                         \
  } while (0)

/* A line of priority p or more urgent holds every phrase given. */
#define assert_logged_at(p, ...)                                              \
  do {                                                                        \
    if (!log_captured_all ((p), __VA_ARGS__, (const char *) NULL)) {          \
      log_capture_print (stderr);                                             \
      fail_msg ("no line at %s or worse holds all of: %s",                    \
                log_priority_name (p), #__VA_ARGS__);                         \
    }                                                                         \
  } while (0)

#define assert_not_logged(needle)                                             \
  do {                                                                        \
    if (log_captured (needle)) {                                              \
      log_capture_print (stderr);                                             \
      fail_msg ("logged, but should not be: \"%s\"", (needle));               \
    }                                                                         \
  } while (0)

#define assert_nothing_logged()                                               \
  do {                                                                        \
    if (log_captured_count () > 0) {                                          \
      log_capture_print (stderr);                                             \
      fail_msg ("expected no line logged");                                   \
    }                                                                         \
  } while (0)

#endif /* NBDSTRIPE_TEST_UNIT_LOG_H */
