/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe tests: members in memory, a backend of member.h for unit
 * tests of assembly and of the volume (tests/unit/test_assemble.c,
 * test_volume.c).
 *
 * A device is a zero-filled buffer of a given size, created by a test
 * under a name; the engine opens it as "mem:NAME" (mem_register makes
 * member_open hand such names to this backend).  It behaves as a regular
 * file that cannot grow: a member of kind MEMBER_FILE, logical block 512,
 * physical block 4096, minimum I/O 1 byte; a write past its end fails
 * with ENOSPC (the engine must never extend a member); a trim, a zero and
 * a discard make the range read as zeroes (a punched hole).  Each device
 * has its own identity (an inode of a device number no real file system
 * has), so the engine's alias checks see two devices as two files, and
 * two names made to alias one device (mem_alias) as "the same file".
 *
 * Every operation a device receives is recorded, in order, with its
 * range -- the executor's (read, write, trim, zero, flush, block status,
 * and the single-op fast path) and header access (pread, pwrite, sync),
 * opens and claims -- so that a test can check which member got what.
 * Errors are injected per device: for one kind of operation or any,
 * over a range or anywhere, for the next N operations or for ever; an
 * operation that fails changes nothing.
 *
 * Claims: a device opened for writing and claimed is held exclusively
 * until it is closed, one opened read-only and claimed is shared; a claim
 * that conflicts fails with EBUSY, as claim.h's OFD locks do.
 *
 * Not thread-safe against the test itself changing devices while the
 * engine runs requests; the engine's own threads may use devices (one
 * lock inside).
 */
#ifndef NBDSTRIPE_TEST_MEMBER_MEM_H
#define NBDSTRIPE_TEST_MEMBER_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEM_PREFIX "mem:"

/* What a device was asked to do.  The first six are enum op_kind's
 * (op.h), in its order: the executor's operations.
 */
enum mem_op {
  MEM_READ,
  MEM_WRITE,
  MEM_TRIM,
  MEM_ZERO,
  MEM_FLUSH,
  MEM_EXTENTS,
  MEM_PREAD,  /* header access: member_pread */
  MEM_PWRITE, /* member_pwrite */
  MEM_SYNC,   /* member_sync */
  MEM_DISCARD,
  MEM_OPEN,
  MEM_CLAIM,
  MEM_NR_OPS,
};
#define MEM_ANY_OP (-1)

struct mem_record {
  enum mem_op op;
  uint64_t offset, length; /* 0, 0 for flush, sync, open and claim */
  bool fua;                /* write */
  bool may_trim, fast;     /* zero */
  int err;                 /* 0, or the errno it failed with */
};

/* Route "mem:" names to this backend (member_register_backend).  Call
 * once before opening members; harmless again.
 */
extern void mem_register (void);

/* A new device NAME (without "mem:") of size bytes, all zeroes.  Aborts
 * the test on a name already in use.
 */
extern void mem_create (const char *name, uint64_t size);
/* Another name for the device of existing: the same bytes, the same
 * identity.
 */
extern void mem_alias (const char *alias, const char *existing);
/* name, which exists, now names the device of existing: what a path
 * does when another device takes its place (members open on the old
 * device keep it).
 */
extern void mem_rebind (const char *name, const char *existing);
/* Cut or extend (with zeroes) the device of name. */
extern void mem_resize (const char *name, uint64_t size);
/* Forget every device and name, records and injected errors (a test's
 * teardown).
 */
extern void mem_destroy_all (void);

/* The device's bytes, for a test to read or change directly (no record
 * is made); valid until it is resized or destroyed.
 */
extern uint8_t *mem_data (const char *name, uint64_t *size);
extern uint64_t mem_size (const char *name);
extern void mem_write (const char *name, uint64_t offset, const void *buf,
                       size_t len);
extern void mem_read (const char *name, uint64_t offset, void *buf,
                      size_t len);
extern void mem_fill (const char *name, uint64_t offset, uint64_t len,
                      uint8_t byte);
/* Flip every bit of the byte at offset (a corrupt sector). */
extern void mem_corrupt (const char *name, uint64_t offset);

/* Fail operations of kind op (MEM_ANY_OP: any) on name's device whose
 * range overlaps [offset, offset + length) (length 0: anywhere; an
 * operation without a range always matches) with err, the next count
 * times (0: for ever).  The last injection added wins where several
 * match.
 */
extern void mem_inject (const char *name, int op, uint64_t offset,
                        uint64_t length, int err, unsigned count);
/* Remove the errors injected on name's device. */
extern void mem_heal (const char *name);

/* The operations name's device received since it was created or its
 * records were cleared, in order (valid until the next operation).
 */
extern const struct mem_record *mem_records (const char *name, size_t *nr);
/* How many operations of kind op it received. */
extern unsigned mem_count (const char *name, enum mem_op op);
/* Clear the records of name's device (NULL: of every device). */
extern void mem_clear_records (const char *name);

extern const char *mem_op_name (enum mem_op op);

#endif /* NBDSTRIPE_TEST_MEMBER_MEM_H */
