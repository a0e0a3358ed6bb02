/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the patrol read of a served volume.  See include/scrub.h. */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array.h"
#include "health.h"
#include "jobs.h"
#include "json.h"
#include "layout.h"
#include "log.h"
#include "member.h"
#include "scrub.h"
#include "util.h"
#include "volume.h"

/* Read at a time from each member, and finer where it fails. */
#define PIECE (1024u * 1024)
#define BLOCK 4096u
/* Reads of a block before it counts as unreadable. */
#define READ_TRIES 2
/* The pause before a read while clients are at work: at most a piece a
 * second (1 MiB/s) then, md's default speed_limit_min, its resync's
 * floor under other I/O.  On members of 150 MB/s a SEQ1M Q8 read kept
 * 0.93 of its throughput with a 10 ms pause, 0.968 at 100 ms and 0.978
 * at 250 ms; reading as soon as clients had been quiet for 20 ms kept
 * 0.93 too: throttled devices answer in bursts, with gaps that are not
 * idle (bench/RESULTS.md).
 */
#define YIELD_MS 1000
/* Ranges kept per member (beyond: counted, and "truncated"). */
#define MAX_RANGES 4096

enum state { S_RUNNING, S_DONE, S_CANCELLED, S_FAILED };
static const char *const state_names[] = { "running", "done", "cancelled",
                                           "failed" };

struct range {
  uint64_t offset, length;
};

struct ranges {
  struct range *r;
  unsigned nr, cap;
};

struct scrub_member {
  uint64_t start, end;    /* member offsets of its data area */
  uint64_t done;          /* bytes of it read */
  uint64_t skipped_bytes; /* not read (it could not be read any more) */
  uint64_t free_bytes;    /* not read: free in the allocation map */
  uint64_t bad;           /* unreadable bytes */
  struct ranges member_ranges;
  char skipped[256]; /* "" or why it was not (all) read */
};

struct scrub {
  struct volume *v;
  uint64_t rate;
  pthread_t thread;
  bool thread_started;

  pthread_mutex_t lock;
  /* Under lock. */
  enum state state;
  bool cancel;
  bool truncated;
  char error[256];
  double started_unix, finished_unix;
  uint64_t t_start, t_end; /* monotonic ns */
  uint64_t total, read;    /* bytes; read: read or given up (progress) */
  uint64_t skipped;        /* bytes given up */
  uint64_t free_bytes;     /* bytes free in the allocation map, not read */
  struct ranges logical;
  struct scrub_member m[LAYOUT_MAX_MEMBERS];
};

/* Append [off, off + len) to l, merged with its last range when they
 * touch.  False when l is full (the caller says "truncated").
 */
static bool
add_range (struct ranges *l, uint64_t off, uint64_t len)
{
  if (l->nr > 0) {
    struct range *last = &l->r[l->nr - 1];
    if (last->offset + last->length == off) {
      last->length += len;
      return true;
    }
  }
  if (l->nr == MAX_RANGES)
    return false;
  if (l->nr == l->cap) {
    unsigned cap = l->cap ? 2 * l->cap : 16;
    struct range *n = realloc (l->r, cap * sizeof *n);
    if (n == NULL)
      return false;
    l->r = n;
    l->cap = cap;
  }
  l->r[l->nr++] = (struct range){ off, len };
  return true;
}

/* Member i's block [mo, mo + len) is unreadable: recorded, and the
 * member failing with what has been found on it so far.  Its logical
 * bytes are those a read of it would serve now (volume_member_logical:
 * during a restripe, its new layout below the position, the old one
 * above).  Found after the read, not before: a restripe's position only
 * moves past bytes its copier has read, which it cannot have done here
 * (an unreadable block stops it).
 */
static void
unreadable (struct scrub *s, unsigned i, uint64_t mo, uint64_t len)
{
  struct volume *v = s->v;
  struct scrub_member *sm = &s->m[i];
  const struct member *m = &v->members[i];
  char reason[256];
  uint64_t logical;
  bool found = volume_member_logical (v, i, mo - m->data_offset, &logical);

  pthread_mutex_lock (&s->lock);
  sm->bad += len;
  if (!add_range (&sm->member_ranges, mo, len))
    s->truncated = true;
  /* A block lies in one chunk (chunks are multiples of 4 KiB, the same
   * in both layouts of a restripe).
   */
  if (found && !add_range (&s->logical, logical, len))
    s->truncated = true;
  snprintf (reason, sizeof reason,
            "scrub: %" PRIu64 " unreadable bytes in %u place%s, the first "
            "at member offset %" PRIu64,
            sm->bad, sm->member_ranges.nr,
            sm->member_ranges.nr == 1 ? "" : "s",
            sm->member_ranges.nr ? sm->member_ranges.r[0].offset : mo);
  pthread_mutex_unlock (&s->lock);
  stripe_warning ("scrub: member %u (%s): unreadable at member offset %" PRIu64
                  " (%" PRIu64 " bytes)",
                  i, m->path, mo, len);
  health_scrub_result (v->health, i, reason);
}

static bool
stopping (struct scrub *s)
{
  bool stop;

  pthread_mutex_lock (&s->lock);
  stop = s->cancel;
  pthread_mutex_unlock (&s->lock);
  return stop;
}

static void
sleep_ns (uint64_t ns)
{
  struct timespec ts = { ns / 1000000000, ns % 1000000000 };
  nanosleep (&ts, NULL);
}

/* Keep the mean at or below the rate; while clients are at work (a
 * request since the last read), a pause before each read.
 */
static void
pace (struct scrub *s, uint64_t *clients)
{
  uint64_t now, due, seen = health_requests_total (s->v->health);

  if (seen != *clients) {
    *clients = seen;
    for (unsigned t = 0; t < YIELD_MS / 100 && !stopping (s); ++t)
      sleep_ns (100000000);
  }
  if (s->rate == 0)
    return;
  due =
    s->t_start + (uint64_t) ((double) (s->read - s->skipped) / s->rate * 1e9);
  while ((now = now_ns ()) < due && !stopping (s))
    sleep_ns (due - now > 100000000 ? 100000000 : due - now);
}

/* Read [pos, pos + len) of member i (len <= PIECE) into buf; block by
 * block where the whole cannot be read.  False when the member cannot be
 * read at all any more (gone, failed): said in its status.
 */
static bool
read_piece (struct scrub *s, unsigned i, uint8_t *buf, uint64_t pos,
            uint64_t len)
{
  char why[256];
  ssize_t r = volume_member_read (s->v, i, buf, len, pos, why, sizeof why);

  if (r == (ssize_t) len)
    return true;
  if (r >= 0 || (errno != EIO && errno != EREMOTEIO && errno != ENOMEDIUM)) {
    if (r >= 0)
      snprintf (why, sizeof why, "short read at member offset %" PRIu64,
                pos + r);
    pthread_mutex_lock (&s->lock);
    snprintf (s->m[i].skipped, sizeof s->m[i].skipped,
              "not read from "
              "member offset %" PRIu64 ": %.200s",
              pos, why);
    pthread_mutex_unlock (&s->lock);
    stripe_warning ("scrub: member %u (%s): %s", i, s->v->members[i].path,
                    s->m[i].skipped);
    return false;
  }
  for (uint64_t b = 0; b < len; b += BLOCK) {
    uint64_t n = len - b < BLOCK ? len - b : BLOCK;
    int t;
    for (t = 0; t < READ_TRIES; ++t)
      if (volume_member_read (s->v, i, buf, n, pos + b, why, sizeof why)
          == (ssize_t) n)
        break;
    if (t == READ_TRIES)
      unreadable (s, i, pos + b, n);
  }
  return true;
}

/* [pos, pos + len) of member i, but what the allocation map calls free
 * (alloc.h: it holds nothing, a read there would only wear the device
 * and take the clients' time): *unused bytes of it.  False as
 * read_piece.
 */
static bool
read_used (struct scrub *s, unsigned i, uint8_t *buf, uint64_t pos,
           uint64_t len, uint64_t *unused)
{
  const uint64_t base = s->v->members[i].data_offset;

  *unused = 0;
  for (uint64_t at = pos; at < pos + len;) {
    bool used;
    uint64_t n = volume_member_run (s->v, i, at - base, pos + len - at,
                                    &used);
    if (!used)
      *unused += n;
    else if (!read_piece (s, i, buf, at, n))
      return false;
    at += n;
  }
  return true;
}

/* The same member offsets of every member in turn, a piece at a time:
 * every member's area is read alike, the load spread over them.
 */
static void *
scrubber (void *arg)
{
  struct scrub *s = arg;
  struct volume *v = s->v;
  uint8_t *buf = NULL;
  uint64_t rel = 0, longest = 0, clients, unused;
  /* Members that join after the start (a grow) are not read. */
  bool live[LAYOUT_MAX_MEMBERS] = { false };

  if (posix_memalign ((void **) &buf, 4096, PIECE) != 0) {
    pthread_mutex_lock (&s->lock);
    s->state = S_FAILED;
    snprintf (s->error, sizeof s->error, "out of memory");
    pthread_mutex_unlock (&s->lock);
    goto end;
  }
  for (unsigned i = 0; i < v->nr_members; ++i) {
    live[i] = true;
    if (s->m[i].end - s->m[i].start > longest)
      longest = s->m[i].end - s->m[i].start;
  }
  clients = health_requests_total (v->health);
  for (rel = 0; rel < longest && !stopping (s); rel += PIECE)
    for (unsigned i = 0; i < v->nr_members && !stopping (s); ++i) {
      struct scrub_member *sm = &s->m[i];
      uint64_t pos = sm->start + rel, len;

      if (!live[i] || pos >= sm->end)
        continue;
      len = sm->end - pos < PIECE ? sm->end - pos : PIECE;
      pace (s, &clients);
      live[i] = read_used (s, i, buf, pos, len, &unused);
      pthread_mutex_lock (&s->lock);
      sm->free_bytes += unused;
      s->free_bytes += unused;
      if (live[i])
        sm->done += len - unused;
      else {
        /* Not read any further: given up, said in "skipped". */
        sm->skipped_bytes += sm->end - pos;
        s->skipped += sm->end - pos;
      }
      s->read += live[i] ? len : sm->end - pos;
      pthread_mutex_unlock (&s->lock);
    }

end:
  free (buf);
  pthread_mutex_lock (&s->lock);
  if (s->state == S_RUNNING)
    s->state = s->cancel ? S_CANCELLED : S_DONE;
  if (s->state == S_CANCELLED && s->error[0] == '\0')
    snprintf (s->error, sizeof s->error, "cancelled");
  s->t_end = now_ns ();
  s->finished_unix = now_unix ();
  pthread_mutex_unlock (&s->lock);
  /* Read all of it, nothing found: an earlier scrub's finding goes. */
  if (s->state == S_DONE)
    for (unsigned i = 0; i < v->nr_members; ++i)
      if (s->m[i].bad == 0 && s->m[i].skipped[0] == '\0')
        health_scrub_result (v->health, i, NULL);
  stripe_log (s->state == S_DONE && s->logical.nr == 0 && s->skipped == 0
                ? LOG_NOTICE
                : LOG_WARNING,
              "scrub: %s: %" PRIu64 " bytes read, %" PRIu64 " free (not "
              "read), %" PRIu64 " not read, %u unreadable range%s",
              state_names[s->state],
              s->read - s->skipped - s->free_bytes, s->free_bytes,
              s->skipped, s->logical.nr, s->logical.nr == 1 ? "" : "s");
  return NULL;
}

static void
scrub_destroy (struct scrub *s)
{
  if (s == NULL)
    return;
  free (s->logical.r);
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    free (s->m[i].member_ranges.r);
  pthread_mutex_destroy (&s->lock);
  free (s);
}

/* The scrub under way, as jobs.h names it (a->scrub_lock held). */
static void
running_locked (struct array *a, struct jobs_running *r)
{
  struct scrub *s = a->scrub;

  if (s == NULL)
    return;
  pthread_mutex_lock (&s->lock);
  if (s->state == S_RUNNING) {
    char detail[128];
    snprintf (detail, sizeof detail,
              "%" PRIu64 "%% done; nbdstripe scrub --cancel stops it",
              s->total ? s->read * 100 / s->total : 100);
    jobs_add (r, JOB_SCRUB, false, "a scrub", detail);
  }
  pthread_mutex_unlock (&s->lock);
}

void
scrub_jobs (struct array *a, struct jobs_running *r)
{
  pthread_mutex_lock (&a->scrub_lock);
  running_locked (a, r);
  pthread_mutex_unlock (&a->scrub_lock);
}

int
scrub_start (struct array *a, const struct scrub_params *p, char *why,
             size_t len)
{
  struct volume *v = &a->volume;
  struct scrub *s, *old;
  int e;

  pthread_mutex_lock (&a->scrub_lock);
  old = a->scrub;
  {
    struct jobs_running r = { 0 };
    running_locked (a, &r);
    volume_mover_jobs (v, &r);
    if (job_may_start (JOB_SCRUB, &r, why, len) == -1) {
      pthread_mutex_unlock (&a->scrub_lock);
      return -1;
    }
  }
  s = calloc (1, sizeof *s);
  if (s == NULL) {
    pthread_mutex_unlock (&a->scrub_lock);
    snprintf (why, len, "%s", strerror (ENOMEM));
    return -1;
  }
  pthread_mutex_init (&s->lock, NULL);
  s->v = v;
  s->rate = p->rate;
  s->state = S_RUNNING;
  s->started_unix = now_unix ();
  s->t_start = now_ns ();
  for (unsigned i = 0; i < v->nr_members; ++i) {
    const struct member *m = &v->members[i];
    s->m[i].start = m->data_offset;
    s->m[i].end = m->need > m->data_offset && !(v->removed >> i & 1)
                    ? m->need
                    : m->data_offset; /* removed: nothing to read */
    s->total += s->m[i].end - s->m[i].start;
  }
  e = pthread_create (&s->thread, NULL, scrubber, s);
  if (e) {
    pthread_mutex_unlock (&a->scrub_lock);
    scrub_destroy (s);
    snprintf (why, len, "cannot start a thread: %s", strerror (e));
    return -1;
  }
  s->thread_started = true;
  a->scrub = s;
  pthread_mutex_unlock (&a->scrub_lock);
  if (old) {
    pthread_join (old->thread, NULL);
    scrub_destroy (old);
  }
  stripe_info ("scrub: started, %" PRIu64 " bytes of %u member%s%s", s->total,
               v->nr_members, v->nr_members == 1 ? "" : "s",
               p->rate ? " (rate-limited)" : "");
  return 0;
}

int
scrub_cancel (struct array *a, char *why, size_t len)
{
  struct scrub *s;
  int r = -1;

  pthread_mutex_lock (&a->scrub_lock);
  s = a->scrub;
  if (s) {
    pthread_mutex_lock (&s->lock);
    if (s->state == S_RUNNING) {
      s->cancel = true;
      r = 0;
    }
    pthread_mutex_unlock (&s->lock);
  }
  pthread_mutex_unlock (&a->scrub_lock);
  if (r == -1)
    snprintf (why, len, "no scrub is running");
  return r;
}

/* Ranges as [{KEY: offset, "length": n}, ...], sorted by offset (the
 * scrub walks every member in turn: logical ranges come interleaved),
 * touching ones merged.
 */
static int
cmp_range (const void *a, const void *b)
{
  const struct range *x = a, *y = b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static struct json_object *
ranges_json (const struct ranges *l, const char *key)
{
  struct json_object *a = json_object_new_array ();
  struct range *sorted = l->nr ? malloc (l->nr * sizeof *sorted) : NULL;
  unsigned n = 0;

  if (l->nr == 0 || sorted == NULL)
    return a;
  memcpy (sorted, l->r, l->nr * sizeof *sorted);
  qsort (sorted, l->nr, sizeof *sorted, cmp_range);
  for (unsigned k = 0; k < l->nr; ++k) {
    if (n > 0
        && sorted[n - 1].offset + sorted[n - 1].length == sorted[k].offset)
      sorted[n - 1].length += sorted[k].length;
    else
      sorted[n++] = sorted[k];
  }
  for (unsigned k = 0; k < n; ++k) {
    struct json_object *o = json_object_new_object ();
    json_put (o, key, json_u64 (sorted[k].offset));
    json_put (o, "length", json_u64 (sorted[k].length));
    json_object_array_add (a, o);
  }
  free (sorted);
  return a;
}

struct json_object *
scrub_status (struct array *a)
{
  struct volume *v = &a->volume;
  struct scrub *s;
  struct json_object *o, *members;
  double elapsed, rate;
  uint64_t bad = 0;

  pthread_mutex_lock (&a->scrub_lock);
  s = a->scrub;
  if (s == NULL) {
    pthread_mutex_unlock (&a->scrub_lock);
    return NULL;
  }
  pthread_mutex_lock (&s->lock);
  elapsed = ((s->t_end ? s->t_end : now_ns ()) - s->t_start) / 1e9;
  rate = elapsed > 0 ? s->read / elapsed : 0;
  o = json_object_new_object ();
  json_put (o, "state", json_text (state_names[s->state]));
  json_put (o, "rate_limit", json_u64 (s->rate));
  json_put (o, "started_unix", json_number (s->started_unix, "%.3f"));
  json_put (o, "finished_unix",
            s->t_end ? json_number (s->finished_unix, "%.3f") : NULL);
  json_put (o, "elapsed_seconds", json_number (elapsed, "%.3f"));
  json_put (o, "bytes_read",
            json_u64 (s->read - s->skipped - s->free_bytes));
  json_put (o, "bytes_skipped", json_u64 (s->skipped));
  json_put (o, "bytes_free", json_u64 (s->free_bytes));
  /* Progress: read, free or given up. */
  json_put (o, "bytes_done", json_u64 (s->read));
  json_put (o, "bytes_total", json_u64 (s->total));
  json_put (o, "rate", json_number (rate, "%.0f"));
  if (s->state == S_RUNNING && rate > 0)
    json_put (o, "eta_seconds",
              json_number ((s->total - s->read) / rate, "%.1f"));
  members = json_object_new_array ();
  for (unsigned i = 0; i < v->nr_members; ++i) {
    struct scrub_member *sm = &s->m[i];
    struct json_object *m = json_object_new_object ();
    json_put (m, "index", json_object_new_int64 (i));
    json_put (m, "path", json_text (v->members[i].path));
    json_put (m, "bytes_read", json_u64 (sm->done));
    json_put (m, "bytes_skipped", json_u64 (sm->skipped_bytes));
    json_put (m, "bytes_free", json_u64 (sm->free_bytes));
    json_put (m, "bytes_total", json_u64 (sm->end - sm->start));
    json_put (m, "unreadable_bytes", json_u64 (sm->bad));
    json_put (m, "unreadable",
              ranges_json (&sm->member_ranges, "member_offset"));
    json_put (m, "skipped", sm->skipped[0] ? json_text (sm->skipped) : NULL);
    json_object_array_add (members, m);
    bad += sm->bad;
  }
  json_put (o, "unreadable_bytes", json_u64 (bad));
  json_put (o, "unreadable", ranges_json (&s->logical, "offset"));
  json_put (o, "members", members);
  json_put (o, "truncated", json_object_new_boolean (s->truncated));
  json_put (o, "error", s->error[0] ? json_text (s->error) : NULL);
  pthread_mutex_unlock (&s->lock);
  pthread_mutex_unlock (&a->scrub_lock);
  return o;
}

void
scrub_stop (struct array *a)
{
  struct scrub *s;

  pthread_mutex_lock (&a->scrub_lock);
  s = a->scrub;
  if (s) {
    pthread_mutex_lock (&s->lock);
    if (s->state == S_RUNNING)
      s->cancel = true;
    pthread_mutex_unlock (&s->lock);
  }
  pthread_mutex_unlock (&a->scrub_lock);
  /* The thread takes no scrub_lock: joined without it. */
  if (s && s->thread_started) {
    pthread_join (s->thread, NULL);
    s->thread_started = false;
  }
}

void
scrub_free (struct array *a)
{
  scrub_stop (a);
  scrub_destroy (a->scrub);
  a->scrub = NULL;
}
