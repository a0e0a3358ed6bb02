/* nbdstripe replace: move a member to another device while the volume is
 * served (through the server's control socket, control.h), or with the
 * volume stopped (--offline, the same engine in this process).
 * See include/replace.h for what happens meanwhile and at the end.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "assemble.h"
#include "control.h"
#include "header.h"
#include "json.h"
#include "log.h"
#include "member.h"
#include "nbdstripe.h"
#include "replace.h"
#include "volume.h"

static int
replace_usage (FILE *fp, int status)
{
  fprintf (
    fp,
    "Usage: nbdstripe replace [--rate RATE] [--wait] [--force]\n"
    "                         [--skip-unreadable] [--offline] CONFIG INDEX NEW\n"
    "       nbdstripe replace --cancel CONFIG\n"
    "Copy member INDEX of the volume to NEW (a file, block device or NBD\n"
    "URI at least as large) while clients go on, then switch the volume to\n"
    "NEW: its header, the config file, the server.\n"
    "  --rate RATE        copy at most RATE bytes a second (\"200M\")\n"
    "  --wait             follow the copy to its end (a progress bar on a\n"
    "                     terminal, a line every 5%% otherwise)\n"
    "  --force            NEW may hold data (a filesystem, a header...)\n"
    "  --skip-unreadable  copy past blocks of the old member that cannot be\n"
    "                     read (zeros on NEW) and list them, instead of\n"
    "                     stopping\n"
    "  --offline          the volume is not served: copy here\n"
    "  --cancel           stop the running replace (the volume keeps the\n"
    "                     old member)\n");
  return status;
}

/* One request to the server, one answer (NULL: no server; errno). */
static struct json_object *
ask (const char *path, struct json_object *req)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char *text = json_text_of (req), buf[65536];
  size_t n = 0;
  int fd;

  if (text == NULL)
    return NULL;
  snprintf (sa.sun_path, sizeof sa.sun_path, "%s", path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 || connect (fd, (struct sockaddr *) &sa, sizeof sa) == -1) {
    int e = errno;
    if (fd != -1)
      close (fd);
    free (text);
    errno = e;
    return NULL;
  }
  if (send (fd, text, strlen (text), MSG_NOSIGNAL) == -1
      || (text[strlen (text) - 1] != '\n'
          && send (fd, "\n", 1, MSG_NOSIGNAL) == -1)) {
    int e = errno;
    close (fd);
    free (text);
    errno = e;
    return NULL;
  }
  free (text);
  for (;;) {
    ssize_t r = read (fd, buf + n, sizeof buf - 1 - n);
    if (r <= 0)
      break;
    n += r;
    if (n == sizeof buf - 1)
      break;
  }
  close (fd);
  buf[n] = '\0';
  struct json_object *ans = json_tokener_parse (buf);
  if (ans == NULL)
    errno = EPROTO;
  return ans;
}

static const char *
get_str (struct json_object *o, const char *key)
{
  struct json_object *x;
  return o && json_object_object_get_ex (o, key, &x) ? json_object_get_string (x)
                                                      : NULL;
}

static double
get_num (struct json_object *o, const char *key)
{
  struct json_object *x;
  return o && json_object_object_get_ex (o, key, &x) ? json_object_get_double (x)
                                                      : 0;
}

/* A progress line (or bar) for a replace object; whether it has ended. */
static bool
show (struct json_object *r, bool tty, int *last_pct)
{
  const char *state = get_str (r, "state");
  double copied = get_num (r, "bytes_copied"), total = get_num (r, "bytes_total");
  double rate = get_num (r, "rate"), eta = get_num (r, "eta_seconds");
  int pct = total > 0 ? (int) (copied * 100 / total) : 100;
  bool end = state && strcmp (state, "copying") != 0
             && strcmp (state, "switching") != 0;
  char hs[32], hr[32];

  if (tty) {
    int w = 30, fill = pct * w / 100;
    fprintf (stderr, "\r[%.*s%*s] %3d%% %s at %s/s, ETA %.0f s   ", fill,
             "##############################", w - fill, "", pct,
             human_size ((uint64_t) copied, hs, sizeof hs),
             human_size ((uint64_t) rate, hr, sizeof hr), eta);
    if (end)
      fputc ('\n', stderr);
  }
  else if (pct / 5 != *last_pct / 5 || end) {
    printf ("replace: %s, %d%% (%" PRIu64 " of %" PRIu64 " bytes), %s/s\n",
            state ? state : "?", pct, (uint64_t) copied, (uint64_t) total,
            human_size ((uint64_t) rate, hr, sizeof hr));
    fflush (stdout);
  }
  *last_pct = pct;
  return end;
}

/* The end of a replace, in words; 0 if the member was replaced. */
static int
conclude (struct json_object *r, const char *config, unsigned index,
          const char *new_path)
{
  const char *state = get_str (r, "state"), *error = get_str (r, "error");
  struct json_object *lost, *x;
  int status = 1;

  if (state && strcmp (state, "done") == 0) {
    printf ("member %u replaced by %s\n", index, new_path);
    status = 0;
  }
  else
    fprintf (stderr, "nbdstripe: replace: member %u not replaced: %s\n",
             index, error ? error : state ? state : "unknown");
  if (json_object_object_get_ex (r, "unreadable", &lost)
      && json_object_array_length (lost) > 0) {
    size_t n = json_object_array_length (lost);
    fprintf (stderr, "nbdstripe: %s the old member's unreadable blocks, as "
             "the volume's logical bytes%s:\n",
             status == 0 ? "zeros on the new member in place of"
                         : "the copy stopped at",
             status == 0 ? " (their data is lost)" : "");
    for (size_t i = 0; i < n; ++i) {
      struct json_object *l = json_object_array_get_idx (lost, i);
      uint64_t off = (uint64_t) get_num (l, "offset");
      uint64_t len = (uint64_t) get_num (l, "length");
      fprintf (stderr, "  bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 ")\n", off,
               off + len - 1, len);
    }
  }
  /* The server could not write the config (a sandbox, say): here then. */
  if (status == 0 && json_object_object_get_ex (r, "config_updated", &x)
      && !json_object_get_boolean (x)) {
    const char *old = get_str (r, "old");
    char why[512];
    if (old
        && config_replace_member (config, index, old, new_path, why,
                                  sizeof why)
             == 0)
      printf ("%s: member %u is now %s\n", config, index, new_path);
    else {
      fprintf (stderr,
               "nbdstripe: %s: could not be rewritten (%s): change member "
               "%u to \"%s\" in it\n",
               config, why, index, new_path);
      status = 1;
    }
  }
  else if (status == 0)
    printf ("%s: member %u is now %s\n", config, index, new_path);
  return status;
}

/* Refuse NEW holding something a user may want, unless --force. */
static int
check_new (const char *path, bool force)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  uint8_t first[HEADER_SIZE] = { 0 };
  struct member d;
  char why[512], what[512];

  if (member_open (&d, 0, path, &params, why, sizeof why) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", path, why);
    return -1;
  }
  if (member_pread (&d, first, sizeof first, 0, false, why, sizeof why) == -1) {
    fprintf (stderr, "nbdstripe: %s: %s\n", path, why);
    member_close (&d);
    return -1;
  }
  if (!force && recognise_member (&d, first, what, sizeof what)) {
    fprintf (stderr, "nbdstripe: %s: %s; refusing to overwrite it (use "
             "--force)\n",
             path, what);
    member_close (&d);
    return -1;
  }
  member_close (&d);
  return 0;
}

static int
offline (struct stripe_config *cfg, const struct replace_params *p, bool wait)
{
  struct volume *v = malloc (sizeof *v);
  struct assembly a;
  const struct volume_options o = { .claim = true, .uring = true };
  char why[1024];
  int status = 1, last = -1;
  bool tty = isatty (STDERR_FILENO);

  (void) wait;
  memset (&a, 0, sizeof a);
  if (v == NULL) {
    perror ("nbdstripe: malloc");
    return 1;
  }
  if (volume_open_config (v, cfg, &o, &a) == -1) {
    fprintf (stderr, "nbdstripe: %s: the volume cannot be opened (served "
             "already? then leave out --offline)\n",
             cfg->path);
    goto out;
  }
  if (volume_start (v) == -1) {
    fprintf (stderr, "nbdstripe: %s: cannot start the members: %m\n",
             cfg->path);
    volume_close (v);
    goto out;
  }
  if (replace_start (v, p, why, sizeof why) == -1) {
    fprintf (stderr, "nbdstripe: replace: %s\n", why);
    volume_close (v);
    goto out;
  }
  for (;;) {
    struct json_object *r = replace_status (v);
    bool end = show (r, tty, &last);
    if (end) {
      replace_wait (v);
      status = conclude (r, cfg->path, p->index, p->new_path);
      json_object_put (r);
      break;
    }
    json_object_put (r);
    usleep (200000);
  }
  volume_close (v);

out:
  assembly_free (&a);
  free (v);
  return status;
}

int
cmd_replace (int argc, char **argv)
{
  static const struct option opts[] = {
    { "rate", required_argument, NULL, 'r' },
    { "wait", no_argument, NULL, 'w' },
    { "force", no_argument, NULL, 'f' },
    { "skip-unreadable", no_argument, NULL, 's' },
    { "offline", no_argument, NULL, 'o' },
    { "cancel", no_argument, NULL, 'c' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  struct replace_params p = { 0 };
  struct stripe_config cfg;
  bool wait = false, off = false, cancel = false;
  char ctl[4096], *end;
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "hfw", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      if (config_parse_size (optarg, &p.rate) == -1 || p.rate == 0) {
        fprintf (stderr, "nbdstripe: replace: --rate: expected a size such "
                 "as \"200M\" (bytes a second), got \"%s\"\n",
                 optarg);
        return 2;
      }
      break;
    case 'w': wait = true; break;
    case 'f': p.force = true; break;
    case 's': p.skip_unreadable = true; break;
    case 'o': off = true; break;
    case 'c': cancel = true; break;
    case 'h': return replace_usage (stdout, 0);
    default: return replace_usage (stderr, 2);
    }
  }
  if (cancel ? optind != argc - 1 : optind != argc - 3)
    return replace_usage (stderr, 2);
  memset (&cfg, 0, sizeof cfg);
  if (load_config (argv[optind], &cfg) == -1)
    goto out;
  control_path (cfg.health.status_file, ctl, sizeof ctl);

  if (cancel) {
    struct json_object *req = json_object_new_object (), *ans;
    json_put (req, "op", json_text ("cancel"));
    ans = ask (ctl, req);
    json_object_put (req);
    if (ans == NULL)
      fprintf (stderr, "nbdstripe: %s: the volume is not served (%s: %m)\n",
               cfg.path, ctl);
    else if (!json_object_get_boolean (json_object_object_get (ans, "ok")))
      fprintf (stderr, "nbdstripe: replace --cancel: %s\n",
               get_str (ans, "error"));
    else {
      printf ("replace of volume '%s' cancelled\n", cfg.name);
      status = 0;
    }
    json_object_put (ans);
    goto out;
  }

  errno = 0;
  unsigned long idx = strtoul (argv[optind + 1], &end, 10);
  if (*argv[optind + 1] == '\0' || *end || errno || idx >= cfg.nr_members) {
    fprintf (stderr, "nbdstripe: replace: INDEX: expected a member index, 0 "
             "to %u, got \"%s\"\n",
             cfg.nr_members - 1, argv[optind + 1]);
    status = 2;
    goto out;
  }
  p.index = idx;
  /* A config names members by absolute path (URIs as they are). */
  char *abs = member_is_uri (argv[optind + 2]) ? strdup (argv[optind + 2])
                                               : realpath (argv[optind + 2], NULL);
  if (abs == NULL) {
    fprintf (stderr, "nbdstripe: %s: %s\n", argv[optind + 2], strerror (errno));
    goto out;
  }
  p.new_path = abs;
  p.config = cfg.path;
  if (check_new (p.new_path, p.force) == -1)
    goto free_abs;
  p.force = true; /* checked here, with libblkid too */

  if (off) {
    status = offline (&cfg, &p, wait);
    goto free_abs;
  }

  {
    struct json_object *req = json_object_new_object (), *ans;
    json_put (req, "op", json_text ("replace"));
    json_put (req, "member", json_object_new_int64 (p.index));
    json_put (req, "new", json_text (p.new_path));
    json_put (req, "rate", json_u64 (p.rate));
    json_put (req, "force", json_object_new_boolean (p.force));
    json_put (req, "skip_unreadable",
              json_object_new_boolean (p.skip_unreadable));
    ans = ask (ctl, req);
    json_object_put (req);
    if (ans == NULL) {
      fprintf (stderr, "nbdstripe: %s: the volume is not served (%s: %m); "
               "with the volume stopped: nbdstripe replace --offline\n",
               cfg.path, ctl);
      goto free_abs;
    }
    if (!json_object_get_boolean (json_object_object_get (ans, "ok"))) {
      fprintf (stderr, "nbdstripe: replace: %s\n", get_str (ans, "error"));
      json_object_put (ans);
      goto free_abs;
    }
    json_object_put (ans);
  }
  if (!wait) {
    printf ("replace of member %lu of volume '%s' started: nbdstripe status "
            "%s shows its progress\n",
            idx, cfg.name, cfg.path);
    status = 0;
    goto free_abs;
  }
  {
    bool tty = isatty (STDERR_FILENO);
    int last = -1;
    for (;;) {
      struct json_object *req = json_object_new_object (), *ans, *st, *r;
      json_put (req, "op", json_text ("status"));
      ans = ask (ctl, req);
      json_object_put (req);
      if (ans == NULL) {
        fprintf (stderr, "\nnbdstripe: the server went away during the "
                 "replace (%m): the volume assembles with the member its "
                 "config names\n");
        break;
      }
      r = NULL;
      if (json_object_object_get_ex (ans, "status", &st))
        json_object_object_get_ex (st, "replace", &r);
      else
        json_object_object_get_ex (ans, "replace", &r);
      if (r && show (r, tty, &last)) {
        status = conclude (r, cfg.path, p.index, p.new_path);
        json_object_put (ans);
        break;
      }
      json_object_put (ans);
      usleep (200000);
    }
  }

free_abs:
  free (abs);
out:
  config_free (&cfg);
  return status;
}
