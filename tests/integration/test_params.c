/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test: configurations nbdkit must refuse, and a
 * read-only member.
 *
 *   test_params [--case NAME] [--group bad|readonly]
 *
 * Every refusal must: exit with a non-zero status (not a signal) before
 * accepting any connection, say on stderr which parameter or member path
 * is wrong, and leave every member file byte-identical.
 *
 * Exit: 0 all passed, 1 a case failed, 77 everything skipped.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/fs.h>

#include <libnbd.h>

#include "harness.h"
#include "oracle.h"

#define NM 3
static const uint64_t member_sizes[NM] = { 1024 * 1024 + 1234, 2 * 1024 * 1024,
                                           1024 * 1024 + 8192 };

struct fixture {
  char *dir;
  char *path[NM + 4]; /* members, plus extra files a case makes */
  uint8_t *content[NM + 4];
  size_t len[NM + 4];
  unsigned nr;
  struct prng rng;
};

static void
fixture_free (void *arg)
{
  struct fixture *f = arg;
  for (unsigned i = 0; i < f->nr; i++) {
    free (f->path[i]);
    free (f->content[i]);
  }
  free (f);
}

/* A file of random contents that the case expects to stay unchanged. */
static const char *
add_file (struct fixture *f, const char *name, uint64_t size)
{
  unsigned i = f->nr++;
  f->path[i] = xasprintf ("%s/%s", f->dir, name);
  f->len[i] = size;
  f->content[i] = xmalloc (size);
  prng_fill (&f->rng, f->content[i], size);
  write_file (f->path[i], f->content[i], size);
  return f->path[i];
}

static struct fixture *
fixture_new (const char *seed_name)
{
  struct fixture *f = xcalloc (1, sizeof *f);
  uint64_t seed = 0x1234;
  f->dir = make_temp_dir ();
  cleanup_push (fixture_free, f);
  for (const char *p = seed_name; *p; p++)
    seed = seed * 131 + (unsigned char) *p;
  prng_seed (&f->rng, seed);
  for (unsigned i = 0; i < NM; i++) {
    char name[32];
    snprintf (name, sizeof name, "member%u.img", i);
    add_file (f, name, member_sizes[i]);
  }
  return f;
}

static void
check_unchanged (struct fixture *f, const char *what)
{
  for (unsigned i = 0; i < f->nr; i++) {
    size_t len;
    uint8_t *now = read_file (f->path[i], &len);
    CHECK (len == f->len[i], "%s: %s changed size (%zu -> %zu)", what,
           f->path[i], f->len[i], len);
    if (memcmp (now, f->content[i], len) != 0) {
      size_t d = 0;
      while (now[d] == f->content[i][d])
        d++;
      FAIL ("%s: %s was modified (first difference at offset %zu)", what,
            f->path[i], d);
    }
    free (now);
  }
}

/* Run nbdkit with params, expect a clean refusal whose stderr contains one
 * of the names (NULL-terminated list).
 */
static void
expect_refusal (struct fixture *f, const struct nbdkit_opts *o,
                const char *const *params, const char *const *names)
{
  struct run_result r;
  char *cmd = describe_command (o, params);
  bool named = false;
  char *line;

  nbdkit_run_expect_fail (f->dir, o, params, &r);
  if (r.started)
    FAIL ("expected a refusal but nbdkit started and accepted a connection"
          "\n  command: %s\n  stderr: %s",
          cmd, r.err);
  if (!WIFEXITED (r.wstatus) || WEXITSTATUS (r.wstatus) == 0)
    FAIL ("expected a non-zero exit, got %s\n  command: %s\n  stderr: %s",
          describe_wstatus (r.wstatus), cmd, r.err);
  if (log_has_sanitizer_report (r.err))
    FAIL ("sanitizer report\n  command: %s\n  stderr: %s", cmd, r.err);
  for (size_t i = 0; names[i]; i++)
    if (strstr (r.err, names[i]))
      named = true;
  if (!named) {
    char want[2048] = "";
    for (size_t i = 0; names[i]; i++)
      snprintf (want + strlen (want), sizeof want - strlen (want), "%s\"%s\"",
                i ? " or " : "", names[i]);
    FAIL ("stderr does not name %s\n  command: %s\n  %s\n  stderr: %s", want,
          cmd, describe_wstatus (r.wstatus), r.err);
  }
  check_unchanged (f, cmd);
  /* Show the message. */
  line = strtok (r.err, "\n");
  while (line && !strstr (line, "error") && !strstr (line, "nbdkit"))
    line = strtok (NULL, "\n");
  note ("%s -> %s: %s", cmd, describe_wstatus (r.wstatus),
        line ? line : "(no error line)");
  free (r.err);
  free (cmd);
}

#define PARAMS(...) ((const char *const[]){ __VA_ARGS__, NULL })
#define NAMES(...) ((const char *const[]){ __VA_ARGS__, NULL })

static char *
fileparam (const char *path)
{
  return xasprintf ("file=%s", path);
}

/* ---- cases ------------------------------------------------------------ */

/* The fixture itself works: the refusals below are not harness trouble. */
static void
case_control_valid_config_starts (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("control");
  struct server s;
  struct nbd_handle *h;
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]),
       *p2 = fileparam (f->path[2]);
  uint64_t expect = 0;

  for (unsigned i = 0; i < NM; i++)
    expect += member_sizes[i] / (128 * 1024) * (128 * 1024);
  server_start (&s, f->dir, NULL, PARAMS (p0, p1, p2));
  h = server_connect (&s);
  CHECK (nbd_get_size (h) == (int64_t) expect,
         "size %" PRId64 " expected %" PRIu64 " (default chunk 128K)",
         nbd_get_size (h), expect);
  close_handle (h);
  server_stop (&s);
  check_unchanged (f, "valid configuration, no I/O");
  free (p0);
  free (p1);
  free (p2);
}

static void
case_no_file_at_all (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("nofile");
  expect_refusal (f, NULL, PARAMS ("chunk=128K"), NAMES ("file"));
  expect_refusal (f, NULL, (const char *const[]){ NULL }, NAMES ("file"));
}

static void
case_member_missing (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("missing");
  char *missing = xasprintf ("%s/no-such-member.img", f->dir);
  char *p0 = fileparam (f->path[0]), *pm = fileparam (missing),
       *p2 = fileparam (f->path[2]);
  expect_refusal (f, NULL, PARAMS (p0, pm, p2), NAMES (missing));
  free (missing);
  free (p0);
  free (pm);
  free (p2);
}

static void
case_member_unreadable (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("unreadable");
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]),
       *p2 = fileparam (f->path[2]);
  struct nbdkit_opts o = { 0 };

  if (geteuid () == 0) {
    /* Root reads anything: run nbdkit as nobody instead.  First make sure
     * nobody can run a valid configuration at all.
     */
    struct server s;
    struct nbd_handle *h;
    struct run_result r;
    if (chmod (f->dir, 0755) == -1)
      FAIL ("chmod %s: %m", f->dir);
    for (unsigned i = 0; i < NM; i++)
      if (chmod (f->path[i], 0666) == -1)
        FAIL ("chmod: %m");
    o.as_nobody = true;
    /* Control as nobody: must start.  Probe with the refusal runner so that
     * a plugin unreachable for nobody gives a skip, not a hang or a fail.
     */
    nbdkit_run_expect_fail (f->dir, &o, PARAMS (p0, p1, p2), &r);
    if (!r.started)
      SKIP ("nbdkit cannot run as nobody here (plugin or path not "
            "accessible?): %s: %s",
            describe_wstatus (r.wstatus), r.err);
    free (r.err);
    server_start (&s, f->dir, &o, PARAMS (p0, p1, p2));
    h = server_connect (&s);
    close_handle (h);
    server_stop (&s);
    note ("running nbdkit as uid 65534 so that mode 000 is unreadable");
  }
  if (chmod (f->path[1], 0) == -1)
    FAIL ("chmod %s: %m", f->path[1]);
  expect_refusal (f, &o, PARAMS (p0, p1, p2), NAMES (f->path[1]));
  chmod (f->path[1], 0644);
  free (p0);
  free (p1);
  free (p2);
}

static void
case_member_is_directory (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("directory");
  char *d = xasprintf ("%s/subdir", f->dir);
  char *p0 = fileparam (f->path[0]), *pd = fileparam (d);
  if (mkdir (d, 0755) == -1)
    FAIL ("mkdir: %m");
  expect_refusal (f, NULL, PARAMS (p0, pd), NAMES (d));
  free (d);
  free (p0);
  free (pd);
}

static void
case_same_member_twice (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("twice");
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]);
  expect_refusal (f, NULL, PARAMS (p0, p1, p0), NAMES (f->path[0]));
  free (p0);
  free (p1);
}

static void
case_same_member_via_symlink (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("symlink");
  char *link = xasprintf ("%s/link-to-member0", f->dir);
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]),
       *pl = fileparam (link);
  if (symlink (f->path[0], link) == -1)
    FAIL ("symlink: %m");
  expect_refusal (f, NULL, PARAMS (p0, p1, pl), NAMES (f->path[0], link));
  free (link);
  free (p0);
  free (p1);
  free (pl);
}

static void
case_same_member_via_hard_link (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("hardlink");
  char *hl = xasprintf ("%s/hardlink-to-member2", f->dir);
  char *p0 = fileparam (f->path[0]), *p2 = fileparam (f->path[2]),
       *ph = fileparam (hl);
  if (link (f->path[2], hl) == -1)
    FAIL ("link: %m");
  expect_refusal (f, NULL, PARAMS (p2, p0, ph), NAMES (f->path[2], hl));
  free (hl);
  free (p0);
  free (p2);
  free (ph);
}

static void
case_same_member_via_other_spelling (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("spelling");
  char *alt = xasprintf ("%s/./member1.img", f->dir);
  char *p1 = fileparam (f->path[1]), *pa = fileparam (alt),
       *p0 = fileparam (f->path[0]);
  expect_refusal (f, NULL, PARAMS (p1, p0, pa),
                  NAMES (f->path[1], alt, "member1.img"));
  free (alt);
  free (p1);
  free (pa);
  free (p0);
}

static void
bad_chunk (const char *val)
{
  struct fixture *f = fixture_new (val);
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]);
  char *pc = xasprintf ("chunk=%s", val);
  expect_refusal (f, NULL, PARAMS (p0, p1, pc), NAMES ("chunk"));
  /* chunk= before the files too. */
  expect_refusal (f, NULL, PARAMS (pc, p0, p1), NAMES ("chunk"));
  free (p0);
  free (p1);
  free (pc);
}

static void
case_chunk_0 (void *a)
{
  (void) a;
  bad_chunk ("0");
}
static void
case_chunk_6000 (void *a)
{
  (void) a;
  bad_chunk ("6000");
}
static void
case_chunk_abc (void *a)
{
  (void) a;
  bad_chunk ("abc");
}
static void
case_chunk_2K (void *a)
{
  (void) a;
  bad_chunk ("2K");
}
static void
case_chunk_negative (void *a)
{
  (void) a;
  bad_chunk ("-4096");
}
static void
case_chunk_empty (void *a)
{
  (void) a;
  bad_chunk ("");
}

/* The config's size syntax, not nbdkit_parse_size's: a decimal unit, a
 * fraction, a sign are refused (see also tests/daemon/sizes_and_cache.sh
 * for the spellings accepted).
 */
static void
case_chunk_kilobytes (void *a)
{
  (void) a;
  bad_chunk ("128KB");
}
static void
case_chunk_fraction (void *a)
{
  (void) a;
  bad_chunk ("1.5M");
}
static void
case_chunk_plus_sign (void *a)
{
  (void) a;
  bad_chunk ("+128K");
}

static void
case_member_smaller_than_chunk (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("small");
  const char *small = add_file (f, "small.img", 128 * 1024 - 1);
  const char *tiny = add_file (f, "tiny.img", 4096);
  const char *empty = add_file (f, "empty.img", 0);
  char *p0 = fileparam (f->path[0]), *ps = fileparam (small),
       *pt = fileparam (tiny), *pe = fileparam (empty);
  /* Default chunk 128K; a member of 128K - 1 bytes. */
  expect_refusal (f, NULL, PARAMS (p0, ps), NAMES (small));
  /* chunk 12K; a 4K member. */
  expect_refusal (f, NULL, PARAMS (p0, pt, "chunk=12K"), NAMES (tiny));
  /* An empty member. */
  expect_refusal (f, NULL, PARAMS (pe, p0), NAMES (empty));
  free (p0);
  free (ps);
  free (pt);
  free (pe);
}

static void
case_unknown_parameter (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("unknown");
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]);
  expect_refusal (f, NULL, PARAMS (p0, p1, "chunks=128K"), NAMES ("chunks"));
  free (p0);
  free (p1);
}

/* A path with a control character would reach log lines raw (a newline
 * forging one): refused, the message showing it escaped.  The member
 * exists, so nothing else is wrong with it.
 */
static void
case_control_character_in_a_path (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("control-char");
  const char *evil = add_file (f, "m\nMemberFailed 0", 1024 * 1024);
  char *p0 = fileparam (f->path[0]), *pe = fileparam (evil);
  char *shown = xasprintf ("file=\"%s/m\\x0aMemberFailed 0\" holds a "
                           "control character",
                           f->dir);
  char *status = xasprintf ("status=%s/s\tj.json", f->dir);
  char *shown_status = xasprintf ("status=\"%s/s\\x09j.json\" holds a "
                                  "control character",
                                  f->dir);

  expect_refusal (f, NULL, PARAMS (p0, pe), NAMES (shown));
  expect_refusal (f, NULL, PARAMS (p0, status), NAMES (shown_status));
  free (p0);
  free (pe);
  free (shown);
  free (status);
  free (shown_status);
}

/* ---- read-only member ------------------------------------------------- */

struct ro_state {
  char *path;
  char *mnt; /* bind mount point, or NULL */
  bool immutable;
};

static void
ro_undo (void *arg)
{
  struct ro_state *s = arg;
  if (s->immutable) {
    int fd = open (s->path, O_RDONLY | O_CLOEXEC);
    int fl;
    if (fd >= 0 && ioctl (fd, FS_IOC_GETFLAGS, &fl) == 0) {
      fl &= ~FS_IMMUTABLE_FL;
      ioctl (fd, FS_IOC_SETFLAGS, &fl);
    }
    if (fd >= 0)
      close (fd);
  }
  if (s->mnt)
    umount2 (s->mnt, MNT_DETACH);
  free (s->path);
  free (s->mnt);
  free (s);
}

/* Make member 1 impossible to open for writing even for root: chattr +i,
 * else a read-only bind mount of its directory, else (not root) chmod 0444.
 * Returns a description of the method, or SKIPs.
 */
static const char *
make_member_readonly (struct fixture *f, unsigned idx)
{
  struct ro_state *s = xcalloc (1, sizeof *s);
  int fd, fl;
  s->path = xstrdup (f->path[idx]);
  cleanup_push (ro_undo, s);

  if (geteuid () != 0) {
    if (chmod (f->path[idx], 0444) == -1)
      FAIL ("chmod: %m");
    return "chmod 0444";
  }
  fd = open (f->path[idx], O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    FAIL ("open %s: %m", f->path[idx]);
  if (ioctl (fd, FS_IOC_GETFLAGS, &fl) == 0) {
    fl |= FS_IMMUTABLE_FL;
    if (ioctl (fd, FS_IOC_SETFLAGS, &fl) == 0) {
      close (fd);
      s->immutable = true;
      fd = open (f->path[idx], O_RDWR | O_CLOEXEC);
      if (fd == -1 && errno == EPERM)
        return "chattr +i";
      if (fd >= 0)
        close (fd);
      FAIL ("immutable file still opens read-write");
    }
  }
  close (fd);

  /* Read-only bind mount: move the member into its own directory. */
  {
    char *d = xasprintf ("%s/ro", f->dir);
    char *np = xasprintf ("%s/member%u.img", d, idx);
    if (mkdir (d, 0755) == -1 || rename (f->path[idx], np) == -1)
      FAIL ("mkdir/rename: %m");
    if (mount (d, d, NULL, MS_BIND, NULL) == -1) {
      rename (np, f->path[idx]);
      SKIP ("cannot make a read-only member: chattr +i and bind mount both "
            "fail (%m)");
    }
    s->mnt = xstrdup (d);
    if (mount (NULL, d, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL) == -1)
      SKIP ("cannot remount bind mount read-only: %m");
    free (f->path[idx]);
    f->path[idx] = np;
    free (s->path);
    s->path = xstrdup (np);
    free (d);
    return "read-only bind mount";
  }
}

static void
case_readonly_member_refused_without_r (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("ro1");
  const char *how = make_member_readonly (f, 1);
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]),
       *p2 = fileparam (f->path[2]);
  note ("member 1 made read-only by %s", how);
  expect_refusal (f, NULL, PARAMS (p0, p1, p2, "chunk=64K"),
                  NAMES (f->path[1]));
  free (p0);
  free (p1);
  free (p2);
}

static void
case_readonly_member_works_with_r (void *arg)
{
  (void) arg;
  struct fixture *f = fixture_new ("ro2");
  const char *how = make_member_readonly (f, 1);
  char *p0 = fileparam (f->path[0]), *p1 = fileparam (f->path[1]),
       *p2 = fileparam (f->path[2]);
  struct nbdkit_opts o = { .readonly = true };
  struct server s;
  struct nbd_handle *h;
  struct oracle orc;
  uint8_t *vol, *model;
  uint8_t one = 0x55;

  note ("member 1 made read-only by %s", how);
  if (oracle_init (&orc, 64 * 1024, NM, member_sizes) == -1)
    FAIL ("oracle_init");
  model = xmalloc (orc.size);
  for (uint64_t k = 0; k < orc.nr_chunks; k++)
    memcpy (model + k * orc.chunk,
            f->content[orc.chunk_member[k]] + orc.chunk_row[k] * orc.chunk,
            orc.chunk);

  server_start (&s, f->dir, &o, PARAMS (p0, p1, p2, "chunk=64K"));
  h = server_connect (&s);
  CHECK (nbd_is_read_only (h) == 1, "export not read-only with -r");
  CHECK (nbd_get_size (h) == (int64_t) orc.size,
         "size %" PRId64 ", expected %" PRIu64, nbd_get_size (h), orc.size);
  vol = xmalloc (orc.size);
  NBD_OK (nbd_pread (h, vol, orc.size, 0, 0));
  if (memcmp (vol, model, orc.size) != 0) {
    uint64_t d = 0;
    unsigned m;
    uint64_t mo;
    while (vol[d] == model[d])
      d++;
    oracle_map (&orc, d, &m, &mo);
    FAIL ("read-only volume differs at logical %" PRIu64 " (member %u "
          "offset %" PRIu64 ")",
          d, m, mo);
  }
  CHECK (nbd_pwrite (h, &one, 1, 0, 0) == -1, "write to a read-only export "
                                              "succeeded");
  note ("write refused: %s", nbd_get_error ());
  close_handle (h);
  server_stop (&s);
  check_unchanged (f, "after read-only serving");
  free (vol);
  free (model);
  oracle_free (&orc);
  free (p0);
  free (p1);
  free (p2);
}

/* ---- main ------------------------------------------------------------- */

static const struct {
  const char *name;
  void (*fn) (void *);
} cases[] = {
  { "control_valid_config_starts", case_control_valid_config_starts },
  { "no_file_at_all", case_no_file_at_all },
  { "member_missing", case_member_missing },
  { "member_unreadable", case_member_unreadable },
  { "member_is_directory", case_member_is_directory },
  { "same_member_twice", case_same_member_twice },
  { "same_member_via_symlink", case_same_member_via_symlink },
  { "same_member_via_hard_link", case_same_member_via_hard_link },
  { "same_member_via_other_spelling", case_same_member_via_other_spelling },
  { "chunk_0", case_chunk_0 },
  { "chunk_6000", case_chunk_6000 },
  { "chunk_abc", case_chunk_abc },
  { "chunk_2K", case_chunk_2K },
  { "chunk_negative", case_chunk_negative },
  { "chunk_empty", case_chunk_empty },
  { "chunk_kilobytes", case_chunk_kilobytes },
  { "chunk_fraction", case_chunk_fraction },
  { "chunk_plus_sign", case_chunk_plus_sign },
  { "member_smaller_than_chunk", case_member_smaller_than_chunk },
  { "unknown_parameter", case_unknown_parameter },
  { "control_character_in_a_path", case_control_character_in_a_path },
  { "readonly_member_refused_without_r",
    case_readonly_member_refused_without_r },
  { "readonly_member_works_with_r", case_readonly_member_works_with_r },
};

int
main (int argc, char **argv)
{
  const char *only = NULL, *group = NULL;
  int passed = 0, failed = 0, skipped = 0;

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--case") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp (argv[i], "--group") == 0 && i + 1 < argc)
      group = argv[++i];
    else {
      fprintf (stderr,
               "usage: test_params [--case NAME] [--group bad|readonly]\n");
      return 1;
    }
  }
  if (!getenv ("STRIPE_PLUGIN") || !*getenv ("STRIPE_PLUGIN")) {
    printf ("SKIP: STRIPE_PLUGIN is not set\n");
    return EXIT_SKIP;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only && strcmp (only, cases[i].name) != 0)
      continue;
    if (group) {
      bool ro = strncmp (cases[i].name, "readonly_", 9) == 0;
      if (ro != (strcmp (group, "readonly") == 0))
        continue;
    }
    switch (run_case (cases[i].name, cases[i].fn, NULL)) {
    case OUTCOME_PASS: passed++; break;
    case OUTCOME_SKIP: skipped++; break;
    default: failed++; break;
    }
  }
  printf ("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed)
    return EXIT_FAILURE;
  if (passed == 0 && skipped == 0) {
    fprintf (stderr, "test_params: no case selected\n");
    return EXIT_FAILURE;
  }
  if (passed == 0)
    return EXIT_SKIP;
  return EXIT_SUCCESS;
}
