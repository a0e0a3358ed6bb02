/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe scrub: a patrol read of a served volume (include/scrub.h),
 * asked of its server through the control socket (control.h): every
 * member's data area read in the background while clients go on, what
 * cannot be read reported as the volume's logical byte ranges and per
 * member, and the member failing.  With --wait it is followed to its end
 * (the exit status says whether everything was read).
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "jobctl.h"
#include "json.h"
#include "jsonout.h"
#include "nbdstripe.h"
#include "scrub.h"

/* The end of a scrub, in words; 0 when all of it was read. */
static int
conclude (struct jobctl *j, struct json_object *s)
{
  struct outcome *o = j->o;
  const char *name = j->cfg->name;
  const char *state = json_str_or_null (s, "state");
  struct json_object *lost, *members;
  size_t nl = 0;
  bool skipped = false;

  outcome_keep (o, s);
  if ((lost = json_array_or_null (s, "unreadable")) != NULL)
    nl = json_object_array_length (lost);
  if ((members = json_array_or_null (s, "members")) != NULL)
    for (size_t i = 0; i < json_object_array_length (members); ++i)
      if (json_str_or_null (json_object_array_get_idx (members, i), "skipped"))
        skipped = true;
  if (state == NULL || strcmp (state, "done") != 0) {
    outcome_fail (o, "scrub of volume '%s' not done: %s", name,
                  json_str_or_null (s, "error") ? json_str_or_null (s, "error")
                  : state                       ? state
                                                : "unknown");
  }
  else if (nl > 0)
    outcome_fail (
      o,
      "scrub of volume '%s': %zu unreadable range%s (their data is "
      "lost unless rewritten; the members concerned are failing)",
      name, nl, nl == 1 ? "" : "s");
  else if (skipped)
    outcome_fail (
      o, "scrub of volume '%s': a member could not be read (below)", name);
  else if (!o->json)
    printf ("scrub of volume '%s': every member read, nothing unreadable\n",
            name);
  for (size_t i = 0; i < nl; ++i) {
    struct json_object *l = json_object_array_get_idx (lost, i);
    uint64_t off = (uint64_t) json_num_or_0 (l, "offset");
    uint64_t len = (uint64_t) json_num_or_0 (l, "length");
    fprintf (stderr, "  bytes %" PRIu64 "-%" PRIu64 " (%" PRIu64 ")\n", off,
             off + len - 1, len);
  }
  for (size_t i = 0; members && i < json_object_array_length (members); ++i) {
    struct json_object *m = json_object_array_get_idx (members, i), *r;
    if (json_str_or_null (m, "skipped"))
      fprintf (stderr, "  member %.0f (%s): %s\n", json_num_or_0 (m, "index"),
               json_str_or_null (m, "path") ? json_str_or_null (m, "path")
                                            : "?",
               json_str_or_null (m, "skipped"));
    if ((r = json_array_or_null (m, "unreadable")) != NULL)
      for (size_t k = 0; k < json_object_array_length (r); ++k) {
        struct json_object *l = json_object_array_get_idx (r, k);
        fprintf (
          stderr,
          "  member %.0f (%s): unreadable at member offset "
          "%.0f (%.0f bytes)\n",
          json_num_or_0 (m, "index"),
          json_str_or_null (m, "path") ? json_str_or_null (m, "path") : "?",
          json_num_or_0 (l, "member_offset"), json_num_or_0 (l, "length"));
      }
  }
  return o->err[0] ? 1 : 0;
}

/* scrub --json: the same keys whatever happened; those of a scrub null
 * with --cancel, cancelled null without.
 */
static void
scrub_json (const char *arg, const struct stripe_config *cfg, bool loaded,
            bool cancel, bool started, bool waited, int status,
            struct outcome *o)
{
  struct json_object *j = json_object_new_object (), *u;
  const char *state = o->last ? json_str_or_null (o->last, "state") : NULL;

  json_put (j, "config", json_text (loaded ? cfg->path : arg));
  json_put (j, "name", loaded ? json_text (cfg->name) : NULL);
  json_put (j, "cancelled",
            cancel ? json_object_new_boolean (status == 0) : NULL);
  json_put (j, "started", cancel ? NULL : json_object_new_boolean (started));
  /* null: not followed to its end (no --wait) */
  json_put (j, "finished",
            !cancel && waited ? json_object_new_boolean (
              state && strcmp (state, "running") != 0)
                              : NULL);
  json_put (j, "unreadable",
            cancel ? NULL
            : o->last && (u = json_array_or_null (o->last, "unreadable"))
              ? json_object_get (u)
              : json_object_new_array ());
  json_put (j, "scrub", !cancel && o->last ? json_object_get (o->last) : NULL);
  jsonout_result (j, status == 0, o->err, o->lines);
}

/* Without --wait: the scrub as it has just started (for --json), and
 * where to follow it.
 */
static void
scrub_started (struct jobctl *j, struct json_object *ans)
{
  (void) ans;
  if (j->wait)
    return;
  jobctl_peek (j);
  if (!j->o->json)
    printf ("scrub of volume '%s' started: nbdstripe status %s shows its "
            "progress\n",
            j->cfg->name, j->volume);
}

static const struct jobctl_kind scrub_job = {
  .name = "scrub",
  .key = "scrub",
  .cancel_op = "scrub_cancel",
  .unserved = "the volume is not served (%s): a scrub reads a served "
              "volume",
  .unserved_cancel = "the volume is not served (%s): a scrub reads a served "
                     "volume",
  .gone = " (%s)",
  .under_way = (const char *const[]){ "running", NULL },
  .progress = scrub_progress,
  .done_key = "bytes_done",
  .started = scrub_started,
  .conclude = conclude,
};

int
cmd_scrub (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "rate", required_argument, NULL, 'r' },
    { "wait", no_argument, NULL, 'w' },
    { "cancel", no_argument, NULL, 'c' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct outcome o = { 0 };
  struct jobctl j = { 0 };
  bool wait = false, cancel = false, loaded = false;
  const char *copy_opt = NULL;
  uint64_t rate = SCRUB_DEFAULT_RATE;
  struct json_object *req;
  int c, status = 1;

  memset (&cfg, 0, sizeof cfg);
  while ((c = getopt_long (argc, argv, "wjhV", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      if (config_parse_size (optarg, &rate) == -1 || rate == 0)
        return cli_usage_error (cmd,
                                "--rate '%s': expected a size such as 200M "
                                "(bytes a second)",
                                optarg);
      copy_opt = "--rate";
      break;
    case 'w':
      wait = true;
      copy_opt = "--wait";
      break;
    case 'c': cancel = true; break;
    case 'j': o.json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if (cancel && copy_opt)
    return cli_usage_error (cmd,
                            "--cancel and %s: --cancel takes only "
                            "VOLUME (and --json)",
                            copy_opt);
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;
  o.lines = o.json && wait;
  if (o.json)
    jsonout_watch_stderr ();

  loaded = load_volume (argv[optind], &cfg, o.err, sizeof o.err) == 0;
  if (!loaded)
    goto out;
  jobctl_init (&j, &scrub_job, &cfg, argv[optind], &o, NULL);
  j.wait = wait;

  if (cancel) {
    status = jobctl_cancel (&j);
    goto out;
  }
  req = json_object_new_object ();
  json_put (req, "op", json_text ("scrub"));
  json_put (req, "rate", json_u64 (rate));
  status = jobctl_start (&j, req);

out:
  if (o.json)
    scrub_json (argv[optind], &cfg, loaded, cancel, j.started, j.waited,
                status, &o);
  json_object_put (o.last);
  config_free (&cfg);
  return status;
}
