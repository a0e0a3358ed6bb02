/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: assembling a volume from its config and its members'
 * metadata -- one algorithm for every format (include/meta.h).
 *
 * Reads the metadata of every member named in the config (read-only:
 * nothing is ever written) and checks that together they form the volume
 * the config describes: each member's record readable (the format's
 * magic, version and checksum); no two names for one device, no two
 * members showing one member UUID; one array UUID (the one most members
 * show); the format's own checks of the array against the config
 * (count, chunk, layout, name, UUID, data offset) and of each member
 * against the others (geometry, size, marked replaced); each member's
 * slot (index, md role) its position in the config, no slot claimed
 * twice; one generation (events): the newest record speaks for the
 * volume, and a member one generation behind it is the trace of an
 * update a crash cut short (meta_update), accepted unless the newest
 * record says it is behind.  Every problem found is logged on its
 * own line naming the member; for members in the wrong order the message
 * gives the right order.
 */
#ifndef NBDSTRIPE_ASSEMBLE_H
#define NBDSTRIPE_ASSEMBLE_H

#include <stdint.h>

#include "config.h"
#include "layout.h"
#include "meta.h"

/* What the members' metadata (or, with metadata "none", the config) says
 * the volume is: everything volume_open needs beyond the member names.
 */
struct assembly {
  const struct meta_ops *meta;     /* the format */
  uint32_t layout;                 /* LAYOUT_MD_* */
  enum layout_size_rule size_rule; /* LAYOUT_SIZE_ZONES: header v1 */
  unsigned nr;
  /* The members assembled: the config's, but joining ones a grow never
   * started on and a leaving one a shrink finished with (config_note).
   */
  const char *paths[LAYOUT_MAX_MEMBERS];
  /* The config names a reshape its members say is not under way: it is
   * to be rewritten (paths; left: a member a finished shrink removed).
   */
  bool config_stale;
  const char *left;
  char config_note[256];
  uint64_t data_offsets[LAYOUT_MAX_MEMBERS]; /* bytes, per member */
  /* Bytes of data each member holds; 0: all of it from its data offset
   * on (metadata "none").
   */
  uint64_t data_sizes[LAYOUT_MAX_MEMBERS];
  uint64_t events; /* the volume's generation: the newest */
  unsigned ref;    /* the member whose record speaks for the array */
  /* Each member's record (heap); NULL with metadata "none". */
  struct meta_member *members;
  /* A reshape under way (members: the union of both layouts). */
  struct meta_reshape reshape;
  struct lost lost; /* the volume's lost ranges (lost.h) */
  /* assemble_degraded: bit i, member i could not be opened or its
   * record read (missing_why[i] says why); it is served as lost.
   */
  uint64_t missing;
  char missing_why[LAYOUT_MAX_MEMBERS][256];
  /* The allocation map (header.h; map_shift 0: none). */
  unsigned map_shift;
  uint64_t map_offset, map_bytes;
};

/* Free what an assembly holds (the members' records); a zeroed or freed
 * one is fine.
 */
extern void assembly_free (struct assembly *a);

/* Returns 0 when the volume can be served, -1 (after logging every
 * problem) when it cannot.  Members must all be at one generation
 * (events); one behind the others is stale (it dropped out while the
 * volume was served, or is an older copy).  By cfg->metadata: headers,
 * md superblocks, or (none) the config alone.
 */
extern int assemble (const struct stripe_config *cfg, struct assembly *a);

/* The same, except that members that cannot be opened or whose record
 * cannot be read are left out (a->missing), so long as one member that
 * can be read speaks for the volume and the records read place each
 * one left out exactly (meta.h, places_missing): a volume served
 * degraded, read-only (nothing is ever written to a member by
 * assembly).  Headers place every member (each records every member's
 * size and data offset); md superblocks and none never do (a member's
 * data size is on that member alone, or nowhere): refused, naming the
 * member, its file and what is not recorded.
 */
extern int assemble_degraded (const struct stripe_config *cfg,
                              struct assembly *a);

/* Read the md superblock of one member, a path or an NBD URI, read-only:
 * version 1.2, 1.1 or 1.0 (the newest when several are valid), where it
 * was found, the member's identity and size (each may be NULL).  -1 with
 * why (naming what is there instead: an nbdstripe header, an md 0.90
 * superblock, nothing) otherwise.
 */
struct md_super;
struct identity;
extern int md_read_member (const char *path, struct md_super *sb,
                           uint64_t *at, struct identity *id, uint64_t *size,
                           char *why, size_t len);

/* The same, except that member stale_ok may be behind the others (for
 * `nbdstripe accept`), and other stale members are only noted (each is
 * taken back on its own); *events_of is set to stale_ok's generation.
 */
extern int assemble_accepting (const struct stripe_config *cfg,
                               struct assembly *a, unsigned stale_ok,
                               uint64_t *events_of);

#endif /* NBDSTRIPE_ASSEMBLE_H */
