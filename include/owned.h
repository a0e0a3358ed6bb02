/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: whether a device a job is about to take for a volume (a
 * grow's NEW, a replace's NEW) is one the volume owns already, under any
 * name: one of its members (the joining ones included), of its spares or
 * of its removed members, as its config lists them.
 *
 * Each device the config names is compared with NEW by its string and by
 * its identity (identity.h: the same file through a symlink or a hard
 * link, a loop device over it, a partition of it, another spelling of
 * one NBD server and export), taken by name without using it
 * (identity_of_name: no data read, nothing claimed, no NBD connection).
 * One that cannot be looked at now (gone, unreadable) is compared by its
 * string alone.  No byte is written anywhere: a caller checks before it
 * writes.
 *
 * Taking such a device anyway is how a volume ends up unservable: the
 * next serve refuses a device that is a member and a spare, or a removed
 * member listed again -- after the grow or replace wrote over it.
 */
#ifndef NBDSTRIPE_OWNED_H
#define NBDSTRIPE_OWNED_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "identity.h"

/* What owned_check compares NEW with. */
enum {
  OWNED_MEMBERS = 1, /* members and joining ones */
  OWNED_SPARES = 2,
  OWNED_REMOVED = 4,
  /* A spare named exactly as the config names it is not refused (a
   * replace takes it from the spares); under another name it is.
   */
  OWNED_SPARE_AS_NAMED = 8,
};

/* NEW, named path (as the job was given it) and of identity id, against
 * what cfg lists (which: OWNED_*).  0 when it is none of them; -1 with
 * why naming the config file, NEW, and what NEW is and how, e.g.
 * "/etc/v.conf: NEW /dev/loop3 is spare 0 (/srv/a.img) under another
 * name: a loop device 7:3 from offset 0 over inode 12 on 254:0".
 */
extern int owned_check (const struct stripe_config *cfg, const char *path,
                        const struct identity *id, unsigned which, char *why,
                        size_t len);

#endif /* NBDSTRIPE_OWNED_H */
