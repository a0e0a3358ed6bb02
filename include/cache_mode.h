/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: how members are written, as qemu's cache modes.
 *
 * writeback: page cache, durable on FLUSH/FUA.  writethrough: every write
 * durable before it is acknowledged.  direct: O_DIRECT, no page cache
 * (durable on FLUSH/FUA).
 */
#ifndef NBDSTRIPE_CACHE_MODE_H
#define NBDSTRIPE_CACHE_MODE_H

enum cache_mode { CACHE_WRITEBACK, CACHE_WRITETHROUGH, CACHE_DIRECT };

extern const char *cache_mode_name (enum cache_mode mode);
/* Returns -1 for an unknown name. */
extern int cache_mode_parse (const char *name, enum cache_mode *mode);

#endif /* NBDSTRIPE_CACHE_MODE_H */
