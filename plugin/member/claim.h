/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: owning a member while a volume is served or created.
 *
 * A local member is opened without ever blocking (a FIFO, a socket, a
 * terminal or a directory is refused before any blocking open) and is
 * then claimed:
 *   - a block device opened for writing is opened O_EXCL, as md does: a
 *     mounted device, one held by md or device-mapper, and every other
 *     exclusive opener (mkfs, a second server) are refused, and while we
 *     hold it they are refused;
 *   - every local member is locked with an open-file-description lock
 *     (F_OFD_SETLK) over the whole member: exclusive when written, shared
 *     when only read, so that a second server, an ad hoc plugin or
 *     `nbdstripe create` on a member in use is refused.
 * When a claim is refused the reason names who holds the member: the
 * process (its command, and for nbdkit the volume's config or members),
 * the mount point, or the md / device-mapper device stacked on it.  OFD
 * locks do not record their owner's pid, so that is found the way lsof
 * does, in /proc/PID/fdinfo.
 *
 * NBD exports are not locked here: their server owns them.
 */
#ifndef NBDSTRIPE_CLAIM_H
#define NBDSTRIPE_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>

/* Open path (a regular file or a block device, nothing else) with
 * O_CLOEXEC plus extra open flags (O_DIRECT), read-only or read-write,
 * without claiming it.  *st is its fstat.  Returns the descriptor, or -1
 * with errno and a one-line reason in why that does not repeat the path
 * (EINVAL: the wrong type of file, named).
 */
extern int claim_open (const char *path, bool readonly, int extra,
                       struct stat *st, char *why, size_t len);

/* Claim the member *fd (opened from path by claim_open): a block device
 * that will be written is reopened O_EXCL (*fd is replaced; it must be
 * the same device), then an OFD lock is taken, shared when shared.
 * Returns 0, or -1 with errno (EBUSY: in use, with who holds it in why).
 */
extern int claim_take (int *fd, const char *path, bool excl, bool shared,
                       char *why, size_t len);

/* Lock fd as claim_take does (exclusive unless shared).  -1 with errno
 * EBUSY and the holder in why when another open file holds a
 * conflicting lock.
 */
extern int claim_lock (int fd, bool shared, char *why, size_t len);

/* Who holds the file or block device st (someone other than us): a
 * sentence fragment such as "nbdkit (pid 1234) serving volume 'fast0'
 * (config /etc/nbdstripe/fast0.conf)", "mounted on /mnt", "held by md127"
 * or "another process" when nobody can be found.
 */
extern const char *claim_holder (const struct stat *st, char *buf, size_t len);

#endif /* NBDSTRIPE_CLAIM_H */
