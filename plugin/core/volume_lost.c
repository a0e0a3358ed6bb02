/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the volume's lost ranges.  See include/volume.h (and
 * lost.h for the list itself, meta.h for where it is kept).
 */

#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "health_record.h"
#include "json.h"
#include "log.h"
#include "lost.h"
#include "meta.h"
#include "volume.h"
#include "volume_lost.h"

static void
publish (struct volume *v)
{
  struct lost l;

  meta_lost_get (&v->meta, &l);
  atomic_store (&v->lost_nr, l.nr);
}

void
volume_lost_init (struct volume *v)
{
  publish (v);
}

void
volume_lost_add (struct volume *v, uint64_t offset, uint64_t length)
{
  bool merged;

  if (meta_lost_add (&v->meta, offset, length, &merged) && merged)
    stripe_warning ("volume '%s': the list of lost ranges is full (%u "
                    "ranges): the two closest were merged, the bytes "
                    "between them included (reads there fail too)",
                    v->meta.name, LOST_MAX);
  publish (v);
}

/* Every member that can take a record: not failed, not removed. */
static void
recordable (struct volume *v, struct member **devs)
{
  for (unsigned i = 0; i < LAYOUT_MAX_MEMBERS; ++i)
    devs[i] = NULL;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (!(v->removed >> i & 1)
        && (v->health == NULL
            || health_member_state (v->health, i) != MS_FAILED))
      devs[i] = &v->members[i];
}

void
volume_lost_truncate (struct volume *v, uint64_t size)
{
  meta_lost_truncate (&v->meta, size);
  publish (v);
}

int
volume_lost_record (struct volume *v, const char *what, char *why, size_t len)
{
  struct member *devs[LAYOUT_MAX_MEMBERS];

  if (!v->meta.ops->keeps_lost || !meta_on_members (&v->meta)) {
    snprintf (why, len, "metadata \"%s\" keeps no list of lost ranges",
              meta_format (&v->meta));
    return -1;
  }
  recordable (v, devs);
  /* A crash between two header writes: members at G + 1 with the new
   * list beside members at G with the old.  Assembly takes the newest
   * (G + 1), so the list is the one this update made: a range added
   * was lost before it was recorded (its reads were already failing in
   * the server), a range removed was written over and flushed first.
   */
  return meta_update (&v->meta, devs, what, false, why, len);
}

bool
volume_lost_touches (struct volume *v, uint64_t offset, uint64_t length)
{
  return atomic_load (&v->lost_nr) != 0
         && meta_lost_touches (&v->meta, offset, length);
}

int
volume_lost_covered (struct volume *v, uint64_t offset, uint64_t length)
{
  char why[512];

  if (!meta_lost_remove (&v->meta, offset, length))
    return 0;
  publish (v);
  if (volume_lost_record (v, "lost ranges written over", why, sizeof why)
      == -1) {
    /* In memory the range is no longer lost (its data is there), but the
     * members still say it is: the client is told its write failed.
     */
    stripe_error ("volume '%s': a write over lost range(s) at %" PRIu64
                  " is durable, but the list without them is not: %s",
                  v->meta.name, offset, why);
    errno = EIO;
    return -1;
  }
  return 0;
}

bool
volume_lost_on_member (struct volume *v, unsigned i, uint64_t offset,
                       uint64_t length)
{
  const struct layout *l = &v->layout;
  const struct member *m = &v->members[i];
  uint64_t end = offset + length;

  if (atomic_load (&v->lost_nr) == 0)
    return false;
  if (offset < m->data_offset)
    offset = m->data_offset;
  /* A chunk at a time: the logical bytes of a member chunk are
   * contiguous.
   */
  while (offset < end) {
    uint64_t rel = offset - m->data_offset, logical;
    uint64_t n = l->chunk - rel % l->chunk;
    unsigned j;

    if (n > end - offset)
      n = end - offset;
    for (j = 0; j < l->nr_members && v->map[j] != i; ++j)
      ;
    if (j == l->nr_members || !layout_unmap (l, j, rel, &logical))
      return false;
    if (meta_lost_touches (&v->meta, logical, n))
      return true;
    offset += n;
  }
  return false;
}

struct json_object *
volume_lost_json (struct volume *v)
{
  struct json_object *o = json_object_new_object (), *a;
  struct lost l;

  meta_lost_get (&v->meta, &l);
  a = json_object_new_array ();
  for (unsigned k = 0; k < l.nr; ++k) {
    struct json_object *r = json_object_new_object ();
    json_put (r, "offset", json_u64 (l.r[k].offset));
    json_put (r, "length", json_u64 (l.r[k].length));
    json_object_array_add (a, r);
  }
  json_put (o, "ranges", a);
  json_put (o, "bytes", json_u64 (lost_bytes (&l)));
  return o;
}
