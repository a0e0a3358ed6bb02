/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: rewriting the members of a config file: one member (nbdstripe
 * replace), one member by a spare, the members settings as a whole (grow,
 * shrink).  See config_replace_member in include/config.h.
 *
 * The file is the user's: comments, order and layout stay as they are.
 * Only the member's element of the top-level members list changes, found
 * by the same lexer the loader uses (config_text.h), never by searching
 * the raw text (a comment naming the member would be found too).  The
 * result is loaded before it replaces the file (config_commit.c).
 */

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "config_impl.h"
#include "config_text.h"

/* s as a libconfig string literal, quotes included (malloc'd). */
static char *
quote (const char *s)
{
  size_t n = strlen (s);
  char *q = malloc (2 * n + 3), *p = q;

  if (q == NULL)
    return NULL;
  *p++ = '"';
  for (; *s; ++s) {
    if (*s == '"' || *s == '\\')
      *p++ = '\\';
    *p++ = *s;
  }
  *p++ = '"';
  *p = '\0';
  return q;
}

/* Mid-reshape (a grow or shrink stopped, its member replaced offline):
 * member index may be in the joining list, or be the leaving one too,
 * so the three settings are rewritten as grow and shrink write them,
 * index naming new_member in each.
 */
static int
replace_mid_reshape (const char *path, const struct stripe_config *cfg,
                     unsigned index, const char *new_member, char *why,
                     size_t len)
{
  char *members[LAYOUT_MAX_MEMBERS];
  const unsigned stay = cfg->nr_members - cfg->nr_joining;

  for (unsigned i = 0; i < cfg->nr_members; ++i)
    members[i] = i == index ? (char *) new_member : cfg->members[i];
  return config_rewrite_members (
    path,
    &(struct config_members){ stay, members, cfg->nr_joining, members + stay,
                              cfg->has_leaving ? members[cfg->leaving] : NULL,
                              cfg->nr_removed, cfg->removed },
    why, len);
}

int
config_replace_member (const char *path, unsigned index, const char *old,
                       const char *new_member, char *why, size_t len)
{
  struct stripe_config cfg, after;
  struct config_text text = { 0 };
  char err[1024];
  char *real = NULL, *qnew = NULL, *out = NULL;
  size_t a, b, lnew;
  int line, r = -1;

  memset (&cfg, 0, sizeof cfg);
  memset (&after, 0, sizeof after);
  /* A symlinked config stays a symlink: the file it names is the one
   * rewritten, in its own directory.
   */
  real = realpath (path, NULL);
  if (real == NULL) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    goto out;
  }
  if (config_text_read (real, &text, &line, err, sizeof err) == -1) {
    snprintf (why, len, "%s: %s", real, err);
    goto out;
  }
  if (config_load_text (path, text.text, &cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    goto out;
  }
  if (index >= cfg.nr_members || strcmp (cfg.members[index], old) != 0) {
    snprintf (why, len, "%s: member %u is not %s", path, index, old);
    goto out;
  }
  if (cfg.nr_joining > 0 || cfg.has_leaving) {
    r = replace_mid_reshape (path, &cfg, index, new_member, why, len);
    goto out;
  }
  if (config_text_element_span (&text, "members", (int) index, &a, &b)
      == -1) {
    snprintf (why, len, "%s: member %u of the members list cannot be found "
              "in the text", path, index);
    goto out;
  }
  qnew = quote (new_member);
  if (qnew == NULL) {
    snprintf (why, len, "out of memory");
    goto out;
  }
  lnew = strlen (qnew);
  out = malloc (text.len - (b - a) + lnew + 1);
  if (out == NULL) {
    snprintf (why, len, "out of memory");
    goto out;
  }
  memcpy (out, text.text, a);
  memcpy (out + a, qnew, lnew);
  memcpy (out + a + lnew, text.text + b, text.len - b + 1);

  /* What it says now: the same config with one member changed. */
  if (config_load_text (path, out, &after, err, sizeof err) == -1) {
    snprintf (why, len, "the rewritten config does not load: %s", err);
    goto out;
  }
  if (after.nr_members != cfg.nr_members
      || strcmp (after.members[index], new_member) != 0) {
    snprintf (why, len, "the rewritten config does not name %s as member %u",
              new_member, index);
    goto out;
  }
  for (unsigned i = 0; i < cfg.nr_members; ++i)
    if (i != index && strcmp (after.members[i], cfg.members[i]) != 0) {
      snprintf (why, len, "the rewritten config changed member %u", i);
      goto out;
    }

  r = config_commit (real, out, why, len);

out:
  config_free (&cfg);
  config_free (&after);
  config_text_free (&text);
  free (real);
  free (qnew);
  free (out);
  return r;
}

/* ---- a member replaced by a spare (on_failing = "replace") ---- */

/* One change of the text: [a, b) becomes with (NULL: nothing). */
struct edit {
  size_t a, b;
  char *with;
};

/* Whether text[a, b) is blanks (spaces and tabs) only. */
static bool
blank (const char *text, size_t a, size_t b)
{
  for (; a < b; ++a)
    if (text[a] != ' ' && text[a] != '\t' && text[a] != '\r')
      return false;
  return true;
}

/* A cut [*a, *b) that leaves its line empty, or with only a comment
 * (the spare's: "# the blue one"), takes the line with it.
 */
static void
whole_line (const struct config_text *t, size_t *a, size_t *b)
{
  size_t ls = *a, le = *b, c = *b;

  while (ls > 0 && t->text[ls - 1] != '\n')
    ls--;
  while (le < t->len && t->text[le] != '\n')
    le++;
  while (c < le && (t->text[c] == ' ' || t->text[c] == '\t'))
    c++;
  if (c < le
      && (t->text[c] == '#' || (t->text[c] == '/' && t->text[c + 1] == '/')))
    c = le;
  if (blank (t->text, ls, *a) && blank (t->text, c, le)) {
    *a = ls;
    *b = le < t->len ? le + 1 : le;
  }
}

static int
by_position (const void *x, const void *y)
{
  const struct edit *p = x, *q = y;

  /* From the end of the text back; at one place, the longer first (an
   * insertion then lands before what follows the deletion).
   */
  if (p->a != q->a)
    return p->a < q->a ? 1 : -1;
  return p->b < q->b ? 1 : p->b > q->b ? -1 : 0;
}

/* text with the edits made (they do not overlap); malloc'd. */
static char *
apply (const struct config_text *t, struct edit *e, unsigned n)
{
  char *out = strdup (t->text);

  qsort (e, n, sizeof *e, by_position);
  for (unsigned k = 0; k < n && out; ++k) {
    size_t olen = strlen (out), wl = e[k].with ? strlen (e[k].with) : 0;
    char *next = malloc (olen - (e[k].b - e[k].a) + wl + 1);

    if (next) {
      memcpy (next, out, e[k].a);
      if (wl)
        memcpy (next + e[k].a, e[k].with, wl);
      memcpy (next + e[k].a + wl, out + e[k].b, olen - e[k].b + 1);
    }
    free (out);
    out = next;
  }
  return out;
}

/* Whether after is cfg with member index spare, spare out of the spares
 * and old appended to the removed: nothing else of these lists changed.
 */
static bool
spare_took_over (const struct stripe_config *cfg,
                 const struct stripe_config *after, unsigned index,
                 const char *old, const char *spare)
{
  unsigned j = 0;

  if (after->nr_members != cfg->nr_members
      || after->nr_joining != cfg->nr_joining
      || after->nr_spares + 1 != cfg->nr_spares
      || after->nr_removed != cfg->nr_removed + 1
      || strcmp (after->removed[cfg->nr_removed], old) != 0)
    return false;
  for (unsigned i = 0; i < cfg->nr_members; ++i)
    if (strcmp (after->members[i], i == index ? spare : cfg->members[i]) != 0)
      return false;
  for (unsigned i = 0; i < cfg->nr_removed; ++i)
    if (strcmp (after->removed[i], cfg->removed[i]) != 0)
      return false;
  for (unsigned i = 0; i < cfg->nr_spares; ++i)
    if (strcmp (cfg->spares[i], spare) != 0
        && (j >= after->nr_spares
            || strcmp (after->spares[j++], cfg->spares[i]) != 0))
      return false;
  return j == after->nr_spares;
}

/* Reads the config at real (path as the user gave it) into text and cfg,
 * and finds old as members[index] and spare as spares[*k].  -1 with why.
 */
static int
read_for_spare (const char *path, const char *real, unsigned index,
                const char *old, const char *spare, struct config_text *text,
                struct stripe_config *cfg, unsigned *k, char *why, size_t len)
{
  char err[1024];
  int line;

  if (config_text_read (real, text, &line, err, sizeof err) == -1) {
    snprintf (why, len, "%s: %s", real, err);
    return -1;
  }
  if (config_load_text (path, text->text, cfg, err, sizeof err) == -1) {
    snprintf (why, len, "%s", err);
    return -1;
  }
  if (index >= cfg->nr_members - cfg->nr_joining
      || strcmp (cfg->members[index], old) != 0) {
    snprintf (why, len, "%s: member %u is not %s", path, index, old);
    return -1;
  }
  for (*k = 0; *k < cfg->nr_spares && strcmp (cfg->spares[*k], spare) != 0;
       ++*k)
    ;
  if (*k == cfg->nr_spares) {
    snprintf (why, len, "%s: %s is not one of its spares", path, spare);
    return -1;
  }
  return 0;
}

/* The edit *e that adds old to the removed: at the end of the removed
 * list, in place of an empty one, or as a removed setting of its own on
 * the line after the members setting.  -1 with why.
 */
static int
removed_edit (const struct config_text *text, const struct stripe_config *cfg,
              const char *path, const char *old, struct edit *e, char *why,
              size_t len)
{
  char *qold = quote (old);
  size_t a, b;
  int r = -1;

  if (qold == NULL)
    goto oom;
  if (cfg->nr_removed > 0) {
    if (config_text_element_span (text, "removed", (int) cfg->nr_removed - 1,
                                  &a, &b)
        == -1) {
      snprintf (why, len, "%s: the removed list cannot be found in the text",
                path);
      goto out;
    }
    if (asprintf (&e->with, ", %s", qold) == -1)
      goto oom;
    e->a = e->b = b;
  }
  else if (config_text_setting_span (text, "removed", &a, &b) == 0) {
    /* removed = [ ]; */
    if (asprintf (&e->with, "removed = [ %s ];", qold) == -1)
      goto oom;
    e->a = a;
    e->b = b;
  }
  else {
    if (config_text_setting_span (text, "members", &a, &b) == -1) {
      snprintf (why, len, "%s: no top-level members setting in the text",
                path);
      goto out;
    }
    while (b < text->len && text->text[b] != '\n')
      b++;
    if (asprintf (&e->with, "%sremoved = [ %s ];\n", b < text->len ? "" : "\n",
                  qold)
        == -1)
      goto oom;
    e->a = e->b = b < text->len ? b + 1 : b;
  }
  r = 0;
  goto out;

oom:
  snprintf (why, len, "out of memory");
out:
  free (qold);
  return r;
}

/* The edits e[*n...] of the text: members[index] becomes spare,
 * spares[k] goes, old joins the removed.  -1 with why; e[0...*n) are
 * the caller's to free either way.
 */
static int
spare_edits (const struct config_text *text, const struct stripe_config *cfg,
             const char *path, unsigned index, unsigned k, const char *old,
             const char *spare, struct edit *e, unsigned *n, char *why,
             size_t len)
{
  size_t cut[2][2], a, b;
  unsigned ncut;

  /* members[index]: the spare. */
  if (config_text_element_span (text, "members", (int) index, &a, &b) == -1) {
    snprintf (why, len,
              "%s: member %u of the members list cannot be found "
              "in the text",
              path, index);
    return -1;
  }
  e[(*n)++] = (struct edit){ a, b, quote (spare) };
  /* spares[k]: gone, with its comma (and its line when it had one). */
  if (config_text_element_cut (text, "spares", (int) k, cut, &ncut) == -1) {
    snprintf (why, len, "%s: spares[%u] cannot be found in the text", path, k);
    return -1;
  }
  for (unsigned c = 0; c < ncut; ++c) {
    a = cut[c][0];
    b = cut[c][1];
    whole_line (text, &a, &b);
    e[(*n)++] = (struct edit){ a, b, NULL };
  }
  if (removed_edit (text, cfg, path, old, &e[*n], why, len) == -1)
    return -1;
  (*n)++;
  if (e[0].with == NULL) {
    snprintf (why, len, "out of memory");
    return -1;
  }
  return 0;
}

int
config_replace_with_spare (const char *path, unsigned index, const char *old,
                           const char *spare, char *why, size_t len)
{
  struct stripe_config cfg, after;
  struct config_text text = { 0 };
  struct edit e[4] = { { 0 } };
  char err[1024], *real = NULL, *out = NULL;
  unsigned n = 0, k;
  int r = -1;

  memset (&cfg, 0, sizeof cfg);
  memset (&after, 0, sizeof after);
  real = realpath (path, NULL);
  if (real == NULL) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    goto out;
  }
  if (read_for_spare (path, real, index, old, spare, &text, &cfg, &k, why, len)
        == -1
      || spare_edits (&text, &cfg, path, index, k, old, spare, e, &n, why, len)
           == -1)
    goto out;
  out = apply (&text, e, n);
  if (out == NULL) {
    snprintf (why, len, "out of memory");
    goto out;
  }

  /* What it says now: the spare in old's place, and nothing else. */
  if (config_load_text (path, out, &after, err, sizeof err) == -1) {
    snprintf (why, len, "the rewritten config does not load: %s", err);
    goto out;
  }
  if (!spare_took_over (&cfg, &after, index, old, spare)) {
    snprintf (why, len,
              "the rewritten config does not name %s as member "
              "%u, without it among the spares and %s among the removed",
              spare, index, old);
    goto out;
  }
  r = config_commit (real, out, why, len);

out:
  for (unsigned i = 0; i < n; ++i)
    free (e[i].with);
  config_free (&cfg);
  config_free (&after);
  config_text_free (&text);
  free (real);
  free (out);
  return r;
}

/* ---- the members settings as a whole (nbdstripe grow, shrink) ---- */

/* Appends s to the growing text *buf (*len bytes, *cap allocated). */
static int
append (char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
  if (*len + n + 1 > *cap) {
    size_t c = (*len + n + 1) * 2;
    char *b = realloc (*buf, c);
    if (b == NULL)
      return -1;
    *buf = b;
    *cap = c;
  }
  memcpy (*buf + *len, s, n);
  *len += n;
  (*buf)[*len] = '\0';
  return 0;
}

/* NAME = [ "a", "b" ]; (a list) or NAME = "a"; (one). */
static int
append_setting (char **buf, size_t *len, size_t *cap, const char *name,
                char *const *v, unsigned n, bool list)
{
  int r = append (buf, len, cap, name, strlen (name));

  r |= append (buf, len, cap, list ? " = [ " : " = ", list ? 5 : 3);
  for (unsigned i = 0; i < n && r == 0; ++i) {
    char *q = quote (v[i]);
    if (q == NULL)
      return -1;
    r |= append (buf, len, cap, q, strlen (q));
    if (i + 1 < n)
      r |= append (buf, len, cap, ", ", 2);
    free (q);
  }
  r |= append (buf, len, cap, list ? " ];" : ";", list ? 3 : 1);
  return r;
}

static bool
same_members (const struct stripe_config *c, const struct config_members *m)
{
  if (c->nr_members != m->nr_members + m->nr_joining
      || c->nr_joining != m->nr_joining || c->nr_removed != m->nr_removed
      || c->has_leaving != (m->leaving != NULL))
    return false;
  for (unsigned i = 0; i < c->nr_members; ++i)
    if (strcmp (c->members[i], i < m->nr_members
                                 ? m->members[i]
                                 : m->joining[i - m->nr_members])
        != 0)
      return false;
  for (unsigned i = 0; i < c->nr_removed; ++i)
    if (strcmp (c->removed[i], m->removed[i]) != 0)
      return false;
  return !c->has_leaving || strcmp (c->members[c->leaving], m->leaving) == 0;
}

/* The text with the members, joining, leaving and removed settings where
 * members was, each on its line, and nothing else changed.
 */
static char *
rewritten (const struct config_text *text, const struct config_members *m,
           char *why, size_t len)
{
  static const char *const names[] = { "members", "joining", "leaving",
                                       "removed" };
  size_t a[4], b[4], at = 0, olen = 0, cap = 0;
  bool has[4];
  char *out = NULL;
  int r = 0;

  for (unsigned k = 0; k < 4; ++k)
    has[k] = config_text_setting_span (text, names[k], &a[k], &b[k]) == 0;
  if (!has[0]) {
    snprintf (why, len, "no top-level members setting in the text");
    return NULL;
  }
  /* Copy the text in order, each of the four settings left out, the new
   * ones written where members was.
   */
  while (at <= text->len && r == 0) {
    unsigned next = 4;
    for (unsigned k = 0; k < 4; ++k)
      if (has[k] && a[k] >= at && (next == 4 || a[k] < a[next]))
        next = k;
    if (next == 4) {
      r |= append (&out, &olen, &cap, text->text + at, text->len - at);
      break;
    }
    r |= append (&out, &olen, &cap, text->text + at, a[next] - at);
    /* A setting left out on a line of its own takes its line with it. */
    if (next != 0 && b[next] < text->len && text->text[b[next]] == '\n'
        && (a[next] == 0 || text->text[a[next] - 1] == '\n'))
      b[next]++;
    if (next == 0) {
      r |= append_setting (&out, &olen, &cap, "members", m->members,
                           m->nr_members, true);
      if (m->nr_joining) {
        r |= append (&out, &olen, &cap, "\n", 1);
        r |= append_setting (&out, &olen, &cap, "joining", m->joining,
                             m->nr_joining, true);
      }
      if (m->leaving) {
        r |= append (&out, &olen, &cap, "\n", 1);
        r |= append_setting (&out, &olen, &cap, "leaving",
                             (char *const *) &m->leaving, 1, false);
      }
      if (m->nr_removed) {
        r |= append (&out, &olen, &cap, "\n", 1);
        r |= append_setting (&out, &olen, &cap, "removed", m->removed,
                             m->nr_removed, true);
      }
    }
    at = b[next];
  }
  if (r != 0 || out == NULL) {
    snprintf (why, len, "out of memory");
    free (out);
    return NULL;
  }
  return out;
}

/* The text config_rewrite_members would write, loaded and checked;
 * written when write.
 */
static int
rewrite_members (const char *path, const struct config_members *m,
                 bool write, char *why, size_t len)
{
  struct stripe_config after;
  struct config_text text = { 0 };
  char err[1024], *real, *out = NULL;
  int line, r = -1;

  memset (&after, 0, sizeof after);
  real = realpath (path, NULL);
  if (real == NULL) {
    snprintf (why, len, "%s: %s", path, strerror (errno));
    return -1;
  }
  if (config_text_read (real, &text, &line, err, sizeof err) == -1) {
    snprintf (why, len, "%s: %s", real, err);
    goto out;
  }
  out = rewritten (&text, m, err, sizeof err);
  if (out == NULL) {
    snprintf (why, len, "%s: %s", path, err);
    goto out;
  }
  if (config_load_text (path, out, &after, err, sizeof err) == -1) {
    snprintf (why, len, "the rewritten config does not load: %s", err);
    goto out;
  }
  if (!same_members (&after, m)) {
    snprintf (why, len, "the rewritten config does not list the members "
              "asked for");
    goto out;
  }
  r = write ? config_commit (real, out, why, len) : 0;

out:
  config_free (&after);
  config_text_free (&text);
  free (real);
  free (out);
  return r;
}

int
config_rewrite_members (const char *path, const struct config_members *m,
                        char *why, size_t len)
{
  return rewrite_members (path, m, true, why, len);
}

int
config_check_members (const char *path, const struct config_members *m,
                      char *why, size_t len)
{
  return rewrite_members (path, m, false, why, len);
}
