/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe grow, nbdstripe shrink: restripe a volume onto more members,
 * bigger ones, or one fewer (include/reshape.h).  A served volume is asked
 * through its control socket; --offline opens it here and moves the data
 * itself.  --dry-run says what would be done (the size a shrink leaves),
 * served or not.
 * With VOLUME alone, the reshape under way (paused, or continued by a
 * restart) goes on and is followed; --cancel pauses it.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array.h"
#include "assemble.h"
#include "jobctl.h"
#include "json.h"
#include "jsonout.h"
#include "member.h"
#include "mover.h"
#include "nbdstripe.h"
#include "reshape.h"
#include "volume.h"

struct run {
  const struct command *cmd;
  struct reshape_params p;
  bool wait, off;
  bool offline; /* the job runs here, not in a server (offline ()) */
  bool cont, cancel; /* VOLUME alone: go on; --cancel: pause */
  struct stripe_config cfg;
  struct json_object *plan; /* what it does */
  struct outcome o;         /* its last state, its error (quiet) */
  struct jobctl job;
};

/* What the plan says, for people.  The server's answers are read with
 * json.h's lenient getters, as untrusted as any.
 */
static void
show_plan (struct run *r)
{
  char a[32], b[32], m[32], fb[32], f[96] = "";
  uint64_t from = json_u64_or_0 (r->plan, "size_from"),
           to = json_u64_or_0 (r->plan, "size_to");

  if (r->o.json || r->plan == NULL)
    return;
  if (json_u64_or_0 (r->plan, "bytes_free") > 0)
    snprintf (f, sizeof f, " (%s free in the allocation map: not copied)",
              human_size (json_u64_or_0 (r->plan, "bytes_free"), fb,
                          sizeof fb));
  printf ("%s %s '%s': %s -> %s (%" PRIu64 " -> %" PRIu64 " bytes), %s to "
          "move%s\n",
          r->p.dry_run ? "would" : "started:", r->cmd->name, r->cfg.name,
          human_size (from, a, sizeof a), human_size (to, b, sizeof b), from,
          to,
          human_size (json_u64_or_0 (r->plan, "bytes_to_move"), m, sizeof m),
          f);
  /* Not served (the plan made here, offline): the command to run is
   * the offline one.
   */
  if (r->p.kind == RESHAPE_SHRINK && r->p.dry_run)
    printf ("shrink the file system to at most %" PRIu64 " bytes and fstrim "
            "it, then: nbdstripe shrink %s %u --size %" PRIu64 "%s\n",
            to, r->cfg.path, r->p.index, to,
            r->offline ? " --offline" : "");
  if (r->p.kind != RESHAPE_SHRINK && !r->p.dry_run)
    printf ("clients see the new size when they connect again (NBD has no "
            "resize notice): nbd-client -d, attach again, resize2fs\n");
}

/* The end of a grow or shrink (its state ended), in words; 0 when done. */
static int
conclude (struct jobctl *j, struct json_object *st)
{
  struct run *r = j->cmd;
  const char *state = json_str_or_null (st, "state");
  const char *kind = json_str_or_null (st, "kind")
                       ? json_str_or_null (st, "kind")
                       : j->kind->name;

  if (strcmp (state, "done") == 0) {
    if (!r->o.json)
      printf ("%s of '%s' done: %" PRIu64 " bytes\n", kind, r->cfg.name,
              json_u64_or_0 (st, "size_to"));
    return 0;
  }
  /* "paused": the error says why and how to go on. */
  outcome_fail (&r->o, "%s %s: %s", kind, state,
                json_str_or_null (st, "error") ? json_str_or_null (st, "error")
                                               : "");
  return 1;
}

static int
offline (struct run *r)
{
  /* A dry run too: the volume opened writable (a read-only one takes no
   * job), but reshape_start writes nothing before its plan is made.
   */
  const struct array_options ao = {
    .volume = { .claim = true, .uring = true },
    .cfg = &r->cfg,
    .config_file = r->cfg.path,
  };
  struct array *ar = calloc (1, sizeof *ar);
  struct volume *v = ar ? &ar->volume : NULL;
  const struct assembly *a = ar ? &ar->assembly : NULL;
  char why[1024];
  int status = 1;

  r->offline = true;
  if (ar == NULL) {
    outcome_fail (&r->o, "%s", strerror (ENOMEM));
    return 1;
  }
  if (array_open (ar, &ao) == -1) {
    outcome_fail (&r->o, "%s: the volume cannot be opened (served already? then "
               "leave out --offline)",
               r->cfg.path);
    goto out;
  }
  if (volume_start (v) == -1) {
    outcome_fail (&r->o, "%s: cannot start the members: %s", r->cfg.path,
                  strerror (errno));
    goto close;
  }
  if (a->reshape.active && !r->cont) {
    outcome_fail (&r->o, "%s: a grow or shrink is under way on the members: "
               "'nbdstripe %s --offline %s' (VOLUME alone) goes on with it",
               r->cmd->name, r->cmd->name, r->cfg.path);
    goto close;
  }
  if (!a->reshape.active && r->cont) {
    if (!r->o.json)
      printf ("no grow or shrink is under way on volume '%s'\n",
              r->cfg.name);
    status = 0;
    goto close;
  }
  if (a->reshape.active) {
    if (reshape_resume (v, a, r->cfg.path, why, sizeof why) == -1) {
      outcome_fail (&r->o, "%s: %s", r->cmd->name, why);
      goto close;
    }
  }
  else if (reshape_start (v, &r->p, &r->plan, why, sizeof why) == -1) {
    outcome_fail (&r->o, "%s: %s", r->cmd->name, why);
    goto close;
  }
  show_plan (r);
  if (r->p.dry_run)
    status = 0;
  else {
    r->job.local = v;
    status = jobctl_follow (&r->job);
    mover_wait (v);
  }
close:
out:
  array_close (ar);
  free (ar);
  return status;
}

/* The server took the start: its plan, said. */
static void
reshape_started (struct jobctl *j, struct json_object *ans)
{
  struct run *r = j->cmd;

  if (json_get_object (ans, "plan", &r->plan, NULL, 0) == 0)
    json_object_get (r->plan);
  show_plan (r);
}

/* The server took --cancel: the running reshape stops at the end of its
 * window; its pause is waited for, and said with the way on.
 */
static int
reshape_cancelled (struct jobctl *j)
{
  struct run *r = j->cmd;
  struct json_object *st;
  char pb[512], why[1024];
  const char *state;

  for (;;) {
    if (jobctl_status (j, 0, &st, why, sizeof why) == -1) {
      outcome_fail (&r->o,
                    "the server went away: served again, the %s goes on",
                    j->kind->name);
      return 1;
    }
    outcome_keep (&r->o, st);
    json_object_put (st);
    state = json_str_or_null (r->o.last, "state");
    if (state == NULL || strcmp (state, "copying") != 0)
      break;
    usleep (20000);
  }
  if (state && strcmp (state, "paused") == 0) {
    if (!r->o.json)
      printf ("volume '%s': %s\n", r->cfg.name,
              replace_progress (r->o.last, pb, sizeof pb));
    return 0;
  }
  outcome_fail (&r->o, "%s --cancel: too late: %s", j->kind->name,
                replace_progress (r->o.last, pb, sizeof pb));
  return 1;
}

/* Grow and shrink are one job to the server ("reshape"), told apart by
 * the command's name in what is said.  The progress is replace's line.
 */
#define RESHAPE_JOB(NAME)                                                     \
  {                                                                           \
    .name = NAME, .key = "reshape", .absent_empty = true,                     \
    .cancel_op = "cancel", .cancel_job = "reshape",                           \
    .unserved = "the volume is not served (%s); with the volume stopped: "    \
                "nbdstripe " NAME " --offline",                               \
    .unserved_cancel = "the volume is not served: %s",                        \
    .gone = ": it goes on when the volume is served again",                   \
    .under_way = (const char *const[]){ "copying", "switching", NULL },       \
    .progress = replace_progress, .done_key = "bytes_copied", .eta = true,    \
    .started = reshape_started, .conclude = conclude,                         \
    .cancelled = reshape_cancelled,                                           \
  }
static const struct jobctl_kind grow_job = RESHAPE_JOB ("grow");
static const struct jobctl_kind shrink_job = RESHAPE_JOB ("shrink");

/* Whether the volume's server answers (or a socket not to be trusted is
 * there: no sign it is not served, and served() says what is wrong).
 * A dry run needs no server -- the members' headers and the config say
 * what it would do -- so a volume that is not served is opened here.
 */
static bool
answers (struct run *r)
{
  struct json_object *st;
  char why[1024];

  if (jobctl_status (&r->job, 0, &st, why, sizeof why) == 0) {
    json_object_put (st);
    return true;
  }
  return errno == EPERM;
}

static int
served (struct run *r)
{
  struct json_object *req = json_object_new_object (), *arr;
  const char *kind = r->p.kind == RESHAPE_GROW     ? "grow"
                     : r->p.kind == RESHAPE_SHRINK ? "shrink"
                                                   : "size";

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
  r->job.wait = r->wait && !r->p.dry_run;
  return jobctl_start (&r->job, req);
}

/* VOLUME alone: the reshape under way goes on (paused) or is followed
 * (running).  None under way: nothing to wait for (exit 0), or, without
 * --wait, nothing to continue (an error: the devices were forgotten?).
 */
static int
served_continue (struct run *r)
{
  struct json_object *req = json_object_new_object (), *ans, *st;
  bool none, running;
  char pb[512], why[1024];

  json_put (req, "op", json_text ("reshape"));
  json_put (req, "kind", json_text ("continue"));
  if (r->p.rate)
    json_put (req, "rate", json_u64 (r->p.rate));
  ans = jobctl_ask (&r->job, req, r->cmd->name,
                    "the volume is not served (served again, a reshape "
                    "under way goes on; or --offline): %s");
  if (ans == NULL)
    return 1;
  none = json_get_bool (ans, "none", &none, NULL, 0) == 0 && none;
  running = json_get_bool (ans, "running", &running, NULL, 0) == 0 && running;
  json_object_put (ans);
  jobctl_status (&r->job, 0, &st, why, sizeof why);
  outcome_keep (&r->o, st);
  json_object_put (st);
  st = r->o.last;
  if (none) {
    if (r->wait) {
      if (!r->o.json)
        printf ("no grow or shrink is under way on volume '%s'\n",
                r->cfg.name);
      return 0;
    }
    outcome_fail (&r->o,
                  "%s: nothing to continue: no grow or shrink is "
                  "under way on volume '%s' (to grow it, name the devices "
                  "to add)",
                  r->cmd->name, r->cfg.name);
    return 1;
  }
  if (!r->o.json && st && json_str_or_null (st, "kind"))
    printf ("volume '%s' (%s): %s\n", r->cfg.name,
            running ? "under way" : "going on",
            replace_progress (st, pb, sizeof pb));
  if (!r->wait)
    return 0;
  return jobctl_follow (&r->job);
}

/* The operands after VOLUME: grow's devices (absolute paths, URIs as
 * they are), or shrink's INDEX.
 */
static int
operands (struct run *r, int argc, char **argv, char **abs)
{
  int first = optind + 1;

  if (r->cont || r->cancel)
    return 0;
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
      outcome_fail (&r->o, "%s: %s", argv[k], strerror (errno));
      return 1;
    }
    r->p.nr_new = k - first + 1;
  }
  r->p.new_paths = (const char *const *) abs;
  return 0;
}

/* grow and shrink --json: the same keys whatever happened; continued
 * and cancelled null unless VOLUME alone or --cancel.
 */
static void
result_json (struct run *r, const char *arg, bool loaded, int status)
{
  struct json_object *j = json_object_new_object ();

  json_put (j, "config", json_text (loaded ? r->cfg.path : arg));
  json_put (j, "name", loaded ? json_text (r->cfg.name) : NULL);
  json_put (j, "dry_run", json_object_new_boolean (r->p.dry_run));
  json_put (j, "plan", r->plan ? json_object_get (r->plan) : NULL);
  json_put (j, "reshape", r->o.last ? json_object_get (r->o.last) : NULL);
  json_put (j, "continued",
            r->cont ? json_object_new_boolean (status == 0) : NULL);
  json_put (j, "cancelled",
            r->cancel ? json_object_new_boolean (status == 0) : NULL);
  jsonout_result (j, status == 0, r->o.err, r->o.lines);
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
    { "cancel", no_argument, NULL, 'c' },
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct run r = { .cmd = cmd, .p = { .kind = kind }, .o = { .quiet = true } };
  char *abs[LAYOUT_MAX_MEMBERS] = { NULL };
  const char *size = NULL, *other = NULL; /* an option --cancel excludes */
  bool loaded = false;
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "fwjnhV", opts, NULL)) != -1) {
    switch (c) {
    case 'r':
      if (config_parse_size (optarg, &r.p.rate) == -1 || r.p.rate == 0)
        return cli_usage_error (cmd, "--rate '%s': expected a size such as "
                                "200M (bytes a second)",
                                optarg);
      other = "--rate";
      break;
    case 's': size = optarg; other = "--size"; break;
    case 'w': r.wait = true; other = "--wait"; break;
    case 'f': r.p.force = true; other = "--force"; break;
    case 'O': r.off = true; other = "--offline"; break;
    case 'n': r.p.dry_run = true; other = "--dry-run"; break;
    case 'c': r.cancel = true; break;
    case 'j': r.o.json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if (r.cancel) {
    if (other)
      return cli_usage_error (cmd, "--cancel and %s: --cancel takes only "
                              "VOLUME (and --json)",
                              other);
    c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME");
  }
  else if (argc - optind == 1 && !(kind == RESHAPE_GROW && size)) {
    /* VOLUME alone: go on with the reshape under way. */
    r.cont = true;
    if (size || r.p.force || r.p.dry_run)
      return cli_usage_error (cmd, "%s with VOLUME alone (going on with "
                              "the grow or shrink under way): it takes "
                              "--wait, --rate, --offline, --json",
                              size ? "--size" : r.p.force ? "--force"
                                                          : "--dry-run");
    c = 0;
  }
  else if (kind == RESHAPE_GROW && size) {
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
  r.o.lines = r.o.json && (r.wait || r.off) && !r.p.dry_run;
  if (r.o.json)
    jsonout_watch_stderr ();
  if ((c = operands (&r, argc, argv, abs)) != 0) {
    status = c;
    goto out;
  }

  loaded = load_volume (argv[optind], &r.cfg, r.o.err, sizeof r.o.err) == 0;
  if (!loaded)
    goto out;
  r.p.config = r.cfg.path;
  jobctl_init (&r.job, kind == RESHAPE_SHRINK ? &shrink_job : &grow_job,
               &r.cfg, argv[optind], &r.o, &r);
  status = r.off                          ? offline (&r)
           : r.cancel                     ? jobctl_cancel (&r.job)
           : r.cont                       ? served_continue (&r)
           : r.p.dry_run && !answers (&r) ? offline (&r)
                                          : served (&r);

out:
  if (r.o.json)
    result_json (&r, argv[optind], loaded, status);
  json_object_put (r.plan);
  json_object_put (r.o.last);
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
