/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the nbdstripe header as a metadata format (include/meta.h).
 *
 * One 4 KiB header at byte 0 of every member (header.c encodes and
 * decodes it): the whole layout, the member's index and UUID, and a
 * generation that is bumped on every member still in the volume when one
 * drops out, and each time the volume is served writable, so that an
 * older copy of a member is refused.  A member replaced carries
 * HEADER_FLAG_REPLACED and is never assembled again.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "assemble.h"
#include "header.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "util.h"

static const struct header *
rec_as_header (const struct meta_member *mm)
{
  return mm->rec;
}

/* The layout of one side of a reshape: the members with a size in it. */
static bool
side (const struct header *h, const uint64_t *sizes, struct layout *l,
      uint8_t *map)
{
  uint64_t s[LAYOUT_MAX_MEMBERS];
  unsigned n = 0, bad;

  for (unsigned u = 0; u < h->member_count; ++u)
    if (sizes[u]) {
      map[n] = u;
      s[n++] = sizes[u];
    }
  return n > 0
         && layout_init_as (l, h->layout, LAYOUT_SIZE_MD, h->chunk, n, s, &bad)
              == LAYOUT_OK;
}

/* A reshape whose position reached the end is done: the header reads as
 * the one written at the end (the new layout, the member's place in it,
 * a leaving member removed), so that headers written before and after a
 * crash at the end agree.
 */
static void
reshape_done (struct header *h)
{
  struct layout from, to;
  uint8_t fmap[LAYOUT_MAX_MEMBERS], tmap[LAYOUT_MAX_MEMBERS];
  uint64_t sizes[LAYOUT_MAX_MEMBERS] = { 0 }, behind = 0;
  unsigned n = 0, slot = UINT32_MAX;

  if (!side (h, h->member_sizes, &from, fmap)
      || !side (h, h->reshape.new_sizes, &to, tmap)
      || h->reshape.position < (from.size < to.size ? from.size : to.size))
    return;
  for (unsigned u = 0; u < h->member_count; ++u)
    if (h->reshape.new_sizes[u]) {
      if (u == h->member_index)
        slot = n;
      if (h->behind >> u & 1)
        behind |= UINT64_C (1) << n;
      sizes[n++] = h->reshape.new_sizes[u];
    }
  h->flags &= ~HEADER_FLAG_RESHAPE;
  if (slot == UINT32_MAX)
    h->flags |= HEADER_FLAG_REMOVED;
  else
    h->member_index = slot;
  h->member_count = n;
  h->behind = behind;
  memcpy (h->member_sizes, sizes, sizeof sizes);
  memset (&h->reshape, 0, sizeof h->reshape);
}

static int
header_load (struct member *d, struct meta_member *mm, char *why, size_t len)
{
  uint8_t buf[HEADER_SIZE];
  const char *field = NULL;
  struct header *hdr;
  enum header_error e;
  ssize_t n;

  n = member_pread (d, buf, sizeof buf, 0, false, why, len);
  if (n == -1)
    return -1;
  hdr = malloc (sizeof *hdr);
  if (hdr == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  e = header_decode (buf, n, hdr, &field);
  switch (e) {
  case HEADER_OK: break;
  case HEADER_ERR_TRUNCATED:
    snprintf (why, len, "only %zd bytes: too small to hold a header "
              "(truncated?)", n);
    goto err;
  case HEADER_ERR_MAGIC:
    snprintf (why, len, "%s: a blank member, or not created with "
              "'nbdstripe create'", header_strerror (e));
    goto err;
  case HEADER_ERR_FIELD:
    snprintf (why, len, "%s: field %s", header_strerror (e),
              field ? field : "?");
    goto err;
  default:
    snprintf (why, len, "%s", header_strerror (e));
    goto err;
  }
  if (hdr->flags & HEADER_FLAG_RESHAPE)
    reshape_done (hdr);
  memcpy (mm->array_uuid, hdr->array_uuid, 16);
  memcpy (mm->member_uuid, hdr->member_uuid, 16);
  snprintf (mm->name, sizeof mm->name, "%s", hdr->name);
  mm->slot = hdr->member_index;
  mm->count = hdr->member_count;
  mm->reshape = hdr->flags & HEADER_FLAG_RESHAPE;
  mm->removed = hdr->flags & HEADER_FLAG_REMOVED;
  mm->replaced = hdr->flags & HEADER_FLAG_REPLACED;
  mm->creating = hdr->flags & HEADER_FLAG_CREATING;
  mm->behind = hdr->behind;
  mm->roster = hdr->roster;
  mm->events = hdr->events;
  mm->data_offset = hdr->data_offset;
  mm->data_size = hdr->member_index < LAYOUT_MAX_MEMBERS
                    ? hdr->member_sizes[hdr->member_index]
                    : 0;
  if ((hdr->flags & HEADER_FLAG_RESHAPE)
      && hdr->reshape.new_sizes[hdr->member_index] > mm->data_size)
    mm->data_size = hdr->reshape.new_sizes[hdr->member_index];
  mm->rec = hdr;
  return 0;

err:
  free (hdr);
  return -1;
}

int
meta_header_read (const char *path, struct header *h, bool *blank, char *err,
                  size_t len)
{
  uint8_t buf[HEADER_SIZE];
  const char *field = NULL;
  const struct member_open_params params = { .readonly = true, .raw = true };
  struct member d;
  enum header_error e;
  ssize_t n = -1;

  *blank = false;
  if (member_open (&d, 0, path, &params, err, len) == 0) {
    n = member_pread (&d, buf, sizeof buf, 0, false, err, len);
    member_close (&d);
  }
  if (n == -1)
    return -1;
  e = header_decode (buf, n, h, &field);
  if (e != HEADER_OK) {
    *blank = e == HEADER_ERR_MAGIC;
    snprintf (err, len, "%s%s%s", header_strerror (e), field ? ": field " : "",
              field ? field : "");
    return -1;
  }
  return 0;
}

static bool
header_check_array (const struct stripe_config *cfg,
                    const struct meta_member *ref, char *why, size_t len)
{
  const struct header *h = rec_as_header (ref);
  bool ok = true;
  char uuid[37];

  header_uuid_format (h->array_uuid, uuid);
  if (h->member_count != cfg->nr_members) {
    why_line (why, len, "%s: the headers say volume '%s' (%s) has %" PRIu32
                  " members, the config lists %u",
                  cfg->path, h->name, uuid, h->member_count, cfg->nr_members);
    ok = false;
  }
  if (strcmp (h->name, cfg->name) != 0) {
    why_line (why, len, "%s: the members belong to volume '%s', the config "
                  "is for '%s'",
                  cfg->path, h->name, cfg->name);
    ok = false;
  }
  /* The headers say where data starts; a config that says otherwise is
   * wrong (given explicitly; the default is only create's choice).
   */
  if (cfg->data_offset_given && h->data_offset != cfg->data_offset) {
    why_line (why, len, "%s: data_offset: the config says %" PRIu64 ", the "
                  "headers say %" PRIu64,
                  cfg->path, cfg->data_offset, h->data_offset);
    ok = false;
  }
  if (h->chunk != cfg->chunk) {
    why_line (why, len, "%s: chunk: the config says %" PRIu64 ", the headers "
                  "say %" PRIu64,
                  cfg->path, cfg->chunk, h->chunk);
    ok = false;
  }
  if (cfg->layout_given && h->layout != cfg->layout) {
    why_line (why, len, "%s: layout: the config says \"%s\", the headers say "
                  "\"%s\"",
                  cfg->path, layout_name (cfg->layout),
                  layout_name (h->layout));
    ok = false;
  }
  if (cfg->uuid_given && memcmp (cfg->uuid, h->array_uuid, 16) != 0) {
    char want[37];
    header_uuid_format (cfg->uuid, want);
    why_line (why, len, "%s: uuid: the config says %s, the members belong to "
                  "volume '%s' (%s): not the array this config describes",
                  cfg->path, want, h->name, uuid);
    ok = false;
  }
  return ok;
}

static enum meta_verdict
header_check_member (const struct stripe_config *cfg, unsigned i,
                     const struct meta_member *ref,
                     const struct meta_member *mm, uint64_t size, char *why,
                     size_t len)
{
  const struct header *a = rec_as_header (ref), *hdr = rec_as_header (mm);
  enum meta_verdict v = META_OK;

  /* A member one generation behind (assemble.c accepted it) holds the
   * record of the update before: the array is what the newest says.
   */
  if (mm->events == ref->events
      && (hdr->chunk != a->chunk || hdr->layout != a->layout
      || hdr->data_offset != a->data_offset
      || hdr->member_count != a->member_count
      || memcmp (hdr->member_sizes, a->member_sizes, sizeof hdr->member_sizes)
           != 0
      || (hdr->flags & HEADER_FLAG_RESHAPE) != (a->flags & HEADER_FLAG_RESHAPE)
      || memcmp (hdr->reshape.new_sizes, a->reshape.new_sizes,
                 sizeof hdr->reshape.new_sizes)
           != 0
      || (hdr->reshape.flags & HEADER_RESHAPE_BACKWARD)
           != (a->reshape.flags & HEADER_RESHAPE_BACKWARD))) {
    why_line (why, len, "member %u (%s): header disagrees with the other "
                  "members (chunk, layout, data offset or sizes)",
                  i, cfg->members[i]);
    v = META_BAD;
  }
  if (hdr->flags & HEADER_FLAG_REPLACED) {
    why_line (why, len, "member %u (%s): was replaced by another device "
                  "(nbdstripe replace) and is no longer a member of '%s': "
                  "name the device that replaced it in the config",
                  i, cfg->members[i], a->name);
    return META_DROP;
  }
  if (hdr->flags & HEADER_FLAG_REMOVED) {
    why_line (why, len, "member %u (%s): was removed from the volume (nbdstripe "
                  "shrink) and is no longer a member of '%s'",
                  i, cfg->members[i], a->name);
    return META_DROP;
  }
  if (hdr->member_index == i && size < hdr->data_offset + mm->data_size) {
    why_line (why, len, "member %u (%s): %" PRIu64 " bytes, smaller than its "
                  "header says (%" PRIu64 " data bytes from offset %" PRIu64
                  "): truncated or replaced?",
                  i, cfg->members[i], size, mm->data_size, hdr->data_offset);
    v = META_BAD;
  }
  else if (hdr->member_index == i && i < LAYOUT_MAX_MEMBERS
           && size < a->data_offset + a->member_sizes[i]) {
    why_line (why, len, "member %u (%s): %" PRIu64 " bytes, smaller than the "
                  "newest header says (%" PRIu64 " data bytes from offset "
                  "%" PRIu64 "): truncated or replaced?",
                  i, cfg->members[i], size, a->member_sizes[i],
                  a->data_offset);
    v = META_BAD;
  }
  return v;
}

static void
header_say_stale (const struct stripe_config *cfg, unsigned i,
                  const struct meta_member *mm, uint64_t newest, char *why,
                  size_t len)
{
  why_line (why, len, "member %u (%s): stale: its header is at generation "
                "%" PRIu64 ", the volume is at %" PRIu64 ": it dropped "
                "out while the volume was served, or it is an older "
                "copy of the member (if it is the member itself and "
                "nothing wrote to it since, 'nbdstripe accept %s %u' "
                "takes it back)",
                i, cfg->members[i], mm->events, newest, cfg->path, i);
}

/* The reshape the newest header records (each checkpoint and journal
 * record is a generation of its own: a crash half-way through one leaves
 * the newest on some members, which is right, see reshape_io.c).
 */
static void
finish_reshape (const struct stripe_config *cfg, struct assembly *a)
{
  const struct header *h = rec_as_header (&a->members[a->ref]);
  struct meta_reshape *r = &a->reshape;

  r->active = true;
  r->backward = h->reshape.flags & HEADER_RESHAPE_BACKWARD;
  for (unsigned u = 0; u < cfg->nr_members; ++u) {
    r->old_sizes[u] = h->member_sizes[u];
    r->new_sizes[u] = h->reshape.new_sizes[u];
  }
  r->position = h->reshape.position;
  if (h->reshape.flags & HEADER_RESHAPE_JOURNAL) {
    r->journal = true;
    r->journal_position = h->reshape.journal_position;
    r->journal_length = h->reshape.journal_length;
    r->journal_crc = h->reshape.journal_crc;
  }
}

static int
header_finish (const struct stripe_config *cfg, struct assembly *a,
               char *why, size_t len)
{
  const struct header *h = rec_as_header (&a->members[a->ref]);

  (void) why;
  (void) len;
  a->layout = h->layout;
  /* Version 1 sized its volumes as all their zones (md's rule differs for
   * a chunk that is not a power of two): they keep their size.
   */
  a->size_rule =
    h->version == HEADER_VERSION_1 ? LAYOUT_SIZE_ZONES : LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    a->data_offsets[i] = h->data_offset;
    a->data_sizes[i] = h->member_sizes[i];
  }
  a->lost.nr = h->nr_lost;
  memcpy (a->lost.r, h->lost, h->nr_lost * sizeof h->lost[0]);
  a->map_shift = h->map_shift;
  a->map_offset = h->map_offset;
  a->map_bytes = h->map_bytes;
  if (h->flags & HEADER_FLAG_RESHAPE)
    finish_reshape (cfg, a);
  return 0;
}

/* Every header records every member's data size (member_sizes) and
 * the volume's one data offset: a member missing is placed by any other
 * (header_finish).
 */
static bool
header_places_missing (const struct stripe_config *cfg,
                       const struct assembly *a, unsigned i, char *why,
                       size_t len)
{
  (void) cfg;
  (void) a;
  (void) i;
  (void) why;
  (void) len;
  return true;
}

static int
header_create_check (const struct stripe_config *cfg, char *why, size_t len)
{
  (void) cfg;
  (void) why;
  (void) len;
  return 0;
}

/* The allocation map of a new volume (alloc.h) lies after the header
 * area (META_AREA), and leaves the reshape's journal, which follows it,
 * at least HEADER_JOURNAL_MIN a member.  It covers the largest volume
 * the members can make (LAYOUT_MAX_MEMBERS of the largest, as a grow
 * can): the data offset of a volume of large members grows to make room
 * (map_data_offset), so that its regions stay at most 4 MiB.
 */
#define HEADER_JOURNAL_MIN (512u * 1024)

static uint64_t
map_room (uint64_t data_offset)
{
  return data_offset > META_AREA + HEADER_JOURNAL_MIN
           ? data_offset - META_AREA - HEADER_JOURNAL_MIN
           : 0;
}

static uint64_t
largest_volume (const uint64_t *sizes, unsigned n)
{
  uint64_t largest = 0;

  for (unsigned i = 0; i < n; ++i)
    if (sizes[i] > largest)
      largest = sizes[i];
  return largest > UINT64_MAX / LAYOUT_MAX_MEMBERS
           ? UINT64_MAX
           : largest * LAYOUT_MAX_MEMBERS;
}

static uint64_t
header_create_data_offset (const struct stripe_config *cfg,
                           const uint64_t *device_sizes, unsigned n)
{
  uint64_t total = 0, max = largest_volume (device_sizes, n), need;
  unsigned shift;
  const uint64_t mib = 1024 * 1024;

  if (cfg->data_offset_given)
    return cfg->data_offset;
  for (unsigned i = 0; i < n; ++i)
    total += device_sizes[i];
  /* The map of the largest volume, in the regions this one would get. */
  if (!alloc_plan (total, total, UINT64_MAX / 16, &shift, &need))
    return cfg->data_offset;
  need = ((max - 1) >> shift) / ALLOC_BLOCK_BITS * ALLOC_BLOCK + ALLOC_BLOCK;
  need = (META_AREA + need + HEADER_JOURNAL_MIN + mib - 1) / mib * mib;
  return need > cfg->data_offset ? need : cfg->data_offset;
}

static bool
header_create_map (const void *array, uint64_t *offset, uint64_t *bytes)
{
  const struct header *sb = array;

  *offset = sb->map_offset;
  *bytes = sb->map_bytes;
  return sb->map_shift != 0;
}

static void *
header_create_array (const struct stripe_config *cfg, const struct layout *l,
                     const uint8_t uuid[16], uint64_t now)
{
  struct header *sb = calloc (1, sizeof *sb);

  if (sb == NULL)
    return NULL;
  sb->version = HEADER_VERSION;
  memcpy (sb->array_uuid, uuid, 16);
  snprintf (sb->name, sizeof sb->name, "%s", cfg->name);
  sb->ctime = now;
  sb->member_count = l->nr_members;
  sb->chunk = cfg->chunk;
  sb->layout = cfg->layout;
  sb->data_offset = cfg->data_offset;
  sb->events = 1;
  sb->flags = HEADER_FLAG_CREATING; /* header_create_final clears it */
  memcpy (sb->member_sizes, l->member_size,
          l->nr_members * sizeof sb->member_sizes[0]);
  if (alloc_plan (l->size, largest_volume (l->member_size, l->nr_members),
                  map_room (sb->data_offset), &sb->map_shift,
                  &sb->map_bytes))
    sb->map_offset = META_AREA;
  return sb;
}

static void
header_create_member (void *array, unsigned i, uint64_t member_size,
                      uint8_t *area, unsigned *blocks, uint8_t id[16])
{
  struct header *hdr = array;

  (void) member_size;
  hdr->member_index = i;
  meta_random_uuid (hdr->member_uuid);
  header_encode (hdr, area);
  *blocks |= 1;
  memcpy (id, hdr->member_uuid, 16);
}

static void
header_create_final (uint8_t *area, uint32_t roster)
{
  struct header h;

  if (header_decode (area, HEADER_SIZE, &h, NULL) != HEADER_OK)
    return;
  h.flags &= ~HEADER_FLAG_CREATING;
  h.roster = roster;
  header_encode (&h, area);
}

static bool
header_read_back (const uint8_t *area, uint8_t id[16])
{
  struct header back;

  if (header_decode (area, HEADER_SIZE, &back, NULL) != HEADER_OK)
    return false;
  memcpy (id, back.member_uuid, 16);
  return true;
}

static int
header_describe_created (const struct stripe_config *cfg,
                         const struct layout *l, const char *uuid,
                         const char *size, char *out, size_t len)
{
  return snprintf (out, len,
                   "created volume '%s' (%s): %u member%s, chunk %" PRIu64
                   ", data offset %" PRIu64 ", %s (%" PRIu64 " bytes)",
                   cfg->name, uuid, l->nr_members,
                   l->nr_members == 1 ? "" : "s", cfg->chunk, cfg->data_offset,
                   size, l->size);
}

/* The agreed header, as a template for every member's: its own index,
 * UUID, generation and flags go in at write time.
 */
static int
header_init (struct meta *m, const struct assembly *a)
{
  struct header *t = malloc (sizeof *t);

  if (t == NULL)
    return -1;
  *t = *rec_as_header (&a->members[a->ref]);
  m->state = t;
  return 0;
}

/* While reshaping, member i's header numbers the members in the union
 * of both layouts and carries the reshape (see header.h).
 */
static void
reshape_fields (struct meta *m, unsigned i, struct header *hdr)
{
  const struct meta_reshape *r = &m->reshape;

  hdr->flags |= HEADER_FLAG_RESHAPE;
  hdr->member_index = i;
  hdr->member_count = m->nr;
  memset (hdr->member_sizes, 0, sizeof hdr->member_sizes);
  memset (&hdr->reshape, 0, sizeof hdr->reshape);
  for (unsigned u = 0; u < m->nr; ++u) {
    hdr->member_sizes[u] = r->old_sizes[u];
    hdr->reshape.new_sizes[u] = r->new_sizes[u];
  }
  hdr->reshape.flags = (r->backward ? HEADER_RESHAPE_BACKWARD : 0)
                       | (r->journal ? HEADER_RESHAPE_JOURNAL : 0);
  hdr->reshape.position = r->position;
  if (r->journal) {
    hdr->reshape.journal_position = r->journal_position;
    hdr->reshape.journal_length = r->journal_length;
    hdr->reshape.journal_crc = r->journal_crc;
  }
}

static int
header_write (struct meta *m, unsigned i, struct member *d,
              const uint8_t uuid[16], uint64_t events, unsigned mark,
              char *why, size_t len)
{
  struct header hdr;
  uint8_t buf[HEADER_SIZE];
  char what[64];

  pthread_mutex_lock (&m->lock);
  hdr = *(const struct header *) m->state;
  hdr.version = HEADER_VERSION;
  hdr.member_index = m->slot[i];
  memcpy (hdr.member_uuid, uuid, 16);
  hdr.events = events;
  hdr.flags = (mark & META_MARK_REPLACED ? HEADER_FLAG_REPLACED : 0)
              | (mark & META_MARK_REMOVED ? HEADER_FLAG_REMOVED : 0);
  memset (&hdr.reshape, 0, sizeof hdr.reshape);
  if (m->reshape.active)
    reshape_fields (m, i, &hdr);
  hdr.behind = 0;
  for (unsigned j = 0; j < m->nr; ++j)
    if ((m->behind >> j & 1) && !m->members[j].removed)
      hdr.behind |= UINT64_C (1) << (m->reshape.active ? j : m->slot[j]);
  hdr.roster = m->roster;
  hdr.nr_lost = m->lost.nr;
  memcpy (hdr.lost, m->lost.r, m->lost.nr * sizeof hdr.lost[0]);
  pthread_mutex_unlock (&m->lock);
  header_encode (&hdr, buf);
  if (member_pwrite (d, buf, HEADER_SIZE, 0, why, len) == -1
      || member_sync (d, why, len) == -1)
    return -1;
  snprintf (what, sizeof what, "generation %" PRIu64 "%s%s", events,
            mark & META_MARK_REPLACED ? ", replaced" : "",
            mark & META_MARK_REMOVED ? ", removed" : "");
  meta_written (i, d->path, what);
  return 0;
}

static int
header_clear (struct meta *m, unsigned i, struct member *d, char *why,
              size_t len)
{
  static const uint8_t zeros[HEADER_SIZE] __attribute__ ((aligned (4096)));

  (void) m;
  if (member_pwrite (d, zeros, HEADER_SIZE, 0, why, len) == -1
      || member_sync (d, why, len) == -1)
    return -1;
  meta_written (i, d->path, "cleared");
  return 0;
}

static int
header_check_probed (struct meta *m, unsigned i, const char *path,
                     const uint8_t *area, size_t n, uint64_t *events,
                     char *why, size_t len)
{
  struct header hdr;
  const char *field = NULL;
  enum header_error e;
  struct meta_slot want;
  char uuid[37];

  e = header_decode (area, n, &hdr, &field);
  if (e != HEADER_OK) {
    snprintf (why, len, "%s: header: %s%s%s", path, header_strerror (e),
              field ? ": field " : "", field ? field : "");
    return -1;
  }
  header_uuid_format (hdr.array_uuid, uuid);
  if (hdr.flags & HEADER_FLAG_REPLACED) {
    snprintf (why, len, "%s holds a member that was replaced (nbdstripe "
              "replace): no longer part of the volume",
              path);
    return -1;
  }
  if (memcmp (hdr.array_uuid, m->uuid, 16) != 0
      || hdr.member_index != (m->reshape.active ? i : m->slot[i])) {
    snprintf (why, len,
              "%s now holds member %u of volume '%s' (%s), not this one",
              path, hdr.member_index, hdr.name, uuid);
    return -1;
  }
  want = meta_member_slot (m, i);
  if (memcmp (hdr.member_uuid, want.uuid, 16) != 0) {
    snprintf (why, len,
              "%s holds member %u of this volume with another member UUID "
              "(a member written by another 'nbdstripe create'?)",
              path, i);
    return -1;
  }
  if (hdr.events < want.events) {
    snprintf (why, len,
              "%s holds a stale copy of member %u: older generation "
              "%" PRIu64 " < %" PRIu64,
              path, i, hdr.events, want.events);
    return -1;
  }
  if (hdr.events > want.events) {
    snprintf (why, len,
              "%s holds member %u at generation %" PRIu64 ", newer than "
              "this volume's %" PRIu64 " (written by another server?)",
              path, i, hdr.events, want.events);
    return -1;
  }
  *events = hdr.events;
  return 0;
}

/* The template describes the new layout from now on (m->lock held). */
static void
header_end_reshape (struct meta *m, unsigned count, const uint64_t *sizes)
{
  struct header *t = m->state;

  t->flags &= ~HEADER_FLAG_RESHAPE;
  memset (&t->reshape, 0, sizeof t->reshape);
  t->member_count = count;
  memset (t->member_sizes, 0, sizeof t->member_sizes);
  memcpy (t->member_sizes, sizes, count * sizeof t->member_sizes[0]);
}

/* A volume made before maps: the map after the header area, with the
 * journal's room left after it as for a new volume (HEADER_JOURNAL_MIN).
 * The journal is empty: no reshape is under way.
 */
static bool
header_map_room (const struct meta *m, uint64_t size, uint64_t max_size,
                 unsigned *shift, uint64_t *offset, uint64_t *bytes)
{
  const struct header *h = m->state;

  if (h == NULL || h->version != HEADER_VERSION || h->map_shift != 0
      || (h->flags & HEADER_FLAG_RESHAPE)
      || !alloc_plan (size, max_size, map_room (h->data_offset), shift,
                      bytes))
    return false;
  *offset = META_AREA;
  return true;
}

static void
header_set_map (struct meta *m, unsigned shift, uint64_t offset,
                uint64_t bytes)
{
  struct header *h = m->state;

  pthread_mutex_lock (&m->lock);
  h->map_shift = shift;
  h->map_offset = offset;
  h->map_bytes = bytes;
  pthread_mutex_unlock (&m->lock);
}

/* The gap between the header and the data holds nothing. */
static bool
header_scratch (const struct meta *m, uint64_t *offset, uint64_t *len)
{
  const struct header *h = m->state;

  if (h == NULL || h->data_offset < 2 * HEADER_SIZE)
    return false;
  *offset = HEADER_SIZE;
  *len = HEADER_SIZE;
  return true;
}

const struct meta_ops meta_header_ops = {
  .name              = "header",
  .words             = {
    .record  = "header",
    .uuid    = "member UUID",
    .other   = "array",
    .array   = "volume",
    .slot    = "index",
    .is_slot = "is member",
    .slot_in = "of",
    .nothing = "a valid header",
  },
  .records_dropouts  = true,
  .proves_identity   = true,
  .keeps_lost        = true,
  .load              = header_load,
  .uuid_shown        = header_uuid_format,
  .check_array       = header_check_array,
  .check_member      = header_check_member,
  .say_stale         = header_say_stale,
  .finish            = header_finish,
  .places_missing    = header_places_missing,
  .create_check      = header_create_check,
  .create_data_offset = header_create_data_offset,
  .create_map        = header_create_map,
  .create_array      = header_create_array,
  .create_member     = header_create_member,
  .create_final      = header_create_final,
  .read_back         = header_read_back,
  .describe_created  = header_describe_created,
  .init              = header_init,
  .write             = header_write,
  .clear             = header_clear,
  .check_probed      = header_check_probed,
  .scratch           = header_scratch,
  .map_room          = header_map_room,
  .set_map           = header_set_map,
  .end_reshape       = header_end_reshape,
};
