/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe grow, nbdstripe shrink: restripe a volume onto more members,
 * bigger ones, or one fewer (include/reshape.h).  A served volume is asked
 * through its control socket; --offline opens it here and moves the data
 * itself.  --dry-run says what would be done (the size a shrink leaves).
 */

#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "assemble.h"
#include "control.h"
#include "json.h"
#include "member.h"
#include "mover.h"
#include "nbdstripe.h"
#include "reshape.h"
#include "volume.h"

struct run {
  const struct command *cmd;
  struct reshape_params p;
  bool wait, off, json;
  struct stripe_config cfg;
  struct json_object *plan, *last; /* what it does; its last state */
  char err[1024];
};

static void __attribute__ ((format (printf, 2, 3)))
say_error (struct run *r, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (r->err, sizeof r->err, fmt, ap);
  va_end (ap);
  if (!r->json)
    fprintf (stderr, "nbdstripe: %s\n", r->err);
}

/* A field of an answer, 0 or NULL when it is missing or of another
 * type (the server's answers are read as untrusted as any).
 */
static uint64_t
get_u64 (struct json_object *o, const char *key)
{
  uint64_t u = 0;

  json_get_uint64 (o, key, &u, NULL, 0);
  return u;
}

static const char *
get_text (struct json_object *o, const char *key)
{
  const char *t = NULL;

  json_get_string (o, key, &t, NULL, 0);
  return t;
}

/* What the plan says, for people. */
static void
show_plan (struct run *r)
{
  char a[32], b[32], m[32];
  uint64_t from = get_u64 (r->plan, "size_from"), to = get_u64 (r->plan,
                                                                 "size_to");

  if (r->json || r->plan == NULL)
    return;
  printf ("%s %s '%s': %s -> %s (%" PRIu64 " -> %" PRIu64 " bytes), %s to "
          "move\n",
          r->p.dry_run ? "would" : "started:", r->cmd->name, r->cfg.name,
          human_size (from, a, sizeof a), human_size (to, b, sizeof b), from,
          to, human_size (get_u64 (r->plan, "bytes_to_move"), m, sizeof m));
  if (r->p.kind == RESHAPE_SHRINK && r->p.dry_run)
    printf ("shrink the file system to at most %" PRIu64 " bytes and fstrim "
            "it, then: nbdstripe shrink %s %u --size %" PRIu64 "\n",
            to, r->cfg.path, r->p.index, to);
  if (r->p.kind != RESHAPE_SHRINK && !r->p.dry_run)
    printf ("clients see the new size when they connect again (NBD has no "
            "resize notice): nbd-client -d, attach again, resize2fs\n");
}

/* Follow the reshape (status objects from status ()) to its end. */
static int
follow (struct run *r, struct json_object *(*status) (void *), void *opaque)
{
  bool tty = isatty (STDERR_FILENO);

  for (;;) {
    struct json_object *st = status (opaque);
    const char *state;
    char buf[256];

    if (st == NULL) {
      say_error (r, "the server went away during the %s: it goes on when "
                 "the volume is served again", r->cmd->name);
      return 1;
    }
    json_object_put (r->last);
    r->last = st;
    state = get_text (st, "state");
    if (!r->json && tty)
      fprintf (stderr, "\r%s", replace_progress (st, buf, sizeof buf));
    if (state && strcmp (state, "copying") != 0
        && strcmp (state, "switching") != 0) {
      if (!r->json && tty)
        fputc ('\n', stderr);
      if (strcmp (state, "done") == 0) {
        if (!r->json)
          printf ("%s of '%s' done: %" PRIu64 " bytes\n", r->cmd->name,
                  r->cfg.name, get_u64 (st, "size_to"));
        return 0;
      }
      say_error (r, "%s %s: %s", r->cmd->name, state,
                 get_text (st, "error") ? get_text (st, "error") : "");
      return 1;
    }
    usleep (200000);
  }
}

static struct json_object *
local_status (void *opaque)
{
  return mover_status (opaque);
}

static int
offline (struct run *r)
{
  const struct volume_options opt = { .claim = true, .uring = true };
  struct volume *v = calloc (1, sizeof *v);
  struct assembly a = { 0 };
  char why[1024];
  int status = 1;

  if (v == NULL) {
    say_error (r, "%s", strerror (ENOMEM));
    return 1;
  }
  if (volume_open_config (v, &r->cfg, &opt, &a) == -1) {
    say_error (r, "%s: the volume cannot be opened (served already? then "
               "leave out --offline)",
               r->cfg.path);
    goto out;
  }
  if (volume_start (v) == -1) {
    say_error (r, "%s: cannot start the members: %s", r->cfg.path,
               strerror (errno));
    goto close;
  }
  if (a.reshape.active) {
    if (reshape_resume (v, &a, r->cfg.path, why, sizeof why) == -1) {
      say_error (r, "%s: %s", r->cmd->name, why);
      goto close;
    }
  }
  else if (reshape_start (v, &r->p, &r->plan, why, sizeof why) == -1) {
    say_error (r, "%s: %s", r->cmd->name, why);
    goto close;
  }
  show_plan (r);
  if (r->p.dry_run)
    status = 0;
  else {
    status = follow (r, local_status, v);
    mover_wait (v);
  }
close:
  volume_close (v);
out:
  assembly_free (&a);
  free (v);
  return status;
}

struct served_ctl {
  char path[4096];
};

static struct json_object *
served_status (void *opaque)
{
  struct served_ctl *c = opaque;
  struct json_object *req = json_object_new_object (), *ans, *st, *rs = NULL;
  char why[1024];

  json_put (req, "op", json_text ("status"));
  ans = control_ask (c->path, req, 0, why, sizeof why);
  json_object_put (req);
  if (ans == NULL)
    return NULL;
  if (json_get_object (ans, "status", &st, NULL, 0) == 0)
    json_get_object (st, "reshape", &rs, NULL, 0);
  else
    json_get_object (ans, "reshape", &rs, NULL, 0);
  rs = rs ? json_object_get (rs) : json_object_new_object ();
  json_object_put (ans);
  return rs;
}

static int
served (struct run *r)
{
  struct served_ctl c;
  struct json_object *req = json_object_new_object (), *ans, *arr;
  bool ok = false;
  char why[1024];
  const char *kind = r->p.kind == RESHAPE_GROW     ? "grow"
                     : r->p.kind == RESHAPE_SHRINK ? "shrink"
                                                   : "size";

  control_path (r->cfg.health.status_file, c.path, sizeof c.path);
  json_put (req, "op", json_text ("reshape"));
  json_put (req, "kind", json_text (kind));
  if (r->p.kind == RESHAPE_GROW) {
    arr = json_object_new_array ();
    for (unsigned k = 0; k < r->p.nr_new; ++k)
      json_object_array_add (arr, json_text (r->p.new_paths[k]));
    json_put (req, "new", arr);
  }
  if (r->p.kind == RESHAPE_SHRINK) {
    json_put (req, "member", json_object_new_int64 (r->p.index));
    json_put (req, "size", json_u64 (r->p.size));
  }
  json_put (req, "rate", json_u64 (r->p.rate));
  json_put (req, "force", json_object_new_boolean (r->p.force));
  json_put (req, "dry_run", json_object_new_boolean (r->p.dry_run));
  ans = control_ask (c.path, req, 0, why, sizeof why);
  json_object_put (req);
  if (ans == NULL) {
    say_error (r, "%s: %s%s", r->cfg.path,
               errno == EPERM ? "" : "the volume is not served: ", why);
    return 1;
  }
  if (json_get_bool (ans, "ok", &ok, NULL, 0) == -1 || !ok) {
    say_error (r, "%s: %s", r->cmd->name,
               get_text (ans, "error") ? get_text (ans, "error")
                                       : "refused");
    json_object_put (ans);
    return 1;
  }
  if (json_get_object (ans, "plan", &r->plan, NULL, 0) == 0)
    json_object_get (r->plan);
  json_object_put (ans);
  show_plan (r);
  if (r->p.dry_run || !r->wait)
    return 0;
  return follow (r, served_status, &c);
}

/* The operands after VOLUME: grow's devices (absolute paths, URIs as
 * they are), or shrink's INDEX.
 */
static int
operands (struct run *r, int argc, char **argv, char **abs)
{
  int first = optind + 1;

  if (r->p.kind == RESHAPE_SHRINK) {
    char *end;
    unsigned long idx;
    errno = 0;
    idx = strtoul (argv[first], &end, 10);
    if (errno || *end || end == argv[first] || idx >= LAYOUT_MAX_MEMBERS)
      return cli_usage_error (r->cmd, "INDEX '%s': expected a member index "
                              "(0, 1, ...)",
                              argv[first]);
    r->p.index = idx;
    return 0;
  }
  for (int k = first; k < argc; ++k) {
    abs[k - first] = member_is_uri (argv[k]) ? strdup (argv[k])
                                             : realpath (argv[k], NULL);
    if (abs[k - first] == NULL) {
      say_error (r, "%s: %s", argv[k], strerror (errno));
      return 1;
    }
    r->p.nr_new = k - first + 1;
  }
  r->p.new_paths = (const char *const *) abs;
  return 0;
}

static void
result_json (struct run *r, const char *arg, bool loaded, int status)
{
  struct json_object *j = json_object_new_object ();

  json_put (j, "config", json_text (loaded ? r->cfg.path : arg));
  json_put (j, "name", loaded ? json_text (r->cfg.name) : NULL);
  json_put (j, "dry_run", json_object_new_boolean (r->p.dry_run));
  json_put (j, "plan", r->plan ? json_object_get (r->plan) : NULL);
  json_put (j, "reshape", r->last ? json_object_get (r->last) : NULL);
  json_put (j, "ok", json_object_new_boolean (status == 0));
  json_put (j, "error", r->err[0] ? json_text (r->err) : NULL);
  print_json (j);
}

static int
reshape_cmd (const struct command *cmd, enum reshape_kind kind, int argc,
             char **argv)
{
  static const struct option opts[] = {
    { "rate", required_argument, NULL, 'r' },
    { "size", required_argument, NULL, 's' },
    { "wait", no_argument, NULL, 'w' },
    { "force", no_argument, NULL, 'f' },
    { "offline", no_argument, NULL, 'O' },
    { "dry-run", no_argument, NULL, 'n' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct run r = { .cmd = cmd, .p = { .kind = kind } };
  char *abs[LAYOUT_MAX_MEMBERS] = { NULL };
  const char *size = NULL;
  bool loaded = false;
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "fwjnhV", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      if (config_parse_size (optarg, &r.p.rate) == -1 || r.p.rate == 0)
        return cli_usage_error (cmd, "--rate '%s': expected a size such as "
                                "200M (bytes a second)",
                                optarg);
      break;
    case 's': size = optarg; break;
    case 'w': r.wait = true; break;
    case 'f': r.p.force = true; break;
    case 'O': r.off = true; break;
    case 'n': r.p.dry_run = true; break;
    case 'j': r.json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if (kind == RESHAPE_GROW && size) {
    if (strcmp (size, "max") != 0)
      return cli_usage_error (cmd, "--size '%s': grow takes --size max (the "
                              "room the members have)",
                              size);
    r.p.kind = RESHAPE_SIZE;
    c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME");
  }
  else if (kind == RESHAPE_GROW)
    c = cli_operands (cmd, argc, argv, 2, 1 + LAYOUT_MAX_MEMBERS,
                      "VOLUME and NEW");
  else {
    c = cli_operands (cmd, argc, argv, 2, 2, "VOLUME and INDEX");
    if (c == 0 && size == NULL && !r.p.dry_run)
      return cli_usage_error (cmd, "--size BYTES: the size the volume will "
                              "have, as 'shrink --dry-run' says it (the "
                              "file system shrunk to fit first)");
    if (c == 0 && size && config_parse_size (size, &r.p.size) == -1)
      return cli_usage_error (cmd, "--size '%s': expected a size in bytes",
                              size);
  }
  if (c != 0)
    return c;
  if ((c = operands (&r, argc, argv, abs)) != 0) {
    status = c;
    goto out;
  }

  loaded = load_volume (argv[optind], &r.cfg, r.err, sizeof r.err) == 0;
  if (!loaded)
    goto out;
  r.p.config = r.cfg.path;
  status = r.off ? offline (&r) : served (&r);

out:
  if (r.json)
    result_json (&r, argv[optind], loaded, status);
  json_object_put (r.plan);
  json_object_put (r.last);
  for (unsigned k = 0; k < LAYOUT_MAX_MEMBERS; ++k)
    free (abs[k]);
  config_free (&r.cfg);
  return status;
}

int
cmd_grow (const struct command *cmd, int argc, char **argv)
{
  return reshape_cmd (cmd, RESHAPE_GROW, argc, argv);
}

int
cmd_shrink (const struct command *cmd, int argc, char **argv)
{
  return reshape_cmd (cmd, RESHAPE_SHRINK, argc, argv);
}
