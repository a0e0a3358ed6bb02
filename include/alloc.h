/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the allocation map -- which regions of the volume's
 * logical bytes may hold data, so that moves, scrubs and reads do work
 * in proportion to the data, not to the drives.
 *
 * The volume is cut into regions of 1 << shift bytes; bit r set means
 * region r may hold data, clear that it reads as zeros on every member
 * (the invariant every user of the map relies on: a region the map
 * calls free is never read, copied or scrubbed; a move only makes its
 * new place read zeros).  On the members (header.h) it is a bitmap
 * whose copies are ORed together when the volume is assembled.
 *
 * At run time three bitmaps, one bit a region or a map block:
 *   bits     in use, now (what reads, block status and moves go by);
 *   durable  in use on every member's copy, synced: a subset of bits;
 *   dirty    map blocks (4 KiB of the bitmap) changed since written.
 *
 * The promise: a region holding a write that a completed flush or FUA
 * acknowledged is "in use" on the members before that flush or FUA
 * returns; a stale "in use" is allowed, a stale "free" never is.  Why
 * it holds:
 *
 *  - A write's regions are marked (alloc_mark) BEFORE its data is sent
 *    to a member.  A region whose durable bit is set needs nothing: it
 *    is on the members.  Otherwise the write sets its bit in bits and
 *    THEN the dirty bit of its map block (sequentially consistent
 *    atomics), whether or not the bit was set before: a bit set by
 *    another write still in flight might not have its block marked yet,
 *    and this write must not be answered on the strength of that one.
 *
 *  - A flush (alloc_sync, before the flush answers) takes the lock and
 *    writes out every dirty block: it clears the block's dirty bit,
 *    THEN reads the block from bits, writes it to every member and
 *    syncs them (all the writes in flight at once, then all the syncs),
 *    and only then sets durable to what it wrote.  A write
 *    completed before the flush started has set its bit and its block's
 *    dirty bit: either the flush finds the dirty bit and writes a copy
 *    read after it (holding the bit), or another writeout cleared it
 *    after the bit was set -- and that one holds the lock until its
 *    copy is synced, so the flush, taking the lock after it, starts
 *    only once it is durable.  A writeout that fails marks its blocks
 *    dirty again before it lets go of the lock.  A flush that finds no
 *    dirty bit and no writeout under way (writing, set before the first
 *    dirty bit is cleared and cleared once the copies are durable) has
 *    nothing to wait for and takes no lock.
 *
 *  - A FUA write (or any write with cache=writethrough) whose regions
 *    are not all durable runs alloc_sync itself before its data goes.
 *
 *  - Bits are cleared only under the lock (alloc_clear: a trim or a
 *    zero that covered whole regions, completed on every member, so
 *    the members read zeros there), durable first: durable stays a
 *    subset of bits, and a write after the clear marks the region
 *    again.  The clear reaches the members with the next writeout; a
 *    crash before leaves the region "in use", which is allowed.  A
 *    write racing a trim of the same bytes leaves them undefined, as
 *    NBD says of any overlapping requests in flight.
 */
#ifndef NBDSTRIPE_ALLOC_H
#define NBDSTRIPE_ALLOC_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct member;

/* The map's unit on the members: blocks of 4 KiB (32768 regions). */
#define ALLOC_BLOCK 4096u
#define ALLOC_BLOCK_BITS (8u * ALLOC_BLOCK)
/* Blocks a writeout writes before it syncs. */
#define ALLOC_BATCH 64u

/* Region sizes create chooses from: 64 KiB to 4 MiB (alloc_plan). */
#define ALLOC_SHIFT_MIN 16u
#define ALLOC_SHIFT_MAX 22u

struct alloc {
  unsigned shift;        /* region = 1 << shift bytes */
  uint64_t nr_regions;   /* what the map holds (map_bytes * 8) */
  uint64_t map_offset;   /* on every member */
  uint64_t map_bytes;
  _Atomic uint64_t *bits;
  _Atomic uint64_t *durable;
  _Atomic uint64_t *dirty; /* one bit a map block */
  uint64_t nr_blocks;
  pthread_mutex_t lock;    /* writeouts and clears */
  bool inited;             /* lock initialised (alloc_free) */
  _Atomic unsigned writing; /* a writeout is under way (alloc_sync) */
  uint8_t *buf;            /* one block, for writeouts (under lock) */
  bool uring;              /* writeouts through io_uring (ioexec.h) */
  _Atomic uint64_t writeouts; /* blocks written out, for tests */
};

/* The map create gives a volume of size bytes that may grow to
 * max_size, with room bytes for it on every member: the region size
 * (*shift) and the map's length (*bytes, whole blocks).  The region is
 * the smallest power of two from 64 KiB up that cuts the volume into at
 * most 4096 regions, and never more than 4 MiB (unless room cannot
 * hold the volume's map in regions of 4 MiB: then coarser, up to
 * HEADER_MAP_SHIFT_MAX, rather than none): fine enough that a
 * small volume's moves still skip what is free, coarse enough that a
 * big volume's map is small (4 MiB regions: 32 KiB of map a TiB) and
 * that marking a region -- a map write at the next flush, once per
 * region its data first reaches -- is rare (a 4K random write lands in
 * a fresh region at most once in 1024 writes of a full region).  The
 * map covers max_size when room allows; false (no map) when room
 * cannot hold one block.
 */
extern bool alloc_plan (uint64_t size, uint64_t max_size, uint64_t room,
                        unsigned *shift, uint64_t *bytes);

/* A map of nr_regions (whole blocks) at map_offset on the members, all
 * "in use" (alloc_load replaces it with what the members hold).
 */
extern int alloc_init (struct alloc *a, unsigned shift, uint64_t map_offset,
                       uint64_t map_bytes);
extern void alloc_free (struct alloc *a);

/* Loading: alloc_load_begin empties the map, alloc_merge ORs in a
 * member's copy (map_bytes bytes from its map_offset) -- durable is
 * what every copy holds -- and alloc_loaded marks dirty the blocks
 * whose copies differ, for the next alloc_sync.
 */
extern void alloc_load_begin (struct alloc *a);
extern void alloc_merge (struct alloc *a, const uint8_t *copy);
extern void alloc_loaded (struct alloc *a);

static inline uint64_t
alloc_region (const struct alloc *a, uint64_t offset)
{
  return offset >> a->shift;
}

static inline bool
alloc_test (_Atomic uint64_t *map, uint64_t r)
{
  return atomic_load_explicit (&map[r / 64], memory_order_relaxed)
           >> (r % 64) & 1;
}

/* Mark the regions [offset, offset + count) touches (count > 0) before
 * a write's data goes out.  Returns whether they were all durable
 * already (nothing for a FUA write to do).
 */
extern bool alloc_mark_slow (struct alloc *a, uint64_t r0, uint64_t r1);
static inline bool
alloc_mark (struct alloc *a, uint64_t offset, uint64_t count)
{
  uint64_t r0 = offset >> a->shift, r1 = (offset + count - 1) >> a->shift;

  /* The usual write: inside one region, in use and durable. */
  if (r0 == r1 && alloc_test (a->durable, r0))
    return true;
  return alloc_mark_slow (a, r0, r1);
}

/* The usual read: inside one region, in use (else read_free's path). */
static inline bool
alloc_in_use (struct alloc *a, uint64_t offset, uint64_t count)
{
  uint64_t r0 = offset >> a->shift;

  return r0 == (offset + count - 1) >> a->shift
         && (r0 >= a->nr_regions || alloc_test (a->bits, r0));
}

/* Whether any region in [offset, offset + count) is in use, and whether
 * all are (*all).
 */
extern bool alloc_any (struct alloc *a, uint64_t offset, uint64_t count,
                       bool *all);

/* From offset on (< end), how far the regions are all in use or all
 * free: returns the end of that run (<= end), *used which.
 */
extern uint64_t alloc_run (struct alloc *a, uint64_t offset, uint64_t end,
                           bool *used);

/* Bytes in use among [0, size). */
extern uint64_t alloc_used_bytes (struct alloc *a, uint64_t size);

/* The whole regions inside [offset, offset + count), which now read as
 * zeros on every member: free from now on.  Returns how many bits were
 * cleared.
 */
extern uint64_t alloc_clear (struct alloc *a, uint64_t offset,
                             uint64_t count);

/* Write every changed block to members[0 .. nr) but those in skip
 * (failed, missing, removed) and sync them: see the promise above.  -1
 * with errno (the first failure; the blocks stay dirty).
 */
extern int alloc_sync (struct alloc *a, struct member *members, unsigned nr,
                       uint64_t skip);

/* The whole map as it is now on d (a member that joins: a replace's
 * NEW before its record names it, a grow's before its first), synced:
 * -1 with why.
 */
extern int alloc_write_copy (struct alloc *a, struct member *d, char *why,
                             size_t len);

/* Every block to be written again: a member that joins (a replace's
 * NEW, a grow's) gets its copy at the next alloc_sync.
 */
extern void alloc_dirty_all (struct alloc *a);

#endif /* NBDSTRIPE_ALLOC_H */
