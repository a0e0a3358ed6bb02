/* nbdstripe inspect: print members' headers, for people or (--json)
 * scripts.  A member is a path or an NBD URI (opened raw).  Reads only.
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nbdstripe.h"
#include "utf8.h"
#include "member.h"
#include "header.h"

static int
inspect_usage (FILE *fp, int status)
{
  fprintf (
    fp,
    "Usage: nbdstripe inspect [--json] MEMBER...\n"
    "Print the nbdstripe header of each member (file, device or NBD URI).\n"
    "Exit status 1 if any member has no valid header.\n");
  return status;
}

/* Paths and names go into JSON: escape what JSON requires, and since
 * JSON text is UTF-8, a byte that is not part of valid UTF-8 (Linux paths
 * may hold any byte) becomes U+FFFD.
 */
static void
json_string (const char *str)
{
  const unsigned char *s = (const unsigned char *) str;

  putchar ('"');
  while (*s) {
    unsigned cp;
    size_t n = utf8_decode (s, 4, &cp);

    if (n == 0) {
      fputs ("\\ufffd", stdout);
      s++;
    }
    else if (*s == '"' || *s == '\\') {
      printf ("\\%c", *s);
      s++;
    }
    else if (*s < 0x20) {
      printf ("\\u%04x", *s);
      s++;
    }
    else {
      fwrite (s, 1, n, stdout);
      s += n;
    }
  }
  putchar ('"');
}

static const char *
iso_time (uint64_t t, char *buf, size_t len)
{
  time_t tt = t;
  struct tm tm;

  if (gmtime_r (&tt, &tm) == NULL
      || strftime (buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
    snprintf (buf, len, "?");
  return buf;
}

static int
read_header (const char *path, struct header *sb, char *err, size_t len)
{
  uint8_t buf[HEADER_SIZE];
  const char *field = NULL;
  const struct member_open_params params = { .readonly = true, .raw = true };
  struct member d;
  enum header_error e;
  ssize_t n = -1;

  if (member_open (&d, 0, path, &params, err, len) == 0) {
    n = member_pread (&d, buf, sizeof buf, 0, false, err, len);
    member_close (&d);
  }
  if (n == -1)
    return -1;
  e = header_decode (buf, n, sb, &field);
  if (e != HEADER_OK) {
    snprintf (err, len, "%s%s%s", header_strerror (e), field ? ": field " : "",
              field ? field : "");
    return -1;
  }
  return 0;
}

int
cmd_inspect (int argc, char **argv)
{
  static const struct option opts[] = {
    { "json", no_argument, NULL, 'j' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  bool json = false;
  int c, status = 0;

  while ((c = getopt_long (argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case 'j': json = true; break;
    case 'h': return inspect_usage (stdout, 0);
    default: return inspect_usage (stderr, 2);
    }
  }
  if (optind >= argc)
    return inspect_usage (stderr, 2);

  if (json)
    printf ("[\n");
  for (int i = optind; i < argc; ++i) {
    struct header sb;
    char err[256], au[37], mu[37], when[32];
    bool ok = read_header (argv[i], &sb, err, sizeof err) == 0;

    if (!ok)
      status = 1;
    if (ok) {
      uuid_format (sb.array_uuid, au);
      uuid_format (sb.member_uuid, mu);
      iso_time (sb.ctime, when, sizeof when);
    }
    if (json) {
      printf ("  {\"path\": ");
      json_string (argv[i]);
      if (!ok) {
        printf (", \"error\": ");
        json_string (err);
      }
      else {
        printf (", \"version\": %" PRIu32 ", \"array_uuid\": \"%s\", "
                "\"member_uuid\": \"%s\", \"name\": ",
                sb.version, au, mu);
        json_string (sb.name);
        printf (", \"ctime\": %" PRIu64 ", \"ctime_iso\": \"%s\", "
                "\"member_index\": %" PRIu32 ", \"member_count\": %" PRIu32
                ", \"chunk\": %" PRIu64 ", \"layout\": %" PRIu32
                ", \"flags\": %" PRIu32 ", \"data_offset\": %" PRIu64
                ", \"events\": %" PRIu64 ", \"member_sizes\": [",
                sb.ctime, when, sb.member_index, sb.member_count, sb.chunk,
                sb.layout, sb.flags, sb.data_offset, sb.events);
        for (uint32_t k = 0; k < sb.member_count; ++k)
          printf ("%s%" PRIu64, k ? ", " : "", sb.member_sizes[k]);
        printf ("]");
      }
      printf ("}%s\n", i + 1 < argc ? "," : "");
      continue;
    }
    if (!ok) {
      fprintf (stderr, "nbdstripe: %s: %s\n", argv[i], err);
      continue;
    }
    uint64_t total = 0;
    bool overflow = false;
    for (uint32_t k = 0; k < sb.member_count; ++k)
      if (__builtin_add_overflow (total, sb.member_sizes[k], &total))
        overflow = true;
    char size[64], events[64];
    if (overflow)
      snprintf (size, sizeof size, "too large (the sizes overflow 64 bits)");
    else
      snprintf (size, sizeof size, "%" PRIu64 " bytes", total);
    if (sb.version == HEADER_VERSION_1)
      snprintf (events, sizeof events, "none (version 1 header)");
    else
      snprintf (events, sizeof events, "%" PRIu64, sb.events);
    printf ("%s:\n"
            "  volume:       %s\n"
            "  array UUID:   %s\n"
            "  member:       %" PRIu32 " of %" PRIu32 " (UUID %s)\n"
            "  created:      %s\n"
            "  chunk:        %" PRIu64 " bytes\n"
            "  layout:       md raid0 layout %" PRIu32 " (%s)\n"
            "  data offset:  %" PRIu64 " bytes\n"
            "  generation:   %s\n"
            "  format:       version %" PRIu32 ", flags %#" PRIx32 "\n"
            "  volume size:  %s\n",
            argv[i], sb.name, au, sb.member_index, sb.member_count, mu, when,
            sb.chunk, sb.layout,
            sb.layout == LAYOUT_MD_ALT ? "alternate multi-zone" : "original",
            sb.data_offset, events, sb.version, sb.flags, size);
    for (uint32_t k = 0; k < sb.member_count; ++k)
      printf ("  member %-3" PRIu32 "   %" PRIu64 " data bytes\n", k,
              sb.member_sizes[k]);
  }
  if (json)
    printf ("]\n");
  return status;
}
