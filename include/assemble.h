/* nbdstripe: assembling a volume from its config and its members' headers.
 *
 * Reads the header of every member named in the config (read-only: nothing
 * is ever written) and checks that together they form the volume the
 * config describes: right magic, version and CRC; one array UUID; the
 * member count of the config; each member's index equal to its position
 * in the config; the same chunk, layout and data offset everywhere; every
 * member at least as large as its header says.  Every problem found is
 * logged on its own line naming the member; for members in the wrong
 * order the message gives the right order.
 */
#ifndef NBDSTRIPE_ASSEMBLE_H
#define NBDSTRIPE_ASSEMBLE_H

#include <stdint.h>

#include "config.h"
#include "layout.h"
#include "header.h"

struct assembly {
  struct header hdr; /* the agreed header (the majority's fields) */
  uint64_t data_offset;
  uint64_t data_sizes[LAYOUT_MAX_MEMBERS];
  uint8_t member_uuid[LAYOUT_MAX_MEMBERS][16];
};

/* Returns 0 when the volume can be served, -1 (after logging every
 * problem) when it cannot.  Members must all be at one generation
 * (events); one behind the others is stale (it dropped out while the
 * volume was served, or is an older copy).
 */
extern int assemble (const struct stripe_config *cfg, struct assembly *a);

/* The same, except that member stale_ok may be behind the others (for
 * `nbdstripe accept`); *events_of is set to that member's generation.
 */
extern int assemble_accepting (const struct stripe_config *cfg,
                               struct assembly *a, unsigned stale_ok,
                               uint64_t *events_of);

/* Open the volume cfg describes -- one function for the plugin and the
 * command: its headers assembled first when it has them (nothing is
 * opened for writing before they agree), then volume_open with o, whose
 * chunk, cache, connections, timeout and assembly come from cfg.  -1
 * after logging every problem.
 */
struct volume;
struct volume_options;
extern int volume_open_config (struct volume *v,
                               const struct stripe_config *cfg,
                               const struct volume_options *o,
                               struct assembly *a);

#endif /* NBDSTRIPE_ASSEMBLE_H */
