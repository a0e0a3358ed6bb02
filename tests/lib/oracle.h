/* nbdstripe integration tests: an independent model of the layout.
 *
 * Deliberately NOT built on plugin/layout.c: it derives the mapping by
 * brute force, simulating md raid0's chunk allocation row by row.  Row r
 * (member offset r*chunk) holds one chunk of every member whose usable size
 * exceeds r chunks; the rows are filled in order and, inside a row, members
 * in index order.  That is exactly RAID0_ALT_MULTIZONE_LAYOUT: a zone is a
 * run of rows with the same set of members, zone-relative chunk j lands on
 * the zone's (j mod nr_devs)-th member at zone_dev_start + (j div nr_devs)
 * chunks.  With equal members it degenerates to chunk k -> member k mod N,
 * offset (k div N)*chunk.
 */
#ifndef NBDSTRIPE_TEST_ORACLE_H
#define NBDSTRIPE_TEST_ORACLE_H

#include <stdbool.h>
#include <stdint.h>

#define ORACLE_MAX_MEMBERS 64

struct oracle {
  uint64_t chunk;
  unsigned nr_members;
  uint64_t raw_size[ORACLE_MAX_MEMBERS]; /* member size as given */
  uint64_t usable[ORACLE_MAX_MEMBERS];   /* rounded down to whole chunks */
  uint64_t size;                         /* volume size */
  uint64_t nr_chunks;                    /* logical chunks */
  unsigned *chunk_member;                /* [nr_chunks] */
  uint64_t *chunk_row;                   /* [nr_chunks] member chunk index */
  uint64_t *rev[ORACLE_MAX_MEMBERS];     /* [usable/chunk] -> logical chunk */
  /* Logical offsets where the set of members changes (zone starts, > 0). */
  unsigned nr_boundaries;
  uint64_t boundary[ORACLE_MAX_MEMBERS];
};

/* Returns 0, or -1 if the configuration is invalid (chunk 0 or a member
 * smaller than a chunk).
 */
extern int oracle_init (struct oracle *o, uint64_t chunk, unsigned n,
                        const uint64_t *sizes);
extern void oracle_free (struct oracle *o);

/* Where the logical byte at off lives.  Returns how many bytes from off
 * stay contiguous on that member (up to the end of the chunk).
 */
extern uint64_t oracle_map (const struct oracle *o, uint64_t off,
                            unsigned *member, uint64_t *member_off);

/* The logical offset of a member byte; false beyond the usable size. */
extern bool oracle_unmap (const struct oracle *o, unsigned member,
                          uint64_t member_off, uint64_t *off);

/* Stripe width at logical offset off (members in its zone). */
extern unsigned oracle_width_at (const struct oracle *o, uint64_t off);

#endif /* NBDSTRIPE_TEST_ORACLE_H */
