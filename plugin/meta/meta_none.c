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
  .create_check      = none_create_check,
};
