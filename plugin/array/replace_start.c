/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: starting a replace -- NEW checked and prepared with no lock
 * that the status or the I/O path takes, the job reserved and started;
 * and on_failing's replace onto a spare.  See include/replace.h and
 * replace_impl.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"
#include "config.h"
#include "json.h"
#include "log.h"
#include "member.h"
#include "meta.h"
#include "mover.h"
#include "owned.h"
#include "replace.h"
#include "replace_impl.h"
#include "spares.h"
#include "volume.h"

/* ---- the start ---- */

/* Whether NEW holds metadata a user may want (an nbdstripe header, an md
 * superblock) -- replace overwrites it only with force.  A copy of a
 * member that a replace cut short left on NEW is nobody's
 * (meta_copy_left): the same replace run again takes it.
 */
static bool
holds_metadata (struct volume *v, struct member *m, char *what, size_t len)
{
  uint8_t buf[META_AREA];
  char why[128];
  ssize_t n = member_pread (m, buf, sizeof buf, 0, false, why, sizeof why);

  if (n <= 0 || meta_recognise (buf, n, what, len) == NULL)
    return false;
  if (meta_copy_left (&v->meta, buf, n)) {
    stripe_notice ("replace: %s holds a copy of a member that a replace "
                   "did not finish: overwritten",
                   m->path);
    return false;
  }
  return true;
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

/* NEW holds no metadata until the end: a copy cut short (a crash) is
 * never taken for a member.
 */
static int
clear_new_start (struct replace *r, uint64_t data_offset, char *why,
                 size_t len)
{
  static const uint8_t zeros[META_AREA];
  uint64_t n = data_offset < META_AREA ? data_offset : META_AREA;

  if (n > 0
      && (member_pwrite (&r->newm, zeros, n, 0, why, len) == -1
          || member_sync (&r->newm, why, len) == -1))
    return -1;
  return 0;
}

/* NEW none of the spares under another name (one named as the config
 * names it is taken from the spares) and none of the removed members:
 * the config rewritten at the end would list it twice, and the next
 * serve refuse it.
 */
static int
check_owned (const char *config, const char *path, const struct identity *id,
             char *why, size_t len)
{
  struct stripe_config cfg;
  char err[512];
  int r;

  if (config == NULL)
    return 0;
  if (config_load (config, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  r = owned_check (&cfg, path, id,
                   OWNED_SPARES | OWNED_REMOVED | OWNED_SPARE_AS_NAMED, why,
                   len);
  config_free (&cfg);
  return r;
}

/* Checks of NEW, with no lock held (opening an NBD export may take
 * seconds): r->newm opened, claimed and started, its first bytes
 * cleared.  Nothing is written to NEW before every check has passed.
 */
static int
prepare_new (struct volume *v, struct replace *r,
             const struct replace_params *p, char *why, size_t len)
{
  const struct member *old = &v->members[p->index];
  uint64_t need = old->need;
  char reason[512], how[512];
  unsigned j;
  int t;

  /* One of the spares: taken as it is, opened and claimed. */
  t = spares_take (r->a->spares, p->new_path, p->index, &r->newm, reason,
                   sizeof reason);
  if (t == -1) {
    snprintf (why, len, "%s", reason);
    return -1;
  }
  r->from_spare = t == 1;
  if (!r->from_spare
      && member_open (&r->newm, p->index, p->new_path, &old->params, reason,
                      sizeof reason)
           == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  r->newm_open = true;
  if (volume_alias_of (v, &r->newm, &j, how, sizeof how)) {
    if (j == p->index)
      snprintf (why, len, "%s is member %u itself (%s)", p->new_path, j, how);
    else
      snprintf (why, len, "%s and member %u (%s) are %s", p->new_path, j,
                v->members[j].path, how);
    return -1;
  }
  if (check_owned (p->config, p->new_path, &r->newm.id, why, len) == -1)
    return -1;
  if (meta_fits (&v->meta, p->index, r->newm.size, need, reason,
                 sizeof reason)
      == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  if (r->newm.size < need) {
    snprintf (why, len, "%s: %" PRIu64 " bytes: member %u needs %" PRIu64
              " (its data offset and data)",
              p->new_path, r->newm.size, p->index, need);
    return -1;
  }
  if (!new_serves_clients (v, &r->newm, p->new_path, why, len))
    return -1;
  if (!p->force
      && holds_metadata (v, &r->newm, reason, sizeof reason)) {
    snprintf (why, len, "%s %s: refusing to overwrite it (force)",
              p->new_path, reason);
    return -1;
  }
  if (!r->from_spare && member_claim (&r->newm, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  if (member_start (&r->newm) == -1) {
    snprintf (why, len, "%s: cannot start: %m", p->new_path);
    return -1;
  }
  if (clear_new_start (r, old->data_offset, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s: %s", p->new_path, reason);
    return -1;
  }
  return 0;
}

static struct replace *
new_replace (struct array *a, const struct replace_params *p)
{
  struct volume *v = &a->volume;
  struct replace *r = calloc (1, sizeof *r);

  if (r == NULL)
    return NULL;
  r->a = a;
  r->mv.job = &replace_job;
  r->mv.v = v;
  r->mv.rate = p->rate;
  r->mv.skip_unreadable = p->skip_unreadable;
  r->index = p->index;
  r->automatic = p->automatic;
  r->old_path = strdup (v->members[p->index].path);
  r->new_path = strdup (p->new_path);
  r->config = p->config ? strdup (p->config) : NULL;
  if (r->old_path == NULL || r->new_path == NULL
      || (p->config && r->config == NULL)) {
    replace_discard (&r->mv);
    return NULL;
  }
  snprintf (r->mv.vm.what, sizeof r->mv.vm.what, "a replace of member %u%s",
            p->index, p->automatic ? " onto a spare" : "");
  r->mv.vm.kind = p->automatic ? JOB_SPARE : JOB_REPLACE;
  return r;
}

int
replace_start (struct array *a, const struct replace_params *p, char *why,
               size_t len)
{
  struct volume *v = &a->volume;
  struct replace *r;
  bool reshaping;

  if (p->index >= v->nr_members) {
    snprintf (why, len, "no member %u: the volume has %u (0 to %u)",
              p->index, v->nr_members, v->nr_members - 1);
    return -1;
  }
  if (v->removed >> p->index & 1) {
    snprintf (why, len, "member %u (%s) was removed by a shrink: it is no "
              "longer a member",
              p->index, v->members[p->index].path);
    return -1;
  }
  /* The command names the member by its place in the config, which the
   * shrink rewrote; this server still numbers them as they were.  One
   * index meaning two members is how the wrong disk gets replaced.
   */
  if (volume_renumbered (v)) {
    snprintf (why, len, "a shrink while served renumbered the members (the "
              "config lists them anew): serve the volume again first");
    return -1;
  }
  if (p->config == NULL && !meta_on_members (&v->meta)) {
    snprintf (why, len, "the volume has neither a config file to name the "
              "new member in nor metadata on its members (served ad hoc, "
              "file=...): after a restart it would be served from the old "
              "member again; serve it from a config file");
    return -1;
  }
  /* A grow or shrink under way on a volume opened stopped (served, its
   * job holds the volume's one job slot and mover_reserve refuses): the
   * member's bytes are where either layout puts them, and its journal
   * may hold a window the headers record (reshape.h).  Copied whole from
   * the end of its header on, with the header's reshape fields given to
   * NEW (meta_write_new writes them), the volume goes on from the same
   * position on NEW when served again.  Which layout an unreadable
   * block belongs to depends on the position: no logical ranges, so no
   * zeros written in place of lost data.
   */
  if (p->skip_unreadable && !v->meta.ops->keeps_lost) {
    snprintf (why, len, "metadata \"%s\" keeps no list of lost ranges: "
              "what --skip-unreadable cannot copy would read as zeros, "
              "silently; replace without it, or copy the member with "
              "ddrescue first",
              meta_format (&v->meta));
    return -1;
  }
  reshaping = meta_reshape_recorded (&v->meta);
  if (reshaping && p->skip_unreadable) {
    snprintf (why, len, "a grow or shrink is under way on the members: "
              "--skip-unreadable cannot say which of the volume's bytes "
              "would be lost; replace without it, or let the grow or "
              "shrink end first");
    return -1;
  }
  if (mover_reserve (v, p->automatic ? JOB_SPARE : JOB_REPLACE, why, len)
      == -1) {
    size_t n = strlen (why);
    /* Served, its grow or shrink paused (a member failing): the way on. */
    if (reshaping && n < len)
      snprintf (why + n, len - n, "; to replace member %u before it goes "
                "on, stop the volume (nbdstripe stop), replace it with "
                "--offline, and serve the volume again (the grow or shrink "
                "goes on from where it stopped)",
                p->index);
    return -1;
  }
  r = new_replace (a, p);
  if (r == NULL) {
    snprintf (why, len, "out of memory");
    mover_unreserve (v);
    return -1;
  }
  /* Slow (an NBD connect): no lock that status or the I/O path takes. */
  if (prepare_new (v, r, p, why, len) == -1) {
    replace_discard (&r->mv);
    mover_unreserve (v);
    return -1;
  }
  r->mv.start = v->members[p->index].data_offset;
  r->mv.end = v->members[p->index].need;
  r->reshaping = reshaping;
  if (reshaping && r->mv.start > META_AREA)
    r->mv.start = META_AREA; /* the journal too */
  mover_init (&r->mv);
  /* on_failing's: said before the copier runs (spare_policy.c). */
  if (r->automatic)
    spare_policy_started (a->policy, r->index, r->new_path);
  if (mover_start (&r->mv, why, len) == -1)
    return -1;
  stripe_info ("replace: member %u: copying %s to %s (%" PRIu64 " bytes)",
               r->index, r->old_path, r->new_path, r->mv.end - r->mv.start);
  return 0;
}

/* ---- on_failing = "replace" ---- */

int
replace_onto_spare (struct array *a, unsigned index, const char *config,
                    char *spare, size_t slen, char *why, size_t len)
{
  struct volume *v = &a->volume;
  char path[4096], reason[1024], skipped[1024] = "";
  size_t n = 0;
  int c;

  /* Not now: spares are looked at (their drives read) only when a
   * replace could start.
   */
  if (volume_job_may_start (v, JOB_SPARE, why, len) == -1)
    return 1;
  for (unsigned k = 0; (c = spares_candidate (a->spares, k, index, path,
                                              sizeof path, reason,
                                              sizeof reason))
                       != -1;
       ++k) {
    struct replace_params p = {
      .index = index, .new_path = path, .config = config, .automatic = true
    };

    if (c == 0 && reason[0] == '\0')
      continue; /* a spare that is a member now */
    if (c == 1 && replace_start (a, &p, reason, sizeof reason) == 0) {
      snprintf (spare, slen, "%s", path);
      return 0;
    }
    if (c == 1 && errno == EAGAIN) {
      snprintf (why, len, "%s", reason);
      return 1;
    }
    if (c == 1 && errno == EROFS) {
      snprintf (why, len, "%s", reason);
      return -1;
    }
    stripe_warning ("on_failing: member %u: spare %s skipped: %s", index, path,
                    reason);
    if (n < sizeof skipped)
      n += snprintf (skipped + n, sizeof skipped - n, "%s%s: %s",
                     n ? "; " : "", path, reason);
  }
  snprintf (why, len, "no spare can take its place%s%s", n ? ": " : "",
            n ? skipped : " (none left)");
  return -1;
}
