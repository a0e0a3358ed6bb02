/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a volume's hot spares, held while it is served.  See
 * include/spares.h.
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "drive.h"
#include "identity.h"
#include "json.h"
#include "log.h"
#include "meta.h"
#include "spares.h"
#include "volume.h"

#define WHY_MAX 512
#define REASON_LEN 256 /* what a callee says, within a WHY_MAX */

struct spare {
  char *path;
  struct member m; /* open: opened (and claimed when claim) */
  bool open;
  bool busy;             /* looked at, without the lock: m is not to move */
  int taken;             /* the member a replace onto it is for, -1: none */
  bool used;             /* a member now: no longer a spare (entries never
                          * move: a busy one is used without the lock) */
  uint64_t size;         /* bytes, once opened (0: never) */
  bool claimed;          /* locked by us now (a local spare: claim.h; an NBD
                          * export is its server's) */
  char problem[WHY_MAX]; /* why it can take no place now ("": none) */
  char fit[WHY_MAX];     /* why it cannot take every member's ("") */
};

struct spares {
  struct volume *v;
  bool claim;
  struct member_open_params params; /* the members' */
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a spare is no longer busy */
  unsigned n;
  struct spare s[LAYOUT_MAX_MEMBERS];
};

/* Why s cannot take member i's place for its size ("" when it can). */
static void
size_fit (struct volume *v, const struct member *m, unsigned i, char *why,
          size_t len)
{
  uint64_t need = v->members[i].need;
  char reason[WHY_MAX];

  why[0] = '\0';
  if (m->size < need)
    snprintf (why, len,
              "too small: %" PRIu64 " bytes, member %u needs %" PRIu64
              " (its data offset and data)",
              m->size, i, need);
  else if (meta_fits (&v->meta, i, m->size, need, reason, sizeof reason) == -1)
    snprintf (why, len, "%s", reason);
}

/* Whether m can take every member's place (its size, its smallest
 * request): why not into fit.  Member sizes are read under swap_lock
 * (a switch changes them); this is the caller's own thread.
 */
static void
assess_fit (struct volume *v, const struct member *m, char *fit, size_t len)
{
  fit[0] = '\0';
  if (m->min_io > v->min_block) {
    snprintf (fit, len,
              "takes requests of %" PRIu32 " bytes at least, but "
              "the volume's clients were promised %" PRIu32,
              m->min_io, v->min_block);
    return;
  }
  pthread_mutex_lock (&v->swap_lock);
  for (unsigned i = 0; i < v->nr_members && !fit[0]; ++i)
    size_fit (v, m, i, fit, len);
  pthread_mutex_unlock (&v->swap_lock);
}

/* What m holds that is somebody's (meta_recognise: a header, an md
 * superblock), into problem.  -1 when its first bytes cannot be read
 * (problem says so: failing).  A copy of one of v's members that a
 * replace onto this spare left, cut short by a crash, is nobody's: the
 * spare stays usable (meta_copy_left).
 */
static int
assess_content (struct volume *v, struct member *m, char *problem,
                size_t len)
{
  uint8_t buf[META_AREA];
  char what[256], why[256];
  ssize_t n = member_pread (m, buf, sizeof buf, 0, true, why, sizeof why);

  problem[0] = '\0';
  if (n < 0) {
    snprintf (problem, len, "failing: reading its first %u bytes: %s",
              META_AREA, why);
    return -1;
  }
  if (n > 0 && meta_copy_left (&v->meta, buf, n)) {
    stripe_notice ("spare %s: holds a copy of a member of this volume that "
                   "a replace did not finish: usable",
                   m->path);
    return 0;
  }
  if (n > 0 && meta_recognise (buf, n, what, sizeof what) != NULL)
    snprintf (problem, len,
              "%s: a spare must hold no metadata (it may be "
              "somebody's data; wipe it to make it a spare)",
              what);
  return 0;
}

/* Spare k opened (and claimed) into *m, nothing locked: 0, or -1 with
 * why; *fatal when the volume must not go on with it (an alias, in use
 * by someone else).
 */
static int
open_one (struct spares *sp, unsigned k, const char *path, struct member *m,
          bool *fatal, char *why, size_t len)
{
  struct volume *v = sp->v;
  char reason[REASON_LEN], how[REASON_LEN];
  unsigned j;

  *fatal = false;
  if (member_open (m, k, path, &sp->params, reason, sizeof reason) == -1) {
    snprintf (why, len, "cannot be opened: %s", reason);
    return -1;
  }
  if (volume_alias_of (v, m, &j, how, sizeof how)) {
    snprintf (why, len,
              "it and member %u (%.100s) are %s: a device is a member "
              "or a spare, not both",
              j, v->members[j].path, how);
    goto fatal;
  }
  pthread_mutex_lock (&sp->lock);
  for (j = 0; j < sp->n; ++j)
    if (j != k && sp->s[j].open
        && identity_alias (&sp->s[j].m.id, &m->id, how, sizeof how)) {
      snprintf (why, len,
                "it and spare %.100s are %s: each spare may be given "
                "only once",
                sp->s[j].path, how);
      pthread_mutex_unlock (&sp->lock);
      goto fatal;
    }
  pthread_mutex_unlock (&sp->lock);
  if (sp->claim && member_claim (m, reason, sizeof reason) == -1) {
    snprintf (why, len, "%s", reason);
    if (errno == EBUSY)
      goto fatal;
    member_close (m);
    return -1;
  }
  return 0;

fatal:
  *fatal = true;
  member_close (m);
  return -1;
}

int
spares_open (struct spares **out, struct volume *v, unsigned n,
             char *const *paths, bool claim)
{
  struct spares *sp;

  *out = NULL;
  if (n == 0)
    return 0;
  sp = calloc (1, sizeof *sp);
  if (sp == NULL) {
    stripe_error ("spares: %m");
    return -1;
  }
  sp->v = v;
  sp->claim = claim;
  sp->params = v->members[0].params;
  pthread_mutex_init (&sp->lock, NULL);
  pthread_cond_init (&sp->cond, NULL);
  *out = sp; /* closed by the caller, whatever happens next */
  for (unsigned k = 0; k < n; ++k) {
    struct spare *s = &sp->s[k];
    char why[WHY_MAX];
    bool fatal;

    s->taken = -1;
    s->path = strdup (paths[k]);
    if (s->path == NULL) {
      stripe_error ("spares: %m");
      return -1;
    }
    sp->n = k + 1;
    if (open_one (sp, k, s->path, &s->m, &fatal, why, sizeof why) == -1) {
      if (fatal) {
        stripe_error ("spare %s: %s", s->path, why);
        return -1;
      }
      snprintf (s->problem, sizeof s->problem, "%s", why);
    }
    else {
      s->open = true;
      s->claimed = claim && member_has_inode (&s->m);
      s->size = s->m.size;
      assess_content (v, &s->m, s->problem, sizeof s->problem);
      assess_fit (v, &s->m, s->fit, sizeof s->fit);
    }
    if (s->problem[0] || s->fit[0])
      stripe_warning ("spare %s: cannot be used: %s", s->path,
                      s->problem[0] ? s->problem : s->fit);
    else
      stripe_debug ("spare %s: %" PRIu64 " bytes, %s", s->path, s->size,
                    claim ? "claimed" : "not claimed (a check)");
  }
  return 0;
}

void
spares_close (struct spares *sp)
{

  if (sp == NULL)
    return;
  for (unsigned k = 0; k < sp->n; ++k) {
    if (sp->s[k].open)
      member_close (&sp->s[k].m);
    free (sp->s[k].path);
  }
  pthread_mutex_destroy (&sp->lock);
  pthread_cond_destroy (&sp->cond);
  free (sp);
}

/* "in use: ...", the problem, or the fit: why s is not usable ("": it
 * is).  Lock held.
 */
static const char *
reason_of (const struct spare *s, char *buf, size_t len)
{
  if (s->taken >= 0) {
    snprintf (buf, len, "in use: a replace of member %d onto it", s->taken);
    return buf;
  }
  if (s->problem[0])
    return s->problem;
  return s->fit;
}

struct json_object *
spares_status (struct spares *sp)
{
  struct json_object *a;
  char buf[WHY_MAX];

  if (sp == NULL)
    return NULL;
  a = json_object_new_array ();
  pthread_mutex_lock (&sp->lock);
  for (unsigned k = 0; k < sp->n; ++k) {
    const struct spare *s = &sp->s[k];
    struct json_object *o;
    const char *why = reason_of (s, buf, sizeof buf);

    if (s->used)
      continue;
    o = json_object_new_object ();
    json_put (o, "path", json_text (s->path));
    json_put (o, "size", s->size ? json_u64 (s->size) : NULL);
    json_put (o, "claimed", json_object_new_boolean (s->claimed));
    json_put (o, "usable", json_object_new_boolean (why[0] == '\0'));
    json_put (o, "reason", json_text (why));
    json_object_array_add (a, o);
  }
  pthread_mutex_unlock (&sp->lock);
  return a;
}

/* Spare k is looked at (busy) by the caller: -1 when it is taken or
 * looked at already.  Lock held.
 */
static int
hold (struct spares *sp, unsigned k)
{
  while (sp->s[k].busy)
    pthread_cond_wait (&sp->cond, &sp->lock);
  if (sp->s[k].taken >= 0 || sp->s[k].used)
    return -1;
  sp->s[k].busy = true;
  return 0;
}

static void
release (struct spares *sp, unsigned k)
{
  sp->s[k].busy = false;
  pthread_cond_broadcast (&sp->cond);
}

/* A change of spare k's state, said once. */
static void
say (const struct spare *s, const char *before)
{
  const char *now = s->problem[0] ? s->problem : s->fit;

  if (strcmp (before, now) == 0)
    return;
  if (now[0])
    stripe_warning ("spare %s: cannot be used: %s", s->path, now);
  else
    stripe_notice ("spare %s: usable again (%" PRIu64 " bytes)", s->path,
                   s->size);
}

void
spares_refresh (struct spares *sp)
{
  struct volume *v = sp ? sp->v : NULL;

  for (unsigned k = 0; sp && k < sp->n; ++k) {
    struct spare *s = &sp->s[k];
    char why[REASON_LEN + 32], before[WHY_MAX], problem[WHY_MAX] = "";
    char fit[WHY_MAX] = "";
    struct member fresh = { 0 };
    bool fatal, open;

    pthread_mutex_lock (&sp->lock);
    if (hold (sp, k) == -1) {
      pthread_mutex_unlock (&sp->lock);
      continue;
    }
    snprintf (before, sizeof before, "%s",
              s->problem[0] ? s->problem : s->fit);
    open = s->open;
    pthread_mutex_unlock (&sp->lock);

    /* s->m is ours until release. */
    if (open && s->m.ops->check (&s->m, why, sizeof why) == -1) {
      snprintf (problem, sizeof problem, "gone: %s", why);
      member_close (&s->m);
      open = false;
    }
    else if (open) {
      /* Still the same device: what it holds cannot have changed (it is
       * claimed), but a grow may have changed what it must fit.
       */
      snprintf (problem, sizeof problem, "%s", s->problem);
      assess_fit (v, &s->m, fit, sizeof fit);
    }
    else if (open_one (sp, k, s->path, &fresh, &fatal, why, sizeof why) == 0) {
      s->m = fresh;
      open = true;
      assess_content (v, &s->m, problem, sizeof problem);
      assess_fit (v, &s->m, fit, sizeof fit);
    }
    else
      snprintf (problem, sizeof problem, "%s", why);

    pthread_mutex_lock (&sp->lock);
    s->open = open;
    s->claimed = open && sp->claim && member_has_inode (&s->m);
    if (open)
      s->size = s->m.size;
    snprintf (s->problem, sizeof s->problem, "%s", problem);
    snprintf (s->fit, sizeof s->fit, "%s", fit);
    say (s, before);
    release (sp, k);
    pthread_mutex_unlock (&sp->lock);
  }
}

int
spares_candidate (struct spares *sp, unsigned k, unsigned i, char *path,
                  size_t plen, char *why, size_t len)
{
  struct volume *v;
  struct spare *s;
  struct drive_health d;
  char reason[REASON_LEN], before[WHY_MAX], problem[WHY_MAX] = "";
  uint8_t buf[4096];
  int r = 0;

  why[0] = '\0';
  if (sp == NULL || k >= sp->n)
    return -1;
  v = sp->v;
  s = &sp->s[k];
  snprintf (path, plen, "%s", s->path);
  pthread_mutex_lock (&sp->lock);
  if (hold (sp, k) == -1) {
    if (!s->used) /* a member now: not worth a word */
      snprintf (why, len, "in use: a replace of member %d onto it", s->taken);
    pthread_mutex_unlock (&sp->lock);
    return 0;
  }
  snprintf (before, sizeof before, "%s", s->problem[0] ? s->problem : s->fit);
  if (!s->open || s->problem[0]) {
    snprintf (why, len, "%s", s->problem);
    release (sp, k);
    pthread_mutex_unlock (&sp->lock);
    return 0;
  }
  pthread_mutex_unlock (&sp->lock);

  /* Large enough for member i (the fit is for every member), and still
   * there, readable and not predicted to fail.
   */
  if (s->m.min_io > v->min_block)
    snprintf (why, len,
              "takes requests of %" PRIu32 " bytes at least, but "
              "the volume's clients were promised %" PRIu32,
              s->m.min_io, sp->v->min_block);
  else {
    pthread_mutex_lock (&v->swap_lock);
    if (i < v->nr_members)
      size_fit (v, &s->m, i, why, len);
    pthread_mutex_unlock (&v->swap_lock);
  }
  if (why[0])
    goto out;
  if (s->m.ops->check (&s->m, reason, sizeof reason) == -1)
    snprintf (problem, sizeof problem, "gone: %s", reason);
  else if (member_pread (&s->m, buf, sizeof buf, 0, true, reason,
                         sizeof reason)
           < 0)
    snprintf (problem, sizeof problem,
              "failing: reading its first %zu "
              "bytes: %s",
              sizeof buf, reason);
  else {
    drive_read (s->path, &d);
    if (d.available
        && drive_predicts_failure (NULL, &d, reason, sizeof reason))
      snprintf (problem, sizeof problem, "failing: its drive %s", reason);
  }
  if (problem[0])
    snprintf (why, len, "%s", problem);
  else
    r = 1;

out:
  pthread_mutex_lock (&sp->lock);
  if (problem[0]) {
    snprintf (s->problem, sizeof s->problem, "%s", problem);
    say (s, before);
  }
  release (sp, k);
  pthread_mutex_unlock (&sp->lock);
  return r;
}

int
spares_take (struct spares *sp, const char *path, unsigned index,
             struct member *m, char *why, size_t len)
{
  unsigned k;
  int r = -1;

  if (sp == NULL)
    return 0;
  pthread_mutex_lock (&sp->lock);
  for (k = 0;
       k < sp->n && (sp->s[k].used || strcmp (sp->s[k].path, path) != 0); ++k)
    ;
  if (k == sp->n)
    r = 0;
  else if (hold (sp, k) == -1)
    snprintf (why, len,
              "spare %s is in use: a replace of member %d onto it "
              "runs",
              path, sp->s[k].taken);
  else {
    struct spare *s = &sp->s[k];
    if (!s->open || s->problem[0])
      snprintf (why, len, "spare %s cannot be used: %s", path, s->problem);
    else {
      *m = s->m;
      m->index = index;
      memset (&s->m, 0, sizeof s->m);
      s->open = false;
      s->taken = (int) index;
      r = 1;
    }
    release (sp, k);
  }
  pthread_mutex_unlock (&sp->lock);
  return r;
}

void
spares_return (struct spares *sp, const char *path, struct member *m,
               bool switched, const char *problem)
{
  unsigned k;

  if (sp == NULL)
    return;
  pthread_mutex_lock (&sp->lock);
  for (k = 0; k < sp->n
              && !(sp->s[k].taken >= 0 && strcmp (sp->s[k].path, path) == 0);
       ++k)
    ;
  if (k < sp->n && switched) {
    sp->s[k].used = true; /* a member now: out of the list */
    sp->s[k].claimed = false;
    sp->s[k].taken = -1;
  }
  else if (k < sp->n) {
    struct spare *s = &sp->s[k];
    char before[WHY_MAX];

    snprintf (before, sizeof before, "in use");
    s->m = *m;
    memset (m, 0, sizeof *m);
    s->open = true;
    s->claimed = sp->claim && member_has_inode (&s->m);
    s->taken = -1;
    snprintf (s->problem, sizeof s->problem, "%s", problem ? problem : "");
    say (s, before);
  }
  pthread_mutex_unlock (&sp->lock);
}
