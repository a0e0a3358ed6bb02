/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: what a member really is, so that no two members of a volume
 * are the same bytes, and so that a member reopened later is known to be
 * the one that was opened first.
 *
 * The identity of a member:
 *   - a regular file: its inode (st_dev, st_ino);
 *   - a block device: its device number (st_rdev);
 *   - an NBD export: its server's resolved address (a Unix socket's inode,
 *     the TCP addresses the host name resolves to, with every address of
 *     this host counted as one) and the export name.
 * and the bytes it stands for, its extent: a byte range of a file
 * (a loop device is resolved to its backing file, offset and size, with
 * LOOP_GET_STATUS64) or of a whole disk (a partition is a range of its
 * disk).  Two members alias when their identities are equal or their
 * extents overlap: a file and a loop device over it, two loop devices
 * over overlapping ranges of one file, a disk and one of its partitions,
 * two spellings of one NBD server and export.
 *
 * No I/O on the member's data: fstat, ioctls, sysfs, name resolution.
 */
#ifndef NBDSTRIPE_IDENTITY_H
#define NBDSTRIPE_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum identity_kind { ID_FILE, ID_BLOCK, ID_NBD };

/* The bytes a local member stands for. */
enum extent_base { EXTENT_FILE, EXTENT_DISK };

#define IDENTITY_MAX_ADDRS 8

struct identity {
  enum identity_kind kind;
  /* ID_FILE: the inode; ID_BLOCK: the device (st_dev/st_ino are those of
   * the device node, not part of the identity).
   */
  dev_t st_dev;
  ino_t st_ino;
  dev_t st_rdev;
  /* ID_FILE, ID_BLOCK: where the bytes live. */
  struct {
    enum extent_base base;
    dev_t dev; /* EXTENT_FILE: the file's st_dev; EXTENT_DISK: the disk */
    ino_t ino; /* EXTENT_FILE only */
    uint64_t start, end;
  } extent;
  /* Human words for the extent when it is not the member itself, e.g.
   * "a loop device over inode 1234 of device 254:0 from offset 16777216".
   */
  char via[160];
  /* ID_NBD: "unix:DEV:INO", "tcp:ADDR:PORT" (this host's addresses as
   * "tcp:local:PORT"), "vsock:CID:PORT"; and the export name.
   */
  unsigned nr_addrs;
  char addrs[IDENTITY_MAX_ADDRS][80];
  char export_name[256];
};

/* Read /sys/dev/block/MAJ:MIN/REL into buf (its first line, without
 * the newline): false when there is no such attribute.
 */
extern bool identity_sysfs_read (dev_t dev, const char *rel, char *buf,
                                 size_t len);

/* The identity of an open local member (a regular file or a block
 * device; anything else is EINVAL).  size: the member's size in bytes.
 * Returns 0, or -1 with errno and a reason in why.
 */
extern int identity_of_fd (int fd, uint64_t size, struct identity *id,
                           char *why, size_t len);

/* The identity of an NBD URI (no connection is made).  Returns 0, or -1
 * with a reason in why (a URI that cannot be parsed or resolved).
 */
extern int identity_of_uri (const char *uri, struct identity *id, char *why,
                            size_t len);

/* The identity of a device named as a member is (a path or an NBD URI),
 * without using it: a path is opened read-only (never blocking, never
 * claimed) for fstat and ioctls and closed again; a URI is parsed and
 * resolved, no connection is made.  For what a config names but nothing
 * holds open (spares, removed members).  Returns 0, or -1 with errno and
 * a reason in why (ENOENT: no such path now).
 */
extern int identity_of_name (const char *name, struct identity *id,
                             char *why, size_t len);

/* Whether a and b are the same member or overlap; if so, how, in words
 * for a message ("the same file", "a loop device over the other's file
 * at offset 16 MiB, overlapping it", "the same NBD server and export").
 */
extern bool identity_alias (const struct identity *a,
                            const struct identity *b, char *how, size_t len);

/* Whether b is still exactly a (the same inode or device, over the same
 * extent): what a re-probe requires of a member without a header.
 */
extern bool identity_same (const struct identity *a,
                           const struct identity *b);

/* A short description: "inode 1234 on 254:0", "block device 7:3 (loop
 * device over inode 99 on 254:0 from offset 0)", "NBD unix:...".
 */
extern const char *identity_describe (const struct identity *id, char *buf,
                                      size_t len);

#endif /* NBDSTRIPE_IDENTITY_H */
