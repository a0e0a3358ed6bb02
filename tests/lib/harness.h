/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration tests: running a real nbdkit with our plugin.
 *
 * nbdkit is started with systemd socket activation: the harness creates and
 * binds the listening Unix socket itself, so a client may connect the moment
 * server_start returns (the connection waits in the backlog until nbdkit is
 * ready; if nbdkit dies instead, the connection is reset).  There is no
 * readiness race and no sleep anywhere.
 *
 * Environment (set by CTest):
 *   STRIPE_PLUGIN      path of nbdkit-stripe-plugin.so (required; tests
 *                      skip with 77 without it)
 *   STRIPE_LD_PRELOAD  when non-empty, the nbdkit child (only) gets
 *                      LD_PRELOAD=<it> and ASAN_OPTIONS=detect_leaks=0
 *   STRIPE_ASAN_SHIM   appended to that LD_PRELOAD (asan_exit_shim.c)
 *   STRIPE_TEST_VERBOSE=1  pass -v to nbdkit and keep the logs on stderr
 *   STRIPE_KEEP_TMP=1  do not delete the temporary directories
 */
#ifndef NBDSTRIPE_TEST_HARNESS_H
#define NBDSTRIPE_TEST_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <libnbd.h>

#define EXIT_SKIP 77

/* ---- failing a test case -------------------------------------------- */

/* Each thread that may fail sets its own landing point with TEST_TRY.
 * test_fail prints "file:line: message" and longjmps there.
 */
extern __thread jmp_buf *test_jmp;

extern void test_fail_at (const char *file, int line, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4), noreturn));
extern void test_skip_at (const char *file, int line, const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4), noreturn));

#define FAIL(...) test_fail_at (__FILE__, __LINE__, __VA_ARGS__)
#define SKIP(...) test_skip_at (__FILE__, __LINE__, __VA_ARGS__)
extern void test_check_fail_at (const char *file, int line, const char *cond,
                                const char *fmt, ...)
  __attribute__ ((format (printf, 4, 5), noreturn));
#define CHECK(cond, ...)                                                      \
  do {                                                                        \
    if (!(cond))                                                              \
      test_check_fail_at (__FILE__, __LINE__, #cond, __VA_ARGS__);            \
  } while (0)
/* A libnbd call that must succeed. */
#define NBD_OK(call)                                                          \
  do {                                                                        \
    if ((call) == -1)                                                         \
      FAIL ("%s: %s (errno %d)", #call, nbd_get_error (), nbd_get_errno ());  \
  } while (0)

/* Outcome of a case, as recorded by the landing point. */
enum test_outcome { OUTCOME_PASS = 0, OUTCOME_FAIL = 1, OUTCOME_SKIP = 77 };
extern __thread enum test_outcome test_last_outcome;

/* Run fn(arg) as a named test case: prints PASS/FAIL/SKIP and the time,
 * runs the cleanup registry afterwards.  Returns the outcome.
 */
extern enum test_outcome run_case (const char *name, void (*fn) (void *),
                                   void *arg);

/* Print a line prefixed with "# " (diagnostics that do not fail). */
extern void note (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* ---- memory, files, temp dirs ---------------------------------------- */

extern void *xmalloc (size_t n);
extern void *xcalloc (size_t n, size_t m);
extern char *xstrdup (const char *s);
extern char *xasprintf (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* A fresh directory under $TMPDIR (or /tmp), removed by the cleanup
 * registry at the end of the case (unless STRIPE_KEEP_TMP=1).
 */
extern char *make_temp_dir (void);
/* rm -rf */
extern int remove_tree (const char *path);

/* Register a cleanup to run (LIFO) when the current case ends, pass or
 * fail.  Returns a handle that cleanup_cancel can use.
 */
typedef void (*cleanup_fn) (void *);
extern int cleanup_push (cleanup_fn fn, void *arg);
extern void cleanup_cancel (int handle);
extern void cleanup_run_all (void);

/* Whole-file helpers; FAIL on error. */
extern void write_file (const char *path, const void *buf, size_t len);
extern void *read_file (const char *path, size_t *len);
extern char *read_text_file (const char *path);
extern void pread_full (int fd, void *buf, size_t len, uint64_t off,
                        const char *what);
extern void pwrite_full (int fd, const void *buf, size_t len, uint64_t off,
                         const char *what);

/* Size of a regular file or block device (BLKGETSIZE64). */
extern uint64_t path_size (const char *path, bool *is_blockdev);

/* Parse "4096", "12K", "8M", "1G", and sums like "5M+3584". */
extern int parse_size (const char *s, uint64_t *out);

/* ---- pseudo-random numbers (splitmix64; reproducible) --------------- */

struct prng {
  uint64_t s;
};
extern void prng_seed (struct prng *p, uint64_t seed);
extern uint64_t prng_next (struct prng *p);
/* Uniform in [lo, hi] (inclusive). */
extern uint64_t prng_range (struct prng *p, uint64_t lo, uint64_t hi);
extern void prng_fill (struct prng *p, void *buf, size_t len);

/* ---- nbdkit ---------------------------------------------------------- */

struct nbdkit_opts {
  bool readonly;  /* -r */
  bool no_uring;  /* -D stripe.io_uring=0 */
  bool verbose;   /* -v (also forced by STRIPE_TEST_VERBOSE) */
  bool as_nobody; /* run nbdkit as uid/gid 65534 (root only) */
};

struct server {
  pid_t pid; /* 0 when not running */
  char *dir;
  char *sock; /* Unix socket path */
  char *log;  /* nbdkit's stdout+stderr */
  int cleanup_handle;
};

/* The plugin from STRIPE_PLUGIN; SKIPs the case when unset. */
extern const char *plugin_path (void);

/* Start nbdkit in dir with the plugin and params (NULL-terminated
 * "key=value" strings).  The server is registered for cleanup (killed at the
 * end of the case if still running).  FAILs only on harness errors; a
 * plugin that refuses to start shows up when connecting.
 */
extern void server_start (struct server *s, const char *dir,
                          const struct nbdkit_opts *o,
                          const char *const *params);

/* Connect a new libnbd handle (with base:allocation requested).  FAILs with
 * nbdkit's log if the server is not there.
 */
extern struct nbd_handle *server_connect (struct server *s);

/* Register a handle for cleanup at the end of the case (server_connect
 * does); returns it.
 */
extern struct nbd_handle *track_handle (struct nbd_handle *h);

/* Close a handle (nbd_shutdown + nbd_close). */
extern void close_handle (struct nbd_handle *h);

/* SIGTERM + waitpid.  FAILs (quoting the log) unless nbdkit exited with
 * status 0 and its log has no sanitizer report.
 */
extern void server_stop (struct server *s);

/* Run nbdkit expecting it to refuse to start. */
struct run_result {
  bool started; /* it accepted a connection (bad) */
  int wstatus;  /* from waitpid */
  char *err;    /* its stderr (and stdout) */
};
extern void nbdkit_run_expect_fail (const char *dir,
                                    const struct nbdkit_opts *o,
                                    const char *const *params,
                                    struct run_result *r);
/* "exit status 1" / "killed by signal 11" */
extern const char *describe_wstatus (int wstatus);

/* The command line, for messages. */
extern char *describe_command (const struct nbdkit_opts *o,
                               const char *const *params);

/* The pieces, for other nbdkit servers (msrv.h).  spawn_nbdkit_argv:
 * fork+exec nbdkit with argv (argv[0] "nbdkit"), listen_fd as its socket
 * activation fd 3, stdout and stderr to log_path; sanitized: give it
 * STRIPE_LD_PRELOAD (only nbdkit processes that load our plugin need it).
 * listen_unix: a listening socket bound at path (replacing a stale one).
 * listen_tcp_loopback: one on 127.0.0.1:*port (0: a free port, stored).
 * reap: waitpid, retried on EINTR.
 */
extern pid_t spawn_nbdkit_argv (const char *const *argv, bool sanitized,
                                bool as_nobody, int listen_fd,
                                const char *log_path);
extern int listen_unix (const char *path);
extern int listen_tcp_loopback (int *port);
extern pid_t reap (pid_t pid, int *wstatus);

/* True if the text contains a sanitizer report. */
extern bool log_has_sanitizer_report (const char *text);

#endif /* NBDSTRIPE_TEST_HARNESS_H */
