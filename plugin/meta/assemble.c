/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: volume assembly.  See include/assemble.h.
 *
 * Headers are read through a member opened raw (member.h), so that a
 * member given as an NBD URI
 * is assembled as a file is: one plain connection, bounded in time.
 */

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "identity.h"
#include "log.h"
#include "member.h"
#include "volume.h"

struct probe {
  bool opened;
  bool readable; /* opened and header decoded */
  uint64_t size;
  struct identity id;
  struct header hdr;
};

static int
probe_member (unsigned i, const char *path, struct probe *p)
{
  uint8_t buf[HEADER_SIZE];
  const char *field = NULL;
  struct member d;
  const struct member_open_params params = { .readonly = true, .raw = true };
  enum header_error e;
  char why[512];
  ssize_t n;

  if (member_open (&d, i, path, &params, why, sizeof why) == -1) {
    stripe_error ("member %u (%s): %s", i, path, why);
    return -1;
  }
  n = member_pread (&d, buf, sizeof buf, 0, false, why, sizeof why);
  if (n == -1) {
    stripe_error ("member %u (%s): %s", i, path, why);
    member_close (&d);
    return -1;
  }
  p->size = d.size;
  p->id = d.id;
  p->opened = true;
  member_close (&d);

  e = header_decode (buf, n, &p->hdr, &field);
  switch (e) {
  case HEADER_OK: p->readable = true; return 0;
  case HEADER_ERR_TRUNCATED:
    stripe_error ("member %u (%s): only %zd bytes: too small to hold a "
                  "header (truncated?)",
                  i, path, n);
    return -1;
  case HEADER_ERR_MAGIC:
    stripe_error ("member %u (%s): %s: a blank member, or not created "
                  "with 'nbdstripe create'",
                  i, path, header_strerror (e));
    return -1;
  case HEADER_ERR_FIELD:
    stripe_error ("member %u (%s): %s: field %s", i, path, header_strerror (e),
                  field ? field : "?");
    return -1;
  default:
    stripe_error ("member %u (%s): %s", i, path, header_strerror (e));
    return -1;
  }
}

static int assemble_ (const struct stripe_config *cfg, struct assembly *a,
                      unsigned stale_ok, uint64_t *events_of);

void
assembly_free (struct assembly *a)
{
  free (a->md.sb);
  a->md.sb = NULL;
}

/* metadata "none": the config says it all. */
static int
assemble_none (const struct stripe_config *cfg, struct assembly *a)
{
  memset (a, 0, sizeof *a);
  a->metadata = METADATA_NONE;
  a->layout = cfg->layout;
  a->size_rule = LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < cfg->nr_members; ++i)
    a->data_offsets[i] = cfg->data_offset;
  return 0;
}

int
assemble (const struct stripe_config *cfg, struct assembly *a)
{
  memset (a, 0, sizeof *a);
  switch (cfg->metadata) {
  case METADATA_NONE: return assemble_none (cfg, a);
  case METADATA_MD: return assemble_md (cfg, a);
  case METADATA_HEADER: break;
  }
  return assemble_ (cfg, a, UINT_MAX, NULL);
}

int
assemble_accepting (const struct stripe_config *cfg, struct assembly *a,
                    unsigned stale_ok, uint64_t *events_of)
{
  return assemble_ (cfg, a, stale_ok, events_of);
}

static int
assemble_ (const struct stripe_config *cfg, struct assembly *a,
           unsigned stale_ok, uint64_t *events_of)
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

  /* Two names for one member, or members that overlap: each would
   * overwrite the other's data.
   */
  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (p[i].opened && p[j].opened
          && identity_alias (&p[j].id, &p[i].id, how, sizeof how)) {
        stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                      "may be given only once, and members must not "
                      "overlap",
                      j, cfg->members[j], i, cfg->members[i], how);
        p[i].readable = false;
        ok = false;
      }
      else if (p[i].readable && p[j].readable
               && memcmp (p[i].hdr.member_uuid, p[j].hdr.member_uuid, 16) == 0
               && memcmp (p[i].hdr.array_uuid, p[j].hdr.array_uuid, 16) == 0) {
        char mu[37];
        uuid_format (p[i].hdr.member_uuid, mu);
        stripe_error ("member %u (%s) and member %u (%s) show the same "
                      "header (member UUID %s): two names for one device, "
                      "or a copy of a member",
                      j, cfg->members[j], i, cfg->members[i], mu);
        p[i].readable = false;
        ok = false;
      }
    }

  /* The array is the UUID most members agree on (ties: the first). */
  for (unsigned i = 0; i < n; ++i) {
    unsigned votes = 0;
    if (!p[i].readable)
      continue;
    for (unsigned j = 0; j < n; ++j)
      if (p[j].readable
          && memcmp (p[j].hdr.array_uuid, p[i].hdr.array_uuid, 16) == 0)
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
  a->hdr = p[ref].hdr;
  uuid_format (a->hdr.array_uuid, uuid);

  if (a->hdr.member_count != n) {
    stripe_error ("%s: the headers say volume '%s' (%s) has %" PRIu32
                  " members, the config lists %u",
                  cfg->path, a->hdr.name, uuid, a->hdr.member_count, n);
    ok = false;
  }
  if (strcmp (a->hdr.name, cfg->name) != 0) {
    stripe_error ("%s: the members belong to volume '%s', the config "
                  "is for '%s'",
                  cfg->path, a->hdr.name, cfg->name);
    ok = false;
  }
  /* The headers say where data starts; a config that says otherwise is
   * wrong (given explicitly; the default is only create's choice).
   */
  if (cfg->data_offset_given && a->hdr.data_offset != cfg->data_offset) {
    stripe_error ("%s: data_offset: the config says %" PRIu64 ", the "
                  "headers say %" PRIu64,
                  cfg->path, cfg->data_offset, a->hdr.data_offset);
    ok = false;
  }
  if (a->hdr.chunk != cfg->chunk) {
    stripe_error ("%s: chunk: the config says %" PRIu64 ", the headers "
                  "say %" PRIu64,
                  cfg->path, cfg->chunk, a->hdr.chunk);
    ok = false;
  }
  if (cfg->layout_given && a->hdr.layout != cfg->layout) {
    stripe_error ("%s: layout: the config says \"%s\", the headers say "
                  "\"%s\"",
                  cfg->path, layout_name (cfg->layout),
                  layout_name (a->hdr.layout));
    ok = false;
  }
  if (cfg->uuid_given && memcmp (cfg->uuid, a->hdr.array_uuid, 16) != 0) {
    char want[37];
    uuid_format (cfg->uuid, want);
    stripe_error ("%s: uuid: the config says %s, the members belong to "
                  "volume '%s' (%s): not the array this config describes",
                  cfg->path, want, a->hdr.name, uuid);
    ok = false;
  }

  for (unsigned i = 0; i < n; ++i) {
    const struct header *hdr = &p[i].hdr;
    char other[37];

    if (!p[i].readable)
      continue;
    if (memcmp (hdr->array_uuid, a->hdr.array_uuid, 16) != 0) {
      uuid_format (hdr->array_uuid, other);
      stripe_error ("member %u (%s): belongs to another array ('%s', %s), "
                    "not to '%s' (%s)",
                    i, cfg->members[i], hdr->name, other, a->hdr.name, uuid);
      p[i].readable = false;
      ok = false;
      continue;
    }
    if (hdr->chunk != a->hdr.chunk || hdr->layout != a->hdr.layout
        || hdr->data_offset != a->hdr.data_offset
        || hdr->member_count != a->hdr.member_count
        || memcmp (hdr->member_sizes, a->hdr.member_sizes,
                   sizeof hdr->member_sizes)
             != 0) {
      stripe_error ("member %u (%s): header disagrees with the other "
                    "members (chunk, layout, data offset or sizes)",
                    i, cfg->members[i]);
      ok = false;
    }
    if (hdr->flags & HEADER_FLAG_REPLACED) {
      stripe_error ("member %u (%s): was replaced by another device "
                    "(nbdstripe replace) and is no longer a member of '%s': "
                    "name the device that replaced it in the config",
                    i, cfg->members[i], a->hdr.name);
      p[i].readable = false;
      ok = false;
      continue;
    }
    if (hdr->member_index != i)
      order_wrong = true;
    else if (hdr->member_index < LAYOUT_MAX_MEMBERS
             && p[i].size
                  < hdr->data_offset + hdr->member_sizes[hdr->member_index]) {
      stripe_error ("member %u (%s): %" PRIu64 " bytes, smaller than its "
                    "header says (%" PRIu64 " data bytes from offset %" PRIu64
                    "): truncated or replaced?",
                    i, cfg->members[i], p[i].size, hdr->member_sizes[i],
                    hdr->data_offset);
      ok = false;
    }
  }

  /* One generation: a member behind the others dropped out of the
   * volume while it was served (or is an older copy of a member).
   */
  uint64_t newest = 0;
  for (unsigned i = 0; i < n; ++i)
    if (p[i].readable
        && memcmp (p[i].hdr.array_uuid, a->hdr.array_uuid, 16) == 0
        && p[i].hdr.events > newest)
      newest = p[i].hdr.events;
  if (stale_ok < n && events_of)
    *events_of = p[stale_ok].readable ? p[stale_ok].hdr.events : 0;
  for (unsigned i = 0; i < n; ++i)
    if (p[i].readable && i != stale_ok
        && memcmp (p[i].hdr.array_uuid, a->hdr.array_uuid, 16) == 0
        && p[i].hdr.events < newest) {
      stripe_error ("member %u (%s): stale: its header is at generation "
                    "%" PRIu64 ", the volume is at %" PRIu64 ": it dropped "
                    "out while the volume was served, or it is an older "
                    "copy of the member (if it is the member itself and "
                    "nothing wrote to it since, 'nbdstripe accept %s %u' "
                    "takes it back)",
                    i, cfg->members[i], p[i].hdr.events, newest, cfg->path,
                    i);
      ok = false;
    }
  a->hdr.events = newest;
  for (unsigned i = 0; i < n; ++i)
    if (p[i].readable)
      memcpy (a->member_uuid[i], p[i].hdr.member_uuid, 16);

  if (order_wrong) {
    /* Say which member holds each index, so the fix is a copy-paste. */
    char msg[4096];
    size_t len = 0;
    bool complete = true;

    for (unsigned k = 0; k < a->hdr.member_count && k < LAYOUT_MAX_MEMBERS;
         ++k) {
      unsigned who = n;
      for (unsigned i = 0; i < n; ++i)
        if (p[i].readable && p[i].hdr.member_index == k)
          who = i;
      if (who == n) {
        stripe_error ("%s: no member listed has index %u of volume '%s'",
                      cfg->path, k, a->hdr.name);
        complete = false;
        continue;
      }
      len += snprintf (msg + len, len < sizeof msg ? sizeof msg - len : 0,
                       "%s\"%s\"", k ? ", " : "", cfg->members[who]);
    }
    for (unsigned i = 0; i < n; ++i)
      if (p[i].readable && p[i].hdr.member_index != i)
        stripe_error ("member %u (%s): is member %" PRIu32 " of '%s' "
                      "(wrong order)",
                      i, cfg->members[i], p[i].hdr.member_index, a->hdr.name);
    if (complete && len < sizeof msg)
      stripe_error ("%s: members are in the wrong order; the right order "
                    "is: members = [ %s ];",
                    cfg->path, msg);
    ok = false;
  }

  a->metadata = METADATA_HEADER;
  a->layout = a->hdr.layout;
  /* Version 1 sized its volumes as all their zones (md's rule differs for
   * a chunk that is not a power of two): they keep their size.
   */
  a->size_rule =
    a->hdr.version == HEADER_VERSION_1 ? LAYOUT_SIZE_ZONES : LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < n; ++i)
    a->data_offsets[i] = a->hdr.data_offset;
  memcpy (a->data_sizes, a->hdr.member_sizes, sizeof a->data_sizes);
  free (p);
  return ok ? 0 : -1;
}

int
volume_open_config (struct volume *v, const struct stripe_config *cfg,
                    const struct volume_options *base, struct assembly *a)
{
  struct volume_options o = *base;

  o.chunk = cfg->chunk;
  o.cache = cfg->cache;
  o.connections = cfg->remote.connections;
  o.timeout = cfg->health.set.io_timeout;
  if (assemble (cfg, a) == -1)
    return -1;
  o.assembly = a;
  return volume_open (v, cfg->nr_members, (const char *const *) cfg->members,
                      &o);
}
