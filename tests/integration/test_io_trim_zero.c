/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: trim, zero, fast zero, FUA, flush. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "test_io_fixture.h"

/* ---- case: trim ------------------------------------------------------- */

/* Trim through NBD and update the model.  On regular files the range must
 * read back as zeroes, except on remote members whose server cannot trim
 * (unchanged there); on block devices each byte may be zero or unchanged.
 */
static void
do_trim (struct vol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
         uint32_t flags, const char *what)
{
  char *w = where (v, off);
  note ("trim %s: [%" PRIu64 ", +%" PRIu64 ") starting at %s", what, off, len,
        w);
  free (w);
  if (nbd_trim (h, len, off, flags) == -1)
    FAIL ("nbd_trim(%s, off=%" PRIu64 ", len=%" PRIu64 ", flags=0x%x): %s",
          what, off, len, flags, nbd_get_error ());
  if (!v->any_blk) {
    model_trim (v, off, len);
    read_compare (v, h, off, len, what);
  }
  else {
    uint8_t *buf = xmalloc (len);
    NBD_OK (nbd_pread (h, buf, len, off, 0));
    for (uint64_t i = 0; i < len; i++)
      if (buf[i] != 0 && buf[i] != v->model[off + i]) {
        char *w2 = where (v, off + i);
        FAIL ("after trim %s: byte at %s is neither zero nor the old data",
              what, w2);
      }
    memcpy (v->model + off, buf, len);
    free (buf);
  }
}

void
case_trim (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("trim", INIT_RANDOM);
  struct nbd_handle *h;
  uint64_t S = zone0_stripe (v), c = v->o.chunk, V = v->o.size;
  uint64_t before[MAXM], after[MAXM], off, len;

  vol_start (v);
  h = vol_connect (v);
  if (nbd_can_trim (h) != 1) {
    if (v->any_blk)
      SKIP ("trim not advertised with block device members");
    FAIL ("trim not advertised on regular files");
  }

  /* Write data through NBD first, over the area to be trimmed. */
  clip (v, S, 9 * S + 5, &off, &len);
  prng_fill (&v->rng, v->model + off, len);
  NBD_OK (nbd_pwrite (h, v->model + off, len, off, 0));
  NBD_OK (nbd_flush (h, 0));
  for (unsigned i = 0; i < v->n; i++)
    before[i] = v->blk[i] ? 0 : blocks_of (v->path[i]);

  /* Crossing several stripes, unaligned ends. */
  clip (v, 2 * S + 1000, 6 * S + 4000, &off, &len);
  do_trim (v, h, off, len, 0, "across stripes");
  NBD_OK (nbd_flush (h, 0));
  for (unsigned i = 0; i < v->n; i++) {
    if (v->blk[i]) {
      note ("member %u %s is a block device: st_blocks check skipped", i,
            v->path[i]);
      continue;
    }
    after[i] = blocks_of (v->path[i]);
    if (!member_trims (v, i))
      CHECK (after[i] == before[i],
             "member %u (%s): its server cannot trim, yet st_blocks went "
             "%" PRIu64 " -> %" PRIu64,
             i, v->path[i], before[i], after[i]);
    else if (covers_block (v, i, off, len))
      CHECK (after[i] < before[i],
             "member %u (%s): st_blocks %" PRIu64 " -> %" PRIu64
             " after trim of [%" PRIu64 ", +%" PRIu64 "): no space was freed",
             i, v->path[i], before[i], after[i], off, len);
    note ("member %u st_blocks %" PRIu64 " -> %" PRIu64, i, before[i],
          after[i]);
  }

  /* Across each zone boundary, with FUA. */
  for (unsigned b = 0; b < v->o.nr_boundaries; b++) {
    clip (v, v->o.boundary[b] - c - 77, v->o.boundary[b] + c + 99, &off, &len);
    do_trim (v, h, off, len, LIBNBD_CMD_FLAG_FUA, "across a zone boundary");
  }
  /* The last stripe, to the end of the volume. */
  clip (v, V - c * oracle_width_at (&v->o, V - 1) - 5, V, &off, &len);
  do_trim (v, h, off, len, 0, "last stripe");
  /* Tiny, inside one chunk, and across one chunk boundary. */
  clip (v, 3 * c + 100, 3 * c + 200, &off, &len);
  do_trim (v, h, off, len, 0, "tiny");
  clip (v, 5 * c - 10, 5 * c + 10, &off, &len);
  do_trim (v, h, off, len, 0, "tiny across a chunk boundary");

  NBD_OK (nbd_flush (h, 0));
  read_compare_all (v, h, "after trims");
  close_handle (h);
  vol_stop (v);
  check_members (v);
}

/* ---- case: zero, fast zero, FUA, flush -------------------------------- */

static void
do_zero (struct vol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
         uint32_t flags, const char *what)
{
  note ("zero %s: [%" PRIu64 ", +%" PRIu64 ") flags 0x%x", what, off, len,
        flags);
  if (nbd_zero (h, len, off, flags) == -1) {
    int e = nbd_get_errno ();
    if ((flags & LIBNBD_CMD_FLAG_FAST_ZERO) && e == ENOTSUP) {
      note ("fast zero refused with ENOTSUP: data must be unchanged");
      read_compare (v, h, off, len, "after refused fast zero");
      return;
    }
    FAIL ("nbd_zero(%s, off=%" PRIu64 ", len=%" PRIu64 ", flags=0x%x): %s "
          "(errno %d)",
          what, off, len, flags, nbd_get_error (), e);
  }
  expect_zero (v, h, off, len, what);
}

/* A FUA write of one member's first chunk reaches a remote member's
 * server as a write with FUA, or, when the server has no FUA, as a write
 * followed by a flush (request log).
 */
static void
check_fua_reaches_remote_members (struct vol *v, struct nbd_handle *h)
{
  for (unsigned i = 0; i < v->n; i++) {
    uint64_t off, mark;
    unsigned writes, fua_writes, flushes;
    if (!v->remote[i])
      continue;
    CHECK (oracle_unmap (&v->o, i, 0, &off), "member %u holds no chunk", i);
    mark = msrv_log_mark (&v->msrv[i]);
    prng_fill (&v->rng, v->model + off, 512);
    NBD_OK (nbd_pwrite (h, v->model + off, 512, off, LIBNBD_CMD_FLAG_FUA));
    writes = msrv_requests (&v->msrv[i], mark, "Write", NULL);
    fua_writes = msrv_requests (&v->msrv[i], mark, "Write", " fua=1 ");
    flushes = msrv_requests (&v->msrv[i], mark, "Flush", NULL);
    note ("FUA write to member %u (server fua %d, flush %d): %u write(s), "
          "%u with FUA, %u flush(es)",
          i, v->caps[i].fua, v->caps[i].flush, writes, fua_writes, flushes);
    CHECK (writes == 1, "member %u: %u writes reached its server, expected 1",
           i, writes);
    if (v->caps[i].fua)
      CHECK (fua_writes == 1,
             "member %u: the write reached its server "
             "without FUA",
             i);
    else if (v->caps[i].flush)
      CHECK (flushes >= 1,
             "member %u: its server has no FUA, and no flush "
             "followed the write",
             i);
  }
}

void
case_zero_fua_flush (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("zero_fua_flush", INIT_RANDOM);
  struct nbd_handle *h;
  uint64_t S = zone0_stripe (v), c = v->o.chunk, V = v->o.size, off, len;
  uint32_t fz;
  uint64_t b = v->o.nr_boundaries ? v->o.boundary[0] : V / 2;

  vol_start (v);
  h = vol_connect (v);
  CHECK (nbd_can_zero (h) == 1, "zero not advertised");
  CHECK (nbd_can_fast_zero (h) == v->fast_zero,
         "fast zero advertised %d, expected %d", nbd_can_fast_zero (h),
         v->fast_zero);
  CHECK (nbd_can_fua (h) == 1, "FUA not advertised");
  /* Without fast zero advertised, libnbd refuses the flag: plain zeroes. */
  fz = v->fast_zero ? LIBNBD_CMD_FLAG_FAST_ZERO : 0;
  if (!fz)
    note ("fast zero not advertised (a remote member cannot): the FAST_ZERO "
          "zeroes below go without the flag");

  clip (v, S + 333, 5 * S + 4444, &off, &len);
  do_zero (v, h, off, len, 0, "may trim, across stripes");
  clip (v, (int64_t) b - 2 * c - 1, b + 3 * c + 7, &off, &len);
  do_zero (v, h, off, len, LIBNBD_CMD_FLAG_NO_HOLE,
           "NO_HOLE, across a zone "
           "boundary");
  clip (v, 7 * S, 11 * S, &off, &len);
  do_zero (v, h, off, len, fz, "FAST_ZERO, aligned");
  clip (v, 12 * S + 1, 14 * S + c + 3, &off, &len);
  do_zero (v, h, off, len, fz | LIBNBD_CMD_FLAG_NO_HOLE,
           "FAST_ZERO|NO_HOLE, unaligned");
  clip (v, 15 * S + 17, 15 * S + 18, &off, &len);
  do_zero (v, h, off, len, LIBNBD_CMD_FLAG_NO_HOLE, "1 byte");
  clip (v, 16 * S + c - 2, 16 * S + c + 1, &off, &len);
  do_zero (v, h, off, len, 0, "3 bytes across a chunk boundary");
  clip (v, V - 2 * c - 1, V, &off, &len);
  do_zero (v, h, off, len, LIBNBD_CMD_FLAG_FUA, "FUA, to the end");

  /* FUA writes across boundaries. */
  for (int i = 0; i < 24; i++) {
    uint64_t at = prng_range (&v->rng, 0, V - 1);
    len = prng_range (&v->rng, 1, i % 2 ? 3 * S : 700);
    if (i == 0)
      at = b - 5; /* across a zone boundary */
    if (len > V - at)
      len = V - at;
    prng_fill (&v->rng, v->model + at, len);
    if (nbd_pwrite (h, v->model + at, len, at, LIBNBD_CMD_FLAG_FUA) == -1)
      FAIL ("FUA write off=%" PRIu64 " len=%" PRIu64 ": %s", at, len,
            nbd_get_error ());
  }
  NBD_OK (nbd_flush (h, 0));
  check_fua_reaches_remote_members (v, h);
  read_compare_all (v, h, "after zeroes and FUA writes");
  close_handle (h);
  vol_stop (v);
  check_members (v);
}
