/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: drive health -- reading a member's drive (include/drive.h).
 *
 * What a member is comes from sysfs: its block device's whole disk
 * (/sys/dev/block/MAJ:MIN, the parent of a partition) and that disk's
 * name says the kind: nvme*, sd* (ATA through libata or a SAT bridge),
 * or one of the kinds with no drive of their own.  The whole disk's node
 * is /dev/DEVNAME (its uevent), checked to be that device.
 *
 * Every command is bounded: the NVMe admin commands and the SG_IO ATA
 * pass-through by their own timeout (DRIVE_TIMEOUT_MS).  Opening a block
 * device read-only without O_EXCL does not disturb the server's claim.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <scsi/sg.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#ifdef HAVE_LIBNVME
#include <libnvme.h>
#endif

#include "drive.h"
#include "member.h"

#define DRIVE_TIMEOUT_MS 10000

const char *
drive_backends (void)
{
#if defined(HAVE_LIBNVME) && defined(HAVE_LIBATASMART)
  return "nvme,ata";
#elif defined(HAVE_LIBNVME)
  return "nvme";
#elif defined(HAVE_LIBATASMART)
  return "ata";
#else
  return "none";
#endif
}

static void __attribute__ ((format (printf, 2, 3)))
unavailable (struct drive_health *d, const char *fmt, ...)
{
  va_list args;

  d->available = false;
  va_start (args, fmt);
  vsnprintf (d->reason, sizeof d->reason, fmt, args);
  va_end (args);
}

/* The first line of a sysfs file into buf (newline dropped); -1 when it
 * cannot be read.
 */
static int
read_line (const char *dir, const char *file, char *buf, size_t len)
{
  char path[PATH_MAX + 64];
  FILE *fp;
  int r = -1;

  snprintf (path, sizeof path, "%s/%s", dir, file);
  fp = fopen (path, "re");
  if (fp == NULL)
    return -1;
  if (fgets (buf, len, fp)) {
    buf[strcspn (buf, "\n")] = '\0';
    r = 0;
  }
  fclose (fp);
  return r;
}

/* The whole disk of block device dev: its sysfs directory (resolved)
 * into sys; -1 when sysfs does not know it.
 */
static int
whole_disk (dev_t dev, char *sys, size_t len)
{
  char link[64], *real, probe[PATH_MAX + 16];

  snprintf (link, sizeof link, "/sys/dev/block/%u:%u", major (dev),
            minor (dev));
  real = realpath (link, NULL);
  if (real == NULL)
    return -1;
  snprintf (probe, sizeof probe, "%s/partition", real);
  if (access (probe, F_OK) == 0) {
    char *slash = strrchr (real, '/');
    if (slash)
      *slash = '\0';
  }
  snprintf (sys, len, "%s", real);
  free (real);
  return 0;
}

/* /dev/DEVNAME of the disk at sys, checked to be that device. */
static int
disk_node (const char *sys, char *node, size_t len)
{
  char line[256], dev[32];
  FILE *fp;
  char path[PATH_MAX + 16];
  unsigned ma, mi;
  struct stat st;
  bool found = false;

  snprintf (path, sizeof path, "%s/uevent", sys);
  fp = fopen (path, "re");
  if (fp == NULL)
    return -1;
  while (fgets (line, sizeof line, fp))
    if (strncmp (line, "DEVNAME=", 8) == 0) {
      line[strcspn (line, "\n")] = '\0';
      snprintf (node, len, "/dev/%s", line + 8);
      found = true;
    }
  fclose (fp);
  if (!found || read_line (sys, "dev", dev, sizeof dev) == -1
      || sscanf (dev, "%u:%u", &ma, &mi) != 2 || stat (node, &st) == -1
      || !S_ISBLK (st.st_mode) || st.st_rdev != makedev (ma, mi))
    return -1;
  return 0;
}

/* What a refused command lacked, checked by the kernel at each command
 * (not at open): an NVMe admin command needs CAP_SYS_ADMIN
 * (drivers/nvme/host/ioctl.c, nvme_cmd_allowed: since Linux 6.2 a few
 * Identify commands go without, never Get Log Page); SG_IO's ATA
 * PASS-THROUGH needs CAP_SYS_RAWIO (drivers/scsi/scsi_ioctl.c,
 * scsi_cmd_allowed).  Root has both, and nbdstripe@.service grants both.
 * A refused open is no capability's (a node not root's, the device
 * cgroup): no hint there.
 */
static const char *
permission_hint (int err, bool nvme)
{
  if (err != EACCES && err != EPERM)
    return "";
  return nvme ? " (NVMe admin commands need CAP_SYS_ADMIN)"
              : " (ATA pass-through needs CAP_SYS_RAWIO)";
}

#ifdef HAVE_LIBNVME

static void
read_nvme (const char *node, struct drive_health *d)
{
  uint8_t log[DRIVE_NVME_LOG_SIZE], id[DRIVE_NVME_ID_CTRL_SIZE];
  int fd = open (node, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  int r;

  snprintf (d->device, sizeof d->device, "%.63s", node);
  if (fd == -1) {
    unavailable (d, "%s: %s", node, strerror (errno));
    return;
  }
  struct nvme_get_log_args args = {
    .args_size = sizeof args,
    .fd = fd,
    .timeout = DRIVE_TIMEOUT_MS,
    .lid = NVME_LOG_LID_SMART,
    .nsid = NVME_NSID_ALL,
    .log = log,
    .len = sizeof log,
    .csi = NVME_CSI_NVM,
    .lsi = NVME_LOG_LSI_NONE,
    .lsp = NVME_LOG_LSP_NONE,
    .uuidx = NVME_UUID_NONE,
    /* Retain asynchronous events: reading leaves the controller's
     * event state to whoever else listens.
     */
    .rae = true,
  };
  memset (log, 0, sizeof log);
  r = nvme_get_log (&args);
  if (r != 0) {
    int e = errno;
    if (r > 0)
      unavailable (d, "%s: the SMART / Health log: NVMe status 0x%x (%s)",
                   node, (unsigned) r, nvme_status_to_string (r, false));
    else
      unavailable (d, "%s: the SMART / Health log: %s%s", node, strerror (e),
                   permission_hint (e, true));
    close (fd);
    return;
  }
  drive_nvme_decode (log, sizeof log, d);
  struct nvme_identify_args ia = {
    .args_size = sizeof ia,
    .fd = fd,
    .timeout = DRIVE_TIMEOUT_MS,
    .cns = NVME_IDENTIFY_CNS_CTRL,
    .csi = NVME_CSI_NVM,
    .nsid = NVME_NSID_NONE,
    .cntid = NVME_CNTLID_NONE,
    .cns_specific_id = NVME_CNSSPECID_NONE,
    .uuidx = NVME_UUID_NONE,
    .data = id,
  };
  if (nvme_identify (&ia) == 0)
    drive_nvme_decode_identify (id, sizeof id, d);
  close (fd);
}

#else

static void
read_nvme (const char *node, struct drive_health *d)
{
  snprintf (d->device, sizeof d->device, "%.63s", node);
  unavailable (d, "an NVMe drive, but nbdstripe was built without libnvme");
}

#endif

#ifdef HAVE_LIBATASMART

/* SAT (T10 SAT-4) ATA PASS-THROUGH (16): one ATA command, its data in
 * (len bytes, a multiple of 512, or none).  Data-in commands do not ask
 * for the registers back (CK_COND = 0): Linux 6.1's libata answers a
 * data-in command with CK_COND in fixed-format sense that says
 * "aborted" on qemu's AHCI disk, data and all, and the data is what we
 * want.  A non-data command does (CK_COND = 1): its answer is in the
 * registers.  regs (non-data only): count, LBA low, mid and high as the
 * drive left them, from the ATA Status Return descriptor (descriptor
 * format) or the fixed format's fields.  -1 with errno (EIO: the command
 * failed).
 */
struct ata_regs {
  uint8_t count, lba_low, lba_mid, lba_high;
};

static int
sat_command (int fd, uint8_t command, uint8_t feature, uint8_t lba_mid,
             uint8_t lba_high, void *data, size_t len, struct ata_regs *regs)
{
  uint8_t cdb[16] = { 0 }, sense[32] = { 0 };
  struct sg_io_hdr io = { 0 };
  uint8_t key;

  cdb[0] = 0x85; /* ATA PASS-THROUGH (16) */
  if (len) {
    cdb[1] = 4 << 1; /* PIO data-in */
    cdb[2] = 0x0e;   /* T_DIR in, BYT_BLOK, T_LENGTH in COUNT */
    cdb[6] = len / 512;
  }
  else {
    cdb[1] = 3 << 1; /* non-data */
    cdb[2] = 0x20;   /* CK_COND: the registers back */
  }
  cdb[4] = feature;
  cdb[10] = lba_mid;
  cdb[12] = lba_high;
  cdb[14] = command;
  io.interface_id = 'S';
  io.cmdp = cdb;
  io.cmd_len = sizeof cdb;
  io.dxferp = data;
  io.dxfer_len = len;
  io.dxfer_direction = len ? SG_DXFER_FROM_DEV : SG_DXFER_NONE;
  io.sbp = sense;
  io.mx_sb_len = sizeof sense;
  io.timeout = DRIVE_TIMEOUT_MS;
  if (ioctl (fd, SG_IO, &io) == -1)
    return -1;
  if (io.host_status != 0 || (io.driver_status & ~0x08) != 0) {
    errno = EIO;
    return -1;
  }
  if (len) {
    if (io.status != 0 || io.resid != 0) {
      errno = EIO;
      return -1;
    }
    return 0;
  }
  /* Non-data, CK_COND: CHECK CONDITION with RECOVERED ERROR, "ATA
   * PASS-THROUGH INFORMATION AVAILABLE", is the expected answer.
   */
  if ((sense[0] & 0x7f) == 0x72) {
    const uint8_t *desc = &sense[8];
    key = sense[1] & 0x0f;
    if (io.sb_len_wr < 8 + 14 || desc[0] != 0x09) {
      errno = EIO;
      return -1;
    }
    regs->count = desc[5];
    regs->lba_low = desc[7];
    regs->lba_mid = desc[9];
    regs->lba_high = desc[11];
  }
  else if ((sense[0] & 0x7f) == 0x70) {
    key = sense[2] & 0x0f;
    if (io.sb_len_wr < 12) {
      errno = EIO;
      return -1;
    }
    regs->count = sense[6];
    regs->lba_low = sense[9];
    regs->lba_mid = sense[10];
    regs->lba_high = sense[11];
  }
  else {
    errno = EIO;
    return -1;
  }
  if (key != 0 && key != 1) { /* NO SENSE, RECOVERED ERROR */
    errno = EIO;
    return -1;
  }
  return 0;
}

#define ATA_IDENTIFY 0xec
#define ATA_CHECK_POWER_MODE 0xe5
#define ATA_SMART 0xb0
#define SMART_READ_DATA 0xd0
#define SMART_READ_THRESHOLDS 0xd1
#define SMART_RETURN_STATUS 0xda

static void
read_ata (const char *node, bool usb, struct drive_health *d)
{
  uint8_t identify[DRIVE_ATA_PAGE_SIZE], data[DRIVE_ATA_PAGE_SIZE];
  uint8_t thresholds[DRIVE_ATA_PAGE_SIZE];
  struct ata_regs regs;
  bool have_thresholds;
  int status = DRIVE_NA;
  char why[256];
  int fd = open (node, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  snprintf (d->device, sizeof d->device, "%.63s", node);
  if (fd == -1) {
    unavailable (d, "%s: %s", node, strerror (errno));
    return;
  }
  if (sat_command (fd, ATA_IDENTIFY, 0, 0, 0, identify, sizeof identify, NULL)
      == -1) {
    int e = errno;
    if (e == EACCES || e == EPERM)
      unavailable (d, "%s: %s%s", node, strerror (e),
                   permission_hint (e, false));
    else if (usb)
      unavailable (d,
                   "%s: a USB disk whose bridge does not pass ATA "
                   "commands through: its SMART is hidden",
                   node);
    else
      unavailable (d,
                   "%s: no ATA drive answers behind it (a SCSI or SAS "
                   "disk, or a controller that hides SMART)",
                   node);
    goto out;
  }
  /* A monitor must not wake a sleeping disk every period: COUNT 0x00 is
   * standby.
   */
  if (sat_command (fd, ATA_CHECK_POWER_MODE, 0, 0, 0, NULL, 0, &regs) == 0
      && regs.count == 0x00) {
    unavailable (d,
                 "%s: the drive is asleep (standby): not woken to read "
                 "SMART",
                 node);
    goto out;
  }
  if (sat_command (fd, ATA_SMART, SMART_READ_DATA, 0x4f, 0xc2, data,
                   sizeof data, NULL)
      == -1) {
    int e = errno;
    /* No SMART at all says so better than the failed command. */
    if (drive_ata_decode (identify, NULL, NULL, DRIVE_NA, d, why, sizeof why)
        == -1)
      unavailable (d, "%s: %s", node, why);
    else
      unavailable (d, "%s: SMART READ DATA: %s", node, strerror (e));
    goto out;
  }
  have_thresholds = sat_command (fd, ATA_SMART, SMART_READ_THRESHOLDS, 0x4f,
                                 0xc2, thresholds, sizeof thresholds, NULL)
                    == 0;
  /* The drive's own verdict: LBA mid/high 4Fh/C2h passed, F4h/2Ch
   * threshold exceeded (ACS-3, SMART RETURN STATUS).
   */
  if (sat_command (fd, ATA_SMART, SMART_RETURN_STATUS, 0x4f, 0xc2, NULL, 0,
                   &regs)
      == 0) {
    if (regs.lba_mid == 0x4f && regs.lba_high == 0xc2)
      status = 1;
    else if (regs.lba_mid == 0xf4 && regs.lba_high == 0x2c)
      status = 0;
  }
  if (drive_ata_decode (identify, data, have_thresholds ? thresholds : NULL,
                        status, d, why, sizeof why)
      == -1)
    unavailable (d, "%s: %s", node, why);
out:
  close (fd);
}

#else

static void
read_ata (const char *node, bool usb, struct drive_health *d)
{
  (void) usb;
  snprintf (d->device, sizeof d->device, "%.63s", node);
  unavailable (d, "a SCSI/ATA disk, but nbdstripe was built without "
                  "libatasmart");
}

#endif

/* The last component of a path. */
static const char *
last (const char *path)
{
  const char *slash = strrchr (path, '/');
  return slash ? slash + 1 : path;
}

static bool
has_prefix (const char *s, const char *p)
{
  return strncmp (s, p, strlen (p)) == 0;
}

void
drive_read (const char *path, struct drive_health *d)
{
  struct stat st;
  char sys[PATH_MAX], node[PATH_MAX], extra[PATH_MAX];
  const char *name;

  drive_health_init (d);
  if (member_is_uri (path)) {
    unavailable (d, "a remote member (NBD export): its drive is its "
                    "server's to watch");
    return;
  }
  if (stat (path, &st) == -1) {
    unavailable (d, "%s", strerror (errno));
    return;
  }
  if (S_ISREG (st.st_mode)) {
    if (whole_disk (st.st_dev, sys, sizeof sys) == 0)
      unavailable (d,
                   "a regular file (on %s): drive health is read for "
                   "block-device members only",
                   last (sys));
    else
      unavailable (d, "a regular file: drive health is read for "
                      "block-device members only");
    return;
  }
  if (!S_ISBLK (st.st_mode)) {
    unavailable (d, "not a block device");
    return;
  }
  if (whole_disk (st.st_rdev, sys, sizeof sys) == -1) {
    unavailable (d, "block device %u:%u is not in sysfs", major (st.st_rdev),
                 minor (st.st_rdev));
    return;
  }
  name = last (sys);
  if (has_prefix (name, "loop")) {
    if (read_line (sys, "loop/backing_file", extra, sizeof extra) == 0)
      unavailable (d, "a loop device (over %s): no drive of its own", extra);
    else
      unavailable (d, "a loop device: no drive of its own");
    return;
  }
  if (has_prefix (name, "nbd")) {
    unavailable (d, "an NBD device: its drive is its server's to watch");
    return;
  }
  if (has_prefix (name, "dm-")) {
    if (read_line (sys, "dm/name", extra, sizeof extra) == 0)
      unavailable (d,
                   "a device-mapper device (%s): drive health is read "
                   "for whole drives only",
                   extra);
    else
      unavailable (d, "a device-mapper device: drive health is read for "
                      "whole drives only");
    return;
  }
  if (has_prefix (name, "md")) {
    unavailable (d, "an md array: drive health is read for whole drives "
                    "only");
    return;
  }
  if (has_prefix (name, "vd") || has_prefix (name, "xvd")) {
    unavailable (d,
                 "a virtual disk (%s): the hypervisor does not pass "
                 "drive health through",
                 name);
    return;
  }
  if (has_prefix (name, "zram") || has_prefix (name, "ram")
      || has_prefix (name, "pmem")) {
    unavailable (d, "a memory-backed device (%s): no drive", name);
    return;
  }
  if (!has_prefix (name, "nvme") && !has_prefix (name, "sd")
      && !has_prefix (name, "hd")) {
    unavailable (d, "%s: no drive health for this kind of device", name);
    return;
  }
  if (disk_node (sys, node, sizeof node) == -1) {
    /* No /dev/DEVNAME (no devtmpfs?): the member's own node, when it is
     * the whole disk.
     */
    char dev[32];
    unsigned ma, mi;
    if (read_line (sys, "dev", dev, sizeof dev) == 0
        && sscanf (dev, "%u:%u", &ma, &mi) == 2
        && st.st_rdev == makedev (ma, mi))
      snprintf (node, sizeof node, "%s", path);
    else {
      unavailable (d, "%s: no device node for the whole disk", name);
      return;
    }
  }
  if (has_prefix (name, "nvme"))
    read_nvme (node, d);
  else
    read_ata (node, strstr (sys, "/usb") != NULL, d);
}
