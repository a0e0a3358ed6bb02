/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe check: assemble and check a volume (serve.c starts with
 * the same check).  Members that are NBD URIs are checked as files are:
 * their servers must answer, with headers that agree (assemble.c) and
 * sizes large enough.
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "array.h"
#include "json.h"
#include "jsonout.h"
#include "log.h"
#include "nbdstripe.h"
#include "volume.h"

int
check_volume (const struct stripe_config *cfg, bool claim, bool degraded,
              uint64_t *size, char uuid[37])
{
  struct array *a;
  /* Read-only: checking must never write.  Raw: one plain connection to
   * each remote member, no threads.  With claim (serve), members are
   * locked (shared) while they are checked, so that a volume already
   * served is refused now, naming its server.
   */
  const struct volume_options o = {
    .readonly = true,
    .claim = claim,
    .raw = true,
  };
  const struct array_options ao = { .volume = o,
                                    .cfg = cfg,
                                    .degraded = degraded };
  int r;

  uuid[0] = '\0';
  a = malloc (sizeof *a);
  if (a == NULL) {
    perror ("nbdstripe: malloc");
    return -1;
  }
  r = array_open (a, &ao);
  if (r == 0) {
    *size = a->volume.layout.size;
    meta_uuid_shown (&a->volume.meta, uuid);
  }
  array_close (a);
  free (a);
  return r;
}

/* Filesystems that know the stripe avoid read-modify-write across
 * members.  Zone 0 (all members) is where nearly all data lives, so the
 * geometry is the config's: chunk and member count.
 */
void
mkfs_geometry (uint64_t chunk, unsigned nr_members, char *ext4, size_t ext4len,
               char *xfs, size_t xfslen)
{
  snprintf (ext4, ext4len,
            "-b 4096 -E stride=%" PRIu64 ",stripe_width=%" PRIu64,
            chunk / 4096, chunk / 4096 * nr_members);
  snprintf (xfs, xfslen, "-d su=%" PRIu64 "k,sw=%u", chunk / 1024, nr_members);
}

void
print_mkfs_geometry (uint64_t chunk, unsigned nr_members)
{
  char ext4[128], xfs[128];

  mkfs_geometry (chunk, nr_members, ext4, sizeof ext4, xfs, sizeof xfs);
  printf ("  mkfs.ext4 %s\n  mkfs.xfs %s\n", ext4, xfs);
}

static const char *
metadata_name (enum metadata_mode m)
{
  return meta_ops_for (m)->name;
}

/* check --json: the verdict, and what check prints for people (null
 * when the config could not be read).
 */
static void
check_json (const char *arg, const struct stripe_config *cfg, bool loaded,
            const char *err, bool ok, uint64_t size, const char *uuid)
{
  struct json_object *o = json_object_new_object ();
  struct json_object *w = json_object_new_array (), *m = NULL;
  char ext4[128], xfs[128];

  json_put (o, "config", json_text (loaded ? cfg->path : arg));
  json_put (o, "can_serve", json_object_new_boolean (ok));
  json_put (o, "name", loaded ? json_text (cfg->name) : NULL);
  json_put (o, "metadata",
            loaded ? json_text (metadata_name (cfg->metadata)) : NULL);
  json_put (o, "uuid", ok && uuid[0] ? json_text (uuid) : NULL);
  json_put (o, "members",
            loaded ? json_object_new_int64 (cfg->nr_members) : NULL);
  json_put (o, "chunk", loaded ? json_u64 (cfg->chunk) : NULL);
  json_put (o, "size", ok ? json_u64 (size) : NULL);
  for (unsigned i = 0; loaded && i < cfg->nr_warnings; ++i)
    json_object_array_add (w, json_text (cfg->warnings[i]));
  json_put (o, "warnings", w);
  if (loaded) {
    mkfs_geometry (cfg->chunk, cfg->nr_members, ext4, sizeof ext4, xfs,
                   sizeof xfs);
    m = json_object_new_object ();
    json_put (m, "ext4", json_text (ext4));
    json_put (m, "xfs", json_text (xfs));
  }
  json_put (o, "mkfs", m);
  jsonout_result (o, ok, err, false);
}

int
cmd_check (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  uint64_t size = 0;
  char uuid[37] = "", hs[32], err[1024] = "";
  bool json = false, loaded;
  int c, r;

  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((r = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return r;
  if (json)
    jsonout_watch_stderr ();

  loaded = load_volume (argv[optind], &cfg, err, sizeof err) == 0;
  r = -1;
  if (loaded) {
    print_config_warnings (&cfg);
    r = check_volume (&cfg, false, false, &size, uuid);
  }
  if (json)
    check_json (argv[optind], &cfg, loaded, err, r == 0, size, uuid);
  else if (r == 0) {
    printf ("%s: volume '%s'%s%s%s: %u member%s, chunk %" PRIu64 ", %s "
            "(%" PRIu64 " bytes): can be served\n",
            cfg.path, cfg.name, uuid[0] ? " (" : "", uuid, uuid[0] ? ")" : "",
            cfg.nr_members, cfg.nr_members == 1 ? "" : "s", cfg.chunk,
            human_size (size, hs, sizeof hs), size);
    print_mkfs_geometry (cfg.chunk, cfg.nr_members);
  }
  config_free (&cfg);
  return r == 0 ? 0 : 1;
}
