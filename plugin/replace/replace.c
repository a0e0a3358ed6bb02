/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: replacing a member while the volume is served.  See
 * include/replace.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "config.h"
#include "header.h"
#include "health.h"
#include "identity.h"
#include "ioexec.h"
#include "json.h"
#include "log.h"
#include "md_super.h"
#include "member.h"
#include "replace.h"
#include "util.h"
#include "volume.h"

/* The copier's window: large enough for the devices to stream; read and
 * written as PIECES requests at once, for devices that need a queue to
 * reach their rate.
 */
#define WINDOW (4u * 1024 * 1024)
#define PIECES 4u
#define PIECE (WINDOW / PIECES)
/* Unreadable blocks are found this finely. */
#define BLOCK 4096u
/* Reads of old tried this often before a block counts as unreadable. */
#define READ_TRIES 3
/* Zeroes written to NEW at a time where it cannot zero. */
#define ZERO_BUF (256u * 1024)

int replace_debug_hold_ms;
int replace_debug_crash;
int replace_debug_gate;

enum state { R_COPYING, R_SWITCHING, R_DONE, R_FAILED, R_CANCELLED };

static const char *const state_names[] = { "copying", "switching", "done",
                                           "failed", "cancelled" };

/* A client operation on the member, from the moment it looked at the
 * copier's windows until it has ended.
 */
struct flight {
  uint64_t a, b;  /* member offsets */
  bool write;     /* write, trim or zero */
  bool waiting;   /* held by a window announced before it */
  unsigned seen;  /* the windows announced before it: ids below this */
  struct flight *next;
};

/* A window of the copy: announced (client writes that start later wait
 * for it), then locked once the writes over it that started earlier have
 * ended; released once written to NEW.
 */
struct window {
  uint64_t a, b;
  unsigned id;
  bool used;
};

struct lost {
  uint64_t offset, length; /* the volume's logical bytes */
};

struct replace {
  struct volume *v;
  struct replace *next; /* the volume's replaces so far */
  unsigned index;
  struct member newm; /* NEW (after the switch: old, to be closed) */
  bool newm_open;
  char *old_path, *new_path, *config;
  uint64_t rate;
  bool skip_unreadable;
  uint64_t start, end; /* the member offsets to copy */
  pthread_t thread;
  bool thread_started;

  pthread_mutex_t lock;
  pthread_cond_t cond;
  /* Under lock. */
  enum state state;
  uint64_t watermark; /* copied up to here */
  struct window win[2]; /* the pipeline: the one written, the one read */
  unsigned next_win;    /* the next window's id */
  struct flight *flights;
  bool cancel;
  char error[512];
  uint64_t t_start, t_end; /* monotonic ns */
  struct lost *lost;
  unsigned nr_lost, cap_lost;
  bool config_updated;
  char config_note[1024];
  uint64_t hold_ns;        /* clients held at the switch */
  uint64_t max_wait_ns;    /* the longest a client write waited for a
                            * window */
  unsigned nr_waiting;     /* client writes waiting for a window now */
  /* The test gate (replace_debug_gate): the phase the copier is held at,
   * and how many phases it has reached and been let past.
   */
  const char *phase;
  unsigned phase_seq, released_seq;
};

static void
random_uuid (uint8_t u[16])
{
  if (getrandom (u, 16, 0) != 16)
    for (int i = 0; i < 16; ++i)
      u[i] = (uint8_t) (now_ns () >> (i % 8 * 8)) ^ (uint8_t) rand ();
  u[6] = (u[6] & 0x0f) | 0x40; /* version 4 */
  u[8] = (u[8] & 0x3f) | 0x80; /* RFC 4122 variant */
}

/* Fail the replace (first reason wins).  Called with r->lock held. */
static void
fail_locked (struct replace *r, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
static void
fail_locked (struct replace *r, const char *fmt, ...)
{
  va_list ap;

  if (r->state == R_FAILED || r->state == R_DONE || r->state == R_CANCELLED)
    return;
  va_start (ap, fmt);
  vsnprintf (r->error, sizeof r->error, fmt, ap);
  va_end (ap);
  r->state = R_FAILED;
  pthread_cond_broadcast (&r->cond);
}

/* The test gate: with -D stripe.replace_gate=1 the copier stops at each
 * phase boundary, shows it in the status ("phase"), and goes on once
 * replace_debug_release (the control socket's "step") lets it.  A cancel
 * lets it go too.
 */
static void
phase (struct replace *r, const char *name)
{
  if (!replace_debug_gate)
    return;
  pthread_mutex_lock (&r->lock);
  r->phase = name;
  r->phase_seq++;
  pthread_cond_broadcast (&r->cond);
  while (r->released_seq < r->phase_seq && !r->cancel)
    pthread_cond_wait (&r->cond, &r->lock);
  pthread_mutex_unlock (&r->lock);
}

int
replace_debug_release (struct volume *v, const char *at, char *why,
                       size_t len)
{
  struct replace *r;
  int ret = -1;

  pthread_mutex_lock (&v->replace_lock);
  r = v->replaces;
  pthread_mutex_unlock (&v->replace_lock);
  if (!replace_debug_gate || r == NULL) {
    snprintf (why, len, "no replace held at a phase (-D stripe.replace_gate)");
    return -1;
  }
  pthread_mutex_lock (&r->lock);
  if (r->released_seq >= r->phase_seq)
    snprintf (why, len, "the copier is not held (phase %s, %u)",
              r->phase ? r->phase : "none", r->phase_seq);
  else if (at && (r->phase == NULL || strcmp (at, r->phase) != 0))
    snprintf (why, len, "the copier is held at %s, not %s",
              r->phase ? r->phase : "none", at);
  else {
    r->released_seq = r->phase_seq;
    pthread_cond_broadcast (&r->cond);
    ret = 0;
  }
  pthread_mutex_unlock (&r->lock);
  return ret;
}

/* One synchronous operation on a member for the copier, outside health's
 * books.
 */
static int
copy_io (struct replace *r, struct member *m, enum op_kind kind, void *buf,
         uint64_t len, uint64_t off)
{
  struct iovec iov = { buf, len };
  struct member_op op = {
    .m = m,
    .kind = kind,
    .offset = off,
    .length = kind == OP_FLUSH ? 0 : len,
    .iov = kind == OP_FLUSH ? NULL : &iov,
    .nr_iov = kind == OP_FLUSH ? 0 : 1,
    .shadow = true,
  };
  int e = ioexec_run (&op, 1, r->v->uring);

  if (e == -1)
    errno = op.err ? op.err : errno;
  return e;
}

/* ---- the I/O path ---- */

static bool
is_write (enum op_kind k)
{
  return k == OP_WRITE || k == OP_TRIM || k == OP_ZERO;
}

static bool
overlaps (uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  return a < d && c < b;
}

/* Whether a client write must wait: a window announced before it
 * overlaps it.  Windows announced after it wait for it instead.
 */
static bool
held_by_window (const struct replace *r, const struct flight *f)
{
  for (unsigned w = 0; w < 2; ++w)
    if (r->win[w].used && r->win[w].id < f->seen
        && overlaps (f->a, f->b, r->win[w].a, r->win[w].b))
      return true;
  return false;
}

/* NEW could not zero (EOPNOTSUPP: tmpfs, NFS, a device without
 * write-zeroes): zeroes written.  Returns 0 or an errno.
 */
static int
zero_by_writing (struct replace *r, uint64_t off, uint64_t len)
{
  static const uint8_t zeros[ZERO_BUF] __attribute__ ((aligned (4096)));

  while (len > 0) {
    uint64_t n = len < ZERO_BUF ? len : ZERO_BUF;
    if (copy_io (r, &r->newm, OP_WRITE, (void *) zeros, n, off) == -1)
      return errno;
    off += n;
    len -= n;
  }
  return 0;
}

/* The request's result from its ops (not NEW's): 0, or -1 with *err the
 * first op's error (*err untouched then).
 */
static int
ops_result (const struct member_op *ops, unsigned nr, int *err)
{
  for (unsigned j = 0; j < nr; ++j)
    if (ops[j].err) {
      *err = ops[j].err;
      return -1;
    }
  return 0;
}

int
replace_run_ops (struct volume *v, struct replace *r, struct member_op *ops,
                 unsigned nr, replace_plain_fn plain)
{
  struct member_op ext[LAYOUT_MAX_MEMBERS + 1];
  struct flight fl;
  unsigned k = nr;
  bool dual = false;
  uint64_t waited = 0;
  int ret, err;

  for (unsigned j = 0; j < nr; ++j)
    if (!ops[j].shadow && ops[j].m == &v->members[r->index])
      k = j;
  if (k == nr)
    return plain (v, ops, nr);

  fl.a = ops[k].offset;
  fl.b = ops[k].offset + ops[k].length;
  fl.write = is_write (ops[k].kind);
  pthread_mutex_lock (&r->lock);
  fl.seen = r->next_win;
  fl.waiting = fl.write && held_by_window (r, &fl);
  fl.next = r->flights;
  r->flights = &fl;
  if (fl.waiting) {
    uint64_t t0 = now_ns ();
    r->nr_waiting++;
    while (held_by_window (r, &fl))
      pthread_cond_wait (&r->cond, &r->lock);
    r->nr_waiting--;
    fl.waiting = false;
    waited = now_ns () - t0;
    if (waited > r->max_wait_ns)
      r->max_wait_ns = waited;
    pthread_cond_broadcast (&r->cond); /* a copier waiting on it */
  }
  if (r->state == R_COPYING)
    dual = ops[k].kind == OP_FLUSH || (fl.write && fl.a < r->watermark);
  pthread_mutex_unlock (&r->lock);

  if (dual) {
    memcpy (ext, ops, nr * sizeof ops[0]);
    ext[nr] = ops[k];
    ext[nr].m = &r->newm;
    ext[nr].shadow = true;
    ext[nr].fast = false; /* NEW need not be as fast as old at zeroing */
    ret = plain (v, ext, nr + 1);
    err = errno;
    memcpy (ops, ext, nr * sizeof ops[0]);
    if (ext[nr].err == EOPNOTSUPP || ext[nr].err == ENOTSUP) {
      /* A trim is advisory; zeroes are written where NEW cannot zero. */
      if (ext[nr].kind == OP_TRIM)
        ext[nr].err = 0;
      else if (ext[nr].kind == OP_ZERO)
        ext[nr].err = zero_by_writing (r, ext[nr].offset, ext[nr].length);
    }
    if (ext[nr].err) {
      pthread_mutex_lock (&r->lock);
      fail_locked (r, "the new member (%s) failed: %s at offset %" PRIu64
                   ": %s",
                   r->new_path, op_name (ext[nr].kind), ext[nr].offset,
                   strerror (ext[nr].err));
      pthread_mutex_unlock (&r->lock);
    }
    /* The client's request is old's to answer. */
    ret = ops_result (ops, nr, &err);
    errno = err;
  }
  else
    ret = plain (v, ops, nr);
  err = errno;

  /* A read old could not serve, from NEW where the copy has passed. */
  if (ops[k].kind == OP_READ && ops[k].err) {
    bool copied;
    pthread_mutex_lock (&r->lock);
    copied = r->state == R_COPYING && fl.b <= r->watermark;
    pthread_mutex_unlock (&r->lock);
    if (copied) {
      struct member_op s = ops[k];
      s.m = &r->newm;
      s.shadow = true;
      if (plain (v, &s, 1) == 0) {
        stripe_debug ("replace: member %u: read at %" PRIu64 " failed on "
                      "%s, served from %s",
                      r->index, fl.a, r->old_path, r->new_path);
        ops[k].err = 0;
        ret = ops_result (ops, nr, &err);
      }
    }
  }

  pthread_mutex_lock (&r->lock);
  for (struct flight **p = &r->flights; *p; p = &(*p)->next)
    if (*p == &fl) {
      *p = fl.next;
      break;
    }
  pthread_cond_broadcast (&r->cond);
  pthread_mutex_unlock (&r->lock);
  errno = err;
  return ret;
}

/* ---- the copier ---- */

static void
add_lost (struct replace *r, uint64_t off, uint64_t len)
{
  if (r->nr_lost > 0) {
    struct lost *l = &r->lost[r->nr_lost - 1];
    if (l->offset + l->length == off) {
      l->length += len;
      return;
    }
  }
  if (r->nr_lost == r->cap_lost) {
    unsigned cap = r->cap_lost ? 2 * r->cap_lost : 16;
    struct lost *n = realloc (r->lost, cap * sizeof *n);
    if (n == NULL)
      return; /* the count is still right in the error */
    r->lost = n;
    r->cap_lost = cap;
  }
  r->lost[r->nr_lost++] = (struct lost){ off, len };
}

/* Record old's unreadable block [mo, mo + len) as the volume's logical
 * bytes.  Called with r->lock held.
 */
static void
record_unreadable (struct replace *r, uint64_t mo, uint64_t len)
{
  const struct member *old = &r->v->members[r->index];
  uint64_t logical;

  /* A block lies in one chunk (chunks are multiples of 4 KiB). */
  if (layout_unmap (&r->v->layout, r->index, mo - old->data_offset, &logical))
    add_lost (r, logical, len);
}

/* Read [pos, pos + len) of old into buf: the whole, again, then block by
 * block.  Unreadable blocks are recorded, and zeroed in buf.  Returns how
 * many bytes were unreadable, or -1 on an error that is not a read error.
 */
static int64_t
read_old (struct replace *r, uint8_t *buf, uint64_t pos, uint64_t len)
{
  struct member *old = &r->v->members[r->index];
  int64_t bad = 0;

  for (int t = 0; t < READ_TRIES - 1; ++t)
    if (copy_io (r, old, OP_READ, buf, len, pos) == 0)
      return 0;
  for (uint64_t b = 0; b < len; b += BLOCK) {
    uint64_t n = len - b < BLOCK ? len - b : BLOCK;
    int t;
    for (t = 0; t < READ_TRIES; ++t)
      if (copy_io (r, old, OP_READ, buf + b, n, pos + b) == 0)
        break;
    if (t == READ_TRIES) {
      memset (buf + b, 0, n);
      pthread_mutex_lock (&r->lock);
      record_unreadable (r, pos + b, n);
      pthread_mutex_unlock (&r->lock);
      bad += n;
    }
  }
  return bad;
}

/* Keep the average at or below rate. */
static void
throttle (struct replace *r, uint64_t copied)
{
  uint64_t due, now;

  if (r->rate == 0)
    return;
  due = r->t_start + (uint64_t) ((double) copied / r->rate * 1e9);
  while ((now = now_ns ()) < due) {
    uint64_t d = due - now > 100000000 ? 100000000 : due - now;
    struct timespec ts = { 0, (long) d };
    bool stop;
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&r->lock);
    stop = r->cancel || r->state != R_COPYING;
    pthread_mutex_unlock (&r->lock);
    if (stop)
      return;
  }
}

/* NEW's metadata: the member's header, or its md superblock. */
static int
write_new_metadata (struct replace *r, uint8_t member_uuid[16], char *why,
                    size_t len)
{
  struct volume *v = r->v;

  if (v->has_header) {
    uint64_t events;
    pthread_mutex_lock (&v->header_lock);
    events = v->hdr.events;
    pthread_mutex_unlock (&v->header_lock);
    random_uuid (member_uuid);
    return volume_write_header (v, r->index, &r->newm, member_uuid, events, 0,
                                why, len);
  }
  if (v->md_sb) {
    struct md_super *sb = malloc (sizeof *sb);
    uint8_t *buf = malloc (MD_SUPER_BYTES);
    uint64_t at = v->md_sb[r->index].super_offset * 512;
    int ret = -1;

    if (sb == NULL || buf == NULL) {
      snprintf (why, len, "out of memory");
      goto out;
    }
    *sb = v->md_sb[r->index];
    random_uuid (sb->device_uuid);
    sb->utime = (uint64_t) time (NULL);
    if (sb->minor == 0) { /* 1.0: near the end, where NEW's end is */
      if (!md_super_location (0, r->newm.size, &at)) {
        snprintf (why, len, "too small for an md superblock");
        goto out;
      }
      sb->super_offset = at / 512;
    }
    md_super_encode (sb, buf);
    if (member_pwrite (&r->newm, buf, MD_SUPER_BYTES, at, why, len) == 0
        && member_sync (&r->newm, why, len) == 0)
      ret = 0;
  out:
    free (sb);
    free (buf);
    return ret;
  }
  return member_sync (&r->newm, why, len); /* no metadata: data only */
}


/* NEW's metadata written, and then the replace did not switch: NEW must
 * not look like a member (best effort: it may be the device that failed).
 */
static void
clear_new_metadata (struct replace *r)
{
  static const uint8_t zeros[MD_SUPER_BYTES] __attribute__ ((aligned (4096)));
  struct volume *v = r->v;
  uint64_t at = 0;
  size_t n = HEADER_SIZE;
  char why[256];

  if (v->md_sb) {
    at = v->md_sb[r->index].super_offset * 512;
    if (v->md_sb[r->index].minor == 0
        && !md_super_location (0, r->newm.size, &at))
      return;
    n = MD_SUPER_BYTES;
  }
  else if (!v->has_header)
    return;
  if (member_pwrite (&r->newm, zeros, n, at, why, sizeof why) == -1
      || member_sync (&r->newm, why, sizeof why) == -1)
    stripe_error ("replace: member %u: could not clear the metadata written "
                  "to %s (%s): it holds a copy of the member that the volume "
                  "did not switch to",
                  r->index, r->new_path, why);
}

/* m (old) is no longer a member: say so on it, so that it is never
 * assembled again -- header flag, md role faulty.  -1 (why) if it could
 * not be written; with metadata "none" there is nothing to write it in.
 */
static int
mark_old (struct replace *r, struct member *m, const uint8_t old_uuid[16],
          uint64_t old_events, char *why, size_t len)
{
  struct volume *v = r->v;

  if (v->has_header)
    return volume_write_header (v, r->index, m, old_uuid, old_events,
                                HEADER_FLAG_REPLACED, why, len);
  if (v->md_sb) {
    struct md_super *sb = malloc (sizeof *sb);
    uint8_t *buf = malloc (MD_SUPER_BYTES);
    int ret = -1;

    if (sb && buf) {
      *sb = v->md_sb[r->index];
      if (sb->dev_number < sb->max_dev)
        sb->dev_roles[sb->dev_number] = MD_ROLE_FAULTY;
      sb->utime = (uint64_t) time (NULL);
      md_super_encode (sb, buf);
      if (member_pwrite (m, buf, MD_SUPER_BYTES, sb->super_offset * 512, why,
                         len)
            == 0
          && member_sync (m, why, len) == 0)
        ret = 0;
    }
    else
      snprintf (why, len, "out of memory");
    free (sb);
    free (buf);
    return ret;
  }
  snprintf (why, len, "metadata \"none\": nothing on the member says what "
            "it is");
  return -1;
}

/* Whether the copy is to stop: cancelled (now the state says so) or
 * failed.  Called with r->lock held.
 */
static bool
stopped_locked (struct replace *r)
{
  if (r->cancel && r->state == R_COPYING) {
    r->state = R_CANCELLED;
    snprintf (r->error, sizeof r->error, "cancelled");
    pthread_cond_broadcast (&r->cond);
  }
  return r->state != R_COPYING;
}

/* The copy is done: NEW takes old's place.  Clients write both devices
 * (the watermark is at the end) until the volume is quiesced; then,
 * with nothing in flight, NEW is flushed and gets the member's metadata,
 * the config names NEW, and the member switches.  The on-disk record
 * never points at NEW before it holds the member, and never lets old be
 * assembled once a write has gone to NEW alone: when the config cannot be
 * rewritten, old is marked replaced first, and when that cannot be done
 * either (metadata "none", old dying) the replace stops here, not
 * switched.  Returns with r->state DONE, FAILED or CANCELLED.
 */
static void
finish (struct replace *r)
{
  struct volume *v = r->v;
  struct member *old = &v->members[r->index];
  uint8_t old_uuid[16], new_uuid[16] = { 0 };
  uint64_t old_events = 0;
  bool written = false, marked = false, stop;
  char why[512], reason[512];

  /* What the copier wrote, durable before clients are held: the flush
   * under the hold then has only their writes since to carry.
   */
  if (copy_io (r, &r->newm, OP_FLUSH, NULL, 0, 0) == -1) {
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "flushing the new member (%s): %m", r->new_path);
    pthread_mutex_unlock (&r->lock);
    return;
  }
  phase (r, "copied");
  /* swap_lock first: a re-probe in progress (it may take seconds) is
   * waited for before clients are held, not while they are.
   */
  pthread_mutex_lock (&v->swap_lock);
  volume_quiesce (v);
  pthread_mutex_lock (&r->lock);
  stop = stopped_locked (r);
  if (!stop)
    r->state = R_SWITCHING;
  pthread_mutex_unlock (&r->lock);
  if (stop)
    goto release;
  phase (r, "quiesced");

  if (copy_io (r, old, OP_FLUSH, NULL, 0, 0) == -1)
    stripe_error ("replace: member %u: flushing %s: %m (the copy is on %s "
                  "already)",
                  r->index, r->old_path, r->new_path);
  if (copy_io (r, &r->newm, OP_FLUSH, NULL, 0, 0) == -1) {
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "flushing the new member (%s): %m", r->new_path);
    pthread_mutex_unlock (&r->lock);
    goto release;
  }
  pthread_mutex_lock (&v->header_lock);
  memcpy (old_uuid, v->member_uuid[r->index], 16);
  old_events = v->member_events[r->index];
  pthread_mutex_unlock (&v->header_lock);
  if (write_new_metadata (r, new_uuid, why, sizeof why) == -1) {
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "writing the new member's metadata (%s): %s",
                 r->new_path, why);
    pthread_mutex_unlock (&r->lock);
    goto release;
  }
  written = true;
  phase (r, "metadata");
  if (replace_debug_crash == 1)
    raise (SIGKILL);

  /* The config: NEW in old's place (the volume assembles with whichever
   * the config names from here on).
   */
  if (r->config
      && config_replace_member (r->config, r->index, r->old_path, r->new_path,
                                why, sizeof why)
           == 0)
    r->config_updated = true;
  else {
    if (r->config == NULL)
      snprintf (why, sizeof why, "no config file");
    /* The config still names old: old must say it is no longer the
     * member before any write goes to NEW alone.
     */
    if (mark_old (r, old, old_uuid, old_events, reason, sizeof reason)
        == -1) {
      pthread_mutex_lock (&r->lock);
      fail_locked (r, "%s cannot be rewritten (%s), and the member to "
                   "replace (%s) cannot be marked replaced (%s): not "
                   "switched, the volume goes on with %s",
                   r->config ? r->config : "the config", why, r->old_path,
                   reason, r->old_path);
      pthread_mutex_unlock (&r->lock);
      goto release;
    }
    marked = true;
    snprintf (r->config_note, sizeof r->config_note,
              "%.200s not updated (%.200s): member %u must now be "
              "\"%.150s\" (%.150s is marked replaced and will not be "
              "assembled)",
              r->config ? r->config : "the config", why, r->index,
              r->new_path, r->old_path);
    stripe_error ("replace: %s", r->config_note);
  }
  phase (r, "config");
  if (replace_debug_crash == 2)
    raise (SIGKILL);

  /* The switch: nothing is in flight. */
  r->newm.data_offset = old->data_offset;
  r->newm.need = old->need;
  {
    struct member tmp = *old;
    *old = r->newm;
    r->newm = tmp;
  }
  pthread_mutex_lock (&v->header_lock);
  memcpy (v->member_uuid[r->index], new_uuid, 16);
  v->member_events[r->index] = v->hdr.events;
  pthread_mutex_unlock (&v->header_lock);
  /* NEW takes over the index's dirty state (dirty.h), and is marked: it
   * was synced above with nothing in flight, so every write answered so
   * far is durable on it already, but one sync more after a replace costs
   * nothing and keeps the switch right even if NEW ever stops being
   * synced under the hold.
   */
  dirty_mark (&v->dirty[r->index]);
  r->hold_ns = volume_resume (v);
  pthread_mutex_unlock (&v->swap_lock);
  health_member_replaced (v->health, r->index, old->path);
  phase (r, "switched");

  /* Old is no longer a member: a new generation everywhere, and old
   * marked (it stays at the old one).  Clients go on, on NEW; the replace
   * is not done (not "done" in the status, a second one refused) until
   * then.
   */
  volume_bump_generation (v, -1, "a member was replaced");
  if (!marked && mark_old (r, &r->newm, old_uuid, old_events, why,
                           sizeof why)
                   == -1)
    stripe_error ("replace: member %u: could not mark %s replaced (%s)%s",
                  r->index, r->old_path, why,
                  v->has_header ? "; its generation is behind the volume's, "
                                  "so it is refused as stale anyway"
                                : "");

  pthread_mutex_lock (&r->lock);
  r->state = R_DONE;
  r->t_end = now_ns ();
  pthread_cond_broadcast (&r->cond);
  pthread_mutex_unlock (&r->lock);
  stripe_notice ("replace: member %u: %s replaced by %s (%" PRIu64 " bytes "
                 "copied in %.1f s; clients held %.3f s at the switch)",
                 r->index, r->old_path, r->new_path, r->end - r->start,
                 (r->t_end - r->t_start) / 1e9, r->hold_ns / 1e9);
  return;

release:
  if (written)
    clear_new_metadata (r);
  r->hold_ns = volume_resume (v);
  pthread_mutex_unlock (&v->swap_lock);
}

/* The requests that read or write [off, off + len) of m (at most a
 * window) from or into buf: one per piece.  Returns how many.
 */
static unsigned
pieces (struct member_op *ops, struct iovec *iov, struct member *m,
        enum op_kind kind, uint8_t *buf, uint64_t len, uint64_t off)
{
  unsigned n = 0;

  for (uint64_t d = 0; d < len; d += PIECE, ++n) {
    uint64_t l = len - d < PIECE ? len - d : PIECE;
    iov[n] = (struct iovec) { buf + d, l };
    ops[n] = (struct member_op) { .m = m, .kind = kind, .offset = off + d,
                                  .length = l, .iov = &iov[n], .nr_iov = 1,
                                  .shadow = true };
  }
  return n;
}

static bool
all_ok (const struct member_op *ops, unsigned n)
{
  for (unsigned i = 0; i < n; ++i)
    if (ops[i].err)
      return false;
  return true;
}

/* Read a window of old into buf, its pieces at once.  True if all read. */
static bool
read_window (struct replace *r, uint8_t *buf, uint64_t len, uint64_t off)
{
  struct member_op ops[PIECES];
  struct iovec iov[PIECES];
  unsigned n = pieces (ops, iov, &r->v->members[r->index], OP_READ, buf, len,
                       off);

  ioexec_run (ops, n, r->v->uring);
  return all_ok (ops, n);
}

enum lock_result { LOCKED, BUSY, STOPPED };

static void
drop_window (struct replace *r, unsigned id)
{
  for (unsigned w = 0; w < 2; ++w)
    if (r->win[w].used && r->win[w].id == id)
      r->win[w].used = false;
  pthread_cond_broadcast (&r->cond);
}

/* Make [a, b) a window of the copy: announced at once (a client write
 * over it that starts from now on waits for it), locked once the client
 * writes over it that started before have ended.  So a hot region written
 * at any queue depth cannot keep the copier out: the copier waits only for
 * what was in flight when it asked.
 *
 * Client writes wait only for windows announced before they started, so
 * the copier must not wait for one that waits for the other window it
 * holds: try (the read-ahead of the pipeline, the window being written
 * still held) gives up with BUSY then, and the copier takes this window
 * after it has released the other.  Taking a window holding no other
 * (try false) never gives up: what it waits for waits for nothing.
 *
 * Returns LOCKED (*id the window's), BUSY, or STOPPED (cancelled,
 * failed).
 */
static enum lock_result
lock_window (struct replace *r, uint64_t a, uint64_t b, bool try,
             unsigned *id)
{
  enum lock_result res = LOCKED;
  unsigned slot;

  pthread_mutex_lock (&r->lock);
  slot = r->win[0].used ? 1 : 0;
  if (stopped_locked (r)) {
    pthread_mutex_unlock (&r->lock);
    return STOPPED;
  }
  *id = r->next_win++;
  r->win[slot] = (struct window){ .a = a, .b = b, .id = *id, .used = true };
  for (;;) {
    bool busy = false, blocked = false;

    for (struct flight *f = r->flights; f; f = f->next)
      if (f->write && f->seen <= *id && overlaps (f->a, f->b, a, b)) {
        busy = true;
        blocked |= f->waiting;
      }
    if (!busy)
      break;
    if (try && blocked) {
      res = BUSY;
      break;
    }
    pthread_cond_wait (&r->cond, &r->lock);
    if (stopped_locked (r)) {
      res = STOPPED;
      break;
    }
  }
  if (res != LOCKED)
    drop_window (r, *id);
  pthread_mutex_unlock (&r->lock);
  return res;
}

/* [pos, pos + len) of old is in buf (read_ok) or not: read it again,
 * block by block where it must.  False if the copy must stop.
 */
static bool
settle_read (struct replace *r, uint8_t *buf, uint64_t pos, uint64_t len,
             bool read_ok)
{
  int64_t bad = read_ok ? 0 : read_old (r, buf, pos, len);

  if (replace_debug_hold_ms > 0) {
    struct timespec ts = { replace_debug_hold_ms / 1000,
                           replace_debug_hold_ms % 1000 * 1000000L };
    nanosleep (&ts, NULL);
  }
  if (bad > 0 && !r->skip_unreadable) {
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "the member to replace (%s) has unreadable blocks: "
                 "the copy stopped (--skip-unreadable copies the rest and "
                 "lists what is lost)",
                 r->old_path);
    pthread_mutex_unlock (&r->lock);
    return false;
  }
  return true;
}

/* The copy, window by window.  Unthrottled, it is a pipeline: window k
 * is written to NEW while window k + 1 is read from old, both at once,
 * so that the copy runs at the pace of the slower device, not of the
 * two one after the other.  Both windows are locked against client
 * writes until written (a client write there would be overwritten by
 * older data); below the watermark, client writes reach both members.
 * Throttled (--rate), one window at a time, none held while it waits.
 *
 * First of all, the requests that started before the replace was
 * published (they saw no replace, and go to old alone) are waited for:
 * the copy must not read old before they have landed on it.
 */
static void *
copier (void *arg)
{
  struct replace *r = arg;
  struct volume *v = r->v;
  struct member *old = &v->members[r->index];
  uint8_t *buf[2] = { NULL, NULL };
  uint64_t pos = r->start, w;
  unsigned k = 0, id = 0, next_id = 0;

  phase (r, "published");
  volume_drain (v);
  phase (r, "drained");
  if (posix_memalign ((void **) &buf[0], 4096, WINDOW) != 0
      || posix_memalign ((void **) &buf[1], 4096, WINDOW) != 0) {
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "out of memory");
    pthread_mutex_unlock (&r->lock);
    goto end;
  }
  w = r->end - pos < WINDOW ? r->end - pos : WINDOW;
  if (w == 0 || lock_window (r, pos, pos + w, false, &id) != LOCKED)
    goto stop;
  phase (r, "locked");
  if (!settle_read (r, buf[0], pos, w, read_window (r, buf[0], w, pos)))
    goto stop;
  for (;;) {
    uint64_t next = pos + w;
    uint64_t nw = r->end - next < WINDOW ? r->end - next : WINDOW;
    struct member_op ops[2 * PIECES];
    struct iovec iov[2 * PIECES];
    bool ahead = false, read_ok = false;
    unsigned nwr, nrd = 0;

    if (nw > 0 && r->rate == 0) {
      enum lock_result l = lock_window (r, next, next + nw, true, &next_id);
      if (l == STOPPED)
        break;
      ahead = l == LOCKED;
      if (ahead)
        phase (r, "locked");
    }
    nwr = pieces (ops, iov, &r->newm, OP_WRITE, buf[k], w, pos);
    if (ahead)
      nrd = pieces (ops + nwr, iov + nwr, old, OP_READ, buf[k ^ 1], nw, next);
    ioexec_run (ops, nwr + nrd, v->uring);
    read_ok = all_ok (ops + nwr, nrd);
    for (unsigned i = 0; i < nwr; ++i)
      if (ops[i].err) {
        pthread_mutex_lock (&r->lock);
        fail_locked (r, "the new member (%s) failed: write at offset %"
                     PRIu64 ": %s",
                     r->new_path, ops[i].offset, strerror (ops[i].err));
        pthread_mutex_unlock (&r->lock);
        goto stop;
      }
    /* Window written: released, and below the watermark from now on
     * (client writes there reach NEW too), in one step.
     */
    pthread_mutex_lock (&r->lock);
    r->watermark = next;
    drop_window (r, id);
    pthread_mutex_unlock (&r->lock);
    phase (r, "advanced");
    pos = next;
    w = nw;
    k ^= 1;
    id = next_id;
    if (w == 0)
      break;
    if (!ahead) {
      throttle (r, pos - r->start);
      if (lock_window (r, pos, pos + w, false, &id) != LOCKED)
        break;
      phase (r, "locked");
      read_ok = read_window (r, buf[k], w, pos);
    }
    if (!settle_read (r, buf[k], pos, w, read_ok))
      break;
  }

stop:
  /* Stopped or done: no window any more. */
  pthread_mutex_lock (&r->lock);
  r->win[0].used = r->win[1].used = false;
  pthread_cond_broadcast (&r->cond);
  pthread_mutex_unlock (&r->lock);
  if (pos >= r->end)
    finish (r);

end:
  free (buf[0]);
  free (buf[1]);
  pthread_mutex_lock (&r->lock);
  stopped_locked (r);
  if (r->state == R_COPYING) /* out of memory before any window */
    fail_locked (r, "stopped");
  if (r->t_end == 0)
    r->t_end = now_ns ();
  pthread_mutex_unlock (&r->lock);
  /* No client reaches NEW (or, after the switch, old) any more once the
   * requests that may have seen the replace have ended.
   */
  atomic_store (&v->rep, NULL);
  volume_drain (v);
  if (r->state != R_DONE)
    stripe_error ("replace: member %u (%s) not replaced by %s: %s", r->index,
                  r->old_path, r->new_path, r->error);
  member_close (&r->newm);
  r->newm_open = false;
  return NULL;
}

/* ---- control ---- */

/* Whether NEW holds metadata a user may want (an nbdstripe header, an md
 * superblock) -- replace overwrites it only with force.
 */
static bool
holds_metadata (struct member *m, char *what, size_t len)
{
  static const uint8_t md_magic[4] = { 0xfc, 0x4e, 0x2b, 0xa9 };
  uint8_t buf[2 * HEADER_SIZE];
  char why[128];
  ssize_t n = member_pread (m, buf, sizeof buf, 0, false, why, sizeof why);

  if (n >= 8 && memcmp (buf, HEADER_MAGIC, 8) == 0) {
    snprintf (what, len, "holds an nbdstripe header");
    return true;
  }
  if ((n >= 4 && memcmp (buf, md_magic, 4) == 0)
      || (n >= (ssize_t) (HEADER_SIZE + 4)
          && memcmp (buf + HEADER_SIZE, md_magic, 4) == 0)) {
    snprintf (what, len, "holds an md superblock");
    return true;
  }
  return false;
}

/* Whether the volume's replace, if any, has ended (its state final) --
 * its copier may still hold the member a moment (in-flight I/O, NEW to
 * close) before it lets go of the volume.
 */
static bool
rep_ended (struct volume *v)
{
  struct replace *r = atomic_load (&v->rep);
  bool ended;

  if (r == NULL)
    return false;
  pthread_mutex_lock (&r->lock);
  ended = r->state == R_FAILED || r->state == R_CANCELLED
          || r->state == R_DONE;
  pthread_mutex_unlock (&r->lock);
  return ended;
}

/* Whether NEW can serve what the volume promised its clients: requests
 * as small as the volume's minimum block size.
 */
static bool
new_serves_clients (const struct volume *v, const struct member *n,
                    const char *path, char *why, size_t len)
{
  if (n->min_io > v->min_block) {
    snprintf (why, len, "%s takes requests of %" PRIu32 " bytes at least "
              "(its minimum block size), but the volume's clients were "
              "promised %" PRIu32 ": it cannot take their place",
              path, n->min_io, v->min_block);
    return false;
  }
  return true;
}

/* Checks of NEW, with no lock held (opening an NBD export may take
 * seconds): r->newm opened, claimed and started, its first bytes
 * cleared.  Nothing is written to NEW before every check has passed.
 */
static int
prepare_new (struct volume *v, struct replace *r,
             const struct replace_params *p, char *why, size_t len)
{
  struct member *old = &v->members[p->index];
  char reason[512];
  uint64_t need;
  bool alias = false;

  if (member_open (&r->newm, p->index, p->new_path, &old->params, reason,
                   sizeof reason)
      == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  r->newm_open = true;
  /* Members' identities change only under swap_lock (a re-probe). */
  pthread_mutex_lock (&v->swap_lock);
  for (unsigned j = 0; j < v->nr_members && !alias; ++j) {
    char how[512];
    if (identity_alias (&v->members[j].id, &r->newm.id, how, sizeof how)) {
      if (j == p->index)
        snprintf (why, len, "%s is member %u itself (%s)", p->new_path, j,
                  how);
      else
        snprintf (why, len, "%s and member %u (%s) are %s", p->new_path, j,
                  v->members[j].path, how);
      alias = true;
    }
  }
  need = old->need;
  pthread_mutex_unlock (&v->swap_lock);
  if (alias)
    return -1;
  if (v->md_sb && v->md_sb[p->index].minor == 0) {
    /* 1.0 keeps its superblock past the data, near the end. */
    uint64_t at;
    if (!md_super_location (0, r->newm.size, &at) || at < need) {
      snprintf (why, len, "%s: %" PRIu64 " bytes: too small for member %u's "
                "data (%" PRIu64 " bytes) and its md 1.0 superblock after it",
                p->new_path, r->newm.size, p->index, need);
      return -1;
    }
  }
  if (r->newm.size < need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes: member %u needs %" PRIu64
              " (its data offset and data)",
              p->new_path, r->newm.size, p->index, need);
    return -1;
  }
  if (!new_serves_clients (v, &r->newm, p->new_path, why, len))
    return -1;
  if (!p->force && holds_metadata (&r->newm, reason, sizeof reason)) {
    snprintf (why, len, "%s %s: refusing to overwrite it (force)",
              p->new_path, reason);
    return -1;
  }
  if (member_claim (&r->newm, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  if (member_start (&r->newm) == -1) {
    snprintf (why, len, "%s: cannot start: %m", p->new_path);
    return -1;
  }
  /* NEW holds no metadata until the end: a copy cut short (a crash) is
   * never taken for a member.
   */
  {
    uint64_t clear = old->data_offset < 2 * HEADER_SIZE ? old->data_offset
                                                       : 2 * HEADER_SIZE;
    static const uint8_t zeros[2 * HEADER_SIZE];
    if (clear > 0
        && (member_pwrite (&r->newm, zeros, clear, 0, reason, sizeof reason)
              == -1
            || member_sync (&r->newm, reason, sizeof reason) == -1)) {
      snprintf (why, len, "%s: %s", p->new_path, reason);
      return -1;
    }
  }
  return 0;
}

static void
replace_discard (struct replace *r)
{
  if (r->newm_open)
    member_close (&r->newm);
  free (r->old_path);
  free (r->new_path);
  free (r->config);
  free (r);
}

int
replace_start (struct volume *v, const struct replace_params *p, char *why,
               size_t len)
{
  struct replace *r = NULL;
  struct member *old;
  int e;

  pthread_mutex_lock (&v->replace_lock);
  /* A replace that has ended is not running: once the status says so
   * (and replace --wait has returned), a new one is not refused.  Wait
   * (10 s at most) for its copier to let go of the volume.
   */
  for (int i = 0; i < 1000 && rep_ended (v); ++i) {
    struct timespec ts = { 0, 10 * 1000000L };
    pthread_mutex_unlock (&v->replace_lock);
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&v->replace_lock);
  }
  if (atomic_load (&v->rep) != NULL || v->rep_starting) {
    if (v->rep_starting)
      snprintf (why, len, "a replace is being started already");
    else
      snprintf (why, len, "a replace of member %u is running already",
                atomic_load (&v->rep)->index);
    goto refuse;
  }
  if (v->readonly) {
    snprintf (why, len, "the volume is served read-only");
    goto refuse;
  }
  if (p->index >= v->nr_members) {
    snprintf (why, len, "no member %u: the volume has %u (0 to %u)",
              p->index, v->nr_members, v->nr_members - 1);
    goto refuse;
  }
  if (p->config == NULL && !v->has_header && !v->md_sb) {
    snprintf (why, len, "the volume has neither a config file to name the "
              "new member in nor metadata on its members (served ad hoc, "
              "file=...): after a restart it would be served from the old "
              "member again; serve it from a config file");
    goto refuse;
  }
  old = &v->members[p->index];
  r = calloc (1, sizeof *r);
  if (r == NULL) {
    snprintf (why, len, "out of memory");
    goto refuse;
  }
  r->v = v;
  r->index = p->index;
  r->rate = p->rate;
  r->skip_unreadable = p->skip_unreadable;
  r->old_path = strdup (old->path);
  r->new_path = strdup (p->new_path);
  r->config = p->config ? strdup (p->config) : NULL;
  if (r->old_path == NULL || r->new_path == NULL
      || (p->config && r->config == NULL)) {
    snprintf (why, len, "out of memory");
    goto refuse;
  }
  v->rep_starting = true;
  pthread_mutex_unlock (&v->replace_lock);

  /* Slow (an NBD connect): no lock that status or the I/O path takes. */
  e = prepare_new (v, r, p, why, len);

  pthread_mutex_lock (&v->replace_lock);
  v->rep_starting = false;
  if (e == -1)
    goto refuse;
  r->start = old->data_offset;
  r->end = old->need;
  r->watermark = r->start;
  r->state = R_COPYING;
  r->t_start = now_ns ();
  pthread_mutex_init (&r->lock, NULL);
  pthread_cond_init (&r->cond, NULL);
  /* Published: requests from now on see it; those before are waited for
   * by the copier before it reads anything.
   */
  r->next = v->replaces;
  v->replaces = r;
  atomic_store (&v->rep, r);
  e = pthread_create (&r->thread, NULL, copier, r);
  if (e != 0) {
    atomic_store (&v->rep, NULL);
    pthread_mutex_lock (&r->lock);
    fail_locked (r, "cannot start the copier: %s", strerror (e));
    pthread_mutex_unlock (&r->lock);
    pthread_mutex_unlock (&v->replace_lock);
    volume_drain (v);
    member_close (&r->newm);
    r->newm_open = false;
    snprintf (why, len, "cannot start the copier: %s", strerror (e));
    return -1;
  }
  r->thread_started = true;
  pthread_mutex_unlock (&v->replace_lock);
  stripe_info ("replace: member %u: copying %s to %s (%" PRIu64 " bytes)",
               r->index, r->old_path, r->new_path, r->end - r->start);
  return 0;

refuse:
  if (r)
    replace_discard (r);
  pthread_mutex_unlock (&v->replace_lock);
  return -1;
}

int
replace_cancel (struct volume *v, char *why, size_t len)
{
  struct replace *r;

  pthread_mutex_lock (&v->replace_lock);
  r = atomic_load (&v->rep);
  if (r == NULL) {
    pthread_mutex_unlock (&v->replace_lock);
    snprintf (why, len, "no replace is running");
    return -1;
  }
  pthread_mutex_lock (&r->lock);
  if (r->state != R_COPYING) {
    pthread_mutex_unlock (&r->lock);
    pthread_mutex_unlock (&v->replace_lock);
    snprintf (why, len, "too late: the replace is %s",
              state_names[r->state]);
    return -1;
  }
  r->cancel = true;
  pthread_cond_broadcast (&r->cond);
  pthread_mutex_unlock (&r->lock);
  pthread_mutex_unlock (&v->replace_lock);
  return 0;
}

int
replace_wait (struct volume *v)
{
  struct replace *r;
  enum state s;

  pthread_mutex_lock (&v->replace_lock);
  r = v->replaces;
  pthread_mutex_unlock (&v->replace_lock);
  if (r == NULL || !r->thread_started)
    return -1;
  pthread_join (r->thread, NULL);
  r->thread_started = false;
  pthread_mutex_lock (&r->lock);
  s = r->state;
  pthread_mutex_unlock (&r->lock);
  return s == R_DONE ? 0 : -1;
}

struct json_object *
replace_status (struct volume *v)
{
  struct json_object *o, *lost;
  struct replace *r;
  uint64_t now = now_ns (), copied, total, elapsed;
  double rate;

  pthread_mutex_lock (&v->replace_lock);
  r = v->replaces;
  pthread_mutex_unlock (&v->replace_lock);
  if (r == NULL)
    return NULL;
  o = json_object_new_object ();
  pthread_mutex_lock (&r->lock);
  copied = r->watermark - r->start;
  total = r->end - r->start;
  elapsed = (r->t_end ? r->t_end : now) - r->t_start;
  rate = elapsed ? copied / (elapsed / 1e9) : 0;
  json_put (o, "state", json_text (state_names[r->state]));
  json_put (o, "member", json_object_new_int64 (r->index));
  json_put (o, "old", json_text (r->old_path));
  json_put (o, "new", json_text (r->new_path));
  json_put (o, "bytes_copied", json_u64 (copied));
  json_put (o, "bytes_total", json_u64 (total));
  json_put (o, "rate", json_object_new_double (rate));
  if (r->state == R_COPYING && rate > 0)
    json_put (o, "eta_seconds",
              json_object_new_double ((total - copied) / rate));
  json_put (o, "elapsed_seconds", json_object_new_double (elapsed / 1e9));
  json_put (o, "longest_client_wait_seconds",
            json_object_new_double (r->max_wait_ns / 1e9));
  if (r->hold_ns)
    json_put (o, "switch_hold_seconds",
              json_object_new_double (r->hold_ns / 1e9));
  if (replace_debug_gate) {
    json_put (o, "phase", r->phase ? json_text (r->phase) : NULL);
    json_put (o, "phase_held",
              json_object_new_boolean (r->released_seq < r->phase_seq));
    json_put (o, "phase_seq", json_object_new_int64 (r->phase_seq));
    /* Client requests held by a window or at the switch, for tests that
     * must know every request they sent has got as far as it can.
     */
    json_put (o, "clients_held",
              json_object_new_int64 (r->nr_waiting
                                     + atomic_load (&v->gate.waiters)));
  }
  if (r->error[0])
    json_put (o, "error", json_text (r->error));
  lost = json_object_new_array ();
  for (unsigned i = 0; i < r->nr_lost; ++i) {
    struct json_object *l = json_object_new_object ();
    json_put (l, "offset", json_u64 (r->lost[i].offset));
    json_put (l, "length", json_u64 (r->lost[i].length));
    json_object_array_add (lost, l);
  }
  json_put (o, "unreadable", lost);
  if (r->config) {
    json_put (o, "config", json_text (r->config));
    json_put (o, "config_updated", json_object_new_boolean (r->config_updated));
    if (r->config_note[0])
      json_put (o, "config_note", json_text (r->config_note));
  }
  pthread_mutex_unlock (&r->lock);
  return o;
}

void
replace_stop (struct volume *v)
{
  struct replace *r = atomic_load (&v->rep);

  if (r) {
    pthread_mutex_lock (&r->lock);
    r->cancel = true;
    pthread_cond_broadcast (&r->cond);
    pthread_mutex_unlock (&r->lock);
  }
  pthread_mutex_lock (&v->replace_lock);
  r = v->replaces;
  pthread_mutex_unlock (&v->replace_lock);
  for (; r; r = r->next)
    if (r->thread_started) {
      pthread_join (r->thread, NULL);
      r->thread_started = false;
    }
}

void
replace_free (struct volume *v)
{
  struct replace *r;

  replace_stop (v);
  while ((r = v->replaces) != NULL) {
    v->replaces = r->next;
    pthread_mutex_destroy (&r->lock);
    pthread_cond_destroy (&r->cond);
    free (r->old_path);
    free (r->new_path);
    free (r->config);
    free (r->lost);
    free (r);
  }
}
