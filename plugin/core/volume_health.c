/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume's side of health (struct health_ops): members
 * re-probed, taken back, dropping out; the generation.  See
 * include/volume.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "health_record.h"
#include "identity.h"
#include "json.h"
#include "log.h"
#include "meta.h"
#include "util.h"
#include "volume.h"

/* Health's side: from its prober thread. */

/* A new generation on every member but skip (and failed ones): one
 * meta_update, which says what a crash half-way leaves.  With swap_lock
 * held: no replace switches a member under the writes (the I/O path
 * never takes it).
 */
static void
bump (struct volume *v, int skip, const char *cause)
{
  struct member *devs[LAYOUT_MAX_MEMBERS] = { NULL };
  char why[512];

  for (unsigned j = 0; j < v->nr_members; ++j)
    if ((int) j != skip && health_member_state (v->health, j) != MS_FAILED
        && !((v->removed | v->missing) >> j & 1))
      devs[j] = &v->members[j];
  if (meta_update (&v->meta, devs, cause, true, why, sizeof why) == -1)
    stripe_error ("volume '%s': a member did not record the generation "
                  "(%s): the next update leaves it behind",
                  v->meta.name, cause);
}

void
volume_bump_generation (struct volume *v, int skip, const char *why)
{
  uint64_t old;

  if (!meta_records_dropouts (&v->meta))
    return;
  pthread_mutex_lock (&v->swap_lock);
  old = meta_generation (&v->meta);
  bump (v, skip, why);
  pthread_mutex_unlock (&v->swap_lock);
  stripe_debug ("volume '%s': generation %" PRIu64 " -> %" PRIu64 " (%s)",
                v->meta.name, old, meta_generation (&v->meta), why);
}

/* Member i dropped out of a volume that goes on: bump the generation on
 * every member still in it, then (best effort, through the descriptor
 * still open: a member whose path was replaced is still reachable that
 * way) on member i, so that an older copy of any of them is told apart.
 * Formats that record no drop-out (meta.h) say why.
 */
void
volume_member_dropped (struct volume *v, unsigned i)
{
  struct member *m = &v->members[i];
  uint64_t old, events;
  char why[256], cause[64];
  bool reached = false;

  if (!meta_records_dropouts (&v->meta))
    return;
  snprintf (cause, sizeof cause, "member %u dropped out", i);
  pthread_mutex_lock (&v->swap_lock);
  /* The others say member i is behind from this generation on, until
   * it is written at it (below, or when it is taken back).  A crash in
   * the bump leaves members at G + 1 marking i behind beside members at
   * G: assembly takes the G + 1 record, the G members as they are, and
   * i as stale (marked) unless it was written at G + 1 below.
   */
  meta_dropped (&v->meta, i);
  old = meta_generation (&v->meta);
  bump (v, (int) i, cause);
  events = meta_generation (&v->meta);
  /* Not a file cut short: writing its record would extend it. */
  if (!member_cut_short (m)
      && meta_write_generation (&v->meta, i, m, events, why, sizeof why) == 0)
    reached = true;
  stripe_warning ("member %u (%s) dropped out of volume '%s': generation "
                  "%" PRIu64 " -> %" PRIu64 "%s",
                  i, m->path, v->meta.name, old, events,
                  reached ? " (on it too)"
                          : " (not on it: it is taken back at the old one)");
  pthread_mutex_unlock (&v->swap_lock);
}

int
volume_member_check (struct volume *v, unsigned i, char *why, size_t len)
{
  struct member *m = &v->members[i];
  int r;

  pthread_mutex_lock (&v->swap_lock);
  r = (v->removed | v->missing) >> i & 1 ? 0 : m->ops->check (m, why, len);
  pthread_mutex_unlock (&v->swap_lock);
  return r;
}

/* What a re-probe found, for adopt. */
struct fresh {
  struct member m; /* opened afresh on the member's name */
  uint64_t events; /* the generation its header holds now */
};

void
volume_member_discard (void *p)
{
  struct fresh *f = p;

  if (f == NULL)
    return;
  member_close (&f->m);
  free (f);
}

static int probe_ (struct volume *v, unsigned i, void **out, char *why,
                   size_t len);

/* Open member i afresh and prove it is the same member: the same inode
 * or device (without a header, or read-only), else its header and
 * generation; claim it if it is another file; read its first block from
 * the device; bring its header up to the volume's generation.  Under
 * swap_lock: a replace does not switch the member meanwhile (it waits for
 * the probe).
 */
int
volume_member_probe (struct volume *v, unsigned i, void **out, char *why,
                     size_t len)
{
  int r;

  pthread_mutex_lock (&v->swap_lock);
  if (v->removed >> i & 1) {
    *out = NULL;
    snprintf (why, len, "removed by a shrink");
    r = -1;
  }
  else
    r = probe_ (v, i, out, why, len);
  pthread_mutex_unlock (&v->swap_lock);
  return r;
}

static int
probe_ (struct volume *v, unsigned i, void **out, char *why, size_t len)
{
  struct member *m = &v->members[i];
  struct fresh *f = calloc (1, sizeof *f);
  char reason[384], a[256], b[256];
  uint8_t buf[META_PROBE_BYTES];
  bool same;
  ssize_t n;

  *out = NULL;
  if (f == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  if (member_open (&f->m, i, m->path, &m->params, reason, sizeof reason)
      == -1) {
    snprintf (why, len, "%s: %s", m->path, reason);
    goto err;
  }
  if (!member_same_kind (&f->m, m)) {
    snprintf (why, len, "%s is no longer a %s", m->path, member_what (m));
    goto err;
  }
  same = identity_same (&m->id, &f->m.id);
  if (!same && member_has_inode (m)
      && (!v->meta.ops->proves_identity || v->readonly)) {
    /* Nothing but the inode or device says which member this is. */
    snprintf (why, len, "another file: %s now names %s, the volume opened %s",
              m->path, identity_describe (&f->m.id, a, sizeof a),
              identity_describe (&m->id, b, sizeof b));
    goto err;
  }
  if (f->m.size < m->need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes, the volume needs %" PRIu64,
              m->path, f->m.size, m->need);
    goto err;
  }
  /* The device itself must answer. */
  n = member_pread (&f->m, buf, sizeof buf, 0, true, reason, sizeof reason);
  if (n != sizeof buf) {
    snprintf (why, len, "%s: reading the first %u bytes: %s", m->path,
              META_PROBE_BYTES, n == -1 ? reason : "short read");
    goto err;
  }
  if (meta_check_probed (&v->meta, i, m->path, buf, n, &f->events, why, len)
      == -1)
    goto err;
  if (!same && member_has_inode (m)) {
    /* Another file that proves to be this member (a device that came
     * back under another number, a remounted file system): it must not
     * be another member too, and it is claimed as the first was.
     */
    for (unsigned j = 0; j < v->nr_members; ++j) {
      char how[512];
      if (j != i && !(v->removed >> j & 1)
          && identity_alias (&v->members[j].id, &f->m.id, how, sizeof how)) {
        snprintf (why, len, "%s and member %u (%s) are %s", m->path, j,
                  v->members[j].path, how);
        goto err;
      }
    }
    if (member_claim (&f->m, reason, sizeof reason) == -1) {
      snprintf (why, len, "%s: %s", m->path, reason);
      goto err;
    }
  }
  /* Taken back: at the volume's generation, like the others. */
  if (meta_records_dropouts (&v->meta)) {
    uint64_t now = meta_generation (&v->meta);
    if (f->events != now) {
      struct member *w = same && member_has_inode (m) ? m : &f->m;
      if (meta_write_generation (&v->meta, i, w, now, reason, sizeof reason)
          == -1) {
        snprintf (why, len, "%s: %s", m->path, reason);
        goto err;
      }
      f->events = now;
    }
  }
  *out = f;
  return 0;

err:
  volume_member_discard (f);
  return -1;
}

void
volume_member_adopt (struct volume *v, unsigned i, void *p)
{
  struct member *m = &v->members[i];
  struct fresh *f = p;

  pthread_mutex_lock (&v->swap_lock);
  m->ops->adopt (m, &f->m);
  pthread_mutex_unlock (&v->swap_lock);
  meta_member_at (&v->meta, i, f->events);
  volume_member_discard (f);
}
