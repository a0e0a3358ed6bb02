/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: log lines and their priorities (plugin/util/log.c):
 * "<N>" before a line when stderr is the journal, the level's word, errno
 * kept.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "log.h"
#include "unit_main.h"

static char path[] = "/tmp/test_log.XXXXXX";
static int saved_stderr = -1;

/* stderr to a new file; journal: JOURNAL_STREAM names it, or names
 * another file, or is unset.
 */
enum journal { NOT_SET, THIS_FILE, OTHER_FILE };

static void
capture (enum journal j)
{
  struct stat st;
  char v[64];
  int fd;

  strcpy (path, "/tmp/test_log.XXXXXX");
  fd = mkstemp (path);
  assert_true (fd >= 0);
  fflush (stderr);
  saved_stderr = dup (STDERR_FILENO);
  assert_true (saved_stderr >= 0);
  assert_true (dup2 (fd, STDERR_FILENO) == STDERR_FILENO);
  close (fd);
  assert_int_equal (fstat (STDERR_FILENO, &st), 0);
  snprintf (v, sizeof v, "%ju:%ju", (uintmax_t) st.st_dev,
            (uintmax_t) st.st_ino + (j == OTHER_FILE));
  if (j == NOT_SET)
    unsetenv ("JOURNAL_STREAM");
  else
    setenv ("JOURNAL_STREAM", v, 1);
}

/* What was written, stderr restored. */
static char *
captured (void)
{
  static char buf[4096];
  FILE *fp;
  size_t n;

  fflush (stderr);
  dup2 (saved_stderr, STDERR_FILENO);
  close (saved_stderr);
  fp = fopen (path, "re");
  assert_non_null (fp);
  n = fread (buf, 1, sizeof buf - 1, fp);
  buf[n] = '\0';
  fclose (fp);
  unlink (path);
  unsetenv ("JOURNAL_STREAM");
  return buf;
}

static void
log_journal_lines_start_with_their_priority (void **state)
{
  (void) state;
  capture (THIS_FILE);
  assert_true (log_stderr_is_journal ());
  stripe_error ("member %u failed", 1);
  stripe_warning ("member %u slow", 2);
  stripe_notice ("member %u ok again", 3);
  stripe_info ("serving");
  stripe_log (LOG_WARNING, "health: member %u (%s): ok -> failing", 0, "/m0");
  assert_string_equal (captured (),
                       "<3>nbdstripe: error: member 1 failed\n"
                       "<4>nbdstripe: warning: member 2 slow\n"
                       "<5>nbdstripe: notice: member 3 ok again\n"
                       "<6>nbdstripe: info: serving\n"
                       "<4>nbdstripe: warning: health: member 0 (/m0): "
                       "ok -> failing\n");
}

static void
log_no_prefix_when_journal_stream_is_unset (void **state)
{
  (void) state;
  capture (NOT_SET);
  assert_false (log_stderr_is_journal ());
  stripe_error ("member %u failed", 1);
  stripe_warning ("slow");
  assert_string_equal (captured (), "nbdstripe: error: member 1 failed\n"
                                    "nbdstripe: warning: slow\n");
}

/* A child whose stderr went elsewhere inherits the variable. */
static void
log_no_prefix_when_journal_stream_names_another_file (void **state)
{
  (void) state;
  capture (OTHER_FILE);
  assert_false (log_stderr_is_journal ());
  stripe_notice ("ok");
  assert_string_equal (captured (), "nbdstripe: notice: ok\n");
}

/* serve's own lines: the prefix alone, "" outside the journal. */
static void
log_journal_prefix_is_the_priority_in_the_journal_only (void **state)
{
  (void) state;
  capture (THIS_FILE);
  assert_string_equal (log_journal_prefix (LOG_ERR), "<3>");
  assert_string_equal (log_journal_prefix (LOG_WARNING), "<4>");
  assert_string_equal (log_journal_prefix (LOG_INFO), "<6>");
  assert_string_equal (log_journal_prefix (99), "<3>");
  captured ();
  capture (OTHER_FILE);
  assert_string_equal (log_journal_prefix (LOG_ERR), "");
  captured ();
  capture (NOT_SET);
  assert_string_equal (log_journal_prefix (LOG_INFO), "");
  captured ();
}

static void
log_malformed_journal_stream_is_not_the_journal (void **state)
{
  static const char *const bad[] = { "",    "12",     "12:",      ":12",
                                     "a:b", "12:34x", "12:34:56", "-1:-1" };

  (void) state;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    setenv ("JOURNAL_STREAM", bad[i], 1);
    assert_false (log_stderr_is_journal ());
  }
  unsetenv ("JOURNAL_STREAM");
}

static void
log_percent_m_reads_errno_and_keeps_it (void **state)
{
  (void) state;
  capture (THIS_FILE);
  errno = ENOENT;
  stripe_error ("open: %m");
  assert_int_equal (errno, ENOENT);
  errno = EIO;
  stripe_warning ("read: %m");
  assert_int_equal (errno, EIO);
  assert_string_equal (captured (),
                       "<3>nbdstripe: error: open: No such file or directory\n"
                       "<4>nbdstripe: warning: read: Input/output error\n");
}

/* The nbdstripe command's sink: an error as "nbdstripe: MESSAGE", the
 * shape of the command's own errors; other levels keep their word.
 */
static void
log_command_errors_have_the_commands_one_shape (void **state)
{
  void (*engine) (int, const char *, va_list) = stripe_log_vline;

  (void) state;
  stripe_log_vline = log_command_vline;
  capture (THIS_FILE);
  errno = ENOENT;
  stripe_error ("member %u (%s): open: %m", 1, "/m1");
  assert_int_equal (errno, ENOENT);
  stripe_log (LOG_CRIT, "worse");
  stripe_warning ("member %u slow", 2);
  stripe_info ("serving");
  assert_string_equal (captured (),
                       "<3>nbdstripe: member 1 (/m1): open: No such file or "
                       "directory\n"
                       "<2>nbdstripe: worse\n"
                       "<4>nbdstripe: warning: member 2 slow\n"
                       "<6>nbdstripe: info: serving\n");
  capture (NOT_SET);
  stripe_error ("member %u failed", 1);
  stripe_notice ("ok");
  assert_string_equal (captured (), "nbdstripe: member 1 failed\n"
                                    "nbdstripe: notice: ok\n");
  stripe_log_vline = engine;
}

static void
log_priority_names (void **state)
{
  (void) state;
  assert_string_equal (log_priority_name (LOG_ERR), "error");
  assert_string_equal (log_priority_name (LOG_CRIT), "error");
  assert_string_equal (log_priority_name (LOG_WARNING), "warning");
  assert_string_equal (log_priority_name (LOG_NOTICE), "notice");
  assert_string_equal (log_priority_name (LOG_INFO), "info");
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (log_journal_lines_start_with_their_priority),
    cmocka_unit_test (log_no_prefix_when_journal_stream_is_unset),
    cmocka_unit_test (log_no_prefix_when_journal_stream_names_another_file),
    cmocka_unit_test (log_journal_prefix_is_the_priority_in_the_journal_only),
    cmocka_unit_test (log_malformed_journal_stream_is_not_the_journal),
    cmocka_unit_test (log_percent_m_reads_errno_and_keeps_it),
    cmocka_unit_test (log_command_errors_have_the_commands_one_shape),
    cmocka_unit_test (log_priority_names),
  };

  return run_unit_tests ("log", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
