/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of config_replace_member (plugin/config/config_edit.c): nbdstripe
 * replace rewrites one element of the members list and nothing else,
 * atomically, keeping what the file is (owner, group, mode, a symlink).
 * fsync is wrapped (-Wl,--wrap=fsync) so that a directory's can fail on
 * demand.
 */

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <setjmp.h>
#include <cmocka.h>

#include "config.h"

static bool fail_dir_fsync;

int __real_fsync (int fd);
int
__wrap_fsync (int fd)
{
  struct stat st;

  if (fail_dir_fsync && fstat (fd, &st) == 0 && S_ISDIR (st.st_mode)) {
    errno = EIO;
    return -1;
  }
  return __real_fsync (fd);
}

struct fixture {
  char dir[64];
  char path[128];
  char why[1024];
};

static int
setup (void **state)
{
  struct fixture *f = calloc (1, sizeof *f);

  assert_non_null (f);
  strcpy (f->dir, "/tmp/nbdstripe-config-edit-XXXXXX");
  assert_non_null (mkdtemp (f->dir));
  snprintf (f->path, sizeof f->path, "%s/v.conf", f->dir);
  fail_dir_fsync = false;
  *state = f;
  return 0;
}

static int
teardown (void **state)
{
  struct fixture *f = *state;
  char cmd[128];

  snprintf (cmd, sizeof cmd, "rm -rf '%s'", f->dir);
  if (system (cmd) != 0)
    fprintf (stderr, "cannot remove %s\n", f->dir);
  free (f);
  return 0;
}

static void
put (const char *path, const char *text)
{
  FILE *fp = fopen (path, "w");

  assert_non_null (fp);
  assert_int_equal (fputs (text, fp) >= 0, 1);
  assert_int_equal (fclose (fp), 0);
}

static char *
get (const char *path)
{
  static char buf[8192];
  FILE *fp = fopen (path, "r");
  size_t n;

  assert_non_null (fp);
  n = fread (buf, 1, sizeof buf - 1, fp);
  buf[n] = '\0';
  fclose (fp);
  return buf;
}

/* What the directory holds besides the config (and what a test put
 * there): the names, one per line.
 */
static int
others_in_dir (const char *dir, const char *keep)
{
  DIR *d = opendir (dir);
  struct dirent *e;
  int n = 0;

  assert_non_null (d);
  while ((e = readdir (d)) != NULL)
    if (strcmp (e->d_name, ".") != 0 && strcmp (e->d_name, "..") != 0
        && strcmp (e->d_name, "v.conf") != 0
        && (keep == NULL || strcmp (e->d_name, keep) != 0)) {
      fprintf (stderr, "left in %s: %s\n", dir, e->d_name);
      n++;
    }
  closedir (d);
  return n;
}

#define CONFIG(m0, m1, extra)                                                 \
  "# Volume v.  Member 1 used to be \"/old/m1\" (the disk that died).\n"      \
  "name = \"v\";\n"                                                           \
  "members = [\n"                                                             \
  "  " m0 ",   # the fast one\n"                                              \
  "  " m1 " // \"/old/m1\" is now elsewhere\n"                                \
  "];\n" extra

static void
only_the_members_element_changes_not_a_comment_naming_it (void **state)
{
  struct fixture *f = *state;

  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  if (config_replace_member (f->path, 1, "/old/m1", "/new/m1", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_string_equal (get (f->path),
                       CONFIG ("\"/old/m0\"", "\"/new/m1\"", ""));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
the_same_string_in_another_setting_is_left_alone (void **state)
{
  struct fixture *f = *state;

  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"",
                        "serve = { pidfile = \"/old/m1\"; };\n"));
  if (config_replace_member (f->path, 1, "/old/m1", "/new/m1", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_string_equal (get (f->path),
                       CONFIG ("\"/old/m0\"", "\"/new/m1\"",
                               "serve = { pidfile = \"/old/m1\"; };\n"));
}

static void
an_element_of_adjacent_strings_is_replaced_whole (void **state)
{
  struct fixture *f = *state;

  put (f->path, CONFIG ("\"/old/\" \"m0\"", "\"/old/m1\"", ""));
  if (config_replace_member (f->path, 0, "/old/m0", "/new/\"q\"", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_string_equal (get (f->path),
                       CONFIG ("\"/new/\\\"q\\\"\"", "\"/old/m1\"", ""));
}

static void
a_member_that_is_not_old_is_refused_and_nothing_changes (void **state)
{
  struct fixture *f = *state;

  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  assert_int_equal (config_replace_member (f->path, 1, "/old/m0", "/new/m1",
                                           f->why, sizeof f->why),
                    -1);
  assert_non_null (strstr (f->why, "member 1 is not /old/m0"));
  assert_int_equal (config_replace_member (f->path, 2, "/old/m1", "/new/m1",
                                           f->why, sizeof f->why),
                    -1);
  assert_string_equal (get (f->path),
                       CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
a_symlinked_config_stays_a_symlink_to_the_rewritten_file (void **state)
{
  struct fixture *f = *state;
  char target[160], link[160], buf[160];
  struct stat st;
  ssize_t n;

  snprintf (target, sizeof target, "%s/real", f->dir);
  assert_int_equal (mkdir (target, 0755), 0);
  snprintf (target, sizeof target, "%s/real/v.conf", f->dir);
  put (target, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  snprintf (link, sizeof link, "%s/link.conf", f->dir);
  assert_int_equal (symlink ("real/v.conf", link), 0);
  if (config_replace_member (link, 1, "/old/m1", "/new/m1", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_int_equal (lstat (link, &st), 0);
  assert_true (S_ISLNK (st.st_mode));
  n = readlink (link, buf, sizeof buf - 1);
  assert_true (n > 0);
  buf[n] = '\0';
  assert_string_equal (buf, "real/v.conf");
  assert_string_equal (get (target),
                       CONFIG ("\"/old/m0\"", "\"/new/m1\"", ""));
}

static void
owner_group_and_mode_are_kept (void **state)
{
  struct fixture *f = *state;
  struct stat st;

  if (geteuid () != 0)
    skip ();
  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  assert_int_equal (chown (f->path, 4321, 8765), 0);
  assert_int_equal (chmod (f->path, 0640), 0);
  if (config_replace_member (f->path, 0, "/old/m0", "/new/m0", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_int_equal (stat (f->path, &st), 0);
  assert_int_equal (st.st_uid, 4321);
  assert_int_equal (st.st_gid, 8765);
  assert_int_equal (st.st_mode & 07777, 0640);
}

static void
a_temporary_left_by_a_crash_is_removed_and_none_is_left (void **state)
{
  struct fixture *f = *state;
  char stale[160];

  /* What a crash between naming the temporary and renaming it leaves. */
  snprintf (stale, sizeof stale, "%s/.v.conf.nbdstripe-abcd1234", f->dir);
  put (stale, "half a config");
  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  if (config_replace_member (f->path, 0, "/old/m0", "/new/m0", f->why,
                             sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
a_failed_directory_sync_is_an_error (void **state)
{
  struct fixture *f = *state;

  put (f->path, CONFIG ("\"/old/m0\"", "\"/old/m1\"", ""));
  fail_dir_fsync = true;
  assert_int_equal (config_replace_member (f->path, 0, "/old/m0", "/new/m0",
                                           f->why, sizeof f->why),
                    -1);
  fail_dir_fsync = false;
  assert_non_null (strstr (f->why, "syncing the directory"));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

/* ---- config_rewrite_members: nbdstripe grow and shrink ---- */

#define RESHAPE_CONFIG                                                        \
  "# v: members = [ \"/dev/zzz\" ] was the first try\n"                      \
  "name = \"v\";\n"                                                           \
  "members = [ \"/m/0\",\n            \"/m/1\" ]  # the two SSDs\n"           \
  "chunk = \"64K\";\n"                                                        \
  "health = { interval = 7; };\n"

static void
a_grow_lists_the_joining_members_then_all_of_them (void **state)
{
  struct fixture *f = *state;
  char *const members[] = { "/m/0", "/m/1" };
  char *const joining[] = { "/m/2" };
  char *const all[] = { "/m/0", "/m/1", "/m/2" };
  struct config_members m = { 2, members, 1, joining, NULL, 0, NULL };
  struct stripe_config c;
  char err[1024];
  const char *text;

  put (f->path, RESHAPE_CONFIG);
  assert_int_equal (config_rewrite_members (f->path, &m, f->why,
                                            sizeof f->why), 0);
  text = get (f->path);
  assert_non_null (strstr (text, "members = [ \"/m/0\", \"/m/1\" ];\n"
                                 "joining = [ \"/m/2\" ];"));
  assert_non_null (strstr (text, "# v: members = [ \"/dev/zzz\" ] was the "
                                 "first try\n"));
  assert_non_null (strstr (text, "  # the two SSDs\nchunk = \"64K\";\n"
                                 "health = { interval = 7; };\n"));
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_int_equal (c.nr_members, 3);
  assert_int_equal (c.nr_joining, 1);
  assert_int_equal (c.chunk, 64 * 1024);
  assert_int_equal (c.health.set.interval, 7);
  config_free (&c);

  m = (struct config_members){ 3, all, 0, NULL, NULL, 0, NULL };
  assert_int_equal (config_rewrite_members (f->path, &m, f->why,
                                            sizeof f->why), 0);
  text = get (f->path);
  assert_non_null (strstr (text, "members = [ \"/m/0\", \"/m/1\", "
                                 "\"/m/2\" ];"));
  assert_null (strstr (text, "joining"));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
a_shrink_names_the_leaving_member_then_lists_it_removed (void **state)
{
  struct fixture *f = *state;
  char *const members[] = { "/m/0", "/m/1" };
  char *const rest[] = { "/m/0" };
  char *const removed[] = { "/m/1" };
  struct config_members m = { 2, members, 0, NULL, "/m/1", 0, NULL };
  struct stripe_config c;
  char err[1024];

  put (f->path, RESHAPE_CONFIG);
  assert_int_equal (config_rewrite_members (f->path, &m, f->why,
                                            sizeof f->why), 0);
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_true (c.has_leaving);
  assert_int_equal (c.leaving, 1);
  config_free (&c);

  m = (struct config_members){ 1, rest, 0, NULL, NULL, 1, removed };
  assert_int_equal (config_rewrite_members (f->path, &m, f->why,
                                            sizeof f->why), 0);
  assert_null (strstr (get (f->path), "leaving"));
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_int_equal (c.nr_members, 1);
  assert_false (c.has_leaving);
  assert_int_equal (c.nr_removed, 1);
  assert_string_equal (c.removed[0], "/m/1");
  config_free (&c);
}

/* A member replaced with a grow or shrink under way (replace --offline):
 * a joining one is renamed in the joining list, the leaving one in the
 * members and in leaving, every other name as it was.
 */
static void
mid_reshape_a_joining_or_the_leaving_member_is_renamed_where_it_is_named (
  void **state)
{
  struct fixture *f = *state;
  char *const members[] = { "/m/0", "/m/1" };
  char *const joining[] = { "/m/2" };
  struct config_members grow = { 2, members, 1, joining, NULL, 0, NULL };
  struct config_members shrink = { 2, members, 0, NULL, "/m/1", 0, NULL };
  struct stripe_config c;
  char err[1024];

  put (f->path, RESHAPE_CONFIG);
  assert_int_equal (config_rewrite_members (f->path, &grow, f->why,
                                            sizeof f->why), 0);
  assert_int_equal (config_replace_member (f->path, 2, "/m/2", "/n/2", f->why,
                                           sizeof f->why), 0);
  assert_non_null (strstr (get (f->path), "members = [ \"/m/0\", \"/m/1\" ];\n"
                                          "joining = [ \"/n/2\" ];"));
  assert_int_equal (config_replace_member (f->path, 0, "/m/0", "/n/0", f->why,
                                           sizeof f->why), 0);
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_int_equal (c.nr_members, 3);
  assert_int_equal (c.nr_joining, 1);
  assert_string_equal (c.members[0], "/n/0");
  assert_string_equal (c.members[1], "/m/1");
  assert_string_equal (c.members[2], "/n/2");
  assert_int_equal (c.health.set.interval, 7);
  config_free (&c);

  put (f->path, RESHAPE_CONFIG);
  assert_int_equal (config_rewrite_members (f->path, &shrink, f->why,
                                            sizeof f->why), 0);
  assert_int_equal (config_replace_member (f->path, 1, "/m/1", "/n/1", f->why,
                                           sizeof f->why), 0);
  assert_non_null (strstr (get (f->path), "leaving = \"/n/1\";"));
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_int_equal (c.nr_members, 2);
  assert_true (c.has_leaving);
  assert_int_equal (c.leaving, 1);
  assert_string_equal (c.members[0], "/m/0");
  assert_string_equal (c.members[1], "/n/1");
  config_free (&c);
  /* Not the member named: refused, nothing changed. */
  assert_int_equal (config_replace_member (f->path, 0, "/m/9", "/n/0", f->why,
                                           sizeof f->why), -1);
  assert_non_null (strstr (get (f->path), "members = [ \"/m/0\", \"/n/1\" ];"));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
members_that_do_not_load_leave_the_file_as_it_was (void **state)
{
  struct fixture *f = *state;
  char *const members[] = { "/m/0", "relative/m1" };
  struct config_members m = { 2, members, 0, NULL, NULL, 0, NULL };

  put (f->path, RESHAPE_CONFIG);
  assert_int_equal (config_rewrite_members (f->path, &m, f->why,
                                            sizeof f->why), -1);
  assert_non_null (strstr (f->why, "does not load"));
  assert_string_equal (get (f->path), RESHAPE_CONFIG);
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

/* ---- a member replaced by a spare (config_replace_with_spare) ---- */

/* Members "/m/0" and m1, spares SPARES (the list's body), then extra. */
#define SPARE_CONFIG(m1, spares, extra)                                       \
  "# Volume v, spares for on_failing = \"replace\".\n"                        \
  "name = \"v\";\n"                                                           \
  "members = [ \"/m/0\", " m1 " ];   # two disks\n"                           \
  "spares = [" spares "];\n"                                                  \
  "on_failing = \"replace\";\n" extra

static void
a_spare_takes_the_member_s_place_leaves_the_spares_and_old_is_removed (
  void **state)
{
  struct fixture *f = *state;

  put (f->path, SPARE_CONFIG ("\"/m/1\"",
                              "\n  \"/s/0\",   # the blue one\n"
                              "  \"/s/1\"    # the red one\n",
                              "health = { interval = 7; };\n"));
  if (config_replace_with_spare (f->path, 1, "/m/1", "/s/0", f->why,
                                 sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  /* The spare's line goes, its comment with it; the other spare and its
   * comment stay; removed comes on the line after the members.
   */
  assert_string_equal (get (f->path),
                       "# Volume v, spares for on_failing = \"replace\".\n"
                       "name = \"v\";\n"
                       "members = [ \"/m/0\", \"/s/0\" ];   # two disks\n"
                       "removed = [ \"/m/1\" ];\n"
                       "spares = [\n"
                       "  \"/s/1\"    # the red one\n"
                       "];\n"
                       "on_failing = \"replace\";\n"
                       "health = { interval = 7; };\n");
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

static void
the_last_spare_leaves_an_empty_list_and_removed_grows_at_its_end (void **state)
{
  struct fixture *f = *state;
  struct stripe_config c;
  char err[1024];

  put (f->path, SPARE_CONFIG ("\"/m/1\"", " \"/s/0\", \"/s/1\" ",
                              "removed = [ \"/gone/0\" ]; # shrunk in May\n"));
  if (config_replace_with_spare (f->path, 0, "/m/0", "/s/1", f->why,
                                 sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_string_equal (
    get (f->path), "# Volume v, spares for on_failing = \"replace\".\n"
                   "name = \"v\";\n"
                   "members = [ \"/s/1\", \"/m/1\" ];   # two disks\n"
                   "spares = [ \"/s/0\" ];\n"
                   "on_failing = \"replace\";\n"
                   "removed = [ \"/gone/0\", \"/m/0\" ]; # shrunk in May\n");
  if (config_replace_with_spare (f->path, 1, "/m/1", "/s/0", f->why,
                                 sizeof f->why)
      == -1)
    fail_msg ("%s", f->why);
  assert_int_equal (config_load (f->path, &c, err, sizeof err), 0);
  assert_int_equal (c.nr_spares, 0);
  assert_int_equal (c.nr_members, 2);
  assert_string_equal (c.members[0], "/s/1");
  assert_string_equal (c.members[1], "/s/0");
  assert_int_equal (c.nr_removed, 3);
  assert_string_equal (c.removed[0], "/gone/0");
  assert_string_equal (c.removed[1], "/m/0");
  assert_string_equal (c.removed[2], "/m/1");
  config_free (&c);
  assert_non_null (strstr (get (f->path), "spares = [  ];"));
}

static void
a_spare_not_listed_or_a_member_not_old_is_refused_and_nothing_changes (
  void **state)
{
  struct fixture *f = *state;

  put (f->path, SPARE_CONFIG ("\"/m/1\"", " \"/s/0\" ", ""));
  assert_int_equal (config_replace_with_spare (f->path, 1, "/m/1", "/s/9",
                                               f->why, sizeof f->why),
                    -1);
  assert_non_null (strstr (f->why, "/s/9 is not one of its spares"));
  assert_int_equal (config_replace_with_spare (f->path, 1, "/m/0", "/s/0",
                                               f->why, sizeof f->why),
                    -1);
  assert_non_null (strstr (f->why, "member 1 is not /m/0"));
  assert_string_equal (get (f->path),
                       SPARE_CONFIG ("\"/m/1\"", " \"/s/0\" ", ""));
  assert_int_equal (others_in_dir (f->dir, NULL), 0);
}

int
main (void)
{
#define edit_test(f) cmocka_unit_test_setup_teardown (f, setup, teardown)
  const struct CMUnitTest tests[] = {
    edit_test (only_the_members_element_changes_not_a_comment_naming_it),
    edit_test (the_same_string_in_another_setting_is_left_alone),
    edit_test (an_element_of_adjacent_strings_is_replaced_whole),
    edit_test (a_member_that_is_not_old_is_refused_and_nothing_changes),
    edit_test (a_symlinked_config_stays_a_symlink_to_the_rewritten_file),
    edit_test (owner_group_and_mode_are_kept),
    edit_test (a_temporary_left_by_a_crash_is_removed_and_none_is_left),
    edit_test (a_failed_directory_sync_is_an_error),
    edit_test (a_grow_lists_the_joining_members_then_all_of_them),
    edit_test (a_shrink_names_the_leaving_member_then_lists_it_removed),
    edit_test (
      mid_reshape_a_joining_or_the_leaving_member_is_renamed_where_it_is_named),
    edit_test (members_that_do_not_load_leave_the_file_as_it_was),
    edit_test (
      a_spare_takes_the_member_s_place_leaves_the_spares_and_old_is_removed),
    edit_test (
      the_last_spare_leaves_an_empty_list_and_removed_grows_at_its_end),
    edit_test (
      a_spare_not_listed_or_a_member_not_old_is_refused_and_nothing_changes),
  };
#undef edit_test
  return cmocka_run_group_tests_name ("config_edit", tests, NULL, NULL);
}
