/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe lost-files: the pieces of the command.  nbdio.c reads a file
 * system through an NBD connection (a libext2fs io_manager);
 * lost_walk.c names the files whose blocks a loss takes; lost_files.c is
 * the command.
 */
#ifndef NBDSTRIPE_DAEMON_LOST_FILES_H
#define NBDSTRIPE_DAEMON_LOST_FILES_H

#include <stdbool.h>
#include <stdint.h>

#include <ext2fs/ext2fs.h>
#include <libnbd.h>

#include "layout.h"
#include "lost.h"

/* A read-only io_manager over h (connected, owned by the caller, which
 * must outlive the file system): ext2fs_open any name with it.  Writes
 * fail with EXT2_ET_RO_FILSYS; one file system at a time.
 */
extern io_manager nbdio_manager (struct nbd_handle *h);

/* What is (or would be) gone: every byte of the layout's members in
 * `members` (bit j: the layout's member j), and the volume's byte
 * ranges `ranges` (sorted, apart from one another: the lost ranges the
 * headers keep and what the last scrub found unreadable), through the
 * volume's layout.  `gone`: the members of `members` that cannot be
 * read (the volume served degraded without them), not only asked
 * about; the ranges cannot be read either (reads there fail with EIO).
 */
struct loss {
  const struct layout *layout;
  uint64_t members;
  uint64_t gone;
  const struct lost_range *ranges;
  size_t nr_ranges;
};

/* Bytes of the volume's [offset, offset + length) that the loss takes. */
extern uint64_t loss_bytes (const struct loss *x, uint64_t offset,
                            uint64_t length);

/* A file (or directory, symlink...) the loss touches. */
struct lost_file {
  char *path;
  ext2_ino_t ino;
  uint64_t bytes;      /* i_size */
  uint64_t lost_bytes; /* of its data, at most bytes */
  bool metadata_lost;  /* its inode's block, an extent or indirect block */
};

struct lost_files_report {
  struct lost_file *files; /* sorted by path */
  size_t nr_files;
  size_t nr_seen;      /* files reached by name */
  ext2_ino_t *unnamed; /* in use, but reached by no name */
  size_t nr_unnamed;
  bool dir_blocks_lost;   /* a directory's block */
  bool inode_tables_lost; /* a block of an inode table */
  bool super_lost;        /* the primary superblock or descriptors */
  bool unreadable;        /* the walk met blocks it could not read */
  blk64_t backup_super;   /* the first backup superblock, 0: none */
};

/* Walk fs from its root and fill in r.  0, or -1 with why. */
extern int lost_files_walk (ext2_filsys fs, const struct loss *x,
                            struct lost_files_report *r, char *why,
                            size_t len);
extern void lost_files_report_free (struct lost_files_report *r);

#endif /* NBDSTRIPE_DAEMON_LOST_FILES_H */
