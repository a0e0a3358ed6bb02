/* nbdstripe accept: take back a member that is behind the volume's
 * generation, on the operator's word.
 *
 * A member that dropped out while the volume was served stays at the
 * generation it had; the others move on (volume.h).  At the next
 * assembly it is refused as stale, since an older copy of a member looks
 * exactly the same.  When the operator knows it is the member itself and
 * that nothing wrote to it since (a disk that went away and came back
 * after the server stopped), `accept` writes the volume's generation into
 * its header.  Everything else assemble() checks must hold, the volume
 * must not be served (every member is claimed, exclusively, while the
 * header is written), and nothing but that member's header is written.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "log.h"
#include "nbdstripe.h"
#include "member.h"
#include "header.h"

static int
accept_usage (FILE *fp, int status)
{
  fprintf (fp,
           "Usage: nbdstripe accept CONFIG INDEX\n"
           "Take back member INDEX, refused as stale (behind the volume's\n"
           "generation), when it is the member itself and nothing wrote to\n"
           "it since it dropped out.  Writes only that member's header.\n");
  return status;
}

int
cmd_accept (int argc, char **argv)
{
  struct stripe_config cfg;
  struct assembly a;
  struct member d[LAYOUT_MAX_MEMBERS];
  const struct member_open_params params = { .raw = true };
  unsigned n = 0, opened = 0;
  uint64_t events = 0;
  unsigned long idx;
  char *end, why[512];
  int status = 1;

  if (argc == 2 && strcmp (argv[1], "--help") == 0)
    return accept_usage (stdout, 0);
  if (argc != 3 || argv[1][0] == '-')
    return accept_usage (stderr, 2);
  errno = 0;
  idx = strtoul (argv[2], &end, 10);
  if (errno || end == argv[2] || *end || idx >= LAYOUT_MAX_MEMBERS) {
    fprintf (stderr, "nbdstripe: accept: INDEX '%s': expected a member "
                     "index (0, 1, ...)\n",
             argv[2]);
    return 2;
  }

  memset (&cfg, 0, sizeof cfg);
  if (load_config (argv[1], &cfg) == -1)
    goto out;
  n = cfg.nr_members;
  if (cfg.metadata != METADATA_HEADER) {
    fprintf (stderr,
             "nbdstripe: %s: metadata = \"%s\": no nbdstripe generation to "
             "accept%s\n",
             cfg.path, cfg.metadata == METADATA_MD ? "md" : "none",
             cfg.metadata == METADATA_MD
               ? " (md's event counts are md's: mdadm --assemble brings a "
                 "member one event behind up to date)"
               : "");
    goto out;
  }
  if (idx >= n) {
    fprintf (stderr, "nbdstripe: %s: no member %lu (%u members)\n", cfg.path,
             idx, n);
    goto out;
  }

  /* Nobody serves it while we write: claim every member first. */
  for (unsigned i = 0; i < n; ++i) {
    if (member_open (&d[i], i, cfg.members[i], &params, why, sizeof why)
        == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, cfg.members[i],
               why);
      goto out;
    }
    opened = i + 1;
    if (member_claim (&d[i], why, sizeof why) == -1) {
      fprintf (stderr, "nbdstripe: member %u (%s): %s\n", i, cfg.members[i],
               why);
      goto out;
    }
  }
  if (assemble_accepting (&cfg, &a, idx, &events) == -1)
    goto out;
  if (events >= a.hdr.events) {
    printf ("%s: member %lu (%s) is at generation %" PRIu64 ", as the "
            "volume: nothing to accept\n",
            cfg.path, idx, cfg.members[idx], events);
    status = 0;
    goto out;
  }

  {
    struct header sb = a.hdr;
    uint8_t buf[HEADER_SIZE];

    sb.version = HEADER_VERSION;
    sb.member_index = idx;
    memcpy (sb.member_uuid, a.member_uuid[idx], 16);
    header_encode (&sb, buf);
    if (member_pwrite (&d[idx], buf, HEADER_SIZE, 0, why, sizeof why) == -1
        || member_sync (&d[idx], why, sizeof why) == -1) {
      fprintf (stderr, "nbdstripe: member %lu (%s): writing its header: %s\n",
               idx, cfg.members[idx], why);
      goto out;
    }
  }
  printf ("%s: member %lu (%s) taken back: generation %" PRIu64
          " -> %" PRIu64 "\n",
          cfg.path, idx, cfg.members[idx], events, a.hdr.events);
  status = 0;

out:
  for (unsigned i = opened; i-- > 0;)
    member_close (&d[i]);
  config_free (&cfg);
  return status;
}
