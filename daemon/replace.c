/* SPDX-License-Identifier: BSD-3-Clause */
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
#include <unistd.h>

#include <json-c/json.h>

#include "array.h"
#include "assemble.h"
#include "header.h"
#include "jobctl.h"
#include "json.h"
#include "jsonout.h"
#include "log.h"
#include "member.h"
#include "nbdstripe.h"
#include "mover.h"
#include "owned.h"
#include "replace.h"
#include "volume.h"

/* The end of a replace, in words; 0 if the member was replaced. */
static int
conclude (struct jobctl *j, struct json_object *r)
{
  const struct replace_params *p = j->cmd;
  struct outcome *o = j->o;
  const char *config = p->config, *new_path = p->new_path;
  unsigned index = p->index;
  const char *state = json_str_or_null (r, "state"),
             *error = json_str_or_null (r, "error");
  struct json_object *lost;
  bool updated = true;
  int status = 1;

  outcome_keep (o, r);
  if (state && strcmp (state, "done") == 0) {
    if (!o->json)
      printf ("member %u replaced by %s\n", index, new_path);
    status = 0;
  }
  else
    outcome_fail (o, "replace: member %u not replaced: %s", index,
                  error   ? error
                  : state ? state
                          : "unknown");
  if (json_get_array (r, "unreadable", &lost, NULL, 0) == 0
      && json_object_array_length (lost) > 0) {
    size_t n = json_object_array_length (lost);
    fprintf (stderr, "nbdstripe: %s, as the volume's logical bytes%s:\n",
             status == 0 ? "the old member's unreadable blocks are lost"
                         : "the copy stopped at the old member's unreadable "
                           "blocks",
             status == 0 ? " (reads there fail with EIO until they are "
                           "written; 'nbdstripe status' lists them)"
                         : "");
    for (size_t i = 0; i < n; ++i) {
      struct json_object *l = json_object_array_get_idx (lost, i);
      uint64_t off = json_u64_or_0 (l, "offset");
      uint64_t len = json_u64_or_0 (l, "length");
      fprintf (stderr, "  bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 ")\n", off,
               off + len - 1, len);
    }
  }
  /* The server could not write the config (a sandbox, say): here then. */
  json_get_bool (r, "config_updated", &updated, NULL, 0);
  if (status == 0 && !updated) {
    const char *old = json_str_or_null (r, "old");
    bool spare = false;
    json_get_bool (r, "spare", &spare, NULL, 0);
    char why[512] = "";
    /* NEW was a spare: it leaves the spares, old goes to removed. */
    if (old
        && (spare ? config_replace_with_spare (config, index, old, new_path,
                                               why, sizeof why)
                  : config_replace_member (config, index, old, new_path, why,
                                           sizeof why))
             == 0) {
      if (!o->json)
        printf ("%s: member %u is now %s\n", config, index, new_path);
    }
    else {
      outcome_fail (
        o,
        "%s: could not be rewritten (%s): change member %u to \"%s\" "
        "in it",
        config, why, index, new_path);
      status = 1;
    }
  }
  else if (status == 0 && !o->json)
    printf ("%s: member %u is now %s\n", config, index, new_path);
  return status;
}

/* Whether first (NEW's first bytes) is a copy of member index of cfg's
 * volume that a replace did not finish.
 */
static bool
unfinished_copy (const struct stripe_config *cfg, unsigned index,
                 const uint8_t *first)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  uint8_t mine[HEADER_SIZE] = { 0 };
  struct member m;
  char why[512];
  bool r = false;

  if (member_open (&m, index, cfg->members[index], &params, why, sizeof why)
      == -1)
    return false;
  if (member_pread (&m, mine, sizeof mine, 0, false, why, sizeof why) > 0)
    r = meta_unfinished_copy (first, HEADER_SIZE, mine, HEADER_SIZE, index);
  member_close (&m);
  return r;
}

/* Refuse NEW holding something a user may want, unless --force. */
static int
check_new (struct outcome *o, const struct stripe_config *cfg,
           unsigned index, const char *path, bool force)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  uint8_t first[HEADER_SIZE] = { 0 };
  struct member d;
  char why[512], what[512];

  if (member_open (&d, 0, path, &params, why, sizeof why) == -1) {
    outcome_fail (o, "%s: %s", path, why);
    return -1;
  }
  /* NEW one of the volume's members (or overlapping one): said as such,
   * whatever --force (the server refuses it too).
   */
  for (unsigned j = 0; j < cfg->nr_members; ++j) {
    struct member m;
    if (member_open (&m, j, cfg->members[j], &params, why, sizeof why) == -1)
      continue;
    if (identity_alias (&d.id, &m.id, what, sizeof what)) {
      if (j == index)
        outcome_fail (
          o, "%s: is member %u itself (%s); NEW must be another device", path,
          j, what);
      else
        outcome_fail (o, "%s and member %u (%s) are %s", path, j,
                      cfg->members[j], what);
      member_close (&m);
      member_close (&d);
      return -1;
    }
    member_close (&m);
  }
  /* Nor a spare under another name, nor a removed member. */
  if (owned_check (cfg, path, &d.id,
                   OWNED_SPARES | OWNED_REMOVED | OWNED_SPARE_AS_NAMED, why,
                   sizeof why)
      == -1) {
    outcome_fail (o, "%s", why);
    member_close (&d);
    return -1;
  }
  if (member_pread (&d, first, sizeof first, 0, false, why, sizeof why) == -1) {
    outcome_fail (o, "%s: %s", path, why);
    member_close (&d);
    return -1;
  }
  /* A copy of member index that a replace cut short left on NEW: the
   * same replace run again takes it (meta_unfinished_copy).
   */
  if (!force && index < cfg->nr_members && unfinished_copy (cfg, index, first)) {
    if (!o->json)
      printf ("%s: holds a copy of member %u that a replace did not finish: "
              "it is overwritten\n",
              path, index);
    force = true;
  }
  if (!force && recognise_member (&d, first, what, sizeof what)) {
    outcome_fail (o, "%s: %s; refusing to overwrite it (use --force)", path,
                  what);
    member_close (&d);
    return -1;
  }
  member_close (&d);
  return 0;
}

/* --dry-run: the checks a replace makes before it writes anything --
 * check_new's (NEW none of the members, spares or removed members,
 * holding nothing to keep), then NEW large enough for member index --
 * and what it would do.  The volume is opened as check opens it,
 * read-only and unclaimed, so it works served or not; NEW read-only too.
 * Nothing is written anywhere.
 */
static int
dry_run (struct outcome *o, const struct stripe_config *cfg, unsigned index,
         const char *new_path, uint64_t *to_copy)
{
  const struct array_options ao = {
    .volume = { .readonly = true, .raw = true },
    .cfg = cfg,
  };
  const struct member_open_params params = { .readonly = true, .raw = true };
  struct array *a = malloc (sizeof *a);
  const struct member *old;
  struct member d;
  char why[512], hs[32], hn[32], hf[32], ha[32];
  uint64_t copy, all;
  int status = 1;

  if (a == NULL) {
    outcome_fail (o, "%s", strerror (ENOMEM));
    return 1;
  }
  if (array_open (a, &ao) == -1) {
    outcome_fail (o,
                  "%s: the volume does not assemble ('nbdstripe check "
                  "%s' says why): nothing to copy from",
                  cfg->path, cfg->path);
    goto out;
  }
  old = &a->volume.members[index];
  if (member_open (&d, index, new_path, &params, why, sizeof why) == -1) {
    outcome_fail (o, "%s: %s", new_path, why);
    goto out;
  }
  if (meta_fits (&a->volume.meta, index, d.size, old->need, why, sizeof why)
      == -1)
    outcome_fail (o, "%s: %s", new_path, why);
  else if (d.size < old->need)
    outcome_fail (o,
                  "%s: %" PRIu64 " bytes: member %u needs %" PRIu64
                  " (its data offset and data)",
                  new_path, d.size, index, old->need);
  else
    status = 0;
  all = old->need > old->data_offset ? old->need - old->data_offset : 0;
  /* What the allocation map says is in use: the rest is made to read
   * zeros on NEW, not copied.
   */
  copy = volume_member_used_bytes (&a->volume, index);
  if (status == 0)
    *to_copy = copy;
  if (status == 0 && !o->json) {
    if (copy < all)
      printf ("%s of member %u's %s %s free in the allocation map: not "
              "copied\n",
              human_size (all - copy, hf, sizeof hf), index,
              human_size (all, ha, sizeof ha),
              all - copy == 1 ? "is" : "are");
    printf ("would replace member %u of volume '%s' (%s) by %s: %s to copy "
            "(%" PRIu64 " bytes)\n"
            "checks passed: %s opens; is none of the volume's members, "
            "spares or removed members; holds nothing to keep (or "
            "--force); has %s, member %u needs %" PRIu64 " bytes\n"
            "nothing written (dry run)\n",
            index, cfg->name, old->path, new_path,
            human_size (copy, hs, sizeof hs), copy, new_path,
            human_size (d.size, hn, sizeof hn), index, old->need);
  }
  member_close (&d);
out:
  array_close (a);
  free (a);
  return status;
}

/* The replace j describes, run here on cfg's volume (not served), its
 * progress shown as a served one's.
 */
static int
offline (struct jobctl *j, struct stripe_config *cfg, bool accept_stale)
{
  const struct replace_params *p = j->cmd;
  struct outcome *o = j->o;
  struct array *a = malloc (sizeof *a);
  struct volume *v = a ? &a->volume : NULL;
  const struct array_options ao = {
    .volume = { .claim = true, .uring = true, .accept_stale = accept_stale,
                .stale_index = p->index },
    .cfg = cfg,
    .config_file = cfg->path,
  };
  char why[1024];
  int status = 1;

  if (a == NULL) {
    outcome_fail (o, "%s", strerror (ENOMEM));
    return 1;
  }
  if (array_open (a, &ao) == -1) {
    outcome_fail (
      o,
      "%s: the volume cannot be opened (served already? then leave "
      "out --offline%s)",
      cfg->path,
      accept_stale ? ""
                   : "; member INDEX stale, dropped out while served and "
                     "failing writes? --accept-stale copies it as it is");
    goto out;
  }
  if (volume_start (v) == -1) {
    outcome_fail (o, "%s: cannot start the members: %s", cfg->path,
                  strerror (errno));
    goto out;
  }
  if (replace_start (a, p, why, sizeof why) == -1) {
    outcome_fail (o, "replace: %s", why);
    goto out;
  }
  for (;;) {
    struct json_object *r = mover_status (v);
    if (jobctl_show (j, r)) {
      mover_wait (v);
      json_object_put (r);
      /* The copier has ended: its last word. */
      r = mover_status (v);
      status = conclude (j, r);
      json_object_put (r);
      break;
    }
    json_object_put (r);
    usleep (200000);
  }

out:
  array_close (a);
  free (a);
  return status;
}

/* replace --json: the same keys whatever happened; those of a replace
 * null with --cancel, cancelled null without.
 */
static void
replace_json (const char *arg, const struct stripe_config *cfg, bool loaded,
              bool cancel, long idx, const char *new_path, bool off,
              bool dry, int64_t to_copy, bool started, bool waited,
              int status, struct outcome *o)
{
  struct json_object *j = json_object_new_object ();

  json_put (j, "config", json_text (loaded ? cfg->path : arg));
  json_put (j, "name", loaded ? json_text (cfg->name) : NULL);
  json_put (j, "cancelled",
            cancel ? json_object_new_boolean (status == 0) : NULL);
  json_put (j, "member",
            !cancel && idx >= 0 ? json_object_new_int64 (idx) : NULL);
  json_put (j, "new", cancel ? NULL : json_text (new_path));
  json_put (j, "offline", cancel ? NULL : json_object_new_boolean (off));
  json_put (j, "dry_run", cancel ? NULL : json_object_new_boolean (dry));
  /* --dry-run: what it would copy, once every check has passed */
  json_put (j, "bytes_to_copy",
            dry && to_copy >= 0 ? json_u64 ((uint64_t) to_copy) : NULL);
  json_put (j, "started", cancel ? NULL : json_object_new_boolean (started));
  /* null: not followed to its end (no --wait) */
  json_put (j, "replaced",
            !cancel && waited ? json_object_new_boolean (status == 0) : NULL);
  json_put (j, "replace",
            !cancel && o->last ? json_object_get (o->last) : NULL);
  jsonout_result (j, status == 0, o->err, o->lines);
}

/* What the command line asks. */
struct replace_args {
  struct replace_params p; /* rate, force, skip_unreadable */
  bool wait, off, cancel, json;
  bool dry_run;      /* --dry-run: say what it would do, write nothing */
  bool accept_stale; /* --accept-stale (with --offline) */
  const char *volume;  /* VOLUME */
  const char *new_arg; /* NEW as given (NULL with --cancel) */
  unsigned long idx;   /* INDEX */
};

/* The options and operands.  false when the command ends here (help,
 * version, a usage error), with *status its exit status.
 */
static bool
replace_options (const struct command *cmd, int argc, char **argv,
                 struct replace_args *ra, int *status)
{
  static const struct option opts[] = {
    { "rate", required_argument, NULL, 'r' },
    { "wait", no_argument, NULL, 'w' },
    { "force", no_argument, NULL, 'f' },
    { "skip-unreadable", no_argument, NULL, 's' },
    { "offline", no_argument, NULL, 'O' },
    { "accept-stale", no_argument, NULL, 'A' },
    { "dry-run", no_argument, NULL, 'n' },
    { "cancel", no_argument, NULL, 'c' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  const char *index, *copy_opt = NULL;
  char *end;
  int c;

  while ((c = getopt_long (argc, argv, "fwjnhV", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      if (config_parse_size (optarg, &ra->p.rate) == -1 || ra->p.rate == 0) {
        *status = cli_usage_error (cmd,
                                   "--rate '%s': expected a size such as "
                                   "200M (bytes a second)",
                                   optarg);
        return false;
      }
      copy_opt = "--rate";
      break;
    case 'w':
      ra->wait = true;
      copy_opt = "--wait";
      break;
    case 'f':
      ra->p.force = true;
      copy_opt = "--force";
      break;
    case 's':
      ra->p.skip_unreadable = true;
      copy_opt = "--skip-unreadable";
      break;
    case 'O':
      ra->off = true;
      copy_opt = "--offline";
      break;
    case 'A':
      ra->accept_stale = true;
      copy_opt = "--accept-stale";
      break;
    case 'n':
      ra->dry_run = true;
      copy_opt = "--dry-run";
      break;
    case 'c': ra->cancel = true; break;
    case 'j': ra->json = true; break;
    default: *status = cli_option (cmd, c); return false;
    }
  }
  if (ra->cancel) {
    if (copy_opt) {
      *status = cli_usage_error (cmd,
                                 "--cancel and %s: --cancel takes only "
                                 "VOLUME (and --json)",
                                 copy_opt);
      return false;
    }
    if ((*status = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
      return false;
  }
  else {
    if ((*status =
           cli_operands (cmd, argc, argv, 3, 3, "VOLUME, INDEX and NEW"))
        != 0)
      return false;
    index = argv[optind + 1];
    errno = 0;
    ra->idx = strtoul (index, &end, 10);
    if (errno || end == index || *end || ra->idx >= LAYOUT_MAX_MEMBERS
        || index[0] < '0' || index[0] > '9') {
      *status = cli_usage_error (cmd,
                                 "INDEX '%s': expected a member index "
                                 "(0, 1, ...)",
                                 index);
      return false;
    }
    ra->new_arg = argv[optind + 2];
  }
  if (ra->accept_stale && !ra->off) {
    *status = cli_usage_error (cmd, "--accept-stale is for a replace with "
                               "the volume stopped: add --offline");
    return false;
  }
  ra->volume = argv[optind];
  return true;
}

/* The request that starts the replace p describes. */
static struct json_object *
start_request (const struct replace_params *p)
{
  struct json_object *req = json_object_new_object ();

  json_put (req, "op", json_text ("replace"));
  json_put (req, "member", json_object_new_int64 (p->index));
  json_put (req, "new", json_text (p->new_path));
  json_put (req, "rate", json_u64 (p->rate));
  json_put (req, "force", json_object_new_boolean (p->force));
  json_put (req, "skip_unreadable",
            json_object_new_boolean (p->skip_unreadable));
  return req;
}

/* Started, not followed: where it starts from (for --json), and how to
 * see the rest.
 */
static void
replace_started (struct jobctl *j, struct json_object *ans)
{
  const struct replace_params *p = j->cmd;

  (void) ans;
  if (j->wait)
    return;
  jobctl_peek (j);
  if (!j->o->json)
    printf ("replace of member %u of volume '%s' started: nbdstripe status "
            "%s shows its progress\n",
            p->index, j->cfg->name, j->volume);
}

static const struct jobctl_kind replace_job = {
  .name = "replace",
  .key = "replace",
  .cancel_op = "cancel",
  .unserved = "the volume is not served (%s); with the volume "
              "stopped: nbdstripe replace --offline",
  .unserved_cancel = "the volume is not served (%s)",
  .gone = " (%s): the volume assembles with the member its "
          "config names",
  .under_way = (const char *const[]){ "copying", "switching", NULL },
  .progress = replace_progress,
  .done_key = "bytes_copied",
  .eta = true,
  .started = replace_started,
  .conclude = conclude,
};

int
cmd_replace (const struct command *cmd, int argc, char **argv)
{
  struct replace_args ra = { 0 };
  struct replace_params *p = &ra.p;
  struct stripe_config cfg;
  struct outcome o = { 0 };
  struct jobctl j;
  bool loaded = false, started = false, waited = false;
  int64_t to_copy = -1; /* --dry-run: the bytes it would copy */
  char *abs = NULL;
  int status = 1;

  memset (&cfg, 0, sizeof cfg);
  if (!replace_options (cmd, argc, argv, &ra, &status))
    return status;
  status = 1;
  o.json = ra.json;
  o.lines = ra.json && (ra.wait || ra.off);
  if (o.json)
    jsonout_watch_stderr ();

  loaded = load_volume (ra.volume, &cfg, o.err, sizeof o.err) == 0;
  if (!loaded)
    goto out;
  jobctl_init (&j, &replace_job, &cfg, ra.volume, &o, p);

  if (ra.cancel) {
    status = jobctl_cancel (&j);
    goto out;
  }

  if (ra.idx >= cfg.nr_members) {
    outcome_fail (&o,
                  "%s: INDEX %lu: no such member (its members are 0 to %u)",
                  cfg.path, ra.idx, cfg.nr_members - 1);
    status = 2;
    goto out;
  }
  p->index = ra.idx;
  /* A config names members by absolute path (URIs as they are). */
  abs = member_is_uri (ra.new_arg) ? strdup (ra.new_arg)
                                   : realpath (ra.new_arg, NULL);
  if (abs == NULL) {
    outcome_fail (&o, "%s: %s", ra.new_arg, strerror (errno));
    goto out;
  }
  p->new_path = abs;
  p->config = cfg.path;
  if (check_new (&o, &cfg, p->index, p->new_path, p->force) == -1)
    goto out;
  p->force = true; /* checked here, with libblkid too */
  if (ra.dry_run) {
    uint64_t copy = 0;

    status = dry_run (&o, &cfg, p->index, p->new_path, &copy);
    if (status == 0)
      to_copy = (int64_t) copy;
    goto out;
  }

  if (ra.off) {
    waited = true;
    status = offline (&j, &cfg, ra.accept_stale);
    started = o.last != NULL;
    goto out;
  }
  j.wait = ra.wait;
  status = jobctl_start (&j, start_request (p));
  started = j.started;
  waited = j.waited;

out:
  if (o.json)
    replace_json (ra.volume, &cfg, loaded, ra.cancel,
                  ra.cancel ? -1 : (long) ra.idx, abs ? abs : ra.new_arg,
                  ra.off, ra.dry_run, to_copy, started, waited, status,
                  &o);
  json_object_put (o.last);
  free (abs);
  config_free (&cfg);
  return status;
}
