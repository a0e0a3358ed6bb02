/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: Linux md v1.x superblocks as a metadata format
 * (include/meta.h).
 *
 * Each member is read where the three v1 versions keep their superblock
 * (1.2 at 4 KiB, 1.1 at 0, 1.0 near the end), through a member opened raw
 * and read-only.  The checks are md's and mdadm's own, plus what
 * nbdstripe must refuse to stay exact (md_super_raid0_servable).
 *
 * nbdstripe writes an md superblock only where md itself would change
 * one: create (what mdadm --create writes), a replace's NEW (the old
 * member's superblock under a new device UUID) and the replaced member
 * (its role faulty).  It records no drop-out: md raid0 itself records
 * none -- a raid0 that loses a member is broken, not degraded, and md
 * leaves the superblocks as they were -- and a higher event count on the
 * other members would make mdadm refuse, as stale, a member that md
 * itself would take back.  So an older copy of an md member is not told
 * apart by its event count; the same inode or device is what a re-probe
 * checks.
 */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "assemble.h"
#include "config.h"
#include "header.h"
#include "identity.h"
#include "log.h"
#include "md_super.h"
#include "member.h"
#include "meta.h"
#include "util.h"

/* Why a member has no md superblock, in words a user can act on. */
static void
explain_none (const uint8_t *first, size_t nfirst, struct member *d,
              char *why, size_t len)
{
  struct header hdr;
  uint8_t buf[MD_SUPER_BYTES];
  char err[256];
  uint64_t at;
  ssize_t n;

  if (header_decode (first, nfirst, &hdr, NULL) == HEADER_OK) {
    snprintf (why, len,
              "holds an nbdstripe header (volume '%s'), not an md "
              "superblock: the config wants metadata = \"header\"",
              hdr.name);
    return;
  }
  /* 0.90 keeps its superblock in the last 64 KiB-aligned 64 KiB. */
  if (d->size >= 128 * 1024) {
    at = (d->size & ~(uint64_t) 0xffff) - 0x10000;
    n = member_pread (d, buf, sizeof buf, at, false, err, sizeof err);
    if (n >= 8 && buf[0] == 0xfc && buf[1] == 0x4e && buf[2] == 0x2b
        && buf[3] == 0xa9 && buf[4] == 0 && buf[5] == 0 && buf[6] == 0
        && buf[7] == 0) {
      snprintf (why, len,
                "holds an md 0.90 superblock: only md metadata 1.0, 1.1 "
                "and 1.2 are read (mdadm --assemble --update=metadata "
                "converts it)");
      return;
    }
  }
  snprintf (why, len,
            "no md superblock (none of version 1.0, 1.1 or 1.2): not a "
            "member of an md array, or a blank one");
}

/* The newest valid md superblock of d (opened), and where it is. */
static int
md_read (struct member *d, struct md_super *out, uint64_t *at_out, char *why,
         size_t len)
{
  uint8_t first[MD_SUPER_BYTES], buf[MD_SUPER_BYTES];
  struct md_super *sb = malloc (sizeof *sb);
  ssize_t nfirst = 0;
  unsigned found = 0;
  char err[256], invalid[256] = "";
  /* Where mdadm looks when not told: 1.2, 1.1, 1.0. */
  static const unsigned minors[] = { 2, 1, 0 };

  if (sb == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  for (size_t k = 0; k < sizeof minors / sizeof minors[0]; ++k) {
    const char *field = NULL;
    enum md_super_error e;
    uint64_t at;
    ssize_t n;

    if (!md_super_location (minors[k], d->size, &at))
      continue;
    n = member_pread (d, buf, sizeof buf, at, false, err, sizeof err);
    if (n == -1) {
      snprintf (why, len, "reading at %" PRIu64 ": %s", at, err);
      goto fail;
    }
    if (at == 0) {
      memcpy (first, buf, n);
      nfirst = n;
    }
    e = md_super_decode (buf, n, at, sb, &field);
    if (e == MD_SUPER_ERR_MAGIC || e == MD_SUPER_ERR_TRUNCATED)
      continue;
    if (e != MD_SUPER_OK) {
      /* Not a superblock of this version: mdadm, not told the version,
       * keeps only valid ones -- data that looks like one (a copy, an
       * old one) must not hide the real one.  Said only if none is.
       */
      if (invalid[0] == '\0')
        snprintf (invalid, sizeof invalid,
                  "md superblock 1.%u at byte %" PRIu64 ": %s%s%s", minors[k],
                  at, md_super_strerror (e), field ? ": field " : "",
                  field ? field : "");
      continue;
    }
    /* Two valid superblocks: mdadm takes the newer (ctime). */
    if (found == 0
        || md_super_seconds (sb->ctime) > md_super_seconds (out->ctime)) {
      *out = *sb;
      if (at_out)
        *at_out = at;
    }
    found++;
  }
  if (found == 0 && invalid[0]) {
    snprintf (why, len, "%s", invalid);
    goto fail;
  }
  if (found == 0) {
    if (nfirst == 0)
      nfirst = member_pread (d, first, sizeof first, 0, false, err,
                             sizeof err);
    explain_none (first, nfirst > 0 ? nfirst : 0, d, why, len);
    goto fail;
  }
  if (found > 1)
    stripe_debug ("%s: %u md superblocks: version 1.%u, the newest, is used",
                  d->path, found, out->minor);
  free (sb);
  return 0;

fail:
  free (sb);
  return -1;
}

int
md_read_member (const char *path, struct md_super *out, uint64_t *at,
                struct identity *id, uint64_t *size, char *why, size_t len)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  struct member d;
  int r;

  if (member_open (&d, 0, path, &params, why, len) == -1)
    return -1;
  if (size)
    *size = d.size;
  if (id)
    *id = d.id;
  r = md_read (&d, out, at, why, len);
  member_close (&d);
  return r;
}


static const struct md_super *
rec_as_md_super (const struct meta_member *mm)
{
  return mm->rec;
}

static void
md_uuid_shown (const uint8_t uuid[16], char out[META_UUID_SHOWN])
{
  md_super_uuid_format (uuid, out);
}

static int
md_load (struct member *d, struct meta_member *mm, char *why, size_t len)
{
  struct md_super *sb = malloc (sizeof *sb);
  char reason[512];

  if (sb == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  if (md_read (d, sb, NULL, why, len) == -1)
    goto err;
  if (!md_super_raid0_servable (sb, reason, sizeof reason)) {
    snprintf (why, len, "md superblock 1.%u: %s", sb->minor, reason);
    goto err;
  }
  memcpy (mm->array_uuid, sb->set_uuid, 16);
  memcpy (mm->member_uuid, sb->device_uuid, 16);
  md_super_name_shown (sb, mm->name);
  mm->slot = md_super_role (sb);
  mm->count = sb->raid_disks;
  mm->events = sb->events;
  mm->data_offset = sb->data_offset * 512;
  mm->data_size = sb->data_size * 512;
  mm->rec = sb;
  return 0;

err:
  free (sb);
  return -1;
}

static bool
md_check_array (const struct stripe_config *cfg, const struct meta_member *ref,
                char *why, size_t len)
{
  const struct md_super *r = rec_as_md_super (ref);
  bool ok = true;
  char uuid[36];

  md_super_uuid_format (r->set_uuid, uuid);
  if (cfg->uuid_given && memcmp (cfg->uuid, r->set_uuid, 16) != 0) {
    char want[36];
    md_super_uuid_format (cfg->uuid, want);
    why_line (why, len, "%s: uuid: the config says %s, the members belong to md "
                  "array '%s' (%s): not the array this config describes",
                  cfg->path, want, ref->name, uuid);
    ok = false;
  }
  if (r->raid_disks != cfg->nr_members) {
    why_line (why, len, "%s: md array '%s' (%s) has %" PRIu32 " members, the "
                  "config lists %u",
                  cfg->path, ref->name, uuid, r->raid_disks, cfg->nr_members);
    ok = false;
  }
  if ((uint64_t) r->chunk_sectors * 512 != cfg->chunk) {
    why_line (why, len, "%s: chunk: the config says %" PRIu64 ", the md "
                  "superblocks say %" PRIu64,
                  cfg->path, cfg->chunk, (uint64_t) r->chunk_sectors * 512);
    ok = false;
  }
  return ok;
}

static enum meta_verdict
md_check_member (const struct stripe_config *cfg, unsigned i,
                 const struct meta_member *ref, const struct meta_member *mm,
                 uint64_t size, char *why, size_t len)
{
  const struct md_super *r = rec_as_md_super (ref), *sb = rec_as_md_super (mm);
  enum meta_verdict v = META_OK;

  /* What mdadm compares (compare_super1) and the kernel relies on. */
  if (sb->minor != r->minor || sb->level != r->level
      || sb->chunk_sectors != r->chunk_sectors
      || sb->raid_disks != r->raid_disks || sb->ctime != r->ctime
      || sb->feature_map != r->feature_map
      || md_super_raid0_layout (sb) != md_super_raid0_layout (r)) {
    why_line (why, len, "member %u (%s): md superblock disagrees with the other "
                  "members (version, level, chunk, members, creation time "
                  "or layout): mdadm would not assemble it either",
                  i, cfg->members[i]);
    v = META_BAD;
  }
  if (cfg->data_offset_given && sb->data_offset * 512 != cfg->data_offset) {
    why_line (why, len, "member %u (%s): data_offset: the config says %" PRIu64
                  ", its md superblock says %" PRIu64,
                  i, cfg->members[i], cfg->data_offset, sb->data_offset * 512);
    v = META_BAD;
  }
  /* The superblock's area must hold the data it says, whole. */
  if (size / 512 < sb->data_offset + sb->data_size
      || (sb->minor == 0 && sb->super_offset < sb->data_offset + sb->data_size)) {
    why_line (why, len, "member %u (%s): %" PRIu64 " bytes, smaller than its md "
                  "superblock says (%" PRIu64 " data bytes from offset "
                  "%" PRIu64 "): truncated or replaced?",
                  i, cfg->members[i], size, sb->data_size * 512,
                  sb->data_offset * 512);
    v = META_BAD;
  }
  return v;
}

/* md itself takes a member one event behind and brings it up to date;
 * nbdstripe writes no superblock for that, so it takes none behind:
 * mdadm --assemble first, or the member is stale.
 */
static void
md_say_stale (const struct stripe_config *cfg, unsigned i,
              const struct meta_member *mm, uint64_t newest, char *why,
              size_t len)
{
  why_line (why, len, "member %u (%s): stale: its md superblock is at event "
                "count %" PRIu64 ", the array is at %" PRIu64 " (let "
                "md assemble the array once to bring it up to date, or "
                "it is an older copy of the member)",
                i, cfg->members[i], mm->events, newest);
}

/* The layout: the superblocks say it (feature 0x1000), or nothing
 * depends on it, or the config must.
 */
static int
md_finish (const struct stripe_config *cfg, struct assembly *a, char *why,
           size_t len)
{
  const struct meta_member *ref = &a->members[a->ref];
  const struct md_super *r = rec_as_md_super (ref);
  const unsigned n = cfg->nr_members;
  uint64_t sizes[LAYOUT_MAX_MEMBERS];
  char uuid[36];

  for (unsigned i = 0; i < n; ++i)
    sizes[i] = a->members[i].data_size;
  a->layout = md_super_raid0_layout (r);
  if (a->layout != 0) {
    if (cfg->layout_given && cfg->layout != a->layout) {
      why_line (why, len, "%s: layout: the config says \"%s\", the md superblocks "
                    "say \"%s\"",
                    cfg->path, layout_name (cfg->layout),
                    layout_name (a->layout));
      return -1;
    }
  }
  else if (cfg->layout_given || layout_md_layouts_agree (cfg->chunk, n, sizes))
    a->layout = cfg->layout;
  else {
    md_super_uuid_format (r->set_uuid, uuid);
    why_line (why, len, "%s: md array '%s' (%s) has members of different sizes "
                  "and its superblocks do not say which of md's two "
                  "layouts it was written with, which place data "
                  "differently here: give layout = \"original\" (Linux "
                  "before 3.14, or raid0.default_layout=1) or "
                  "layout = \"alternate\" (Linux 3.14 to 5.3, or "
                  "raid0.default_layout=2) in the config",
                  cfg->path, ref->name, uuid);
    return -1;
  }
  a->size_rule = LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < n; ++i) {
    a->data_offsets[i] = a->members[i].data_offset;
    a->data_sizes[i] = sizes[i];
  }
  return 0;
}

/* What the md v1.x superblocks of the other members say of a missing
 * one (struct mdp_superblock_1, <linux/raid/md_p.h>):
 *
 * - its role: raid_disks (the config's count, md_check_array), and
 *   every other member's role its index in the config (check_member):
 *   the missing member's role is its own index.  Known.
 * - its data area: data_offset and data_size are fields of one
 *   device's own superblock ("sectors in this device that can be used
 *   for data"); no superblock holds another member's.  md raid0 places
 *   data by each member's data_size rounded down to whole chunks
 *   (raid0.c create_strip_zones: rdev->sectors, which super_1_load
 *   takes from data_size): the zones' extents and the array's size
 *   (raid0_size, computed, never stored: v1 has no array-size field)
 *   depend on the missing member's.
 * - the one array-wide size, size ("used size of component devices"):
 *   mdadm --create writes 0 for raid0 (Create.c: a size "is meaningful"
 *   only for level > 0), and so does nbdstripe create.  Once Linux md
 *   has run the array it holds mddev->dev_sectors, which
 *   bind_rdev_to_array lowers to any member's data size below it: at
 *   most the smallest member's -- a lower bound, not a size.  Even
 *   when every member read holds more, the missing one is not thereby
 *   the smallest: an array taken over from raid10 keeps raid10's
 *   component size, which may be below every member's data size.
 *
 * So no md raid0 member's data size is recorded anywhere but on the
 * member, and a missing member's place is never fixed: the volume is
 * not served degraded (header, which records every member's size, is).
 */
static bool
md_places_missing (const struct stripe_config *cfg, const struct assembly *a,
                   unsigned i, char *why, size_t len)
{
  const struct md_super *r = rec_as_md_super (&a->members[a->ref]);

  if (r->size == 0)
    why_line (why, len,
              "member %u (%s): an md superblock records a member's data "
              "size (data_size) only on that member, and the others' "
              "component size is 0 (as mdadm --create and nbdstripe "
              "create write it for raid0): its size, on which md raid0's "
              "zones and the array's size depend, is recorded nowhere "
              "else, so the array cannot be served degraded without it",
              i, cfg->members[i]);
  else
    why_line (why, len,
              "member %u (%s): an md superblock records a member's data "
              "size (data_size) only on that member, and the others' "
              "component size (%" PRIu64 " sectors, at most the smallest "
              "member's data size, as Linux md records it) says only that "
              "it holds at least that much: its size, on which md raid0's "
              "zones and the array's size depend, is recorded nowhere "
              "else, so the array cannot be served degraded without it",
              i, cfg->members[i], r->size);
  return false;
}

static int
md_create_check (const struct stripe_config *cfg, char *why, size_t len)
{
  if (strlen (cfg->name) > 32) {
    snprintf (why, len, "name: '%s' is %zu characters; an md superblock "
              "keeps at most 32",
              cfg->name, strlen (cfg->name));
    return -1;
  }
  return 0;
}

struct md_create {
  struct md_super sb;
  uint64_t data_offset; /* bytes */
};

/* What mdadm --create --level=0 --metadata=1.2 writes, but no bad-block
 * log (raid0 never uses one) and the layout said always where the
 * members make more than one zone (feature 0x1000).
 */
static void *
md_create_array (const struct stripe_config *cfg, const struct layout *l,
                 const uint8_t uuid[16], uint64_t now)
{
  struct md_create *c = calloc (1, sizeof *c);
  struct md_super *md;
  const unsigned n = l->nr_members;

  if (c == NULL)
    return NULL;
  md = &c->sb;
  c->data_offset = cfg->data_offset;
  memcpy (md->set_uuid, uuid, 16);
  snprintf (md->set_name, sizeof md->set_name, "%s", cfg->name);
  md->ctime = md->utime = now;
  md->level = 0;
  md->layout = cfg->layout;
  if (l->nr_zones > 1)
    md->feature_map = MD_FEATURE_RAID0_LAYOUT;
  md->chunk_sectors = cfg->chunk / 512;
  md->raid_disks = n;
  md->super_offset = HEADER_SIZE / 512;
  md->resync_offset = UINT64_MAX;
  md->max_dev = 128;
  while (md->max_dev < n)
    md->max_dev += 256;
  for (unsigned i = 0; i < md->max_dev; ++i)
    md->dev_roles[i] = i < n ? i : MD_ROLE_SPARE;
  return c;
}

static void
md_create_member (void *array, unsigned i, uint64_t member_size,
                  uint8_t *area, unsigned *blocks, uint8_t id[16])
{
  struct md_create *c = array;
  struct md_super *md = &c->sb;

  md->dev_number = i;
  meta_random_uuid (md->device_uuid);
  md->data_offset = c->data_offset / 512;
  md->data_size = (member_size - c->data_offset) / 512;
  md_super_encode (md, area + HEADER_SIZE);
  *blocks |= 2;
  memcpy (id, md->device_uuid, 16);
}

static bool
md_read_back (const uint8_t *area, uint8_t id[16])
{
  struct md_super *sb = malloc (sizeof *sb);
  bool ok;

  if (sb == NULL)
    return false;
  ok = md_super_decode (area + HEADER_SIZE, HEADER_SIZE, HEADER_SIZE, sb, NULL)
       == MD_SUPER_OK;
  if (ok)
    memcpy (id, sb->device_uuid, 16);
  free (sb);
  return ok;
}

static int
md_describe_created (const struct stripe_config *cfg, const struct layout *l,
                     const char *uuid, const char *size, char *out,
                     size_t len)
{
  return snprintf (out, len,
                   "created md raid0 array '%s' (UUID %s, md metadata 1.2): "
                   "%u member%s, chunk %" PRIu64 ", layout %s, data offset "
                   "%" PRIu64 ", %s (%" PRIu64 " bytes)",
                   cfg->name, uuid, l->nr_members,
                   l->nr_members == 1 ? "" : "s", cfg->chunk,
                   layout_name (cfg->layout), cfg->data_offset, size, l->size);
}

/* Each member's superblock as assembled. */
static int
md_init (struct meta *m, const struct assembly *a)
{
  struct md_super *sb = malloc (m->nr * sizeof *sb);

  if (sb == NULL)
    return -1;
  for (unsigned i = 0; i < m->nr; ++i)
    sb[i] = *rec_as_md_super (&a->members[i]);
  m->state = sb;
  return 0;
}

/* Where member i's superblock goes on d: where it was, but a 1.0 one
 * near d's own end.
 */
static int
md_where (const struct md_super *sb, const struct member *d, uint64_t *at,
          char *why, size_t len)
{
  *at = sb->super_offset * 512;
  if (sb->minor == 0 && !md_super_location (0, d->size, at)) {
    snprintf (why, len, "too small for an md superblock");
    return -1;
  }
  return 0;
}

/* A NEW gets member i's superblock under its own device UUID; a
 * replaced member its own with its role faulty.  md's event count is
 * md's (see the top): events is not written.
 */
static int
md_write (struct meta *m, unsigned i, struct member *d, const uint8_t uuid[16],
          uint64_t events, unsigned mark, char *why, size_t len)
{
  const struct md_super *state = m->state;
  struct md_super *sb = malloc (sizeof *sb);
  uint8_t *buf = malloc (MD_SUPER_BYTES);
  uint64_t at;
  int ret = -1;

  (void) events;
  if (sb == NULL || buf == NULL) {
    snprintf (why, len, "out of memory");
    goto out;
  }
  *sb = state[i];
  sb->utime = (uint64_t) time (NULL);
  if (mark) { /* replaced (removed: md's shrink is refused) */
    at = sb->super_offset * 512;
    if (sb->dev_number < sb->max_dev)
      sb->dev_roles[sb->dev_number] = MD_ROLE_FAULTY;
  }
  else {
    memcpy (sb->device_uuid, uuid, 16);
    if (md_where (sb, d, &at, why, len) == -1)
      goto out;
    sb->super_offset = at / 512;
  }
  md_super_encode (sb, buf);
  if (member_pwrite (d, buf, MD_SUPER_BYTES, at, why, len) == 0
      && member_sync (d, why, len) == 0)
    ret = 0;
out:
  free (sb);
  free (buf);
  return ret;
}

static int
md_clear (struct meta *m, unsigned i, struct member *d, char *why, size_t len)
{
  static const uint8_t zeros[MD_SUPER_BYTES] __attribute__ ((aligned (4096)));
  const struct md_super *state = m->state;
  uint64_t at;

  if (md_where (&state[i], d, &at, why, len) == -1)
    return 0; /* nothing was written there */
  if (member_pwrite (d, zeros, MD_SUPER_BYTES, at, why, len) == -1
      || member_sync (d, why, len) == -1)
    return -1;
  return 0;
}

/* 1.0 keeps its superblock past the data, near the end. */
static int
md_fits (const struct meta *m, unsigned i, uint64_t size, uint64_t need,
         char *why, size_t len)
{
  const struct md_super *state = m->state;
  uint64_t at;

  if (state[i].minor == 0
      && (!md_super_location (0, size, &at) || at < need)) {
    snprintf (why, len, "%" PRIu64 " bytes: too small for member %u's data "
              "(%" PRIu64 " bytes) and its md 1.0 superblock after it",
              size, i, need);
    return -1;
  }
  return 0;
}

const struct meta_ops meta_md_ops = {
  .name              = "md",
  .words             = {
    .record  = "md superblock",
    .uuid    = "device UUID",
    .other   = "md array",
    .array   = "md array",
    .slot    = "role",
    .is_slot = "has role",
    .slot_in = "in md array",
    .nothing = "an md superblock nbdstripe can serve from",
  },
  .records_dropouts  = false,
  .dropouts_why      = "md's event counts are md's: mdadm --assemble brings "
                       "a member one event behind up to date",
  .proves_identity   = false,
  .no_reshape        = "md raid0 has no reshape of its own (md grows a raid0 "
                       "only through a RAID-4 takeover and cannot remove a "
                       "member): a half-done nbdstripe reshape would leave md "
                       "superblocks md assembles into wrong data; copy the "
                       "data to a new volume instead",
  .load              = md_load,
  .uuid_shown        = md_uuid_shown,
  .check_array       = md_check_array,
  .check_member      = md_check_member,
  .say_stale         = md_say_stale,
  .finish            = md_finish,
  .places_missing    = md_places_missing,
  .create_check      = md_create_check,
  .create_array      = md_create_array,
  .create_member     = md_create_member,
  .read_back         = md_read_back,
  .describe_created  = md_describe_created,
  .init              = md_init,
  .write             = md_write,
  .clear             = md_clear,
  .fits              = md_fits,
};
