/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the RAID-0 layout.  See include/layout.h for the contract. */

#include <assert.h>
#include <string.h>

#include "layout.h"

enum layout_error
layout_init_as (struct layout *l, uint32_t id, enum layout_size_rule rule,
                uint64_t chunk, unsigned nr_members,
                const uint64_t *member_sizes, unsigned *bad_member)
{
  uint64_t level = 0; /* member chunks used by earlier zones */
  uint64_t logical = 0;

  memset (l, 0, sizeof *l);
  if (id != LAYOUT_MD_ORIG && id != LAYOUT_MD_ALT)
    return LAYOUT_ERR_ID;
  if (nr_members == 0)
    return LAYOUT_ERR_NO_MEMBERS;
  if (nr_members > LAYOUT_MAX_MEMBERS)
    return LAYOUT_ERR_TOO_MANY_MEMBERS;
  if (chunk == 0 || chunk % LAYOUT_CHUNK_ALIGN != 0)
    return LAYOUT_ERR_CHUNK;

  l->id = id;
  l->size_rule = rule;
  l->chunk = chunk;
  l->nr_members = nr_members;
  for (unsigned i = 0; i < nr_members; ++i) {
    l->member_size[i] = member_sizes[i] / chunk * chunk;
    if (l->member_size[i] == 0) {
      if (bad_member)
        *bad_member = i;
      return LAYOUT_ERR_MEMBER_TOO_SMALL;
    }
  }

  /* Zones, as md raid0's create_strip_zones: each zone ends at the next
   * smallest member size above the previous zone's end, and stripes over
   * every member (in index order) that reaches past the previous end.
   */
  for (;;) {
    uint64_t next = UINT64_MAX;
    struct layout_zone *z = &l->zones[l->nr_zones];

    for (unsigned i = 0; i < nr_members; ++i) {
      uint64_t c = l->member_size[i] / chunk;
      if (c > level && c < next)
        next = c;
    }
    if (next == UINT64_MAX)
      break;

    z->dev_start = level * chunk;
    for (unsigned i = 0; i < nr_members; ++i)
      if (l->member_size[i] / chunk > level)
        z->devs[z->nr_devs++] = i;

    /* (next - level) * nr_devs * chunk must not overflow 64 bits. */
    uint64_t rows = next - level;
    if (rows > UINT64_MAX / z->nr_devs / chunk)
      return LAYOUT_ERR_TOO_BIG;
    uint64_t bytes = rows * z->nr_devs * chunk;
    if (logical > UINT64_MAX - bytes)
      return LAYOUT_ERR_TOO_BIG;
    z->start = logical;
    z->end = logical + bytes;
    /* The original layout picks a zone's member by the volume's chunk
     * number, not the zone's: the members rotate by the chunks before
     * the zone.
     */
    if (id == LAYOUT_MD_ORIG) {
      unsigned members[LAYOUT_MAX_MEMBERS];
      z->shift = z->start / chunk % z->nr_devs;
      memcpy (members, z->devs, z->nr_devs * sizeof members[0]);
      for (unsigned d = 0; d < z->nr_devs; ++d)
        z->devs[d] = members[(d + z->shift) % z->nr_devs];
    }
    logical = z->end;
    level = next;
    l->nr_zones++;
  }
  l->size = logical;
  if (rule == LAYOUT_SIZE_MD) {
    /* raid0_size: each rounded member size, in sectors, masked with
     * ~(chunk sectors - 1) -- a no-op for a power-of-two chunk.
     */
    uint64_t mask = ~(chunk / 512 - 1), sectors = 0;
    for (unsigned i = 0; i < nr_members; ++i)
      sectors += (l->member_size[i] / 512) & mask;
    l->size = sectors * 512;
  }
  return LAYOUT_OK;
}

bool
layout_md_layouts_agree (uint64_t chunk, unsigned nr_members,
                         const uint64_t *member_sizes)
{
  struct layout l;

  if (layout_init_as (&l, LAYOUT_MD_ORIG, LAYOUT_SIZE_MD, chunk, nr_members,
                      member_sizes, NULL)
      != LAYOUT_OK)
    return true; /* nothing to serve either way */
  for (unsigned z = 0; z < l.nr_zones; ++z)
    if (l.zones[z].shift != 0)
      return false;
  return true;
}

const char *
layout_name (uint32_t id)
{
  switch (id) {
  case LAYOUT_MD_ORIG: return "original";
  case LAYOUT_MD_ALT: return "alternate";
  }
  return NULL;
}

uint32_t
layout_parse_name (const char *name)
{
  if (strcmp (name, "original") == 0 || strcmp (name, "1") == 0)
    return LAYOUT_MD_ORIG;
  if (strcmp (name, "alternate") == 0 || strcmp (name, "2") == 0)
    return LAYOUT_MD_ALT;
  return 0;
}

const char *
layout_strerror (enum layout_error err)
{
  switch (err) {
  case LAYOUT_OK: return "no error";
  case LAYOUT_ERR_NO_MEMBERS: return "no members";
  case LAYOUT_ERR_TOO_MANY_MEMBERS: return "too many members (at most 64)";
  case LAYOUT_ERR_CHUNK:
    return "chunk size must be a non-zero multiple of 4096 bytes";
  case LAYOUT_ERR_MEMBER_TOO_SMALL: return "member is smaller than one chunk";
  case LAYOUT_ERR_TOO_BIG: return "volume size overflows 64 bits";
  case LAYOUT_ERR_ID:
    return "unknown layout (md raid0's are 1, original, and 2, alternate)";
  }
  return "unknown layout error";
}

static const struct layout_zone *
find_zone (const struct layout *l, uint64_t offset)
{
  for (unsigned z = 0; z < l->nr_zones; ++z)
    if (offset < l->zones[z].end)
      return &l->zones[z];
  assert (!"offset beyond the end of the volume");
  return NULL;
}

void
layout_map (const struct layout *l, uint64_t offset, uint64_t count,
            struct layout_piece *piece)
{
  const struct layout_zone *z = find_zone (l, offset);
  uint64_t rel = offset - z->start;
  uint64_t chunk_nr = rel / l->chunk; /* zone-relative chunk */
  uint64_t in_chunk = rel % l->chunk;
  uint64_t len = l->chunk - in_chunk;

  if (len > count)
    len = count;
  piece->offset = offset;
  piece->length = len;
  piece->member = z->devs[chunk_nr % z->nr_devs];
  piece->member_offset =
    z->dev_start + chunk_nr / z->nr_devs * l->chunk + in_chunk;
}

unsigned
layout_spans (const struct layout *l, uint64_t offset, uint64_t count,
              struct layout_span *spans)
{
  const uint64_t chunk = l->chunk;
  const uint64_t end = offset + count;
  unsigned touched = 0;

  memset (spans, 0, l->nr_members * sizeof *spans);

  /* Per zone and member, find the first and last chunk of that member the
   * request touches; everything in between is whole chunks.  O(zones * N),
   * whatever the request size.
   */
  for (unsigned zi = 0; zi < l->nr_zones; ++zi) {
    const struct layout_zone *z = &l->zones[zi];
    if (end <= z->start || offset >= z->end)
      continue;
    uint64_t a = (offset > z->start ? offset : z->start) - z->start;
    uint64_t b = (end < z->end ? end : z->end) - z->start;
    uint64_t nd = z->nr_devs;
    uint64_t c0 = a / chunk, cl = (b - 1) / chunk;
    uint64_t a_in = a - c0 * chunk, b_in = b - cl * chunk; /* in chunk */
    struct layout_cut cut;

    layout_cut_init (&cut, nd, c0, cl);
    for (unsigned d = 0; d < nd; ++d) {
      uint64_t k1, k2, row1, row2;
      if (!layout_member_chunks (&cut, d, &k1, &k2, &row1, &row2))
        continue;
      uint64_t first = z->dev_start + row1 * chunk + (k1 == c0 ? a_in : 0);
      uint64_t last_end =
        z->dev_start + row2 * chunk + (k2 == cl ? b_in : chunk);
      struct layout_span *s = &spans[z->devs[d]];

      if (!s->touched) {
        s->touched = true;
        s->member_offset = first;
        touched++;
      }
      s->length = last_end - s->member_offset;
      s->nr_pieces += row2 - row1 + 1;
    }
  }
  return touched;
}

bool
layout_unmap (const struct layout *l, unsigned member, uint64_t member_offset,
              uint64_t *offset)
{
  for (unsigned zi = 0; zi < l->nr_zones; ++zi) {
    const struct layout_zone *z = &l->zones[zi];
    uint64_t rows = (z->end - z->start) / z->nr_devs / l->chunk;
    uint64_t rel = member_offset - z->dev_start;
    unsigned d;

    if (member_offset < z->dev_start || rel >= rows * l->chunk)
      continue;
    for (d = 0; d < z->nr_devs; ++d)
      if (z->devs[d] == member)
        break;
    if (d == z->nr_devs)
      return false;
    *offset =
      z->start + (rel / l->chunk * z->nr_devs + d) * l->chunk + rel % l->chunk;
    return *offset < l->size; /* md's size rule may end it early */
  }
  return false;
}
