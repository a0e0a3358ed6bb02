/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: brute-force layout oracle.  See oracle.h. */

#include <stdlib.h>
#include <string.h>

#include "oracle.h"

int
oracle_init (struct oracle *o, uint64_t chunk, unsigned n,
             const uint64_t *sizes)
{
  return oracle_init_as (o, ORACLE_ALT, chunk, n, sizes);
}

int
oracle_init_as (struct oracle *o, unsigned layout, uint64_t chunk, unsigned n,
                const uint64_t *sizes)
{
  uint64_t rows[ORACLE_MAX_MEMBERS], max_rows = 0, k = 0;
  unsigned prev_width = 0;

  memset (o, 0, sizeof *o);
  if (chunk == 0 || n == 0 || n > ORACLE_MAX_MEMBERS
      || (layout != ORACLE_ORIG && layout != ORACLE_ALT))
    return -1;
  o->layout = layout;
  o->chunk = chunk;
  o->nr_members = n;
  for (unsigned i = 0; i < n; i++) {
    o->raw_size[i] = sizes[i];
    rows[i] = sizes[i] / chunk;
    if (rows[i] == 0)
      return -1;
    o->usable[i] = rows[i] * chunk;
    o->member_chunks[i] = rows[i];
    o->nr_chunks += rows[i];
    if (rows[i] > max_rows)
      max_rows = rows[i];
  }
  /* md's raid0_size: sectors of each rounded member, masked. */
  o->size = 0;
  for (unsigned i = 0; i < n; i++)
    o->size += ((o->usable[i] >> 9) & ~(chunk / 512 - 1)) << 9;
  o->chunk_member = calloc (o->nr_chunks, sizeof *o->chunk_member);
  o->chunk_row = calloc (o->nr_chunks, sizeof *o->chunk_row);
  o->nr_rows = max_rows;
  o->row_start = calloc (max_rows + 1, sizeof *o->row_start);
  if (!o->chunk_member || !o->chunk_row || !o->row_start)
    return -1;
  for (unsigned i = 0; i < n; i++) {
    o->rev[i] = calloc (rows[i], sizeof *o->rev[i]);
    if (!o->rev[i])
      return -1;
  }

  /* Fill row by row. */
  for (uint64_t r = 0; r < max_rows; r++) {
    unsigned width = 0;
    for (unsigned i = 0; i < n; i++)
      if (r < rows[i])
        width++;
    if (r > 0 && width != prev_width)
      o->boundary[o->nr_boundaries++] = k * chunk;
    prev_width = width;
    o->row_start[r] = k;
    /* The row's members, in index order; ALT: the row's first chunk goes
     * to the first of them.  ORIG: logical chunk c goes to the
     * (c mod width)-th of them (md before 3.14 mapped the volume's
     * chunk number, not the zone's).
     */
    unsigned in_row[ORACLE_MAX_MEMBERS], w = 0;
    for (unsigned i = 0; i < n; i++)
      if (r < rows[i])
        in_row[w++] = i;
    for (unsigned j = 0; j < w; j++) {
      unsigned i = layout == ORACLE_ALT ? in_row[j] : in_row[(k % w)];
      o->chunk_member[k] = i;
      o->chunk_row[k] = r;
      o->rev[i][r] = k;
      k++;
    }
  }
  o->row_start[max_rows] = k;
  return 0;
}

void
oracle_free (struct oracle *o)
{
  free (o->chunk_member);
  free (o->chunk_row);
  free (o->row_start);
  for (unsigned i = 0; i < o->nr_members; i++)
    free (o->rev[i]);
  memset (o, 0, sizeof *o);
}

uint64_t
oracle_map (const struct oracle *o, uint64_t off, unsigned *member,
            uint64_t *member_off)
{
  uint64_t k = off / o->chunk, in = off % o->chunk;
  *member = o->chunk_member[k];
  *member_off = o->chunk_row[k] * o->chunk + in;
  return o->chunk - in;
}

bool
oracle_unmap (const struct oracle *o, unsigned member, uint64_t member_off,
              uint64_t *off)
{
  if (member >= o->nr_members || member_off >= o->usable[member])
    return false;
  *off =
    o->rev[member][member_off / o->chunk] * o->chunk + member_off % o->chunk;
  return *off < o->size; /* md's size rule may end the volume early */
}

unsigned
oracle_width_at (const struct oracle *o, uint64_t off)
{
  uint64_t row = o->chunk_row[off / o->chunk];
  unsigned w = 0;
  for (unsigned i = 0; i < o->nr_members; i++)
    if (row * o->chunk < o->usable[i])
      w++;
  return w;
}
