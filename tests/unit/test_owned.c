/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: owned_check (plugin/array/owned.c), on real
 * files, links and a Unix socket in a temporary directory: a device a
 * config lists -- member, spare, removed member -- is found under its
 * own string and under another name, and said as such; a device it does
 * not list passes.  Loop devices and partitions need root: the grow
 * test (tests/reshape/new_owned.sh) has them.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "config.h"
#include "identity.h"
#include "owned.h"
#include "unit_main.h"

#define ALL (OWNED_MEMBERS | OWNED_SPARES | OWNED_REMOVED)

static char dir[64];
static char m0[128], m1[128], s0[128], r0[128], fresh[128];
static char uri[256];
static struct stripe_config cfg;
static char why[1024];
static int sock = -1;

static void
touch (const char *path)
{
  FILE *fp = fopen (path, "w");

  assert_non_null (fp);
  assert_int_equal (fputs ("data", fp) >= 0, 1);
  assert_int_equal (fclose (fp), 0);
}

static void
name (char *buf, size_t len, const char *leaf)
{
  snprintf (buf, len, "%s/%s", dir, leaf);
}

static int
setup (void **state)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };

  (void) state;
  snprintf (dir, sizeof dir, "/tmp/test_owned.XXXXXX");
  assert_non_null (mkdtemp (dir));
  name (m0, sizeof m0, "m0");
  name (m1, sizeof m1, "m1");
  name (s0, sizeof s0, "s0");
  name (r0, sizeof r0, "r0");
  name (fresh, sizeof fresh, "fresh");
  touch (m0);
  touch (m1);
  touch (s0);
  touch (r0);
  touch (fresh);
  snprintf (sa.sun_path, sizeof sa.sun_path, "%s/s1.sock", dir);
  sock = socket (AF_UNIX, SOCK_STREAM, 0);
  assert_true (sock >= 0);
  assert_int_equal (bind (sock, (struct sockaddr *) &sa, sizeof sa), 0);
  snprintf (uri, sizeof uri, "nbd+unix:///?socket=%s/s1.sock", dir);

  memset (&cfg, 0, sizeof cfg);
  cfg.path = "/etc/nbdstripe/v.conf";
  cfg.nr_members = 2;
  cfg.members[0] = m0;
  cfg.members[1] = m1;
  cfg.nr_spares = 2;
  cfg.spares[0] = s0;
  cfg.spares[1] = uri;
  cfg.nr_removed = 2;
  cfg.removed[0] = r0;
  cfg.removed[1] = "/nonexistent/old";
  why[0] = '\0';
  return 0;
}

static int
teardown (void **state)
{
  char cmd[128];

  (void) state;
  if (sock >= 0)
    close (sock);
  sock = -1;
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal (system (cmd), 0);
  return 0;
}

/* owned_check of NEW named path, its identity taken by name. */
static int
check (const char *path, unsigned which)
{
  struct identity id;
  char reason[256];

  why[0] = '\0';
  assert_int_equal (identity_of_name (path, &id, reason, sizeof reason), 0);
  return owned_check (&cfg, path, &id, which, why, sizeof why);
}

static void
says (const char *want)
{
  if (strstr (why, want) == NULL)
    fail_msg ("expected \"%s\" in: %s", want, why);
}

static void
a_device_the_config_lists_by_its_own_string_is_owned_already (void **state)
{
  char want[256];

  (void) state;
  assert_int_equal (check (m1, ALL), -1);
  snprintf (want, sizeof want,
            "/etc/nbdstripe/v.conf: NEW %s is member 1 "
            "already: a device is used once",
            m1);
  says (want);
  assert_int_equal (check (s0, ALL), -1);
  says ("is spare 0 already: a device is a member or a spare, not both");
  assert_int_equal (check (r0, ALL), -1);
  says ("is removed member 0 already: a removed member is never used again");
}

static void
a_symlink_a_hard_link_and_another_spelling_are_the_same_file (void **state)
{
  char sym[160], hard[160], dotted[160], want[512];

  (void) state;
  snprintf (sym, sizeof sym, "%s/m0.link", dir);
  snprintf (hard, sizeof hard, "%s/s0.hard", dir);
  snprintf (dotted, sizeof dotted, "%s/./r0", dir);
  assert_int_equal (symlink (m0, sym), 0);
  assert_int_equal (link (s0, hard), 0);

  assert_int_equal (check (sym, ALL), -1);
  snprintf (want, sizeof want,
            "NEW %s is member 0 (%s) under another "
            "name: the same file (%s)",
            sym, m0, m0);
  says (want);
  assert_int_equal (check (hard, ALL), -1);
  snprintf (want, sizeof want,
            "NEW %s is spare 0 (%s) under another "
            "name: the same file through another hard link",
            hard, s0);
  says (want);
  assert_int_equal (check (dotted, ALL), -1);
  snprintf (want, sizeof want,
            "NEW %s is removed member 0 (%s) under "
            "another name: the same file (%s)",
            dotted, r0, r0);
  says (want);
}

static void
nbd_uri_spellings_of_one_socket_and_export_are_one_spare (void **state)
{
  char other[300];
  const char *spell[] = { "%s/./s1.sock", "%s//s1.sock", "%s/../%s/s1.sock" };

  (void) state;
  for (size_t i = 0; i < sizeof spell / sizeof spell[0]; ++i) {
    char sockpath[200];
    snprintf (sockpath, sizeof sockpath, spell[i], dir, dir + 5);
    snprintf (other, sizeof other, "nbd+unix:///?socket=%s", sockpath);
    assert_int_equal (check (other, ALL), -1);
    says ("is spare 1 (");
    says ("under another name: the same NBD server");
  }
  assert_int_equal (check (uri, ALL), -1);
  says ("is spare 1 already");
  /* Another export of the same server is another device. */
  snprintf (other, sizeof other, "nbd+unix:///other?socket=%s/./s1.sock", dir);
  assert_int_equal (check (other, ALL), 0);
}

static void
a_spare_named_as_the_config_names_it_passes_when_a_replace_takes_it (
  void **state)
{
  char hard[160];

  (void) state;
  snprintf (hard, sizeof hard, "%s/s0.hard", dir);
  assert_int_equal (link (s0, hard), 0);
  assert_int_equal (check (s0, ALL | OWNED_SPARE_AS_NAMED), 0);
  assert_int_equal (check (uri, ALL | OWNED_SPARE_AS_NAMED), 0);
  assert_int_equal (check (hard, ALL | OWNED_SPARE_AS_NAMED), -1);
  says ("under another name: the same file through another hard link "
        "(inode");
  says ("name the spare as the config does to replace onto it");
}

static void
a_device_that_cannot_be_looked_at_is_compared_by_its_string (void **state)
{
  struct identity id;
  char reason[256];

  (void) state;
  /* NEW's identity is fresh's: only the string says it is removed[1]. */
  assert_int_equal (identity_of_name (fresh, &id, reason, sizeof reason), 0);
  assert_int_equal (
    owned_check (&cfg, "/nonexistent/old", &id, ALL, why, sizeof why), -1);
  says ("NEW /nonexistent/old is removed member 1 already");
  assert_int_equal (
    identity_of_name ("/nonexistent/old", &id, reason, sizeof reason), -1);
  assert_int_equal (errno, ENOENT);
}

static void
only_the_lists_asked_for_are_compared_and_a_fresh_file_passes (void **state)
{
  (void) state;
  assert_int_equal (check (m0, OWNED_SPARES | OWNED_REMOVED), 0);
  assert_int_equal (check (s0, OWNED_MEMBERS | OWNED_REMOVED), 0);
  assert_int_equal (check (r0, OWNED_MEMBERS | OWNED_SPARES), 0);
  assert_int_equal (check (fresh, ALL), 0);
  assert_string_equal (why, "");
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    fixture_test (
      a_device_the_config_lists_by_its_own_string_is_owned_already),
    fixture_test (
      a_symlink_a_hard_link_and_another_spelling_are_the_same_file),
    fixture_test (nbd_uri_spellings_of_one_socket_and_export_are_one_spare),
    fixture_test (
      a_spare_named_as_the_config_names_it_passes_when_a_replace_takes_it),
    fixture_test (a_device_that_cannot_be_looked_at_is_compared_by_its_string),
    fixture_test (
      only_the_lists_asked_for_are_compared_and_a_fresh_file_passes),
  };

  return run_unit_tests ("owned", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
