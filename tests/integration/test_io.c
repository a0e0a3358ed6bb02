/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test: data path against a real nbdkit.
 *
 *   test_io [--member PATH]... [--chunk SIZE] [--no-uring] [--seed N]
 *           [--sizes SIZE,SIZE,...] [--case NAME]
 *           [--remote HOW[,HOW...]] [--server I:ARGS] [--connections N]
 *
 * Without --member it makes its own sparse member files in a temporary
 * directory: by default four members of mixed sizes (5M+3584, 8M, 3M+17K,
 * 8M) with chunk 12K; --sizes picks other sizes.  With --member (repeated)
 * it uses the given regular files or block devices, in order, and
 * OVERWRITES them.  --chunk is passed as chunk=SIZE (without it, and with
 * --member or --sizes, no chunk= is passed and the plugin's default 128K is
 * expected).  --no-uring passes -D stripe.io_uring=0.  --case runs one case.
 *
 * --remote serves members remotely (msrv.h): HOW is local, unix, tcp,
 * tls-unix or tls-tcp, one for every member or one per member in order.
 * A remote member's file (the same file as a local one would be: the
 * backing file) is exported by a stock nbdkit of its own, by default
 * `nbdkit file FILE`; --server I:ARGS replaces "file FILE" for member I
 * with ARGS split at spaces, %s standing for the file (e.g.
 * "1:--filter=multi-conn file %s multi-conn-mode=disable").  The volume
 * gets the member's NBD URI instead of its path; TLS members share one
 * PSK made by psktool.  --connections N passes connections=N.
 *
 * Every byte is checked against an in-memory model of the volume, and the
 * member files against an independent layout oracle (tests/lib/oracle.c).
 *
 * Files: this one (the command line and the list of cases);
 * test_io_fixture.[ch] (a volume under test: its members and their
 * servers, the model, the checks against the model and the oracle); the
 * cases, by theme: test_io_properties.c (properties), test_io_writes.c
 * (concurrent_writes), test_io_trim_zero.c (trim, zero_fua_flush),
 * test_io_extents.c (extents).
 *
 * With remote members, what each member server can do (asked with libnbd
 * before the volume starts) sets what is expected: the volume advertises
 * fast zero only if every remote member does; a trim leaves the bytes of
 * a member without trim unchanged (and its file's blocks); extents of a
 * member whose server does not report holes are all data; a FUA write reaches
 * a server without FUA as a write and a flush.  And the volume's nbdkit opens
 * exactly N connections (connections=, default 4) to a member server that
 * advertises multi-conn and exactly 1 to one that does not: counted in the
 * server's log filter lines, Connect and Disconnect in order, over the
 * volume's whole run.
 *
 * Exit: 0 all passed, 1 a case failed, 77 everything skipped.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_io_fixture.h"

#define DEFAULT_SEED 20240611ULL
static const char default_sizes[] = "5M+3584,8M,3M+17K,8M";
static const char default_chunk[] = "12K";

/* ---- main ------------------------------------------------------------- */

static void
usage (FILE *f)
{
  fprintf (
    f,
    "usage: test_io [--member PATH]... [--chunk SIZE] [--no-uring] [--seed "
    "N]\n"
    "               [--sizes SIZE,SIZE,...] [--case NAME]\n"
    "  --member PATH  use this member (file or block device; OVERWRITTEN)\n"
    "  --chunk SIZE   chunk=SIZE (default: 12K with the built-in members,\n"
    "                 else not passed and 128K expected)\n"
    "  --no-uring     run nbdkit with -D stripe.io_uring=0\n"
    "  --seed N       random seed (default %llu)\n"
    "  --sizes LIST   sizes of generated members (default %s)\n"
    "  --case NAME    run only this case\n"
    "  --remote HOW[,HOW...]  serve members remotely: local, unix, tcp,\n"
    "                 tls-unix, tls-tcp (one for all, or one per member)\n"
    "  --server I:ARGS  member I's server runs ARGS instead of \"file %%s\"\n"
    "                 (%%s: its file)\n"
    "  --connections N  pass connections=N\n"
    "environment: STRIPE_PLUGIN (required), STRIPE_LD_PRELOAD,\n"
    "             STRIPE_TEST_VERBOSE=1, STRIPE_KEEP_TMP=1\n",
    (unsigned long long) DEFAULT_SEED, default_sizes);
}

static int
parse_sizes (const char *list)
{
  char *copy = xstrdup (list), *save = NULL, *tok;
  cfg.n = 0;
  for (tok = strtok_r (copy, ",", &save); tok;
       tok = strtok_r (NULL, ",", &save)) {
    if (cfg.n == MAXM || parse_size (tok, &cfg.sizes[cfg.n]) == -1) {
      free (copy);
      return -1;
    }
    cfg.n++;
  }
  free (copy);
  return cfg.n ? 0 : -1;
}

/* --remote: one HOW for every member, or one per member. */
static int
parse_remote (const char *list)
{
  char *copy = xstrdup (list), *save = NULL, *tok;
  unsigned k = 0;
  for (tok = strtok_r (copy, ",", &save); tok;
       tok = strtok_r (NULL, ",", &save)) {
    enum how how;
    bool tls = strncmp (tok, "tls-", 4) == 0;
    const char *t = tls ? tok + 4 : tok;
    if (strcmp (t, "local") == 0 && !tls)
      how = HOW_LOCAL;
    else if (strcmp (t, "unix") == 0)
      how = HOW_UNIX;
    else if (strcmp (t, "tcp") == 0)
      how = HOW_TCP;
    else {
      fprintf (stderr, "test_io: --remote: unknown %s\n", tok);
      free (copy);
      return -1;
    }
    if (k == MAXM) {
      free (copy);
      return -1;
    }
    cfg.how[k] = how;
    cfg.tls[k] = tls;
    k++;
  }
  free (copy);
  if (k == 1)
    for (unsigned i = 1; i < cfg.n; i++) {
      cfg.how[i] = cfg.how[0];
      cfg.tls[i] = cfg.tls[0];
    }
  else if (k != cfg.n) {
    fprintf (stderr, "test_io: --remote: %u entries for %u members\n", k,
             cfg.n);
    return -1;
  }
  return 0;
}

static const struct {
  const char *name;
  void (*fn) (void *);
} cases[] = {
  { "properties", case_properties },
  { "concurrent_writes", case_concurrent_writes },
  { "trim", case_trim },
  { "zero_fua_flush", case_zero_fua_flush },
  { "extents", case_extents },
};

int
main (int argc, char **argv)
{
  const char *sizes = NULL, *remote = NULL;
  int passed = 0, failed = 0, skipped = 0;
  bool ran = false;

  cfg.seed = DEFAULT_SEED;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp (a, "--member") == 0 && val) {
      if (cfg.n == MAXM) {
        fprintf (stderr, "test_io: too many members\n");
        return 1;
      }
      cfg.member[cfg.n++] = val;
      cfg.given = true;
      i++;
    }
    else if (strcmp (a, "--chunk") == 0 && val) {
      cfg.chunk_str = val;
      if (parse_size (val, &cfg.chunk) == -1 || cfg.chunk == 0) {
        fprintf (stderr, "test_io: bad --chunk %s\n", val);
        return 1;
      }
      i++;
    }
    else if (strcmp (a, "--no-uring") == 0)
      cfg.no_uring = true;
    else if (strcmp (a, "--seed") == 0 && val) {
      cfg.seed = strtoull (val, NULL, 0);
      i++;
    }
    else if (strcmp (a, "--sizes") == 0 && val) {
      sizes = val;
      i++;
    }
    else if (strcmp (a, "--case") == 0 && val) {
      cfg.only_case = val;
      i++;
    }
    else if (strcmp (a, "--remote") == 0 && val) {
      remote = val;
      i++;
    }
    else if (strcmp (a, "--server") == 0 && val) {
      char *end;
      unsigned long m = strtoul (val, &end, 10);
      if (end == val || *end != ':' || m >= MAXM) {
        fprintf (stderr, "test_io: bad --server %s (I:ARGS)\n", val);
        return 1;
      }
      cfg.server_args[m] = end + 1;
      i++;
    }
    else if (strcmp (a, "--connections") == 0 && val) {
      cfg.connections = strtoul (val, NULL, 10);
      if (cfg.connections == 0) {
        fprintf (stderr, "test_io: bad --connections %s\n", val);
        return 1;
      }
      i++;
    }
    else if (strcmp (a, "--help") == 0 || strcmp (a, "-h") == 0) {
      usage (stdout);
      return 0;
    }
    else {
      usage (stderr);
      return 1;
    }
  }
  if (cfg.given && sizes) {
    fprintf (stderr, "test_io: --member and --sizes are exclusive\n");
    return 1;
  }
  if (!cfg.given) {
    if (!sizes && !cfg.chunk_str) {
      cfg.chunk_str = default_chunk;
      parse_size (default_chunk, &cfg.chunk);
    }
    if (parse_sizes (sizes ? sizes : default_sizes) == -1) {
      fprintf (stderr, "test_io: bad --sizes\n");
      return 1;
    }
  }
  if (!cfg.chunk_str)
    cfg.chunk = 128 * 1024;
  if (remote && parse_remote (remote) == -1)
    return 1;
  for (unsigned i = 0; i < MAXM; i++)
    if (cfg.server_args[i] && (i >= cfg.n || cfg.how[i] == HOW_LOCAL)) {
      fprintf (stderr, "test_io: --server %u: not a remote member\n", i);
      return 1;
    }

  if (!getenv ("STRIPE_PLUGIN") || !*getenv ("STRIPE_PLUGIN")) {
    printf ("SKIP: STRIPE_PLUGIN is not set\n");
    return EXIT_SKIP;
  }

  printf ("# test_io: seed %llu (reproduce with --seed %llu)\n",
          (unsigned long long) cfg.seed, (unsigned long long) cfg.seed);
  printf ("# chunk %llu%s%s, %u members:", (unsigned long long) cfg.chunk,
          cfg.chunk_str ? "" : " (plugin default, not passed)",
          cfg.no_uring ? ", -D stripe.io_uring=0" : "", cfg.n);
  for (unsigned i = 0; i < cfg.n; i++) {
    static const char *const how[] = { "local", "unix", "tcp" };
    if (cfg.given)
      printf (" %s", cfg.member[i]);
    else
      printf (" %llu", (unsigned long long) cfg.sizes[i]);
    if (remote)
      printf (" (%s%s%s%s)", cfg.tls[i] ? "tls-" : "", how[cfg.how[i]],
              cfg.server_args[i] ? ": " : "",
              cfg.server_args[i] ? cfg.server_args[i] : "");
  }
  printf ("\n");

  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (cfg.only_case && strcmp (cfg.only_case, cases[i].name) != 0)
      continue;
    ran = true;
    switch (run_case (cases[i].name, cases[i].fn, NULL)) {
    case OUTCOME_PASS: passed++; break;
    case OUTCOME_SKIP: skipped++; break;
    default: failed++; break;
    }
  }
  if (!ran) {
    fprintf (stderr, "test_io: no case named %s\n", cfg.only_case);
    return 1;
  }
  printf ("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed)
    return EXIT_FAILURE;
  if (passed == 0)
    return EXIT_SKIP;
  return EXIT_SUCCESS;
}
