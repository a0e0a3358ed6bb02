/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: assembling a volume from Linux md v1.x superblocks.  See
 * include/assemble.h.
 *
 * Each member is read where the three v1 versions keep their superblock
 * (1.2 at 4 KiB, 1.1 at 0, 1.0 near the end), through a member opened raw
 * and read-only: nothing is written, to the superblocks least of all (md
 * would see them changed).  The checks are md's and mdadm's own, plus what
 * nbdstripe must refuse to stay exact (md_super_raid0_servable).
 */

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "header.h"
#include "identity.h"
#include "log.h"
#include "md_super.h"
#include "member.h"

struct md_probe {
  bool opened;
  bool readable; /* a superblock nbdstripe can serve from */
  uint64_t size;
  uint64_t at; /* where it was found */
  struct identity id;
  struct md_super sb;
};

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

int
md_read_member (const char *path, struct md_super *out, uint64_t *at_out,
                struct identity *id, uint64_t *size, char *why, size_t len)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  uint8_t first[MD_SUPER_BYTES], buf[MD_SUPER_BYTES];
  struct md_super *sb = malloc (sizeof *sb);
  struct member d;
  ssize_t nfirst = 0;
  unsigned found = 0;
  char err[256], invalid[256] = "";
  /* Where mdadm looks when not told: 1.2, 1.1, 1.0. */
  static const unsigned minors[] = { 2, 1, 0 };

  if (sb == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  if (member_open (&d, 0, path, &params, why, len) == -1) {
    free (sb);
    return -1;
  }
  if (size)
    *size = d.size;
  if (id)
    *id = d.id;
  for (size_t k = 0; k < sizeof minors / sizeof minors[0]; ++k) {
    const char *field = NULL;
    enum md_super_error e;
    uint64_t at;
    ssize_t n;

    if (!md_super_location (minors[k], d.size, &at))
      continue;
    n = member_pread (&d, buf, sizeof buf, at, false, err, sizeof err);
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
      nfirst = member_pread (&d, first, sizeof first, 0, false, err,
                             sizeof err);
    explain_none (first, nfirst > 0 ? nfirst : 0, &d, why, len);
    goto fail;
  }
  if (found > 1)
    stripe_debug ("%s: %u md superblocks: version 1.%u, the newest, is used",
                  path, found, out->minor);
  member_close (&d);
  free (sb);
  return 0;

fail:
  member_close (&d);
  free (sb);
  return -1;
}

static int
probe_md (unsigned i, const char *path, struct md_probe *p)
{
  char why[512];

  if (md_read_member (path, &p->sb, &p->at, &p->id, &p->size, why,
                      sizeof why)
      == -1) {
    stripe_error ("member %u (%s): %s", i, path, why);
    return -1;
  }
  p->opened = true;
  if (!md_super_raid0_servable (&p->sb, why, sizeof why)) {
    stripe_error ("member %u (%s): md superblock 1.%u: %s", i, path,
                  p->sb.minor, why);
    return -1;
  }
  p->readable = true;
  return 0;
}

int
assemble_md (const struct stripe_config *cfg, struct assembly *a)
{
  const unsigned n = cfg->nr_members;
  struct md_probe *p;
  unsigned ref = n, votes_best = 0;
  bool ok = true, order_wrong = false;
  const struct md_super *r;
  char uuid[36], rname[MD_SUPER_NAME_SHOWN], sname[MD_SUPER_NAME_SHOWN];
  uint64_t sizes[LAYOUT_MAX_MEMBERS];

  memset (a, 0, sizeof *a);
  p = calloc (n, sizeof *p);
  if (p == NULL) {
    stripe_error ("calloc: %m");
    return -1;
  }
  for (unsigned i = 0; i < n; ++i)
    if (probe_md (i, cfg->members[i], &p[i]) == -1)
      ok = false;

  for (unsigned i = 0; i < n; ++i)
    for (unsigned j = 0; j < i; ++j) {
      char how[512];
      if (p[i].opened && p[j].opened
          && identity_alias (&p[j].id, &p[i].id, how, sizeof how)) {
        stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                      "may be given only once, and members must not "
                      "overlap",
                      j, cfg->members[j], i, cfg->members[i], how);
        p[i].readable = false;
        ok = false;
      }
      else if (p[i].readable && p[j].readable
               && memcmp (p[i].sb.device_uuid, p[j].sb.device_uuid, 16) == 0
               && memcmp (p[i].sb.set_uuid, p[j].sb.set_uuid, 16) == 0) {
        char du[36];
        md_super_uuid_format (p[i].sb.device_uuid, du);
        stripe_error ("member %u (%s) and member %u (%s) show the same md "
                      "superblock (device UUID %s): two names for one "
                      "device, or a copy of a member",
                      j, cfg->members[j], i, cfg->members[i], du);
        p[i].readable = false;
        ok = false;
      }
    }

  /* The array is the UUID most members agree on (ties: the first). */
  for (unsigned i = 0; i < n; ++i) {
    unsigned votes = 0;
    if (!p[i].readable)
      continue;
    for (unsigned j = 0; j < n; ++j)
      if (p[j].readable
          && memcmp (p[j].sb.set_uuid, p[i].sb.set_uuid, 16) == 0)
        votes++;
    if (votes > votes_best) {
      votes_best = votes;
      ref = i;
    }
  }
  if (ref == n) {
    stripe_error ("%s: no member has an md superblock nbdstripe can serve "
                  "from: nothing to assemble",
                  cfg->path);
    free (p);
    return -1;
  }
  r = &p[ref].sb;
  md_super_uuid_format (r->set_uuid, uuid);
  md_super_name_shown (r, rname);

  if (cfg->uuid_given && memcmp (cfg->uuid, r->set_uuid, 16) != 0) {
    char want[36];
    md_super_uuid_format (cfg->uuid, want);
    stripe_error ("%s: uuid: the config says %s, the members belong to md "
                  "array '%s' (%s): not the array this config describes",
                  cfg->path, want, rname, uuid);
    ok = false;
  }
  if (r->raid_disks != n) {
    stripe_error ("%s: md array '%s' (%s) has %" PRIu32 " members, the "
                  "config lists %u",
                  cfg->path, rname, uuid, r->raid_disks, n);
    ok = false;
  }
  if ((uint64_t) r->chunk_sectors * 512 != cfg->chunk) {
    stripe_error ("%s: chunk: the config says %" PRIu64 ", the md "
                  "superblocks say %" PRIu64,
                  cfg->path, cfg->chunk, (uint64_t) r->chunk_sectors * 512);
    ok = false;
  }

  for (unsigned i = 0; i < n; ++i) {
    const struct md_super *sb = &p[i].sb;
    char other[36];
    unsigned role;

    if (!p[i].readable)
      continue;
    if (memcmp (sb->set_uuid, r->set_uuid, 16) != 0) {
      md_super_uuid_format (sb->set_uuid, other);
      stripe_error ("member %u (%s): belongs to another md array ('%s', %s), "
                    "not to '%s' (%s)",
                    i, cfg->members[i], md_super_name_shown (sb, sname), other,
                    rname,
                    uuid);
      p[i].readable = false;
      ok = false;
      continue;
    }
    /* What mdadm compares (compare_super1) and the kernel relies on. */
    if (sb->minor != r->minor || sb->level != r->level
        || sb->chunk_sectors != r->chunk_sectors
        || sb->raid_disks != r->raid_disks || sb->ctime != r->ctime
        || sb->feature_map != r->feature_map
        || md_super_raid0_layout (sb) != md_super_raid0_layout (r)) {
      stripe_error ("member %u (%s): md superblock disagrees with the other "
                    "members (version, level, chunk, members, creation time "
                    "or layout): mdadm would not assemble it either",
                    i, cfg->members[i]);
      ok = false;
    }
    if (cfg->data_offset_given
        && sb->data_offset * 512 != cfg->data_offset) {
      stripe_error ("member %u (%s): data_offset: the config says %" PRIu64
                    ", its md superblock says %" PRIu64,
                    i, cfg->members[i], cfg->data_offset,
                    sb->data_offset * 512);
      ok = false;
    }
    /* The superblock's area must hold the data it says, whole. */
    if (p[i].size / 512 < sb->data_offset + sb->data_size
        || (sb->minor == 0 && sb->super_offset < sb->data_offset + sb->data_size)) {
      stripe_error ("member %u (%s): %" PRIu64 " bytes, smaller than its md "
                    "superblock says (%" PRIu64 " data bytes from offset "
                    "%" PRIu64 "): truncated or replaced?",
                    i, cfg->members[i], p[i].size, sb->data_size * 512,
                    sb->data_offset * 512);
      ok = false;
    }
    role = md_super_role (sb);
    for (unsigned j = 0; j < i; ++j)
      if (p[j].readable && md_super_role (&p[j].sb) == role
          && memcmp (p[j].sb.set_uuid, r->set_uuid, 16) == 0) {
        stripe_error ("member %u (%s) and member %u (%s) both claim role %u "
                      "of md array '%s'",
                      j, cfg->members[j], i, cfg->members[i], role,
                      rname);
        ok = false;
      }
    if (role != i)
      order_wrong = true;
  }

  /* One generation.  md itself takes a member one event behind and
   * brings it up to date; nbdstripe writes no superblock, so it takes
   * none behind: mdadm --assemble first, or the member is stale.
   */
  uint64_t newest = 0;
  for (unsigned i = 0; i < n; ++i)
    if (p[i].readable && memcmp (p[i].sb.set_uuid, r->set_uuid, 16) == 0
        && p[i].sb.events > newest)
      newest = p[i].sb.events;
  for (unsigned i = 0; i < n; ++i)
    if (p[i].readable && memcmp (p[i].sb.set_uuid, r->set_uuid, 16) == 0
        && p[i].sb.events < newest) {
      stripe_error ("member %u (%s): stale: its md superblock is at event "
                    "count %" PRIu64 ", the array is at %" PRIu64 " (let "
                    "md assemble the array once to bring it up to date, or "
                    "it is an older copy of the member)",
                    i, cfg->members[i], p[i].sb.events, newest);
      ok = false;
    }

  if (order_wrong) {
    char msg[4096];
    size_t len = 0;
    bool complete = true;

    for (unsigned k = 0; k < r->raid_disks && k < LAYOUT_MAX_MEMBERS; ++k) {
      unsigned who = n;
      for (unsigned i = 0; i < n; ++i)
        if (p[i].readable && md_super_role (&p[i].sb) == k)
          who = i;
      if (who == n) {
        stripe_error ("%s: no member listed has role %u of md array '%s'",
                      cfg->path, k, rname);
        complete = false;
        continue;
      }
      len += snprintf (msg + len, len < sizeof msg ? sizeof msg - len : 0,
                       "%s\"%s\"", k ? ", " : "", cfg->members[who]);
    }
    for (unsigned i = 0; i < n; ++i)
      if (p[i].readable && md_super_role (&p[i].sb) != i)
        stripe_error ("member %u (%s): has role %u in md array '%s' (wrong "
                      "order)",
                      i, cfg->members[i], md_super_role (&p[i].sb),
                      rname);
    if (complete && len < sizeof msg)
      stripe_error ("%s: members are in the wrong order; the right order "
                    "is: members = [ %s ];",
                    cfg->path, msg);
    ok = false;
  }
  if (!ok) {
    free (p);
    return -1;
  }

  /* The layout: the superblocks say it (feature 0x1000), or nothing
   * depends on it, or the config must.
   */
  for (unsigned i = 0; i < n; ++i)
    sizes[i] = p[i].sb.data_size * 512;
  a->layout = md_super_raid0_layout (r);
  if (a->layout != 0) {
    if (cfg->layout_given && cfg->layout != a->layout) {
      stripe_error ("%s: layout: the config says \"%s\", the md superblocks "
                    "say \"%s\"",
                    cfg->path, layout_name (cfg->layout),
                    layout_name (a->layout));
      free (p);
      return -1;
    }
  }
  else if (cfg->layout_given
           || layout_md_layouts_agree (cfg->chunk, n, sizes))
    a->layout = cfg->layout;
  else {
    stripe_error ("%s: md array '%s' (%s) has members of different sizes "
                  "and its superblocks do not say which of md's two "
                  "layouts it was written with, which place data "
                  "differently here: give layout = \"original\" (Linux "
                  "before 3.14, or raid0.default_layout=1) or "
                  "layout = \"alternate\" (Linux 3.14 to 5.3, or "
                  "raid0.default_layout=2) in the config",
                  cfg->path, rname, uuid);
    free (p);
    return -1;
  }

  a->metadata = METADATA_MD;
  a->size_rule = LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < n; ++i) {
    a->data_offsets[i] = p[i].sb.data_offset * 512;
    a->data_sizes[i] = sizes[i];
    memcpy (a->md.device_uuid[i], p[i].sb.device_uuid, 16);
  }
  a->md.sb = malloc (n * sizeof *a->md.sb);
  if (a->md.sb == NULL) {
    stripe_error ("malloc: %m");
    free (p);
    return -1;
  }
  for (unsigned i = 0; i < n; ++i)
    a->md.sb[i] = p[i].sb;
  memcpy (a->md.uuid, r->set_uuid, 16);
  snprintf (a->md.name, sizeof a->md.name, "%s", r->set_name);
  a->md.minor = r->minor;
  a->md.events = newest;
  free (p);
  return 0;
}
