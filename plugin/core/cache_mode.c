/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: cache mode names (include/cache_mode.h).
 * A file of its own so that the config loader can use them without the
 * I/O engine (its fuzz target links the loader's files, config_text.c,
 * log.c and this).
 */

#include <string.h>

#include "cache_mode.h"

const char *
cache_mode_name (enum cache_mode mode)
{
  switch (mode) {
  case CACHE_WRITEBACK: return "writeback";
  case CACHE_WRITETHROUGH: return "writethrough";
  case CACHE_DIRECT: return "direct";
  }
  return "?";
}

/* Ours, and nbdkit-file-plugin(1)'s cache= words as aliases: "default"
 * is the page cache (writeback); "none" keeps data out of the page cache,
 * which nbdkit does by evicting after each request and we do with
 * O_DIRECT (direct).  Both are durable on FLUSH/FUA alone.
 */
int
cache_mode_parse (const char *name, enum cache_mode *mode)
{
  for (enum cache_mode m = CACHE_WRITEBACK; m <= CACHE_DIRECT; ++m)
    if (strcmp (name, cache_mode_name (m)) == 0) {
      *mode = m;
      return 0;
    }
  if (strcmp (name, "default") == 0) {
    *mode = CACHE_WRITEBACK;
    return 0;
  }
  if (strcmp (name, "none") == 0) {
    *mode = CACHE_DIRECT;
    return 0;
  }
  return -1;
}
