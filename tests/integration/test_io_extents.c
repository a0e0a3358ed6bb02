/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: block status (extents) against the
 * members' real holes.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libnbd.h>

#include "test_io_fixture.h"

/* ---- case: extents ---------------------------------------------------- */

struct ivl {
  uint64_t start, end;
};

struct holes {
  struct ivl *data[MAXM]; /* sorted data intervals per member */
  size_t nr[MAXM];
};

static void
holes_free (struct holes *hs, unsigned n)
{
  for (unsigned i = 0; i < n; i++) {
    free (hs->data[i]);
    hs->data[i] = NULL;
    hs->nr[i] = 0;
  }
}

/* Data intervals of member i within its usable size, via SEEK_DATA and
 * SEEK_HOLE on the member itself.
 */
static void
scan_member (struct vol *v, struct holes *hs, unsigned i)
{
  int fd = open (v->path[i], O_RDONLY | O_CLOEXEC);
  uint64_t lim = v->o.usable[i], pos = 0;
  size_t cap = 0;
  if (fd == -1)
    FAIL ("open %s: %m", v->path[i]);
  if (v->remote[i] && !v->caps[i].extents && lim > 0) {
    /* Its server does not report holes: all data. */
    hs->data[i] = xmalloc (sizeof (struct ivl));
    hs->data[i][0] = (struct ivl){ 0, lim };
    hs->nr[i] = 1;
    pos = lim;
  }
  while (pos < lim) {
    off_t d = lseek (fd, pos, SEEK_DATA), e;
    if (d == -1 && errno == ENXIO)
      break;
    if (d == -1 && (errno == EINVAL || errno == EOPNOTSUPP)) {
      /* No SEEK_DATA here (block devices): everything is data. */
      d = pos;
      e = lim;
      goto add;
    }
    if (d == -1)
      FAIL ("SEEK_DATA %s: %m", v->path[i]);
    if ((uint64_t) d >= lim)
      break;
    e = lseek (fd, d, SEEK_HOLE);
    if (e == -1)
      FAIL ("SEEK_HOLE %s: %m", v->path[i]);
    if ((uint64_t) e > lim)
      e = lim;
  add:
    if (hs->nr[i] == cap) {
      cap = cap ? 2 * cap : 64;
      hs->data[i] = realloc (hs->data[i], cap * sizeof (struct ivl));
      if (!hs->data[i])
        FAIL ("out of memory");
    }
    hs->data[i][hs->nr[i]++] = (struct ivl){ d, e };
    pos = e;
  }
  close (fd);
}

/* 0: all data, 1: all hole, 2: mixed; for member i's [off, off+len). */
static int
member_state (const struct holes *hs, unsigned i, uint64_t off, uint64_t len,
              uint64_t *first_other)
{
  const struct ivl *a = hs->data[i];
  size_t lo = 0, hi = hs->nr[i];
  uint64_t end = off + len;
  /* First interval with end > off. */
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (a[mid].end <= off)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (lo == hs->nr[i] || a[lo].start >= end)
    return 1;
  if (a[lo].start <= off && a[lo].end >= end)
    return 0;
  *first_other = a[lo].start > off ? off : a[lo].end;
  return 2;
}

/* Check one reported extent against the members' real holes. */
static void
check_extent (struct vol *v, const struct holes *hs, uint64_t off,
              uint64_t len, uint32_t flags, const char *what)
{
  bool hole = flags & LIBNBD_STATE_HOLE, zero = flags & LIBNBD_STATE_ZERO;
  uint64_t end = off + len, start = off;

  if (hole && !zero)
    FAIL ("%s: extent [%" PRIu64 ", +%" PRIu64 ") is HOLE without ZERO", what,
          off, len);
  if (zero)
    for (uint64_t i = off; i < end; i++)
      if (v->model[i] != 0) {
        char *w = where (v, i);
        FAIL ("%s: extent [%" PRIu64 ", +%" PRIu64 ") flags 0x%x claims "
              "ZERO but %s holds 0x%02x",
              what, off, len, flags, w, v->model[i]);
      }
  while (off < end) {
    unsigned m;
    uint64_t mo, n = oracle_map (&v->o, off, &m, &mo), other = 0;
    int st;
    if (n > end - off)
      n = end - off;
    st = member_state (hs, m, mo, n, &other);
    if (st != (hole ? 1 : 0)) {
      char *w = where (v, off);
      FAIL ("%s: extent [%" PRIu64 ", +%" PRIu64 ") reported as %s (flags "
            "0x%x), but the piece at %s, %" PRIu64 " bytes, is %s on the "
            "member%s",
            what, start, len, hole ? "HOLE" : "DATA", flags, w, n,
            st == 0   ? "all data"
            : st == 1 ? "all hole"
                      : "partly data",
            st == 2 ? " (boundary inside the piece)" : "");
    }
    off += n;
  }
}

struct bs_result {
  uint64_t offset;
  size_t nr; /* extents */
  uint32_t len[4096], flags[4096];
  int calls;
  bool overflow;
};

static int
bs_cb (void *user_data, const char *metacontext, uint64_t offset,
       uint32_t *entries, size_t nr_entries, int *error)
{
  struct bs_result *r = user_data;
  (void) error;
  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0)
    return 0;
  r->calls++;
  r->offset = offset;
  for (size_t i = 0; i + 1 < nr_entries; i += 2) {
    if (r->nr == 4096) {
      r->overflow = true;
      break;
    }
    r->len[r->nr] = entries[i];
    r->flags[r->nr] = entries[i + 1];
    r->nr++;
  }
  return 0;
}

/* Block status over the whole volume; returns the number of extents. */
static uint64_t
check_block_status (struct vol *v, struct nbd_handle *h,
                    const struct holes *hs, bool req_one, const char *what)
{
  struct bs_result *r = xmalloc (sizeof *r);
  uint64_t V = v->o.size, count = 0, holes = 0;
  for (uint64_t off = 0; off < V;) {
    uint64_t req = V - off > 1024 * MiB ? 1024 * MiB : V - off, got = 0;
    memset (r, 0, sizeof *r);
    if (nbd_block_status (
          h, req, off,
          (nbd_extent_callback){ .callback = bs_cb, .user_data = r },
          req_one ? LIBNBD_CMD_FLAG_REQ_ONE : 0)
        == -1)
      FAIL ("%s: nbd_block_status(off=%" PRIu64 ", count=%" PRIu64 "%s): %s",
            what, off, req, req_one ? ", REQ_ONE" : "", nbd_get_error ());
    CHECK (r->calls == 1, "%s: %d base:allocation replies", what, r->calls);
    CHECK (r->offset == off,
           "%s: reply for offset %" PRIu64 ", asked %" PRIu64, what, r->offset,
           off);
    CHECK (r->nr >= 1, "%s: no extents at %" PRIu64, what, off);
    CHECK (!r->overflow, "%s: too many extents", what);
    if (req_one)
      CHECK (r->nr == 1, "%s: REQ_ONE at %" PRIu64 " returned %zu extents",
             what, off, r->nr);
    for (size_t i = 0; i < r->nr; i++) {
      uint64_t l = r->len[i];
      CHECK (l > 0, "%s: zero-length extent at %" PRIu64, what, off + got);
      if (got + l > req) {
        CHECK (!req_one, "%s: REQ_ONE extent longer than the request", what);
        CHECK (i == r->nr - 1, "%s: extent past the request is not the last",
               what);
        CHECK (off + got + l <= V, "%s: extent past the end of the volume",
               what);
        l = req - got;
      }
      check_extent (v, hs, off + got, l, r->flags[i], what);
      if (r->flags[i] & LIBNBD_STATE_HOLE)
        holes++;
      got += l;
      count++;
    }
    off += got;
  }
  free (r);
  note ("%s: %" PRIu64 " extents, %" PRIu64 " holes", what, count, holes);
  return count;
}

void
case_extents (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("extents", INIT_SPARSE);
  struct nbd_handle *h;
  struct holes hs = { 0 };
  struct bs_result *r;
  uint64_t nholes = 0, ndata = 0, V = v->o.size, off, len;

  for (unsigned i = 0; i < v->n; i++) {
    scan_member (v, &hs, i);
    ndata += hs.nr[i];
    if (!(hs.nr[i] == 1 && hs.data[i][0].start == 0
          && hs.data[i][0].end == v->o.usable[i]))
      nholes++;
  }
  if (v->any_blk)
    note ("block device members: they have no holes of their own, every "
          "extent must be DATA");
  else
    CHECK (nholes > 0 && ndata > 0, "test setup: members should have both "
                                    "holes and data");

  vol_start (v);
  h = vol_connect (v);
  CHECK (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 1,
         "base:allocation not negotiated");

  read_compare_all (v, h, "sparse volume contents");
  check_block_status (v, h, &hs, false, "block status");
  check_block_status (v, h, &hs, true, "block status REQ_ONE");

  /* Random small queries, REQ_ONE and not. */
  r = xmalloc (sizeof *r);
  for (int q = 0; q < 300; q++) {
    uint64_t at = prng_range (&v->rng, 0, V - 1);
    uint64_t cnt = prng_range (&v->rng, 1, 4 * v->o.chunk);
    uint32_t fl = q % 2 ? LIBNBD_CMD_FLAG_REQ_ONE : 0;
    uint64_t got = 0;
    if (cnt > V - at)
      cnt = V - at;
    memset (r, 0, sizeof *r);
    if (nbd_block_status (
          h, cnt, at,
          (nbd_extent_callback){ .callback = bs_cb, .user_data = r }, fl)
        == -1)
      FAIL ("nbd_block_status(off=%" PRIu64 ", count=%" PRIu64 ", flags=%u)"
            ": %s",
            at, cnt, fl, nbd_get_error ());
    CHECK (r->nr >= 1 && (!fl || r->nr == 1),
           "query at %" PRIu64 ": %zu extents", at, r->nr);
    for (size_t i = 0; i < r->nr && got < cnt; i++) {
      uint64_t l = r->len[i];
      if (got + l > cnt) {
        CHECK (!fl && i == r->nr - 1 && at + got + l <= V,
               "query at %" PRIu64 ": bad extent past the request", at);
        l = cnt - got;
      }
      check_extent (v, &hs, at + got, l, r->flags[i], "random query");
      got += l;
    }
  }
  free (r);

  /* Change the allocation through NBD, then check again. */
  if (!v->any_blk && nbd_can_trim (h) == 1) {
    clip (v, v->o.chunk * v->n + 4096, 5 * v->o.chunk * v->n, &off, &len);
    NBD_OK (nbd_trim (h, len, off, 0));
    model_trim (v, off, len);
  }
  /* Write into what is probably a hole, across chunk boundaries. */
  clip (v, V / 2 - v->o.chunk - 100, V / 2 + v->o.chunk + 100, &off, &len);
  prng_fill (&v->rng, v->model + off, len);
  NBD_OK (nbd_pwrite (h, v->model + off, len, off, 0));
  NBD_OK (nbd_flush (h, 0));
  holes_free (&hs, v->n);
  for (unsigned i = 0; i < v->n; i++)
    scan_member (v, &hs, i);
  check_block_status (v, h, &hs, false, "block status after trim+write");
  check_block_status (v, h, &hs, true,
                      "block status REQ_ONE after trim+write");
  holes_free (&hs, v->n);

  read_compare_all (v, h, "after trim+write");
  close_handle (h);
  vol_stop (v);
  check_members (v);
}
