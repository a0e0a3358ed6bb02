/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the allocation map.  See include/alloc.h for the promise
 * and why it holds.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "alloc.h"
#include "ioexec.h"
#include "log.h"
#include "member.h"

int
alloc_init (struct alloc *a, unsigned shift, uint64_t map_offset,
            uint64_t map_bytes)
{
  uint64_t words = map_bytes / 8;

  memset (a, 0, sizeof *a);
  pthread_mutex_init (&a->lock, NULL);
  a->inited = true;
  a->shift = shift;
  a->map_offset = map_offset;
  a->map_bytes = map_bytes;
  a->nr_regions = map_bytes * 8;
  a->nr_blocks = map_bytes / ALLOC_BLOCK;
  a->bits = calloc (words, sizeof *a->bits);
  a->durable = calloc (words, sizeof *a->durable);
  a->dirty = calloc ((a->nr_blocks + 63) / 64, sizeof *a->dirty);
  if (posix_memalign ((void **) &a->buf, 4096, ALLOC_BATCH * ALLOC_BLOCK) != 0)
    a->buf = NULL;
  if (a->bits == NULL || a->durable == NULL || a->dirty == NULL
      || a->buf == NULL) {
    alloc_free (a);
    errno = ENOMEM;
    return -1;
  }
  for (uint64_t w = 0; w < words; ++w) {
    atomic_init (&a->bits[w], UINT64_MAX);
    atomic_init (&a->durable[w], UINT64_MAX);
  }
  return 0;
}

void
alloc_free (struct alloc *a)
{
  if (a->inited)
    pthread_mutex_destroy (&a->lock);
  free ((void *) a->bits);
  free ((void *) a->durable);
  free ((void *) a->dirty);
  free (a->buf);
  memset (a, 0, sizeof *a);
}

void
alloc_load_begin (struct alloc *a)
{
  for (uint64_t w = 0; w < a->map_bytes / 8; ++w) {
    atomic_store (&a->bits[w], 0);
    atomic_store (&a->durable[w], UINT64_MAX);
  }
}

/* bits: the union of the copies; durable: their intersection. */
void
alloc_merge (struct alloc *a, const uint8_t *copy)
{
  for (uint64_t w = 0; w < a->map_bytes / 8; ++w) {
    uint64_t x = 0;
    for (unsigned b = 0; b < 8; ++b)
      x |= (uint64_t) copy[8 * w + b] << (8 * b);
    atomic_fetch_or (&a->bits[w], x);
    atomic_fetch_and (&a->durable[w], x);
  }
}

/* A region in use on some copies only (a crash or a failure between
 * the members' writes) is not durable: on a member that leaves (a
 * shrink) or goes missing it could be all there was of it.  Its block
 * is written to every member at the next alloc_sync.
 */
void
alloc_loaded (struct alloc *a)
{
  for (uint64_t w = 0; w < a->map_bytes / 8; ++w) {
    uint64_t blk = w * 64 / ALLOC_BLOCK_BITS;
    if (atomic_load (&a->bits[w]) != atomic_load (&a->durable[w]))
      atomic_fetch_or (&a->dirty[blk / 64], UINT64_C (1) << (blk % 64));
  }
}

/* Region r's bit set (in bits), then its block marked dirty: in this
 * order (alloc.h).
 */
bool
alloc_mark_slow (struct alloc *a, uint64_t r0, uint64_t r1)
{
  bool durable = true;

  if (r1 >= a->nr_regions) /* past the map (cannot be: the volume fits) */
    r1 = a->nr_regions - 1;
  for (uint64_t r = r0; r <= r1; ++r) {
    uint64_t blk = r / ALLOC_BLOCK_BITS;

    if (alloc_test (a->durable, r))
      continue;
    durable = false;
    if (!alloc_test (a->bits, r))
      atomic_fetch_or (&a->bits[r / 64], UINT64_C (1) << (r % 64));
    else
      atomic_thread_fence (memory_order_seq_cst);
    if (!(atomic_load (&a->dirty[blk / 64]) >> (blk % 64) & 1))
      atomic_fetch_or (&a->dirty[blk / 64], UINT64_C (1) << (blk % 64));
  }
  return durable;
}

bool
alloc_any (struct alloc *a, uint64_t offset, uint64_t count, bool *all)
{
  uint64_t r0 = offset >> a->shift, r1 = (offset + count - 1) >> a->shift;
  bool any = false;

  *all = true;
  for (uint64_t r = r0; r <= r1; ++r) {
    if (r < a->nr_regions && !alloc_test (a->bits, r))
      *all = false;
    else
      any = true;
  }
  return any;
}

uint64_t
alloc_run (struct alloc *a, uint64_t offset, uint64_t end, bool *used)
{
  uint64_t r = offset >> a->shift, next;

  *used = r >= a->nr_regions || alloc_test (a->bits, r);
  for (;;) {
    next = (r + 1) << a->shift;
    if (next >= end)
      return end;
    ++r;
    if ((r >= a->nr_regions || alloc_test (a->bits, r)) != *used)
      return next;
  }
}

/* Whole words counted at once: the status asks every few seconds, and
 * a large volume's map has millions of regions.
 */
uint64_t
alloc_used_bytes (struct alloc *a, uint64_t size)
{
  const uint64_t region = UINT64_C (1) << a->shift;
  uint64_t regions = size == 0 ? 0 : ((size - 1) >> a->shift) + 1;
  uint64_t r = 0, n = 0, used;

  if (regions > a->nr_regions)
    regions = a->nr_regions;
  for (; r + 64 <= regions; r += 64)
    n += __builtin_popcountll (atomic_load (&a->bits[r / 64]));
  for (; r < regions; ++r)
    n += alloc_test (a->bits, r);
  used = n << a->shift;
  /* The last region may pass the end of the volume; past the map, all
   * in use (it never is: the map covers the volume).
   */
  if (regions > 0 && alloc_test (a->bits, regions - 1)
      && regions << a->shift > size)
    used -= (regions << a->shift) - size;
  if (size > a->nr_regions * region)
    used += size - a->nr_regions * region;
  return used;
}

uint64_t
alloc_clear (struct alloc *a, uint64_t offset, uint64_t count)
{
  uint64_t region = UINT64_C (1) << a->shift;
  uint64_t r0 = (offset + region - 1) >> a->shift;
  uint64_t r1 = (offset + count) >> a->shift; /* exclusive */
  uint64_t cleared = 0;

  if (r1 > a->nr_regions)
    r1 = a->nr_regions;
  if (r0 >= r1)
    return 0;
  pthread_mutex_lock (&a->lock);
  for (uint64_t r = r0; r < r1; ++r) {
    uint64_t bit = UINT64_C (1) << (r % 64), blk = r / ALLOC_BLOCK_BITS;

    if (!alloc_test (a->bits, r))
      continue;
    atomic_fetch_and (&a->durable[r / 64], ~bit);
    atomic_fetch_and (&a->bits[r / 64], ~bit);
    atomic_fetch_or (&a->dirty[blk / 64], UINT64_C (1) << (blk % 64));
    ++cleared;
  }
  pthread_mutex_unlock (&a->lock);
  return cleared;
}

void
alloc_dirty_all (struct alloc *a)
{
  for (uint64_t blk = 0; blk < a->nr_blocks; ++blk)
    atomic_fetch_or (&a->dirty[blk / 64], UINT64_C (1) << (blk % 64));
}

/* Block blk of bits, as the members keep it (little-endian). */
static void
encode_block (struct alloc *a, uint64_t blk, uint8_t *out)
{
  const uint64_t w0 = blk * (ALLOC_BLOCK / 8);

  for (unsigned w = 0; w < ALLOC_BLOCK / 8; ++w) {
    uint64_t x = atomic_load (&a->bits[w0 + w]);
    for (unsigned b = 0; b < 8; ++b)
      out[8 * w + b] = x >> (8 * b);
  }
}

/* Block blk is on the members as written holds it. */
static void
set_durable (struct alloc *a, uint64_t blk, const uint8_t *written)
{
  const uint64_t w0 = blk * (ALLOC_BLOCK / 8);

  for (unsigned w = 0; w < ALLOC_BLOCK / 8; ++w) {
    uint64_t x = 0;
    for (unsigned b = 0; b < 8; ++b)
      x |= (uint64_t) written[8 * w + b] << (8 * b);
    atomic_store (&a->durable[w0 + w], x);
  }
}

/* The first of ops[0 .. n) that failed, said: its errno. */
static int
first_failed (const struct member_op *ops, unsigned n, const char *what)
{
  for (unsigned i = 0; i < n; ++i)
    if (ops[i].err) {
      stripe_error ("member %u (%s): %s the allocation map: %s",
                    ops[i].m->index, ops[i].m->path, what,
                    strerror (ops[i].err));
      return ops[i].err;
    }
  return EIO;
}

/* Write the blocks in blks (their copies in a->buf, slot by slot) to
 * every member, then sync each: all the writes in flight at once, then
 * all the syncs (ioexec.h), so that a volume of many members pays about
 * one write and one sync, not one of each per member.  0, or an errno.
 */
static int
write_batch (struct alloc *a, const uint64_t *blks, unsigned n,
             struct member *members, unsigned nr, uint64_t skip)
{
  struct member_op *ops = calloc ((size_t) nr * n, sizeof *ops);
  struct iovec *iov = calloc (n, sizeof *iov);
  unsigned nops = 0;
  int err = 0;

  if (ops == NULL || iov == NULL) {
    free (ops);
    free (iov);
    return ENOMEM;
  }
  for (unsigned k = 0; k < n; ++k)
    iov[k] = (struct iovec){ a->buf + (size_t) k * ALLOC_BLOCK, ALLOC_BLOCK };
  for (unsigned i = 0; i < nr; ++i) {
    if (skip >> i & 1 || member_absent (&members[i]))
      continue;
    for (unsigned k = 0; k < n; ++k)
      ops[nops++] = (struct member_op){
        .m = &members[i], .kind = OP_WRITE,
        .offset = a->map_offset + blks[k] * ALLOC_BLOCK,
        .length = ALLOC_BLOCK, .iov = &iov[k], .nr_iov = 1, .shadow = true };
  }
  if (nops > 0 && ioexec_run (ops, nops, a->uring) == -1)
    err = first_failed (ops, nops, "writing");
  if (err == 0) {
    nops = 0;
    for (unsigned i = 0; i < nr; ++i)
      if (!(skip >> i & 1) && !member_absent (&members[i]))
        ops[nops++] = (struct member_op){ .m = &members[i], .kind = OP_FLUSH,
                                          .shadow = true };
    if (nops > 0 && ioexec_run (ops, nops, a->uring) == -1)
      err = first_failed (ops, nops, "syncing");
  }
  free (ops);
  free (iov);
  return err;
}

/* Each block dirty when the writeout reaches it, once (a writer that
 * keeps marking new regions does not keep a flush going): its dirty bit
 * cleared, THEN its copy taken (alloc.h), batches of ALLOC_BATCH written
 * and synced, and durable set to the copies written.
 */
/* Nothing to write and no writeout under way: a flush after writes to
 * regions already durable pays a few loads, no lock.  A writeout sets
 * writing before it clears the first dirty bit and clears it once its
 * copies are durable, so a flush that finds a dirty bit gone finds
 * writing set until then (and takes the lock, waiting for it).
 */
static bool
pending (struct alloc *a)
{
  for (uint64_t w = 0; w < (a->nr_blocks + 63) / 64; ++w)
    if (atomic_load (&a->dirty[w]))
      return true;
  return atomic_load (&a->writing) != 0;
}

int
alloc_sync (struct alloc *a, struct member *members, unsigned nr,
            uint64_t skip)
{
  uint64_t blks[ALLOC_BATCH];
  unsigned n = 0;
  int err = 0;

  if (!pending (a))
    return 0;
  pthread_mutex_lock (&a->lock);
  atomic_store (&a->writing, 1);
  for (uint64_t blk = 0; blk < a->nr_blocks && err == 0; ++blk) {
    uint64_t bit = UINT64_C (1) << (blk % 64);

    if (atomic_load (&a->dirty[blk / 64]) & bit
        && atomic_fetch_and (&a->dirty[blk / 64], ~bit) & bit) {
      encode_block (a, blk, a->buf + (size_t) n * ALLOC_BLOCK);
      blks[n++] = blk;
    }
    if (n > 0 && (n == ALLOC_BATCH || blk + 1 == a->nr_blocks)) {
      err = write_batch (a, blks, n, members, nr, skip);
      for (unsigned k = 0; k < n; ++k)
        if (err)
          atomic_fetch_or (&a->dirty[blks[k] / 64],
                           UINT64_C (1) << (blks[k] % 64));
        else
          set_durable (a, blks[k], a->buf + (size_t) k * ALLOC_BLOCK);
      atomic_fetch_add (&a->writeouts, n);
      n = 0;
    }
  }
  atomic_store (&a->writing, 0);
  pthread_mutex_unlock (&a->lock);
  if (err) {
    errno = err;
    return -1;
  }
  return 0;
}

int
alloc_write_copy (struct alloc *a, struct member *d, char *why, size_t len)
{
  int r = 0;

  pthread_mutex_lock (&a->lock);
  for (uint64_t blk = 0; blk < a->nr_blocks && r == 0; ++blk) {
    encode_block (a, blk, a->buf);
    r = member_pwrite (d, a->buf, ALLOC_BLOCK,
                       a->map_offset + blk * ALLOC_BLOCK, why, len);
  }
  if (r == 0)
    r = member_sync (d, why, len);
  pthread_mutex_unlock (&a->lock);
  return r;
}
