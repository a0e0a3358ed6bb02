/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-powercut-filter: a drive with a volatile write cache, for the
 * crash tests (tests/crash).  Not installed.
 *
 * kill -9 of a server is not a power cut: the page cache keeps every
 * write the server had made, flushed or not.  A drive that loses power
 * keeps what it was told to make durable (a completed flush, a FUA
 * write) and any subset of the rest.  This filter is that drive: a write
 * (a write of zeroes: nbdkit emulates it with writes) is kept in this
 * process's memory, and reaches the plugin below (a file) only when a
 * flush makes it durable, or at once when it carries FUA.  Reads see
 * the newest data, as a drive's cache serves them.  A trim, and a zero
 * that may trim, deallocate: through at once (powercut_zero).
 *
 * The cut is the server's death (kill -9): what was only in memory is
 * gone.  powercut-keep=P (0..100, default 0) lets each write that is not
 * made durable at once reach the plugin anyway with probability P%, as
 * a drive that wrote part of its cache before the power went (the
 * choices drawn from powercut-seed=N, default 1, in the order writes
 * arrive): so a cut drops all of the writes no flush covered, or a
 * seeded random subset of them.
 *
 * powercut-lie=1 is a drive that lies: flush and FUA are answered at
 * once and make nothing durable.  A test that cannot tell such a drive
 * from an honest one tests nothing (tests/crash/crash.py --lie).
 *
 * The cache is by 512-byte sector, whole for the drive: every
 * connection sees the same (multi-conn is safe).  A trim drops what the
 * cache holds there and goes through at once; block status is not
 * offered (the plugin below would report holes the cache has filled).
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#define SECTOR 512u

struct sector {
  uint64_t n; /* sector number + 1; 0: free slot */
  uint8_t data[SECTOR];
};

static unsigned keep;     /* percent */
static unsigned seed = 1;
static bool lie;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Open addressing, linear probing; a power of two in size. */
static struct sector *table;
static size_t cap, used;
static uint64_t rng;

static int
powercut_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "powercut-keep") == 0) {
    if (nbdkit_parse_unsigned (key, value, &keep) == -1)
      return -1;
    if (keep > 100) {
      nbdkit_error ("powercut-keep: a percentage, 0 to 100");
      return -1;
    }
    return 0;
  }
  if (strcmp (key, "powercut-seed") == 0)
    return nbdkit_parse_unsigned (key, value, &seed);
  if (strcmp (key, "powercut-lie") == 0) {
    int r = nbdkit_parse_bool (value);
    if (r == -1)
      return -1;
    lie = r;
    return 0;
  }
  return next (nxdata, key, value);
}

#define powercut_config_help                                                  \
  "powercut-keep=PERCENT   Unflushed writes kept at a cut (default 0).\n"   \
  "powercut-seed=N         Seed of which are kept (default 1).\n"           \
  "powercut-lie=BOOL       Flush and FUA make nothing durable."

static int
powercut_get_ready (int thread_model)
{
  (void) thread_model;
  rng = seed * UINT64_C (0x9e3779b97f4a7c15) + 1;
  cap = 1024;
  table = calloc (cap, sizeof *table);
  return table ? 0 : -1;
}

/* xorshift64*: the order of draws is the order of writes. */
static unsigned
draw_percent (void)
{
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return (unsigned) ((rng * UINT64_C (2685821657736338717)) >> 33) % 100;
}

static size_t
slot_of (uint64_t n)
{
  size_t i = (size_t) ((n * UINT64_C (0x9e3779b97f4a7c15)) >> 20) & (cap - 1);

  while (table[i].n != 0 && table[i].n != n + 1)
    i = (i + 1) & (cap - 1);
  return i;
}

static int
grow (void)
{
  struct sector *old = table;
  size_t oldcap = cap;

  table = calloc (cap * 2, sizeof *table);
  if (table == NULL) {
    table = old;
    return -1;
  }
  cap *= 2;
  for (size_t i = 0; i < oldcap; ++i)
    if (old[i].n)
      table[slot_of (old[i].n - 1)] = old[i];
  free (old);
  return 0;
}

/* Sector n's data into the cache (lock held). */
static int
put (uint64_t n, const uint8_t *data)
{
  size_t i;

  if ((used + 1) * 2 > cap && grow () == -1)
    return -1;
  i = slot_of (n);
  if (table[i].n == 0) {
    table[i].n = n + 1;
    used++;
  }
  memcpy (table[i].data, data, SECTOR);
  return 0;
}

/* Every cached sector to the plugin below, then nothing cached (lock
 * held).
 */
static int
write_back (nbdkit_next *next, int *err)
{
  for (size_t i = 0; i < cap; ++i)
    if (table[i].n) {
      if (next->pwrite (next, table[i].data, SECTOR,
                        (table[i].n - 1) * SECTOR, 0, err)
          == -1)
        return -1;
      table[i].n = 0;
    }
  used = 0;
  return 0;
}

/* Sectors [first, first + count) out of the cache (lock held). */
static void
forget (uint64_t first, uint64_t count)
{
  bool any = false;

  for (uint64_t n = first; n < first + count; ++n) {
    size_t i = slot_of (n);
    if (table[i].n) {
      table[i].n = 0;
      used--;
      any = true;
    }
  }
  /* Linear probing: what follows a freed slot is put back in place. */
  if (any) {
    struct sector *old = table;
    table = calloc (cap, sizeof *table);
    if (table == NULL) {
      table = old; /* keep the old, with holes: lookups may miss */
      return;
    }
    for (size_t i = 0; i < cap; ++i)
      if (old[i].n)
        table[slot_of (old[i].n - 1)] = old[i];
    free (old);
  }
}

static int
powercut_can_fua (nbdkit_next *next, void *handle)
{
  (void) handle;
  /* FUA is ours: a write through, then the plugin's flush. */
  if (next->can_flush (next) != 1) {
    nbdkit_error ("powercut: the plugin below cannot flush");
    return -1;
  }
  return NBDKIT_FUA_NATIVE;
}

static int
powercut_can_flush (nbdkit_next *next, void *handle)
{
  (void) handle;
  /* nbdkit asks a backend before it may be flushed. */
  if (next->can_flush (next) != 1) {
    nbdkit_error ("powercut: the plugin below cannot flush");
    return -1;
  }
  return 1;
}

static int
powercut_can_multi_conn (nbdkit_next *next, void *handle)
{
  (void) next;
  (void) handle;
  return 1;
}

static int
powercut_can_zero (nbdkit_next *next, void *handle)
{
  (void) handle;
  return next->can_zero (next) > NBDKIT_ZERO_NONE ? NBDKIT_ZERO_NATIVE
                                                  : NBDKIT_ZERO_EMULATE;
}

static int
powercut_can_trim (nbdkit_next *next, void *handle)
{
  (void) handle;
  return next->can_trim (next);
}

static int
powercut_can_extents (nbdkit_next *next, void *handle)
{
  (void) next;
  (void) handle;
  return 0;
}

static int
powercut_can_cache (nbdkit_next *next, void *handle)
{
  (void) next;
  (void) handle;
  return NBDKIT_CACHE_NONE;
}

static int
powercut_can_fast_zero (nbdkit_next *next, void *handle)
{
  (void) handle;
  return next->can_zero (next) > NBDKIT_ZERO_NONE;
}

/* Reads see the cache over the plugin, in whole sectors (a read that is
 * not is widened and cut back).
 */
static int
powercut_pread (nbdkit_next *next, void *handle, void *buf, uint32_t count,
                uint64_t offset, uint32_t flags, int *err)
{
  uint64_t first = offset / SECTOR;
  uint64_t end = (offset + count + SECTOR - 1) / SECTOR;
  uint8_t *p;
  int r = 0;

  (void) handle;
  p = malloc ((end - first) * SECTOR);
  if (p == NULL) {
    *err = ENOMEM;
    return -1;
  }
  pthread_mutex_lock (&lock);
  if (next->pread (next, p, (end - first) * SECTOR, first * SECTOR, flags,
                   err)
      == -1)
    r = -1;
  else {
    for (uint64_t n = first; n < end; ++n) {
      size_t i = slot_of (n);
      if (table[i].n)
        memcpy (p + (n - first) * SECTOR, table[i].data, SECTOR);
    }
    memcpy (buf, p + (offset - first * SECTOR), count);
  }
  pthread_mutex_unlock (&lock);
  free (p);
  return r;
}

static int
powercut_pwrite (nbdkit_next *next, void *handle, const void *buf,
                 uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  const uint8_t *p = buf;
  int r = 0;

  (void) handle;
  if (offset % SECTOR || count % SECTOR) {
    nbdkit_error ("powercut: write of %u bytes at %" PRIu64 " is not in "
                  "whole sectors", count, offset);
    *err = EINVAL;
    return -1;
  }
  pthread_mutex_lock (&lock);
  if ((flags & NBDKIT_FLAG_FUA) && !lie) {
    /* Durable now: through, and out of the cache (older cached data of
     * these sectors must not come back at the next flush).
     */
    forget (offset / SECTOR, count / SECTOR);
    r = next->pwrite (next, buf, count, offset, 0, err);
    if (r == 0)
      r = next->flush (next, 0, err);
  }
  else if (keep > 0 && draw_percent () < keep) {
    /* This one reaches the plugin whatever happens: in the cache too,
     * so that the order of writes to a sector stays as it was.
     */
    r = next->pwrite (next, buf, count, offset, 0, err);
    for (uint64_t s = 0; r == 0 && s < count / SECTOR; ++s)
      if (put (offset / SECTOR + s, p + s * SECTOR) == -1) {
        *err = ENOMEM;
        r = -1;
      }
  }
  else
    for (uint64_t s = 0; r == 0 && s < count / SECTOR; ++s)
      if (put (offset / SECTOR + s, p + s * SECTOR) == -1) {
        *err = ENOMEM;
        r = -1;
      }
  pthread_mutex_unlock (&lock);
  return r;
}

static int
powercut_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  int r = 0;

  (void) handle;
  if (lie)
    return 0;
  pthread_mutex_lock (&lock);
  if (write_back (next, err) == -1 || next->flush (next, flags, err) == -1)
    r = -1;
  pthread_mutex_unlock (&lock);
  return r;
}

/* A trim forgets what the cache holds there and reaches the plugin at
 * once (a drive may make it durable whenever it likes: here, at once).
 */
static int
powercut_trim (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  int r;

  (void) handle;
  pthread_mutex_lock (&lock);
  r = next->trim (next, count, offset, flags & ~NBDKIT_FLAG_FUA, err);
  if (r == 0 && offset % SECTOR == 0 && count % SECTOR == 0)
    forget (offset / SECTOR, count / SECTOR);
  pthread_mutex_unlock (&lock);
  return r;
}

/* A zero that may trim is a deallocation, as a trim is (the volume's
 * trims of whole allocation-map regions come as these): the cache
 * forgets the range and it reaches the plugin at once.  Any other zero
 * is zeros written, through the cache; a fast one is refused (it would
 * be writes).
 */
static int
powercut_zero (nbdkit_next *next, void *handle, uint32_t count,
               uint64_t offset, uint32_t flags, int *err)
{
  static const uint8_t zeros[64 * SECTOR];
  int r = 0;

  if (flags & NBDKIT_FLAG_MAY_TRIM) {
    pthread_mutex_lock (&lock);
    r = next->zero (next, count, offset,
                    flags & ~(NBDKIT_FLAG_FUA | NBDKIT_FLAG_FAST_ZERO), err);
    if (r == 0 && offset % SECTOR == 0 && count % SECTOR == 0)
      forget (offset / SECTOR, count / SECTOR);
    pthread_mutex_unlock (&lock);
    return r;
  }
  if (flags & NBDKIT_FLAG_FAST_ZERO) {
    *err = ENOTSUP;
    return -1;
  }
  while (r == 0 && count > 0) {
    uint32_t n = count < sizeof zeros ? count : sizeof zeros;
    r = powercut_pwrite (next, handle, zeros, n, offset,
                         flags & NBDKIT_FLAG_FUA, err);
    offset += n;
    count -= n;
  }
  return r;
}

static struct nbdkit_filter filter = {
  .name           = "powercut",
  .longname       = "nbdstripe test: a drive that loses unflushed writes",
  .config         = powercut_config,
  .config_help    = powercut_config_help,
  .get_ready      = powercut_get_ready,
  .can_fua        = powercut_can_fua,
  .can_flush      = powercut_can_flush,
  .can_multi_conn = powercut_can_multi_conn,
  .can_zero       = powercut_can_zero,
  .can_trim       = powercut_can_trim,
  .can_extents    = powercut_can_extents,
  .can_cache      = powercut_can_cache,
  .can_fast_zero  = powercut_can_fast_zero,
  .pread          = powercut_pread,
  .pwrite         = powercut_pwrite,
  .flush          = powercut_flush,
  .trim           = powercut_trim,
  .zero           = powercut_zero,
};

NBDKIT_REGISTER_FILTER (filter)
