/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe list: every volume configured in the config directory and
 * every volume served on this host (served.c finds them), with its state
 * as `status` would judge it, its server and where it listens.  Reads
 * only.
 */

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "jsonout.h"
#include "nbdstripe.h"

static struct json_object *
entry_json (const struct served *e)
{
  struct json_object *o = json_object_new_object ();

  json_put (o, "name", json_text (e->name));
  json_put (o, "config", json_text (e->config));
  json_put (o, "configured", json_object_new_boolean (e->configured));
  json_put (o, "state", json_text (seen_state_name (e->seen.state)));
  json_put (o, "reason",
            e->seen.reason[0] ? json_text (e->seen.reason) : NULL);
  json_put (o, "pid", e->pid ? json_object_new_int64 (e->pid) : NULL);
  json_put (o, "listen", json_text (e->listen));
  json_put (o, "status_file", json_text (e->status_file));
  return o;
}

/* Strings from status files are untrusted: escaped for the terminal. */
static const char *
shown (const char *s, char *buf, size_t len)
{
  return s ? safe_text (s, strlen (s), buf, len) : "-";
}

int
cmd_list (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct served *v;
  size_t n;
  bool json = false;
  int c, r;

  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 0, 0, "")) != 0)
    return c;

  /* A directory that cannot be read is said on stderr; --json's
   * "error" is that line.
   */
  if (json)
    jsonout_watch_stderr ();
  r = served_list (&v, &n);
  if (json) {
    struct json_object *o = json_object_new_object ();
    struct json_object *a = json_object_new_array ();
    for (size_t i = 0; i < n; ++i)
      json_object_array_add (a, entry_json (&v[i]));
    json_put (o, "volumes", a);
    jsonout_result (o, r == 0, NULL, false);
  }
  else if (n == 0)
    printf ("no volume configured in %s or served here\n", conf_dir ());
  else {
    printf ("%-16s %-12s %8s  %-32s %s\n", "NAME", "STATE", "PID", "LISTEN",
            "CONFIG");
    for (size_t i = 0; i < n; ++i) {
      const struct served *e = &v[i];
      char name[256], listen[1024], config[1024], pid[32], why[1024];

      snprintf (pid, sizeof pid, e->pid ? "%ld" : "-", e->pid);
      printf ("%-16s %-12s %8s  %-32s %s\n",
              shown (e->name, name, sizeof name),
              seen_state_name (e->seen.state), pid,
              shown (e->listen, listen, sizeof listen),
              shown (e->config, config, sizeof config));
      if ((e->seen.state == SEEN_UNKNOWN || e->seen.state == SEEN_STALE)
          && e->seen.reason[0])
        printf ("%16s   %s\n", "", shown (e->seen.reason, why, sizeof why));
    }
  }
  served_free (v, n);
  return r == 0 ? 0 : 1;
}
