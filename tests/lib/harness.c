/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration tests: harness.  See harness.h. */

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/wait.h>
#include <linux/fs.h>

#include "harness.h"

extern char **environ;

__thread jmp_buf *test_jmp;
__thread enum test_outcome test_last_outcome;

/* ---- failing ----------------------------------------------------------- */

static void
vreport (const char *file, int line, const char *what, const char *fmt,
         va_list ap)
{
  char buf[8192];
  vsnprintf (buf, sizeof buf, fmt, ap);
  fprintf (stderr, "%s:%d: %s: %s\n", file, line, what, buf);
  fflush (stderr);
}

void
test_fail_at (const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vreport (file, line, "FAIL", fmt, ap);
  va_end (ap);
  test_last_outcome = OUTCOME_FAIL;
  if (test_jmp)
    longjmp (*test_jmp, 1);
  cleanup_run_all ();
  exit (EXIT_FAILURE);
}

void
test_check_fail_at (const char *file, int line, const char *cond,
                    const char *fmt, ...)
{
  char buf[8192];
  va_list ap;
  va_start (ap, fmt);
  vsnprintf (buf, sizeof buf, fmt, ap);
  va_end (ap);
  test_fail_at (file, line, "%s (check failed: %s)", buf, cond);
}

void
test_skip_at (const char *file, int line, const char *fmt, ...)
{
  va_list ap;
  va_start (ap, fmt);
  vreport (file, line, "SKIP", fmt, ap);
  va_end (ap);
  test_last_outcome = OUTCOME_SKIP;
  if (test_jmp)
    longjmp (*test_jmp, 1);
  cleanup_run_all ();
  exit (EXIT_SKIP);
}

void
note (const char *fmt, ...)
{
  va_list ap;
  char buf[8192];
  va_start (ap, fmt);
  vsnprintf (buf, sizeof buf, fmt, ap);
  va_end (ap);
  printf ("# %s\n", buf);
  fflush (stdout);
}

static double
now_s (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

enum test_outcome
run_case (const char *name, void (*fn) (void *), void *arg)
{
  jmp_buf jb;
  jmp_buf *saved = test_jmp;
  volatile enum test_outcome out;
  double t0 = now_s ();

  printf ("# --- %s\n", name);
  fflush (stdout);
  test_jmp = &jb;
  if (setjmp (jb) == 0) {
    fn (arg);
    out = OUTCOME_PASS;
  }
  else
    out = test_last_outcome;
  test_jmp = saved;
  cleanup_run_all ();

  printf ("%s: %s (%.2f s)\n",
          out == OUTCOME_PASS   ? "PASS"
          : out == OUTCOME_SKIP ? "SKIP"
                                : "FAIL",
          name, now_s () - t0);
  fflush (stdout);
  return out;
}

/* ---- memory ------------------------------------------------------------ */

void *
xmalloc (size_t n)
{
  void *p = malloc (n ? n : 1);
  if (!p)
    FAIL ("malloc %zu: out of memory", n);
  return p;
}

void *
xcalloc (size_t n, size_t m)
{
  void *p = calloc (n ? n : 1, m ? m : 1);
  if (!p)
    FAIL ("calloc %zu*%zu: out of memory", n, m);
  return p;
}

char *
xstrdup (const char *s)
{
  char *p = strdup (s);
  if (!p)
    FAIL ("strdup: out of memory");
  return p;
}

char *
xasprintf (const char *fmt, ...)
{
  va_list ap;
  char *p;
  int r;
  va_start (ap, fmt);
  r = vasprintf (&p, fmt, ap);
  va_end (ap);
  if (r < 0)
    FAIL ("asprintf: out of memory");
  return p;
}

/* ---- cleanup registry -------------------------------------------------- */

#define MAX_CLEANUPS 256
static struct {
  cleanup_fn fn;
  void *arg;
} cleanups[MAX_CLEANUPS];
static int nr_cleanups;
static pthread_mutex_t cleanup_lock = PTHREAD_MUTEX_INITIALIZER;

int
cleanup_push (cleanup_fn fn, void *arg)
{
  int i;
  pthread_mutex_lock (&cleanup_lock);
  if (nr_cleanups == MAX_CLEANUPS) {
    pthread_mutex_unlock (&cleanup_lock);
    FAIL ("too many cleanups");
  }
  i = nr_cleanups++;
  cleanups[i].fn = fn;
  cleanups[i].arg = arg;
  pthread_mutex_unlock (&cleanup_lock);
  return i;
}

void
cleanup_cancel (int handle)
{
  pthread_mutex_lock (&cleanup_lock);
  if (handle >= 0 && handle < nr_cleanups)
    cleanups[handle].fn = NULL;
  pthread_mutex_unlock (&cleanup_lock);
}

void
cleanup_run_all (void)
{
  for (;;) {
    cleanup_fn fn;
    void *arg;
    pthread_mutex_lock (&cleanup_lock);
    if (nr_cleanups == 0) {
      pthread_mutex_unlock (&cleanup_lock);
      return;
    }
    nr_cleanups--;
    fn = cleanups[nr_cleanups].fn;
    arg = cleanups[nr_cleanups].arg;
    pthread_mutex_unlock (&cleanup_lock);
    if (fn)
      fn (arg);
  }
}

static void
on_signal (int sig)
{
  /* Best effort: kill servers and remove temp dirs, then die. */
  signal (sig, SIG_DFL);
  test_jmp = NULL;
  cleanup_run_all ();
  raise (sig);
}

__attribute__ ((constructor)) static void
harness_init (void)
{
  signal (SIGPIPE, SIG_IGN);
  signal (SIGINT, on_signal);
  signal (SIGTERM, on_signal);
  signal (SIGHUP, on_signal);
  setvbuf (stdout, NULL, _IOLBF, 0);
  atexit (cleanup_run_all);
}

/* ---- files ------------------------------------------------------------- */

static int
remove_one (const char *path, const struct stat *st, int flag, struct FTW *f)
{
  (void) st;
  (void) f;
  if (flag == FTW_DP || flag == FTW_D)
    return rmdir (path) == -1 && errno != ENOENT ? -1 : 0;
  return unlink (path) == -1 && errno != ENOENT ? -1 : 0;
}

int
remove_tree (const char *path)
{
  return nftw (path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void
remove_temp_dir (void *arg)
{
  char *dir = arg;
  const char *keep = getenv ("STRIPE_KEEP_TMP");
  if (keep && strcmp (keep, "1") == 0)
    fprintf (stderr, "# keeping %s\n", dir);
  else if (remove_tree (dir) == -1)
    fprintf (stderr, "# warning: could not remove %s: %m\n", dir);
  free (dir);
}

char *
make_temp_dir (void)
{
  const char *t = getenv ("TMPDIR");
  char *dir;
  if (!t || !*t)
    t = "/tmp";
  dir = xasprintf ("%s/nbdstripe-it-XXXXXX", t);
  if (!mkdtemp (dir)) {
    int e = errno;
    free (dir);
    FAIL ("mkdtemp in %s: %s", t, strerror (e));
  }
  cleanup_push (remove_temp_dir, dir);
  return dir;
}

void
pread_full (int fd, void *buf, size_t len, uint64_t off, const char *what)
{
  char *p = buf;
  while (len > 0) {
    ssize_t r = pread (fd, p, len, off);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      FAIL ("pread %s at %" PRIu64 ": %m", what, off);
    if (r == 0)
      FAIL ("pread %s at %" PRIu64 ": unexpected end of file", what, off);
    p += r;
    len -= r;
    off += r;
  }
}

void
pwrite_full (int fd, const void *buf, size_t len, uint64_t off,
             const char *what)
{
  const char *p = buf;
  while (len > 0) {
    ssize_t r = pwrite (fd, p, len, off);
    if (r == -1 && errno == EINTR)
      continue;
    if (r == -1)
      FAIL ("pwrite %s at %" PRIu64 ": %m", what, off);
    p += r;
    len -= r;
    off += r;
  }
}

void
write_file (const char *path, const void *buf, size_t len)
{
  int fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1)
    FAIL ("open %s: %m", path);
  pwrite_full (fd, buf, len, 0, path);
  if (close (fd) == -1)
    FAIL ("close %s: %m", path);
}

void *
read_file (const char *path, size_t *len)
{
  bool blk;
  uint64_t size = path_size (path, &blk);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  char *buf;
  if (fd == -1)
    FAIL ("open %s: %m", path);
  buf = xmalloc (size + 1);
  pread_full (fd, buf, size, 0, path);
  buf[size] = 0;
  close (fd);
  if (len)
    *len = size;
  return buf;
}

char *
read_text_file (const char *path)
{
  return read_file (path, NULL);
}

uint64_t
path_size (const char *path, bool *is_blockdev)
{
  struct stat st;
  if (stat (path, &st) == -1)
    FAIL ("stat %s: %m", path);
  if (S_ISBLK (st.st_mode)) {
    uint64_t sz;
    int fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd == -1)
      FAIL ("open %s: %m", path);
    if (ioctl (fd, BLKGETSIZE64, &sz) == -1)
      FAIL ("BLKGETSIZE64 %s: %m", path);
    close (fd);
    if (is_blockdev)
      *is_blockdev = true;
    return sz;
  }
  if (!S_ISREG (st.st_mode))
    FAIL ("%s: not a regular file or block device", path);
  if (is_blockdev)
    *is_blockdev = false;
  return st.st_size;
}

int
parse_size (const char *s, uint64_t *out)
{
  uint64_t total = 0;
  const char *p = s;
  if (!*p)
    return -1;
  for (;;) {
    char *end;
    uint64_t v, mul = 1;
    if (*p < '0' || *p > '9')
      return -1;
    errno = 0;
    v = strtoull (p, &end, 10);
    if (errno)
      return -1;
    switch (*end) {
    case 'k':
    case 'K':
      mul = 1024;
      end++;
      break;
    case 'm':
    case 'M':
      mul = 1024 * 1024;
      end++;
      break;
    case 'g':
    case 'G':
      mul = 1024 * 1024 * 1024;
      end++;
      break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
      end++;
    total += v * mul;
    if (*end == 0)
      break;
    if (*end != '+')
      return -1;
    p = end + 1;
  }
  *out = total;
  return 0;
}

/* ---- prng -------------------------------------------------------------- */

void
prng_seed (struct prng *p, uint64_t seed)
{
  p->s = seed ^ 0x5851f42d4c957f2dULL;
}

uint64_t
prng_next (struct prng *p)
{
  uint64_t z = (p->s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t
prng_range (struct prng *p, uint64_t lo, uint64_t hi)
{
  if (hi <= lo)
    return lo;
  if (hi - lo == UINT64_MAX)
    return prng_next (p);
  return lo + prng_next (p) % (hi - lo + 1);
}

void
prng_fill (struct prng *p, void *buf, size_t len)
{
  unsigned char *b = buf;
  while (len >= 8) {
    uint64_t v = prng_next (p);
    memcpy (b, &v, 8);
    b += 8;
    len -= 8;
  }
  if (len) {
    uint64_t v = prng_next (p);
    memcpy (b, &v, len);
  }
}

/* ---- nbdkit ------------------------------------------------------------ */

const char *
plugin_path (void)
{
  const char *p = getenv ("STRIPE_PLUGIN");
  if (!p || !*p)
    SKIP ("STRIPE_PLUGIN is not set (run through ctest, or set it to "
          "<builddir>/plugin/nbdkit-stripe-plugin.so)");
  if (access (p, R_OK) == -1)
    FAIL ("STRIPE_PLUGIN=%s: %m", p);
  return p;
}

static bool
verbose_env (void)
{
  const char *v = getenv ("STRIPE_TEST_VERBOSE");
  return v && strcmp (v, "1") == 0;
}

/* Build nbdkit's argv.  Strings belong to the caller's arrays. */
static const char **
build_argv (const struct nbdkit_opts *o, const char *const *params)
{
  size_t n = 0, i = 0;
  const char **argv;
  while (params[n])
    n++;
  argv = xcalloc (n + 12, sizeof *argv);
  argv[i++] = "nbdkit";
  argv[i++] = "-f";
  argv[i++] = "--exit-with-parent";
  if (o && o->readonly)
    argv[i++] = "-r";
  if ((o && o->verbose) || verbose_env ())
    argv[i++] = "-v";
  if (o && o->no_uring) {
    argv[i++] = "-D";
    argv[i++] = "stripe.io_uring=0";
  }
  argv[i++] = plugin_path ();
  for (size_t j = 0; j < n; j++)
    argv[i++] = params[j];
  argv[i] = NULL;
  return argv;
}

char *
describe_command (const struct nbdkit_opts *o, const char *const *params)
{
  const char **argv = build_argv (o, params);
  size_t len = 1;
  char *s;
  for (size_t i = 0; argv[i]; i++)
    len += strlen (argv[i]) + 1;
  s = xmalloc (len);
  s[0] = 0;
  for (size_t i = 0; argv[i]; i++) {
    if (i)
      strcat (s, " ");
    strcat (s, argv[i]);
  }
  free (argv);
  return s;
}

static char *
find_in_path (const char *prog)
{
  const char *path = getenv ("PATH");
  char *copy, *save = NULL, *tok;
  if (!path || !*path)
    path = "/usr/local/bin:/usr/bin:/bin";
  copy = xstrdup (path);
  for (tok = strtok_r (copy, ":", &save); tok;
       tok = strtok_r (NULL, ":", &save)) {
    char *cand = xasprintf ("%s/%s", *tok ? tok : ".", prog);
    if (access (cand, X_OK) == 0) {
      free (copy);
      return cand;
    }
    free (cand);
  }
  free (copy);
  FAIL ("%s not found in PATH", prog);
}

static bool
env_skip (const char *e, bool preload)
{
  static const char *const drop[] = { "LISTEN_FDS=", "LISTEN_PID=",
                                      "LISTEN_FDNAMES=", NULL };
  for (size_t i = 0; drop[i]; i++)
    if (strncmp (e, drop[i], strlen (drop[i])) == 0)
      return true;
  if (preload
      && (strncmp (e, "LD_PRELOAD=", 11) == 0
          || strncmp (e, "ASAN_OPTIONS=", 13) == 0))
    return true;
  return false;
}

/* Fork+exec nbdkit (argv[0] "nbdkit") with listen_fd as fd 3 and
 * stdout/stderr to log_path.  Only async-signal-safe calls happen in the
 * child.
 */
pid_t
spawn_nbdkit_argv (const char *const *argv, bool sanitized, bool as_nobody,
                   int listen_fd, const char *log_path)
{
  const char *preload = getenv ("STRIPE_LD_PRELOAD");
  bool use_preload = sanitized && preload && *preload;
  char *exe = find_in_path ("nbdkit");
  size_t nenv = 0, k = 0;
  char **envp;
  static const char pid_prefix[] = "LISTEN_PID=";
  char pid_buf[sizeof pid_prefix + 24];
  int logfd, nullfd;
  pid_t pid;

  while (environ[nenv])
    nenv++;
  envp = xcalloc (nenv + 8, sizeof *envp);
  for (size_t i = 0; i < nenv; i++)
    if (!env_skip (environ[i], use_preload))
      envp[k++] = environ[i];
  envp[k++] = (char *) "LISTEN_FDS=1";
  memcpy (pid_buf, pid_prefix, sizeof pid_prefix);
  envp[k++] = pid_buf;
  char *ld = NULL, *asan = NULL;
  if (use_preload) {
    const char *ao = getenv ("ASAN_OPTIONS");
    const char *shim = getenv ("STRIPE_ASAN_SHIM");
    ld = xasprintf ("LD_PRELOAD=%s%s%s", preload, shim && *shim ? " " : "",
                    shim && *shim ? shim : "");
    asan = xasprintf ("ASAN_OPTIONS=%s%sdetect_leaks=0", ao && *ao ? ao : "",
                      ao && *ao ? ":" : "");
    envp[k++] = ld;
    envp[k++] = asan;
  }
  envp[k] = NULL;

  logfd =
    open (log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (logfd == -1)
    FAIL ("open %s: %m", log_path);
  nullfd = open ("/dev/null", O_RDONLY | O_CLOEXEC);
  if (nullfd == -1)
    FAIL ("open /dev/null: %m");

  fflush (stdout);
  fflush (stderr);
  pid = fork ();
  if (pid == -1)
    FAIL ("fork: %m");
  if (pid == 0) {
    /* Child. */
    char digits[24];
    int nd = 0;
    pid_t me = getpid ();
    char *w = pid_buf + sizeof pid_prefix - 1;

    signal (SIGPIPE, SIG_DFL);
    signal (SIGINT, SIG_DFL);
    signal (SIGTERM, SIG_DFL);
    signal (SIGHUP, SIG_DFL);
    {
      sigset_t none;
      sigemptyset (&none);
      sigprocmask (SIG_SETMASK, &none, NULL);
    }

    /* Move everything out of the way of 0..3 first. */
    if (listen_fd <= 3) {
      int nfd = fcntl (listen_fd, F_DUPFD_CLOEXEC, 10);
      if (nfd == -1)
        _exit (126);
      listen_fd = nfd;
    }
    if (logfd <= 3) {
      int nfd = fcntl (logfd, F_DUPFD_CLOEXEC, 10);
      if (nfd == -1)
        _exit (126);
      logfd = nfd;
    }
    if (nullfd <= 3) {
      int nfd = fcntl (nullfd, F_DUPFD_CLOEXEC, 10);
      if (nfd == -1)
        _exit (126);
      nullfd = nfd;
    }
    if (dup2 (nullfd, 0) == -1 || dup2 (logfd, 1) == -1
        || dup2 (logfd, 2) == -1 || dup2 (listen_fd, 3) == -1)
      _exit (126);
    close_range (4, ~0U, 0);

    if (as_nobody) {
      if (setgroups (0, NULL) == -1 || setgid (65534) == -1
          || setuid (65534) == -1) {
        static const char msg[] = "harness: cannot become nobody\n";
        if (write (2, msg, sizeof msg - 1)) {
        }
        _exit (126);
      }
    }

    do {
      digits[nd++] = '0' + me % 10;
      me /= 10;
    } while (me);
    while (nd)
      *w++ = digits[--nd];
    *w = 0;

    execve (exe, (char *const *) argv, envp);
    {
      static const char msg[] = "harness: execve nbdkit failed\n";
      if (write (2, msg, sizeof msg - 1)) {
      }
    }
    _exit (127);
  }

  close (logfd);
  close (nullfd);
  free (envp);
  free (exe);
  free (ld);
  free (asan);
  return pid;
}

static pid_t
spawn_nbdkit (const struct nbdkit_opts *o, const char *const *params,
              int listen_fd, const char *log_path)
{
  const char **argv = build_argv (o, params);
  pid_t pid =
    spawn_nbdkit_argv (argv, true, o && o->as_nobody, listen_fd, log_path);
  free (argv);
  return pid;
}

int
listen_unix (const char *sock)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int fd;
  if (strlen (sock) >= sizeof sun.sun_path)
    FAIL ("socket path too long (set TMPDIR shorter): %s", sock);
  strcpy (sun.sun_path, sock);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    FAIL ("socket: %m");
  unlink (sock);
  if (bind (fd, (struct sockaddr *) &sun, sizeof sun) == -1)
    FAIL ("bind %s: %m", sock);
  if (listen (fd, 64) == -1)
    FAIL ("listen: %m");
  return fd;
}

static int server_counter;

/* A listening TCP socket on 127.0.0.1:*port (0: any free port, which is
 * stored in *port).  SO_REUSEADDR, so that a server can be started again
 * on the same port while the old connections linger in TIME_WAIT.
 */
int
listen_tcp_loopback (int *port)
{
  struct sockaddr_in sin = { .sin_family = AF_INET,
                             .sin_port = htons (*port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
  socklen_t len = sizeof sin;
  int one = 1, fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    FAIL ("socket: %m");
  if (setsockopt (fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) == -1)
    FAIL ("SO_REUSEADDR: %m");
  if (bind (fd, (struct sockaddr *) &sin, sizeof sin) == -1)
    FAIL ("bind 127.0.0.1:%d: %m", *port);
  if (listen (fd, 64) == -1)
    FAIL ("listen: %m");
  if (getsockname (fd, (struct sockaddr *) &sin, &len) == -1)
    FAIL ("getsockname: %m");
  *port = ntohs (sin.sin_port);
  return fd;
}

pid_t
reap (pid_t pid, int *wstatus)
{
  pid_t r;
  do
    r = waitpid (pid, wstatus, 0);
  while (r == -1 && errno == EINTR);
  return r;
}

static void
server_kill (void *arg)
{
  struct server *s = arg;
  int st;
  if (s->pid > 0) {
    kill (s->pid, SIGTERM);
    reap (s->pid, &st);
    s->pid = 0;
  }
}

void
server_start (struct server *s, const char *dir, const struct nbdkit_opts *o,
              const char *const *params)
{
  int n = __atomic_add_fetch (&server_counter, 1, __ATOMIC_SEQ_CST);
  int lfd;
  memset (s, 0, sizeof *s);
  s->dir = xstrdup (dir);
  s->sock = xasprintf ("%s/nbd%d.sock", dir, n);
  s->log = xasprintf ("%s/nbdkit%d.log", dir, n);
  lfd = listen_unix (s->sock);
  s->pid = spawn_nbdkit (o, params, lfd, s->log);
  close (lfd); /* only nbdkit holds the listener now */
  s->cleanup_handle = cleanup_push (server_kill, s);
}

/* Handles are registered so that a failing case closes them.  We keep the
 * mapping handle -> cleanup slot here.
 */
#define MAX_HANDLES 64
static struct {
  struct nbd_handle *h;
  int slot;
} handles[MAX_HANDLES];
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;

/* A case's end closes the handles it left open, and forgets them: a later
 * handle at the same address must not find a stale slot.
 */
static void
handle_cleanup (void *arg)
{
  pthread_mutex_lock (&handles_lock);
  for (int i = 0; i < MAX_HANDLES; i++)
    if (handles[i].h == arg)
      handles[i].h = NULL;
  pthread_mutex_unlock (&handles_lock);
  nbd_close (arg);
}

struct nbd_handle *
server_connect (struct server *s)
{
  struct nbd_handle *h = nbd_create ();
  if (!h)
    FAIL ("nbd_create: %s", nbd_get_error ());
  if (nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
    FAIL ("nbd_add_meta_context: %s", nbd_get_error ());
  if (nbd_connect_unix (h, s->sock) == -1) {
    char *err = xstrdup (nbd_get_error ());
    int st = 0;
    char *log;
    nbd_close (h);
    if (s->pid > 0) {
      kill (s->pid, SIGTERM);
      reap (s->pid, &st);
      s->pid = 0;
    }
    log = read_text_file (s->log);
    FAIL ("connecting to nbdkit failed: %s\nnbdkit: %s\n--- nbdkit log "
          "(%s) ---\n%s--- end of log ---",
          err, describe_wstatus (st), s->log, log);
  }
  return track_handle (h);
}

struct nbd_handle *
track_handle (struct nbd_handle *h)
{
  pthread_mutex_lock (&handles_lock);
  for (int i = 0; i < MAX_HANDLES; i++)
    if (!handles[i].h) {
      handles[i].h = h;
      handles[i].slot = cleanup_push (handle_cleanup, h);
      pthread_mutex_unlock (&handles_lock);
      return h;
    }
  pthread_mutex_unlock (&handles_lock);
  nbd_close (h);
  FAIL ("too many handles");
}

void
close_handle (struct nbd_handle *h)
{
  if (!h)
    return;
  pthread_mutex_lock (&handles_lock);
  for (int i = 0; i < MAX_HANDLES; i++)
    if (handles[i].h == h) {
      cleanup_cancel (handles[i].slot);
      handles[i].h = NULL;
      break;
    }
  pthread_mutex_unlock (&handles_lock);
  nbd_shutdown (h, 0);
  nbd_close (h);
}

bool
log_has_sanitizer_report (const char *text)
{
  return strstr (text, "ERROR: AddressSanitizer")
         || strstr (text, "ERROR: LeakSanitizer")
         || strstr (text, "runtime error:")
         || strstr (text, "WARNING: ThreadSanitizer");
}

const char *
describe_wstatus (int st)
{
  static __thread char buf[64];
  if (WIFEXITED (st))
    snprintf (buf, sizeof buf, "exit status %d", WEXITSTATUS (st));
  else if (WIFSIGNALED (st))
    snprintf (buf, sizeof buf, "killed by signal %d (%s)", WTERMSIG (st),
              strsignal (WTERMSIG (st)));
  else
    snprintf (buf, sizeof buf, "wait status 0x%x", st);
  return buf;
}

void
server_stop (struct server *s)
{
  int st;
  char *log;
  if (s->pid <= 0)
    FAIL ("server_stop: server not running");
  /* Any handles still open would keep connections; nbdkit copes. */
  if (kill (s->pid, SIGTERM) == -1)
    FAIL ("kill nbdkit: %m");
  if (reap (s->pid, &st) == -1)
    FAIL ("waitpid nbdkit: %m");
  s->pid = 0;
  cleanup_cancel (s->cleanup_handle);
  log = read_text_file (s->log);
  if (verbose_env ())
    fprintf (stderr, "--- nbdkit log %s ---\n%s--- end ---\n", s->log, log);
  if (!WIFEXITED (st) || WEXITSTATUS (st) != 0)
    FAIL ("nbdkit did not exit cleanly on SIGTERM: %s\n--- nbdkit log ---\n"
          "%s--- end of log ---",
          describe_wstatus (st), log);
  if (log_has_sanitizer_report (log))
    FAIL ("sanitizer report in nbdkit log:\n%s", log);
  free (log);
  free (s->dir);
  free (s->sock);
  free (s->log);
  s->dir = s->sock = s->log = NULL;
}

void
nbdkit_run_expect_fail (const char *dir, const struct nbdkit_opts *o,
                        const char *const *params, struct run_result *r)
{
  int n = __atomic_add_fetch (&server_counter, 1, __ATOMIC_SEQ_CST);
  char *sock = xasprintf ("%s/nbd%d.sock", dir, n);
  char *log = xasprintf ("%s/nbdkit%d.log", dir, n);
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  int lfd = listen_unix (sock), c;
  struct server *tmp = xcalloc (1, sizeof *tmp);
  int slot;

  memset (r, 0, sizeof *r);
  tmp->pid = spawn_nbdkit (o, params, lfd, log);
  close (lfd);
  slot = cleanup_push (server_kill, tmp);

  /* Probe: a connection waits in the backlog until nbdkit either accepts
   * (and sends the NBD greeting) or exits (the listener closes and the
   * queued connection is reset).  No timing involved.
   */
  strcpy (sun.sun_path, sock);
  c = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c == -1)
    FAIL ("socket: %m");
  if (connect (c, (struct sockaddr *) &sun, sizeof sun) == 0) {
    char buf[8];
    ssize_t got;
    do
      got = read (c, buf, sizeof buf);
    while (got == -1 && errno == EINTR);
    if (got > 0)
      r->started = true;
  }
  else if (errno != ECONNREFUSED && errno != ECONNRESET)
    FAIL ("probe connect %s: %m", sock);
  close (c);

  if (r->started)
    kill (tmp->pid, SIGTERM);
  if (reap (tmp->pid, &r->wstatus) == -1)
    FAIL ("waitpid: %m");
  tmp->pid = 0;
  cleanup_cancel (slot);
  free (tmp);
  r->err = read_text_file (log);
  unlink (sock);
  free (sock);
  free (log);
}
