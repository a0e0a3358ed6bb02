/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the served array -- the layer above the volume and health.
 *
 * A volume (volume.h) is members, a layout, the views a restripe reads
 * through, the gate and which members hold unsynced writes: the I/O
 * path, and nothing that decides.  Health (health.h) records, judges
 * and reports.  The array owns them both, and everything that acts:
 *   - opening, in one order: the config's headers assembled (assemble.h),
 *     the volume opened over them, the hot spares opened and claimed
 *     with the members (spares.h), the health monitor made;
 *   - the jobs: replace (replace.h), grow and shrink (reshape.h), both
 *     through the mover (mover.h); the scrub (scrub.h); which of them may
 *     run together (jobs.h; the volume's job slot asks the array what
 *     runs outside it);
 *   - the spare policy (on_failing = "replace"): health tells the array
 *     that a member's state changed, the policy decides to replace it
 *     onto a spare (spare_policy.c);
 *   - the status document: health writes it, the array adds each part's
 *     own JSON (the mover's, the scrub's, the spares', on_failing's, the
 *     lost ranges).
 *
 * Lifetime, as the plugin drives it: array_open before nbdkit forks
 * (every check, nothing written), array_start after it (threads, the
 * generation bump of a new serve, a reshape resumed), array_stop at
 * shutdown (no job starts any more, jobs stopped, health's last status
 * written while the members are open), array_close at unload.
 */
#ifndef NBDSTRIPE_ARRAY_H
#define NBDSTRIPE_ARRAY_H

#include <pthread.h>
#include <stdbool.h>

#include "assemble.h"
#include "volume.h"

struct health;
struct health_params;
struct scrub;
struct spares;
struct spare_policy;
struct stripe_config;

/* How an array is opened: the volume's options (chunk, cache,
 * connections and timeout come from cfg when there is one), and, for a
 * served array, its health monitor's parameters.
 */
struct array_options {
  struct volume_options volume;
  /* The config; NULL: ad hoc, the members nr_paths paths, no headers
   * assembled, no spares.
   */
  const struct stripe_config *cfg;
  const char *config_file; /* cfg's file: rewritten by jobs */
  unsigned nr_paths;
  const char *const *paths;
  /* Serve the volume without the members that cannot be opened or read
   * (assemble_degraded): volume.readonly must be set.
   */
  bool degraded;
  /* NULL: no health monitor (a check, an offline job).  Else its
   * parameters, name and size filled in by array_open.
   */
  const struct health_params *health;
};

struct array {
  struct volume volume;
  struct assembly assembly; /* what the members said (cfg) */
  const struct stripe_config *cfg;
  const char *config_file;
  bool opened;
  struct health *health;    /* the monitor, NULL: none */
  struct spares *spares;    /* NULL: none */
  struct spare_policy *policy;
  /* The scrub (scrub.h): the running or last one, under scrub_lock. */
  struct scrub *scrub;
  pthread_mutex_t scrub_lock;
  /* A health prober still blocked in a dead device at array_stop: the
   * volume is not freed under it (the process is about to exit).
   */
  bool prober_busy;
};

/* Open the array o describes into *a (zeroed by the caller or not):
 * every check done and nothing written.  -1 after logging every problem
 * (array_close it all the same).
 */
extern int array_open (struct array *a, const struct array_options *o);

/* After nbdkit forks: the volume's and health's threads, the spare
 * policy, a new generation on the members (a member left out of this
 * serve is stale from now on), the config fixed as the members say,
 * a reshape under way resumed.  -1 after logging why.
 */
extern int array_start (struct array *a);

/* Shutdown, in order: no replace onto a spare starts any more, the jobs
 * stop (a replace switching finishes), then health stops and writes its
 * last status while the members are still open.
 */
extern void array_stop (struct array *a);

/* Close what array_open opened (array_stop first when started). */
extern void array_close (struct array *a);

/* Health's ops over volume v's members (volume.h's volume_member_*):
 * check, probe, adopt, discard, dropped; the rest NULL.
 */
struct health_ops;
extern void array_health_ops (struct volume *v, struct health_ops *ops);

/* The status document's extra parts (health_ops.status_extra). */
struct json_object;
extern void array_status_extra (void *opaque, struct json_object *root);

/* The spare policy (spare_policy.c), on_failing = "replace": made by
 * array_open, its thread started by array_start and stopped by
 * array_stop.  The replace it starts says when it has started and when
 * it ends (replace.c).
 */
extern struct spare_policy *spare_policy_new (struct array *a,
                                              bool replace,
                                              unsigned probe_interval);
extern int spare_policy_start (struct spare_policy *p);
extern void spare_policy_stop (struct spare_policy *p);
extern void spare_policy_free (struct spare_policy *p);
extern void spare_policy_state_changed (struct spare_policy *p, unsigned i,
                                        enum member_state s);
extern void spare_policy_started (struct spare_policy *p, unsigned i,
                                  const char *spare);
extern void spare_policy_ended (struct spare_policy *p, unsigned i,
                                bool replaced, const char *why);
extern struct json_object *spare_policy_json (struct spare_policy *p);

#endif /* NBDSTRIPE_ARRAY_H */
