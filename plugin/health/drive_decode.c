/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: drive health -- the bytes a drive returned, decoded, and
 * what they mean (include/drive.h).  No device access here: the unit
 * tests feed these captured and hand-made pages.
 */

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LIBATASMART
#include <atasmart.h>
#endif

#include "drive.h"

void
drive_health_init (struct drive_health *d)
{
  memset (d, 0, sizeof *d);
  d->kind = DRIVE_NONE;
  d->temperature_c = d->power_on_hours = d->power_cycles = DRIVE_NA;
  d->percentage_used = d->data_written_bytes = DRIVE_NA;
  d->critical_warning = DRIVE_NA;
  d->available_spare = d->spare_threshold = DRIVE_NA;
  d->media_errors = d->unsafe_shutdowns = d->data_units_written = DRIVE_NA;
  d->error_log_entries = DRIVE_NA;
  d->smart_status = DRIVE_NA;
  d->reallocated_sectors = d->pending_sectors = DRIVE_NA;
  d->offline_uncorrectable = DRIVE_NA;
  d->wear_leveling_count = d->wear_leveling_raw = DRIVE_NA;
}

/* A little-endian counter of len bytes (NVMe's are 16), saturated at
 * INT64_MAX.
 */
static int64_t
le_counter (const uint8_t *p, size_t len)
{
  uint64_t v = 0;

  for (size_t i = len; i-- > 8;)
    if (p[i] != 0)
      return INT64_MAX;
  for (size_t i = len < 8 ? len : 8; i-- > 0;)
    v = v << 8 | p[i];
  return v > INT64_MAX ? INT64_MAX : (int64_t) v;
}

/* a x b, saturated at INT64_MAX (both >= 0). */
static int64_t
sat_mul (int64_t a, int64_t b)
{
  if (a != 0 && b > INT64_MAX / a)
    return INT64_MAX;
  return a * b;
}

const char *
drive_nvme_warning_name (unsigned b)
{
  static const char *const names[8] = {
    "spare_below_threshold",
    "temperature",
    "reliability_degraded",
    "read_only",
    "volatile_memory_backup_failed",
    "persistent_memory_unreliable",
    "reserved_bit_6",
    "reserved_bit_7",
  };
  return b < 8 ? names[b] : "?";
}

/* NVMe base specification 2.0, figure 207 (SMART / Health Information
 * log page): byte 0 critical warning; 1-2 composite temperature (K);
 * 3 available spare, 4 its threshold, 5 percentage used (%); 32-47 data
 * units read, 48-63 written (thousands of 512-byte units), 64-79 host
 * reads, 80-95 host writes, 96-111 controller busy time, 112-127 power
 * cycles, 128-143 power-on hours, 144-159 unsafe shutdowns, 160-175
 * media and data integrity errors, 176-191 error log entries: 128-bit
 * little-endian counters.
 */
int
drive_nvme_decode (const uint8_t *page, size_t len, struct drive_health *d)
{
  unsigned kelvin;

  if (page == NULL || len < DRIVE_NVME_LOG_SIZE)
    return -1;
  d->available = true;
  d->reason[0] = '\0';
  d->kind = DRIVE_NVME;
  d->critical_warning = page[0];
  kelvin = page[1] | (unsigned) page[2] << 8;
  /* 0: not reported (the field is mandatory, but a broken drive...). */
  d->temperature_c = kelvin ? (int64_t) kelvin - 273 : DRIVE_NA;
  d->available_spare = page[3];
  /* 101 to 255 are reserved: no threshold. */
  d->spare_threshold = page[4] <= 100 ? page[4] : DRIVE_NA;
  d->percentage_used = page[5];
  d->data_units_written = le_counter (&page[48], 16);
  d->data_written_bytes =
    sat_mul (d->data_units_written, DRIVE_NVME_DATA_UNIT);
  d->power_cycles = le_counter (&page[112], 16);
  d->power_on_hours = le_counter (&page[128], 16);
  d->unsafe_shutdowns = le_counter (&page[144], 16);
  d->media_errors = le_counter (&page[160], 16);
  d->error_log_entries = le_counter (&page[176], 16);
  return 0;
}

/* An ASCII field padded with spaces, trimmed, into out. */
static void
ascii_field (char *out, size_t outlen, const uint8_t *p, size_t n)
{
  size_t k = 0;

  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\0'))
    n--;
  while (n > 0 && *p == ' ') {
    p++;
    n--;
  }
  for (size_t i = 0; i < n && k + 1 < outlen; ++i)
    out[k++] = p[i] >= 0x20 && p[i] < 0x7f ? (char) p[i] : '?';
  out[k] = '\0';
}

/* Identify Controller: bytes 4-23 serial number, 24-63 model number,
 * 64-71 firmware revision, ASCII padded with spaces.
 */
void
drive_nvme_decode_identify (const uint8_t *id, size_t len,
                            struct drive_health *d)
{
  if (id == NULL || len < 72)
    return;
  ascii_field (d->serial, sizeof d->serial, &id[4], 20);
  ascii_field (d->model, sizeof d->model, &id[24], 40);
  ascii_field (d->firmware, sizeof d->firmware, &id[64], 8);
}

#ifdef HAVE_LIBATASMART

/* The lower 32 bits of a raw value, as smartctl and libatasmart read the
 * sector counts (vendors put other things in the upper bytes).
 */
static int64_t
raw32 (const uint8_t raw[6])
{
  return (int64_t) raw[0] | (int64_t) raw[1] << 8 | (int64_t) raw[2] << 16
         | (int64_t) raw[3] << 24;
}

static int64_t
raw48 (const uint8_t raw[6])
{
  return raw32 (raw) | (int64_t) raw[4] << 32 | (int64_t) raw[5] << 40;
}

/* Attributes by their number, not libatasmart's names: its vendor
 * quirks rename some.
 */
static void
ata_attribute (SkDisk *sk, const SkSmartAttributeParsedData *a, void *opaque)
{
  struct drive_health *d = opaque;

  (void) sk;
  switch (a->id) {
  case 5: d->reallocated_sectors = raw32 (a->raw); break;
  case 197: d->pending_sectors = raw32 (a->raw); break;
  case 198: d->offline_uncorrectable = raw32 (a->raw); break;
  case 177:
    if (a->current_value_valid) {
      d->wear_leveling_count = a->current_value;
      d->percentage_used =
        a->current_value >= 100 ? 0 : 100 - (int64_t) a->current_value;
    }
    d->wear_leveling_raw = raw48 (a->raw);
    break;
  case 241: d->data_written_bytes = sat_mul (raw48 (a->raw), 512); break;
  }
  if (a->prefailure && a->good_now_valid && !a->good_now
      && d->failing_attribute[0] == '\0')
    snprintf (d->failing_attribute, sizeof d->failing_attribute,
              "attribute %u (%.40s) at %u, threshold %u", a->id,
              a->name ? a->name : "?", a->current_value, a->threshold);
}

/* libatasmart's blob (sk_disk_set_blob): tagged sections, a tag (four
 * characters, as libatasmart's MAKE_TAG lays them out in memory) and a
 * big-endian size, then the bytes.
 */
static size_t
blob_put (uint8_t *p, const char tag[4], const void *data, uint32_t size)
{
  uint32_t be = htonl (size);

  memcpy (p, tag, 4);
  memcpy (p + 4, &be, 4);
  memcpy (p + 8, data, size);
  return 8 + size;
}

int
drive_ata_decode (const uint8_t *identify, const uint8_t *data,
                  const uint8_t *thresholds, int status,
                  struct drive_health *d, char *why, size_t whylen)
{
  uint8_t blob[4 * (8 + DRIVE_ATA_PAGE_SIZE)];
  size_t len = 0;
  SkDisk *sk = NULL;
  const SkIdentifyParsedData *id;
  SkBool smart = FALSE;
  uint64_t u;
  int r = -1;

  len += blob_put (&blob[len], "IDFY", identify, DRIVE_ATA_PAGE_SIZE);
  if (status != DRIVE_NA) {
    uint32_t ok = status == 1;
    len += blob_put (&blob[len], "SMST", &ok, sizeof ok);
  }
  if (data)
    len += blob_put (&blob[len], "SMDT", data, DRIVE_ATA_PAGE_SIZE);
  if (thresholds)
    len += blob_put (&blob[len], "SMTH", thresholds, DRIVE_ATA_PAGE_SIZE);
  if (sk_disk_open (NULL, &sk) == -1) {
    snprintf (why, whylen, "libatasmart: %s", strerror (errno));
    return -1;
  }
  if (sk_disk_set_blob (sk, blob, len) == -1) {
    snprintf (why, whylen, "pages libatasmart cannot read");
    goto out;
  }
  if (sk_disk_smart_is_available (sk, &smart) == -1 || !smart) {
    snprintf (why, whylen, "the drive has no SMART (or it is switched off)");
    goto out;
  }
  if (data == NULL) {
    snprintf (why, whylen, "no SMART data");
    goto out;
  }
  d->available = true;
  d->reason[0] = '\0';
  d->kind = DRIVE_ATA;
  if (sk_disk_identify_parse (sk, &id) == 0) {
    ascii_field (d->model, sizeof d->model, (const uint8_t *) id->model,
                 strlen (id->model));
    ascii_field (d->serial, sizeof d->serial, (const uint8_t *) id->serial,
                 strlen (id->serial));
    ascii_field (d->firmware, sizeof d->firmware,
                 (const uint8_t *) id->firmware, strlen (id->firmware));
  }
  d->smart_status = status;
  if (sk_disk_smart_parse_attributes (sk, ata_attribute, d) == -1) {
    snprintf (why, whylen, "SMART attributes: %s", strerror (errno));
    d->available = false;
    goto out;
  }
  if (sk_disk_smart_get_temperature (sk, &u) == 0 && u >= 273150)
    d->temperature_c = (int64_t) ((u - 273150 + 500) / 1000);
  if (sk_disk_smart_get_power_on (sk, &u) == 0)
    d->power_on_hours = (int64_t) (u / 3600000);
  if (sk_disk_smart_get_power_cycle (sk, &u) == 0 && u <= INT64_MAX)
    d->power_cycles = (int64_t) u;
  r = 0;
out:
  sk_disk_free (sk);
  return r;
}

#else

int
drive_ata_decode (const uint8_t *identify, const uint8_t *data,
                  const uint8_t *thresholds, int status,
                  struct drive_health *d, char *why, size_t whylen)
{
  (void) identify;
  (void) data;
  (void) thresholds;
  (void) status;
  (void) d;
  snprintf (why, whylen, "built without libatasmart: no ATA SMART");
  return -1;
}

#endif

/* Append "; " and a part to why. */
static void __attribute__ ((format (printf, 3, 4)))
add (char *why, size_t len, const char *fmt, ...)
{
  size_t n = strlen (why);
  va_list args;

  if (n + 3 >= len)
    return;
  if (n > 0) {
    strcpy (&why[n], "; ");
    n += 2;
  }
  va_start (args, fmt);
  vsnprintf (&why[n], len - n, fmt, args);
  va_end (args);
}

/* Whether counter grew from base's to now's (both reported). */
static bool
grew (int64_t base, int64_t now)
{
  return base != DRIVE_NA && now != DRIVE_NA && now > base;
}

bool
drive_predicts_failure (const struct drive_health *base,
                        const struct drive_health *now, char *why, size_t len)
{
  char parts[512] = "";

  if (!now->available)
    return false;
  if (base && (!base->available || base->kind != now->kind))
    base = NULL;
  if (now->kind == DRIVE_NVME) {
    bool spare_said = false;
    int cw = now->critical_warning;

    if (now->available_spare != DRIVE_NA && now->spare_threshold > 0
        && now->available_spare < now->spare_threshold) {
      add (parts, sizeof parts,
           "available spare %" PRId64 "%% < threshold %" PRId64 "%%",
           now->available_spare, now->spare_threshold);
      spare_said = true;
    }
    if (spare_said && cw != DRIVE_NA)
      cw &= ~1; /* said in figures already */
    if (cw != DRIVE_NA && cw != 0) {
      char names[256] = "";
      for (unsigned b = 0; b < 8; ++b)
        if (cw >> b & 1)
          snprintf (&names[strlen (names)], sizeof names - strlen (names),
                    "%s%s", names[0] ? ", " : "", drive_nvme_warning_name (b));
      add (parts, sizeof parts, "critical warning 0x%02x: %s",
           now->critical_warning, names);
    }
    if (base && grew (base->media_errors, now->media_errors))
      add (parts, sizeof parts,
           "media and data integrity errors grew from %" PRId64 " to %" PRId64,
           base->media_errors, now->media_errors);
  }
  else if (now->kind == DRIVE_ATA) {
    static const struct {
      size_t off;
      const char *what;
    } counts[] = {
      { offsetof (struct drive_health, reallocated_sectors),
        "reallocated sectors" },
      { offsetof (struct drive_health, pending_sectors), "pending sectors" },
      { offsetof (struct drive_health, offline_uncorrectable),
        "offline uncorrectable sectors" },
    };
    if (now->smart_status == 0)
      add (parts, sizeof parts, "SMART self-assessment: failing");
    if (now->failing_attribute[0])
      add (parts, sizeof parts, "%s", now->failing_attribute);
    for (size_t k = 0; base && k < sizeof counts / sizeof counts[0]; ++k) {
      int64_t b = *(const int64_t *) ((const char *) base + counts[k].off);
      int64_t n = *(const int64_t *) ((const char *) now + counts[k].off);
      if (grew (b, n))
        add (parts, sizeof parts, "%s grew from %" PRId64 " to %" PRId64,
             counts[k].what, b, n);
    }
  }
  if (parts[0] == '\0')
    return false;
  snprintf (why, len, "predicted: %s", parts);
  return true;
}

void
drive_wear_estimate (int64_t written, int64_t percentage_used, double rate,
                     struct drive_wear *w)
{
  w->endurance_bytes = -1;
  w->seconds_left = -1;
  if (written == DRIVE_NA || percentage_used == DRIVE_NA
      || percentage_used <= 0)
    return;
  /* The drive rounds its percentage: up to 1% of the endurance off,
   * which is as good as the drive's own estimate gets.
   */
  w->endurance_bytes = (double) written * 100.0 / (double) percentage_used;
  if (percentage_used >= 100 || (double) written >= w->endurance_bytes)
    w->seconds_left = 0;
  else if (rate == 0)
    w->seconds_left = INFINITY;
  else if (rate > 0)
    w->seconds_left = (w->endurance_bytes - (double) written) / rate;
}
