/* nbdstripe inspect: print members' headers, for people or (--json)
 * scripts.  A member is a path or an NBD URI (opened raw).  Reads only.
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "nbdstripe.h"
#include "json.h"
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

  struct json_object *all = json ? json_object_new_array () : NULL;
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
      struct json_object *o = json_object_new_object ();

      json_put (o, "path", json_text (argv[i]));
      if (!ok)
        json_put (o, "error", json_text (err));
      else {
        struct json_object *sizes = json_object_new_array ();
        json_put (o, "version", json_object_new_int64 (sb.version));
        json_put (o, "array_uuid", json_text (au));
        json_put (o, "member_uuid", json_text (mu));
        json_put (o, "name", json_text (sb.name));
        json_put (o, "ctime", json_u64 (sb.ctime));
        json_put (o, "ctime_iso", json_text (when));
        json_put (o, "member_index", json_object_new_int64 (sb.member_index));
        json_put (o, "member_count", json_object_new_int64 (sb.member_count));
        json_put (o, "chunk", json_u64 (sb.chunk));
        json_put (o, "layout", json_object_new_int64 (sb.layout));
        json_put (o, "flags", json_object_new_int64 (sb.flags));
        json_put (o, "data_offset", json_u64 (sb.data_offset));
        json_put (o, "events", json_u64 (sb.events));
        for (uint32_t k = 0; k < sb.member_count; ++k)
          json_object_array_add (sizes, json_u64 (sb.member_sizes[k]));
        json_put (o, "member_sizes", sizes);
      }
      json_object_array_add (all, o);
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
  if (json) {
    char *text = json_text_of (all);
    json_object_put (all);
    if (text == NULL) {
      perror ("nbdstripe: inspect");
      return 1;
    }
    fputs (text, stdout);
    free (text);
  }
  return status;
}
