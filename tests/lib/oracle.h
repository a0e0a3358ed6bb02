/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: an independent model of the layout, the oracle of the
 * unit tests (tests/unit/test_layout.c, test_plan.c) and of the
 * integration tests (tests/integration/test_io.c, test_params.c,
 * tests/remote/test_remote.c).
 *
 * Deliberately NOT built on plugin/layout/layout.c: it does not know about zones
 * at all.  It simulates Linux md raid0 with RAID0_ALT_MULTIZONE_LAYOUT one
 * stripe row at a time and records, for every logical chunk, which member
 * and which member chunk hold it (and the reverse table).
 *
 * Why the row simulation is the alt multi-zone layout: row r (member
 * offset r*chunk) is made of member chunk r of every member that has more
 * than r usable chunks, taken in member index order, and logical chunks
 * are numbered row after row.  A zone is a maximal run of rows
 * [level, next) with the same set of members, of size nr_devs.  Its
 * zone-relative chunk j = (r - level) * nr_devs + i is the i-th member of
 * row r, i.e. the (j mod nr_devs)-th member of the zone, at member chunk
 * r = level + j div nr_devs, i.e. member offset
 * zone_dev_start + (j div nr_devs) * chunk with zone_dev_start =
 * level * chunk.  That is exactly md's map_sector() when it is given the
 * zone-relative sector (the ALT layout); with equal members there is one
 * zone and logical chunk k is on member k mod N at member chunk k div N,
 * offset (k div N)*chunk.  md's original layout (ORACLE_ORIG) fills the
 * same rows but gives logical chunk c to the (c mod width)-th member of
 * its row: md before Linux 3.14 fed map_sector() the volume's sector, not
 * the zone's.
 */
#ifndef NBDSTRIPE_TEST_ORACLE_H
#define NBDSTRIPE_TEST_ORACLE_H

#include <stdbool.h>
#include <stdint.h>

#define ORACLE_MAX_MEMBERS 64
#define ORACLE_ORIG 1 /* md's RAID0_ORIG_LAYOUT */
#define ORACLE_ALT 2  /* md's RAID0_ALT_MULTIZONE_LAYOUT */

struct oracle {
  unsigned layout; /* ORACLE_ORIG or ORACLE_ALT */
  uint64_t chunk;
  unsigned nr_members;
  uint64_t raw_size[ORACLE_MAX_MEMBERS]; /* member size as given */
  uint64_t usable[ORACLE_MAX_MEMBERS];   /* rounded down to whole chunks */
  /* usable / chunk: the rows member i takes part in */
  uint64_t member_chunks[ORACLE_MAX_MEMBERS];
  uint64_t size;          /* volume size: md's raid0_size (the sum of
                           * member sectors masked with ~(chunk sectors
                           * - 1)), which a non-power-of-two chunk can
                           * make smaller than nr_chunks * chunk */
  uint64_t nr_chunks;     /* logical chunks */
  unsigned *chunk_member; /* [nr_chunks] logical chunk -> member */
  uint64_t *chunk_row;    /* [nr_chunks] logical chunk -> member chunk */
  /* [member_chunks[i]] member chunk -> logical chunk */
  uint64_t *rev[ORACLE_MAX_MEMBERS];
  /* Rows (the largest member_chunks); row_start[r] is the logical chunk
   * starting row r, row_start[nr_rows] == nr_chunks.
   */
  uint64_t nr_rows;
  uint64_t *row_start; /* [nr_rows + 1] */
  /* Logical offsets where the set of members changes (zone starts, > 0). */
  unsigned nr_boundaries;
  uint64_t boundary[ORACLE_MAX_MEMBERS];
};

/* Returns 0, or -1 if the configuration is invalid (chunk 0, no members,
 * more than ORACLE_MAX_MEMBERS or a member smaller than a chunk) or memory
 * runs out.  Either way oracle_free may be called.
 */
extern int oracle_init (struct oracle *o, uint64_t chunk, unsigned n,
                        const uint64_t *sizes);
/* The same for md layout ORACLE_ORIG or ORACLE_ALT (oracle_init: ALT). */
extern int oracle_init_as (struct oracle *o, unsigned layout, uint64_t chunk,
                           unsigned n, const uint64_t *sizes);
extern void oracle_free (struct oracle *o);

/* Where the logical byte at off lives.  Returns how many bytes from off
 * stay contiguous on that member (up to the end of the chunk).
 */
extern uint64_t oracle_map (const struct oracle *o, uint64_t off,
                            unsigned *member, uint64_t *member_off);

/* The logical offset of a member byte; false beyond the usable size or
 * beyond the volume's end (md's size rule).
 */
extern bool oracle_unmap (const struct oracle *o, unsigned member,
                          uint64_t member_off, uint64_t *off);

/* Stripe width at logical offset off (members in its zone). */
extern unsigned oracle_width_at (const struct oracle *o, uint64_t off);

#endif /* NBDSTRIPE_TEST_ORACLE_H */
