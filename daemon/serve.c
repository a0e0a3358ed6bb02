/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe serve: check the volume as `nbdstripe check` does (with its
 * members claimed for the check, so that a volume already served is
 * refused, naming its server), then run nbdkit with the stripe plugin and
 * the config, listening as the config's serve group says.  The I/O path
 * is the plugin's alone.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "log.h"
#include "member.h"
#include "nbdstripe.h"

/* One line of serve's own on stderr (format ends in "\n"), as before but
 * for the "<N>" that gives it its priority when stderr is the journal
 * (log.h): under nbdstripe@.service a start that fails says why at
 * LOG_ERR.  errno is kept for %m.
 */
static void serve_line (int priority, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static void
serve_line (int priority, const char *fmt, ...)
{
  int saved = errno;
  const char *head = log_journal_prefix (priority);
  va_list args;

  flockfile (stderr);
  fputs (head, stderr);
  errno = saved;
  va_start (args, fmt);
  vfprintf (stderr, fmt, args);
  va_end (args);
  funlockfile (stderr);
  errno = saved;
}

/* The plugin to give nbdkit: $NBDSTRIPE_PLUGIN, else the one next to this
 * binary in a build tree, else the installed one.
 */
static const char *
plugin_path (void)
{
  static char path[PATH_MAX];
  const char *env = getenv ("NBDSTRIPE_PLUGIN");
  char exe[PATH_MAX];
  ssize_t n;

  if (env && *env)
    return env;
  /* A build tree's binary uses the plugin built with it, never a stale
   * installed one.
   */
  n = readlink ("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = '\0';
    snprintf (path, sizeof path, "%s/../plugin/nbdkit-stripe-plugin.so",
              dirname (exe));
    if (access (path, R_OK) == 0)
      return path;
  }
  if (access (NBDSTRIPE_INSTALLED_PLUGIN, R_OK) == 0)
    return NBDSTRIPE_INSTALLED_PLUGIN;
  return "stripe"; /* let nbdkit look in its plugindir */
}

/* The directories above file, made as needed (mode 0755), as the plugin
 * makes those of its status file.
 */
static int
make_parent_dir (const char *file)
{
  char *copy = strdup (file);
  char *dir, *p;
  int r = 0;

  if (copy == NULL)
    return -1;
  dir = dirname (copy);
  for (p = dir + 1; r == 0 && (p = strchr (p, '/')) != NULL; ++p) {
    *p = '\0';
    if (mkdir (dir, 0755) == -1 && errno != EEXIST)
      r = -1;
    *p = '/';
  }
  if (r == 0 && mkdir (dir, 0755) == -1 && errno != EEXIST)
    r = -1;
  if (r == -1)
    serve_line (LOG_ERR, "nbdstripe: mkdir %s: %m\n", dir);
  free (copy);
  return r;
}

/* nbdkit writes its pidfile with open(O_CREAT|O_TRUNC), through a
 * symlink if one is there.  The config's pidfile is the operator's to
 * place (a FIFO, say); only removed before a server that goes to the
 * background, so that a pidfile is new once it names a process.  The
 * one serve chooses beside the status file may be in a directory others
 * can write to (a sticky /tmp, as the status file may): it is made
 * afresh, a regular file of ours (O_EXCL, O_NOFOLLOW), which nbdkit
 * then opens and nobody else can replace in a sticky directory.
 */
static int
fresh_pidfile (const char *path, bool ours, bool foreground)
{
  int fd;

  if (!ours && foreground)
    return 0;
  if (unlink (path) == -1 && errno != ENOENT) {
    serve_line (LOG_ERR, "nbdstripe: %s: %m\n", path);
    return -1;
  }
  if (!ours)
    return 0;
  fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd == -1) {
    serve_line (LOG_ERR, "nbdstripe: %s: cannot create the pidfile: %m\n",
                path);
    return -1;
  }
  close (fd);
  return 0;
}

/* Socket activation (sd_listen_fds(3)): how many listening sockets the
 * service manager passed from fd 3 on, or 0.  LISTEN_PID names the
 * process they are for: set by a parent for another child, they are not
 * ours.  nbdkit takes them from the same variables (nbdkit-service(1)),
 * and since serve execs nbdkit, its pid is still LISTEN_PID.
 */
static unsigned
listen_fds (void)
{
  const char *pid = getenv ("LISTEN_PID"), *fds = getenv ("LISTEN_FDS");
  char *end;
  long p, n;

  if (pid == NULL || fds == NULL)
    return 0;
  errno = 0;
  p = strtol (pid, &end, 10);
  if (errno || *end || p != (long) getpid ())
    return 0;
  n = strtol (fds, &end, 10);
  if (errno || *end || n < 1 || n > 16) /* nbdkit's bound */
    return 0;
  return n;
}

/* Where the first passed socket listens, for the log and for a config
 * whose serve.socket names another path (clients read the config).
 */
static void
describe_passed_socket (const struct stripe_config *cfg, unsigned n)
{
  struct sockaddr_un sun;
  socklen_t len = sizeof sun;
  char where[sizeof sun.sun_path + 16] = "";

  memset (&sun, 0, sizeof sun);
  if (getsockname (3, (struct sockaddr *) &sun, &len) == 0
      && sun.sun_family == AF_UNIX && sun.sun_path[0] == '/')
    snprintf (where, sizeof where, " (%.*s)", (int) sizeof sun.sun_path,
              sun.sun_path);
  serve_line (LOG_INFO, "nbdstripe: serving '%s' on %u socket(s) from systemd%s\n",
           cfg->name, n, where);
  if (where[0] && cfg->serve.socket
      && strncmp (sun.sun_path, cfg->serve.socket, sizeof sun.sun_path) != 0)
    serve_line (LOG_WARNING,
                "nbdstripe: warning: %s: serve.socket is %s, but systemd "
             "passed %s\n",
             cfg->path, cfg->serve.socket, sun.sun_path);
}

/* A socket file left by a server that died is in the way of nbdkit's
 * bind; one that a live server answers on means the volume is already
 * served.
 */
static int
clear_stale_socket (const char *path)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  struct stat st;
  int fd, r;

  if (stat (path, &st) == -1 || !S_ISSOCK (st.st_mode))
    return 0;
  if (strlen (path) >= sizeof sun.sun_path)
    return 0;
  strcpy (sun.sun_path, path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    return 0;
  r = connect (fd, (struct sockaddr *) &sun, sizeof sun);
  close (fd);
  if (r == 0) {
    serve_line (LOG_ERR, "nbdstripe: %s: a server is already listening there\n",
             path);
    return -1;
  }
  unlink (path);
  return 0;
}

/* nbdkit goes to the background by forking: its first process exits at
 * once and the server writes the pidfile a little later, once it
 * listens (just before the plugin's .after_fork starts the array and
 * registers the server, registry.h).  So that `serve` returns only when the server is there (as the
 * man page says, and as systemd and scripts expect), run nbdkit as a
 * child, and after it exits 0 wait for the pidfile to name a live
 * process.  That is also what lets `stop` find a server started a moment
 * before: its status file may still be the previous run's then (the
 * plugin writes the first one from its health thread, after the fork),
 * but the pidfile names it.
 */
static int
run_until_pidfile (const char *const *args, const char *pidfile)
{
  struct timespec pause = { 0, 10 * 1000 * 1000 };
  int status;
  pid_t pid;

  pid = fork ();
  if (pid == -1) {
    serve_line (LOG_ERR, "nbdstripe: fork: %m\n");
    return 1;
  }
  if (pid == 0) {
    execvp ("nbdkit", (char **) args);
    serve_line (LOG_ERR, "nbdstripe: cannot run nbdkit: %m\n");
    _exit (127);
  }
  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR) {
      serve_line (LOG_ERR, "nbdstripe: waitpid: %m\n");
      return 1;
    }
  if (!WIFEXITED (status) || WEXITSTATUS (status) != 0)
    return 1; /* nbdkit said why */

  /* Bounded: a server that is not ready within a minute is broken. */
  for (int i = 0; i < 6000; ++i) {
    FILE *fp = fopen (pidfile, "re");
    long server = 0;

    if (fp) {
      int n = fscanf (fp, "%ld", &server);
      fclose (fp);
      if (n == 1 && server > 0) {
        if (kill ((pid_t) server, 0) == 0 || errno == EPERM)
          return 0;
        serve_line (LOG_ERR,
                 "nbdstripe: the server (pid %ld) exited at once "
                 "(see the system log)\n",
                 server);
        return 1;
      }
    }
    nanosleep (&pause, NULL);
  }
  serve_line (LOG_ERR,
           "nbdstripe: nbdkit did not write its pidfile %s within "
           "60 s\n",
           pidfile);
  return 1;
}

/* nbdkit's command line: v (NULL-terminated once built), and the
 * strings made for it (freed with args_free).
 */
struct nbdkit_args {
  const char *v[64];
  char *owned[8];
  unsigned n, nowned;
  const char *pidfile; /* one of owned */
};

static void
args_free (struct nbdkit_args *a)
{
  for (unsigned i = 0; i < a->nowned; ++i)
    free (a->owned[i]);
}

/* An argument that cannot be built fails serve: nbdkit must never run
 * with one missing (-t followed by the plugin's path, say).  ADDF calls
 * asprintf itself (tests/daemon/fail_asprintf.c fails it by format).
 */
#define ADD(s) (a->v[a->n++] = (s))
#define ADDF(...)                                                             \
  do {                                                                        \
    if (asprintf (&a->owned[a->nowned], __VA_ARGS__) == -1) {                 \
      serve_line (LOG_ERR,                                                    \
                  "nbdstripe: %s: cannot build nbdkit's command line: %m\n",  \
                  cfg->path);                                                 \
      return -1;                                                              \
    }                                                                         \
    a->v[a->n++] = a->owned[a->nowned++];                                     \
  } while (0)

/* Where nbdkit listens: the sockets systemd passed (activated: their
 * number), the config's socket (its directory made, a stale socket file
 * cleared), or its address and port.  0/-1 (said).
 */
static int
listen_args (const struct stripe_config *cfg, unsigned activated,
             struct nbdkit_args *a)
{
  if (activated) {
    /* The socket is systemd's: not ours to create, nor to clear. */
  }
  else if (cfg->serve.socket) {
    if (make_parent_dir (cfg->serve.socket) == -1
        || clear_stale_socket (cfg->serve.socket) == -1)
      return -1;
    ADD ("-U");
    ADD (cfg->serve.socket);
  }
  else {
    ADD ("-i");
    ADD (cfg->serve.address);
    ADD ("-p");
    ADDF ("%d", cfg->serve.port);
  }
  return 0;
}

/* The whole command line, as the config's serve group says.  Socket
 * activation: nbdkit serves the passed sockets and stays in the
 * foreground (foreground is then true), and must be given no -U, -i or
 * -p.  0/-1 (said).
 */
static int
build_args (const struct stripe_config *cfg, bool foreground, bool readonly,
            bool degraded, unsigned activated, struct nbdkit_args *a)
{
  char *pidfile;

  ADD ("nbdkit");
  if (foreground)
    ADD ("-f");
  if (readonly)
    ADD ("-r");
  if (listen_args (cfg, activated, a) == -1)
    return -1;
  /* nbdkit's -e only names the export for --run and in its URIs: the
   * plugin is what refuses other names.
   */
  if (cfg->serve.export_name && cfg->serve.export_name[0]) {
    ADD ("-e");
    ADD (cfg->serve.export_name);
  }
  ADD ("-t");
  ADDF ("%u", cfg->serve.threads);
  /* Always a pidfile: where stop and list find the server (served.c). */
  pidfile = volume_pidfile (cfg);
  if (pidfile == NULL) {
    serve_line (LOG_ERR,
                "nbdstripe: %s: cannot build nbdkit's command line: %m\n",
                cfg->path);
    return -1;
  }
  a->owned[a->nowned++] = pidfile;
  a->pidfile = pidfile;
  if (make_parent_dir (a->pidfile) == -1)
    return -1;
  ADD ("-P");
  ADD (a->pidfile);
  if (cfg->serve.tls != TLS_OFF) {
    ADD (cfg->serve.tls == TLS_REQUIRE ? "--tls=require" : "--tls=on");
    if (cfg->serve.tls_certificates)
      ADDF ("--tls-certificates=%s", cfg->serve.tls_certificates);
    if (cfg->serve.tls_psk)
      ADDF ("--tls-psk=%s", cfg->serve.tls_psk);
    if (cfg->serve.tls_verify_peer)
      ADD ("--tls-verify-peer");
  }
  ADD (plugin_path ());
  {
    /* Absolute: nbdkit changes to / when it goes to the background, and
     * others (claim.h naming who holds a member) read it from /proc.
     */
    char *abs = realpath (cfg->path, NULL);
    if (abs == NULL) {
      serve_line (LOG_ERR, "nbdstripe: %s: %m\n", cfg->path);
      return -1;
    }
    a->owned[a->nowned++] = abs;
    ADDF ("config=%s", abs);
  }
  if (degraded)
    ADD ("degraded=1");
  a->v[a->n] = NULL;
  return 0;
}

#undef ADD
#undef ADDF

/* Where the volume is served, on stderr (the journal under systemd). */
static void
announce (const struct stripe_config *cfg, bool readonly, bool degraded,
          unsigned activated)
{
  const char *ro = degraded   ? " read-only and degraded"
                   : readonly ? " read-only"
                              : "";

  if (activated)
    describe_passed_socket (cfg, activated);
  else if (cfg->serve.socket)
    serve_line (LOG_INFO, "nbdstripe: serving '%s'%s on %s\n", cfg->name, ro,
                cfg->serve.socket);
  else
    serve_line (LOG_INFO, "nbdstripe: serving '%s'%s on %s:%d\n", cfg->name,
                ro, cfg->serve.address, cfg->serve.port);
}

/* Every member a file or a device this process can open for writing,
 * as the server will: said now, before anything is served, with the way
 * out.  (A remote member's export says at the check whether it is
 * read-only; the plugin refuses it then.)
 */
static int
members_writable (const struct stripe_config *cfg, const char *arg)
{
  int r = 0;

  for (unsigned i = 0; i < cfg->nr_members; ++i) {
    const char *m = cfg->members[i];
    int fd;

    if (member_is_uri (m))
      continue;
    fd = open (m, O_RDWR | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd >= 0) {
      close (fd);
      continue;
    }
    if (errno != EACCES && errno != EPERM && errno != EROFS)
      continue; /* the check has said what else is wrong */
    serve_line (LOG_ERR,
                "nbdstripe: member %u (%s): cannot be opened for writing: "
                "%m; the volume can be served read-only: nbdstripe serve "
                "--read-only %s\n",
                i, m, arg);
    r = -1;
  }
  return r;
}

int
cmd_serve (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "foreground", no_argument, NULL, 'f' },
    { "read-only", no_argument, NULL, 'r' },
    { "degraded", no_argument, NULL, 'D' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct stripe_config cfg;
  struct nbdkit_args a = { .n = 0 };
  bool foreground = false, readonly = false, degraded = false;
  unsigned activated;
  uint64_t size;
  char uuid[37];
  int c;

  while ((c = getopt_long (argc, argv, "frhV", opts, NULL)) != -1) {
    switch (c) {
    case 'f': foreground = true; break;
    case 'r': readonly = true; break;
    /* Without the members that cannot be read: never written to. */
    case 'D': degraded = readonly = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;

  if (load_volume (argv[optind], &cfg, NULL, 0) == -1) {
    config_free (&cfg);
    return 1;
  }
  print_config_warnings (&cfg);
  if (check_volume (&cfg, true, degraded, &size, uuid) == -1
      || (!readonly && members_writable (&cfg, argv[optind]) == -1)) {
    config_free (&cfg);
    return 1;
  }

  /* Socket activation: serve execs nbdkit, so that it keeps LISTEN_PID's
   * pid.
   */
  activated = listen_fds ();
  if (activated)
    foreground = true;
  if (build_args (&cfg, foreground, readonly, degraded, activated, &a) == -1)
    goto err;
  if (fresh_pidfile (a.pidfile, cfg.serve.pidfile == NULL, foreground) == -1)
    goto err;
  announce (&cfg, readonly, degraded, activated);
  fflush (stderr);
  if (!foreground) {
    int r = run_until_pidfile (a.v, a.pidfile);
    args_free (&a);
    config_free (&cfg);
    return r;
  }
  execvp ("nbdkit", (char **) a.v);
  serve_line (LOG_ERR, "nbdstripe: cannot run nbdkit: %m\n");
err:
  args_free (&a);
  config_free (&cfg);
  return 1;
}
