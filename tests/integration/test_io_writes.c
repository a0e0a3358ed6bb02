/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: concurrent random writes from four
 * connections, read back through each, then every member byte.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libnbd.h>

#include "test_io_fixture.h"

/* ---- case: concurrent random writes, then member bytes --------------- */

struct wjob {
  uint64_t off, len;
  uint32_t flags;
  int err; /* set by the completion callback */
};

struct worker {
  int id;
  struct vol *v;
  struct nbd_handle *h;
  struct wjob *jobs;
  size_t nr_jobs, cap_jobs;
  struct prng rng;
  bool failed;
  uint64_t bytes;
};

static void
add_job (struct worker *w, uint64_t off, uint64_t len, uint32_t flags)
{
  if (w->nr_jobs == w->cap_jobs) {
    w->cap_jobs = w->cap_jobs ? 2 * w->cap_jobs : 64;
    w->jobs = realloc (w->jobs, w->cap_jobs * sizeof *w->jobs);
    if (!w->jobs)
      FAIL ("out of memory");
  }
  w->jobs[w->nr_jobs++] = (struct wjob){ off, len, flags, 0 };
}

static int
write_done (void *user_data, int *error)
{
  struct wjob *j = user_data;
  if (*error)
    j->err = *error;
  return 1; /* retire the command */
}

/* Issue this worker's jobs with up to 16 in flight.  Each job's data is
 * generated into the model first (jobs are disjoint, so threads never touch
 * the same model bytes) and written from there.
 */
static void *
writer_thread (void *arg)
{
  struct worker *w = arg;
  struct vol *v = w->v;
  jmp_buf jb;
  test_jmp = &jb;
  if (setjmp (jb)) {
    w->failed = true;
    return NULL;
  }
  for (size_t i = 0; i < w->nr_jobs; i++) {
    struct wjob *j = &w->jobs[i];
    prng_fill (&w->rng, v->model + j->off, j->len);
    while (nbd_aio_in_flight (w->h) >= 16)
      NBD_OK (nbd_poll (w->h, -1));
    if (nbd_aio_pwrite (
          w->h, v->model + j->off, j->len, j->off,
          (nbd_completion_callback){ .callback = write_done, .user_data = j },
          j->flags)
        == -1)
      FAIL ("conn %d: nbd_aio_pwrite(off=%" PRIu64 ", len=%" PRIu64 "): %s",
            w->id, j->off, j->len, nbd_get_error ());
    w->bytes += j->len;
  }
  while (nbd_aio_in_flight (w->h) > 0)
    NBD_OK (nbd_poll (w->h, -1));
  for (size_t i = 0; i < w->nr_jobs; i++)
    if (w->jobs[i].err) {
      char *wh = where (v, w->jobs[i].off);
      FAIL ("conn %d: write of %" PRIu64 " bytes at %s%s failed: %s", w->id,
            w->jobs[i].len, wh,
            w->jobs[i].flags & LIBNBD_CMD_FLAG_FUA ? " (FUA)" : "",
            strerror (w->jobs[i].err));
    }
  return NULL;
}

/* Read the whole volume in random-sized pieces and compare. */
static void *
reader_thread (void *arg)
{
  struct worker *w = arg;
  struct vol *v = w->v;
  jmp_buf jb;
  char what[64];
  test_jmp = &jb;
  if (setjmp (jb)) {
    w->failed = true;
    return NULL;
  }
  snprintf (what, sizeof what, "read back through conn %d", w->id);
  for (uint64_t off = 0; off < v->o.size;) {
    uint64_t len;
    switch (prng_range (&w->rng, 0, 3)) {
    case 0: len = prng_range (&w->rng, 1, 777); break;
    case 1: len = prng_range (&w->rng, 1, 3 * v->o.chunk); break;
    default: len = prng_range (&w->rng, 1, 4 * MiB); break;
    }
    if (len > v->o.size - off)
      len = v->o.size - off;
    read_compare (v, w->h, off, len, what);
    off += len;
  }
  return NULL;
}

static void
run_workers (struct worker *w, void *(*fn) (void *), const char *phase)
{
  pthread_t t[NR_CONNS];
  bool failed = false;
  for (int i = 0; i < NR_CONNS; i++)
    if ((errno = pthread_create (&t[i], NULL, fn, &w[i])) != 0)
      FAIL ("pthread_create: %m");
  for (int i = 0; i < NR_CONNS; i++) {
    pthread_join (t[i], NULL);
    failed |= w[i].failed;
  }
  CHECK (!failed, "%s: a connection failed (see above)", phase);
}

static uint64_t
pick_len (struct prng *r, const struct vol *v, uint64_t maxreq)
{
  uint64_t c = v->o.chunk, len;
  unsigned p = prng_range (r, 0, 99);
  if (p < 30)
    len = prng_range (r, 1, 600); /* tiny, unaligned */
  else if (p < 55)
    len = prng_range (r, 1, 2 * c); /* around a chunk */
  else if (p < 75)                  /* whole-ish stripes */
    len = prng_range (r, 1, 2 * v->n) * c + prng_range (r, 0, 2) * 4096
          - prng_range (r, 0, 1) * prng_range (r, 0, 511);
  else if (p < 92)
    len = prng_range (r, 1, 512 * 1024);
  else
    len = prng_range (r, 512 * 1024, 4 * MiB); /* large */
  if (len == 0)
    len = 1;
  if (len > maxreq)
    len = maxreq;
  return len;
}

struct range {
  uint64_t off, len;
};

static int
cmp_range (const void *a, const void *b)
{
  const struct range *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

void
case_concurrent_writes (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("concurrent_writes", INIT_RANDOM);
  struct worker w[NR_CONNS];
  struct nbd_handle *h[NR_CONNS];
  uint64_t V = v->o.size, c = v->o.chunk, maxreq = 4 * MiB, gapmax;
  uint64_t g = 1;
  int64_t bmin, bmax;
  bool fua;
  struct range *sp;
  size_t nsp = 0, capsp;
  uint64_t njobs = 0, total = 0;

  vol_start (v);
  memset (w, 0, sizeof w);
  for (int i = 0; i < NR_CONNS; i++) {
    h[i] = vol_connect (v);
    w[i].id = i;
    w[i].v = v;
    w[i].h = h[i];
    prng_seed (&w[i].rng, prng_next (&v->rng));
  }
  bmin = nbd_get_block_size (h[0], LIBNBD_SIZE_MINIMUM);
  bmax = nbd_get_block_size (h[0], LIBNBD_SIZE_MAXIMUM);
  if (bmin > 1)
    note ("server advertises minimum block size %" PRId64 "; sending "
          "unaligned requests anyway (strict alignment off)",
          bmin);
  if (bmax > 0 && (uint64_t) bmax < maxreq)
    maxreq = bmax;
  fua = nbd_can_fua (h[0]) == 1;

  /* Initial contents (random data on the members) read correctly? */
  read_compare_all (v, h[0], "initial contents");

  /* Phase 1: disjoint extents covering the volume with gaps, each owned by
   * one connection, all four writing at once.
   */
  gapmax = V <= 64 * MiB ? 2 * c : 2 * c + (V / (64 * MiB)) * 256 * 1024;
  for (uint64_t pos = 0; pos < V;) {
    uint64_t start = pos, len;
    if (prng_range (&v->rng, 0, 1))
      start += prng_range (&v->rng, 1, gapmax);
    start = start / g * g;
    if (start < pos)
      start = pos;
    if (start >= V)
      break;
    len = pick_len (&v->rng, v, maxreq);
    len = (len + g - 1) / g * g;
    if (len > V - start)
      len = V - start;
    add_job (&w[prng_range (&v->rng, 0, NR_CONNS - 1)], start, len,
             fua && prng_range (&v->rng, 0, 9) == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
    njobs++;
    total += len;
    pos = start + len;
  }
  /* Shuffle each connection's order. */
  for (int i = 0; i < NR_CONNS; i++)
    for (size_t j = w[i].nr_jobs; j > 1; j--) {
      size_t k = prng_range (&v->rng, 0, j - 1);
      struct wjob t = w[i].jobs[j - 1];
      w[i].jobs[j - 1] = w[i].jobs[k];
      w[i].jobs[k] = t;
    }
  note ("phase 1: %" PRIu64 " writes, %" PRIu64 " bytes of %" PRIu64
        ", over %d connections",
        njobs, total, V, NR_CONNS);
  run_workers (w, writer_thread, "phase 1 writes");

  /* Phase 2: after phase 1 completed, overwrite ranges straddling every
   * interesting boundary (zone starts, each member's last chunk, the
   * volume's start and end, the last partial stripe) plus random ones;
   * disjoint among themselves, spread over the connections.
   */
  capsp = 1600 + 3 * (size_t) v->o.nr_boundaries + 2 * v->n;
  sp = xcalloc (capsp, sizeof *sp);
#define SPECIAL(p)                                                            \
  do {                                                                        \
    int64_t a_ =                                                              \
      (int64_t) (p) - (int64_t) prng_range (&v->rng, 0, 2 * c + 13);          \
    int64_t b_ =                                                              \
      (int64_t) (p) + (int64_t) prng_range (&v->rng, 1, 2 * c + 13);          \
    clip (v, a_ / (int64_t) g * (int64_t) g,                                  \
          (b_ + (int64_t) g - 1) / (int64_t) g * (int64_t) g, &sp[nsp].off,   \
          &sp[nsp].len);                                                      \
    if (sp[nsp].len)                                                          \
      nsp++;                                                                  \
  } while (0)
  SPECIAL (0);
  SPECIAL (V);
  SPECIAL (V - c * oracle_width_at (&v->o, V - 1));
  for (unsigned b = 0; b < v->o.nr_boundaries; b++)
    SPECIAL (v->o.boundary[b]);
  for (unsigned i = 0; i < v->n; i++) {
    uint64_t last;
    if (oracle_unmap (&v->o, i, v->o.usable[i] - 1, &last))
      SPECIAL (last + 1);
  }
  /* Many small ones: tiny unaligned, sub-chunk, chunk-crossing. */
  while (nsp < capsp) {
    uint64_t a = prng_range (&v->rng, 0, V - 1), l;
    if (prng_range (&v->rng, 0, 9) < 4)
      l = prng_range (&v->rng, 1, 600);
    else
      l = prng_range (&v->rng, 1, 3 * c);
    clip (v, a, a + l, &sp[nsp].off, &sp[nsp].len);
    nsp++;
  }
#undef SPECIAL
  qsort (sp, nsp, sizeof *sp, cmp_range);
  for (int i = 0; i < NR_CONNS; i++)
    w[i].nr_jobs = 0;
  {
    uint64_t end = 0;
    njobs = 0;
    for (size_t i = 0; i < nsp; i++) {
      if (sp[i].off < end)
        continue; /* keep them disjoint */
      add_job (&w[njobs % NR_CONNS], sp[i].off, sp[i].len,
               fua && (njobs % 3) == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
      njobs++;
      end = sp[i].off + sp[i].len;
    }
  }
  free (sp);
  note ("phase 2: %" PRIu64 " overwrites (disjoint among themselves, "
        "overlapping phase 1): zone/volume boundaries and small random ones",
        njobs);
  run_workers (w, writer_thread, "phase 2 writes");

  /* Read everything back through every connection, concurrently. */
  run_workers (w, reader_thread, "read back");
  note ("read back through %d connections: OK", NR_CONNS);

  for (int i = 0; i < NR_CONNS; i++) {
    NBD_OK (nbd_flush (h[i], 0));
    close_handle (h[i]);
    free (w[i].jobs);
    w[i].jobs = NULL;
  }
  vol_stop (v);

  /* Now the members themselves, byte by byte, against the oracle. */
  check_members (v);
  note ("member files match the layout oracle, tails untouched");
}
