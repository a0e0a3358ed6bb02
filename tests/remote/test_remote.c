/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe remote members: faults of the member servers.
 *
 *   test_remote [--case NAME] [--transport unix|tcp]
 *
 * A volume of three 4 MiB members, chunk 64K: member 0 a local file,
 * members 1 and 2 NBD exports of stock nbdkit servers (msrv.h), member 2
 * always over TCP, member 1 (the one the cases break) over --transport
 * (default unix).  The volume's nbdkit runs with status=FILE (health
 * JSON, include/health.h), which the cases read: they wait for it with
 * inotify (it is replaced by rename), never by sleeping, and give up at
 * a deadline.  Data is checked against a model of the volume and, at the
 * end, every member byte in the servers' backing files against the layout
 * oracle.  "ok" in the status means: member 1 as expected, members 0 and
 * 2 ok or slow (a remote member next to a local one whose reads hit the
 * page cache can be judged slow; not what these cases test), the volume
 * state what the contract derives from those.
 *
 * Cases:
 *   tls_psk_member_serves_data
 *       member 1's server requires TLS with a PSK (psktool); the volume
 *       reaches it with nbds(+unix)://USER@...?tls-psk-file=; data written
 *       through the volume reads back and lands where the oracle says.
 *   tls_username_parameter_is_honoured
 *       the same with the user given as tls-username= in the URI (the
 *       form in the plugin's manual) instead of USER@.
 *   tls_wrong_key_refused_at_startup
 *       the volume's PSK file has the right user and another key: nbdkit
 *       exits non-zero within 10 s before serving, and its error names
 *       member 1 (index and URI) and the TLS handshake.
 *   member_server_down_at_startup_refused
 *       nothing listens at member 1's address: nbdkit exits non-zero
 *       within 10 s, its error naming member 1 and its URI.
 *   killed_member_fails_fast_and_recovers
 *       three clients load the volume (reads anywhere, writes on members
 *       0 and 2); member 1's server is killed (SIGKILL) mid-load.  Bounds:
 *       requests not touching member 1 all succeed, each within 1 s;
 *       requests touching it that start after the kill fail with EIO,
 *       each within 0.5 s; those in flight at the kill end within 2 s;
 *       the status file says member 1 failed (with a reason and a last
 *       error) and the volume failed, members 0 and 2 ok (or slow),
 *       within 3 s of the kill.  A stripe write touching member 1 then
 *       fails with EIO and changes nothing.  The server restarted at the
 *       same address on the same file: member 1 and the volume are ok
 *       again within 10 s (probe every 2 s); the whole volume reads back
 *       as the model, new writes on every member succeed, and the backing
 *       files match the oracle.
 *   first_request_after_kill_gets_eio
 *       the volume idle after one request to member 1; its server killed;
 *       once the volume has logged the lost connection, the next read
 *       touching member 1 fails with EIO within 0.5 s; status failed
 *       within 3 s of the kill; restarted: ok within 10 s, data intact.
 *   idle_member_killed_is_failed_without_io
 *       the same with no request at all before the kill: the status alone
 *       must say failed within 3 s (the health check runs every second).
 *   hung_member_times_out
 *       timeout=2; member 1's server has the pause filter, paused.  A read
 *       touching member 1 fails (EIO) within timeout + 1.5 s; meanwhile
 *       reads of members 0 and 2 go on (at least 10, each within 0.5 s);
 *       status: member 1 failed within 2 s of that; later requests
 *       touching it fail with EIO within 0.5 s.  Resumed: ok again within
 *       10 s, data intact (model, then oracle).
 *
 * Exit: 0 all passed, 1 a case failed, 77 everything skipped.
 */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <json-c/json.h>
#include <libnbd.h>

#include "harness.h"
#include "msrv.h"
#include "oracle.h"

#define NM 3
#define MiB ((uint64_t) 1024 * 1024)
#define MEMBER_SIZE (4 * MiB)
#define CHUNK ((uint64_t) 64 * 1024)
#define PSK_USER "alice"

static enum msrv_transport transport1 = MSRV_UNIX;

static double
now (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the volume --------------------------------------------------------- */

struct rvol {
  char *dir;
  char *path[NM]; /* backing files (member 0: the member itself) */
  char *uri[NM];  /* what the volume is given (member 0: the path) */
  struct msrv srv[NM];
  struct oracle o;
  uint8_t *model;
  struct prng rng;
  struct server vol;
  char *status;
  char *params[NM + 6];
  unsigned np;
};

static void
rvol_free (void *arg)
{
  struct rvol *v = arg;
  for (unsigned i = 0; i < NM; i++) {
    free (v->path[i]);
    free (v->uri[i]);
  }
  for (unsigned i = 0; i < v->np; i++)
    free (v->params[i]);
  free (v->status);
  free (v->model);
  oracle_free (&v->o);
  free (v);
}

/* Random member files, the model derived from them; member servers for
 * members 1 and 2, member 1's with args1 after "--filter=log" (NULL:
 * "file FILE"; an argument "%s" stands for its file) and opts1.
 */
static struct rvol *
rvol_new (const char *name, const char *const *args1,
          const struct msrv_opts *opts1)
{
  struct rvol *v = xcalloc (1, sizeof *v);
  uint64_t sizes[NM];
  uint64_t seed = 0x5eed;

  v->dir = make_temp_dir ();
  cleanup_push (rvol_free, v);
  for (const char *p = name; *p; p++)
    seed = seed * 131 + (unsigned char) *p;
  prng_seed (&v->rng, seed);
  for (unsigned i = 0; i < NM; i++) {
    uint8_t *buf = xmalloc (MEMBER_SIZE);
    v->path[i] = xasprintf ("%s/member%u.img", v->dir, i);
    prng_fill (&v->rng, buf, MEMBER_SIZE);
    write_file (v->path[i], buf, MEMBER_SIZE);
    free (buf);
    sizes[i] = MEMBER_SIZE;
  }
  if (oracle_init (&v->o, CHUNK, NM, sizes) == -1)
    FAIL ("oracle_init");
  v->model = xmalloc (v->o.nr_chunks * v->o.chunk); /* all member chunks */
  for (unsigned i = 0; i < NM; i++) {
    size_t len;
    uint8_t *m = read_file (v->path[i], &len);
    for (uint64_t r = 0; r < v->o.usable[i] / CHUNK; r++)
      memcpy (v->model + v->o.rev[i][r] * CHUNK, m + r * CHUNK, CHUNK);
    free (m);
  }

  v->uri[0] = xstrdup (v->path[0]);
  for (unsigned i = 1; i < NM; i++) {
    const char *args[16] = { "file", "%s", NULL };
    struct msrv_opts o = { .transport = MSRV_TCP };
    char sname[32];
    size_t k;
    snprintf (sname, sizeof sname, "member%u", i);
    if (i == 1 && opts1)
      o = *opts1;
    for (k = 0; i == 1 && args1 && args1[k] && k < 15; k++)
      args[k] = args1[k];
    if (k)
      args[k] = NULL;
    for (k = 0; args[k]; k++)
      if (strcmp (args[k], "%s") == 0)
        args[k] = v->path[i];
    msrv_start (&v->srv[i], v->dir, sname, &o, args);
    v->uri[i] = msrv_uri (&v->srv[i], NULL, NULL);
  }
  v->status = xasprintf ("%s/status.json", v->dir);
  return v;
}

static void
rvol_param (struct rvol *v, char *p)
{
  if (v->np == sizeof v->params / sizeof v->params[0] - 1)
    FAIL ("too many parameters");
  v->params[v->np++] = p;
  v->params[v->np] = NULL;
}

/* The volume's parameters: members, chunk, status, then extra (taken). */
static void
rvol_params (struct rvol *v, char *extra)
{
  for (unsigned i = 0; i < NM; i++)
    rvol_param (v, xasprintf ("file=%s", v->uri[i]));
  rvol_param (v, xasprintf ("chunk=%" PRIu64, CHUNK));
  rvol_param (v, xasprintf ("status=%s", v->status));
  if (extra)
    rvol_param (v, extra);
}

static void
rvol_start (struct rvol *v)
{
  server_start (&v->vol, v->dir, NULL, (const char *const *) v->params);
}

/* A client of the volume that sends unaligned requests too (the volume
 * advertises a minimum block size; nbdkit hands them to the plugin).
 */
static struct nbd_handle *
rvol_connect (struct rvol *v)
{
  struct nbd_handle *h = server_connect (&v->vol);
  int mode = nbd_get_strict_mode (h);
  if (mode == -1 || nbd_set_strict_mode (h, mode & ~LIBNBD_STRICT_ALIGN) == -1)
    FAIL ("nbd_set_strict_mode: %s", nbd_get_error ());
  return h;
}

static unsigned
touches (const struct rvol *v, uint64_t off, uint64_t len)
{
  unsigned mask = 0;
  uint64_t end = off + len;
  while (off < end) {
    unsigned m;
    uint64_t mo, n = oracle_map (&v->o, off, &m, &mo);
    mask |= 1u << m;
    off += n;
  }
  return mask;
}

/* Read [off, +len) and compare with the model. */
static void
read_check (struct rvol *v, struct nbd_handle *h, uint64_t off, uint64_t len,
            const char *what)
{
  uint8_t *buf = xmalloc (len);
  if (nbd_pread (h, buf, len, off, 0) == -1)
    FAIL ("%s: read [%" PRIu64 ", +%" PRIu64 ") (members mask 0x%x): %s", what,
          off, len, touches (v, off, len), nbd_get_error ());
  for (uint64_t d = 0; d < len; d++)
    if (buf[d] != v->model[off + d]) {
      unsigned m;
      uint64_t mo;
      oracle_map (&v->o, off + d, &m, &mo);
      FAIL ("%s: logical byte %" PRIu64 " (member %u offset %" PRIu64
            ") is 0x%02x, expected 0x%02x",
            what, off + d, m, mo, buf[d], v->model[off + d]);
    }
  free (buf);
}

static void
read_check_all (struct rvol *v, struct nbd_handle *h, const char *what)
{
  for (uint64_t off = 0; off < v->o.size; off += 4 * MiB)
    read_check (v, h, off,
                v->o.size - off < 4 * MiB ? v->o.size - off : 4 * MiB, what);
}

/* Write random data over [off, +len) through h and into the model. */
static void
write_model (struct rvol *v, struct nbd_handle *h, uint64_t off, uint64_t len)
{
  prng_fill (&v->rng, v->model + off, len);
  if (nbd_pwrite (h, v->model + off, len, off, 0) == -1)
    FAIL ("write [%" PRIu64 ", +%" PRIu64 "): %s", off, len, nbd_get_error ());
}

/* Every usable byte of every member's backing file against the model,
 * through the oracle.
 */
static void
check_backing_files (struct rvol *v)
{
  for (unsigned i = 0; i < NM; i++) {
    size_t len;
    uint8_t *m = read_file (v->path[i], &len);
    CHECK (len == MEMBER_SIZE, "%s changed size", v->path[i]);
    for (uint64_t r = 0; r < v->o.usable[i] / CHUNK; r++) {
      uint64_t k = v->o.rev[i][r];
      if (memcmp (m + r * CHUNK, v->model + k * CHUNK, CHUNK) != 0) {
        uint64_t d = 0;
        while (m[r * CHUNK + d] == v->model[k * CHUNK + d])
          d++;
        FAIL ("member %u (%s) offset %" PRIu64 ": 0x%02x, the oracle "
              "expects 0x%02x from logical offset %" PRIu64,
              i, v->path[i], r * CHUNK + d, m[r * CHUNK + d],
              v->model[k * CHUNK + d], k * CHUNK + d);
      }
    }
    free (m);
  }
  note ("every member byte in the backing files matches the oracle");
}

/* Stop the volume, then the member servers (cleanly), then the oracle. */
static void
rvol_finish (struct rvol *v)
{
  server_stop (&v->vol);
  for (unsigned i = 1; i < NM; i++)
    if (v->srv[i].pid > 0)
      msrv_stop (&v->srv[i]);
  check_backing_files (v);
}

/* ---- the status file ---------------------------------------------------- */

struct status {
  char volume[16];
  char state[NM][16];
  char reason[NM][512];
  char last_error[NM][32]; /* "" when null */
};

static bool
get_str (struct json_object *o, const char *key, char *out, size_t len)
{
  struct json_object *v;
  if (!json_object_object_get_ex (o, key, &v)
      || !json_object_is_type (v, json_type_string))
    return false;
  snprintf (out, len, "%s", json_object_get_string (v));
  return true;
}

/* The status file now; false if it is not there (yet) or not as the
 * contract says.
 */
static bool
status_read (const char *path, struct status *st)
{
  struct json_object *j = json_object_from_file (path), *vol, *ms;
  bool ok = false;

  memset (st, 0, sizeof *st);
  if (!j)
    return false;
  if (!json_object_object_get_ex (j, "volume", &vol)
      || !get_str (vol, "state", st->volume, sizeof st->volume)
      || !json_object_object_get_ex (j, "members", &ms)
      || !json_object_is_type (ms, json_type_array)
      || json_object_array_length (ms) != NM)
    goto out;
  for (unsigned i = 0; i < NM; i++) {
    struct json_object *m = json_object_array_get_idx (ms, i), *le, *e;
    if (!get_str (m, "state", st->state[i], sizeof st->state[i])
        || !get_str (m, "reason", st->reason[i], sizeof st->reason[i]))
      goto out;
    if (json_object_object_get_ex (m, "last_error", &le) && le
        && json_object_object_get_ex (le, "error", &e))
      snprintf (st->last_error[i], sizeof st->last_error[i], "%s",
                json_object_get_string (e));
  }
  ok = true;
out:
  json_object_put (j);
  return ok;
}

static void
status_describe (const struct status *st, char *buf, size_t len)
{
  snprintf (buf, len,
            "volume %s; members: 0 %s (%s), 1 %s (%s) last error %s, "
            "2 %s (%s)",
            st->volume, st->state[0], st->reason[0], st->state[1],
            st->reason[1], *st->last_error[1] ? st->last_error[1] : "null",
            st->state[2], st->reason[2]);
}

/* Whether the status says member 1 is in state m1, members 0 and 2 are
 * ok or slow (a remote member next to a local one whose reads hit the page
 * cache may look slow: not what these cases are about), and the volume
 * is what the contract makes of that: failed with a failed member, else
 * degraded with a slow one, else ok.
 */
static bool
status_is (const struct status *st, const char *m1)
{
  bool slow = false;
  const char *want;
  if (strcmp (st->state[1], m1) != 0)
    return false;
  for (unsigned i = 0; i < NM; i += 2) {
    if (strcmp (st->state[i], "slow") == 0)
      slow = true;
    else if (strcmp (st->state[i], "ok") != 0)
      return false;
  }
  want = strcmp (m1, "failed") == 0       ? "failed"
         : slow || strcmp (m1, "ok") != 0 ? "degraded"
                                          : "ok";
  return strcmp (st->volume, want) == 0;
}

/* Wait until the status file says member 1 is in state m1 (status_is), at
 * most secs seconds: woken by inotify when the file is replaced (or
 * rewritten every interval), no sleeping.  FAILs at the deadline with
 * what the file said last.  Returns the time waited.
 */
static double
status_wait (const char *path, const char *m1, double secs, struct status *st)
{
  char *dir = xstrdup (path), *slash = strrchr (dir, '/');
  double t0 = now (), deadline = t0 + secs;
  int fd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);
  char desc[2048] = "no status file";

  if (fd == -1)
    FAIL ("inotify_init1: %m");
  *slash = 0;
  if (inotify_add_watch (fd, dir, IN_MOVED_TO | IN_CLOSE_WRITE) == -1)
    FAIL ("inotify_add_watch %s: %m", dir);
  free (dir);
  for (;;) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    double left;
    char ev[4096];
    if (status_read (path, st)) {
      status_describe (st, desc, sizeof desc);
      if (status_is (st, m1))
        break;
    }
    left = deadline - now ();
    if (left <= 0) {
      close (fd);
      FAIL ("status file %s: expected member 1 %s (others ok or slow, the "
            "volume accordingly) within %.1f s; it says: %s",
            path, m1, secs, desc);
    }
    if (poll (&p, 1, (int) (left * 1000) + 1) == -1 && errno != EINTR)
      FAIL ("poll: %m");
    while (read (fd, ev, sizeof ev) > 0) {
    }
  }
  close (fd);
  note ("status after %.2f s: %s", now () - t0, desc);
  return now () - t0;
}

/* Wait until the file contains text, at most secs seconds (inotify on
 * its changes, no sleeping).  FAILs at the deadline.
 */
static void
wait_for_text (const char *path, const char *text, double secs)
{
  double deadline = now () + secs;
  int fd = inotify_init1 (IN_CLOEXEC | IN_NONBLOCK);

  if (fd == -1)
    FAIL ("inotify_init1: %m");
  if (inotify_add_watch (fd, path, IN_MODIFY) == -1)
    FAIL ("inotify_add_watch %s: %m", path);
  for (;;) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char *content = read_text_file (path), ev[4096];
    bool found = strstr (content, text) != NULL;
    double left = deadline - now ();
    if (found) {
      free (content);
      break;
    }
    if (left <= 0)
      FAIL ("%s does not say \"%s\" within %.1f s:\n%s", path, text, secs,
            content);
    free (content);
    if (poll (&p, 1, (int) (left * 1000) + 1) == -1 && errno != EINTR)
      FAIL ("poll: %m");
    while (read (fd, ev, sizeof ev) > 0) {
    }
  }
  close (fd);
}

/* ---- TLS ---------------------------------------------------------------- */

static void
case_tls_psk_member_serves_data (void *arg)
{
  (void) arg;
  char *dir = make_temp_dir ();
  char *psk = make_psk_file (dir, "psk", PSK_USER);
  struct msrv_opts o = { .transport = transport1, .tls_psk = psk };
  struct rvol *v = rvol_new ("tls", NULL, &o);
  struct nbd_handle *h;
  uint64_t mark;
  unsigned opened, peak;

  free (v->uri[1]);
  v->uri[1] = msrv_uri (&v->srv[1], psk, PSK_USER);
  note ("member 1: %s", v->uri[1]);
  rvol_params (v, NULL);
  mark = msrv_log_mark (&v->srv[1]);
  rvol_start (v);
  h = rvol_connect (v);
  read_check_all (v, h, "initial contents through TLS");
  for (uint64_t k = 0; k < 3 * NM; k++)
    write_model (v, h, k * CHUNK + 100, CHUNK);
  NBD_OK (nbd_flush (h, 0));
  read_check_all (v, h, "after writes");
  close_handle (h);
  rvol_finish (v);
  msrv_connections (&v->srv[1], mark, &opened, &peak);
  CHECK (opened > 0, "the volume never connected to member 1");
  CHECK (msrv_requests (&v->srv[1], mark, "Write", NULL) > 0,
         "no write reached member 1's server");
}

static void
case_tls_username_parameter_is_honoured (void *arg)
{
  (void) arg;
  char *dir = make_temp_dir ();
  char *psk = make_psk_file (dir, "psk", PSK_USER);
  struct msrv_opts o = { .transport = transport1, .tls_psk = psk };
  struct rvol *v = rvol_new ("tls-username", NULL, &o);
  struct nbd_handle *h;

  free (v->uri[1]);
  v->uri[1] = msrv_uri_tls_username (&v->srv[1], psk, PSK_USER);
  note ("member 1: %s", v->uri[1]);
  rvol_params (v, NULL);
  rvol_start (v);
  h = rvol_connect (v);
  read_check_all (v, h, "through TLS, user from tls-username=");
  write_model (v, h, CHUNK - 10, 2 * CHUNK);
  close_handle (h);
  rvol_finish (v);
}

/* nbdkit must refuse to start, within 10 s, with an error naming member 1
 * and containing each of the words (case-insensitive).
 */
static void
expect_refused (struct rvol *v, const char *const *words)
{
  struct run_result r;
  double t0 = now (), took;
  char *cmd = describe_command (NULL, (const char *const *) v->params);

  nbdkit_run_expect_fail (v->dir, NULL, (const char *const *) v->params, &r);
  took = now () - t0;
  note ("nbdkit refused in %.2f s (%s): %s", took,
        describe_wstatus (r.wstatus), r.err);
  CHECK (!r.started, "nbdkit started serving: %s", cmd);
  CHECK (WIFEXITED (r.wstatus) && WEXITSTATUS (r.wstatus) != 0,
         "nbdkit: %s, expected a non-zero exit status",
         describe_wstatus (r.wstatus));
  CHECK (took <= 10, "nbdkit took %.1f s to give up (bound 10 s)", took);
  CHECK (!log_has_sanitizer_report (r.err), "sanitizer report:\n%s", r.err);
  CHECK (strstr (r.err, "member 1"), "the error does not name member 1:\n%s",
         r.err);
  CHECK (strstr (r.err, v->uri[1]),
         "the error does not give member 1's URI "
         "%s:\n%s",
         v->uri[1], r.err);
  for (size_t i = 0; words[i]; i++)
    CHECK (strcasestr (r.err, words[i]), "the error does not say \"%s\":\n%s",
           words[i], r.err);
  free (r.err);
  free (cmd);
}

static void
case_tls_wrong_key_refused_at_startup (void *arg)
{
  (void) arg;
  char *dir = make_temp_dir ();
  char *psk = make_psk_file (dir, "psk", PSK_USER);
  char *wrong = make_psk_file (dir, "wrong.psk", PSK_USER);
  struct msrv_opts o = { .transport = transport1, .tls_psk = psk };
  struct rvol *v = rvol_new ("tls-wrong", NULL, &o);
  uint8_t *before[NM];
  static const char *const words[] = { "handshake", NULL };

  for (unsigned i = 0; i < NM; i++)
    before[i] = read_file (v->path[i], NULL);
  free (v->uri[1]);
  v->uri[1] = msrv_uri (&v->srv[1], wrong, PSK_USER);
  rvol_params (v, NULL);
  expect_refused (v, words);
  for (unsigned i = 0; i < NM; i++) {
    uint8_t *after = read_file (v->path[i], NULL);
    CHECK (memcmp (before[i], after, MEMBER_SIZE) == 0,
           "member %u changed although nbdkit refused to start", i);
    free (after);
    free (before[i]);
  }
}

static void
case_member_server_down_at_startup_refused (void *arg)
{
  (void) arg;
  struct msrv_opts o = { .transport = transport1 };
  struct rvol *v = rvol_new ("down", NULL, &o);
  static const char *const words[] = { NULL };

  msrv_kill (&v->srv[1], SIGKILL);
  if (transport1 == MSRV_UNIX)
    unlink (v->srv[1].sock);
  rvol_params (v, NULL);
  expect_refused (v, words);
}

/* ---- a member server killed mid-load ---------------------------------- */

struct op_rec {
  double t0, t1;
  unsigned mask; /* members touched */
  int err;
  bool write;
};

struct loader {
  struct rvol *v;
  struct nbd_handle *h;
  int id, nr;
  uint64_t row0, rows; /* its own stripe rows */
  struct prng rng;
  struct op_rec *rec;
  size_t nr_rec, cap;
  _Atomic size_t done_after; /* ops started after `after` */
  bool failed;
};

static _Atomic bool load_stop;
static _Atomic double load_after; /* ops started after it are counted */
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t load_cond = PTHREAD_COND_INITIALIZER;

static void *
loader_thread (void *arg)
{
  struct loader *l = arg;
  struct rvol *v = l->v;
  uint64_t stripe = CHUNK * NM;
  uint8_t *buf = xmalloc (3 * CHUNK);
  jmp_buf jb;

  test_jmp = &jb;
  if (setjmp (jb)) {
    l->failed = true;
    pthread_mutex_lock (&load_lock);
    pthread_cond_broadcast (&load_cond);
    pthread_mutex_unlock (&load_lock);
    free (buf);
    return NULL;
  }
  while (!load_stop) {
    struct op_rec r = { 0 };
    uint64_t row = l->row0 + prng_range (&l->rng, 0, l->rows - 1);
    uint64_t off, len;
    int rc;

    if (prng_range (&l->rng, 0, 2) == 0) {
      /* A write inside one chunk of member 0 or 2. */
      unsigned m = prng_range (&l->rng, 0, 1) ? 2 : 0;
      uint64_t k = row * NM + m; /* equal members: chunk k on member k%N */
      off = k * CHUNK + prng_range (&l->rng, 0, CHUNK - 1);
      len = prng_range (&l->rng, 1, k * CHUNK + CHUNK - off);
      r.write = true;
    }
    else {
      /* A read of 1 byte to 3 chunks from inside its rows. */
      off = row * stripe + prng_range (&l->rng, 0, stripe - 1);
      len = prng_range (&l->rng, 1, 3 * CHUNK);
      if (off + len > (l->row0 + l->rows) * stripe)
        len = (l->row0 + l->rows) * stripe - off;
    }
    r.mask = touches (v, off, len);
    r.t0 = now ();
    if (r.write) {
      prng_fill (&l->rng, buf, len);
      rc = nbd_pwrite (l->h, buf, len, off, 0);
    }
    else
      rc = nbd_pread (l->h, buf, len, off, 0);
    r.t1 = now ();
    r.err = rc == -1 ? nbd_get_errno () : 0;
    if (rc == -1 && r.err == 0)
      r.err = -1;
    if (rc == 0 && r.write)
      memcpy (v->model + off, buf, len);
    else if (rc == 0 && memcmp (buf, v->model + off, len) != 0)
      FAIL ("loader %d: read [%" PRIu64 ", +%" PRIu64 ") returned other "
            "data than was written",
            l->id, off, len);
    else if (rc == -1 && r.write && !(r.mask & 2))
      FAIL ("loader %d: write [%" PRIu64 ", +%" PRIu64 ") on member %u "
            "failed: %s",
            l->id, off, len, r.mask & 1 ? 0 : 2, nbd_get_error ());
    if (l->nr_rec == l->cap) {
      l->cap = l->cap ? 2 * l->cap : 1024;
      l->rec = realloc (l->rec, l->cap * sizeof *l->rec);
      if (!l->rec)
        FAIL ("out of memory");
    }
    l->rec[l->nr_rec++] = r;
    if (r.t0 >= load_after) {
      l->done_after++;
      pthread_mutex_lock (&load_lock);
      pthread_cond_broadcast (&load_cond);
      pthread_mutex_unlock (&load_lock);
    }
  }
  free (buf);
  return NULL;
}

/* Wait until every loader has done n ops that started after load_after
 * (a loader's failure ends the wait).
 */
static void
loaders_wait (struct loader *l, int nr, size_t n)
{
  pthread_mutex_lock (&load_lock);
  for (;;) {
    bool all = true, failed = false;
    for (int i = 0; i < nr; i++) {
      all &= l[i].done_after >= n;
      failed |= l[i].failed;
    }
    if (all || failed)
      break;
    pthread_cond_wait (&load_cond, &load_lock);
  }
  pthread_mutex_unlock (&load_lock);
}

/* One request touching member 1 must fail with EIO within bound s. */
static void
expect_eio (struct nbd_handle *h, bool write, uint64_t off, uint64_t len,
            double bound, const char *what)
{
  uint8_t *buf = xcalloc (1, len);
  double t0 = now (), took;
  int rc =
    write ? nbd_pwrite (h, buf, len, off, 0) : nbd_pread (h, buf, len, off, 0);
  int e = nbd_get_errno ();
  took = now () - t0;
  free (buf);
  CHECK (rc == -1, "%s: succeeded", what);
  CHECK (e == EIO, "%s: failed with %s (%s), expected EIO", what, strerror (e),
         nbd_get_error ());
  CHECK (took <= bound, "%s: took %.3f s, bound %.1f s", what, took, bound);
}

static void
case_killed_member_fails_fast_and_recovers (void *arg)
{
  (void) arg;
  struct msrv_opts o = { .transport = transport1 };
  struct rvol *v = rvol_new ("killed", NULL, &o);
  enum { NL = 3 };
  struct loader l[NL];
  pthread_t t[NL];
  struct nbd_handle *h;
  struct status st;
  double t_before, t_kill;
  uint64_t rows = v->o.size / (CHUNK * NM);
  unsigned bad = 0, after1 = 0, inflight = 0;
  uint8_t *save;

  rvol_params (v, NULL);
  rvol_start (v);
  h = rvol_connect (v);
  status_wait (v->status, "ok", 10, &st);

  memset (l, 0, sizeof l);
  load_stop = false;
  load_after = 0;
  for (int i = 0; i < NL; i++) {
    l[i].v = v;
    l[i].h = rvol_connect (v);
    l[i].id = i;
    l[i].row0 = rows * i / NL;
    l[i].rows = rows * (i + 1) / NL - l[i].row0;
    prng_seed (&l[i].rng, prng_next (&v->rng));
    if ((errno = pthread_create (&t[i], NULL, loader_thread, &l[i])) != 0)
      FAIL ("pthread_create: %m");
  }
  loaders_wait (l, NL, 100);
  t_before = now ();
  msrv_kill (&v->srv[1], SIGKILL);
  t_kill = now (); /* the server is reaped: its sockets are closed */
  note ("member 1's server killed (SIGKILL) under load, reaped after "
        "%.3f s",
        t_kill - t_before);
  status_wait (v->status, "failed", 3 - (now () - t_before), &st);
  CHECK (*st.reason[1], "member 1 failed without a reason");
  CHECK (*st.last_error[1], "member 1 failed without a last error");
  load_after = now ();
  for (int i = 0; i < NL; i++)
    l[i].done_after = 0;
  loaders_wait (l, NL, 100);
  load_stop = true;
  for (int i = 0; i < NL; i++)
    pthread_join (t[i], NULL);
  for (int i = 0; i < NL; i++)
    CHECK (!l[i].failed, "loader %d failed (see above)", i);

  /* The requests, by where they went and when. */
  for (int i = 0; i < NL; i++)
    for (size_t k = 0; k < l[i].nr_rec; k++) {
      struct op_rec *r = &l[i].rec[k];
      double took = r->t1 - r->t0;
      const char *why = NULL;
      if (!(r->mask & 2)) {
        if (r->err)
          why = "failed, not touching member 1";
        else if (took > 1.0)
          why = "took more than 1 s, not touching member 1";
      }
      else if (r->t1 < t_before) {
        if (r->err)
          why = "failed before the kill";
      }
      else if (r->t0 < t_kill) {
        inflight++;
        if (r->t1 - t_kill > 2.0)
          why = "in flight at the kill, ended more than 2 s after it";
      }
      else {
        after1++;
        if (r->err != EIO)
          why = r->err ? "touching member 1 after the kill, failed with "
                         "another error than EIO"
                       : "touching member 1 after the kill, succeeded";
        else if (took > 0.5)
          why = "touching member 1 after the kill, took more than 0.5 s";
      }
      if (why && bad++ < 10)
        fprintf (stderr,
                 "loader %d %s: members 0x%x, started %+.3f s from the kill, "
                 "took %.3f s, errno %d (%s): %s\n",
                 i, r->write ? "write" : "read", r->mask, r->t0 - t_kill, took,
                 r->err, r->err > 0 ? strerror (r->err) : "-", why);
    }
  note ("%u requests touched member 1 after the kill, %u were in flight "
        "at it",
        after1, inflight);
  for (int i = 0; i < NL; i++) {
    close_handle (l[i].h);
    free (l[i].rec);
  }
  CHECK (bad == 0, "%u requests broke the bounds (the first 10 above)", bad);
  CHECK (after1 > 0, "no request touched member 1 after the kill");

  /* Direct: reads and a stripe write touching member 1 fail with EIO; the
   * write changes nothing (checked by the oracle at the end).
   */
  expect_eio (h, false, CHUNK, 4096, 0.5, "read of member 1");
  expect_eio (h, false, CHUNK - 100, 200, 0.5, "read of members 0 and 1");
  save = xmalloc (CHUNK * NM);
  memcpy (save, v->model + 6 * CHUNK * NM, CHUNK * NM);
  expect_eio (h, true, 6 * CHUNK * NM, CHUNK * NM, 0.5,
              "stripe write touching member 1");
  CHECK (memcmp (save, v->model + 6 * CHUNK * NM, CHUNK * NM) == 0,
         "model changed");
  free (save);
  read_check (v, h, 6 * CHUNK * NM, CHUNK, "member 0 after the refused write");
  read_check (v, h, 6 * CHUNK * NM + 2 * CHUNK, CHUNK,
              "member 2 after the refused write");

  msrv_restart (&v->srv[1]);
  note ("member 1's server restarted at the same address");
  status_wait (v->status, "ok", 10, &st);
  read_check_all (v, h, "after recovery");
  for (uint64_t k = 0; k < 4 * NM; k++)
    write_model (v, h, k * CHUNK + 333, CHUNK);
  NBD_OK (nbd_flush (h, 0));
  read_check_all (v, h, "after writes on every member");
  close_handle (h);
  rvol_finish (v);
}

/* A member server killed while the volume is idle.  With used: after one
 * request to it (its connections in use), once the volume has logged the
 * lost connection, the next request touching it fails with EIO within
 * 0.5 s, and the status says failed within 3 s of the kill.  Without: no
 * request at all, the status alone must say failed within 3 s (the health
 * check runs every second: a connection whose server has gone is not
 * alive).
 */
static void
idle_kill (bool used)
{
  struct msrv_opts o = { .transport = transport1 };
  struct rvol *v = rvol_new (used ? "idle-used" : "idle", NULL, &o);
  struct nbd_handle *h;
  struct status st;
  double t0;

  rvol_params (v, NULL);
  rvol_start (v);
  h = rvol_connect (v);
  status_wait (v->status, "ok", 10, &st);
  if (used)
    read_check (v, h, CHUNK - 512, 1024, "members 0 and 1");
  t0 = now ();
  msrv_kill (&v->srv[1], SIGKILL);
  note ("member 1's server killed (SIGKILL), the volume idle");
  if (used) {
    wait_for_text (v->vol.log, "connection lost", 2);
    expect_eio (h, false, CHUNK, 4096, 0.5,
                "first read of member 1 once the lost connection is logged");
  }
  status_wait (v->status, "failed", 3 - (now () - t0), &st);
  expect_eio (h, false, CHUNK, 4096, 0.5, "read of member 1, failed");
  msrv_restart (&v->srv[1]);
  status_wait (v->status, "ok", 10, &st);
  read_check_all (v, h, "after recovery");
  close_handle (h);
  rvol_finish (v);
}

static void
case_first_request_after_kill_gets_eio (void *arg)
{
  (void) arg;
  idle_kill (true);
}

static void
case_idle_member_killed_is_failed_without_io (void *arg)
{
  (void) arg;
  idle_kill (false);
}

/* ---- a hung member server ---------------------------------------------- */

struct bg_read {
  struct rvol *v;
  struct nbd_handle *h;
  uint64_t off, len;
  double took;
  int err;
  _Atomic bool done;
};

static void *
bg_read_thread (void *arg)
{
  struct bg_read *b = arg;
  uint8_t *buf = xmalloc (b->len);
  double t0 = now ();
  b->err =
    nbd_pread (b->h, buf, b->len, b->off, 0) == -1 ? nbd_get_errno () : 0;
  b->took = now () - t0;
  free (buf);
  b->done = true;
  return NULL;
}

static void
case_hung_member_times_out (void *arg)
{
  (void) arg;
  enum { TIMEOUT = 2 };
  struct msrv_opts o = { .transport = transport1 };
  char *dir = make_temp_dir ();
  char *ctl = xasprintf ("%s/pause.ctl", dir);
  char *ctlp = xasprintf ("pause-control=%s", ctl);
  const char *args[] = { "--filter=pause", "file", "%s", ctlp, NULL };
  struct rvol *v;
  struct nbd_handle *h, *h2, *probe;
  struct bg_read b = { 0 };
  pthread_t t;
  struct status st;
  unsigned others = 0;
  double worst = 0;

  cleanup_push (free, ctl);
  cleanup_push (free, ctlp);
  v = rvol_new ("hung", args, &o);
  /* Its control socket exists once the server has answered. */
  probe = msrv_connect (&v->srv[1], NULL, NULL);
  close_handle (probe);
  rvol_params (v, xasprintf ("timeout=%d", TIMEOUT));
  rvol_start (v);
  h = rvol_connect (v);
  h2 = rvol_connect (v);
  status_wait (v->status, "ok", 10, &st);
  read_check_all (v, h, "before the pause");

  pause_control (ctl, true);
  note ("member 1's server paused");
  b.v = v;
  b.h = h;
  b.off = CHUNK - 4096; /* members 0 and 1 */
  b.len = 8192;
  if ((errno = pthread_create (&t, NULL, bg_read_thread, &b)) != 0)
    FAIL ("pthread_create: %m");
  /* While it hangs, members 0 and 2 answer. */
  while (!b.done) {
    uint64_t row = prng_range (&v->rng, 0, v->o.size / (CHUNK * NM) - 1);
    unsigned m = prng_range (&v->rng, 0, 1) ? 2 : 0;
    uint64_t off = (row * NM + m) * CHUNK, len = CHUNK;
    double t0 = now (), took;
    read_check (v, h2, off, len, "member 0 or 2 while member 1 hangs");
    took = now () - t0;
    if (took > worst)
      worst = took;
    others++;
  }
  pthread_join (t, NULL);
  note ("the read touching member 1 ended after %.2f s (errno %d %s); %u "
        "reads of members 0 and 2 meanwhile, the slowest %.3f s",
        b.took, b.err, strerror (b.err), others, worst);
  CHECK (b.err != 0, "the read touching the paused member succeeded");
  CHECK (b.err == EIO,
         "the read touching the paused member failed with %s, "
         "expected EIO",
         strerror (b.err));
  CHECK (b.took <= TIMEOUT + 1.5, "it took %.2f s, bound timeout + 1.5 s",
         b.took);
  CHECK (others >= 10, "only %u reads of the other members meanwhile", others);
  CHECK (worst <= 0.5, "a read of the other members took %.3f s", worst);
  status_wait (v->status, "failed", 2, &st);
  CHECK (*st.reason[1], "member 1 failed without a reason");
  expect_eio (h2, false, CHUNK, 4096, 0.5, "read of member 1 once failed");
  expect_eio (h2, true, CHUNK + 10, 10, 0.5, "write to member 1 once failed");

  pause_control (ctl, false);
  note ("member 1's server resumed");
  status_wait (v->status, "ok", 10, &st);
  read_check_all (v, h2, "after the resume");
  write_model (v, h2, CHUNK - 7, 3 * CHUNK);
  NBD_OK (nbd_flush (h2, 0));
  close_handle (h);
  close_handle (h2);
  rvol_finish (v);
}

/* ---- main --------------------------------------------------------------- */

static const struct {
  const char *name;
  void (*fn) (void *);
} cases[] = {
  { "tls_psk_member_serves_data", case_tls_psk_member_serves_data },
  { "tls_username_parameter_is_honoured",
    case_tls_username_parameter_is_honoured },
  { "tls_wrong_key_refused_at_startup",
    case_tls_wrong_key_refused_at_startup },
  { "member_server_down_at_startup_refused",
    case_member_server_down_at_startup_refused },
  { "killed_member_fails_fast_and_recovers",
    case_killed_member_fails_fast_and_recovers },
  { "first_request_after_kill_gets_eio",
    case_first_request_after_kill_gets_eio },
  { "idle_member_killed_is_failed_without_io",
    case_idle_member_killed_is_failed_without_io },
  { "hung_member_times_out", case_hung_member_times_out },
};

int
main (int argc, char **argv)
{
  const char *only = NULL;
  int passed = 0, failed = 0, skipped = 0;
  bool ran = false;

  for (int i = 1; i < argc; i++) {
    if (strcmp (argv[i], "--case") == 0 && i + 1 < argc)
      only = argv[++i];
    else if (strcmp (argv[i], "--transport") == 0 && i + 1 < argc) {
      const char *t = argv[++i];
      if (strcmp (t, "unix") == 0)
        transport1 = MSRV_UNIX;
      else if (strcmp (t, "tcp") == 0)
        transport1 = MSRV_TCP;
      else {
        fprintf (stderr, "test_remote: --transport unix|tcp\n");
        return 1;
      }
    }
    else {
      fprintf (stderr,
               "usage: test_remote [--case NAME] [--transport unix|tcp]\n");
      return 1;
    }
  }
  if (!getenv ("STRIPE_PLUGIN") || !*getenv ("STRIPE_PLUGIN")) {
    printf ("SKIP: STRIPE_PLUGIN is not set\n");
    return EXIT_SKIP;
  }
  printf ("# member 1 over %s\n", transport1 == MSRV_UNIX ? "unix" : "tcp");
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (only && strcmp (only, cases[i].name) != 0)
      continue;
    ran = true;
    switch (run_case (cases[i].name, cases[i].fn, NULL)) {
    case OUTCOME_PASS: passed++; break;
    case OUTCOME_SKIP: skipped++; break;
    default: failed++; break;
    }
  }
  if (!ran) {
    fprintf (stderr, "test_remote: no case named %s\n", only);
    return 1;
  }
  printf ("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (failed)
    return EXIT_FAILURE;
  if (passed == 0)
    return EXIT_SKIP;
  return EXIT_SUCCESS;
}
