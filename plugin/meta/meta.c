/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what every metadata format shares at run time.  See
 * include/meta.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "assemble.h"
#include "header.h"
#include "log.h"
#include "md_super.h"
#include "member.h"
#include "meta.h"
#include "util.h"

int meta_debug_crash;
int meta_debug_log;

void
meta_written (unsigned i, const char *path, const char *what)
{
  static atomic_uint count;
  unsigned n = atomic_fetch_add (&count, 1) + 1;

  if (meta_debug_log)
    stripe_notice ("meta: header write %u: member %u (%s): %s", n, i, path,
                   what);
  if (meta_debug_crash > 0 && n == (unsigned) meta_debug_crash)
    raise (SIGKILL);
}

const struct meta_ops *
meta_ops_for (enum metadata_mode mode)
{
  switch (mode) {
  case METADATA_HEADER: return &meta_header_ops;
  case METADATA_MD: return &meta_md_ops;
  case METADATA_NONE: break;
  }
  return &meta_none_ops;
}

int
meta_init (struct meta *m, const struct assembly *a, unsigned nr,
           bool writable)
{
  memset (m, 0, sizeof *m);
  pthread_mutex_init (&m->lock, NULL);
  pthread_mutex_init (&m->update_lock, NULL);
  m->ops = a ? a->meta : &meta_none_ops;
  m->writable = writable;
  m->nr = nr;
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    m->slot[i] = i;
  if (a == NULL || a->members == NULL)
    return 0;
  m->events = a->events;
  memcpy (m->uuid, a->members[a->ref].array_uuid, 16);
  memcpy (m->name, a->members[a->ref].name, sizeof m->name);
  for (unsigned i = 0; i < nr; ++i) {
    memcpy (m->members[i].uuid, a->members[i].member_uuid, 16);
    m->members[i].events = a->events;
  }
  m->reshape = a->reshape;
  m->lost = a->lost;
  /* Members assembled one generation behind (a crash cut an update
   * short) are at the volume's from the next update on: not behind.
   */
  return m->ops->init ? m->ops->init (m, a) : 0;
}

void
meta_free (struct meta *m)
{
  free (m->state);
  m->state = NULL;
  pthread_mutex_destroy (&m->lock);
  pthread_mutex_destroy (&m->update_lock);
}

const char *
meta_uuid_shown (const struct meta *m, char out[META_UUID_SHOWN])
{
  out[0] = '\0';
  if (m->ops->uuid_shown)
    m->ops->uuid_shown (m->uuid, out);
  return out;
}

uint64_t
meta_generation (struct meta *m)
{
  uint64_t e;

  pthread_mutex_lock (&m->lock);
  e = m->events;
  pthread_mutex_unlock (&m->lock);
  return e;
}

struct meta_slot
meta_member_slot (struct meta *m, unsigned i)
{
  struct meta_slot s;

  pthread_mutex_lock (&m->lock);
  s = m->members[i];
  pthread_mutex_unlock (&m->lock);
  return s;
}

void
meta_member_at (struct meta *m, unsigned i, uint64_t events)
{
  pthread_mutex_lock (&m->lock);
  m->members[i].events = events;
  if (events >= m->events)
    m->behind &= ~(UINT64_C (1) << i);
  pthread_mutex_unlock (&m->lock);
}

void
meta_dropped (struct meta *m, unsigned i)
{
  pthread_mutex_lock (&m->lock);
  m->behind |= UINT64_C (1) << i;
  pthread_mutex_unlock (&m->lock);
}

bool
meta_lost_add (struct meta *m, uint64_t offset, uint64_t length, bool *merged)
{
  bool r;

  pthread_mutex_lock (&m->lock);
  r = lost_add (&m->lost, offset, length, merged);
  pthread_mutex_unlock (&m->lock);
  return r;
}

bool
meta_lost_remove (struct meta *m, uint64_t offset, uint64_t length)
{
  bool r;

  pthread_mutex_lock (&m->lock);
  r = lost_remove (&m->lost, offset, length);
  pthread_mutex_unlock (&m->lock);
  return r;
}

bool
meta_lost_touches (struct meta *m, uint64_t offset, uint64_t length)
{
  bool r;

  pthread_mutex_lock (&m->lock);
  r = lost_touches (&m->lost, offset, length);
  pthread_mutex_unlock (&m->lock);
  return r;
}

bool
meta_lost_truncate (struct meta *m, uint64_t size)
{
  bool r;

  pthread_mutex_lock (&m->lock);
  r = lost_truncate (&m->lost, size);
  pthread_mutex_unlock (&m->lock);
  return r;
}

void
meta_lost_get (struct meta *m, struct lost *out)
{
  pthread_mutex_lock (&m->lock);
  *out = m->lost;
  pthread_mutex_unlock (&m->lock);
}

int
meta_write_generation (struct meta *m, unsigned i, struct member *d,
                       uint64_t events, char *why, size_t len)
{
  struct meta_slot s = meta_member_slot (m, i);

  if (m->ops->write == NULL || s.removed)
    return 0;
  if (m->ops->write (m, i, d, s.uuid, events, 0, why, len) == -1)
    return -1;
  meta_member_at (m, i, events);
  return 0;
}

void
meta_random_uuid (uint8_t u[16])
{
  if (getrandom (u, 16, 0) != 16)
    for (int i = 0; i < 16; ++i)
      u[i] = (uint8_t) (now_ns () >> (i % 8 * 8)) ^ (uint8_t) rand ();
  u[6] = (u[6] & 0x0f) | 0x40; /* version 4 */
  u[8] = (u[8] & 0x3f) | 0x80; /* RFC 4122 variant */
}

int
meta_write_new (struct meta *m, unsigned i, struct member *d, uint8_t uuid[16],
                char *why, size_t len)
{
  meta_random_uuid (uuid);
  if (m->ops->write == NULL)
    return member_sync (d, why, len); /* no metadata: data only */
  return m->ops->write (m, i, d, uuid, meta_generation (m), 0, why, len);
}

void
meta_clear_new (struct meta *m, unsigned i, struct member *d, const char *path)
{
  char why[256];

  if (m->ops->clear && m->ops->clear (m, i, d, why, sizeof why) == -1)
    stripe_error ("replace: member %u: could not clear the metadata written "
                  "to %s (%s): it holds a copy of the member that the volume "
                  "did not switch to",
                  i, path, why);
}

int
meta_mark_replaced (struct meta *m, unsigned i, struct member *d,
                    const struct meta_slot *old, char *why, size_t len)
{
  if (m->ops->write == NULL) {
    snprintf (why, len, "metadata \"%s\": nothing on the member says what "
              "it is", m->ops->name);
    return -1;
  }
  return m->ops->write (m, i, d, old->uuid, old->events, META_MARK_REPLACED,
                       why, len);
}

int
meta_mark_removed (struct meta *m, unsigned i, struct member *d, char *why,
                   size_t len)
{
  struct meta_slot s = meta_member_slot (m, i);

  if (m->ops->write == NULL) {
    snprintf (why, len, "metadata \"%s\": nothing on the member says what "
              "it is", m->ops->name);
    return -1;
  }
  if (m->ops->write (m, i, d, s.uuid, s.events, META_MARK_REMOVED, why, len)
      == -1)
    return -1;
  pthread_mutex_lock (&m->lock);
  m->members[i].removed = true;
  pthread_mutex_unlock (&m->lock);
  return 0;
}

void
meta_set_reshape (struct meta *m, const struct meta_reshape *r)
{
  pthread_mutex_lock (&m->lock);
  m->reshape = *r;
  pthread_mutex_unlock (&m->lock);
}

bool
meta_reshape_recorded (struct meta *m)
{
  bool r;

  pthread_mutex_lock (&m->lock);
  r = m->reshape.active;
  pthread_mutex_unlock (&m->lock);
  return r;
}

void
meta_add_member (struct meta *m, unsigned i)
{
  uint8_t uuid[16];

  meta_random_uuid (uuid);
  pthread_mutex_lock (&m->lock);
  memcpy (m->members[i].uuid, uuid, 16);
  m->members[i].events = m->events;
  if (i >= m->nr)
    m->nr = i + 1;
  pthread_mutex_unlock (&m->lock);
}

/* What a crash between two of the writes below leaves: the members
 * written hold generation G + 1 and the update's state, the others G and
 * the state before it.  Assembly (assemble.c) reads the G + 1 record as
 * the volume and accepts the G ones as they are (their data is the
 * volume's: an update writes no data), unless the new record marks them
 * behind.  So each caller makes sure that its state before and after
 * the update both describe data that is on the members (a reshape's
 * data synced before its record, a replace's NEW holding the member
 * before the config names it), and nothing else is needed of it.
 */
int
meta_update (struct meta *m, struct member *const *devs, const char *what,
             bool keep_going, char *why, size_t len)
{
  uint64_t events;
  int ret = 0;

  if (m->ops->write == NULL)
    return 0;
  pthread_mutex_lock (&m->update_lock);
  pthread_mutex_lock (&m->lock);
  events = ++m->events;
  /* The members this update is written for: those written, and those
   * it is made without because they dropped out (behind).
   */
  m->roster = 0;
  for (unsigned i = 0; i < m->nr; ++i)
    if ((devs[i] != NULL || (m->behind >> i & 1)) && !m->members[i].removed)
      m->roster ^= meta_roster (m->members[i].uuid);
  pthread_mutex_unlock (&m->lock);
  if (meta_debug_log)
    stripe_notice ("meta: update '%s': generation %" PRIu64, what, events);
  for (unsigned i = m->nr; i-- > 0;) {
    struct meta_slot s = meta_member_slot (m, i);
    char reason[256];

    if (devs[i] == NULL || s.removed)
      continue;
    if (m->ops->write (m, i, devs[i], s.uuid, events, 0, reason,
                       sizeof reason)
        == -1) {
      snprintf (why, len, "member %u (%s): %s: %s", i, devs[i]->path, what,
                reason);
      if (!keep_going) {
        pthread_mutex_unlock (&m->update_lock);
        return -1;
      }
      stripe_error ("%s", why);
      ret = -1;
      continue;
    }
    meta_member_at (m, i, events);
  }
  if (meta_debug_log)
    stripe_notice ("meta: update '%s': generation %" PRIu64 " done", what,
                   events);
  pthread_mutex_unlock (&m->update_lock);
  return ret;
}

void
meta_end_reshape (struct meta *m, unsigned count, const uint64_t *sizes,
                  const uint8_t *slot)
{
  pthread_mutex_lock (&m->lock);
  memcpy (m->slot, slot, sizeof m->slot);
  m->reshape.active = false;
  if (m->ops->end_reshape)
    m->ops->end_reshape (m, count, sizes);
  pthread_mutex_unlock (&m->lock);
}

void
meta_switched (struct meta *m, unsigned i, const uint8_t uuid[16])
{
  pthread_mutex_lock (&m->lock);
  memcpy (m->members[i].uuid, uuid, 16);
  m->members[i].events = m->events;
  m->behind &= ~(UINT64_C (1) << i);
  pthread_mutex_unlock (&m->lock);
}

int
meta_check_probed (struct meta *m, unsigned i, const char *path,
                   const uint8_t *area, size_t n, uint64_t *events, char *why,
                   size_t len)
{
  if (m->ops->check_probed)
    return m->ops->check_probed (m, i, path, area, n, events, why, len);
  *events = meta_generation (m);
  return 0;
}

static const uint8_t md_magic[4] = { 0xfc, 0x4e, 0x2b, 0xa9 };

const char *
meta_recognise (const uint8_t *buf, size_t n, char *what, size_t len)
{
  if (n >= 8 && memcmp (buf, HEADER_MAGIC, 8) == 0) {
    snprintf (what, len, "holds an nbdstripe header");
    return what;
  }
  if ((n >= 4 && memcmp (buf, md_magic, 4) == 0)
      || (n >= HEADER_SIZE + 4 && memcmp (buf + HEADER_SIZE, md_magic, 4) == 0)) {
    snprintf (what, len, "holds an md superblock");
    return what;
  }
  return NULL;
}

bool
meta_unfinished_create (const uint8_t *buf, size_t n, const char *name)
{
  struct header sb;

  return n >= HEADER_SIZE && header_decode (buf, n, &sb, NULL) == HEADER_OK
         && (sb.flags & HEADER_FLAG_CREATING) && strcmp (sb.name, name) == 0;
}

bool
meta_unfinished_copy (const uint8_t *buf, size_t n, const uint8_t *member,
                      size_t mn, unsigned index)
{
  struct header a, b;

  return n >= HEADER_SIZE && mn >= HEADER_SIZE
         && header_decode (buf, n, &a, NULL) == HEADER_OK
         && header_decode (member, mn, &b, NULL) == HEADER_OK
         && memcmp (a.array_uuid, b.array_uuid, 16) == 0
         && memcmp (a.member_uuid, b.member_uuid, 16) != 0
         && a.member_index == index && b.member_index == index
         && !(a.flags & (HEADER_FLAG_REPLACED | HEADER_FLAG_REMOVED
                         | HEADER_FLAG_CREATING))
         && !(b.flags & (HEADER_FLAG_REPLACED | HEADER_FLAG_REMOVED));
}

uint32_t
meta_roster (const uint8_t member_uuid[16])
{
  return crc32c (0, member_uuid, 16);
}

bool
meta_copy_left (struct meta *m, const uint8_t *buf, size_t n)
{
  struct header h;
  bool r;

  if (m->ops != &meta_header_ops || n < HEADER_SIZE
      || header_decode (buf, n, &h, NULL) != HEADER_OK
      || (h.flags & (HEADER_FLAG_REPLACED | HEADER_FLAG_REMOVED
                     | HEADER_FLAG_CREATING)))
    return false;
  pthread_mutex_lock (&m->lock);
  r = memcmp (h.array_uuid, m->uuid, 16) == 0 && h.member_index < m->nr
      && memcmp (h.member_uuid, m->members[h.member_index].uuid, 16) != 0;
  pthread_mutex_unlock (&m->lock);
  return r;
}

const char *
meta_describe_header (const uint8_t *buf, size_t n, char *what, size_t len)
{
  struct header sb;
  char uuid[37];

  if (n < 8 || memcmp (buf, HEADER_MAGIC, 8) != 0)
    return NULL;
  if (header_decode (buf, n, &sb, NULL) != HEADER_OK) {
    snprintf (what, len, "holds an nbdstripe header (damaged)");
    return what;
  }
  header_uuid_format (sb.array_uuid, uuid);
  snprintf (what, len,
            "is already member %" PRIu32 " of nbdstripe volume '%s' (%s)",
            sb.member_index, sb.name, uuid);
  return what;
}

bool
meta_md_tail (const uint8_t *buf, size_t n)
{
  return n >= MD_SUPER_BYTES && memcmp (buf, md_magic, 4) == 0;
}

bool
meta_md_tail_location (uint64_t size, uint64_t *at)
{
  return md_super_location (0, size, at);
}
