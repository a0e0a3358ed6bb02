/* nbdstripe integration test: data path against a real nbdkit.
 *
 *   test_io [--member PATH]... [--chunk SIZE] [--no-uring] [--seed N]
 *           [--sizes SIZE,SIZE,...] [--case NAME]
 *           [--remote HOW[,HOW...]] [--server I:ARGS] [--connections N]
 *
 * Without --member it makes its own sparse member files in a temporary
 * directory: by default four members of mixed sizes (5M+3584, 8M, 3M+17K,
 * 8M) with chunk 12K; --sizes picks other sizes.  With --member (repeated)
 * it uses the given regular files or block devices, in order, and
 * OVERWRITES them.  --chunk is passed as chunk=SIZE (without it, and with
 * --member or --sizes, no chunk= is passed and the plugin's default 128K is
 * expected).  --no-uring passes -D stripe.io_uring=0.  --case runs one case.
 *
 * --remote serves members remotely (msrv.h): HOW is local, unix, tcp,
 * tls-unix or tls-tcp, one for every member or one per member in order.
 * A remote member's file (the same file as a local one would be: the
 * backing file) is exported by a stock nbdkit of its own, by default
 * `nbdkit file FILE`; --server I:ARGS replaces "file FILE" for member I
 * with ARGS split at spaces, %s standing for the file (e.g.
 * "1:--filter=multi-conn file %s multi-conn-mode=disable").  The volume
 * gets the member's NBD URI instead of its path; TLS members share one
 * PSK made by psktool.  --connections N passes connections=N.
 *
 * Every byte is checked against an in-memory model of the volume, and the
 * member files against an independent layout oracle (oracle.c).
 *
 * With remote members, what each member server can do (asked with libnbd
 * before the volume starts) sets what is expected: the volume advertises
 * fast zero only if every remote member does; a trim leaves the bytes of
 * a member without trim unchanged (and its file's blocks); extents of a
 * member whose server does not report holes are all data; a FUA write reaches
 * a server without FUA as a write and a flush.  And the volume's nbdkit opens
 * exactly N connections (connections=, default 4) to a member server that
 * advertises multi-conn and exactly 1 to one that does not: counted in the
 * server's log filter lines, Connect and Disconnect in order, over the
 * volume's whole run.
 *
 * Exit: 0 all passed, 1 a case failed, 77 everything skipped.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <libnbd.h>

#include "harness.h"
#include "msrv.h"
#include "oracle.h"

#define MAXM ORACLE_MAX_MEMBERS
#define NR_CONNS 4
#define MiB (1024 * 1024ULL)

/* ---- configuration ----------------------------------------------------- */

static struct {
  unsigned n;
  const char *member[MAXM]; /* --member, or NULL entries */
  bool given;
  uint64_t sizes[MAXM]; /* generated member sizes */
  uint64_t chunk;
  const char *chunk_str; /* passed as chunk=, or NULL */
  bool no_uring;
  uint64_t seed;
  const char *only_case;
  enum how { HOW_LOCAL, HOW_UNIX, HOW_TCP } how[MAXM];
  bool tls[MAXM];
  const char *server_args[MAXM]; /* --server I:ARGS */
  unsigned connections;          /* --connections, 0: not passed */
} cfg;

/* The plugin's connections= default (include/remote.h). */
#define DEFAULT_CONNECTIONS 4
#define PSK_USER "nbdstripe"

#define DEFAULT_SEED 20240611ULL
static const char default_sizes[] = "5M+3584,8M,3M+17K,8M";
static const char default_chunk[] = "12K";

/* ---- a volume under test ----------------------------------------------- */

enum init_mode { INIT_NONE, INIT_RANDOM, INIT_SPARSE };

struct vol {
  char *dir;
  unsigned n;
  char *path[MAXM];
  bool blk[MAXM];
  uint64_t size[MAXM];
  struct oracle o;
  uint8_t *model;      /* expected logical contents */
  uint8_t *tail[MAXM]; /* expected bytes beyond the usable size */
  struct prng rng;
  struct server srv;
  struct nbdkit_opts opts;
  const char *params[MAXM + 3];
  char *param_store[MAXM + 3];
  bool any_blk;
  /* Remote members: the member server, its URI, what it can do, and its
   * request log's mark when the volume started.
   */
  bool remote[MAXM];
  struct msrv msrv[MAXM];
  char *uri[MAXM];
  char *psk; /* freed by the case's cleanup */
  struct {
    bool trim, fast_zero, fua, flush, multi_conn, extents;
  } caps[MAXM];
  uint64_t mark[MAXM];
  bool fast_zero; /* expected from the volume */
};

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
static char *
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
  v->model = xmalloc (o->size);
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
static bool
member_trims (const struct vol *v, unsigned i)
{
  return !v->remote[i] || v->caps[i].trim;
}

/* The model after a trim of [off, off+len) that reads back as zeroes on
 * the members that trim and leaves the others' bytes as they were.
 */
static void
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

static struct vol *
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

static void
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
static void
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
static struct nbd_handle *
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
static void
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
static void
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

static void
read_compare_all (struct vol *v, struct nbd_handle *h, const char *what)
{
  for (uint64_t off = 0; off < v->o.size; off += 4 * MiB)
    read_compare (v, h, off,
                  v->o.size - off < 4 * MiB ? v->o.size - off : 4 * MiB, what);
}

static void
expect_zero (struct vol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
             const char *what)
{
  memset (v->model + off, 0, len);
  read_compare (v, h, off, len, what);
}

/* The logical range [a, b) clipped to the volume. */
static void
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

static uint64_t
zone0_stripe (const struct vol *v)
{
  return v->o.chunk * v->n;
}

static uint64_t
blocks_of (const char *path)
{
  struct stat st;
  if (stat (path, &st) == -1)
    FAIL ("stat %s: %m", path);
  return st.st_blocks;
}

/* Does the logical range cover a whole 4K block of member i? */
static bool
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

/* ---- case: properties -------------------------------------------------- */

static void
case_properties (void *arg)
{
  (void) arg;
  struct vol *v = vol_setup ("properties", INIT_NONE);
  struct nbd_handle *h;
  int64_t size, bmin, bpref, bmax;
  uint64_t expect = 0;

  for (unsigned i = 0; i < v->n; i++)
    expect += v->size[i] / v->o.chunk * v->o.chunk;
  vol_start (v);
  h = vol_connect (v);

  size = nbd_get_size (h);
  CHECK (size == (int64_t) expect,
         "export size %" PRId64 ", expected the sum "
         "of the rounded member sizes %" PRIu64,
         size, expect);
  note ("size %" PRId64 " = sum of members rounded down to chunk %" PRIu64,
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

static void
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

static void
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

static void
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

static void
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

/* ---- main ------------------------------------------------------------- */

static void
usage (FILE *f)
{
  fprintf (
    f,
    "usage: test_io [--member PATH]... [--chunk SIZE] [--no-uring] [--seed "
    "N]\n"
    "               [--sizes SIZE,SIZE,...] [--case NAME]\n"
    "  --member PATH  use this member (file or block device; OVERWRITTEN)\n"
    "  --chunk SIZE   chunk=SIZE (default: 12K with the built-in members,\n"
    "                 else not passed and 128K expected)\n"
    "  --no-uring     run nbdkit with -D stripe.io_uring=0\n"
    "  --seed N       random seed (default %llu)\n"
    "  --sizes LIST   sizes of generated members (default %s)\n"
    "  --case NAME    run only this case\n"
    "  --remote HOW[,HOW...]  serve members remotely: local, unix, tcp,\n"
    "                 tls-unix, tls-tcp (one for all, or one per member)\n"
    "  --server I:ARGS  member I's server runs ARGS instead of \"file %%s\"\n"
    "                 (%%s: its file)\n"
    "  --connections N  pass connections=N\n"
    "environment: STRIPE_PLUGIN (required), STRIPE_LD_PRELOAD,\n"
    "             STRIPE_TEST_VERBOSE=1, STRIPE_KEEP_TMP=1\n",
    (unsigned long long) DEFAULT_SEED, default_sizes);
}

static int
parse_sizes (const char *list)
{
  char *copy = xstrdup (list), *save = NULL, *tok;
  cfg.n = 0;
  for (tok = strtok_r (copy, ",", &save); tok;
       tok = strtok_r (NULL, ",", &save)) {
    if (cfg.n == MAXM || parse_size (tok, &cfg.sizes[cfg.n]) == -1) {
      free (copy);
      return -1;
    }
    cfg.n++;
  }
  free (copy);
  return cfg.n ? 0 : -1;
}

/* --remote: one HOW for every member, or one per member. */
static int
parse_remote (const char *list)
{
  char *copy = xstrdup (list), *save = NULL, *tok;
  unsigned k = 0;
  for (tok = strtok_r (copy, ",", &save); tok;
       tok = strtok_r (NULL, ",", &save)) {
    enum how how;
    bool tls = strncmp (tok, "tls-", 4) == 0;
    const char *t = tls ? tok + 4 : tok;
    if (strcmp (t, "local") == 0 && !tls)
      how = HOW_LOCAL;
    else if (strcmp (t, "unix") == 0)
      how = HOW_UNIX;
    else if (strcmp (t, "tcp") == 0)
      how = HOW_TCP;
    else {
      fprintf (stderr, "test_io: --remote: unknown %s\n", tok);
      free (copy);
      return -1;
    }
    if (k == MAXM) {
      free (copy);
      return -1;
    }
    cfg.how[k] = how;
    cfg.tls[k] = tls;
    k++;
  }
  free (copy);
  if (k == 1)
    for (unsigned i = 1; i < cfg.n; i++) {
      cfg.how[i] = cfg.how[0];
      cfg.tls[i] = cfg.tls[0];
    }
  else if (k != cfg.n) {
    fprintf (stderr, "test_io: --remote: %u entries for %u members\n", k,
             cfg.n);
    return -1;
  }
  return 0;
}

static const struct {
  const char *name;
  void (*fn) (void *);
} cases[] = {
  { "properties", case_properties },
  { "concurrent_writes", case_concurrent_writes },
  { "trim", case_trim },
  { "zero_fua_flush", case_zero_fua_flush },
  { "extents", case_extents },
};

int
main (int argc, char **argv)
{
  const char *sizes = NULL, *remote = NULL;
  int passed = 0, failed = 0, skipped = 0;
  bool ran = false;

  cfg.seed = DEFAULT_SEED;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp (a, "--member") == 0 && val) {
      if (cfg.n == MAXM) {
        fprintf (stderr, "test_io: too many members\n");
        return 1;
      }
      cfg.member[cfg.n++] = val;
      cfg.given = true;
      i++;
    }
    else if (strcmp (a, "--chunk") == 0 && val) {
      cfg.chunk_str = val;
      if (parse_size (val, &cfg.chunk) == -1 || cfg.chunk == 0) {
        fprintf (stderr, "test_io: bad --chunk %s\n", val);
        return 1;
      }
      i++;
    }
    else if (strcmp (a, "--no-uring") == 0)
      cfg.no_uring = true;
    else if (strcmp (a, "--seed") == 0 && val) {
      cfg.seed = strtoull (val, NULL, 0);
      i++;
    }
    else if (strcmp (a, "--sizes") == 0 && val) {
      sizes = val;
      i++;
    }
    else if (strcmp (a, "--case") == 0 && val) {
      cfg.only_case = val;
      i++;
    }
    else if (strcmp (a, "--remote") == 0 && val) {
      remote = val;
      i++;
    }
    else if (strcmp (a, "--server") == 0 && val) {
      char *end;
      unsigned long m = strtoul (val, &end, 10);
      if (end == val || *end != ':' || m >= MAXM) {
        fprintf (stderr, "test_io: bad --server %s (I:ARGS)\n", val);
        return 1;
      }
      cfg.server_args[m] = end + 1;
      i++;
    }
    else if (strcmp (a, "--connections") == 0 && val) {
      cfg.connections = strtoul (val, NULL, 10);
      if (cfg.connections == 0) {
        fprintf (stderr, "test_io: bad --connections %s\n", val);
        return 1;
      }
      i++;
    }
    else if (strcmp (a, "--help") == 0 || strcmp (a, "-h") == 0) {
      usage (stdout);
      return 0;
    }
    else {
      usage (stderr);
      return 1;
    }
  }
  if (cfg.given && sizes) {
    fprintf (stderr, "test_io: --member and --sizes are exclusive\n");
    return 1;
  }
  if (!cfg.given) {
    if (!sizes && !cfg.chunk_str) {
      cfg.chunk_str = default_chunk;
      parse_size (default_chunk, &cfg.chunk);
    }
    if (parse_sizes (sizes ? sizes : default_sizes) == -1) {
      fprintf (stderr, "test_io: bad --sizes\n");
      return 1;
    }
  }
  if (!cfg.chunk_str)
    cfg.chunk = 128 * 1024;
  if (remote && parse_remote (remote) == -1)
    return 1;
  for (unsigned i = 0; i < MAXM; i++)
    if (cfg.server_args[i] && (i >= cfg.n || cfg.how[i] == HOW_LOCAL)) {
      fprintf (stderr, "test_io: --server %u: not a remote member\n", i);
      return 1;
    }

  if (!getenv ("STRIPE_PLUGIN") || !*getenv ("STRIPE_PLUGIN")) {
    printf ("SKIP: STRIPE_PLUGIN is not set\n");
    return EXIT_SKIP;
  }

  printf ("# test_io: seed %llu (reproduce with --seed %llu)\n",
          (unsigned long long) cfg.seed, (unsigned long long) cfg.seed);
  printf ("# chunk %llu%s%s, %u members:", (unsigned long long) cfg.chunk,
          cfg.chunk_str ? "" : " (plugin default, not passed)",
          cfg.no_uring ? ", -D stripe.io_uring=0" : "", cfg.n);
  for (unsigned i = 0; i < cfg.n; i++) {
    static const char *const how[] = { "local", "unix", "tcp" };
    if (cfg.given)
      printf (" %s", cfg.member[i]);
    else
      printf (" %llu", (unsigned long long) cfg.sizes[i]);
    if (remote)
      printf (" (%s%s%s%s)", cfg.tls[i] ? "tls-" : "", how[cfg.how[i]],
              cfg.server_args[i] ? ": " : "",
              cfg.server_args[i] ? cfg.server_args[i] : "");
  }
  printf ("\n");

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cfg.only_case && strcmp (cfg.only_case, cases[i].name) != 0)
      continue;
    ran = true;
    switch (run_case (cases[i].name, cases[i].fn, NULL)) {
    case OUTCOME_PASS: passed++; break;
    case OUTCOME_SKIP: skipped++; break;
    default: failed++; break;
    }
  }
  if (!ran) {
    fprintf (stderr, "test_io: no case named %s\n", cfg.only_case);
    return 1;
  }
  printf ("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed)
    return EXIT_FAILURE;
  if (passed == 0)
    return EXIT_SKIP;
  return EXIT_SUCCESS;
}
