/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the volume config loader (plugin/config/config.c): sizes, valid
 * configs and their defaults, the form of error messages, and that
 * loading a config touches no member.  Bad configs, one per mistake, are
 * in tests/config/bad/ and checked by tests/config/check_bad_config.c.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <setjmp.h>
#include <cmocka.h>

#include "config.h"

#ifndef EXAMPLE_CONF
#error "EXAMPLE_CONF must name conf/example.conf"
#endif

/* Every test gets its own directory, removed afterwards. */
struct fixture {
  char dir[64];
  char path[128]; /* the config file that load () writes */
  struct stripe_config cfg;
  char err[512];
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);

  assert_non_null (f);
  strcpy (f->dir, "/tmp/nbdstripe-config-test-XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  snprintf (f->path, sizeof f->path, "%s/test.conf", f->dir);
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  char cmd[128];

  config_free (&f->cfg);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system (cmd) != 0)
    fprintf (stderr, "cannot remove %s\n", f->dir);
  free (f);
  return 0;
}

static void __attribute__ ((format (printf, 3, 4)))
write_file (const char *dir, const char *name, const char *fmt, ...)
{
  char path[256];
  va_list args;
  FILE *fp;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fp = fopen (path, "w");
  assert_non_null (fp);
  va_start (args, fmt);
  vfprintf (fp, fmt, args);
  va_end (args);
  assert_int_equal (fclose (fp), 0);
}

/* Writes the config and loads it; returns config_load's result. */
static int __attribute__ ((format (printf, 2, 3)))
load (struct fixture *f, const char *fmt, ...)
{
  va_list args;
  FILE *fp;

  fp = fopen (f->path, "w");
  assert_non_null (fp);
  va_start (args, fmt);
  vfprintf (fp, fmt, args);
  va_end (args);
  assert_int_equal (fclose (fp), 0);

  config_free (&f->cfg);
  return config_load (f->path, &f->cfg, f->err, sizeof f->err);
}

static void
assert_loads (struct fixture *f, int r)
{
  if (r != 0)
    fail_msg ("config_load failed: %s", f->err);
}

static void
assert_error_contains (struct fixture *f, int r, const char *want)
{
  assert_int_equal (r, -1);
  if (strstr (f->err, want) == NULL)
    fail_msg ("error \"%s\" does not contain \"%s\"", f->err, want);
}

#define MEMBERS "members = [ \"/dev/vda\", \"/dev/vdb\" ];\n"

static void
parse_size_accepts_bytes_sectors_and_1024_based_suffixes_in_either_case (
  void **state)
{
  static const struct {
    const char *s;
    uint64_t v;
  } ok[] = {
    { "0", 0 },
    { "4096", 4096 },
    { "4096B", 4096 },
    { "4096b", 4096 },
    { "8s", 4096 },
    { "8S", 4096 },
    { "128K", 128 << 10 },
    { "128k", 128 << 10 },
    { "128KiB", 128 << 10 },
    { "128kib", 128 << 10 },
    { "128KIB", 128 << 10 },
    { "1M", 1 << 20 },
    { "1m", 1 << 20 },
    { "1MiB", 1 << 20 },
    { "2G", 2ull << 30 },
    { "2g", 2ull << 30 },
    { "2GiB", 2ull << 30 },
    { "1T", 1ull << 40 },
    { "1t", 1ull << 40 },
    { "1TiB", 1ull << 40 },
    { "1P", 1ull << 50 },
    { "1PiB", 1ull << 50 },
    { "1E", 1ull << 60 },
    { "15EiB", 15ull << 60 },
    { "16777215T", 16777215ull << 40 },
    { "36028797018963967s", 36028797018963967ull << 9 },
    { "18446744073709551615", UINT64_MAX },
    { "18446744073709551615B", UINT64_MAX },
  };
  (void) state;

  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    uint64_t v = 1;
    if (config_parse_size (ok[i].s, &v) != 0)
      fail_msg ("config_parse_size (\"%s\") failed", ok[i].s);
    if (v != ok[i].v)
      fail_msg ("config_parse_size (\"%s\") = %" PRIu64 ", expected %" PRIu64,
                ok[i].s, v, ok[i].v);
  }
}

static void
parse_size_rejects_empty_negative_junk_decimal_units_and_overflow (
  void **state)
{
  static const char *const bad[] = {
    "",
    "-1",
    "-4096",
    "+4096",
    " 4096",
    "4096 ",
    "abc",
    "K",
    "KiB",
    "128KB",
    "128kb",
    "128Ki",
    "128KiBB",
    "128iB",
    "128Bs",
    "128sB",
    "128Ks",
    "1.5M",
    "0x1000",
    "1MM",
    "1 M",
    "18446744073709551616",
    "16777216T",
    "99999999999999999999999",
    "16E",
    "16EiB",
    "36028797018963968s",
    "4096\n",
    "128K\n",
    "128X",
  };
  (void) state;

  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    uint64_t v = 12345;
    if (config_parse_size (bad[i], &v) != -1)
      fail_msg ("config_parse_size (\"%s\") accepted it as %" PRIu64, bad[i],
                v);
    assert_int_equal (v, 12345);
  }
}

/* NBDSTRIPE_RUNDIR moves the default socket and status file, as it moves
 * where nbdstripe list and stop look for them.
 */
static void
rundir_from_env_holds_default_socket_and_status (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  setenv ("NBDSTRIPE_RUNDIR", "/tmp/rd", 1);
  assert_loads (f, load (f, "name = \"fast0\";\n" MEMBERS));
  unsetenv ("NBDSTRIPE_RUNDIR");
  assert_string_equal (c->serve.socket, "/tmp/rd/fast0.sock");
  assert_string_equal (c->health.status_file, "/tmp/rd/fast0.status.json");
}

static void
minimal_config_gets_every_default (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  unsetenv ("NBDSTRIPE_RUNDIR");
  assert_loads (f, load (f, "name = \"fast0\";\n" MEMBERS));
  assert_string_equal (c->path, f->path);
  assert_string_equal (c->name, "fast0");
  assert_int_equal (c->chunk, 128 * 1024);
  assert_int_equal (c->nr_members, 2);
  assert_int_equal (c->metadata, METADATA_HEADER);
  assert_int_equal (c->data_offset, 1024 * 1024);
  assert_int_equal (c->cache, CACHE_WRITEBACK);
  assert_string_equal (c->serve.socket, "/run/nbdstripe/fast0.sock");
  assert_null (c->serve.address);
  assert_int_equal (c->serve.port, 0);
  assert_string_equal (c->serve.export_name, "");
  assert_int_equal (c->serve.threads, 16);
  assert_null (c->serve.pidfile);
  assert_int_equal (c->serve.tls, TLS_OFF);
  assert_null (c->serve.tls_certificates);
  assert_null (c->serve.tls_psk);
  assert_false (c->serve.tls_verify_peer);
  assert_string_equal (c->health.status_file,
                       "/run/nbdstripe/fast0.status.json");
  assert_null (c->health.prometheus_file);
  assert_null (c->health.on_change);
  assert_int_equal (c->health.set.interval, 5);
  assert_true (c->health.set.slow_factor == 4.0);
  assert_int_equal (c->health.set.slow_floor_us, 1000);
  assert_int_equal (c->health.set.error_threshold, 8);
  assert_int_equal (c->health.set.drive_interval, 600);
}

static void
full_config_sets_every_key (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  char pki[96], hook[96];

  snprintf (pki, sizeof pki, "%s/pki", f->dir);
  snprintf (hook, sizeof hook, "%s/hook", f->dir);
  assert_int_equal (mkdir (pki, 0755), 0);
  write_file (f->dir, "hook", "#!/bin/sh\n");
  assert_int_equal (chmod (hook, 0755), 0);
  assert_loads (f,
                load (f,
                      "name = \"db-1.vol_A\";\n"
                      "chunk = \"64K\";\n"
                      "members = ( \"/dev/a\", \"/dev/b\", \"/srv/c.img\" );\n"
                      "metadata = \"header\";\n"
                      "data_offset = \"2M\";\n"
                      "cache = \"direct\";\n"
                      "serve = {\n"
                      "  port = 10809;\n"
                      "  address = \"::1\";\n"
                      "  export_name = \"db\";\n"
                      "  threads = 1024;\n"
                      "  pidfile = \"/run/db.pid\";\n"
                      "  tls = \"require\";\n"
                      "  tls_certificates = \"%s\";\n"
                      "  tls_verify_peer = true;\n"
                      "};\n"
                      "health = {\n"
                      "  status_file = \"/var/lib/db.json\";\n"
                      "  prometheus_file = \"/var/lib/db.prom\";\n"
                      "  on_change = \"%s\";\n"
                      "  interval = 3600;\n"
                      "  slow_factor = 2.5;\n"
                      "  slow_floor_us = 0;\n"
                      "  error_threshold = 1000000;\n"
                      "  drive_interval = 0;\n"
                      "};\n",
                      pki, hook));
  assert_string_equal (c->name, "db-1.vol_A");
  assert_int_equal (c->chunk, 64 * 1024);
  assert_int_equal (c->nr_members, 3);
  assert_string_equal (c->members[0], "/dev/a");
  assert_string_equal (c->members[1], "/dev/b");
  assert_string_equal (c->members[2], "/srv/c.img");
  assert_null (c->members[3]);
  assert_int_equal (c->metadata, METADATA_HEADER);
  assert_int_equal (c->data_offset, 2 * 1024 * 1024);
  assert_int_equal (c->cache, CACHE_DIRECT);
  assert_null (c->serve.socket);
  assert_string_equal (c->serve.address, "::1");
  assert_int_equal (c->serve.port, 10809);
  assert_string_equal (c->serve.export_name, "db");
  assert_int_equal (c->serve.threads, 1024);
  assert_string_equal (c->serve.pidfile, "/run/db.pid");
  assert_int_equal (c->serve.tls, TLS_REQUIRE);
  assert_string_equal (c->serve.tls_certificates, pki);
  assert_null (c->serve.tls_psk);
  assert_true (c->serve.tls_verify_peer);
  assert_string_equal (c->health.status_file, "/var/lib/db.json");
  assert_string_equal (c->health.prometheus_file, "/var/lib/db.prom");
  assert_string_equal (c->health.on_change, hook);
  assert_int_equal (c->health.set.interval, 3600);
  assert_true (c->health.set.slow_factor == 2.5);
  assert_int_equal (c->health.set.slow_floor_us, 0);
  assert_int_equal (c->health.set.error_threshold, 1000000);
  assert_int_equal (c->health.set.drive_interval, 0);
}

/* conf/example.conf is the reference: it must load, and every value it
 * shows must be the default it claims to be.
 */
static void
example_conf_loads_and_shows_the_defaults (void **state)
{
  struct fixture *f = *state;
  struct stripe_config example, minimal;
  char err[512];

  if (config_load (EXAMPLE_CONF, &example, err, sizeof err) != 0)
    fail_msg ("%s", err);
  assert_loads (f,
                load (f, "name = \"%s\";\nmembers = [ \"%s\", \"%s\" ];\n",
                      example.name, example.members[0], example.members[1]));
  minimal = f->cfg;
  assert_int_equal (example.nr_members, minimal.nr_members);
  assert_int_equal (example.chunk, minimal.chunk);
  assert_int_equal (example.metadata, minimal.metadata);
  assert_int_equal (example.data_offset, minimal.data_offset);
  assert_int_equal (example.cache, minimal.cache);
  assert_string_equal (example.serve.socket, minimal.serve.socket);
  assert_null (example.serve.address);
  assert_int_equal (example.serve.port, 0);
  assert_string_equal (example.serve.export_name, minimal.serve.export_name);
  assert_int_equal (example.serve.threads, minimal.serve.threads);
  assert_int_equal (example.serve.tls, minimal.serve.tls);
  assert_int_equal (example.serve.tls_verify_peer,
                    minimal.serve.tls_verify_peer);
  assert_string_equal (example.health.status_file, minimal.health.status_file);
  assert_int_equal (example.health.set.interval, minimal.health.set.interval);
  assert_true (example.health.set.slow_factor == minimal.health.set.slow_factor);
  assert_int_equal (example.health.set.slow_floor_us,
                    minimal.health.set.slow_floor_us);
  assert_int_equal (example.health.set.error_threshold,
                    minimal.health.set.error_threshold);
  assert_int_equal (example.health.set.drive_interval,
                    minimal.health.set.drive_interval);
  assert_int_equal (example.nr_spares, minimal.nr_spares);
  assert_int_equal (example.on_failing, minimal.on_failing);
  config_free (&example);
}

static void
tcp_port_alone_listens_on_127_0_0_1_and_has_no_socket (void **state)
{
  struct fixture *f = *state;

  assert_loads (f, load (f, "name = \"t\";\n" MEMBERS
                            "serve = { port = 10809; tls = \"off\"; };\n"));
  assert_null (f->cfg.serve.socket);
  assert_string_equal (f->cfg.serve.address, "127.0.0.1");
  assert_int_equal (f->cfg.serve.port, 10809);
}

/* Over TCP without TLS every local user (and every host that can reach
 * the address) can read and write the volume: a config must say so.
 */
static void
tcp_without_tls_is_refused_at_the_port_line (void **state)
{
  struct fixture *f = *state;
  char want[512];

  snprintf (want, sizeof want,
            "%s:4: serve.port: TCP without TLS: every local user, and every "
            "host that can reach 10.0.0.1, could read and write the volume; "
            "set tls = \"require\" with tls_psk (a key file) or "
            "tls_certificates (a directory), or tls = \"off\" to accept that",
            f->path);
  assert_int_equal (load (f,
                          "name = \"t\";\n" MEMBERS "serve = {\n"
                          "  port = 10809;\n  address = \"10.0.0.1\";\n};\n"),
                    -1);
  assert_string_equal (f->err, want);
  assert_int_equal (f->cfg.nr_warnings, 0);
}

static void
tcp_with_tls_off_loads_with_a_warning_naming_file_and_line (void **state)
{
  struct fixture *f = *state;
  char want[512];

  assert_loads (
    f, load (f, "name = \"t\";\n" MEMBERS
                "serve = {\n  port = 10809;\n  tls = \"off\";\n};\n"));
  assert_int_equal (f->cfg.serve.tls, TLS_OFF);
  assert_int_equal (f->cfg.nr_warnings, 1);
  snprintf (want, sizeof want,
            "%s:5: serve.tls: \"off\" on TCP 127.0.0.1:10809: every local "
            "user, and every host that can reach that address, can read and "
            "write volume 't'",
            f->path);
  if (strncmp (f->cfg.warnings[0], want, strlen (want)) != 0)
    fail_msg ("warning \"%s\", expected it to start \"%s\"",
              f->cfg.warnings[0], want);

  /* A Unix socket is root's: no warning. */
  assert_loads (f, load (f, "name = \"t\";\n" MEMBERS
                            "serve = { socket = \"/run/t.sock\"; };\n"));
  assert_int_equal (f->cfg.nr_warnings, 0);
}

static void
tls_psk_readable_or_writable_by_others_gives_a_warning (void **state)
{
  struct fixture *f = *state;
  static const struct {
    mode_t mode;
    const char *how;
  } modes[] = {
    { 0644, "has mode 0644: readable by group or others" },
    { 0640, "has mode 0640: readable by group or others" },
    { 0620, "has mode 0620: writable by group or others" },
    { 0666, "has mode 0666: readable and writable by group or others" },
  };
  char psk[128], want[512];

  snprintf (psk, sizeof psk, "%s/psk", f->dir);
  write_file (f->dir, "psk", "alice:0123456789abcdef\n");
  for (size_t i = 0; i < sizeof modes / sizeof modes[0]; ++i) {
    assert_int_equal (chmod (psk, modes[i].mode), 0);
    assert_loads (f, load (f,
                           "name = \"t\";\n" MEMBERS "serve = {\n"
                           "  port = 10809; tls = \"require\";\n"
                           "  tls_psk = \"%s\";\n};\n",
                           psk));
    assert_int_equal (f->cfg.nr_warnings, 1);
    snprintf (want, sizeof want, "%s:5: serve.tls_psk: \"%s\" %s", f->path,
              psk, modes[i].how);
    if (strncmp (f->cfg.warnings[0], want, strlen (want)) != 0)
      fail_msg ("warning \"%s\", expected it to start \"%s\"",
                f->cfg.warnings[0], want);
  }
  assert_int_equal (chmod (psk, 0600), 0);
  assert_loads (f, load (f,
                         "name = \"t\";\n" MEMBERS "serve = {\n"
                         "  port = 10809; tls = \"require\";\n"
                         "  tls_psk = \"%s\";\n};\n",
                         psk));
  assert_int_equal (f->cfg.nr_warnings, 0);
}

static void
tls_with_a_psk_over_a_unix_socket_is_allowed (void **state)
{
  struct fixture *f = *state;

  write_file (f->dir, "psk", "alice:0123456789abcdef\n");
  assert_loads (f, load (f,
                         "name = \"t\";\n" MEMBERS
                         "serve = { socket = \"/run/t.sock\"; tls = \"on\";\n"
                         "  tls_psk = \"%s/psk\"; };\n",
                         f->dir));
  assert_string_equal (f->cfg.serve.socket, "/run/t.sock");
  assert_int_equal (f->cfg.serve.tls, TLS_ON);
  assert_non_null (f->cfg.serve.tls_psk);
}

static void
metadata_none_puts_data_at_offset_0 (void **state)
{
  struct fixture *f = *state;

  assert_loads (
    f, load (f, "name = \"raw\";\n" MEMBERS "metadata = \"none\";\n"));
  assert_int_equal (f->cfg.metadata, METADATA_NONE);
  assert_int_equal (f->cfg.data_offset, 0);

  assert_loads (f, load (f, "name = \"raw\";\n" MEMBERS
                            "data_offset = 0;\nmetadata = \"none\";\n"));
  assert_int_equal (f->cfg.data_offset, 0);
}

static void
sizes_may_be_integers_and_an_l_suffix_reaches_past_32_bits (void **state)
{
  struct fixture *f = *state;

  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS
                            "chunk = 65536;\ndata_offset = 4294971392L;\n"));
  assert_int_equal (f->cfg.chunk, 65536);
  assert_int_equal (f->cfg.data_offset, 4294971392ull);
}

/* libconfig 1.5 would read 4294971392 as 4096: the loader must refuse it
 * rather than build a volume with the wrong chunk.
 */
static void
integer_beyond_32_bits_without_l_is_refused_not_truncated (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "chunk = 4294971392;\n"),
    ":3: integer 4294971392 does not fit in 32 bits");
  assert_error_contains (
    f,
    load (f, "name = \"n\";\n" MEMBERS "serve = {\n port = 4294977105; };\n"),
    ":4: integer 4294977105 does not fit");
}

static void
slow_factor_accepts_an_integer (void **state)
{
  struct fixture *f = *state;

  assert_loads (
    f, load (f, "name = \"n\";\n" MEMBERS "health = { slow_factor = 3; };\n"));
  assert_true (f->cfg.health.set.slow_factor == 3.0);
}

static void
every_cache_mode_name_is_accepted (void **state)
{
  struct fixture *f = *state;
  static const enum cache_mode modes[] = { CACHE_WRITEBACK, CACHE_WRITETHROUGH,
                                           CACHE_DIRECT };

  for (size_t i = 0; i < 3; ++i) {
    assert_loads (f, load (f, "name = \"n\";\n" MEMBERS "cache = \"%s\";\n",
                           cache_mode_name (modes[i])));
    assert_int_equal (f->cfg.cache, modes[i]);
  }
}

/* nbdkit's file plugin says cache=default and cache=none: the same words
 * mean the nearest of ours (nbdstripe(8), cache).
 */
static void
nbdkit_file_plugin_cache_names_are_aliases (void **state)
{
  struct fixture *f = *state;

  assert_loads (f,
                load (f, "name = \"n\";\n" MEMBERS "cache = \"default\";\n"));
  assert_int_equal (f->cfg.cache, CACHE_WRITEBACK);
  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS "cache = \"none\";\n"));
  assert_int_equal (f->cfg.cache, CACHE_DIRECT);
  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "cache = \"unsafe\";\n"),
    "cache: expected \"writeback\", \"writethrough\" or \"direct\" (or "
    "nbdkit's \"default\" or \"none\"), got \"unsafe\"");
}

/* Every spelling of the one size syntax, in the keys that take sizes. */
static void
chunk_and_data_offset_take_every_size_spelling (void **state)
{
  struct fixture *f = *state;
  static const char *const spellings[] = { "262144", "262144B", "512s",
                                           "256K",   "256k",    "256KiB",
                                           "256kib" };

  for (size_t i = 0; i < sizeof spellings / sizeof spellings[0]; ++i) {
    assert_loads (f, load (f,
                           "name = \"n\";\n" MEMBERS "chunk = \"%s\";\n"
                           "data_offset = \"%s\";\n",
                           spellings[i], spellings[i]));
    assert_int_equal (f->cfg.chunk, 256 * 1024);
    assert_int_equal (f->cfg.data_offset, 256 * 1024);
  }
  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS
                            "chunk = \"1MiB\";\ndata_offset = \"2MiB\";\n"));
  assert_int_equal (f->cfg.chunk, 1024 * 1024);
  assert_int_equal (f->cfg.data_offset, 2 * 1024 * 1024);
}

static void
error_names_file_line_key_expectation_and_value (void **state)
{
  struct fixture *f = *state;
  char want[512];

  snprintf (want, sizeof want,
            "%s:4: chunk: expected a size such as "
            "\"128K\" (a non-zero multiple of 4096 bytes), got \"130K\"",
            f->path);
  assert_int_equal (
    load (f, "# fast0\nname = \"fast0\";\n" MEMBERS "chunk = \"130K\";\n"),
    -1);
  assert_string_equal (f->err, want);
}

static void
syntax_error_names_file_and_line (void **state)
{
  struct fixture *f = *state;
  char want[256];

  snprintf (want, sizeof want, "%s:3: syntax error", f->path);
  assert_int_equal (load (f, "name = \"n\";\n" MEMBERS
                             "chunk = = \"128K\";\ncache = \"direct\";\n"),
                    -1);
  assert_string_equal (f->err, want);
}

/* A FIFO (or anything but a regular file) is refused at once: opening
 * one for reading would wait for a writer, and every command that loads
 * the config with it.  Reading the file once (the loader's own lexer and
 * libconfig parse the same bytes) follows from that: a regular file is
 * read into memory, then parsed from there.
 */
static void
config_that_is_a_fifo_is_refused_without_blocking (void **state)
{
  struct fixture *f = *state;
  char want[256];

  assert_int_equal (mkfifo (f->path, 0600), 0);
  alarm (10); /* a loader that blocks fails the test rather than hangs */
  assert_int_equal (config_load (f->path, &f->cfg, f->err, sizeof f->err),
                    -1);
  alarm (0);
  snprintf (want, sizeof want,
            "%s: is a FIFO, expected a volume config file (a regular file)",
            f->path);
  assert_string_equal (f->err, want);
}

static void
a_nul_byte_is_refused_with_its_line (void **state)
{
  struct fixture *f = *state;
  static const char text[] = "name = \"n\";\n" MEMBERS "# a\0b\n";
  char want[256];
  FILE *fp = fopen (f->path, "w");

  assert_non_null (fp);
  assert_int_equal (fwrite (text, 1, sizeof text - 1, fp), sizeof text - 1);
  assert_int_equal (fclose (fp), 0);
  snprintf (want, sizeof want, "%s:3: a NUL byte: expected a text file",
            f->path);
  assert_int_equal (config_load (f->path, &f->cfg, f->err, sizeof f->err), -1);
  assert_string_equal (f->err, want);
}

static void
unknown_key_suggests_the_closest_and_lists_the_valid_ones (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f,
                         load (f, "name = \"n\";\n" MEMBERS
                                  "serve = {\n  sockt = \"/run/x\";\n};\n"),
                         ":4: serve.sockt: unknown key (did you mean "
                         "\"socket\"?); the valid keys in serve are: socket, "
                         "address, port, export_name, threads, pidfile, tls, "
                         "tls_certificates, tls_psk, tls_verify_peer");
  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "volume_size = \"1G\";\n"),
    ":3: volume_size: unknown key; the valid keys are: "
    "name, chunk, members, metadata, data_offset, layout, uuid, "
    "cache, serve, health");
}

static void
error_is_one_line_even_for_a_value_with_a_newline (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f, load (f, "name = \"a\\nb\";\n" MEMBERS),
                         "got \"a\\x0ab\"");
  assert_null (strchr (f->err, '\n'));
}

static void
missing_file_is_reported_with_the_reason (void **state)
{
  struct fixture *f = *state;
  char path[128], want[256];

  snprintf (path, sizeof path, "%s/absent.conf", f->dir);
  snprintf (want, sizeof want, "%s: %s", path, strerror (ENOENT));
  assert_int_equal (config_load (path, &f->cfg, f->err, sizeof f->err), -1);
  assert_string_equal (f->err, want);
}

static void
a_directory_or_a_file_over_1_mib_is_not_a_config (void **state)
{
  struct fixture *f = *state;
  char want[256];
  FILE *fp;

  snprintf (want, sizeof want, "%s: is a directory", f->dir);
  assert_int_equal (config_load (f->dir, &f->cfg, f->err, sizeof f->err), -1);
  assert_non_null (strstr (f->err, want));

  config_free (&f->cfg);
  fp = fopen (f->path, "w");
  assert_non_null (fp);
  fputs ("name = \"big\";\n" MEMBERS, fp);
  for (int i = 0; i < 1024 * 1024 / 64; ++i)
    fprintf (fp, "# %61s\n", "padding");
  assert_int_equal (fclose (fp), 0);
  assert_error_contains (f,
                         config_load (f->path, &f->cfg, f->err, sizeof f->err),
                         ": larger than 1048576 bytes: not a volume config");
}

/* Only the config is read: members, the PSK file and the hook are at
 * most stat'ed, never opened.
 */
static void
loading_opens_no_member_nor_tls_file_nor_hook (void **state)
{
  struct fixture *f = *state;
  char watched[96], conf[128];
  char buf[4096];
  int fd;

  snprintf (watched, sizeof watched, "%s/members", f->dir);
  assert_int_equal (mkdir (watched, 0755), 0);
  write_file (watched, "m0", "data0");
  write_file (watched, "m1", "data1");
  write_file (watched, "psk", "alice:00\n");
  write_file (watched, "hook", "#!/bin/sh\n");
  snprintf (conf, sizeof conf, "%s/hook", watched);
  assert_int_equal (chmod (conf, 0755), 0);

  fd = inotify_init1 (IN_NONBLOCK | IN_CLOEXEC);
  if (fd == -1)
    skip ();
  assert_true (inotify_add_watch (fd, watched, IN_ALL_EVENTS) >= 0);
  assert_loads (f, load (f,
                         "name = \"n\";\n"
                         "members = [ \"%1$s/m0\", \"%1$s/m1\" ];\n"
                         "serve = { tls = \"on\"; tls_psk = \"%1$s/psk\"; };\n"
                         "health = { on_change = \"%1$s/hook\"; };\n",
                         watched));
  if (read (fd, buf, sizeof buf) != -1 || errno != EAGAIN) {
    const struct inotify_event *ev = (const void *) buf;
    fail_msg ("something happened in the members' directory: %s mask %#x",
              ev->len ? ev->name : "(dir)", ev->mask);
  }
  close (fd);
}

static void
config_free_is_safe_twice_and_after_a_failed_load (void **state)
{
  struct fixture *f = *state;
  struct stripe_config zero;

  memset (&zero, 0, sizeof zero);
  config_free (&zero);

  /* Fails at the last member, after two were copied. */
  assert_int_equal (load (f, "name = \"n\";\nmembers = [ \"/a\", \"/b\", "
                             "\"c\" ];\n"),
                    -1);
  assert_int_equal (f->cfg.nr_members, 2);
  config_free (&f->cfg);
  assert_null (f->cfg.name);
  assert_null (f->cfg.members[0]);
  config_free (&f->cfg);
}

static void
a_short_or_missing_error_buffer_is_respected (void **state)
{
  struct fixture *f = *state;
  char small[12];

  memset (small, 'x', sizeof small);
  assert_int_equal (load (f, "chunk = 1;\n"), -1);
  config_free (&f->cfg);
  assert_int_equal (config_load (f->path, &f->cfg, small, 8), -1);
  assert_int_equal (strlen (small), 7);
  assert_int_equal (small[8], 'x');
  config_free (&f->cfg);
  assert_int_equal (config_load (f->path, &f->cfg, NULL, 0), -1);
}

static void
member_order_is_kept_and_64_members_are_allowed (void **state)
{
  struct fixture *f = *state;
  char list[64 * 16] = "";
  size_t n = 0;

  for (int i = 63; i >= 0; --i)
    n += snprintf (&list[n], sizeof list - n, "%s\"/dev/m%d\"",
                   i == 63 ? "" : ", ", i);
  assert_loads (f, load (f, "name = \"n\";\nmembers = [ %s ];\n", list));
  assert_int_equal (f->cfg.nr_members, 64);
  assert_string_equal (f->cfg.members[0], "/dev/m63");
  assert_string_equal (f->cfg.members[63], "/dev/m0");
}

static void
nbd_uris_are_members_as_given_and_may_mix_with_paths (void **state)
{
  struct fixture *f = *state;

  assert_loads (f, load (f, "name = \"n\";\nmembers = [ "
                            "\"nbd://storage1:10809/disk0\", \"/dev/vdb\", "
                            "\"nbds://storage2/disk0?tls-psk-file=/etc/psk\", "
                            "\"nbd+unix:///disk0?socket=/run/disk0.sock\" ];\n"
                            "remote = { connections = 2; };\n"));
  assert_int_equal (f->cfg.nr_members, 4);
  assert_string_equal (f->cfg.members[0], "nbd://storage1:10809/disk0");
  assert_string_equal (f->cfg.members[1], "/dev/vdb");
  assert_string_equal (f->cfg.members[2],
                       "nbds://storage2/disk0?tls-psk-file=/etc/psk");
  assert_string_equal (f->cfg.members[3],
                       "nbd+unix:///disk0?socket=/run/disk0.sock");
  assert_int_equal (f->cfg.remote.connections, 2);

  assert_error_contains (
    f,
    load (f, "name = \"n\";\nmembers = [ \"nbd://h/e\", \"nbd://h/e\" ];\n"),
    "is the same URI as members[0]");
  assert_error_contains (
    f, load (f, "name = \"n\";\nmembers = [ \"/dev/vda\", \"nfs://h/e\" ];\n"),
    "not an NBD URI");
  assert_error_contains (
    f, load (f, "name = \"n\";\nmembers = [ \"/dev/vda\", \"nbd:h\" ];\n"),
    "each member must be an absolute path or an NBD URI");
}

/* Runs every test, or with an argument only the test of that name (so
 * that CTest can register each one); an unknown name is an error rather
 * than a silent "0 tests run".
 */
/* ---- a reshape under way: joining, leaving, removed ---- */

static void
joining_members_follow_the_members (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  assert_loads (f, load (f, "joining = [ \"/dev/vdc\", \"/dev/vdd\" ];\n"
                            "name = \"n\";\n" MEMBERS));
  assert_int_equal (c->nr_members, 4);
  assert_int_equal (c->nr_joining, 2);
  assert_string_equal (c->members[2], "/dev/vdc");
  assert_string_equal (c->members[3], "/dev/vdd");
  assert_false (c->has_leaving);
}

static void
leaving_names_one_of_the_members (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS
                            "leaving = \"/dev/vdb\";\n"));
  assert_true (c->has_leaving);
  assert_int_equal (c->leaving, 1);
  assert_int_equal (c->nr_members, 2);
  assert_error_contains (f, load (f, "name = \"n\";\n" MEMBERS
                                     "leaving = \"/dev/vdx\";\n"),
                         ":3: leaving: \"/dev/vdx\" is none of the members");
}

static void
joining_and_leaving_at_once_are_refused (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f, load (f, "name = \"n\";\n" MEMBERS
                                     "leaving = \"/dev/vdb\";\n"
                                     "joining = [ \"/dev/vdc\" ];\n"),
                         "grown (joining) or shrunk (leaving), not both");
}

static void
joining_a_member_twice_is_refused (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f, load (f, "name = \"n\";\n" MEMBERS
                                     "joining = [ \"/dev/vda\" ];\n"),
                         "joining: \"/dev/vda\" is members[0] already");
}

static void
removed_member_listed_again_is_refused (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS
                            "removed = [ \"/dev/vdz\" ];\n"));
  assert_int_equal (c->nr_removed, 1);
  assert_string_equal (c->removed[0], "/dev/vdz");
  assert_error_contains (f, load (f, "name = \"n\";\n" MEMBERS
                                     "removed = [ \"/dev/vdb\" ];\n"),
                         "removed: \"/dev/vdb\" was removed from the volume "
                         "and is members[1] again");
}

/* ---- hot spares and on_failing ---- */

static void
spares_are_listed_and_on_failing_defaults_to_alert (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS));
  assert_int_equal (c->nr_spares, 0);
  assert_int_equal (c->on_failing, ON_FAILING_ALERT);
  assert_int_equal (c->nr_warnings, 0);
  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS
                            "spares = [ \"/dev/vdc\", \"nbd://h/e\" ];\n"
                            "on_failing = \"replace\";\n"));
  assert_int_equal (c->nr_spares, 2);
  assert_string_equal (c->spares[0], "/dev/vdc");
  assert_string_equal (c->spares[1], "nbd://h/e");
  assert_int_equal (c->on_failing, ON_FAILING_REPLACE);
  assert_int_equal (c->nr_warnings, 0);
  assert_loads (f, load (f, "name = \"n\";\n" MEMBERS "spares = [ ];\n"
                            "on_failing = \"alert\";\n"));
  assert_int_equal (c->nr_spares, 0);
  assert_int_equal (c->on_failing, ON_FAILING_ALERT);
}

static void
a_spare_that_is_a_member_joining_or_removed_is_refused_at_its_line (
  void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f,
                         load (f, "name = \"n\";\n" MEMBERS
                                  "spares = [ \"/dev/vdc\",\n"
                                  "  \"/dev/vdb\" ];\n"),
                         "test.conf:4: spares[1]: \"/dev/vdb\" is members[1] "
                         "too: a device is a member or a spare, not both");
  assert_error_contains (f,
                         load (f, "name = \"n\";\n" MEMBERS
                                  "joining = [ \"/dev/vdc\" ];\n"
                                  "spares = [ \"/dev/vdc\" ];\n"),
                         "test.conf:4: spares[0]: \"/dev/vdc\" is joining[0] "
                         "too");
  assert_error_contains (f,
                         load (f, "name = \"n\";\n" MEMBERS
                                  "removed = [ \"/dev/old\" ];\n"
                                  "spares = [ \"/dev/old\" ];\n"),
                         "test.conf:4: spares[0]: \"/dev/old\" was removed "
                         "from the volume (removed[0])");
}

static void
spares_are_checked_as_members_are_and_named_as_spares (void **state)
{
  struct fixture *f = *state;

  assert_error_contains (f,
                         load (f, "name = \"n\";\n" MEMBERS
                                  "spares = [ \"/dev/vdc\", "
                                  "\"/dev/vdc\" ];\n"),
                         ":3: spares[1]: \"/dev/vdc\" is the same path as "
                         "spares[0]: each spare can be used once");
  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "spares = [ \"dev/vdc\" ];\n"),
    ":3: spares[0]: \"dev/vdc\" is a relative path: "
    "each spare must be an absolute path or an NBD URI");
  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "spares = \"/dev/vdc\";\n"),
    ":3: spares: expected an array of spares");
}

static void
on_failing_is_alert_or_replace_and_replace_without_spares_warns (void **state)
{
  struct fixture *f = *state;
  const struct stripe_config *c = &f->cfg;

  assert_error_contains (
    f, load (f, "name = \"n\";\n" MEMBERS "on_failing = \"swap\";\n"),
    ":3: on_failing: expected \"alert\" or "
    "\"replace\", got \"swap\"");
  assert_loads (
    f, load (f, "name = \"n\";\n" MEMBERS "on_failing = \"replace\";\n"));
  assert_int_equal (c->on_failing, ON_FAILING_REPLACE);
  assert_int_equal (c->nr_warnings, 1);
  if (strstr (c->warnings[0], "test.conf:3: on_failing: \"replace\" but no "
                              "spares")
      == NULL)
    fail_msg ("warning \"%s\"", c->warnings[0]);
}

int
main (int argc, char **argv)
{
  /* CMakeLists.txt reads the test names from these lines. */
#define config_test(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
  const struct CMUnitTest tests[] = {
    config_test (
      parse_size_accepts_bytes_sectors_and_1024_based_suffixes_in_either_case),
    config_test (
      parse_size_rejects_empty_negative_junk_decimal_units_and_overflow),
    config_test (minimal_config_gets_every_default),
    config_test (rundir_from_env_holds_default_socket_and_status),
    config_test (joining_members_follow_the_members),
    config_test (leaving_names_one_of_the_members),
    config_test (joining_and_leaving_at_once_are_refused),
    config_test (joining_a_member_twice_is_refused),
    config_test (removed_member_listed_again_is_refused),
    config_test (spares_are_listed_and_on_failing_defaults_to_alert),
    config_test (
      a_spare_that_is_a_member_joining_or_removed_is_refused_at_its_line),
    config_test (spares_are_checked_as_members_are_and_named_as_spares),
    config_test (
      on_failing_is_alert_or_replace_and_replace_without_spares_warns),
    config_test (full_config_sets_every_key),
    config_test (example_conf_loads_and_shows_the_defaults),
    config_test (tcp_port_alone_listens_on_127_0_0_1_and_has_no_socket),
    config_test (tcp_without_tls_is_refused_at_the_port_line),
    config_test (tcp_with_tls_off_loads_with_a_warning_naming_file_and_line),
    config_test (tls_psk_readable_or_writable_by_others_gives_a_warning),
    config_test (tls_with_a_psk_over_a_unix_socket_is_allowed),
    config_test (metadata_none_puts_data_at_offset_0),
    config_test (sizes_may_be_integers_and_an_l_suffix_reaches_past_32_bits),
    config_test (integer_beyond_32_bits_without_l_is_refused_not_truncated),
    config_test (slow_factor_accepts_an_integer),
    config_test (every_cache_mode_name_is_accepted),
    config_test (nbdkit_file_plugin_cache_names_are_aliases),
    config_test (chunk_and_data_offset_take_every_size_spelling),
    config_test (error_names_file_line_key_expectation_and_value),
    config_test (syntax_error_names_file_and_line),
    config_test (config_that_is_a_fifo_is_refused_without_blocking),
    config_test (a_nul_byte_is_refused_with_its_line),
    config_test (unknown_key_suggests_the_closest_and_lists_the_valid_ones),
    config_test (error_is_one_line_even_for_a_value_with_a_newline),
    config_test (missing_file_is_reported_with_the_reason),
    config_test (a_directory_or_a_file_over_1_mib_is_not_a_config),
    config_test (loading_opens_no_member_nor_tls_file_nor_hook),
    config_test (config_free_is_safe_twice_and_after_a_failed_load),
    config_test (a_short_or_missing_error_buffer_is_respected),
    config_test (member_order_is_kept_and_64_members_are_allowed),
    config_test (nbd_uris_are_members_as_given_and_may_mix_with_paths),
  };
#undef config_test

  if (argc < 2)
    return cmocka_run_group_tests_name ("config", tests, NULL, NULL);
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; ++i)
    if (strcmp (tests[i].name, argv[1]) == 0)
      return _cmocka_run_group_tests ("config", &tests[i], 1, NULL, NULL);
  fprintf (stderr, "%s: no test named %s\n", argv[0], argv[1]);
  return 2;
}
