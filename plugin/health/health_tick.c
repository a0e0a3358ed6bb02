/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health, the health thread.  It ticks once a
 * second: it snapshots the histograms, decides slow/failing/ok, notices
 * requests and probes that do not answer, and writes the status files --
 * at once when a transition happened.
 */

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "health_impl.h"
#include "layout.h"
#include "util.h"

/* The decisions of one tick. */

/* An operation never requested has empty histograms: nothing to copy
 * (snapshots start zeroed), which spares a read-only volume four fifths
 * of the copying every tick.
 */
static void
take_snapshot (struct health *h, unsigned i, struct hist_set *out)
{
  struct member_health *m = &h->m[i];
  for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
    if (atomic_load_explicit (&m->requests[op], memory_order_relaxed) == 0)
      continue;
    for (unsigned s = 0; s < NSIZES; ++s)
      for (unsigned b = 0; b < NBUCKETS; ++b)
        out->b[op][s][b] =
          atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
    /* After the buckets: health_record adds to the sum first. */
    out->sum[op] = atomic_load_explicit (&m->lat_ns[op], memory_order_relaxed);
  }
}

/* m->win = now - the snapshot a window ago (or since start). */
static void
update_windows (struct health *h, bool rotate)
{
  /* Until a whole window has passed, the window is the whole run. */
  bool since_start = h->snaps_filled < h->nsnaps;
  unsigned oldest = h->snap_head;

  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    take_snapshot (h, i, m->win);
    if (!since_start) {
      const struct hist_set *o = &m->snaps[oldest];
      for (unsigned op = 0; op < OP_NR_TRACKED; ++op) {
        for (unsigned s = 0;
             s < NSIZES && atomic_load_explicit (&m->requests[op],
                                                 memory_order_relaxed);
             ++s)
          for (unsigned b = 0; b < NBUCKETS; ++b)
            m->win->b[op][s][b] -= o->b[op][s][b];
        m->win->sum[op] -= o->sum[op];
      }
    }
    if (rotate)
      take_snapshot (h, i, &m->snaps[h->snap_head]);
  }
  if (rotate) {
    h->snap_head = (h->snap_head + 1) % h->nsnaps;
    if (h->snaps_filled < h->nsnaps)
      h->snaps_filled++;
  }
}

static const char *const size_names[NSIZES] = { "<8K", "8K-64K", "64K-512K",
                                                ">=512K" };

static void
format_ns (char *buf, size_t len, double ns)
{
  if (ns >= 1e6)
    snprintf (buf, len, "%.1f ms", ns / 1e6);
  else
    snprintf (buf, len, "%.0f us", ns / 1e3);
}

static void
decide_slow (struct health *h)
{
  if (h->n < 2)
    return;
  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    enum member_state st = atomic_load (&m->state);
    bool measured = false, slow = false;
    char reason[REASON_MAX] = "";
    double worst = 0;

    for (unsigned op = OP_READ; op <= OP_WRITE; ++op)
      for (unsigned s = 0; s < NSIZES; ++s) {
        uint64_t peers[NBUCKETS] = { 0 }, nm, np;
        double mm, mp;

        for (unsigned j = 0; j < h->n; ++j)
          if (j != i && h->m[j].class == m->class)
            for (unsigned b = 0; b < NBUCKETS; ++b)
              peers[b] += h->m[j].win->b[op][s][b];
        /* No sum per size class: the medians are placed in their
         * buckets only.
         */
        mm = health_quantile_ns (m->win->b[op][s], 0.5, -1, &nm);
        mp = health_quantile_ns (peers, 0.5, -1, &np);
        if (nm < h->p.set.min_samples || np < h->p.set.min_samples || nm == 0
            || np == 0)
          continue;
        measured = true;
        if (mm >= h->p.set.slow_floor_us * 1000.0
            && mm > h->p.set.slow_factor * mp && mm / mp > worst) {
          char a[32], b[32];
          worst = mm / mp;
          slow = true;
          format_ns (a, sizeof a, mm);
          format_ns (b, sizeof b, mp);
          snprintf (reason, sizeof reason,
                    "median %s latency %s vs %s for its peers (%.1fx, %s "
                    "requests, %" PRIu64 " samples in %u s)",
                    op_name (op), a, b, mm / mp, size_names[s], nm,
                    h->p.set.window);
        }
      }
    if (slow && st == MS_OK)
      health_set_state (h, i, MS_SLOW, reason);
    else if (slow && st == MS_SLOW)
      health_set_state (h, i, MS_SLOW, reason); /* refresh the figures */
    else if (!slow && measured && st == MS_SLOW)
      health_set_state (h, i, MS_OK, "latency back in line with its peers");
  }
}

static void
expire_failing (struct health *h, uint64_t now)
{
  uint64_t window = (uint64_t) h->p.set.window * 1000000000;

  for (unsigned i = 0; i < h->n; ++i) {
    struct member_health *m = &h->m[i];
    uint64_t last = atomic_load (&m->last_error_mono);
    uint64_t full = atomic_load (&m->last_full_mono);
    char reason[96];

    if (atomic_load (&m->state) == MS_FAILING && now - last >= window) {
      const char *floor = health_floor_reason (h, i);
      /* Failing for its drive (too): the reason is the drive's again. */
      if (floor[0] && strcmp (m->reason, floor) == 0)
        continue;
      snprintf (reason, sizeof reason, "no I/O error for %u s", h->p.set.window);
      health_settle (h, i, reason);
    }
    else if (atomic_load (&m->state) == MS_FULL && now - full >= window) {
      snprintf (reason, sizeof reason, "no write short of space for %u s",
                h->p.set.window);
      health_settle (h, i, reason);
    }
  }
}

/* Counters changed without a transition (errors): rewrite at most this
 * often, so that an error storm does not become a write storm.
 */
#define DIRTY_DELAY_NS 200000000u

/* Tell the listener which members changed state (lock held; dropped
 * while it is told, so that it may call back into health).
 */
static void
tell (struct health *h)
{
  uint64_t bits = h->notify;
  int passed[LAYOUT_MAX_MEMBERS];

  h->notify = 0;
  for (unsigned i = 0; i < h->n; ++i) {
    passed[i] = h->m[i].passed;
    h->m[i].passed = -1;
  }
  if (h->ops.state_changed == NULL)
    return;
  pthread_mutex_unlock (&h->lock);
  for (unsigned i = 0; i < h->n; ++i) {
    enum member_state s = atomic_load (&h->m[i].state);
    if ((bits & (UINT64_C (1) << i)) == 0)
      continue;
    if (passed[i] >= 0 && s >= MS_FAILING)
      h->ops.state_changed (h->ops.listener, i,
                            (enum member_state) passed[i]);
    h->ops.state_changed (h->ops.listener, i, s);
  }
  pthread_mutex_lock (&h->lock);
}

void *
health_main (void *arg)
{
  struct health *h = arg;
  uint64_t next_tick = health_now_ns (), last_snap = 0;

  pthread_mutex_lock (&h->lock);
  while (!h->stop) {
    uint64_t now = health_now_ns (), deadline;

    if (h->notify) {
      tell (h);
      continue; /* the lock was dropped: look again */
    }
    if (now >= next_tick) {
      bool rotate = now - last_snap >= (uint64_t) h->snap_period * 1000000000
                    || last_snap == 0;
      update_windows (h, rotate);
      if (rotate)
        last_snap = now;
      decide_slow (h);
      expire_failing (h, now);
      health_check_in_flight (h, now);
      health_check_prober (h, now);
      pthread_cond_signal (&h->probe_cond);
      next_tick = now + 1000000000;
      if (now - h->last_status_mono
          >= (uint64_t) h->p.set.interval * 1000000000 - 50000000)
        h->dirty = true;
    }
    /* The first status at once: last_status_mono is 0 until then, and
     * the monotonic clock counts from boot -- a volume started by its unit
     * at boot would otherwise have no status file for up to an interval.
     */
    if (!h->status_written || h->nr_pending > 0 || h->pending_overflow
        || (h->dirty && now - h->last_status_mono >= DIRTY_DELAY_NS)) {
      unsigned shown = h->nr_pending; /* in the file about to be written */
      h->dirty = false;
      health_write_status (h, true);
      health_hand_events_to_hook (h, shown);
      continue; /* the lock was dropped: look again */
    }
    deadline = next_tick;
    if (h->dirty && h->last_status_mono + DIRTY_DELAY_NS < deadline)
      deadline = h->last_status_mono + DIRTY_DELAY_NS;
    struct timespec ts = { deadline / 1000000000, deadline % 1000000000 };
    pthread_cond_timedwait (&h->cond, &h->lock, &ts);
  }
  /* The last word: counters as they are, running: false. */
  update_windows (h, false);
  health_write_status (h, false);
  health_hand_events_to_hook (h, MAX_EVENTS); /* the last write showed them all */
  pthread_mutex_unlock (&h->lock);
  return NULL;
}

void
health_tick (struct health *h, uint64_t now)
{
  pthread_mutex_lock (&h->lock);
  update_windows (h, true);
  decide_slow (h);
  expire_failing (h, now);
  health_check_in_flight (h, now);
  pthread_mutex_unlock (&h->lock);
}
