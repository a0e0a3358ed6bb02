/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdkit-flushlat-filter: a drive whose cache flush takes a fixed time.
 *
 * For bench/stripe-bench --fsync --flush-us: each member (and the file
 * plugin's reference file) is a file in RAM served by nbdkit behind this
 * filter, so that every member is an independent drive with a real
 * flush cost, which files on the one virtual disk of a development
 * machine are not (all their flushes are flushes of the same device).
 *
 * One server is one drive.  Its flushes behave like a drive behind the
 * Linux block layer (block/blk-flush.c): one cache flush at a time; a
 * flush request that arrives while one runs is not covered by it (its
 * write may have landed after that flush began), so it waits, and the
 * next flush serves every request that waited for it.  Each cache
 * flush takes flush-us microseconds.  A write, zero or trim with FUA
 * costs a flush too.  Nothing else is delayed.  Not installed.
 */

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <nbdkit-filter.h>

static unsigned flush_us = 1000;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t flushed = PTHREAD_COND_INITIALIZER;
static uint64_t started;   /* cache flushes begun */
static uint64_t completed; /* cache flushes ended */
static bool running;

static int
flushlat_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
                 const char *key, const char *value)
{
  if (strcmp (key, "flush-us") == 0)
    return nbdkit_parse_unsigned ("flush-us", value, &flush_us);
  return next (nxdata, key, value);
}

/* Returns once a cache flush that began after the call has ended. */
static void
drive_flush (void)
{
  struct timespec ts = { .tv_sec = flush_us / 1000000,
                         .tv_nsec = (flush_us % 1000000) * 1000L };
  uint64_t need;

  pthread_mutex_lock (&lock);
  need = started + 1;
  while (completed < need) {
    if (running) {
      pthread_cond_wait (&flushed, &lock);
      continue;
    }
    running = true;
    started++;
    pthread_mutex_unlock (&lock);
    while (clock_nanosleep (CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
      ;
    pthread_mutex_lock (&lock);
    running = false;
    completed++;
    pthread_cond_broadcast (&flushed);
  }
  pthread_mutex_unlock (&lock);
}

static int
flushlat_flush (nbdkit_next *next, void *handle __attribute__ ((unused)),
                uint32_t flags, int *err)
{
  if (next->flush (next, flags, err) == -1)
    return -1;
  drive_flush ();
  return 0;
}

static int
flushlat_pwrite (nbdkit_next *next, void *handle __attribute__ ((unused)),
                 const void *buf, uint32_t count, uint64_t offset,
                 uint32_t flags, int *err)
{
  if (next->pwrite (next, buf, count, offset, flags, err) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    drive_flush ();
  return 0;
}

static int
flushlat_zero (nbdkit_next *next, void *handle __attribute__ ((unused)),
               uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (next->zero (next, count, offset, flags, err) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    drive_flush ();
  return 0;
}

static int
flushlat_trim (nbdkit_next *next, void *handle __attribute__ ((unused)),
               uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  if (next->trim (next, count, offset, flags, err) == -1)
    return -1;
  if (flags & NBDKIT_FLAG_FUA)
    drive_flush ();
  return 0;
}

static struct nbdkit_filter filter = {
  .name = "flushlat",
  .longname = "nbdstripe bench: a drive's cache flush latency",
  .config = flushlat_config,
  .config_help =
    "flush-us=<N>     Microseconds one cache flush takes (default 1000).",
  .flush = flushlat_flush,
  .pwrite = flushlat_pwrite,
  .zero = flushlat_zero,
  .trim = flushlat_trim,
};

NBDKIT_REGISTER_FILTER (filter)
