/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the mover's copy and the clients' side of it -- flights,
 * windows, the pipeline, unreadable blocks, the rate.  See
 * include/mover.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ioexec.h"
#include "json.h"
#include "log.h"
#include "lost.h"
#include "member.h"
#include "mover.h"
#include "util.h"
#include "volume.h"
#include "mover_impl.h"

/* Reads tried this often before a block counts as unreadable. */
#define READ_TRIES 3

/* ---- clients: flights and windows ---- */

static bool
overlaps (uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
  return a < d && c < b;
}

/* Whether a client write must wait: a window announced before it
 * overlaps it.  Windows announced after it wait for it instead.
 */
static bool
held_by_window (const struct mover *mv, const struct mover_flight *f)
{
  for (unsigned w = 0; w < 2; ++w)
    if (mv->win[w].used && mv->win[w].id < f->seen
        && (f->write || mv->win[w].exclusive)
        && overlaps (f->a, f->b, mv->win[w].a, mv->win[w].b))
      return true;
  return false;
}

struct mover_at
mover_enter (struct mover *mv, struct mover_flight *f, uint64_t a, uint64_t b,
             bool write)
{
  struct mover_at at;

  f->a = a;
  f->b = b;
  f->write = write;
  f->old_a = UINT64_MAX;
  pthread_mutex_lock (&mv->lock);
  f->seen = mv->next_win;
  f->waiting = held_by_window (mv, f);
  f->next = mv->flights;
  mv->flights = f;
  if (f->waiting) {
    uint64_t t0 = now_ns (), waited;
    mv->nr_waiting++;
    while (held_by_window (mv, f))
      pthread_cond_wait (&mv->cond, &mv->lock);
    mv->nr_waiting--;
    f->waiting = false;
    waited = now_ns () - t0;
    if (waited > mv->max_wait_ns)
      mv->max_wait_ns = waited;
    pthread_cond_broadcast (&mv->cond); /* a copier waiting on it */
  }
  at.state = mv->state;
  at.watermark = mv->watermark;
  at.recorded = mv->recorded;
  f->old_a = a > mv->recorded ? a : mv->recorded;
  pthread_mutex_unlock (&mv->lock);
  return at;
}

void
mover_record (struct mover *mv, uint64_t recorded)
{
  bool busy;

  pthread_mutex_lock (&mv->lock);
  mv->recorded = recorded;
  do {
    busy = false;
    for (struct mover_flight *f = mv->flights; f; f = f->next)
      if (f->old_a < recorded && f->old_a < f->b)
        busy = true;
    if (busy)
      pthread_cond_wait (&mv->cond, &mv->lock);
  } while (busy);
  pthread_mutex_unlock (&mv->lock);
}

void
mover_leave (struct mover *mv, struct mover_flight *f)
{
  pthread_mutex_lock (&mv->lock);
  for (struct mover_flight **p = &mv->flights; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  pthread_cond_broadcast (&mv->cond);
  pthread_mutex_unlock (&mv->lock);
}

bool
mover_copied (struct mover *mv, uint64_t a, uint64_t b)
{
  bool copied;

  (void) a;
  pthread_mutex_lock (&mv->lock);
  copied = mv->state == MOVER_COPYING && b <= mv->watermark;
  pthread_mutex_unlock (&mv->lock);
  return copied;
}

static void
drop_window (struct mover *mv, unsigned id)
{
  for (unsigned w = 0; w < 2; ++w)
    if (mv->win[w].used && mv->win[w].id == id)
      mv->win[w].used = false;
  pthread_cond_broadcast (&mv->cond);
}

enum lock_result { LOCKED, BUSY, STOPPED };

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
lock_window (struct mover *mv, uint64_t a, uint64_t b, bool exclusive,
             bool try, unsigned *id)
{
  enum lock_result res = LOCKED;
  unsigned slot;

  pthread_mutex_lock (&mv->lock);
  slot = mv->win[0].used ? 1 : 0;
  if (mover_stopped_locked (mv)) {
    pthread_mutex_unlock (&mv->lock);
    return STOPPED;
  }
  *id = mv->next_win++;
  mv->win[slot] = (struct mover_window){ .a = a, .b = b, .id = *id,
                                         .used = true,
                                         .exclusive = exclusive };
  for (;;) {
    bool busy = false, blocked = false;

    for (struct mover_flight *f = mv->flights; f; f = f->next)
      if ((f->write || exclusive) && f->seen <= *id
          && overlaps (f->a, f->b, a, b)) {
        busy = true;
        blocked |= f->waiting;
      }
    if (!busy)
      break;
    if (try && blocked) {
      res = BUSY;
      break;
    }
    pthread_cond_wait (&mv->cond, &mv->lock);
    if (mover_stopped_locked (mv)) {
      res = STOPPED;
      break;
    }
  }
  if (res != LOCKED)
    drop_window (mv, *id);
  pthread_mutex_unlock (&mv->lock);
  return res;
}

/* ---- the copier ---- */

/* The volume's lost ranges get it at once (reads of it fail from now
 * on, wherever they go), and the job's list, coalesced, for its status.
 */
void
mover_add_lost (struct mover *mv, uint64_t off, uint64_t len)
{
  lost_add (&mv->lost, off, len, NULL);
  volume_lost_add (mv->v, off, len);
}

static bool
all_ok (const struct member_op *ops, unsigned n)
{
  for (unsigned i = 0; i < n; ++i)
    if (ops[i].err)
      return false;
  return true;
}

/* Read [pos, pos + len) through the job at once.  True if all read. */
static bool
read_range (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len)
{
  struct member_op ops[MOVER_MAX_OPS];
  struct iovec iov[MOVER_MAX_OPS];
  unsigned n = mv->job->read_ops (mv, buf, pos, len, ops, iov);

  ioexec_run (ops, n, mv->v->uring);
  return all_ok (ops, n);
}

/* Read [pos, pos + len) into buf again, then block by block.  Unreadable
 * blocks are recorded, and zeroed in buf.  Returns how many bytes were
 * unreadable.
 */
static uint64_t
read_again (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len)
{
  uint64_t bad = 0;

  for (int t = 0; t < READ_TRIES - 1; ++t)
    if (read_range (mv, buf, pos, len))
      return 0;
  for (uint64_t b = 0; b < len; b += MOVER_BLOCK) {
    uint64_t n = len - b < MOVER_BLOCK ? len - b : MOVER_BLOCK;
    uint64_t logical;
    int t;
    for (t = 0; t < READ_TRIES; ++t)
      if (read_range (mv, buf + b, pos + b, n))
        break;
    if (t == READ_TRIES) {
      memset (buf + b, 0, n);
      /* A block lies in one chunk (chunks are multiples of 4 KiB). */
      pthread_mutex_lock (&mv->lock);
      if (mv->job->logical (mv, pos + b, &logical))
        mover_add_lost (mv, logical, n);
      pthread_mutex_unlock (&mv->lock);
      bad += n;
    }
  }
  return bad;
}

/* [pos, pos + len) is in buf (read_ok) or not: read it again, block by
 * block where it must.  False if the copy must stop.
 */
static bool
settle_read (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
             bool read_ok)
{
  uint64_t bad = read_ok ? 0 : read_again (mv, buf, pos, len);
  char why[512];

  if (mover_debug_hold_ms > 0) {
    struct timespec ts = { mover_debug_hold_ms / 1000,
                           mover_debug_hold_ms % 1000 * 1000000L };
    nanosleep (&ts, NULL);
  }
  if (bad > 0 && !mv->skip_unreadable) {
    mover_fail (mv, "%s", mv->job->unreadable (mv, why, sizeof why));
    return false;
  }
  return true;
}

/* Keep the average at or below the rate. */
static void
throttle (struct mover *mv, uint64_t copied)
{
  uint64_t due, now;

  if (mv->rate == 0)
    return;
  due = mv->t_start + (uint64_t) ((double) copied / mv->rate * 1e9);
  while ((now = now_ns ()) < due) {
    uint64_t d = due - now > 100000000 ? 100000000 : due - now;
    struct timespec ts = { 0, (long) d };
    bool stop;
    nanosleep (&ts, NULL);
    pthread_mutex_lock (&mv->lock);
    stop = mv->cancel || mv->state != MOVER_COPYING;
    pthread_mutex_unlock (&mv->lock);
    if (stop)
      return;
  }
}

static uint64_t
window_at (struct mover *mv, uint64_t pos, bool *exclusive)
{
  uint64_t w = MOVER_WINDOW;

  *exclusive = false;
  if (pos >= mv->end)
    return 0;
  if (mv->job->window_size)
    w = mv->job->window_size (mv, pos, exclusive);
  return mv->end - pos < w ? mv->end - pos : w;
}

/* What a window holds (mover.h, used): all in use, all free, or runs of
 * both.  The windows stay the job's (a restripe's records and journal
 * depend on them); a mixed one is read and written run by run.
 */
enum kind { K_USED, K_FREE, K_MIXED };

/* Asked once the window is locked, when no client write can be under
 * way in it: each marks its regions before it goes, and one that marked
 * them before the window was announced has ended.  One that marks them
 * later waits for the window: a run found free then may be in use when
 * it is written, and is written as the zeros it read as.
 */
static enum kind
window_kind (struct mover *mv, uint64_t pos, uint64_t w)
{
  bool used;

  if (mv->job->used == NULL)
    return K_USED;
  if (mv->job->used (mv, pos, pos + w, &used) < pos + w)
    return K_MIXED;
  return used ? K_USED : K_FREE;
}

/* Where positions [at, at + len) of window [pos, pos + w) are in its
 * buffer.
 */
static uint8_t *
run_buf (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t w,
         uint64_t at, uint64_t len)
{
  return buf + (mv->job->buf_at ? mv->job->buf_at (mv, pos, w, at, len)
                                : at - pos);
}

/* Read window [pos, pos + w) into buf: the zeros a read returns where
 * it is free.  True if all read.
 */
static bool
read_window (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t w,
             enum kind kind)
{
  bool ok = true, used;

  switch (kind) {
  case K_USED: return read_range (mv, buf, pos, w);
  case K_FREE: memset (buf, 0, w); return true;
  case K_MIXED: break;
  }
  for (uint64_t at = pos, e; at < pos + w; at = e) {
    uint8_t *b;

    e = mv->job->used (mv, at, pos + w, &used);
    b = run_buf (mv, buf, pos, w, at, e - at);
    if (!used)
      memset (b, 0, e - at);
    else if (!read_range (mv, b, at, e - at))
      ok = false;
  }
  return ok;
}

/* The ops that put [pos, pos + len) (its bytes in buf) where it goes:
 * free, a zero that may trim (or, where the job has none, the zeros in
 * buf written), counted free; else written.
 */
static unsigned
place_ops (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t len,
           bool free_, struct member_op *ops, struct iovec *iov)
{
  unsigned n = 0;

  if (free_) {
    if (mv->job->zero_ops)
      n = mv->job->zero_ops (mv, pos, len, ops);
    pthread_mutex_lock (&mv->lock);
    mv->skipped += len;
    pthread_mutex_unlock (&mv->lock);
  }
  return n ? n : mv->job->write_ops (mv, buf, pos, len, ops, iov);
}

/* The first of ops[0 .. n) that failed, said in the job's words: false. */
static bool
writes_ok (struct mover *mv, const struct member_op *ops, unsigned n)
{
  for (unsigned i = 0; i < n; ++i)
    if (ops[i].err) {
      pthread_mutex_lock (&mv->lock);
      mv->job->write_failed (mv, &ops[i]);
      pthread_mutex_unlock (&mv->lock);
      return false;
    }
  return true;
}

/* A mixed window, run after run (each run's ops done before the next's
 * are made: a job may keep one plan at a time).
 */
static bool
write_runs (struct mover *mv, uint8_t *buf, uint64_t pos, uint64_t w)
{
  struct member_op ops[MOVER_MAX_OPS];
  struct iovec iov[MOVER_MAX_OPS];
  bool used;

  for (uint64_t at = pos, e; at < pos + w; at = e) {
    unsigned n;

    e = mv->job->used (mv, at, pos + w, &used);
    n = place_ops (mv, run_buf (mv, buf, pos, w, at, e - at), at, e - at,
                   !used, ops, iov);
    ioexec_run (ops, n, mv->v->uring);
    if (!writes_ok (mv, ops, n))
      return false;
  }
  return true;
}

/* Write window [pos, pos + w) (kind) from wbuf while [next, next + nw)
 * (next_kind) is read into rbuf (nw 0: nothing read); a mixed window
 * is written, or read, on its own.  False if the copy must stop;
 * *read_ok whether the read-ahead read all.
 */
static bool
write_and_read (struct mover *mv, uint8_t *wbuf, uint64_t pos, uint64_t w,
                enum kind kind, uint8_t *rbuf, uint64_t next, uint64_t nw,
                enum kind next_kind, bool *read_ok)
{
  struct member_op ops[2 * MOVER_MAX_OPS];
  struct iovec iov[2 * MOVER_MAX_OPS];
  unsigned nwr = 0, nrd = 0;
  bool ahead = nw > 0 && kind != K_MIXED && next_kind != K_MIXED;

  *read_ok = true;
  if (mv->job->before_write
      && mv->job->before_write (mv, wbuf, pos, w) == -1)
    return false;
  if (kind == K_MIXED) {
    if (!write_runs (mv, wbuf, pos, w))
      return false;
  }
  else
    nwr = place_ops (mv, wbuf, pos, w, kind == K_FREE, ops, iov);
  if (ahead && next_kind == K_FREE)
    memset (rbuf, 0, nw);
  else if (ahead)
    nrd = mv->job->read_ops (mv, rbuf, next, nw, ops + nwr, iov + nwr);
  ioexec_run (ops, nwr + nrd, mv->v->uring);
  *read_ok = all_ok (ops + nwr, nrd);
  if (!writes_ok (mv, ops, nwr))
    return false;
  if (nw > 0 && !ahead)
    *read_ok = read_window (mv, rbuf, next, nw, next_kind);
  return mv->job->after_write == NULL
         || mv->job->after_write (mv, pos, w) == 0;
}

/* The copy, window by window: see mover.h.  Returns whether it reached
 * the end.
 */
static bool
copy (struct mover *mv, uint8_t *buf[2])
{
  bool excl, next_excl;
  enum kind kind, next_kind = K_USED;
  uint64_t pos = mv->start, w = window_at (mv, pos, &excl);
  unsigned k = 0, id = 0, next_id = 0;
  bool read_ok;

  if (w == 0)
    return true;
  if (lock_window (mv, pos, pos + w, excl, false, &id) != LOCKED)
    return false;
  mover_phase (mv, "locked");
  kind = window_kind (mv, pos, w);
  if (!settle_read (mv, buf[0], pos, w,
                    read_window (mv, buf[0], pos, w, kind)))
    return false;
  for (;;) {
    uint64_t next = pos + w, nw = window_at (mv, next, &next_excl);
    bool ahead = false;

    if (nw > 0 && mv->rate == 0) {
      enum lock_result l =
        lock_window (mv, next, next + nw, next_excl, true, &next_id);
      if (l == STOPPED)
        return false;
      ahead = l == LOCKED;
      if (ahead) {
        mover_phase (mv, "locked");
        next_kind = window_kind (mv, next, nw);
      }
    }
    if (!write_and_read (mv, buf[k], pos, w, kind, buf[k ^ 1], next,
                         ahead ? nw : 0, next_kind, &read_ok))
      return false;
    /* Window written: released, and below the watermark from now on, in
     * one step.
     */
    pthread_mutex_lock (&mv->lock);
    mv->watermark = next;
    drop_window (mv, id);
    pthread_mutex_unlock (&mv->lock);
    mover_phase (mv, "advanced");
    pos = next;
    w = nw;
    excl = next_excl;
    kind = next_kind;
    k ^= 1;
    id = next_id;
    if (w == 0)
      return true;
    if (!ahead) {
      throttle (mv, pos - mv->start - mv->skipped);
      /* Decided again: what is safe may have changed since. */
      w = window_at (mv, pos, &excl);
      if (lock_window (mv, pos, pos + w, excl, false, &id) != LOCKED)
        return false;
      mover_phase (mv, "locked");
      kind = window_kind (mv, pos, w);
      read_ok = read_window (mv, buf[k], pos, w, kind);
    }
    if (!settle_read (mv, buf[k], pos, w, read_ok))
      return false;
  }
}

/* First of all, the requests that started before the job was published
 * (they saw no job) are waited for: the copy must not read before they
 * have landed.
 */
void *
mover_copier (void *arg)
{
  struct mover *mv = arg;
  uint8_t *buf[2] = { NULL, NULL };
  bool reached;

  mover_phase (mv, "published");
  volume_drain (mv->v);
  mover_phase (mv, "drained");
  if (posix_memalign ((void **) &buf[0], 4096, MOVER_WINDOW) != 0
      || posix_memalign ((void **) &buf[1], 4096, MOVER_WINDOW) != 0) {
    mover_fail (mv, "out of memory");
    goto end;
  }
  reached = copy (mv, buf);
  /* Stopped or done: no window any more. */
  pthread_mutex_lock (&mv->lock);
  mv->win[0].used = mv->win[1].used = false;
  pthread_cond_broadcast (&mv->cond);
  pthread_mutex_unlock (&mv->lock);
  if (reached)
    mv->job->finish (mv);

end:
  free (buf[0]);
  free (buf[1]);
  pthread_mutex_lock (&mv->lock);
  mover_stopped_locked (mv);
  if (mv->state == MOVER_COPYING) /* out of memory before any window */
    mover_fail_locked (mv, "stopped");
  if (mv->t_end == 0)
    mv->t_end = now_ns ();
  pthread_mutex_unlock (&mv->lock);
  /* No client reaches the job any more once the requests that may have
   * seen it have ended.
   */
  if (mv->job->withdraw == NULL || mv->job->withdraw (mv))
    volume_mover_withdraw (mv->v);
  else
    atomic_store (&mv->vm.stays, true);
  mv->job->ended (mv);
  return NULL;
}

