/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the served array opened, started, stopped and closed in one
 * order, and the status document's parts.  See include/array.h.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "array.h"
#include "config.h"
#include "health.h"
#include "json.h"
#include "log.h"
#include "meta.h"
#include "mover.h"
#include "reshape.h"
#include "scrub.h"
#include "spares.h"
#include "volume.h"

/* The job slot's view of what runs beside it: the scrub. */
static void
other_jobs (void *opaque, struct jobs_running *r)
{
  scrub_jobs (opaque, r);
}

/* The volume, from the config (its headers assembled first: nothing is
 * opened for writing before they agree) or ad hoc, then the spares,
 * checked against the members as they are opened.
 */
static int
open_volume (struct array *a, const struct array_options *ao)
{
  const struct stripe_config *cfg = ao->cfg;
  struct volume_options o = ao->volume;

  if (cfg == NULL) {
    if (volume_open (&a->volume, ao->nr_paths, ao->paths, &o) == -1)
      return -1;
    a->opened = true;
    return 0;
  }
  o.chunk = cfg->chunk;
  o.cache = cfg->cache;
  o.connections = cfg->remote.connections;
  o.timeout = cfg->health.set.io_timeout;
  if (o.accept_stale) {
    uint64_t events;
    if (assemble_accepting (cfg, &a->assembly, o.stale_index, &events) == -1)
      return -1;
  }
  else if (ao->degraded) {
    if (assemble_degraded (cfg, &a->assembly) == -1)
      return -1;
  }
  else if (assemble (cfg, &a->assembly) == -1)
    return -1;
  o.assembly = &a->assembly;
  if (volume_open (&a->volume, a->assembly.nr, a->assembly.paths, &o) == -1)
    return -1;
  a->opened = true;
  return spares_open (&a->spares, &a->volume, cfg->nr_spares, cfg->spares,
                      o.claim);
}

static int
member_check (void *opaque, unsigned i, char *why, size_t len)
{
  return volume_member_check (opaque, i, why, len);
}

static int
member_probe (void *opaque, unsigned i, void **fresh, char *why, size_t len)
{
  return volume_member_probe (opaque, i, fresh, why, len);
}

static void
member_adopt (void *opaque, unsigned i, void *fresh)
{
  volume_member_adopt (opaque, i, fresh);
}

static void
member_discard (void *opaque, unsigned i, void *fresh)
{
  (void) opaque;
  (void) i;
  volume_member_discard (fresh);
}

static void
member_dropped (void *opaque, unsigned i)
{
  volume_member_dropped (opaque, i);
}

void
array_health_ops (struct volume *v, struct health_ops *ops)
{
  memset (ops, 0, sizeof *ops);
  ops->opaque = v;
  ops->check = member_check;
  ops->probe = member_probe;
  ops->adopt = member_adopt;
  ops->discard = member_discard;
  ops->dropped = member_dropped;
}

/* Health's one notification: the spare policy decides. */
static void
state_changed (void *opaque, unsigned i, enum member_state s)
{
  struct array *a = opaque;

  spare_policy_state_changed (a->policy, i, s);
}

/* The health monitor, told the volume's size and members; its threads
 * start with array_start.
 */
static int
open_health (struct array *a, const struct health_params *base)
{
  struct volume *v = &a->volume;
  struct health_params p = *base;
  struct health_ops ops;
  const char *paths[LAYOUT_MAX_MEMBERS];
  unsigned classes[LAYOUT_MAX_MEMBERS];
  char uuid[37];

  p.size = v->layout.size;
  p.chunk = v->layout.chunk;
  if (meta_uuid_shown (&v->meta, uuid)[0])
    p.uuid = uuid;
  for (unsigned i = 0; i < v->nr_members; ++i) {
    paths[i] = v->members[i].path;
    classes[i] = member_remote (&v->members[i]);
  }
  p.member_class = classes;
  array_health_ops (v, &ops);
  ops.listener = a;
  ops.status_extra = array_status_extra;
  ops.state_changed = state_changed;
  a->health = health_new (&p, v->nr_members, paths, &ops);
  if (a->health == NULL) {
    stripe_error ("health: %m");
    return -1;
  }
  v->health = a->health;
  for (unsigned i = 0; i < v->nr_members; ++i)
    if (v->missing >> i & 1) {
      char why[300];
      snprintf (why, sizeof why, "served degraded without it: %s",
                a->assembly.missing_why[i]);
      health_member_missing (a->health, i, why);
    }
  return 0;
}

int
array_open (struct array *a, const struct array_options *o)
{
  memset (a, 0, sizeof *a);
  pthread_mutex_init (&a->scrub_lock, NULL);
  a->cfg = o->cfg;
  a->config_file = o->config_file;
  if (open_volume (a, o) == -1)
    return -1;
  a->volume.other_jobs = other_jobs;
  a->volume.other_jobs_opaque = a;
  if (o->health == NULL)
    return 0;
  /* The policy listens to health: made before it. */
  a->policy = spare_policy_new (a,
                                o->cfg && o->cfg->on_failing
                                            == ON_FAILING_REPLACE,
                                o->health->set.probe_interval
                                  ? o->health->set.probe_interval
                                  : HEALTH_DEFAULT_PROBE_INTERVAL);
  if (a->policy == NULL) {
    stripe_error ("spare policy: %m");
    return -1;
  }
  return open_health (a, o->health);
}

int
array_start (struct array *a)
{
  struct volume *v = &a->volume;
  char why[1024];

  if (volume_start (v) == -1 || health_start (a->health) == -1)
    return -1;
  if (spare_policy_start (a->policy) == -1) {
    stripe_error ("spare policy: cannot start a thread: %m");
    return -1;
  }
  /* A new generation each time the volume is served (writable, with
   * headers): a member left out of it -- the device a replace killed
   * half-way switched from, or to -- is stale from now on, whatever it
   * held when it was left.
   */
  volume_adopt_map (v);
  volume_bump_generation (v, -1, "served");
  if (a->assembly.config_stale && !v->readonly
      && reshape_fix_config (a->config_file, &a->assembly, why, sizeof why)
           == -1)
    stripe_error ("%s: not rewritten as its members say (%s): it is served "
                  "as they say all the same",
                  a->config_file, why);
  if (a->assembly.reshape.active
      && reshape_resume (v, &a->assembly, a->config_file, why, sizeof why)
           == -1) {
    stripe_error ("%s: the reshape under way cannot go on: %s",
                  a->config_file, why);
    return -1;
  }
  return 0;
}

void
array_stop (struct array *a)
{
  /* No replace onto a spare starts from now on (one being started is
   * waited for).
   */
  spare_policy_stop (a->policy);
  /* A replace still copying is cancelled (the volume stays as it was,
   * NEW without metadata) or, if it is switching, finishes; a scrub is
   * cancelled.
   */
  if (a->opened) {
    mover_stop (&a->volume);
    scrub_stop (a);
  }
  /* The threads stop and the last status (running: false) is written
   * while the members are still open, the last replace in it
   * (array_close frees it).
   */
  a->volume.health = NULL;
  if (!health_free (a->health))
    a->prober_busy = true;
  a->health = NULL;
}

void
array_close (struct array *a)
{
  /* A prober still blocked in a dead device uses the members: they
   * stay (the process is about to exit).
   */
  if (a->prober_busy)
    return;
  spare_policy_free (a->policy);
  a->policy = NULL;
  if (a->opened) {
    scrub_free (a);
    /* The jobs freed first: a replace hands the spare it took back. */
    volume_close (&a->volume);
    a->opened = false;
  }
  spares_close (a->spares);
  a->spares = NULL;
  assembly_free (&a->assembly);
  pthread_mutex_destroy (&a->scrub_lock);
}

/* What the allocation map says (alloc.h), or why there is none: then
 * moves and scrubs cover every byte.
 */
static struct json_object *
alloc_json (struct volume *v)
{
  struct json_object *o = json_object_new_object ();
  uint64_t used;

  if (v->alloc == NULL) {
    json_put (o, "region", NULL);
    json_put (o, "none",
              json_text (strcmp (meta_format (&v->meta), "header") == 0
                           ? "no room before its data offset, or made "
                             "before maps and not yet served writable"
                           : "its metadata keeps none"));
    return o;
  }
  used = alloc_used_bytes (v->alloc, v->layout.size);
  json_put (o, "region", json_u64 (UINT64_C (1) << v->alloc->shift));
  json_put (o, "bytes_in_use", json_u64 (used));
  json_put (o, "bytes_free", json_u64 (v->layout.size - used));
  return o;
}

void
array_status_extra (void *opaque, struct json_object *root)
{
  struct array *a = opaque;
  struct volume *v = &a->volume;
  struct volume_mover *vm = volume_mover_last (v);
  struct json_object *s = scrub_status (a);
  struct json_object *sp = spares_status (a->spares);

  if (vm)
    vm->status (vm, root);
  if (s)
    json_put (root, "scrub", s);
  if (sp)
    json_put (root, "spares", sp);
  if (a->policy)
    json_put (root, "on_failing", spare_policy_json (a->policy));
  if (meta_on_members (&v->meta))
    json_put (root, "lost", volume_lost_json (v));
  json_put (root, "allocation_map", alloc_json (v));
}
