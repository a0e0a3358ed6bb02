/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the allocation map's size, pure arithmetic (alloc.h): here,
 * below both its users, create's metadata (meta/) and the volume (core/).
 */

#include <stdbool.h>
#include <stdint.h>

#include "alloc.h"
#include "header.h"

bool
alloc_plan (uint64_t size, uint64_t max_size, uint64_t room, unsigned *shift,
            uint64_t *bytes)
{
  unsigned s = ALLOC_SHIFT_MIN;
  uint64_t regions, need;

  room = room / ALLOC_BLOCK * ALLOC_BLOCK;
  if (room == 0 || size == 0)
    return false;
  if (max_size < size)
    max_size = size;
  while (s < ALLOC_SHIFT_MAX && (size - 1) >> s >= 4096)
    ++s;
  /* The largest volume the members can make, if room holds its map;
   * else what room holds, in coarser regions if this volume needs them.
   */
  for (;;) {
    regions = ((max_size - 1) >> s) + 1;
    need = (regions + ALLOC_BLOCK_BITS - 1) / ALLOC_BLOCK_BITS * ALLOC_BLOCK;
    if (need <= room)
      break;
    if (((size - 1) >> s) + 1 <= room * 8) {
      need = room;
      break;
    }
    if (++s > HEADER_MAP_SHIFT_MAX)
      return false;
  }
  *shift = s;
  *bytes = need;
  return true;
}
