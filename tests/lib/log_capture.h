/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: the engine's log lines (include/log.h), captured.
 *
 * log_capture_start points stripe_log_vline at a list kept here, so a
 * unit test can check what the engine told the user -- the member named,
 * the key phrases -- rather than let the lines go to stderr;
 * log_capture_stop puts the previous sink back and forgets the lines.
 * Debug lines (stripe_debug) are not captured.  Plain C: the assertions
 * are the test's (a failed one prints the lines with log_capture_print).
 */
#ifndef NBDSTRIPE_TEST_LOG_CAPTURE_H
#define NBDSTRIPE_TEST_LOG_CAPTURE_H

#include <stdbool.h>
#include <stdio.h>

extern void log_capture_start (void);
extern void log_capture_stop (void);
/* Forget the lines captured so far. */
extern void log_capture_clear (void);

/* Lines captured (of every priority). */
extern unsigned log_captured_count (void);
/* Whether a line holds needle. */
extern bool log_captured (const char *needle);
/* Whether one line of priority max_priority or more urgent (LOG_ERR:
 * errors) holds every phrase given, the list ended by NULL.
 */
extern bool log_captured_all (int max_priority, const char *first, ...)
  __attribute__ ((sentinel));
/* Every line captured, "  PRIORITY: TEXT", to fp. */
extern void log_capture_print (FILE *fp);

#endif /* NBDSTRIPE_TEST_LOG_CAPTURE_H */
