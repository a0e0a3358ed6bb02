/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe status: the health of a served volume, asked live of its
 * server through the control socket (control.h) when it answers, else
 * read from the status file the plugin keeps (the same JSON; its format
 * is the big comment at the top of include/health.h).  A table for
 * people, as mdadm --detail prints, or (--json) one object: the verdict
 * and its reason, and the status itself under "status".  The exit status
 * is the monitoring plugins' convention: 0 ok, 1 degraded, 2 failed, 3
 * unknown -- the file is missing, not JSON, of another format, or
 * written by a server that is no longer running (not-running) or
 * updating it (stale).
 *
 * The file is untrusted input: any field may be missing, of another type,
 * huge or negative; it is then shown as "?" (null latencies, which the
 * format allows, as "-").  Strings go to the terminal escaped.  No double
 * is converted to an integer type without a range check first.
 *
 * The command is here; the files status_*.c share the rest (status.h).
 */

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include <json-c/json.h>

#include "control.h"
#include "json.h"
#include "jsonout.h"
#include "nbdstripe.h"
#include "status.h"
#include "util.h"

/* status --json: one shape whatever there is to say.  state and reason
 * are the verdict (the exit status's: ok is whether it is 0, error the
 * reason it is not); status the server's document, as the control socket
 * gave it or the file holds it, or null.  name and status_file are null
 * when the config does not load.
 */
static void
print_status_json (const char *config, const char *name,
                   const char *status_file, const struct view *w)
{
  struct json_object *o = json_object_new_object ();

  json_put (o, "state", json_text (seen_state_name (w->state)));
  json_put (o, "reason", w->reason[0] ? json_text (w->reason) : NULL);
  json_put (o, "name", json_text (name));
  json_put (o, "config", json_text (config));
  json_put (o, "status_file", json_text (status_file));
  json_put (o, "source",
            !w->st           ? NULL
            : w->from_socket ? json_text ("control_socket")
                             : json_text ("status_file"));
  json_put (o, "status", json_object_get (w->st));
  jsonout_result (o, w->v == 0,
                  w->reason[0] ? w->reason : seen_state_name (w->state),
                  false);
}

int
cmd_status (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct view w = { .state = SEEN_UNKNOWN, .v = V_UNKNOWN };
  char hs[32], err[1024], ctl[4096];
  bool json = false;
  double now = now_unix ();
  int c;

  /* Usage errors exit 3 (unknown), not 2: to a monitoring script 2
   * means the volume has failed (cmd->usage_status).
   */
  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;

  if (load_volume (argv[optind], &cfg, err, sizeof err) == -1) {
    if (json) {
      snprintf (w.reason, sizeof w.reason, "%s", err);
      print_status_json (argv[optind], NULL, NULL, &w);
    }
    config_free (&cfg);
    return V_UNKNOWN;
  }

  /* Live from the server when it answers, else its last status file. */
  control_path (cfg.health.status_file, ctl, sizeof ctl);
  if (!judge_live (ctl, cfg.name, cfg.health.set.interval, now, true, &w))
    judge (cfg.health.status_file, cfg.name, cfg.health.set.interval, now,
           true, &w);

  if (json) {
    print_status_json (cfg.path, cfg.name, cfg.health.status_file, &w);
    goto out;
  }

  /* Ages are shown from after the answer: the server dates a live
   * status when it answers, after the "now" taken above, which would
   * show as "0.0 s in the future".
   */
  now = now_unix ();
  printf ("%s:\n", cfg.path);
  if (w.format_ok) {
    print_volume (&w, &cfg, now, w.from_socket ? ctl : NULL);
    print_members (w.st);
    print_spares (w.st);
    print_drives (w.st);
    print_last_errors (w.st, now);
  }
  else {
    printf ("%15s : %s\n", "Volume", cfg.name);
    printf ("%15s : %s (no status: see the message above)\n", "State",
            seen_state_name (w.state));
    printf ("%15s : %s\n", "Status file", cfg.health.status_file);
  }
  printf ("\nStripe geometry for mkfs (chunk %s, %u member%s):\n",
          exact_size (cfg.chunk, hs, sizeof hs), cfg.nr_members,
          cfg.nr_members == 1 ? "" : "s");
  print_mkfs_geometry (cfg.chunk, cfg.nr_members);

out:
  view_free (&w);
  config_free (&cfg);
  return w.v;
}
