/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: nbdkit's command line as nbdkit reads it
 * (plugin/cmdline.c): is -r there?  Where does nbdkit log (--log)?
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "cmdline.h"
#include "unit_main.h"

/* The arguments as /proc/self/cmdline has them: "nbdkit", then each
 * argument, NUL-separated (and one more NUL, as the function asks).
 */
static size_t
join (char *buf, size_t size, const char *const *argv)
{
  size_t len = 0;

  for (size_t i = 0; argv[i]; ++i) {
    size_t n = strlen (argv[i]) + 1;
    assert_true (len + n < size);
    memcpy (&buf[len], argv[i], n);
    len += n;
  }
  buf[len] = '\0';
  return len;
}

static bool
readonly_ (bool posixly_correct, const char *const *argv)
{
  char buf[4096];
  size_t len = join (buf, sizeof buf, argv);

  return cmdline_readonly (buf, len, posixly_correct);
}

static enum cmdline_log
log_ (bool posixly_correct, const char *const *argv)
{
  char buf[4096];
  size_t len = join (buf, sizeof buf, argv);

  return cmdline_log (buf, len, posixly_correct);
}
#define RO(...)                                                               \
  readonly_ (false, (const char *const[]){ "nbdkit", __VA_ARGS__, NULL })
#define RO_POSIX(...)                                                         \
  readonly_ (true, (const char *const[]){ "nbdkit", __VA_ARGS__, NULL })

#define LOG(...)                                                              \
  log_ (false, (const char *const[]){ "nbdkit", __VA_ARGS__, NULL })
#define LOG_POSIX(...)                                                        \
  log_ (true, (const char *const[]){ "nbdkit", __VA_ARGS__, NULL })

#define PLUGIN "/usr/lib/nbdkit/plugins/nbdkit-stripe-plugin.so"

/* Every option of nbdkit 1.32 that takes an argument, in every spelling. */
static const char *const with_arg[] = { "-D",
                                        "--debug",
                                        "-e",
                                        "--export",
                                        "--export-name",
                                        "--exportname",
                                        "--filter",
                                        "-g",
                                        "--group",
                                        "-i",
                                        "--ip-addr",
                                        "--ipaddr",
                                        "--log",
                                        "--mask-handshake",
                                        "-P",
                                        "--pid-file",
                                        "--pidfile",
                                        "-p",
                                        "--port",
                                        "--run",
                                        "--selinux-label",
                                        "-t",
                                        "--threads",
                                        "--tls",
                                        "--tls-certificates",
                                        "--tls-psk",
                                        "-U",
                                        "--unix",
                                        "-u",
                                        "--user",
                                        NULL };

/* And every one that takes none (-r aside). */
static const char *const without_arg[] = { "-4",
                                           "--ipv4-only",
                                           "-6",
                                           "--ipv6-only",
                                           "--dump-config",
                                           "--dump-plugin",
                                           "--exit-with-parent",
                                           "-f",
                                           "--foreground",
                                           "--no-fork",
                                           "--help",
                                           "--long-options",
                                           "-n",
                                           "--new-style",
                                           "--newstyle",
                                           "--no-sr",
                                           "-o",
                                           "--old-style",
                                           "--oldstyle",
                                           "--short-options",
                                           "-s",
                                           "--single",
                                           "--stdin",
                                           "--swap",
                                           "--tls-verify-peer",
                                           "-v",
                                           "--verbose",
                                           "-V",
                                           "--version",
                                           "--vsock",
                                           NULL };

static void
cmdline_without_r_is_read_write (void **state)
{
  (void) state;
  assert_false (RO (PLUGIN, "file=/dev/sda"));
  assert_false (RO ("-f", "-v", "-U", "/run/x.sock", PLUGIN, "config=/c"));
}

static void
cmdline_r_in_every_spelling_is_read_only (void **state)
{
  (void) state;
  assert_true (RO ("-r", PLUGIN, "file=/a"));
  assert_true (RO ("--readonly", PLUGIN, "file=/a"));
  assert_true (RO ("--read-only", PLUGIN, "file=/a"));
  assert_true (RO ("--read", PLUGIN, "file=/a")); /* both: same option */
  assert_true (RO ("--reado", PLUGIN, "file=/a"));
  assert_true (RO ("-fvr", PLUGIN, "file=/a"));
}

static void
cmdline_r_after_every_option_that_takes_an_argument (void **state)
{
  (void) state;
  for (size_t i = 0; with_arg[i]; ++i) {
    if (!RO (with_arg[i], "value", "-r", PLUGIN, "file=/a"))
      fail_msg ("-r after %s value not seen", with_arg[i]);
    if (RO (with_arg[i], "value", PLUGIN, "file=/a"))
      fail_msg ("%s value read as -r", with_arg[i]);
  }
}

static void
cmdline_r_as_an_options_argument_is_not_r (void **state)
{
  (void) state;
  for (size_t i = 0; with_arg[i]; ++i)
    if (RO (with_arg[i], "-r", PLUGIN, "file=/a"))
      fail_msg ("the argument of %s taken for -r", with_arg[i]);
  assert_false (RO ("--run", "nbdinfo -r $uri", PLUGIN, "file=/a"));
  assert_false (RO ("--pid-file=-r", PLUGIN, "file=/a"));
  assert_false (RO ("--export-name=-r", PLUGIN, "file=/a"));
  assert_false (RO ("-e-r", PLUGIN, "file=/a"));
}

static void
cmdline_r_after_every_option_that_takes_none (void **state)
{
  (void) state;
  for (size_t i = 0; without_arg[i]; ++i)
    if (!RO (without_arg[i], "-r", PLUGIN, "file=/a"))
      fail_msg ("-r after %s not seen", without_arg[i]);
}

static void
cmdline_long_option_with_equals_takes_no_next_argument (void **state)
{
  (void) state;
  assert_true (RO ("--pid-file=/run/x.pid", "-r", PLUGIN, "file=/a"));
  assert_true (RO ("--ip-addr=127.0.0.1", "--port=10809", "-r", PLUGIN));
  assert_true (RO ("--export-name=vol", "-r", PLUGIN, "file=/a"));
  assert_true (RO ("--tls=require", "--tls-psk=/etc/psk", "-r", PLUGIN));
}

static void
cmdline_short_option_clusters_and_attached_arguments (void **state)
{
  (void) state;
  assert_true (RO ("-rP", "/run/x.pid", PLUGIN, "file=/a"));
  assert_false (RO ("-Pr", PLUGIN, "file=/a")); /* the pidfile is "r" */
  assert_false (RO ("-vP", "-r", PLUGIN, "file=/a"));
  assert_true (RO ("-Dstripe.io_uring=0", "-r", PLUGIN, "file=/a"));
  assert_true (RO ("-fv", "-e", "vol", "-r", PLUGIN, "file=/a"));
  assert_true (RO ("-t4", "-r", PLUGIN));
}

static void
cmdline_unambiguous_abbreviations_take_their_argument (void **state)
{
  (void) state;
  assert_true (RO ("--pid", "/run/x.pid", "-r", PLUGIN)); /* --pid-file */
  assert_false (RO ("--pid", "-r", PLUGIN));
  assert_true (RO ("--export-n", "vol", "-r", PLUGIN));
  assert_true (RO ("--exp", "vol", "-r", PLUGIN)); /* all three: -e */
  assert_true (RO ("--tls-c", "/etc/pki", "-r", PLUGIN));
  assert_true (RO ("--sel", "label", "-r", PLUGIN));
  assert_false (RO ("--mask", "-r", PLUGIN));
}

/* GNU getopt moves non-options to the end and reads on: nbdkit takes
 * "nbdkit PLUGIN file=/a -r" as read-only, unless $POSIXLY_CORRECT.
 */
static void
cmdline_options_after_the_plugin_count (void **state)
{
  (void) state;
  assert_true (RO (PLUGIN, "file=/a", "-r"));
  assert_true (RO ("-P", "/x.pid", PLUGIN, "file=/a", "file=/b", "-r"));
  assert_true (RO (PLUGIN, "-e", "vol", "file=/a", "--read-only"));
  assert_false (RO (PLUGIN, "-e", "-r", "file=/a"));
  assert_false (RO_POSIX (PLUGIN, "file=/a", "-r"));
  assert_true (RO_POSIX ("-r", PLUGIN, "file=/a"));
}

static void
cmdline_double_dash_ends_the_options (void **state)
{
  (void) state;
  assert_false (RO ("--", PLUGIN, "-r"));
  assert_false (RO ("-f", "--", "-r"));
  assert_true (RO ("-r", "--", PLUGIN));
}

static void
cmdline_a_lone_dash_is_not_an_option (void **state)
{
  (void) state;
  assert_true (RO ("-U", "-", "-r", PLUGIN));
  assert_true (RO ("-", "-r", PLUGIN));
}

static void
cmdline_log_default_without_the_option (void **state)
{
  (void) state;
  assert_int_equal (LOG (PLUGIN, "file=/a"), CMDLINE_LOG_DEFAULT);
  assert_int_equal (LOG ("-f", "-U", "/s", PLUGIN, "file=/a"),
                    CMDLINE_LOG_DEFAULT);
  /* Arguments that only look like it. */
  assert_int_equal (LOG ("-e", "--log=syslog", PLUGIN), CMDLINE_LOG_DEFAULT);
  assert_int_equal (LOG (PLUGIN, "log=syslog"), CMDLINE_LOG_DEFAULT);
  assert_int_equal (LOG ("--", "--log=null", PLUGIN), CMDLINE_LOG_DEFAULT);
}

static void
cmdline_log_each_value_with_equals_or_next_argument (void **state)
{
  (void) state;
  assert_int_equal (LOG ("--log=stderr", PLUGIN), CMDLINE_LOG_STDERR);
  assert_int_equal (LOG ("--log=syslog", PLUGIN), CMDLINE_LOG_SYSLOG);
  assert_int_equal (LOG ("--log=null", PLUGIN), CMDLINE_LOG_NULL);
  assert_int_equal (LOG ("--log", "syslog", PLUGIN), CMDLINE_LOG_SYSLOG);
  assert_int_equal (LOG ("--log", "null", "-r", PLUGIN), CMDLINE_LOG_NULL);
  /* No abbreviation: --lo and --l are --long-options too, so getopt_long
   * calls them ambiguous and nbdkit refuses to start.
   */
  assert_int_equal (LOG ("--lo=syslog", PLUGIN), CMDLINE_LOG_DEFAULT);
  assert_int_equal (LOG ("--l", "syslog", PLUGIN), CMDLINE_LOG_DEFAULT);
}

static void
cmdline_log_last_one_wins_after_the_plugin_too (void **state)
{
  (void) state;
  assert_int_equal (LOG ("--log=null", "--log=syslog", PLUGIN),
                    CMDLINE_LOG_SYSLOG);
  assert_int_equal (LOG ("--log=syslog", PLUGIN, "file=/a", "--log=stderr"),
                    CMDLINE_LOG_STDERR);
  assert_int_equal (LOG_POSIX ("--log=syslog", PLUGIN, "--log=stderr"),
                    CMDLINE_LOG_SYSLOG);
  /* A value nbdkit refuses changes nothing (nbdkit exits anyway). */
  assert_int_equal (LOG ("--log=syslog", "--log=journal", PLUGIN),
                    CMDLINE_LOG_SYSLOG);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (cmdline_without_r_is_read_write),
    cmocka_unit_test (cmdline_r_in_every_spelling_is_read_only),
    cmocka_unit_test (cmdline_r_after_every_option_that_takes_an_argument),
    cmocka_unit_test (cmdline_r_as_an_options_argument_is_not_r),
    cmocka_unit_test (cmdline_r_after_every_option_that_takes_none),
    cmocka_unit_test (cmdline_long_option_with_equals_takes_no_next_argument),
    cmocka_unit_test (cmdline_short_option_clusters_and_attached_arguments),
    cmocka_unit_test (cmdline_unambiguous_abbreviations_take_their_argument),
    cmocka_unit_test (cmdline_options_after_the_plugin_count),
    cmocka_unit_test (cmdline_double_dash_ends_the_options),
    cmocka_unit_test (cmdline_a_lone_dash_is_not_an_option),
    cmocka_unit_test (cmdline_log_default_without_the_option),
    cmocka_unit_test (cmdline_log_each_value_with_equals_or_next_argument),
    cmocka_unit_test (cmdline_log_last_one_wins_after_the_plugin_too),
  };

  return run_unit_tests ("cmdline", tests, sizeof tests / sizeof tests[0],
                         argc, argv);
}
