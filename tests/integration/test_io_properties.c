/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: what the volume advertises. */

#include <inttypes.h>
#include <string.h>

#include <libnbd.h>

#include "test_io_fixture.h"

/* ---- case: properties -------------------------------------------------- */

void
case_properties (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("properties", INIT_NONE);
  struct nbd_handle *h;
  int64_t size, bmin, bpref, bmax;
  uint64_t expect = 0;

  /* md raid0's size: each member rounded down to whole chunks, in
   * sectors, masked with ~(chunk sectors - 1) (raid0_size) -- the sum of
   * the rounded sizes for a power-of-two chunk, less for another.
   */
  for (unsigned i = 0; i < v->n; i++)
    expect += ((v->size[i] / v->o.chunk * v->o.chunk / 512)
               & ~(v->o.chunk / 512 - 1))
              * 512;
  vol_start (v);
  h = vol_connect (v);

  size = nbd_get_size (h);
  CHECK (size == (int64_t) expect,
         "export size %" PRId64 ", expected md's size rule's %" PRIu64, size,
         expect);
  note ("size %" PRId64 " = md's raid0_size of members rounded down to "
        "chunk %" PRIu64,
        size, v->o.chunk);
  CHECK (nbd_can_multi_conn (h) == 1, "multi-conn not advertised (%d)",
         nbd_can_multi_conn (h));
  CHECK (nbd_is_read_only (h) == 0, "export is read-only");
  CHECK (nbd_can_flush (h) == 1, "flush not advertised");
  CHECK (nbd_can_fua (h) == 1, "FUA not advertised");
  CHECK (nbd_can_zero (h) == 1, "zero not advertised");
  CHECK (nbd_can_fast_zero (h) == v->fast_zero,
         "fast zero advertised %d, expected %d (every remote member's "
         "server can: %d)",
         nbd_can_fast_zero (h), v->fast_zero, v->fast_zero);
  if (!v->any_blk)
    CHECK (nbd_can_trim (h) == 1, "trim not advertised on regular files");
  else
    note ("block device members: trim advertised = %d", nbd_can_trim (h));
  CHECK (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1,
         "base:allocation not negotiated");

  bmin = nbd_get_block_size (h, LIBNBD_SIZE_MINIMUM);
  bpref = nbd_get_block_size (h, LIBNBD_SIZE_PREFERRED);
  bmax = nbd_get_block_size (h, LIBNBD_SIZE_MAXIMUM);
  note ("block sizes: minimum %" PRId64 " preferred %" PRId64
        " maximum %" PRId64 " (0 = not advertised)",
        bmin, bpref, bmax);
  CHECK (bmin >= 0 && bpref >= 0 && bmax >= 0, "nbd_get_block_size failed");
  if (bmin) {
    CHECK ((bmin & (bmin - 1)) == 0 && bmin <= 65536,
           "minimum block size %" PRId64 " not a power of 2 <= 64K", bmin);
    CHECK (size % bmin == 0, "size not a multiple of the minimum block size");
  }
  if (bpref) {
    CHECK ((bpref & (bpref - 1)) == 0,
           "preferred block size %" PRId64 " not a power of 2", bpref);
    CHECK (bpref >= (bmin ? bmin : 1), "preferred < minimum");
    CHECK (bpref <= 32 * (int64_t) MiB,
           "preferred block size %" PRId64 " absurd", bpref);
  }
  if (bmax) {
    CHECK (bmax >= (bpref ? bpref : 1) && bmax >= (bmin ? bmin : 1),
           "maximum block size %" PRId64 " below minimum/preferred", bmax);
    CHECK (bmax >= 4 * (int64_t) MiB || bmax >= size,
           "maximum block size %" PRId64 " suspiciously small", bmax);
    /* NBD: a multiple of the minimum, or 0xffffffff for "no limit". */
    if (bmin && bmax != 0xffffffff)
      CHECK (bmax % bmin == 0, "maximum not a multiple of minimum");
  }
  /* Unaligned requests work (nbdkit passes them to the plugin). */
  {
    uint8_t b[3] = { 1, 2, 3 }, r[3];
    uint64_t at = v->o.chunk - 1; /* crosses the first chunk boundary */
    NBD_OK (nbd_pwrite (h, b, 3, at, 0));
    NBD_OK (nbd_pread (h, r, 3, at, 0));
    CHECK (memcmp (b, r, 3) == 0, "3-byte write across a chunk boundary "
                                  "did not read back");
  }
  close_handle (h);
  vol_stop (v);
}
