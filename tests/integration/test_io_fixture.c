/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: the fixture (test_io_fixture.h). */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <libnbd.h>

#include "test_io_fixture.h"

struct io_config cfg;

/* ---- a volume under test ----------------------------------------------- */

static void
vol_free (void *arg)
{
  struct vol *v = arg;
  free (v->model);
  for (unsigned i = 0; i < v->n; i++) {
    free (v->tail[i]);
    free (v->path[i]);
    free (v->uri[i]);
  }
  for (unsigned i = 0; i < MAXM + 3; i++)
    free (v->param_store[i]);
  oracle_free (&v->o);
  free (v);
}

static uint64_t
hash_str (const char *s)
{
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++)
    h = (h ^ (unsigned char) *s) * 1099511628211ULL;
  return h;
}

/* Human description of where a logical byte lives. */
char *
where (const struct vol *v, uint64_t off)
{
  unsigned m;
  uint64_t mo;
  if (off >= v->o.size)
    return xasprintf ("logical %" PRIu64 " (beyond the volume)", off);
  oracle_map (&v->o, off, &m, &mo);
  return xasprintf ("logical %" PRIu64 " (logical chunk %" PRIu64 " +%" PRIu64
                    ", member %u %s offset %" PRIu64 ")",
                    off, off / v->o.chunk, off % v->o.chunk, m, v->path[m],
                    mo);
}

static void
fill_random_fd (struct prng *r, int fd, uint64_t off, uint64_t len,
                const char *what)
{
  uint8_t *buf = xmalloc (MiB);
  while (len > 0) {
    size_t n = len < MiB ? len : MiB;
    prng_fill (r, buf, n);
    pwrite_full (fd, buf, n, off, what);
    off += n;
    len -= n;
  }
  free (buf);
}

static void
punch (int fd, uint64_t off, uint64_t len, const char *what)
{
  if (len
      && fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len)
           == -1)
    FAIL ("fallocate punch %s: %m", what);
}

/* Data islands on a sparse member: leave holes, whole chunks, aligned block
 * runs, unaligned tiny writes and runs crossing member chunk boundaries.
 */
static void
write_islands (struct vol *v, unsigned i, int fd)
{
  uint64_t c = v->o.chunk, rows = (v->size[i] + c - 1) / c;
  uint8_t *buf = xmalloc (2 * c);
  for (uint64_t r = 0; r < rows; r++) {
    uint64_t base = r * c, lim = v->size[i];
    unsigned p = prng_range (&v->rng, 0, 99);
    if (p < 40)
      continue;   /* hole */
    if (p < 60) { /* whole chunk */
      uint64_t len = base + c <= lim ? c : lim - base;
      prng_fill (&v->rng, buf, len);
      pwrite_full (fd, buf, len, base, v->path[i]);
    }
    else if (p < 80) { /* 4K-aligned runs */
      uint64_t blocks = c / 4096, b0 = prng_range (&v->rng, 0, blocks - 1);
      uint64_t nb = prng_range (&v->rng, 1, blocks - b0);
      uint64_t off = base + b0 * 4096, len = nb * 4096;
      if (off >= lim)
        continue;
      if (off + len > lim)
        len = lim - off;
      prng_fill (&v->rng, buf, len);
      pwrite_full (fd, buf, len, off, v->path[i]);
    }
    else if (p < 90) { /* a few unaligned tiny writes */
      for (int k = 0; k < 3; k++) {
        uint64_t off = base + prng_range (&v->rng, 0, c - 1);
        uint64_t len = prng_range (&v->rng, 1, 300);
        if (off >= lim)
          continue;
        if (off + len > lim)
          len = lim - off;
        prng_fill (&v->rng, buf, len);
        pwrite_full (fd, buf, len, off, v->path[i]);
      }
    }
    else { /* crossing into the next member chunk */
      uint64_t off = base + c - prng_range (&v->rng, 1, 3) * 4096;
      uint64_t len = prng_range (&v->rng, 2, 5) * 4096;
      if (off >= lim)
        continue;
      if (off + len > lim)
        len = lim - off;
      prng_fill (&v->rng, buf, len);
      pwrite_full (fd, buf, len, off, v->path[i]);
    }
  }
  free (buf);
}

/* Read every member and derive the model and the tails from the oracle. */
static void
vol_snapshot (struct vol *v)
{
  const struct oracle *o = &v->o;
  free (v->model);
  /* Every member chunk, also those past md's size rule's end of the
   * volume (which the volume never touches).
   */
  v->model = xmalloc (o->nr_chunks * o->chunk);
  for (unsigned i = 0; i < v->n; i++) {
    size_t len;
    uint8_t *m = read_file (v->path[i], &len);
    uint64_t rows = o->usable[i] / o->chunk;
    CHECK (len == v->size[i], "%s changed size", v->path[i]);
    for (uint64_t r = 0; r < rows; r++)
      memcpy (v->model + o->rev[i][r] * o->chunk, m + r * o->chunk, o->chunk);
    free (v->tail[i]);
    v->tail[i] = xmalloc (v->size[i] - o->usable[i] + 1);
    memcpy (v->tail[i], m + o->usable[i], v->size[i] - o->usable[i]);
    free (m);
  }
}

/* The member server's arguments after the common ones: --server's, or
 * "file FILE".
 */
static const char **
server_args (const struct vol *v, unsigned i, char ***store)
{
  const char *spec = cfg.server_args[i] ? cfg.server_args[i] : "file %s";
  char *copy = xstrdup (spec), *save = NULL, *tok;
  const char **args = xcalloc (strlen (spec) + 2, sizeof *args);
  size_t n = 0;

  *store = xcalloc (strlen (spec) + 2, sizeof **store);
  for (tok = strtok_r (copy, " ", &save); tok;
       tok = strtok_r (NULL, " ", &save)) {
    char *pct = strstr (tok, "%s");
    if (pct)
      (*store)[n] =
        xasprintf ("%.*s%s%s", (int) (pct - tok), tok, v->path[i], pct + 2);
    else
      (*store)[n] = xstrdup (tok);
    args[n] = (*store)[n];
    n++;
  }
  free (copy);
  return args;
}

static int
first_flags (void *user_data, const char *metacontext, uint64_t offset,
             uint32_t *entries, size_t nr_entries, int *error)
{
  (void) offset;
  (void) error;
  if (strcmp (metacontext, LIBNBD_CONTEXT_BASE_ALLOCATION) == 0
      && nr_entries >= 2)
    *(uint32_t *) user_data = entries[1];
  return 0;
}

/* Whether member i's server reports its file's holes (base:allocation
 * negotiated is not enough: nbdkit answers "all data" for a plugin or
 * filter without extents).  Asked at the file's first hole, if any.
 */
static bool
reports_holes (struct vol *v, unsigned i, struct nbd_handle *h)
{
  int fd;
  off_t hole;
  uint32_t flags = 0;

  if (nbd_can_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != 1)
    return false;
  fd = open (v->path[i], O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    FAIL ("open %s: %m", v->path[i]);
  hole = lseek (fd, 0, SEEK_HOLE);
  close (fd);
  if (hole == -1 || (uint64_t) hole >= v->size[i])
    return true; /* no hole: nothing to tell */
  NBD_OK (nbd_block_status (
    h, 1, hole,
    (nbd_extent_callback){ .callback = first_flags, .user_data = &flags },
    LIBNBD_CMD_FLAG_REQ_ONE));
  return flags & LIBNBD_STATE_HOLE;
}

/* Start the remote members' servers (their files are ready), note their
 * URIs and ask each what it can do.
 */
static void
start_member_servers (struct vol *v)
{
  v->fast_zero = true;
  for (unsigned i = 0; i < v->n; i++) {
    struct msrv_opts mo = { .transport =
                              cfg.how[i] == HOW_TCP ? MSRV_TCP : MSRV_UNIX };
    struct nbd_handle *h;
    const char **args;
    char **store, name[32];

    if (cfg.how[i] == HOW_LOCAL)
      continue;
    v->remote[i] = true;
    if (cfg.tls[i] && !v->psk)
      v->psk = make_psk_file (v->dir, "psk", PSK_USER);
    if (cfg.tls[i])
      mo.tls_psk = v->psk;
    snprintf (name, sizeof name, "member%u", i);
    args = server_args (v, i, &store);
    msrv_start (&v->msrv[i], v->dir, name, &mo, args);
    for (size_t k = 0; store[k]; k++)
      free (store[k]);
    free (store);
    free (args);
    v->uri[i] = msrv_uri (&v->msrv[i], cfg.tls[i] ? v->psk : NULL, PSK_USER);

    h = msrv_connect (&v->msrv[i], cfg.tls[i] ? v->psk : NULL, PSK_USER);
    CHECK (nbd_get_size (h) == (int64_t) v->size[i],
           "member %u server: size %" PRId64 ", the file has %" PRIu64, i,
           nbd_get_size (h), v->size[i]);
    v->caps[i].trim = nbd_can_trim (h) == 1;
    v->caps[i].fast_zero = nbd_can_fast_zero (h) == 1;
    v->caps[i].fua = nbd_can_fua (h) == 1;
    v->caps[i].flush = nbd_can_flush (h) == 1;
    v->caps[i].multi_conn = nbd_can_multi_conn (h) == 1;
    v->caps[i].extents = reports_holes (v, i, h);
    close_handle (h);
    v->fast_zero &= v->caps[i].fast_zero;
    note ("member %u: %s (trim %d, fast zero %d, fua %d, flush %d, "
          "multi-conn %d, extents %d)",
          i, v->uri[i], v->caps[i].trim, v->caps[i].fast_zero, v->caps[i].fua,
          v->caps[i].flush, v->caps[i].multi_conn, v->caps[i].extents);
  }
}

/* Whether a trim reaches member i's bytes. */
bool
member_trims (const struct vol *v, unsigned i)
{
  return !v->remote[i] || v->caps[i].trim;
}

/* The model after a trim of [off, off+len) that reads back as zeroes on
 * the members that trim and leaves the others' bytes as they were.
 */
void
model_trim (struct vol *v, uint64_t off, uint64_t len)
{
  uint64_t end = off + len;
  while (off < end) {
    unsigned m;
    uint64_t mo, n = oracle_map (&v->o, off, &m, &mo);
    if (n > end - off)
      n = end - off;
    if (member_trims (v, m))
      memset (v->model + off, 0, n);
    off += n;
  }
}

struct vol *
vol_setup (const char *case_name, enum init_mode mode)
{
  struct vol *v = xcalloc (1, sizeof *v);
  unsigned np = 0;

  v->dir = make_temp_dir ();
  cleanup_push (vol_free, v);
  prng_seed (&v->rng, cfg.seed ^ hash_str (case_name));
  v->n = cfg.n;
  for (unsigned i = 0; i < v->n; i++) {
    if (cfg.given)
      v->path[i] = xstrdup (cfg.member[i]);
    else {
      int fd;
      v->path[i] = xasprintf ("%s/member%u.img", v->dir, i);
      fd = open (v->path[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd == -1 || ftruncate (fd, cfg.sizes[i]) == -1)
        FAIL ("create %s: %m", v->path[i]);
      close (fd);
    }
    v->size[i] = path_size (v->path[i], &v->blk[i]);
    v->any_blk |= v->blk[i];
  }
  if (oracle_init (&v->o, cfg.chunk, v->n, v->size) == -1)
    FAIL ("invalid configuration: chunk %" PRIu64 " with these members "
          "(each must hold at least one chunk)",
          cfg.chunk);

  for (unsigned i = 0; i < v->n && mode != INIT_NONE; i++) {
    int fd = open (v->path[i], O_WRONLY | O_CLOEXEC);
    if (fd == -1)
      FAIL ("open %s: %m", v->path[i]);
    if (mode == INIT_RANDOM || v->blk[i])
      fill_random_fd (&v->rng, fd, 0, v->size[i], v->path[i]);
    else {
      punch (fd, 0, v->size[i], v->path[i]);
      write_islands (v, i, fd);
    }
    if (fsync (fd) == -1)
      FAIL ("fsync %s: %m", v->path[i]);
    close (fd);
  }
  vol_snapshot (v);
  start_member_servers (v);

  for (unsigned i = 0; i < v->n; i++) {
    v->param_store[np] =
      xasprintf ("file=%s", v->remote[i] ? v->uri[i] : v->path[i]);
    v->params[np] = v->param_store[np];
    np++;
  }
  if (cfg.chunk_str) {
    v->param_store[np] = xasprintf ("chunk=%s", cfg.chunk_str);
    v->params[np] = v->param_store[np];
    np++;
  }
  if (cfg.connections) {
    v->param_store[np] = xasprintf ("connections=%u", cfg.connections);
    v->params[np] = v->param_store[np];
    np++;
  }
  v->params[np] = NULL;
  v->opts.no_uring = cfg.no_uring;
  return v;
}

void
vol_start (struct vol *v)
{
  for (unsigned i = 0; i < v->n; i++)
    if (v->remote[i])
      v->mark[i] = msrv_log_mark (&v->msrv[i]);
  server_start (&v->srv, v->dir, &v->opts, v->params);
}

/* Stop the volume's nbdkit, then the member servers (cleanly), and count
 * the connections the volume opened to each.
 */
void
vol_stop (struct vol *v)
{
  server_stop (&v->srv);
  for (unsigned i = 0; i < v->n; i++) {
    unsigned opened, peak, want;
    if (!v->remote[i])
      continue;
    msrv_stop (&v->msrv[i]);
    msrv_connections (&v->msrv[i], v->mark[i], &opened, &peak);
    want = !v->caps[i].multi_conn ? 1
           : cfg.connections      ? cfg.connections
                                  : DEFAULT_CONNECTIONS;
    note ("member %u server (multi-conn %d): the volume opened %u "
          "connection(s), %u at most at once",
          i, v->caps[i].multi_conn, opened, peak);
    CHECK (opened == want && peak == want,
           "member %u (%s): the volume opened %u connection(s), at most %u "
           "at once; expected %u (server multi-conn %d; its log %s)",
           i, v->uri[i], opened, peak, want, v->caps[i].multi_conn,
           v->msrv[i].reqlog);
  }
}

/* A connection that sends unaligned requests even when the server
 * advertises a minimum block size: nbdkit hands them to the plugin, which
 * must cope (the spec requires byte granularity).
 */
struct nbd_handle *
vol_connect (struct vol *v)
{
  struct nbd_handle *h = server_connect (&v->srv);
  int mode = nbd_get_strict_mode (h);
  if (mode == -1 || nbd_set_strict_mode (h, mode & ~LIBNBD_STRICT_ALIGN) == -1)
    FAIL ("nbd_set_strict_mode: %s", nbd_get_error ());
  return h;
}

/* Compare every member byte with the model through the oracle, and the
 * bytes beyond each member's usable size with what was there before.
 */
void
check_members (struct vol *v)
{
  const struct oracle *o = &v->o;
  uint8_t *mem[MAXM];
  for (unsigned i = 0; i < v->n; i++) {
    size_t len;
    mem[i] = read_file (v->path[i], &len);
    CHECK (len == v->size[i], "%s changed size: %zu, was %" PRIu64, v->path[i],
           len, v->size[i]);
  }
  for (unsigned i = 0; i < v->n; i++) {
    uint64_t rows = o->usable[i] / o->chunk;
    for (uint64_t r = 0; r < rows; r++) {
      uint64_t k = o->rev[i][r];
      const uint8_t *got = mem[i] + r * o->chunk;
      const uint8_t *exp = v->model + k * o->chunk;
      if (memcmp (got, exp, o->chunk) != 0) {
        uint64_t d = 0;
        char hint[512] = "the expected bytes are not found on any member";
        while (got[d] == exp[d])
          d++;
        /* Diagnose "right data, wrong place". */
        if (o->chunk - d >= 16) {
          for (unsigned j = 0; j < v->n; j++) {
            const uint8_t *f = memmem (mem[j], v->size[j], exp + d, 16);
            if (f) {
              snprintf (hint, sizeof hint,
                        "the expected bytes are on member "
                        "%u at offset %td instead",
                        j, f - mem[j]);
              break;
            }
          }
        }
        FAIL ("member %u (%s) offset %" PRIu64 ": got byte 0x%02x, the layout "
              "oracle expects 0x%02x from logical offset %" PRIu64
              " (logical chunk %" PRIu64 " -> member %u row %" PRIu64 "); %s",
              i, v->path[i], r * o->chunk + d, got[d], exp[d],
              k * o->chunk + d, k, i, r, hint);
      }
    }
    if (memcmp (mem[i] + o->usable[i], v->tail[i], v->size[i] - o->usable[i])
        != 0) {
      uint64_t d = 0;
      while (mem[i][o->usable[i] + d] == v->tail[i][d])
        d++;
      FAIL ("member %u (%s): byte at offset %" PRIu64 ", beyond the usable "
            "size %" PRIu64 ", was modified",
            i, v->path[i], o->usable[i] + d, o->usable[i]);
    }
  }
  for (unsigned i = 0; i < v->n; i++)
    free (mem[i]);
}

/* Read [off, off+len) through h and compare with the model. */
void
read_compare (struct vol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
              const char *what)
{
  uint8_t *buf = xmalloc (len);
  if (nbd_pread (h, buf, len, off, 0) == -1)
    FAIL ("%s: nbd_pread(off=%" PRIu64 ", len=%" PRIu64 "): %s", what, off,
          len, nbd_get_error ());
  if (memcmp (buf, v->model + off, len) != 0) {
    uint64_t d = 0;
    char *w;
    while (buf[d] == v->model[off + d])
      d++;
    w = where (v, off + d);
    FAIL ("%s: read of [%" PRIu64 ", +%" PRIu64 ") differs at %s: got 0x%02x "
          "expected 0x%02x",
          what, off, len, w, buf[d], v->model[off + d]);
  }
  free (buf);
}

void
read_compare_all (struct vol *v, struct nbd_handle *h, const char *what)
{
  for (uint64_t off = 0; off < v->o.size; off += 4 * MiB)
    read_compare (v, h, off,
                  v->o.size - off < 4 * MiB ? v->o.size - off : 4 * MiB, what);
}

void
expect_zero (struct vol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
             const char *what)
{
  memset (v->model + off, 0, len);
  read_compare (v, h, off, len, what);
}

/* The logical range [a, b) clipped to the volume. */
void
clip (const struct vol *v, int64_t a, int64_t b, uint64_t *off, uint64_t *len)
{
  if (a < 0)
    a = 0;
  if ((uint64_t) b > v->o.size)
    b = v->o.size;
  if (b < a)
    b = a;
  *off = a;
  *len = b - a;
}

uint64_t
zone0_stripe (const struct vol *v)
{
  return v->o.chunk * v->n;
}

uint64_t
blocks_of (const char *path)
{
  struct stat st;
  if (stat (path, &st) == -1)
    FAIL ("stat %s: %m", path);
  return st.st_blocks;
}

/* Does the logical range cover a whole 4K block of member i? */
bool
covers_block (const struct vol *v, unsigned i, uint64_t off, uint64_t len)
{
  uint64_t end = off + len;
  while (off < end) {
    unsigned m;
    uint64_t mo, n = oracle_map (&v->o, off, &m, &mo);
    if (n > end - off)
      n = end - off;
    if (m == i && (mo + 4095) / 4096 * 4096 + 4096 <= mo + n)
      return true;
    off += n;
  }
  return false;
}
