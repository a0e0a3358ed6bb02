/* SPDX-License-Identifier: BSD-3-Clause */
/* libFuzzer target for the volume config loader.
 *
 * config_load takes a path (libconfig reports file:line from it), so each
 * input is written to a file in a private directory first.  Besides not
 * crashing or leaking, every accepted config must satisfy what
 * include/config.h promises, and every refusal must name the file first;
 * a violation aborts, which libFuzzer reports as a crash.
 *
 * Build and run: tests/fuzz/run_fuzz_config.sh BUILD_DIR SECONDS.
 */

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "member.h"

static char dir[256];
static char path[sizeof dir + 16];

static void
remove_dir (void)
{
  unlink (path);
  rmdir (dir);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  const char *tmp = getenv ("TMPDIR");

  (void) argc;
  (void) argv;
  /* A crash skips atexit: run_fuzz_config.sh points TMPDIR at its own
   * directory, which it removes whatever happens.
   */
  snprintf (dir, sizeof dir, "%s/nbdstripe-fuzz-config-XXXXXX",
            tmp && *tmp ? tmp : "/tmp");
  if (mkdtemp (dir) == NULL) {
    perror ("mkdtemp");
    exit (EXIT_FAILURE);
  }
  snprintf (path, sizeof path, "%s/fuzz.conf", dir);
  atexit (remove_dir);
  return 0;
}

#define require(cond)                                                         \
  do {                                                                        \
    if (!(cond)) {                                                            \
      fprintf (stderr, "fuzz_config: broken promise: %s\n", #cond);           \
      abort ();                                                               \
    }                                                                         \
  } while (0)

static void
check_accepted (const struct stripe_config *c)
{
  require (strcmp (c->path, path) == 0);
  require (c->name && strlen (c->name) >= 1 && strlen (c->name) <= 63);
  require (c->nr_members >= 1 && c->nr_members <= LAYOUT_MAX_MEMBERS);
  for (unsigned i = 0; i < c->nr_members; ++i) {
    require (c->members[i]
             && (c->members[i][0] == '/' || member_is_uri (c->members[i])));
    for (unsigned j = 0; j < i; ++j)
      require (strcmp (c->members[i], c->members[j]) != 0);
  }
  require (c->chunk > 0 && c->chunk % LAYOUT_CHUNK_ALIGN == 0);
  require (c->data_offset % 4096 == 0);
  require (c->metadata == METADATA_NONE ? c->data_offset == 0
                                        : c->data_offset >= 4096);
  require ((c->serve.socket != NULL) != (c->serve.port != 0));
  require (c->serve.port == 0 || c->serve.address != NULL);
  require (c->serve.socket == NULL || c->serve.socket[0] == '/');
  require (c->serve.export_name != NULL);
  require (c->serve.threads >= 1 && c->serve.threads <= 1024);
  require (c->serve.tls == TLS_OFF
           || (c->serve.tls_certificates != NULL)
                != (c->serve.tls_psk != NULL));
  require (c->health.status_file && c->health.status_file[0] == '/');
  require (c->health.set.interval >= 1 && c->health.set.interval <= 3600);
  require (c->health.set.slow_factor > 1);
  require (c->health.set.slow_floor_us <= HEALTH_MAX_SLOW_FLOOR_US);
  require (c->health.set.error_threshold >= 1
           && c->health.set.error_threshold <= 1000000);
  require (c->nr_warnings <= CONFIG_MAX_WARNINGS);
  for (unsigned i = 0; i < c->nr_warnings; ++i)
    require (strncmp (c->warnings[i], path, strlen (path)) == 0);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  struct stripe_config cfg;
  char err[512];
  /* Now and then a short error buffer, to exercise truncation. */
  size_t errlen = size % 7 == 0 ? 9 : sizeof err;
  uint64_t v;
  char *s;
  int fd;

  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd == -1 || write (fd, data, size) != (ssize_t) size) {
    perror (path);
    abort ();
  }
  close (fd);

  if (config_load (path, &cfg, err, errlen) == 0)
    check_accepted (&cfg);
  else {
    require (strlen (err) < errlen);
    require (strncmp (err, path,
                      errlen - 1 < strlen (path) ? errlen - 1 : strlen (path))
             == 0);
  }
  config_free (&cfg);
  config_free (&cfg);

  s = strndup ((const char *) data, size);
  if (s) {
    if (config_parse_size (s, &v) == 0)
      require (s[0] >= '0' && s[0] <= '9');
    free (s);
  }
  return 0;
}
