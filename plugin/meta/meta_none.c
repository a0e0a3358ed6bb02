/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: no metadata (include/meta.h): the config says it all.
 *
 * Members hold data only, from the config's data_offset (0 unless
 * given): byte-compatible with md raid0 arrays made by mdadm --build and
 * with dm-stripe.  Nothing on a member says what it is, so nothing can
 * record a drop-out, a replaced member or which device is which: the
 * config is the only record, and a re-probe takes back only the same
 * inode or device.
 */

#include <stdio.h>

#include "assemble.h"
#include "meta.h"
#include "util.h"

static int
none_finish (const struct stripe_config *cfg, struct assembly *a, char *why,
             size_t len)
{
  (void) why;
  (void) len;
  a->layout = cfg->layout;
  a->size_rule = LAYOUT_SIZE_MD;
  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    a->data_offsets[i] = cfg->data_offset;
    a->data_sizes[i] = 0; /* all of it */
  }
  return 0;
}

/* Nothing on the members, and the config gives their order but no
 * size: each member is used whole (md's zones over every member's size,
 * layout.h), so a missing member's size -- on which the zones' extents
 * and the volume's size depend -- is known only from the device itself.
 * Never placed.
 */
static bool
none_places_missing (const struct stripe_config *cfg, const struct assembly *a,
                     unsigned i, char *why, size_t len)
{
  (void) a;
  why_line (why, len,
            "member %u (%s): metadata \"none\" records nothing on the "
            "members, and the config gives no member's size: its size, "
            "on which the volume's zones and size depend, is known only "
            "from the device itself, so the volume cannot be served "
            "degraded without it",
            i, cfg->members[i]);
  return false;
}

static int
none_create_check (const struct stripe_config *cfg, char *why, size_t len)
{
  (void) cfg;
  snprintf (why, len, "metadata = \"none\": there are no headers to create; "
            "serve the volume directly");
  return -1;
}

const struct meta_ops meta_none_ops = {
  .name              = "none",
  .records_dropouts  = false,
  .dropouts_why      = "",
  .proves_identity   = false,
  .no_reshape        = "nothing on the members could record how far a "
                       "reshape has got, and a crash half-way would leave "
                       "data nobody can find",
  .finish            = none_finish,
  .places_missing    = none_places_missing,
  .create_check      = none_create_check,
};
