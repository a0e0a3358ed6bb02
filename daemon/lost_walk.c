/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe lost-files: which files of an ext2/3/4 file system a loss
 * takes.  Every inode reached by name from the root is looked at once
 * (a hard link under its first name): its blocks -- data, and the
 * extent-tree or indirect blocks libext2fs reports with a negative
 * block count -- and the inode table block holding the inode, each
 * mapped through the volume's layout (the code the plugin serves with),
 * so md's layouts and chunks of any size are what they are on the
 * volume.  Then an inode scan finds the inodes in use that no name
 * reached (a directory block that could not be read).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>

#include "layout.h"
#include "lost.h"
#include "lost_files.h"

/* Bytes of [offset, offset + length) in the sorted, disjoint ranges:
 * the first that ends past offset found by bisection (a scrub may keep
 * thousands).
 */
static uint64_t
ranges_bytes (const struct loss *x, uint64_t offset, uint64_t length)
{
  size_t lo = 0, hi = x->nr_ranges;
  uint64_t n = 0, end = offset + length;

  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;

    if (x->ranges[mid].offset + x->ranges[mid].length <= offset)
      lo = mid + 1;
    else
      hi = mid;
  }
  for (size_t i = lo; i < x->nr_ranges && x->ranges[i].offset < end; ++i) {
    const struct lost_range *r = &x->ranges[i];
    uint64_t a = r->offset > offset ? r->offset : offset;
    uint64_t b = r->offset + r->length < end ? r->offset + r->length : end;

    n += b - a;
  }
  return n;
}

uint64_t
loss_bytes (const struct loss *x, uint64_t offset, uint64_t length)
{
  struct layout_iter it;
  struct layout_piece p;
  uint64_t n = 0;

  if (offset >= x->layout->size)
    return 0;
  if (length > x->layout->size - offset)
    length = x->layout->size - offset;
  if (length == 0)
    return 0;
  layout_iter_init (&it, x->layout, offset, length);
  while (layout_iter_next (&it, &p)) {
    if (p.member < 64 && (x->members >> p.member & 1))
      n += p.length;
    else if (x->nr_ranges)
      n += ranges_bytes (x, p.offset, p.length);
  }
  return n;
}

struct walk {
  ext2_filsys fs;
  const struct loss *x;
  struct lost_files_report *r;
  ext2fs_inode_bitmap reached;
  size_t alloc;
  int err; /* ENOMEM: stop */
};

/* One inode's blocks, as block_iterate3 gives them. */
struct blocks {
  struct walk *w;
  uint64_t size;
  bool dir;
  bool touched;
  struct lost_file f;
};

static uint64_t
block_loss (struct walk *w, blk64_t blk, uint64_t len)
{
  return loss_bytes (w->x, blk * (uint64_t) w->fs->blocksize, len);
}

static int
blocks_cb (ext2_filsys fs, blk64_t *blocknr, e2_blkcnt_t blockcnt,
           blk64_t ref_blk, int ref_offset, void *priv)
{
  struct blocks *b = priv;
  uint64_t bs = fs->blocksize, at, valid;

  (void) ref_blk, (void) ref_offset;
  if (block_loss (b->w, *blocknr, bs) == 0)
    return 0;
  b->touched = true;
  if (blockcnt < 0) { /* an extent-tree or indirect block */
    b->f.metadata_lost = true;
    return 0;
  }
  if (b->dir)
    b->w->r->dir_blocks_lost = true;
  at = (uint64_t) blockcnt * bs;
  valid = b->size > at ? b->size - at : 0;
  if (valid > bs)
    valid = bs;
  b->f.lost_bytes += block_loss (b->w, *blocknr, valid);
  return 0;
}

/* The block of the inode table that holds ino. */
static blk64_t
inode_block (ext2_filsys fs, ext2_ino_t ino)
{
  dgrp_t g = (ino - 1) / fs->super->s_inodes_per_group;
  uint64_t i = (ino - 1) % fs->super->s_inodes_per_group;

  return ext2fs_inode_table_loc (fs, g)
         + i * EXT2_INODE_SIZE (fs->super) / fs->blocksize;
}

static int
add_file (struct walk *w, const struct lost_file *f)
{
  struct lost_files_report *r = w->r;

  if (r->nr_files == w->alloc) {
    size_t n = w->alloc ? 2 * w->alloc : 64;
    struct lost_file *p = realloc (r->files, n * sizeof *p);

    if (p == NULL)
      return -1;
    r->files = p;
    w->alloc = n;
  }
  r->files[r->nr_files] = *f;
  r->files[r->nr_files].path = strdup (f->path);
  if (r->files[r->nr_files].path == NULL)
    return -1;
  r->nr_files++;
  return 0;
}

static void visit (struct walk *w, ext2_ino_t ino, const char *path);

struct dir {
  struct walk *w;
  const char *path;
};

static int
dir_cb (ext2_ino_t dir, int entry, struct ext2_dir_entry *dirent, int offset,
        int blocksize, char *buf, void *priv)
{
  struct dir *d = priv;
  int n = ext2fs_dirent_name_len (dirent);
  const char *sep = strcmp (d->path, "/") == 0 ? "" : "/";
  char *child;

  (void) dir, (void) offset, (void) blocksize, (void) buf;
  if (entry == DIRENT_DOT_FILE || entry == DIRENT_DOT_DOT_FILE
      || dirent->inode == 0)
    return 0;
  if (asprintf (&child, "%s%s%.*s", d->path, sep, n, dirent->name) == -1) {
    d->w->err = ENOMEM;
    return DIRENT_ABORT;
  }
  visit (d->w, dirent->inode, child);
  free (child);
  return d->w->err ? DIRENT_ABORT : 0;
}

static void
visit (struct walk *w, ext2_ino_t ino, const char *path)
{
  ext2_filsys fs = w->fs;
  struct ext2_inode inode;
  struct blocks b = { .w = w, .f = { .path = (char *) path, .ino = ino } };

  if (ino > fs->super->s_inodes_count
      || ext2fs_test_inode_bitmap2 (w->reached, ino))
    return;
  ext2fs_mark_inode_bitmap2 (w->reached, ino);
  w->r->nr_seen++;
  if (block_loss (w, inode_block (fs, ino), fs->blocksize)) {
    b.touched = b.f.metadata_lost = true;
    w->r->inode_tables_lost = true;
  }
  if (ext2fs_read_inode (fs, ino, &inode) != 0) {
    w->r->unreadable = true;
    goto out;
  }
  b.size = b.f.bytes = EXT2_I_SIZE (&inode);
  b.dir = LINUX_S_ISDIR (inode.i_mode);
  if (ext2fs_inode_has_valid_blocks2 (fs, &inode)
      && ext2fs_block_iterate3 (fs, ino, BLOCK_FLAG_READ_ONLY, NULL, blocks_cb,
                                &b)
           != 0)
    w->r->unreadable = true;
  if (b.f.lost_bytes > b.f.bytes)
    b.f.lost_bytes = b.f.bytes;
out:
  if (b.touched && add_file (w, &b.f) == -1) {
    w->err = ENOMEM;
    return;
  }
  if (b.dir) {
    struct dir d = { .w = w, .path = path };

    if (ext2fs_dir_iterate2 (fs, ino, 0, NULL, dir_cb, &d) != 0 && w->err == 0)
      w->r->unreadable = true;
  }
}

/* The file system's own records: the primary superblock and group
 * descriptors, the inode tables.
 */
static void
fs_metadata (struct walk *w)
{
  ext2_filsys fs = w->fs;
  blk64_t sb = fs->super->s_first_data_block;

  if (loss_bytes (w->x, 1024, 1024))
    w->r->super_lost = true;
  for (dgrp_t i = 0; i < fs->desc_blocks; ++i)
    if (block_loss (w, ext2fs_descriptor_block_loc2 (fs, sb, i),
                    fs->blocksize))
      w->r->super_lost = true;
  for (dgrp_t g = 0; g < fs->group_desc_count; ++g) {
    blk64_t t = ext2fs_inode_table_loc (fs, g);

    if (t
        && block_loss (w, t,
                       (uint64_t) fs->inode_blocks_per_group * fs->blocksize))
      w->r->inode_tables_lost = true;
  }
  /* The first backup the loss leaves: its superblock and descriptor
   * blocks, which follow it.
   */
  for (dgrp_t g = 1; g < fs->group_desc_count && !w->r->backup_super; ++g) {
    blk64_t b = ext2fs_group_first_block2 (fs, g);

    if (ext2fs_bg_has_super (fs, g)
        && !block_loss (w, b, (1 + (uint64_t) fs->desc_blocks) * fs->blocksize))
      w->r->backup_super = b;
  }
}

/* Inodes in use that no name reached.  In use: linked, not deleted, and
 * marked in the inode bitmap when it can be read -- the tables of a file
 * system made with lazy_itable_init hold garbage past each group's used
 * inodes, which the scan skips (EXT2_SF_DO_LAZY) and the bitmap denies.
 */
static void
unnamed_inodes (struct walk *w)
{
  ext2_filsys fs = w->fs;
  ext2_inode_scan scan;
  struct ext2_inode inode;
  ext2_ino_t ino;
  size_t alloc = 0;
  bool bitmap = ext2fs_read_inode_bitmap (fs) == 0;
  ext2_badblocks_list bad = NULL, old = fs->badblocks;
  errcode_t err;

  if (!bitmap)
    w->r->unreadable = true;
  /* The inode table blocks that cannot be read (a member served
   * degraded, the lost ranges), as bad blocks: the scan skips them and
   * goes on (EXT2_ET_BAD_BLOCK_IN_INODE_TABLE), where a read error
   * would stop it for good -- e2fsck's way past a bad inode table.
   */
  if (ext2fs_badblocks_list_create (&bad, 0) != 0) {
    w->err = ENOMEM;
    return;
  }
  {
    struct loss real = *w->x;

    real.members = real.gone;
    for (dgrp_t g = 0; g < fs->group_desc_count; ++g) {
      blk64_t t = ext2fs_inode_table_loc (fs, g);

      for (blk64_t b = t; t && b < t + fs->inode_blocks_per_group; ++b)
        if (loss_bytes (&real, b * (uint64_t) fs->blocksize, fs->blocksize)
            && ext2fs_badblocks_list_add (bad, (blk_t) b) != 0) {
          w->err = ENOMEM;
          ext2fs_badblocks_list_free (bad);
          return;
        }
    }
  }
  fs->badblocks = bad;
  if (ext2fs_open_inode_scan (fs, 0, &scan) != 0) {
    w->r->unreadable = true;
    fs->badblocks = old;
    ext2fs_badblocks_list_free (bad);
    return;
  }
  ext2fs_inode_scan_flags (scan, EXT2_SF_SKIP_MISSING_ITABLE | EXT2_SF_DO_LAZY,
                           0);
  for (;;) {
    err = ext2fs_get_next_inode (scan, &ino, &inode);
    if (err == EXT2_ET_BAD_BLOCK_IN_INODE_TABLE)
      continue; /* lost with its table block */
    if (err) {
      w->r->unreadable = true;
      break;
    }
    if (ino == 0)
      break;
    if (ino < EXT2_FIRST_INO (fs->super) || inode.i_links_count == 0
        || inode.i_dtime != 0 || ext2fs_test_inode_bitmap2 (w->reached, ino)
        || (bitmap && !ext2fs_test_inode_bitmap2 (fs->inode_map, ino)))
      continue;
    if (w->r->nr_unnamed == alloc) {
      size_t n = alloc ? 2 * alloc : 16;
      ext2_ino_t *p = realloc (w->r->unnamed, n * sizeof *p);

      if (p == NULL) {
        w->err = ENOMEM;
        break;
      }
      w->r->unnamed = p;
      alloc = n;
    }
    w->r->unnamed[w->r->nr_unnamed++] = ino;
  }
  ext2fs_close_inode_scan (scan);
  fs->badblocks = old;
  ext2fs_badblocks_list_free (bad);
}

static int
by_path (const void *a, const void *b)
{
  return strcmp (((const struct lost_file *) a)->path,
                 ((const struct lost_file *) b)->path);
}

int
lost_files_walk (ext2_filsys fs, const struct loss *x,
                 struct lost_files_report *r, char *why, size_t len)
{
  struct walk w = { .fs = fs, .x = x, .r = r };
  errcode_t err;

  memset (r, 0, sizeof *r);
  err = ext2fs_allocate_inode_bitmap (fs, "reached", &w.reached);
  if (err) {
    snprintf (why, len, "%s", error_message (err));
    return -1;
  }
  fs_metadata (&w);
  visit (&w, EXT2_ROOT_INO, "/");
  if (w.err == 0)
    unnamed_inodes (&w);
  ext2fs_free_inode_bitmap (w.reached);
  if (w.err) {
    snprintf (why, len, "%s", strerror (w.err));
    return -1;
  }
  if (r->nr_files > 1)
    qsort (r->files, r->nr_files, sizeof *r->files, by_path);
  return 0;
}

void
lost_files_report_free (struct lost_files_report *r)
{
  for (size_t i = 0; i < r->nr_files; ++i)
    free (r->files[i].path);
  free (r->files);
  free (r->unnamed);
  memset (r, 0, sizeof *r);
}
