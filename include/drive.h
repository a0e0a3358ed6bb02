/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: drive health -- what a member's drive says of itself.
 *
 * For RAID-0 the I/O path learns of a dying drive late: at the first
 * read error, when that data may already be gone.  SSDs say earlier that
 * they are going.  Health (plugin/health/) polls each member's drive in
 * the background (health.drive_interval) and reads:
 *
 *   NVMe namespaces: the controller's SMART / Health Information log
 *     page (log identifier 02h, 512 bytes, for all namespaces) and its
 *     Identify Controller data (model, serial, firmware), through
 *     libnvme's admin passthrough on the namespace's block device;
 *   ATA / SATA disks (sd*, with an ATA drive behind libata or a SAT
 *     bridge): IDENTIFY DEVICE, the SMART data and thresholds and the
 *     drive's own verdict (SMART RETURN STATUS), through SG_IO ATA
 *     PASS-THROUGH (16); the attributes read by libatasmart.  Not
 *     libatasmart's own transport: it asks for the ATA registers back
 *     (CK_COND) on data-in commands too, and Linux 6.1's libata answers
 *     those with fixed-format sense that libatasmart refuses (qemu's
 *     AHCI disk: every command "fails");
 *   everything else: not available, with the reason (a regular file, a
 *     loop, device-mapper, md, virtio or NBD device, a remote member, a
 *     USB bridge that hides SMART, no permission).
 *
 * A reading goes through the decoders below, which take the bytes the
 * drive returned (an NVMe log page; ATA identify data, SMART data and
 * thresholds): the unit tests give them pages captured from qemu's
 * emulated drives and made by hand.
 *
 * What it means, said once (drive_predicts_failure): a drive predicts its
 * failure when
 *   NVMe: a critical warning bit is set; or the available spare is below
 *         its threshold; or the media and data integrity errors grew
 *         since the first reading of this run;
 *   ATA:  its SMART self-assessment says failing; or a pre-failure
 *         attribute is at or below its threshold now; or the
 *         reallocated, pending or offline-uncorrectable sectors grew since
 *         the first reading.
 * NVMe's percentage used reaching 100% is reported (the wear) but alone
 * predicts nothing: the rated endurance is a warranty figure, and drives
 * past it often have most of their spare left.
 */
#ifndef NBDSTRIPE_DRIVE_H
#define NBDSTRIPE_DRIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A figure the drive does not report. */
#define DRIVE_NA (-1)

/* The NVMe SMART / Health log page and the Identify Controller data. */
#define DRIVE_NVME_LOG_SIZE 512
#define DRIVE_NVME_ID_CTRL_SIZE 4096
/* Bytes of data per NVMe "data unit" (1000 units of 512 bytes). */
#define DRIVE_NVME_DATA_UNIT 512000

enum drive_kind { DRIVE_NONE, DRIVE_NVME, DRIVE_ATA };

struct drive_health {
  bool available;
  char reason[256]; /* why not available ("" when it is) */
  enum drive_kind kind;
  char device[64]; /* the device node read ("/dev/nvme0n1") */
  char model[48], serial[32], firmware[16];

  /* Both kinds; DRIVE_NA when not reported. */
  int64_t temperature_c;
  int64_t power_on_hours;
  int64_t power_cycles;
  /* NVMe's percentage used; ATA: 100 - the wear levelling count's
   * normalized value (a new drive reads 100 there).
   */
  int64_t percentage_used;
  /* NVMe: data units written x 512000; ATA: attribute 241 (total LBAs
   * written) x 512.
   */
  int64_t data_written_bytes;

  /* NVMe. */
  int critical_warning; /* byte 0 of the log; DRIVE_NA for ATA */
  int64_t available_spare, spare_threshold; /* percent */
  int64_t media_errors, unsafe_shutdowns, data_units_written;
  int64_t error_log_entries;

  /* ATA. */
  int smart_status;              /* 1 passed, 0 failing, DRIVE_NA unknown */
  int64_t reallocated_sectors;   /* attribute 5 */
  int64_t pending_sectors;       /* 197 */
  int64_t offline_uncorrectable; /* 198 */
  int64_t wear_leveling_count;   /* 177's normalized value */
  int64_t wear_leveling_raw;
  /* A pre-failure attribute at or below its threshold now: "attribute 5
   * (reallocated-sector-count) at 9, threshold 10"; "" when none.
   */
  char failing_attribute[96];
};

/* Every figure DRIVE_NA, not available, no reason. */
extern void drive_health_init (struct drive_health *d);

/* Decode an NVMe SMART / Health log page (len >= DRIVE_NVME_LOG_SIZE
 * bytes, as the controller returned it) into d: available, kind NVMe.
 * 128-bit counters beyond what an int64_t holds read as INT64_MAX.  -1
 * (d unchanged) when len is short.
 */
extern int drive_nvme_decode (const uint8_t *page, size_t len,
                              struct drive_health *d);
/* Model, serial and firmware from Identify Controller data (len >=
 * DRIVE_NVME_ID_CTRL_SIZE), trimmed, non-printable bytes as '?'.
 */
extern void drive_nvme_decode_identify (const uint8_t *id, size_t len,
                                        struct drive_health *d);
/* The name of critical warning bit b (0..7): "spare_below_threshold",
 * "temperature", "reliability_degraded", "read_only",
 * "volatile_memory_backup_failed", "persistent_memory_unreliable",
 * "reserved_bit_6", "reserved_bit_7".
 */
extern const char *drive_nvme_warning_name (unsigned b);

/* ATA pages: IDENTIFY DEVICE data, SMART READ DATA, SMART READ
 * THRESHOLDS (512 bytes each).
 */
#define DRIVE_ATA_PAGE_SIZE 512

/* Decode an ATA drive from the pages it returned (thresholds may be
 * NULL) and its SMART RETURN STATUS (status: 1 passed, 0 failing,
 * DRIVE_NA unknown) into d: available, kind ATA.  The attributes are
 * libatasmart's reading of them.  -1 with why when the drive has no
 * SMART (or it is switched off), or libatasmart cannot read the pages.
 */
extern int drive_ata_decode (const uint8_t *identify, const uint8_t *data,
                             const uint8_t *thresholds, int status,
                             struct drive_health *d, char *why, size_t whylen);

/* Whether the reading now predicts the drive's failure (the rules
 * above); base is the first reading of this run (NULL: none, nothing can
 * have grown).  The reason, "predicted: ..." with every cause found
 * ("predicted: available spare 8% < threshold 10%"), in why.
 */
extern bool drive_predicts_failure (const struct drive_health *base,
                                    const struct drive_health *now, char *why,
                                    size_t len);

/* The wear, at the recent write rate.  rate: bytes a second written to
 * the drive lately (negative: unknown).  Out: the rated endurance in
 * bytes as the drive's own percentage used implies it (written /
 * used%; negative: unknown, as long as the drive says 0%), and the
 * seconds until data written reaches it (negative: unknown; 0: reached;
 * INFINITY: nothing is being written).
 */
struct drive_wear {
  double endurance_bytes;
  double seconds_left;
};
extern void drive_wear_estimate (int64_t written, int64_t percentage_used,
                                 double rate, struct drive_wear *w);

/* Read the drive behind path (a member: a file, a block device, an NBD
 * URI) now, into d; never fails: what cannot be read is "not available"
 * with the reason.  Opens path's whole disk read-only (a served member is
 * held O_EXCL by the server: a read-only open does not disturb that) and
 * issues bounded admin commands; for tools and the health poller thread,
 * never the I/O path.
 */
extern void drive_read (const char *path, struct drive_health *d);

/* The backends built in, "nvme,ata" (for --dump-plugin). */
extern const char *drive_backends (void);

#endif /* NBDSTRIPE_DRIVE_H */
