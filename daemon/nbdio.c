/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe lost-files: a libext2fs io_manager that reads through an NBD
 * connection, so that a served volume's file system is read as its
 * clients see it -- never mounted, never through a second opening of the
 * members.  Read-only: every write fails, so nothing libext2fs could try
 * (a superblock update at close) reaches the volume.
 *
 * libext2fs opens channels by name; the connection is not a name, so the
 * manager carries it in a file-scope variable: one file system at a time,
 * which is all the command needs.
 */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ext2fs/ext2fs.h>
#include <libnbd.h>

#include "lost_files.h"

static struct nbd_handle *nbdio_handle;

static errcode_t
nbdio_open (const char *name, int flags, io_channel *channel)
{
  io_channel io = NULL;
  errcode_t err;

  if (nbdio_handle == NULL)
    return EXT2_ET_BAD_DEVICE_NAME;
  if (flags & IO_FLAG_RW)
    return EXT2_ET_RO_FILSYS;
  err = ext2fs_get_memzero (sizeof *io, &io);
  if (err)
    return err;
  err = ext2fs_get_mem (strlen (name) + 1, &io->name);
  if (err) {
    ext2fs_free_mem (&io);
    return err;
  }
  strcpy (io->name, name);
  io->magic = EXT2_ET_MAGIC_IO_CHANNEL;
  io->manager = nbdio_manager (nbdio_handle);
  io->block_size = 1024;
  io->refcount = 1;
  io->flags = flags;
  io->private_data = nbdio_handle;
  *channel = io;
  return 0;
}

static errcode_t
nbdio_close (io_channel io)
{
  if (--io->refcount > 0)
    return 0;
  ext2fs_free_mem (&io->name);
  ext2fs_free_mem (&io);
  return 0;
}

static errcode_t
nbdio_set_blksize (io_channel io, int blksize)
{
  io->block_size = blksize;
  return 0;
}

/* count < 0: -count bytes (libext2fs's convention). */
static errcode_t
nbdio_read_blk64 (io_channel io, unsigned long long block, int count,
                  void *data)
{
  size_t len =
    count < 0 ? (size_t) -count : (size_t) count * (size_t) io->block_size;
  uint64_t offset = block * (uint64_t) io->block_size;

  if (nbd_pread (io->private_data, data, len, offset, 0) == -1) {
    int e = nbd_get_errno ();
    errcode_t err = e ? (errcode_t) e : EXT2_ET_SHORT_READ;

    memset (data, 0, len);
    if (io->read_error)
      return io->read_error (io, block, count, data, len, 0, err);
    return err;
  }
  return 0;
}

static errcode_t
nbdio_read_blk (io_channel io, unsigned long block, int count, void *data)
{
  return nbdio_read_blk64 (io, block, count, data);
}

static errcode_t
nbdio_write_blk64 (io_channel io, unsigned long long block, int count,
                   const void *data)
{
  (void) io, (void) block, (void) count, (void) data;
  return EXT2_ET_RO_FILSYS;
}

static errcode_t
nbdio_write_blk (io_channel io, unsigned long block, int count,
                 const void *data)
{
  return nbdio_write_blk64 (io, block, count, data);
}

static errcode_t
nbdio_write_byte (io_channel io, unsigned long offset, int count,
                  const void *data)
{
  (void) io, (void) offset, (void) count, (void) data;
  return EXT2_ET_RO_FILSYS;
}

static errcode_t
nbdio_flush (io_channel io)
{
  (void) io;
  return 0;
}

static errcode_t
nbdio_set_option (io_channel io, const char *option, const char *arg)
{
  (void) io, (void) option, (void) arg;
  return EXT2_ET_INVALID_ARGUMENT;
}

static struct struct_io_manager nbdio = {
  .magic = EXT2_ET_MAGIC_IO_MANAGER,
  .name = "nbdstripe NBD I/O manager",
  .open = nbdio_open,
  .close = nbdio_close,
  .set_blksize = nbdio_set_blksize,
  .read_blk = nbdio_read_blk,
  .write_blk = nbdio_write_blk,
  .flush = nbdio_flush,
  .write_byte = nbdio_write_byte,
  .set_option = nbdio_set_option,
  .read_blk64 = nbdio_read_blk64,
  .write_blk64 = nbdio_write_blk64,
};

io_manager
nbdio_manager (struct nbd_handle *h)
{
  nbdio_handle = h;
  return &nbdio;
}
