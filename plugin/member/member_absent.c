/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the stand-in for a member that is missing or unreadable
 * when a volume is served degraded (member_open_absent, member.h).
 *
 * Nothing is opened: every operation fails with EIO, so that whatever
 * reaches it -- a read, a job, a block status, a header write -- reads
 * as lost, never as zeros or another device's bytes.  The volume refuses
 * requests touching it before they get here (volume_impl.h): this is
 * the floor under that, not the path.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ioexec.h"
#include "member.h"

static const char missing[] = "missing (the volume is served degraded)";

static int
absent_open (struct member *m, char *why, size_t len)
{
  (void) m;
  snprintf (why, len, "%s", missing);
  errno = ENOENT;
  return -1;
}

static void
absent_close (struct member *m)
{
  m->be = NULL;
}

static int
absent_fail (char *why, size_t len)
{
  snprintf (why, len, "%s", missing);
  errno = EIO;
  return -1;
}

static int
absent_claim (struct member *m, char *why, size_t len)
{
  (void) m;
  (void) why;
  (void) len;
  return 0; /* nothing held: nothing to claim */
}

static int
absent_current_size (struct member *m, uint64_t *size)
{
  *size = m->size;
  return 0;
}

static ssize_t
absent_pread (struct member *m, void *buf, size_t count, uint64_t offset,
              bool fresh, char *why, size_t len)
{
  (void) m;
  (void) buf;
  (void) count;
  (void) offset;
  (void) fresh;
  return absent_fail (why, len);
}

static int
absent_pwrite (struct member *m, const void *buf, size_t count,
               uint64_t offset, char *why, size_t len)
{
  (void) m;
  (void) buf;
  (void) count;
  (void) offset;
  return absent_fail (why, len);
}

static int
absent_sync (struct member *m, char *why, size_t len)
{
  (void) m;
  return absent_fail (why, len);
}

static int
absent_discard (struct member *m, uint64_t offset, uint64_t length, char *why,
                size_t len)
{
  (void) m;
  (void) offset;
  (void) length;
  return absent_fail (why, len);
}

static int
absent_probe_fd (struct member *m, char *why, size_t len)
{
  (void) m;
  return absent_fail (why, len);
}

static void
absent_start_op (struct member *m, struct ioexec *x, struct member_op *op)
{
  (void) m;
  ioexec_done (x, op, EIO);
}

static bool
absent_rw_now (struct member *m, struct member_op *op)
{
  (void) m;
  op->err = EIO;
  return true;
}

static bool
absent_zero_known_unsupported (const struct member *m, uint64_t offset,
                               uint64_t len, bool may_trim, bool fast)
{
  (void) m;
  (void) offset;
  (void) len;
  (void) may_trim;
  (void) fast;
  return false; /* tried, and fails with EIO */
}

static bool
absent_fast_zero_known (const struct member *m, uint64_t offset, uint64_t len,
                        bool may_trim)
{
  (void) m;
  (void) offset;
  (void) len;
  (void) may_trim;
  return false;
}

static bool
absent_can_fast_zero (const struct member *m)
{
  (void) m;
  return false;
}

static int
absent_check (struct member *m, char *why, size_t len)
{
  (void) m;
  return absent_fail (why, len);
}

static void
absent_adopt (struct member *m, struct member *fresh)
{
  (void) m;
  (void) fresh;
}

static const struct member_ops member_absent_ops = {
  .open = absent_open,
  .close = absent_close,
  .claim = absent_claim,
  .current_size = absent_current_size,
  .pread = absent_pread,
  .pwrite = absent_pwrite,
  .sync = absent_sync,
  .discard = absent_discard,
  .probe_fd = absent_probe_fd,
  .async = false,
  .start_op = absent_start_op,
  .rw_now = absent_rw_now,
  .zero_known_unsupported = absent_zero_known_unsupported,
  .fast_zero_known = absent_fast_zero_known,
  .can_fast_zero = absent_can_fast_zero,
  .check = absent_check,
  .adopt = absent_adopt,
};

int
member_open_absent (struct member *m, unsigned index, const char *name,
                    uint64_t size, char *why, size_t len)
{
  memset (m, 0, sizeof *m);
  m->index = index;
  m->readonly = true;
  m->params.readonly = true;
  m->ops = &member_absent_ops;
  m->kind = MEMBER_FILE;
  m->size = size;
  m->min_io = 1;
  m->logical_block = 512;
  m->physical_block = 4096;
  m->path = strdup (name);
  if (m->path == NULL) {
    snprintf (why, len, "out of memory");
    errno = ENOMEM;
    return -1;
  }
  /* Closable like any member; be is never looked into. */
  m->be = m;
  return 0;
}

bool
member_absent (const struct member *m)
{
  return m->ops == &member_absent_ops;
}
