/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe inspect: print members' headers -- nbdstripe headers or md
 * v1.x superblocks -- for people or (--json) scripts.  A member is a path
 * or an NBD URI (opened raw).  Reads only.
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "assemble.h"
#include "nbdstripe.h"
#include "json.h"
#include "jsonout.h"
#include "layout.h"
#include "md_super.h"
#include "member.h"
#include "header.h"
#include "meta.h"

static const char *
iso_time (uint64_t t, char *buf, size_t len)
{
  time_t tt = t;
  struct tm tm;

  if (gmtime_r (&tt, &tm) == NULL
      || strftime (buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf (buf, len, "?");
  return buf;
}

/* An md superblock, for people and for --json. */
static void
show_md (const char *path, const struct md_super *sb, uint64_t at,
         struct json_object *o)
{
  char su[36], du[36], when[32], layout[96], roles[64 + 1];
  char nm[MD_SUPER_NAME_SHOWN]; /* from the disk: shown escaped */
  unsigned role = md_super_role (sb), lay = md_super_raid0_layout (sb);
  char why[256];
  bool servable = md_super_raid0_servable (sb, why, sizeof why);

  md_super_uuid_format (sb->set_uuid, su);
  md_super_uuid_format (sb->device_uuid, du);
  iso_time (md_super_seconds (sb->ctime), when, sizeof when);
  if (lay)
    snprintf (layout, sizeof layout, "%s (%u)", layout_name (lay), lay);
  else
    snprintf (layout, sizeof layout,
              "not recorded (feature 0x1000 clear; the field holds %" PRIu32
              ")",
              sb->layout);
  for (unsigned k = 0; k < sb->raid_disks && k < 64; ++k) {
    unsigned seen = 0;
    for (unsigned d = 0; d < sb->max_dev; ++d)
      if (sb->dev_roles[d] == k)
        seen++;
    roles[k] = seen == 1 ? 'A' : seen == 0 ? '.' : '?';
    roles[k + 1] = '\0';
  }
  if (sb->raid_disks == 0)
    roles[0] = '\0';
  if (o) {
    json_put (o, "kind", json_text ("md"));
    json_put (o, "md_version", json_object_new_int64 (sb->minor));
    json_put (o, "superblock_offset", json_u64 (at));
    json_put (o, "array_uuid", json_text (su));
    json_put (o, "device_uuid", json_text (du));
    json_put (o, "name", json_text (sb->set_name));
    json_put (o, "ctime", json_u64 (md_super_seconds (sb->ctime)));
    json_put (o, "ctime_iso", json_text (when));
    json_put (o, "level", json_object_new_int64 (sb->level));
    json_put (o, "raid_disks", json_object_new_int64 (sb->raid_disks));
    json_put (o, "role", json_object_new_int64 (role));
    json_put (o, "chunk", json_u64 ((uint64_t) sb->chunk_sectors * 512));
    json_put (o, "layout", json_object_new_int64 (lay));
    json_put (o, "feature_map", json_object_new_int64 (sb->feature_map));
    json_put (o, "data_offset", json_u64 (sb->data_offset * 512));
    json_put (o, "data_size", json_u64 (sb->data_size * 512));
    json_put (o, "events", json_u64 (sb->events));
    json_put (o, "servable", json_object_new_boolean (servable));
    if (!servable)
      json_put (o, "not_servable_because", json_text (why));
    return;
  }
  printf ("%s:\n"
          "  md array:     %s\n"
          "  array UUID:   %s\n"
          "  metadata:     md %u.%u, superblock at byte %" PRIu64 "\n"
          "  level:        %s%" PRId32 "%s\n"
          "  member:       role %u of %" PRIu32 " (device UUID %s), "
          "array state %s\n"
          "  created:      %s\n"
          "  chunk:        %" PRIu64 " bytes\n"
          "  layout:       %s\n"
          "  data offset:  %" PRIu64 " bytes\n"
          "  data size:    %" PRIu64 " bytes\n"
          "  events:       %" PRIu64 "\n"
          "  features:     %#" PRIx32 "\n"
          "  nbdstripe:    %s%s\n",
          path, md_super_name_shown (sb, nm), su, 1, sb->minor, at,
          sb->level == 0 ? "raid" : "", sb->level,
          sb->level == 0 ? "" : " (not raid0)", role, sb->raid_disks, du,
          roles, when, (uint64_t) sb->chunk_sectors * 512, layout,
          sb->data_offset * 512, sb->data_size * 512, sb->events,
          sb->feature_map,
          servable ? "can serve this array (metadata = \"md\"; "
                     "nbdstripe import writes the config)"
                   : "cannot serve it: ",
          servable ? "" : why);
}

/* No nbdstripe header on path: an md superblock perhaps.  true when
 * there is one (shown, or added to all); else err (errlen bytes, the
 * header's reason on entry) says why neither.
 */
static bool
inspect_md (const char *path, struct json_object *all, char *err,
            size_t errlen)
{
  struct md_super *md = malloc (sizeof *md);
  uint64_t at = 0;
  char why[512] = "out of memory";
  char first[96];

  if (md && md_read_member (path, md, &at, NULL, NULL, why, sizeof why) == 0) {
    struct json_object *o = all ? json_object_new_object () : NULL;
    if (o)
      json_put (o, "path", json_text (path));
    show_md (path, md, at, o);
    if (o) {
      json_put (o, "ok", json_object_new_boolean (true));
      json_put (o, "error", NULL);
      json_object_array_add (all, o);
    }
    free (md);
    return true;
  }
  free (md);
  snprintf (first, sizeof first, "%.95s", err);
  snprintf (err, errlen, "%s; %.150s", first, why);
  return false;
}

/* An nbdstripe header, for --json. */
static void
header_json (const struct header *sb, struct json_object *o)
{
  struct json_object *sizes = json_object_new_array ();
  char au[37], mu[37], when[32];

  header_uuid_format (sb->array_uuid, au);
  header_uuid_format (sb->member_uuid, mu);
  iso_time (sb->ctime, when, sizeof when);
  json_put (o, "kind", json_text ("nbdstripe"));
  json_put (o, "version", json_object_new_int64 (sb->version));
  json_put (o, "array_uuid", json_text (au));
  json_put (o, "member_uuid", json_text (mu));
  json_put (o, "name", json_text (sb->name));
  json_put (o, "ctime", json_u64 (sb->ctime));
  json_put (o, "ctime_iso", json_text (when));
  json_put (o, "member_index", json_object_new_int64 (sb->member_index));
  json_put (o, "member_count", json_object_new_int64 (sb->member_count));
  json_put (o, "chunk", json_u64 (sb->chunk));
  json_put (o, "layout", json_object_new_int64 (sb->layout));
  json_put (o, "flags", json_object_new_int64 (sb->flags));
  json_put (o, "data_offset", json_u64 (sb->data_offset));
  json_put (o, "events", json_u64 (sb->events));
  for (uint32_t k = 0; k < sb->member_count; ++k)
    json_object_array_add (sizes, json_u64 (sb->member_sizes[k]));
  json_put (o, "member_sizes", sizes);
  /* The allocation map (header.h): null when the volume has none. */
  if (sb->map_shift) {
    struct json_object *m = json_object_new_object ();
    json_put (m, "region", json_u64 (UINT64_C (1) << sb->map_shift));
    json_put (m, "offset", json_u64 (sb->map_offset));
    json_put (m, "bytes", json_u64 (sb->map_bytes));
    json_put (o, "allocation_map", m);
  }
  else
    json_put (o, "allocation_map", NULL);
}

/* An nbdstripe header, for people. */
static void
show_header (const char *path, const struct header *sb)
{
  struct layout *l = malloc (sizeof *l);
  char au[37], mu[37], when[32], size[64], events[64];

  header_uuid_format (sb->array_uuid, au);
  header_uuid_format (sb->member_uuid, mu);
  iso_time (sb->ctime, when, sizeof when);
  if (l == NULL
      || layout_init_as (l, sb->layout,
                         sb->version == HEADER_VERSION_1 ? LAYOUT_SIZE_ZONES
                                                         : LAYOUT_SIZE_MD,
                         sb->chunk, sb->member_count, sb->member_sizes, NULL)
           != LAYOUT_OK)
    /* Mid-reshape the sizes are the union's, a joining member's 0. */
    snprintf (size, sizeof size, "%s",
              sb->flags & HEADER_FLAG_RESHAPE
                ? "changing (a grow or shrink is under way)"
                : "too large (the sizes overflow 64 bits)");
  else
    snprintf (size, sizeof size, "%" PRIu64 " bytes", l->size);
  free (l);
  if (sb->version == HEADER_VERSION_1)
    snprintf (events, sizeof events, "none (version 1 header)");
  else
    snprintf (events, sizeof events, "%" PRIu64, sb->events);
  printf ("%s:\n"
          "  volume:       %s\n"
          "  array UUID:   %s\n"
          "  member:       %" PRIu32 " of %" PRIu32 " (UUID %s)\n"
          "  created:      %s\n"
          "  chunk:        %" PRIu64 " bytes\n"
          "  layout:       md raid0 layout %" PRIu32 " (%s)\n"
          "  data offset:  %" PRIu64 " bytes\n"
          "  generation:   %s\n"
          "  format:       version %" PRIu32 ", flags %#" PRIx32 "%s\n"
          "  volume size:  %s\n",
          path, sb->name, au, sb->member_index, sb->member_count, mu, when,
          sb->chunk, sb->layout, layout_name (sb->layout), sb->data_offset,
          events, sb->version, sb->flags,
          sb->flags & HEADER_FLAG_REPLACED
            ? " (replaced: no longer a member, never assembled again)"
            : "",
          size);
  for (uint32_t k = 0; k < sb->member_count; ++k)
    printf ("  member %-3" PRIu32 "   %" PRIu64 " data bytes\n", k,
            sb->member_sizes[k]);
  if (sb->map_shift)
    printf ("  allocation map: regions of %" PRIu64 " bytes, %" PRIu64
            " bytes at %" PRIu64 " (covers %" PRIu64 " bytes)\n",
            UINT64_C (1) << sb->map_shift, sb->map_bytes, sb->map_offset,
            sb->map_bytes * 8 << sb->map_shift);
  else
    printf ("  allocation map: none (moves and scrubs cover every byte)\n");
}

/* One member's header or md superblock, shown or (all not NULL) added to
 * all.  0, or 1 when it has neither (said).
 */
static int
inspect_member (const char *path, struct json_object *all)
{
  struct header sb;
  char err[256];
  bool blank = false;
  bool ok = meta_header_read (path, &sb, &blank, err, sizeof err) == 0;

  if (!ok && blank && inspect_md (path, all, err, sizeof err))
    return 0;
  if (all) {
    struct json_object *o = json_object_new_object ();

    json_put (o, "path", json_text (path));
    if (ok)
      header_json (&sb, o);
    else
      json_put (o, "kind", NULL);
    json_put (o, "ok", json_object_new_boolean (ok));
    json_put (o, "error", ok ? NULL : json_text (err));
    json_object_array_add (all, o);
  }
  else if (!ok)
    fprintf (stderr, "nbdstripe: %s: %s\n", path, err);
  else
    show_header (path, &sb);
  return ok ? 0 : 1;
}

int
cmd_inspect (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  bool json = false;
  int c, status = 0;

  while ((c = getopt_long (argc, argv, "jhV", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, -1, "MEMBER")) != 0)
    return c;

  struct json_object *all = json ? json_object_new_array () : NULL;
  for (int i = optind; i < argc; ++i)
    if (inspect_member (argv[i], all) != 0)
      status = 1;
  if (json) {
    struct json_object *o = json_object_new_object ();
    const char *err = NULL;

    /* The command's error is its first member's. */
    for (size_t i = 0; err == NULL && i < json_object_array_length (all);
         ++i) {
      struct json_object *e;
      if (json_object_object_get_ex (json_object_array_get_idx (all, i),
                                     "error", &e))
        err = json_object_get_string (e);
    }
    json_put (o, "members", all);
    jsonout_result (o, status == 0, err, false);
  }
  return status;
}
