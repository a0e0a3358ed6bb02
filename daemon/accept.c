/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe accept: take back a member that is behind the volume's
 * generation, on the operator's word.
 *
 * A member that dropped out while the volume was served stays at the
 * generation it had; the others move on (volume.h).  At the next
 * assembly it is refused as stale, since an older copy of a member looks
 * exactly the same.  When the operator knows it is the member itself and
 * that nothing wrote to it since (a disk that went away and came back
 * after the server stopped), `accept` writes the volume's generation into
 * its header.  Everything else assemble() checks must hold, the volume
 * must not be served (every member is claimed, exclusively, while the
 * header is written), and nothing but that member's header is written.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "json.h"
#include "jsonout.h"
#include "log.h"
#include "nbdstripe.h"
#include "member.h"
#include "meta.h"

/* accept --json: what was done (null: nothing). */
static void
accept_json (const char *arg, const struct stripe_config *cfg, bool loaded,
             const char *err, long idx, bool ok, bool written, uint64_t before,
             uint64_t after)
{
  struct json_object *o = json_object_new_object ();

  json_put (o, "config", json_text (loaded ? cfg->path : arg));
  json_put (o, "member", idx >= 0 ? json_object_new_int64 (idx) : NULL);
  json_put (o, "accepted", json_object_new_boolean (ok));
  json_put (o, "path", ok ? json_text (cfg->members[idx]) : NULL);
  json_put (o, "header_written",
            ok ? json_object_new_boolean (written) : NULL);
  json_put (o, "generation_before", ok ? json_u64 (before) : NULL);
  json_put (o, "generation", ok ? json_u64 (after) : NULL);
  jsonout_result (o, ok, err, false);
}

int
cmd_accept (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct assembly a = { 0 };
  struct meta meta;
  bool meta_set = false;
  const struct meta_ops *ops;
  struct member d[LAYOUT_MAX_MEMBERS];
  const struct member_open_params params = { .raw = true };
  unsigned n = 0, opened = 0;
  uint64_t events = 0, generation = 0;
  unsigned long idx;
  char *end, why[512], err[1024] = "";
  const char *index;
  bool json = false, loaded, written = false;
  int c, status = 1;

  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 2, 2, "VOLUME and INDEX")) != 0)
    return c;
  index = argv[optind + 1];
  errno = 0;
  idx = strtoul (index, &end, 10);
  if (errno || end == index || *end || idx >= LAYOUT_MAX_MEMBERS
      || index[0] < '0' || index[0] > '9') {
    return cli_usage_error (cmd,
                            "INDEX '%s': expected a member index (0, "
                            "1, ...)",
                            index);
  }
  if (json)
    jsonout_watch_stderr ();

  loaded = load_volume (argv[optind], &cfg, err, sizeof err) == 0;
  if (!loaded)
    goto out;
  n = cfg.nr_members;
  ops = meta_ops_for (cfg.metadata);
  if (!ops->records_dropouts) {
    fprintf (stderr,
             "nbdstripe: %s: metadata = \"%s\": no nbdstripe generation to "
             "accept%s%s%s\n",
             cfg.path, ops->name, ops->dropouts_why[0] ? " (" : "",
             ops->dropouts_why, ops->dropouts_why[0] ? ")" : "");
    goto out;
  }
  if (idx >= n) {
    fprintf (stderr, "nbdstripe: %s: no member %lu (%u member%s)\n", cfg.path,
             idx, n, n == 1 ? "" : "s");
    goto out;
  }

  /* Nobody serves it while we write: claim every member first. */
  for (unsigned i = 0; i < n; ++i) {
    if (member_open (&d[i], i, cfg.members[i], &params, why, sizeof why)
        == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, cfg.members[i],
               why);
      goto out;
    }
    opened = i + 1;
    if (member_claim (&d[i], why, sizeof why) == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, cfg.members[i],
               why);
      goto out;
    }
  }
  if (assemble_accepting (&cfg, &a, idx, &events) == -1)
    goto out;
  generation = a.events;
  if (events >= a.events) {
    if (!json)
      printf ("%s: member %lu (%s) is at generation %" PRIu64 ", as the "
              "volume: nothing to accept\n",
              cfg.path, idx, cfg.members[idx], events);
    generation = events;
    status = 0;
    goto out;
  }

  if (meta_init (&meta, &a, n, true) == -1) {
    perror ("nbdstripe: malloc");
    goto out;
  }
  meta_set = true;
  if (meta_write_generation (&meta, idx, &d[idx], a.events, why, sizeof why)
      == -1) {
    fprintf (stderr, "nbdstripe: member %lu (%s): writing its header: %s\n",
             idx, cfg.members[idx], why);
    goto out;
  }
  written = true;
  if (!json)
    printf ("%s: member %lu (%s) taken back: generation %" PRIu64
            " -> %" PRIu64 "\n",
            cfg.path, idx, cfg.members[idx], events, a.events);
  status = 0;

out:
  if (json)
    accept_json (argv[optind], &cfg, loaded, err, (long) idx, status == 0,
                 written, events, generation);
  if (meta_set)
    meta_free (&meta);
  assembly_free (&a);
  for (unsigned i = opened; i-- > 0;)
    member_close (&d[i]);
  config_free (&cfg);
  return status;
}
