/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: volume assembly, one algorithm over every metadata format.
 * See include/assemble.h; what a format says and checks is in meta.h.
 *
 * Records are read through a member opened raw (member.h), so that a
 * member given as an NBD URI is assembled as a file is: one plain
 * connection, bounded in time.
 */

#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "identity.h"
#include "log.h"
#include "member.h"
#include "meta.h"

/* What opening member i found, beside its record (a->members[i]). */
struct probe {
  bool opened;
  bool readable; /* opened, and its record loaded and still in the running */
  uint64_t size;
  struct identity id;
  char why[512]; /* why it could not be opened or its record loaded */
};

/* The state of one assembly run. */
struct run {
  const struct stripe_config *cfg;
  const struct meta_ops *ops;
  const struct meta_words *w;
  struct assembly *a;
  struct meta_member *mm; /* a->members */
  struct probe *p;
  unsigned n;
  bool ok;
  unsigned stale_ok; /* accept: this member may be behind (else n) */
  bool degraded;     /* unreadable members are left out (a->missing) */
};

void
assembly_free (struct assembly *a)
{
  if (a->members)
    for (unsigned i = 0; i < a->nr; ++i)
      free (a->members[i].rec);
  free (a->members);
  a->members = NULL;
}

/* Member i's record, read quietly: what went wrong is said only if the
 * member turns out to be one the volume uses (a joining member a grow
 * never started on may hold anything).
 */
static void
load_member (struct run *r, unsigned i)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  const char *path = r->cfg->members[i];
  struct member d;

  if (member_open (&d, i, path, &params, r->p[i].why, sizeof r->p[i].why)
      == -1)
    return;
  r->p[i].opened = true;
  r->p[i].size = d.size;
  r->p[i].id = d.id;
  if (r->ops->load (&d, &r->mm[i], r->p[i].why, sizeof r->p[i].why) == 0)
    r->p[i].readable = true;
  member_close (&d);
}

static bool
same_array (const struct run *r, unsigned i, unsigned j)
{
  return memcmp (r->mm[i].array_uuid, r->mm[j].array_uuid, 16) == 0;
}

/* Two names for one member, or members that overlap: each would
 * overwrite the other's data.  Two members with one member UUID: the
 * same device, or a copy of a member.
 */
static void
check_aliases (struct run *r)
{
  const char *const *names = (const char *const *) r->cfg->members;

  for (unsigned i = 0; i < r->n; ++i)
    for (unsigned j = 0; j < i; ++j) {
      char how[512], mu[META_UUID_SHOWN];
      if (r->p[i].opened && r->p[j].opened
          && identity_alias (&r->p[j].id, &r->p[i].id, how, sizeof how)) {
        stripe_error ("member %u (%s) and member %u (%s) are %s: a member "
                      "may be given only once, and members must not "
                      "overlap",
                      j, names[j], i, names[i], how);
        r->p[i].readable = false;
        r->ok = false;
      }
      else if (r->p[i].readable && r->p[j].readable
               && memcmp (r->mm[i].member_uuid, r->mm[j].member_uuid, 16) == 0
               && same_array (r, i, j)) {
        r->ops->uuid_shown (r->mm[i].member_uuid, mu);
        stripe_error ("member %u (%s) and member %u (%s) show the same %s "
                      "(%s %s): two names for one device, or a copy of a "
                      "member",
                      j, names[j], i, names[i], r->w->record, r->w->uuid, mu);
        r->p[i].readable = false;
        r->ok = false;
      }
    }
}

/* The record that speaks for the volume: of the array most members agree
 * on (ties: the first), the one at the newest generation (the first of
 * those) -- md's "highest wins".  A member marked removed or replaced is
 * no longer the volume's and never speaks for it.  n when no member has
 * a record.
 */
static unsigned
vote (const struct run *r)
{
  unsigned array = r->n, best = 0, ref = r->n;

  for (unsigned i = 0; i < r->n; ++i) {
    unsigned votes = 0;
    if (!r->p[i].readable)
      continue;
    for (unsigned j = 0; j < r->n; ++j)
      if (r->p[j].readable && same_array (r, i, j))
        votes++;
    if (votes > best) {
      best = votes;
      array = i;
    }
  }
  if (array == r->n)
    return r->n;
  for (unsigned i = 0; i < r->n; ++i)
    if (r->p[i].readable && same_array (r, i, array) && !r->mm[i].removed
        && !r->mm[i].replaced
        && (ref == r->n || r->mm[i].events > r->mm[ref].events))
      ref = i;
  return ref == r->n ? array : ref;
}

/* What a format's check found (meta.h: a line per problem), logged at
 * this edge, one error line each.
 */
static void
log_lines (const char *why)
{
  while (*why) {
    size_t n = strcspn (why, "\n");
    stripe_error ("%.*s", (int) n, why);
    why += n + (why[n] == '\n');
  }
}

/* Member i against the array; whether it is in another slot than i. */
static bool
check_member (struct run *r, unsigned i)
{
  const struct meta_member *ref = &r->mm[r->a->ref], *mm = &r->mm[i];
  const char *const *names = (const char *const *) r->cfg->members;
  char uuid[META_UUID_SHOWN], other[META_UUID_SHOWN];

  if (!same_array (r, i, r->a->ref)) {
    r->ops->uuid_shown (ref->array_uuid, uuid);
    r->ops->uuid_shown (mm->array_uuid, other);
    stripe_error ("member %u (%s): belongs to another %s ('%s', %s), not to "
                  "'%s' (%s)",
                  i, names[i], r->w->other, mm->name, other, ref->name, uuid);
    r->p[i].readable = false;
    r->ok = false;
    return false;
  }
  char why[4096] = "";
  enum meta_verdict v =
    r->ops->check_member (r->cfg, i, ref, mm, r->p[i].size, why, sizeof why);

  log_lines (why);
  switch (v) {
  case META_OK: break;
  case META_BAD: r->ok = false; break;
  case META_DROP:
    r->p[i].readable = false;
    r->ok = false;
    return false;
  }
  for (unsigned j = 0; j < i; ++j)
    if (r->p[j].readable && r->mm[j].slot == mm->slot
        && same_array (r, j, r->a->ref)) {
      stripe_error ("member %u (%s) and member %u (%s) both claim %s %u of "
                    "%s '%s'",
                    j, names[j], i, names[i], r->w->slot, mm->slot,
                    r->w->array, ref->name);
      r->ok = false;
    }
  return mm->slot != i;
}

/* One generation, the newest (vote).  A member behind it dropped out of
 * the volume while it was served, or is an older copy of a member --
 * except one generation behind when the format moves every member to the
 * next generation in each update (meta_update: a crash between two of
 * its writes leaves exactly that) and the newest record does not say
 * the member is behind (it dropped out, the update was made without it).
 * Such a member holds everything the volume acknowledged; the next
 * update brings its record up to date.  Only if the members assembled
 * are those the newest record's update was written for (its roster):
 * else a member behind may be a device the volume went on without (the
 * copy a replace did not switch to, the member it switched from), and
 * none is taken.  Member stale_ok may be behind
 * (accept), and the others then only noted: they are taken back one at
 * a time.  *events_of: stale_ok's generation.
 */
static void
check_generation (struct run *r, uint64_t *events_of)
{
  const struct meta_member *ref = &r->mm[r->a->ref];
  uint64_t newest = ref->events;
  bool margin = r->ops->records_dropouts;
  uint32_t roster = 0;

  for (unsigned i = 0; i < r->n; ++i)
    if (r->p[i].readable && same_array (r, i, r->a->ref))
      roster ^= meta_roster (r->mm[i].member_uuid);
  if (ref->roster != 0 && roster != ref->roster) {
    stripe_debug ("the members are not those generation %" PRIu64
                  " was written for: none behind it is taken",
                  newest);
    margin = false;
  }

  if (r->stale_ok < r->n && events_of)
    *events_of = r->p[r->stale_ok].readable ? r->mm[r->stale_ok].events : 0;
  for (unsigned i = 0; i < r->n; ++i) {
    const struct meta_member *mm = &r->mm[i];
    bool marked = mm->slot < 64 && (ref->behind >> mm->slot & 1);
    if (!r->p[i].readable || !same_array (r, i, r->a->ref)
        || mm->events >= newest)
      continue;
    if (margin && mm->events + 1 == newest && !marked) {
      stripe_debug ("member %u (%s): one generation behind (%" PRIu64
                    " < %" PRIu64 "): an update cut short, taken as it is",
                    i, r->cfg->members[i], mm->events, newest);
      continue;
    }
    if (i == r->stale_ok)
      continue;
    char why[1024] = "";
    r->ops->say_stale (r->cfg, i, mm, newest, why, sizeof why);
    log_lines (why);
    if (r->stale_ok < r->n)
      stripe_warning ("member %u (%s) is stale too: take it back on its own "
                      "afterwards",
                      i, r->cfg->members[i]);
    else
      r->ok = false;
  }
  r->a->events = newest;
}

/* Say which member holds each slot, so that the fix is a copy-paste. */
static void
report_order (struct run *r)
{
  const struct meta_member *ref = &r->mm[r->a->ref];
  const char *const *names = (const char *const *) r->cfg->members;
  char msg[4096];
  size_t len = 0;
  bool complete = true;

  for (unsigned k = 0; k < ref->count && k < LAYOUT_MAX_MEMBERS; ++k) {
    unsigned who = r->n;
    for (unsigned i = 0; i < r->n; ++i)
      if (r->p[i].readable && r->mm[i].slot == k)
        who = i;
    if (who == r->n) {
      stripe_error ("%s: no member listed has %s %u of %s '%s'",
                    r->cfg->path, r->w->slot, k, r->w->array, ref->name);
      complete = false;
      continue;
    }
    len += snprintf (msg + len, len < sizeof msg ? sizeof msg - len : 0,
                     "%s\"%s\"", k ? ", " : "", names[who]);
  }
  for (unsigned i = 0; i < r->n; ++i)
    if (r->p[i].readable && r->mm[i].slot != i)
      stripe_error ("member %u (%s): %s %u %s '%s' (wrong order)", i,
                    names[i], r->w->is_slot, r->mm[i].slot, r->w->slot_in,
                    ref->name);
  if (complete && len < sizeof msg)
    stripe_error ("%s: members are in the wrong order; the right order "
                  "is: members = [ %s ];",
                  r->cfg->path, msg);
  r->ok = false;
}

/* The members that could not be read, said now that they are known to
 * be the volume's; a create that did not finish named as such.
 *
 * create writes every member's header flagged CREATING, then every
 * final one (daemon/create.c).  A crash in the first pass leaves
 * CREATING headers and blank members: refused, naming create, which
 * overwrites them without --force.  A crash in the second leaves final
 * headers beside CREATING ones that are complete (the first pass had
 * ended): the volume was created, and is served (its first update
 * writes every header final).
 */
static void
report_unreadable (struct run *r, unsigned ref)
{
  bool missing = false, creating = ref < r->n;

  for (unsigned i = 0; i < r->n; ++i) {
    if (!r->p[i].readable) {
      missing = true;
      continue;
    }
    if (!r->mm[i].creating)
      creating = false;
  }
  if (creating) {
    stripe_error ("%s: volume '%s' was being created when 'nbdstripe "
                  "create' stopped (a crash?): nothing was written to it "
                  "since; run 'nbdstripe create %s' again",
                  r->cfg->path, r->mm[ref].name, r->cfg->path);
    r->ok = false;
    return;
  }
  if (!missing)
    return;
  for (unsigned i = 0; i < r->n; ++i) {
    char place[1024] = "";
    bool placed;

    if (r->p[i].readable)
      continue;
    placed = ref < r->n
             && r->ops->places_missing (r->cfg, r->a, i, place, sizeof place);
    /* Degraded: left out, so long as a member speaks for the volume
     * (check_all refuses when none does) and the records place it.
     */
    if (r->degraded && ref < r->n && !placed) {
      stripe_error ("member %u (%s): %s", i, r->cfg->members[i], r->p[i].why);
      log_lines (place);
      r->ok = false;
      continue;
    }
    if (r->degraded && ref < r->n) {
      r->a->missing |= UINT64_C (1) << i;
      snprintf (r->a->missing_why[i], sizeof r->a->missing_why[i], "%.*s",
                (int) sizeof r->a->missing_why[i] - 1, r->p[i].why);
      stripe_warning ("member %u (%s): %s: served degraded without it "
                      "(what it holds reads as EIO)",
                      i, r->cfg->members[i], r->p[i].why);
      continue;
    }
    /* Others agree on the volume and place this one: it can be served
     * without it.
     */
    if (placed)
      stripe_error ("member %u (%s): %s; the volume can be served "
                    "read-only without it: nbdstripe serve --degraded %s",
                    i, r->cfg->members[i], r->p[i].why, r->cfg->path);
    else
      stripe_error ("member %u (%s): %s", i, r->cfg->members[i], r->p[i].why);
    r->ok = false;
  }
}

/* Checks of the members r holds (records loaded), as the config use
 * lists them; fills a.
 */
static int
check_all (struct run *r, uint64_t *events_of)
{
  bool order_wrong = false;
  char why[4096] = "";

  r->a->ref = vote (r);
  report_unreadable (r, r->a->ref);
  check_aliases (r);
  r->a->ref = vote (r);
  if (r->a->ref == r->n) {
    unsigned readable = 0;

    for (unsigned i = 0; i < r->n; ++i)
      readable += r->p[i].readable;
    /* Members that could not be read said why above (a permission, a
     * missing file): not a word about headers nobody has read.
     */
    if (readable == 0)
      stripe_error ("%s: no member could be read: nothing to assemble",
                    r->cfg->path);
    else
      stripe_error ("%s: no member has %s: nothing to assemble", r->cfg->path,
                    r->w->nothing);
    r->a->ref = 0;
    return -1;
  }
  if (!r->ops->check_array (r->cfg, &r->mm[r->a->ref], why, sizeof why)) {
    log_lines (why);
    r->ok = false;
  }
  for (unsigned i = 0; i < r->n; ++i)
    if (r->p[i].readable && check_member (r, i))
      order_wrong = true;
  check_generation (r, events_of);
  if (order_wrong)
    report_order (r);
  if (!r->ok)
    return -1;
  why[0] = '\0';
  if (r->ops->finish (r->cfg, r->a, why, sizeof why) == -1) {
    log_lines (why);
    return -1;
  }
  return 0;
}

/* A config naming a reshape (joining, leaving) that the newest record
 * (ref) says never started, or finished: *use is the config without
 * those members (keep[i]: config member i is used), note says why.
 * Between the config's rewrite and the members' headers at either end of
 * a reshape, a crash leaves exactly that.
 */
static bool
reshape_config (const struct stripe_config *cfg, const struct meta_member *ref,
                bool *keep, const char **left, char *note, size_t len)
{
  unsigned n = cfg->nr_members;
  bool stale = false;

  *left = NULL;
  for (unsigned i = 0; i < n; ++i)
    keep[i] = true;
  if (ref == NULL)
    return false;
  if (cfg->nr_joining && !ref->reshape) {
    if (ref->count == n - cfg->nr_joining) {
      for (unsigned i = ref->count; i < n; ++i)
        keep[i] = false;
      stale = true;
      snprintf (note, len, "the %u joining member(s) the config names were "
                "never added (the grow did not start): served without them",
                cfg->nr_joining);
    }
    else if (ref->count == n) {
      stale = true;
      snprintf (note, len, "the grow is done: its joining members are "
                "members");
    }
  }
  if (cfg->has_leaving && !ref->reshape) {
    if (ref->count == n - 1) {
      keep[cfg->leaving] = false;
      *left = cfg->members[cfg->leaving];
      stale = true;
      snprintf (note, len, "the shrink of member %u (%s) is done: served "
                "without it",
                cfg->leaving, cfg->members[cfg->leaving]);
    }
    else if (ref->count == n) {
      stale = true;
      snprintf (note, len, "the config names member %u as leaving, but no "
                "shrink started on it", cfg->leaving);
    }
  }
  return stale;
}

/* Only the members keep[] says are used, renumbered in order. */
static void
narrow (struct run *r, struct stripe_config *use, const bool *keep)
{
  unsigned k = 0;

  for (unsigned i = 0; i < r->n; ++i) {
    if (!keep[i]) {
      free (r->mm[i].rec);
      continue;
    }
    use->members[k] = r->cfg->members[i];
    r->mm[k] = r->mm[i];
    r->p[k] = r->p[i];
    if (r->stale_ok == i)
      r->stale_ok = k;
    k++;
  }
  use->nr_members = r->a->nr = r->n = k;
}

/* Degraded, with nothing on the members (metadata "none"): a member
 * that cannot be opened is refused, saying why the format cannot place
 * it; with every member there the volume is served as it is.
 */
static int
refuse_absent (const struct stripe_config *cfg, const struct assembly *a)
{
  const struct member_open_params params = { .readonly = true, .raw = true };
  int ret = 0;

  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    char why[512], place[1024] = "";
    struct member d;

    if (member_open (&d, i, cfg->members[i], &params, why, sizeof why) == 0) {
      member_close (&d);
      continue;
    }
    /* No format without records places a member: its words why. */
    a->meta->places_missing (cfg, a, i, place, sizeof place);
    stripe_error ("member %u (%s): %s", i, cfg->members[i], why);
    log_lines (place);
    ret = -1;
  }
  return ret;
}

/* The config as the members say it is (reshape_config), assembled. */
static int
assemble_config (const struct stripe_config *cfg, struct assembly *a,
                 unsigned stale_ok, uint64_t *events_of, bool degraded)
{
  struct run r = { .cfg = cfg,
                   .a = a,
                   .n = cfg->nr_members,
                   .ok = true,
                   .stale_ok =
                     stale_ok < cfg->nr_members ? stale_ok : cfg->nr_members,
                   .degraded = degraded };
  struct stripe_config use = *cfg;
  bool keep[LAYOUT_MAX_MEMBERS];
  const char *left;
  char note[256] = "";
  unsigned ref;
  bool stale;
  int ret;

  memset (a, 0, sizeof *a);
  a->meta = r.ops = meta_ops_for (cfg->metadata);
  a->nr = r.n;
  r.w = &r.ops->words;
  if (r.ops->load == NULL) { /* nothing on the members: the config says it */
    for (unsigned i = 0; i < cfg->nr_members; ++i)
      a->paths[i] = cfg->members[i];
    if (degraded && refuse_absent (cfg, a) == -1)
      return -1;
    char why[1024] = "";
    if (r.ops->finish (cfg, a, why, sizeof why) == -1) {
      log_lines (why);
      return -1;
    }
    return 0;
  }

  a->members = r.mm = calloc (r.n, sizeof *r.mm);
  r.p = calloc (r.n, sizeof *r.p);
  if (r.mm == NULL || r.p == NULL) {
    stripe_error ("calloc: %m");
    free (r.p);
    return -1;
  }
  for (unsigned i = 0; i < r.n; ++i)
    load_member (&r, i);
  ref = vote (&r);
  stale = reshape_config (cfg, ref < r.n ? &r.mm[ref] : NULL, keep, &left,
                          note, sizeof note);
  /* stale_ok is an index in the config as written; once a member is
   * left out the others may be numbered otherwise.  Served once, the
   * config is rewritten as the members say (reshape_fix_config).
   */
  if (stale && stale_ok != UINT_MAX) {
    stripe_error ("%s: %s; serve the volume once (the config is then "
                  "rewritten as its members say), then name the member "
                  "again",
                  cfg->path, note);
    free (r.p);
    return -1;
  }
  narrow (&r, &use, keep);
  r.cfg = &use;
  ret = check_all (&r, events_of);
  for (unsigned i = 0; i < use.nr_members; ++i)
    a->paths[i] = use.members[i];
  a->config_stale = stale;
  a->left = left;
  snprintf (a->config_note, sizeof a->config_note, "%s", note);
  if (note[0])
    stripe_warning ("%s: %s", cfg->path, note);
  free (r.p);
  return ret;
}

int
assemble (const struct stripe_config *cfg, struct assembly *a)
{
  return assemble_config (cfg, a, UINT_MAX, NULL, false);
}

int
assemble_degraded (const struct stripe_config *cfg, struct assembly *a)
{
  return assemble_config (cfg, a, UINT_MAX, NULL, true);
}

int
assemble_accepting (const struct stripe_config *cfg, struct assembly *a,
                    unsigned stale_ok, uint64_t *events_of)
{
  return assemble_config (cfg, a, stale_ok, events_of, false);
}
