/* nbdstripe: a volume, members + layout.  See include/volume.h. */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "assemble.h"
#include "claim.h"
#include "health.h"
#include "identity.h"
#include "ioexec.h"
#include "log.h"
#include "plan.h"
#include "remote.h"
#include "header.h"
#include "volume.h"

/* Stop an extents walk after this many runs: the client asks again for
 * the rest, and one request must not do unbounded work.
 */
#define EXTENTS_MAX_RUNS 65536

int
volume_open (struct volume *v, unsigned nr_members, const char *const *paths,
             const struct volume_options *o)
{
  const struct assembly *a = o->assembly;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  uint64_t data_offset = a ? a->data_offset : 0;
  uint64_t chunk = o->chunk;
  enum layout_error lerr;
  unsigned bad = 0;

  memset (v, 0, sizeof *v);
  pthread_mutex_init (&v->header_lock, NULL);
  v->readonly = o->readonly;
  v->cache = o->cache;
  v->data_offset = data_offset;
  if (nr_members == 0) {
    stripe_error ("no members: give at least one file=PATH");
    errno = EINVAL;
    return -1;
  }
  if (nr_members > LAYOUT_MAX_MEMBERS) {
    stripe_error ("%u members given: at most %d are supported", nr_members,
                  LAYOUT_MAX_MEMBERS);
    errno = EINVAL;
    return -1;
  }
  if (chunk == 0 || chunk % LAYOUT_CHUNK_ALIGN != 0) {
    stripe_error ("chunk=%" PRIu64 ": %s", chunk,
                  layout_strerror (LAYOUT_ERR_CHUNK));
    errno = EINVAL;
    return -1;
  }

  for (unsigned i = 0; i < nr_members; ++i) {
    if (member_open (&v->members[i], i, paths[i], o->readonly,
                     o->cache == CACHE_DIRECT)
        == -1) {
      v->nr_members = i + 1; /* member_open leaves it closable */
      goto err;
    }
    v->nr_members = i + 1;
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (identity_alias (&v->members[j].id, &v->members[i].id, how,
                          sizeof how)) {
        stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                      "may be given only once, and members must not "
                      "overlap",
                      j, paths[j], i, paths[i], how);
        errno = EINVAL;
        goto err;
      }
    }
    /* Only now: a second name for a member is an alias, not "in use". */
    if (o->claim && member_claim (&v->members[i]) == -1)
      goto err;
    if (v->members[i].size < data_offset) {
      stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                    "the data offset (%" PRIu64 ")",
                    i, paths[i], v->members[i].size, data_offset);
      errno = EINVAL;
      goto err;
    }
    sizes[i] = v->members[i].size - data_offset;
    if (a) {
      /* The header says how much data the member holds: a member that
       * shrank (or was replaced by a smaller one) would lose data.
       */
      if (a->data_sizes[i] > sizes[i]) {
        stripe_error ("member %u (%s): holds %" PRIu64 " bytes of data "
                      "but the volume expects %" PRIu64 ": truncated or "
                      "replaced by a smaller member?",
                      i, paths[i], sizes[i], a->data_sizes[i]);
        errno = EINVAL;
        goto err;
      }
      sizes[i] = a->data_sizes[i];
    }
    if (v->members[i].min_io > v->min_block)
      v->min_block = v->members[i].min_io;
    if (v->members[i].physical_block > v->preferred_block)
      v->preferred_block = v->members[i].physical_block;
  }
  if (v->preferred_block < 4096)
    v->preferred_block = 4096;

  lerr = layout_init (&v->layout, chunk, nr_members, sizes, &bad);
  if (lerr == LAYOUT_ERR_MEMBER_TOO_SMALL) {
    stripe_error ("member %u (%s): size %" PRIu64 " bytes is smaller than "
                  "one chunk (chunk=%" PRIu64 ")",
                  bad, paths[bad], sizes[bad], chunk);
    errno = EINVAL;
    goto err;
  }
  if (lerr != LAYOUT_OK) {
    stripe_error ("%s", layout_strerror (lerr));
    errno = EINVAL;
    goto err;
  }
  /* NBD sizes and offsets are signed 64-bit in nbdkit and most clients. */
  if (v->layout.size > INT64_MAX) {
    stripe_error ("the members add up to %" PRIu64 " bytes: a volume can "
                  "be at most %" PRId64 " bytes (2^63 - 1, NBD's limit)",
                  v->layout.size, INT64_MAX);
    errno = EFBIG;
    goto err;
  }
  for (unsigned i = 0; i < nr_members; ++i) {
    v->members[i].need = data_offset + v->layout.member_size[i];
    if (a == NULL && v->layout.member_size[i] != sizes[i])
      stripe_debug ("member %u (%s): last %" PRIu64 " bytes unused "
                    "(not a whole chunk)",
                    i, paths[i], sizes[i] - v->layout.member_size[i]);
  }
  /* What zeroing methods work, learnt where nothing lives: the gap
   * between a header and the data.  So that a fast zero (known to work,
   * or refused) works from the first request.
   */
  if (a && o->claim && !o->readonly && data_offset >= 2 * HEADER_SIZE)
    for (unsigned i = 0; i < nr_members; ++i)
      member_learn_zero (&v->members[i], HEADER_SIZE, HEADER_SIZE);
  if (a) {
    v->has_header = true;
    v->sb = a->sb;
    for (unsigned i = 0; i < nr_members; ++i) {
      memcpy (v->member_uuid[i], a->member_uuid[i], 16);
      v->member_events[i] = a->sb.events;
    }
  }
  stripe_debug ("volume: %u members, chunk %" PRIu64 ", %u zone(s), "
                "%" PRIu64 " bytes, cache=%s",
                nr_members, chunk, v->layout.nr_zones, v->layout.size,
                cache_mode_name (o->cache));
  return 0;

err:
  volume_close (v);
  return -1;
}

void
volume_close (struct volume *v)
{
  for (unsigned i = v->nr_members; i-- > 0;)
    member_close (&v->members[i]);
  v->nr_members = 0;
  pthread_mutex_destroy (&v->header_lock);
}

/* Fail fast: a request touching a failed member fails at once with EIO,
 * before any member is touched.
 */
static int
refuse_failed (struct volume *v, uint64_t mask)
{
  if (v->health == NULL)
    return 0;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if ((mask >> i & 1) && health_member_state (v->health, i) == MS_FAILED) {
      health_rejected (v->health, i);
      stripe_debug ("member %u (%s) has failed: request refused (EIO)", i,
                    v->members[i].path);
      errno = EIO;
      return -1;
    }
  return 0;
}

static enum health_op
health_op_of (enum op_kind kind)
{
  switch (kind) {
  case OP_READ: return HOP_READ;
  case OP_WRITE: return HOP_WRITE;
  case OP_FLUSH: break;
  }
  return HOP_FLUSH;
}

/* Run ops, recording each one with health. */
static int
run_ops (struct volume *v, struct member_op *ops, unsigned nr)
{
  _Atomic uint64_t *busy = health_io_begin (v->health);
  int r, err;

  for (unsigned i = 0; i < nr; ++i)
    ops[i].busy = busy;
  r = ioexec_run (ops, nr);
  err = errno;
  health_io_end (v->health);
  if (v->health)
    for (unsigned i = 0; i < nr; ++i)
      health_record (v->health, ops[i].m->index, health_op_of (ops[i].kind),
                     ops[i].length, ops[i].ns, ops[i].err, ops[i].offset);
  errno = err;
  return r;
}

int
volume_start (struct volume *v)
{
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (v->members[i].remote && remote_start (v->members[i].remote) == -1)
      return -1;
  return 0;
}

/* A member found unusable outside of an I/O error: failed at once, named. */
static void
member_gone (struct volume *v, unsigned i, const char *reason)
{
  stripe_error ("member %u (%s): %s", i, v->members[i].path, reason);
  health_member_gone (v->health, i, reason);
}

/* A write must never extend a member file: one truncated under us would
 * be re-extended with holes where its data was, and the loss would go
 * unseen.  Before a write, every regular-file member it touches must
 * still hold what the volume needs; seen[] keeps the sizes found.
 */
static int
guard_sizes (struct volume *v, uint64_t mask, uint64_t *seen)
{
  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *m = &v->members[i];
    char reason[256];

    if (!(mask >> i & 1) || !m->is_regular)
      continue;
    if (member_current_size (m, &seen[i]) == -1) {
      snprintf (reason, sizeof reason, "device gone: size: %s",
                strerror (errno));
      member_gone (v, i, reason);
      errno = EIO;
      return -1;
    }
    if (seen[i] < m->need) {
      snprintf (reason, sizeof reason,
                "device gone: truncated to %" PRIu64 " bytes, the volume "
                "needs %" PRIu64 " (nothing written to it)",
                seen[i], m->need);
      member_gone (v, i, reason);
      errno = EIO;
      return -1;
    }
  }
  return 0;
}

/* After the write: a size that changed meanwhile means the file was cut
 * (and perhaps re-extended by this very write).
 */
static int
recheck_sizes (struct volume *v, uint64_t mask, const uint64_t *seen)
{
  int r = 0;

  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct member *m = &v->members[i];
    uint64_t now;
    char reason[256];

    if (!(mask >> i & 1) || !m->is_regular)
      continue;
    if (member_current_size (m, &now) == 0 && now == seen[i])
      continue;
    snprintf (reason, sizeof reason,
              "device gone: its size changed during a write (%" PRIu64
              " -> %" PRIu64 " bytes): truncated under the volume?",
              seen[i], now);
    member_gone (v, i, reason);
    r = -1;
  }
  if (r == -1)
    errno = EIO;
  return r;
}

/* A request the members cannot take (misaligned for one of them, or
 * beyond the end) is the client's error: refused with EINVAL to that
 * client alone, before it reaches a member, and no member's health.
 */
static inline int
check_request (const struct volume *v, uint64_t count, uint64_t offset)
{
  if (((offset | count) & (v->min_block - 1)) != 0 || offset > v->layout.size
      || count > v->layout.size - offset) {
    errno = EINVAL;
    return -1;
  }
  return 0;
}

static int
rw (struct volume *v, enum op_kind kind, void *buf, uint64_t count,
    uint64_t offset, bool fua)
{
  struct io_plan plan;
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  uint64_t mask = 0, seen[LAYOUT_MAX_MEMBERS];
  int r = -1;

  if (check_request (v, count, offset) == -1)
    return -1;
  if (plan_rw (&plan, &v->layout, buf, count, offset) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i)
    mask |= UINT64_C (1) << plan.ios[i].member;
  if (refuse_failed (v, mask) == -1)
    goto out;
  if (kind == OP_WRITE && guard_sizes (v, mask, seen) == -1)
    goto out;
  for (unsigned i = 0; i < plan.nr_ios; ++i) {
    const struct member_io *io = &plan.ios[i];
    ops[i] = (struct member_op){
      .m = &v->members[io->member],
      .kind = kind,
      .offset = v->data_offset + io->member_offset,
      .length = io->length,
      .iov = io->iov,
      .nr_iov = io->nr_iov,
      .fua = fua,
    };
  }
  r = run_ops (v, ops, plan.nr_ios);
  if (kind == OP_WRITE && recheck_sizes (v, mask, seen) == -1)
    r = -1;
out : {
  int err = errno;
  plan_free (&plan);
  errno = err;
}
  return r;
}

static uint64_t
spans_mask (const struct volume *v, const struct layout_span *spans)
{
  uint64_t mask = 0;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans == NULL || spans[i].touched)
      mask |= UINT64_C (1) << i;
  return mask;
}

int
volume_pread (struct volume *v, void *buf, uint64_t count, uint64_t offset)
{
  return rw (v, OP_READ, buf, count, offset, false);
}

int
volume_pwrite (struct volume *v, const void *buf, uint64_t count,
               uint64_t offset, bool fua)
{
  /* The iovec is not const, but writes only read from it. */
  return rw (v, OP_WRITE, (void *) buf, count, offset,
             fua || v->cache == CACHE_WRITETHROUGH);
}

/* fdatasync the members marked in spans (all of them if spans is NULL),
 * concurrently.
 */
static int
flush_members (struct volume *v, const struct layout_span *spans)
{
  struct member_op ops[LAYOUT_MAX_MEMBERS];
  unsigned nr = 0;

  for (unsigned i = 0; i < v->nr_members; ++i)
    if (spans == NULL || spans[i].touched)
      ops[nr++] = (struct member_op){ .m = &v->members[i], .kind = OP_FLUSH };
  return run_ops (v, ops, nr);
}

int
volume_flush (struct volume *v)
{
  if (refuse_failed (v, spans_mask (v, NULL)) == -1)
    return -1;
  return flush_members (v, NULL);
}

/* A synchronous member call (trim, zero) as health sees it. */
struct timed {
  struct volume *v;
  _Atomic uint64_t *busy;
  unsigned member;
  uint64_t t0;
};

static void
timed_begin (struct timed *t, struct volume *v, _Atomic uint64_t *busy,
             unsigned member)
{
  t->v = v;
  t->busy = busy;
  t->member = member;
  if (busy)
    atomic_fetch_or (busy, UINT64_C (1) << member);
  t->t0 = health_now_ns ();
}

static void
timed_end (struct timed *t, enum health_op op, uint64_t offset, uint64_t len,
           int r)
{
  int err = r == -1 ? errno : 0;
  uint64_t ns = health_now_ns () - t->t0;

  if (t->busy)
    atomic_fetch_and (t->busy, ~(UINT64_C (1) << t->member));
  health_record (t->v->health, t->member, op, len, ns, err, offset);
  errno = err;
}

/* Each touched member gets ONE contiguous range for the whole request, as
 * Linux md raid0 does since 4.12, never one discard per chunk.
 */
int
volume_trim (struct volume *v, uint64_t count, uint64_t offset, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  _Atomic uint64_t *busy;
  int r = 0, err = 0;

  if (check_request (v, count, offset) == -1)
    return -1;
  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;
  busy = health_io_begin (v->health);
  for (unsigned i = 0; i < v->nr_members; ++i) {
    uint64_t off = v->data_offset + spans[i].member_offset;
    struct timed t;

    if (!spans[i].touched)
      continue;
    timed_begin (&t, v, busy, i);
    r = member_discard (&v->members[i], off, spans[i].length);
    timed_end (&t, HOP_TRIM, off, spans[i].length, r);
    if (r == -1 && err == 0)
      err = errno;
  }
  health_io_end (v->health);
  r = 0;
  if ((fua || v->cache == CACHE_WRITETHROUGH) && flush_members (v, spans) == -1
      && err == 0)
    err = errno;
  if (err) {
    errno = err;
    r = -1;
  }
  return r;
}

int
volume_zero (struct volume *v, uint64_t count, uint64_t offset, bool may_trim,
             bool fast, bool fua)
{
  struct layout_span spans[LAYOUT_MAX_MEMBERS];
  _Atomic uint64_t *busy;

  if (check_request (v, count, offset) == -1)
    return -1;
  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;

  /* Refuse up front what some member is known not to do, so that a slow
   * zero goes straight to nbdkit writing zeroes; and a fast zero unless
   * every member it touches is known to manage one: a fast zero that
   * fails must have changed nothing.
   */
  for (unsigned i = 0; i < v->nr_members; ++i) {
    const struct member *m = &v->members[i];
    uint64_t off = v->data_offset + spans[i].member_offset;

    if (!spans[i].touched)
      continue;
    if (member_zero_known_unsupported (m, off, spans[i].length, may_trim,
                                       fast)
        || (fast
            && !member_fast_zero_known (m, off, spans[i].length, may_trim))) {
      errno = EOPNOTSUPP;
      return -1;
    }
  }

  /* NBD servers that advertised fast zero go first: one that breaks its
   * word is the only way left for a fast zero to fail.
   */
  unsigned order[LAYOUT_MAX_MEMBERS], nr = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (unsigned i = 0; i < v->nr_members; ++i)
      if (spans[i].touched && (v->members[i].remote != NULL) == (pass == 0))
        order[nr++] = i;

  busy = health_io_begin (v->health);
  for (unsigned k = 0; k < nr; ++k) {
    unsigned i = order[k];
    uint64_t off = v->data_offset + spans[i].member_offset;
    struct timed t;
    int r;

    timed_begin (&t, v, busy, i);
    r = member_zero (&v->members[i], off, spans[i].length, may_trim, fast);
    timed_end (&t, HOP_ZERO, off, spans[i].length, r);
    if (r == -1) {
      health_io_end (v->health);
      return -1;
    }
  }
  health_io_end (v->health);

  if (fua || v->cache == CACHE_WRITETHROUGH)
    return flush_members (v, spans);
  return 0;
}

struct run_cache {
  bool valid;
  uint32_t flags; /* MEMBER_EXTENT_* */
  uint64_t start, end; /* member offsets */
};

int
volume_extents (struct volume *v, uint64_t count, uint64_t offset,
                bool req_one, volume_extent_fn add, void *opaque)
{
  struct run_cache cache[LAYOUT_MAX_MEMBERS] = { 0 };
  struct layout_iter it;
  struct layout_piece p;
  unsigned runs = 0;
  uint32_t first_flags = 0;
  struct layout_span spans[LAYOUT_MAX_MEMBERS];

  layout_spans (&v->layout, offset, count, spans);
  if (refuse_failed (v, spans_mask (v, spans)) == -1)
    return -1;
  layout_iter_init (&it, &v->layout, offset, count);
  while (layout_iter_next (&it, &p)) {
    struct run_cache *c = &cache[p.member];
    /* Runs are cached in raw member offsets (data_offset included). */
    uint64_t base = v->data_offset + p.member_offset;
    uint64_t pos = base, end = base + p.length;

    while (pos < end) {
      if (!c->valid || pos < c->start || pos >= c->end) {
        uint64_t run_end;
        if (member_extent (&v->members[p.member], pos,
                           v->data_offset + v->layout.member_size[p.member],
                           &c->flags, &run_end)
            == -1)
          return -1;
        c->valid = true;
        c->start = pos;
        c->end = run_end;
      }
      uint64_t len = (c->end < end ? c->end : end) - pos;

      if (runs == 0)
        first_flags = c->flags;
      else if (req_one && c->flags != first_flags)
        return 0;
      if (add (opaque, p.offset + (pos - base), len, c->flags) == -1)
        return -1;
      if (++runs >= EXTENTS_MAX_RUNS)
        return 0;
      pos += len;
    }
  }
  return 0;
}

/* Health's side: from its prober thread. */

/* Write member i's header with generation events, durably, through
 * whatever reaches it: fd is a descriptor of it (a re-probe's), or -1
 * for the member's own I/O path; h a fresh remote pool, or NULL.
 */
static int
write_header (struct volume *v, unsigned i, uint64_t events, int fd,
              struct remote *fresh, char *why, size_t len)
{
  struct header sb = v->sb;
  uint8_t buf[HEADER_SIZE];
  struct iovec iov = { buf, HEADER_SIZE };

  sb.version = HEADER_VERSION;
  sb.member_index = i;
  memcpy (sb.member_uuid, v->member_uuid[i], 16);
  sb.events = events;
  header_encode (&sb, buf);
  if (fresh) {
    if (remote_probe_pwrite (fresh, buf, HEADER_SIZE, 0, why, len) == -1)
      return -1;
    return 0;
  }
  if (fd >= 0) {
    if (pwrite (fd, buf, HEADER_SIZE, 0) != HEADER_SIZE || fdatasync (fd) == -1) {
      snprintf (why, len, "writing its header: %s", strerror (errno));
      return -1;
    }
    return 0;
  }
  if (member_pwritev (&v->members[i], false, &iov, 1, 0, true) == -1) {
    snprintf (why, len, "writing its header: %s", strerror (errno));
    return -1;
  }
  return 0;
}

/* Member i dropped out of a volume that goes on: bump the generation on
 * every member still in it, then (best effort, through the descriptor
 * still open: a member whose path was replaced is still reachable that
 * way) on member i, so that an older copy of any of them is told apart.
 */
static void
health_dropped (void *opaque, unsigned i)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  uint64_t old, events, size;
  char why[256];
  bool reached = false;

  if (!v->has_header || v->readonly)
    return;
  /* The lock guards the bookkeeping, never I/O: a member that hangs must
   * not stop the next re-probe.
   */
  pthread_mutex_lock (&v->header_lock);
  old = v->sb.events;
  events = old + 1;
  v->sb.events = events;
  pthread_mutex_unlock (&v->header_lock);
  for (unsigned j = 0; j < v->nr_members; ++j) {
    if (j == i || health_member_state (v->health, j) == MS_FAILED)
      continue;
    if (write_header (v, j, events, -1, NULL, why, sizeof why) == -1) {
      stripe_error ("member %u (%s): cannot record generation %" PRIu64
                    " (member %u dropped out): %s",
                    j, v->members[j].path, events, i, why);
      continue;
    }
    pthread_mutex_lock (&v->header_lock);
    v->member_events[j] = events;
    pthread_mutex_unlock (&v->header_lock);
  }
  /* Not a file cut short: writing its header would extend it. */
  if (!(m->is_regular
        && (member_current_size (m, &size) == -1 || size < m->need))
      && write_header (v, i, events, -1, NULL, why, sizeof why) == 0) {
    pthread_mutex_lock (&v->header_lock);
    v->member_events[i] = events;
    pthread_mutex_unlock (&v->header_lock);
    reached = true;
  }
  stripe_error ("member %u (%s) dropped out of volume '%s': generation "
                "%" PRIu64 " -> %" PRIu64 "%s",
                i, m->path, v->sb.name, old, events,
                reached ? " (on it too)"
                        : " (not on it: it is taken back at the old one)");
}

static int
health_check (void *opaque, unsigned i, char *why, size_t len)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  struct stat st;
  uint64_t size;

  if (m->remote)
    return remote_check (m->remote, why, len);
  if (stat (m->path, &st) == -1) {
    snprintf (why, len, "device gone: %s: %s", m->path, strerror (errno));
    return -1;
  }
  if (m->is_block ? !S_ISBLK (st.st_mode) || st.st_rdev != m->id.st_rdev
                  : !S_ISREG (st.st_mode) || st.st_dev != m->id.st_dev
                      || st.st_ino != m->id.st_ino) {
    snprintf (why, len, "device gone: %s now names another %s (replaced?)",
              m->path, S_ISBLK (st.st_mode) ? "block device" : "file");
    return -1;
  }
  if (member_current_size (m, &size) == -1) {
    snprintf (why, len, "device gone: %s: size: %s", m->path,
              strerror (errno));
    return -1;
  }
  if (size < m->need) {
    snprintf (why, len,
              "device gone: %s truncated to %" PRIu64
              " bytes, the volume needs %" PRIu64,
              m->path, size, m->need);
    return -1;
  }
  return 0;
}

/* Read the first block so that the device itself answers: O_DIRECT where
 * the file system allows it, else after dropping the cached page.
 */
static int
read_first_block (const char *path, int fd, void *buf, char *why, size_t len)
{
  int dfd = open (path, O_RDONLY | O_CLOEXEC | O_DIRECT | O_NONBLOCK);
  ssize_t r;
  struct stat a, b;

  /* O_DIRECT on the same file, or nothing (the path may have moved). */
  if (dfd >= 0
      && (fstat (dfd, &a) == -1 || fstat (fd, &b) == -1
          || a.st_dev != b.st_dev || a.st_ino != b.st_ino
          || a.st_rdev != b.st_rdev)) {
    close (dfd);
    dfd = -1;
  }
  if (dfd == -1) {
    posix_fadvise (fd, 0, HEADER_SIZE, POSIX_FADV_DONTNEED);
    r = pread (fd, buf, HEADER_SIZE, 0);
  }
  else {
    r = pread (dfd, buf, HEADER_SIZE, 0);
    close (dfd);
  }
  if (r != HEADER_SIZE) {
    snprintf (why, len, "%s: reading the first %u bytes: %s", path, HEADER_SIZE,
              r == -1 ? strerror (errno) : "short read");
    return -1;
  }
  return 0;
}

/* What a re-probe found, for adopt. */
struct fresh {
  bool same;             /* the very member: keep its descriptors */
  int fds[2];            /* another file proven by its header: fd, direct */
  struct identity id;    /* ... and what it is */
  struct remote *remote; /* a remote member's new connections */
  uint64_t events;       /* the generation its header holds now */
};

/* The header in buf must be member i of this volume, at the generation
 * member i had when it dropped out.
 */
static int
check_probed_header (struct volume *v, unsigned i, const void *buf,
                     uint64_t *events, char *why, size_t len)
{
  struct header sb;
  const char *field = NULL;
  enum header_error e;
  char uuid[37];
  uint64_t want;

  e = header_decode (buf, HEADER_SIZE, &sb, &field);
  if (e != HEADER_OK) {
    snprintf (why, len, "%s: header: %s%s%s", v->members[i].path,
              header_strerror (e), field ? ": field " : "", field ? field : "");
    return -1;
  }
  uuid_format (sb.array_uuid, uuid);
  if (memcmp (sb.array_uuid, v->sb.array_uuid, 16) != 0
      || sb.member_index != i) {
    snprintf (why, len,
              "%s now holds member %u of volume '%s' (%s), not this one",
              v->members[i].path, sb.member_index, sb.name, uuid);
    return -1;
  }
  if (memcmp (sb.member_uuid, v->member_uuid[i], 16) != 0) {
    snprintf (why, len,
              "%s holds member %u of this volume with another member UUID "
              "(a member written by another 'nbdstripe create'?)",
              v->members[i].path, i);
    return -1;
  }
  pthread_mutex_lock (&v->header_lock);
  want = v->member_events[i];
  pthread_mutex_unlock (&v->header_lock);
  if (sb.events < want) {
    snprintf (why, len,
              "%s holds a stale copy of member %u: older generation "
              "%" PRIu64 " < %" PRIu64,
              v->members[i].path, i, sb.events, want);
    return -1;
  }
  if (sb.events > want) {
    snprintf (why, len,
              "%s holds member %u at generation %" PRIu64 ", newer than "
              "this volume's %" PRIu64 " (written by another server?)",
              v->members[i].path, i, sb.events, want);
    return -1;
  }
  *events = sb.events;
  return 0;
}

/* Bring a member adopted again up to the volume's generation. */
static int
catch_up (struct volume *v, unsigned i, struct fresh *f, int fd, char *why,
          size_t len)
{
  uint64_t now;

  if (!v->has_header || v->readonly)
    return 0;
  pthread_mutex_lock (&v->header_lock);
  now = v->sb.events;
  pthread_mutex_unlock (&v->header_lock);
  if (f->events == now)
    return 0;
  if (write_header (v, i, now, fd, f->remote, why, len) == -1)
    return -1;
  f->events = now;
  return 0;
}

static int
probe_remote (struct volume *v, unsigned i, struct fresh *f, char *why,
              size_t len)
{
  struct member *m = &v->members[i];
  char buf[HEADER_SIZE];

  f->remote = remote_open (m->path, m->readonly, why, len);
  if (f->remote == NULL)
    return -1;
  if (remote_size (f->remote) < m->need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes, the volume needs %" PRIu64,
              m->path, remote_size (f->remote), m->need);
    return -1;
  }
  if (remote_probe_pread (f->remote, buf, sizeof buf, 0, why, len) == -1)
    return -1;
  if (v->has_header
      && (check_probed_header (v, i, buf, &f->events, why, len) == -1
          || catch_up (v, i, f, -1, why, len) == -1))
    return -1;
  return 0;
}

static int
probe_local (struct volume *v, unsigned i, struct fresh *f, char *why,
             size_t len)
{
  struct member *m = &v->members[i];
  struct stat st;
  char reason[256], a[256], b[256];
  void *buf = NULL;
  int fd, r = -1;
  uint64_t size = 0;

  /* Look first (no claim: the member's own descriptor still holds it). */
  fd = claim_open (m->path, true, 0, &st, reason, sizeof reason);
  if (fd == -1) {
    snprintf (why, len, "%s: %s", m->path, reason);
    return -1;
  }
  if (m->is_block ? !S_ISBLK (st.st_mode) : !S_ISREG (st.st_mode)) {
    snprintf (why, len, "%s is no longer a %s", m->path,
              m->is_block ? "block device" : "regular file");
    goto out;
  }
  if ((m->is_block ? ioctl (fd, BLKGETSIZE64, &size) : 0) == -1)
    size = 0;
  if (!m->is_block)
    size = st.st_size;
  if (identity_of_fd (fd, size, &f->id, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", m->path, reason);
    goto out;
  }
  f->same = identity_same (&m->id, &f->id);
  if (!f->same && (!v->has_header || v->readonly)) {
    /* Nothing but the inode or device says which member this is. */
    snprintf (why, len, "another file: %s now names %s, the volume opened %s",
              m->path, identity_describe (&f->id, a, sizeof a),
              identity_describe (&m->id, b, sizeof b));
    goto out;
  }
  if (size < m->need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes, the volume needs %" PRIu64,
              m->path, size, m->need);
    goto out;
  }
  if (posix_memalign (&buf, 4096, HEADER_SIZE) != 0) {
    snprintf (why, len, "out of memory");
    goto out;
  }
  if (read_first_block (m->path, fd, buf, why, len) == -1)
    goto out;
  if (v->has_header
      && check_probed_header (v, i, buf, &f->events, why, len) == -1)
    goto out;
  if (!f->same) {
    /* Another file that proves to be this member (a device that came
     * back under another number, a remounted file system): it must not
     * be another member too, and it is claimed as the first was.
     */
    for (unsigned j = 0; j < v->nr_members; ++j) {
      char how[512];
      if (j != i && identity_alias (&v->members[j].id, &f->id, how, sizeof how)) {
        snprintf (why, len, "%s and member %u (%s) are %s", m->path, j,
                  v->members[j].path, how);
        goto out;
      }
    }
    close (fd);
    fd = -1;
    f->fds[0] = claim_open (m->path, false, 0, &st, reason, sizeof reason);
    if (f->fds[0] == -1
        || claim_take (&f->fds[0], m->path, true, false, reason,
                       sizeof reason)
             == -1) {
      snprintf (why, len, "%s: %s", m->path, reason);
      goto out;
    }
    struct identity again;
    if (identity_of_fd (f->fds[0], size, &again, reason, sizeof reason) == -1
        || !identity_same (&again, &f->id)) {
      snprintf (why, len, "%s changed while it was being probed", m->path);
      goto out;
    }
    if (m->fd_direct >= 0) {
      f->fds[1] = open (m->path, O_RDWR | O_CLOEXEC | O_DIRECT);
      if (f->fds[1] == -1) {
        snprintf (why, len, "%s: open with O_DIRECT: %s", m->path,
                  strerror (errno));
        goto out;
      }
    }
  }
  if (catch_up (v, i, f, f->same ? m->fd : f->fds[0], why, len) == -1)
    goto out;
  r = 0;
out:
  if (fd >= 0)
    close (fd);
  free (buf);
  return r;
}

static void
health_discard (void *opaque, unsigned i, void *p)
{
  struct fresh *f = p;

  (void) opaque;
  (void) i;
  if (f == NULL)
    return;
  for (int k = 0; k < 2; ++k)
    if (f->fds[k] >= 0)
      close (f->fds[k]);
  remote_close (f->remote);
  free (f);
}

static int
health_probe (void *opaque, unsigned i, void **out, char *why, size_t len)
{
  struct volume *v = opaque;
  struct fresh *f = calloc (1, sizeof *f);
  int r;

  *out = NULL;
  if (f == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  f->fds[0] = f->fds[1] = -1;
  r = v->members[i].remote ? probe_remote (v, i, f, why, len)
                           : probe_local (v, i, f, why, len);
  if (r == -1) {
    health_discard (v, i, f);
    return -1;
  }
  *out = f;
  return 0;
}

/* Local: dup3 replaces the descriptor atomically under the same number,
 * so I/O threads never see a closed or reused descriptor (O_CLOEXEC kept:
 * the on_change program must not inherit a member).  Remote: the new
 * connections replace the old ones (remote_adopt).
 */
static void
health_adopt (void *opaque, unsigned i, void *p)
{
  struct volume *v = opaque;
  struct member *m = &v->members[i];
  struct fresh *f = p;

  if (m->remote) {
    remote_adopt (m->remote, f->remote);
    f->remote = NULL;
  }
  else if (!f->same) {
    if (dup3 (f->fds[0], m->fd, O_CLOEXEC) == -1)
      stripe_error ("member %u (%s): dup3: %m", i, m->path);
    if (f->fds[1] >= 0 && dup3 (f->fds[1], m->fd_direct, O_CLOEXEC) == -1)
      stripe_error ("member %u (%s): dup3: %m", i, m->path);
    m->id = f->id;
  }
  if (v->has_header) {
    pthread_mutex_lock (&v->header_lock);
    v->member_events[i] = f->events;
    pthread_mutex_unlock (&v->header_lock);
  }
  health_discard (v, i, f);
}

void
volume_health_ops (struct volume *v, struct health_ops *ops)
{
  ops->opaque = v;
  ops->check = health_check;
  ops->probe = health_probe;
  ops->adopt = health_adopt;
  ops->discard = health_discard;
  ops->dropped = health_dropped;
}
