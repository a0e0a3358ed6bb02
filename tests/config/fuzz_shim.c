/* The two cache-mode functions config.c uses, for the fuzz target only.
 *
 * They live in plugin/volume.c, which would drag the whole I/O engine
 * (io_uring, threads, members) into the fuzzer for two string lookups.
 * Keep in step with volume.c; test_config links the real ones and checks
 * that every name the loader accepts is known to the engine.
 */

#include <string.h>

#include "volume.h"

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

int
cache_mode_parse (const char *name, enum cache_mode *mode)
{
  for (enum cache_mode m = CACHE_WRITEBACK; m <= CACHE_DIRECT; ++m)
    if (strcmp (name, cache_mode_name (m)) == 0) {
      *mode = m;
      return 0;
    }
  return -1;
}
