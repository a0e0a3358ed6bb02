/* nbdstripe: volume assembly.  See include/assemble.h.
 *
 * Headers are read through rawdev, so that a member given as an NBD URI
 * is assembled as a file is: one plain connection, bounded in time.
 */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "log.h"
#include "rawdev.h"

struct probe {
  bool readable; /* opened and header decoded */
  uint64_t size;
  struct superblock sb;
};

static int
probe_member (unsigned i, const char *path, struct probe *p)
{
  uint8_t buf[SB_SIZE];
  const char *field = NULL;
  struct rawdev d;
  enum sb_error e;
  char why[512];
  ssize_t n;

  if (rawdev_open (&d, path, RAWDEV_READONLY, why, sizeof why) == -1) {
    stripe_error ("member %u (%s): %s", i, path, why);
    rawdev_close (&d);
    return -1;
  }
  n = rawdev_pread (&d, buf, sizeof buf, 0, why, sizeof why);
  if (n == -1) {
    stripe_error ("member %u (%s): %s", i, path, why);
    rawdev_close (&d);
    return -1;
  }
  p->size = d.size;
  rawdev_close (&d);

  e = sb_decode (buf, n, &p->sb, &field);
  switch (e) {
  case SB_OK: p->readable = true; return 0;
  case SB_ERR_TRUNCATED:
    stripe_error ("member %u (%s): only %zd bytes: too small to hold a "
                  "header (truncated?)",
                  i, path, n);
    return -1;
  case SB_ERR_MAGIC:
    stripe_error ("member %u (%s): %s: a blank member, or not created "
                  "with 'nbdstripe create'",
                  i, path, sb_strerror (e));
    return -1;
  case SB_ERR_FIELD:
    stripe_error ("member %u (%s): %s: field %s", i, path, sb_strerror (e),
                  field ? field : "?");
    return -1;
  default:
    stripe_error ("member %u (%s): %s", i, path, sb_strerror (e));
    return -1;
  }
}

int
assemble (const struct stripe_config *cfg, struct assembly *a)
{
  const unsigned n = cfg->nr_members;
  struct probe *p;
  unsigned ref = n, votes_best = 0;
  bool ok = true, order_wrong = false;
  char uuid[37];

  memset (a, 0, sizeof *a);
  p = calloc (n, sizeof *p);
  if (p == NULL) {
    stripe_error ("calloc: %m");
    return -1;
  }
  for (unsigned i = 0; i < n; ++i)
    if (probe_member (i, cfg->members[i], &p[i]) == -1)
      ok = false;

  /* The array is the UUID most members agree on (ties: the first). */
  for (unsigned i = 0; i < n; ++i) {
    unsigned votes = 0;
    if (!p[i].readable)
      continue;
    for (unsigned j = 0; j < n; ++j)
      if (p[j].readable
          && memcmp (p[j].sb.array_uuid, p[i].sb.array_uuid, 16) == 0)
        votes++;
    if (votes > votes_best) {
      votes_best = votes;
      ref = i;
    }
  }
  if (ref == n) {
    stripe_error ("%s: no member has a valid header: nothing to assemble",
                  cfg->path);
    free (p);
    return -1;
  }
  a->sb = p[ref].sb;
  sb_uuid_unparse (a->sb.array_uuid, uuid);

  if (a->sb.member_count != n) {
    stripe_error ("%s: the headers say volume '%s' (%s) has %" PRIu32
                  " members, the config lists %u",
                  cfg->path, a->sb.name, uuid, a->sb.member_count, n);
    ok = false;
  }
  if (strcmp (a->sb.name, cfg->name) != 0) {
    stripe_error ("%s: the members belong to volume '%s', the config "
                  "is for '%s'",
                  cfg->path, a->sb.name, cfg->name);
    ok = false;
  }
  if (a->sb.chunk != cfg->chunk) {
    stripe_error ("%s: chunk: the config says %" PRIu64 ", the headers "
                  "say %" PRIu64,
                  cfg->path, cfg->chunk, a->sb.chunk);
    ok = false;
  }

  for (unsigned i = 0; i < n; ++i) {
    const struct superblock *sb = &p[i].sb;
    char other[37];

    if (!p[i].readable)
      continue;
    if (memcmp (sb->array_uuid, a->sb.array_uuid, 16) != 0) {
      sb_uuid_unparse (sb->array_uuid, other);
      stripe_error ("member %u (%s): belongs to another array ('%s', %s), "
                    "not to '%s' (%s)",
                    i, cfg->members[i], sb->name, other, a->sb.name, uuid);
      p[i].readable = false;
      ok = false;
      continue;
    }
    if (sb->chunk != a->sb.chunk || sb->layout != a->sb.layout
        || sb->data_offset != a->sb.data_offset
        || sb->member_count != a->sb.member_count
        || memcmp (sb->member_sizes, a->sb.member_sizes,
                   sizeof sb->member_sizes)
             != 0) {
      stripe_error ("member %u (%s): header disagrees with the other "
                    "members (chunk, layout, data offset or sizes)",
                    i, cfg->members[i]);
      ok = false;
    }
    if (sb->member_index != i)
      order_wrong = true;
    else if (sb->member_index < LAYOUT_MAX_MEMBERS
             && p[i].size
                  < sb->data_offset + sb->member_sizes[sb->member_index]) {
      stripe_error ("member %u (%s): %" PRIu64 " bytes, smaller than its "
                    "header says (%" PRIu64 " data bytes from offset %" PRIu64
                    "): truncated or replaced?",
                    i, cfg->members[i], p[i].size, sb->member_sizes[i],
                    sb->data_offset);
      ok = false;
    }
  }

  if (order_wrong) {
    /* Say which member holds each index, so the fix is a copy-paste. */
    char msg[4096];
    size_t len = 0;
    bool complete = true;

    for (unsigned k = 0; k < a->sb.member_count && k < LAYOUT_MAX_MEMBERS;
         ++k) {
      unsigned who = n;
      for (unsigned i = 0; i < n; ++i)
        if (p[i].readable && p[i].sb.member_index == k)
          who = i;
      if (who == n) {
        stripe_error ("%s: no member listed has index %u of volume '%s'",
                      cfg->path, k, a->sb.name);
        complete = false;
        continue;
      }
      len += snprintf (msg + len, len < sizeof msg ? sizeof msg - len : 0,
                       "%s\"%s\"", k ? ", " : "", cfg->members[who]);
    }
    for (unsigned i = 0; i < n; ++i)
      if (p[i].readable && p[i].sb.member_index != i)
        stripe_error ("member %u (%s): is member %" PRIu32 " of '%s' "
                      "(wrong order)",
                      i, cfg->members[i], p[i].sb.member_index, a->sb.name);
    if (complete && len < sizeof msg)
      stripe_error ("%s: members are in the wrong order; the right order "
                    "is: members = [ %s ];",
                    cfg->path, msg);
    ok = false;
  }

  a->data_offset = a->sb.data_offset;
  memcpy (a->data_sizes, a->sb.member_sizes, sizeof a->data_sizes);
  free (p);
  return ok ? 0 : -1;
}
