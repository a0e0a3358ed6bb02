/* nbdstripe check: assemble and check a volume (serve.c starts with
 * the same check).  Members that are NBD URIs are checked as files are:
 * their servers must answer, with headers that agree (assemble.c) and
 * sizes large enough.
 */

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "assemble.h"
#include "log.h"
#include "md_super.h"
#include "nbdstripe.h"
#include "volume.h"

int
check_volume (const struct stripe_config *cfg, bool claim, uint64_t *size,
              char uuid[37])
{
  struct assembly a;
  struct volume *v;
  /* Read-only: checking must never write.  Raw: one plain connection to
   * each remote member, no threads.  With claim (serve), members are
   * locked (shared) while they are checked, so that a volume already
   * served is refused now, naming its server.
   */
  const struct volume_options o = {
    .readonly = true,
    .claim = claim,
    .raw = true,
  };
  int r;

  uuid[0] = '\0';
  v = malloc (sizeof *v);
  if (v == NULL) {
    perror ("nbdstripe: malloc");
    return -1;
  }
  r = volume_open_config (v, cfg, &o, &a);
  if (r == 0) {
    *size = v->layout.size;
    if (v->has_header)
      uuid_format (v->hdr.array_uuid, uuid);
    else if (a.metadata == METADATA_MD) {
      char md[36];
      md_super_uuid_format (a.md.uuid, md);
      snprintf (uuid, 37, "%s", md);
    }
    volume_close (v);
  }
  assembly_free (&a);
  free (v);
  return r;
}

/* Filesystems that know the stripe avoid read-modify-write across
 * members.  Zone 0 (all members) is where nearly all data lives, so the
 * geometry is the config's: chunk and member count.
 */
void
print_mkfs_geometry (uint64_t chunk, unsigned nr_members)
{
  printf ("  mkfs.ext4 -b 4096 -E stride=%" PRIu64 ",stripe_width=%" PRIu64
          "\n  mkfs.xfs -d su=%" PRIu64 "k,sw=%u\n",
          chunk / 4096, chunk / 4096 * nr_members, chunk / 1024, nr_members);
}

static int
check_usage (FILE *fp, int status)
{
  fprintf (fp, "Usage: nbdstripe check CONFIG\n"
               "Check that the volume CONFIG describes can be served: every\n"
               "member's header agrees with the config.  Writes nothing.\n"
               "Exit status 0 when it can be served.\n");
  return status;
}

int
cmd_check (int argc, char **argv)
{
  struct stripe_config cfg;
  uint64_t size = 0;
  char uuid[37], hs[32];
  int r;

  if (argc == 2 && strcmp (argv[1], "--help") == 0)
    return check_usage (stdout, 0);
  if (argc != 2 || argv[1][0] == '-')
    return check_usage (stderr, 2);

  memset (&cfg, 0, sizeof cfg);
  if (load_config (argv[1], &cfg) == -1) {
    config_free (&cfg);
    return 1;
  }
  print_config_warnings (&cfg);
  r = check_volume (&cfg, false, &size, uuid);
  if (r == 0)
    printf ("%s: volume '%s'%s%s%s: %u members, chunk %" PRIu64 ", %s "
            "(%" PRIu64 " bytes): can be served\n",
            cfg.path, cfg.name, uuid[0] ? " (" : "", uuid, uuid[0] ? ")" : "",
            cfg.nr_members, cfg.chunk, human_size (size, hs, sizeof hs), size);
  if (r == 0)
    print_mkfs_geometry (cfg.chunk, cfg.nr_members);
  config_free (&cfg);
  return r == 0 ? 0 : 1;
}
