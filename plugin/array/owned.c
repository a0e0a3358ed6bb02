/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: a new device against what the volume owns.  See
 * include/owned.h.
 */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "owned.h"

/* The lists of a config NEW is compared with, and why a device on each
 * cannot be taken.
 */
struct list {
  unsigned flag;
  const char *name; /* "spare" in "spare 0" */
  const char *why;
};

static const struct list lists[] = {
  { OWNED_MEMBERS, "member", "a device is used once in a volume" },
  { OWNED_SPARES, "spare",
    "a device is a member or a spare, not both (take it out of spares "
    "first, or replace a member onto it)" },
  { OWNED_REMOVED, "removed member",
    "a removed member is never used again (drop it from removed, and "
    "wipe it, to use it anew)" },
};

/* Entry i of the list flag of cfg (NULL past its end). */
static const char *
entry (const struct stripe_config *cfg, unsigned flag, unsigned i)
{
  switch (flag) {
  case OWNED_MEMBERS: return i < cfg->nr_members ? cfg->members[i] : NULL;
  case OWNED_SPARES: return i < cfg->nr_spares ? cfg->spares[i] : NULL;
  default: return i < cfg->nr_removed ? cfg->removed[i] : NULL;
  }
}

/* How NEW (path, n) is the device at opath (o), in words that say which
 * kind of alias it is; false when it is not.
 */
static bool
alias_words (const char *path, const struct identity *n, const char *opath,
             const struct identity *o, char *how, size_t len)
{
  char rn[PATH_MAX], ro[PATH_MAX];

  if (!identity_alias (n, o, how, len))
    return false;
  if (n->kind == ID_FILE && o->kind == ID_FILE) {
    if (realpath (path, rn) && realpath (opath, ro) && strcmp (rn, ro) == 0)
      snprintf (how, len, "the same file (%.400s)", rn);
    else
      snprintf (how, len,
                "the same file through another hard link "
                "(inode %llu)",
                (unsigned long long) n->st_ino);
  }
  else if (n->kind == ID_NBD || n->st_rdev == o->st_rdev)
    ; /* identity_alias's words say it */
  else if (n->via[0] && !o->via[0])
    snprintf (how, len, "a %s", n->via);
  else if (n->via[0])
    snprintf (how, len, "a %s, overlapping it (%s)", n->via, o->via);
  else if (o->via[0])
    snprintf (how, len, "what it is over (%s)", o->via);
  return true;
}

int
owned_check (const struct stripe_config *cfg, const char *path,
             const struct identity *id, unsigned which, char *why, size_t len)
{
  for (size_t l = 0; l < sizeof lists / sizeof lists[0]; ++l) {
    const char *opath;

    if (!(which & lists[l].flag))
      continue;
    for (unsigned i = 0; (opath = entry (cfg, lists[l].flag, i)); ++i) {
      struct identity oid;
      char how[512], reason[256];

      if (strcmp (opath, path) == 0) {
        if (lists[l].flag == OWNED_SPARES && (which & OWNED_SPARE_AS_NAMED))
          continue;
        snprintf (why, len, "%s: NEW %s is %s %u already: %s", cfg->path, path,
                  lists[l].name, i, lists[l].why);
        return -1;
      }
      if (identity_of_name (opath, &oid, reason, sizeof reason) == -1
          || !alias_words (path, id, opath, &oid, how, sizeof how))
        continue;
      snprintf (why, len,
                "%s: NEW %s is %s %u (%s) under another name: "
                "%s: %s",
                cfg->path, path, lists[l].name, i, opath, how,
                lists[l].flag == OWNED_SPARES && (which & OWNED_SPARE_AS_NAMED)
                  ? "name the spare as the config does to replace onto it"
                  : lists[l].why);
      return -1;
    }
  }
  return 0;
}
