/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration test test_io: the fixture its cases share.
 *
 * test_io.c says what the test does and parses its command line into cfg;
 * test_io_fixture.c sets up a volume under test -- its members (files,
 * block devices, or remote members behind stock nbdkit servers, msrv.h),
 * an in-memory model of its contents, the layout oracle, our nbdkit
 * serving it -- and checks what reads back and every member byte; the
 * cases are in test_io_properties.c, test_io_writes.c,
 * test_io_trim_zero.c and test_io_extents.c.
 */
#ifndef NBDSTRIPE_TEST_IO_FIXTURE_H
#define NBDSTRIPE_TEST_IO_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "harness.h"
#include "msrv.h"
#include "oracle.h"

#define MAXM ORACLE_MAX_MEMBERS
#define NR_CONNS 4
#define MiB (1024 * 1024ULL)

/* ---- configuration (the command line, parsed in test_io.c) ------------ */

enum how { HOW_LOCAL, HOW_UNIX, HOW_TCP };

struct io_config {
  unsigned n;
  const char *member[MAXM]; /* --member, or NULL entries */
  bool given;
  uint64_t sizes[MAXM]; /* generated member sizes */
  uint64_t chunk;
  const char *chunk_str; /* passed as chunk=, or NULL */
  bool no_uring;
  uint64_t seed;
  const char *only_case;
  enum how how[MAXM];
  bool tls[MAXM];
  const char *server_args[MAXM]; /* --server I:ARGS */
  unsigned connections;          /* --connections, 0: not passed */
};
extern struct io_config cfg;

/* The plugin's connections= default (include/remote.h). */
#define DEFAULT_CONNECTIONS 4
#define PSK_USER "nbdstripe"

/* ---- a volume under test (test_io_fixture.c) --------------------------- */

enum init_mode { INIT_NONE, INIT_RANDOM, INIT_SPARSE };

struct vol {
  char *dir;
  unsigned n;
  char *path[MAXM];
  bool blk[MAXM];
  uint64_t size[MAXM];
  struct oracle o;
  uint8_t *model;      /* expected logical contents */
  uint8_t *tail[MAXM]; /* expected bytes beyond the usable size */
  struct prng rng;
  struct server srv;
  struct nbdkit_opts opts;
  const char *params[MAXM + 3];
  char *param_store[MAXM + 3];
  bool any_blk;
  /* Remote members: the member server, its URI, what it can do, and its
   * request log's mark when the volume started.
   */
  bool remote[MAXM];
  struct msrv msrv[MAXM];
  char *uri[MAXM];
  char *psk; /* freed by the case's cleanup */
  struct {
    bool trim, fast_zero, fua, flush, multi_conn, extents;
  } caps[MAXM];
  uint64_t mark[MAXM];
  bool fast_zero; /* expected from the volume */
};

/* A fresh volume for the named case (the name seeds its PRNG): members
 * made (or given), filled as mode says, the model and the tails read back
 * from them, the remote members' servers started.  Freed by the case's
 * cleanup.
 */
extern struct vol *vol_setup (const char *case_name, enum init_mode mode);
/* Start the volume's nbdkit. */
extern void vol_start (struct vol *v);
/* Stop it and the member servers; count the connections to each. */
extern void vol_stop (struct vol *v);
/* A connection that may send unaligned requests. */
extern struct nbd_handle *vol_connect (struct vol *v);

/* Human description of where a logical byte lives (xasprintf'd). */
extern char *where (const struct vol *v, uint64_t off);
/* Whether a trim reaches member i's bytes. */
extern bool member_trims (const struct vol *v, unsigned i);
/* The model after a trim of [off, off+len). */
extern void model_trim (struct vol *v, uint64_t off, uint64_t len);

/* Every member byte against the model through the oracle, and the bytes
 * beyond each member's usable size against what was there before.
 */
extern void check_members (struct vol *v);
/* Read [off, off+len) through h and compare with the model. */
extern void read_compare (struct vol *v, struct nbd_handle *h, uint64_t off,
                          uint64_t len, const char *what);
extern void read_compare_all (struct vol *v, struct nbd_handle *h,
                              const char *what);
/* Zero the model's [off, off+len), then read_compare. */
extern void expect_zero (struct vol *v, struct nbd_handle *h, uint64_t off,
                         uint64_t len, const char *what);

/* The logical range [a, b) clipped to the volume. */
extern void clip (const struct vol *v, int64_t a, int64_t b, uint64_t *off,
                  uint64_t *len);
/* chunk * number of members: a stripe of zone 0. */
extern uint64_t zone0_stripe (const struct vol *v);
/* st_blocks of a file. */
extern uint64_t blocks_of (const char *path);
/* Does the logical range cover a whole 4K block of member i? */
extern bool covers_block (const struct vol *v, unsigned i, uint64_t off,
                          uint64_t len);

/* ---- the cases ---------------------------------------------------------- */

extern void case_properties (void *arg);        /* test_io_properties.c */
extern void case_concurrent_writes (void *arg); /* test_io_writes.c */
extern void case_trim (void *arg);              /* test_io_trim_zero.c */
extern void case_zero_fua_flush (void *arg);    /* test_io_trim_zero.c */
extern void case_extents (void *arg);           /* test_io_extents.c */

#endif /* NBDSTRIPE_TEST_IO_FIXTURE_H */
