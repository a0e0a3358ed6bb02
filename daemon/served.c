/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: which volumes there are on this host and which process
 * serves each, for list, status and stop.
 *
 * A volume is known from its config in the config directory (*.conf),
 * and, when served, wherever its config lives: from the registration its
 * server leaves in the runtime directory (*.served, plugin/registry.h),
 * from a status file there (*.status.json, whose volume.config names the
 * config the server was given), from a pidfile there (*.pid, whose
 * process's command line names the config), and from the nbdkit
 * processes of this host that serve the stripe plugin with a config=.
 * Its server is a process that its pidfile (volume_pidfile) or the
 * status file names AND whose command line has "config=CONFIG" with
 * that config's absolute path, as `nbdstripe serve` gives nbdkit: a pid
 * recycled by another process is never taken for the server.  The
 * pidfile comes first: serve returns only once nbdkit has written it,
 * while the status file may still be the previous run's then.
 *
 * What a dead server left -- its registration, its status file, its
 * pidfile -- names no volume of its own: a volume not configured here is
 * listed only while a server of it runs.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "json.h"
#include "nbdstripe.h"

/* The pid in a pidfile, or 0. */
static long
read_pidfile (const char *path)
{
  char buf[32];
  char *end;
  ssize_t n;
  long pid;
  int fd = open (path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);

  if (fd == -1)
    return 0;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  errno = 0;
  pid = strtol (buf, &end, 10);
  if (errno || end == buf || (*end && *end != '\n') || pid <= 0
      || pid > INT_MAX)
    return 0;
  return pid;
}

/* pid's command line: the value of its config= argument (*config,
 * malloc'd, or NULL), and whether it is nbdkit serving the stripe
 * plugin (*stripe: an argument "stripe" or a path to
 * nbdkit-stripe-plugin.so; may be NULL).  false: no command line to read.
 */
static bool
read_cmdline (long pid, char **config, bool *stripe)
{
  char path[64], buf[65536];
  const char *b;
  ssize_t n, len = 0;
  int fd;

  *config = NULL;
  if (stripe)
    *stripe = false;
  snprintf (path, sizeof path, "/proc/%ld/cmdline", pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return false;
  while (len < (ssize_t) sizeof buf - 1
         && (n = read (fd, buf + len, sizeof buf - 1 - len)) > 0)
    len += n;
  close (fd);
  buf[len] = '\0';
  b = strrchr (buf, '/');
  for (ssize_t i = 0; i < len; i += strlen (buf + i) + 1) {
    const char *a = strrchr (buf + i, '/');

    if (strncmp (buf + i, "config=", 7) == 0 && *config == NULL)
      *config = strdup (buf + i + 7);
    else if (stripe && i > 0
             && (strcmp (buf + i, "stripe") == 0
                 || (a && strcmp (a + 1, "nbdkit-stripe-plugin.so") == 0)))
      *stripe = strcmp (b ? b + 1 : buf, "nbdkit") == 0;
  }
  return true;
}

static char *
cmdline_config (long pid)
{
  char *c;

  read_cmdline (pid, &c, NULL);
  return c;
}

/* Alive: not gone, and not a zombie nobody has reaped yet (a daemon's
 * parent may be slow to), whose command line is empty.
 */
static bool
alive (long pid)
{
  char path[64], buf[512], *p;
  ssize_t n;
  int fd;

  if (kill ((pid_t) pid, 0) == -1 && errno == ESRCH)
    return false;
  snprintf (path, sizeof path, "/proc/%ld/stat", pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return errno != ENOENT;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return true;
  buf[n] = '\0';
  /* "PID (COMM) STATE ...": COMM may hold anything, ')' included. */
  p = strrchr (buf, ')');
  return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

char *
volume_pidfile (const struct stripe_config *cfg)
{
  static const char suffix[] = ".status.json";
  const char *sf = cfg->health.status_file;
  size_t n, s = sizeof suffix - 1;
  char *r = NULL;

  if (cfg->serve.pidfile)
    return strdup (cfg->serve.pidfile);
  if (sf == NULL)
    return NULL;
  n = strlen (sf);
  if (n > s && strcmp (sf + n - s, suffix) == 0)
    n -= s;
  if (asprintf (&r, "%.*s.pid", (int) n, sf) == -1)
    return NULL;
  return r;
}

bool
pid_serves (long pid, const char *config)
{
  char *c = cmdline_config (pid);
  bool r = c && config && strcmp (c, config) == 0;

  free (c);
  return r;
}

long
server_pid (const char *config, const char *pidfile, long status_pid,
            char *why, size_t whylen)
{
  long candidates[2] = { pidfile ? read_pidfile (pidfile) : 0, status_pid };

  if (why && whylen)
    why[0] = '\0';
  for (int i = 0; i < 2; ++i) {
    long pid = candidates[i];

    if (pid <= 0 || (i == 1 && pid == candidates[0]))
      continue;
    if (!alive (pid))
      continue;
    if (config && pid_serves (pid, config))
      return pid;
    if (why && whylen && why[0] == '\0')
      snprintf (why, whylen,
                "pid %ld (from %s) is not the server of %s: its command "
                "line has no config=%s",
                pid, i == 0 ? pidfile : "the status file",
                config ? config : "?", config ? config : "?");
  }
  return 0;
}

static char *
listen_text (const struct stripe_config *cfg)
{
  char *s = NULL;

  if (cfg->serve.socket)
    return strdup (cfg->serve.socket);
  if (cfg->serve.address
      && asprintf (&s, strchr (cfg->serve.address, ':') ? "[%s]:%d" : "%s:%d",
                   cfg->serve.address, cfg->serve.port)
           == -1)
    return NULL;
  return s;
}

static char *
abs_path (const char *path)
{
  char *r = path ? realpath (path, NULL) : NULL;

  return r ? r : path ? strdup (path) : NULL;
}

static struct served *
add (struct served **v, size_t *n)
{
  struct served *p = realloc (*v, (*n + 1) * sizeof **v);

  if (p == NULL)
    return NULL;
  *v = p;
  memset (&p[*n], 0, sizeof p[*n]);
  return &p[(*n)++];
}

/* Fill e from its config at path (absolute or not), quietly. */
static void
from_config (struct served *e, const char *path, const char *stem)
{
  struct stripe_config cfg;
  char err[1024];

  e->config = abs_path (path);
  if (config_load (path, &cfg, err, sizeof err) == -1) {
    e->name = strdup (stem);
    e->seen.state = SEEN_UNKNOWN;
    snprintf (e->seen.reason, sizeof e->seen.reason, "%s", err);
    config_free (&cfg);
    return;
  }
  e->loaded = true;
  e->name = strdup (cfg.name);
  e->listen = listen_text (&cfg);
  e->status_file = abs_path (cfg.health.status_file);
  e->pidfile = volume_pidfile (&cfg);
  status_seen (cfg.health.status_file, cfg.name, cfg.health.set.interval,
               &e->seen);
  config_free (&cfg);
}

/* The server: verified by its command line; a live server whose status
 * file says otherwise is not "not-running", and a status file whose pid
 * is not a server of the volume (a recycled pid) says nothing of it.
 */
static void
find_server (struct served *e)
{
  char why[512];

  if (e->config == NULL)
    return; /* an ad hoc server (status=): nothing to verify it by */
  e->pid = server_pid (e->config, e->pidfile, e->seen.pid, why, sizeof why);
  if (e->pid && e->seen.state == SEEN_NOT_RUNNING) {
    e->seen.state = SEEN_UNKNOWN;
    snprintf (e->seen.reason, sizeof e->seen.reason,
              "server pid %ld runs, but its status file says otherwise",
              e->pid);
  }
  else if (e->pid == 0 && e->seen.state != SEEN_NOT_RUNNING
           && e->seen.state != SEEN_UNKNOWN) {
    /* A live pid in the file that is not this volume's server. */
    e->seen.state = SEEN_UNKNOWN;
    snprintf (e->seen.reason, sizeof e->seen.reason, "%s",
              why[0] ? why : "no server process found");
  }
}

static bool
known (const struct served *v, size_t n, const char *config,
       const char *status_file)
{
  for (size_t i = 0; i < n; ++i)
    if ((config && v[i].config && strcmp (v[i].config, config) == 0)
        || (status_file && v[i].status_file
            && strcmp (v[i].status_file, status_file) == 0))
      return true;
  return false;
}

static bool
ends_with (const char *s, const char *suffix)
{
  size_t n = strlen (s), k = strlen (suffix);

  return n > k && strcmp (s + n - k, suffix) == 0;
}

/* The entries of dir ending in suffix, sorted, as dir/name; -1 with errno
 * when dir cannot be read (ENOENT: no such directory is no error).
 */
static int
scan (const char *dir, const char *suffix, char ***paths, size_t *n)
{
  struct dirent **names;
  int k = scandir (dir, &names, NULL, alphasort);

  *paths = NULL;
  *n = 0;
  if (k == -1)
    return errno == ENOENT ? 0 : -1;
  *paths = calloc (k ? k : 1, sizeof **paths);
  for (int i = 0; i < k; ++i) {
    const char *d = names[i]->d_name;
    if (*paths && d[0] != '.' && ends_with (d, suffix)
        && asprintf (&(*paths)[*n], "%s/%s", dir, d) != -1)
      (*n)++;
    free (names[i]);
  }
  free (names);
  return *paths ? 0 : -1;
}

static void
free_paths (char **paths, size_t n)
{
  for (size_t i = 0; i < n; ++i)
    free (paths[i]);
  free (paths);
}

/* "dir/fast0.status.json" -> "fast0" */
static char *
stem (const char *path, const char *suffix)
{
  const char *b = strrchr (path, '/');
  size_t n;

  b = b ? b + 1 : path;
  n = strlen (b) - (ends_with (b, suffix) ? strlen (suffix) : 0);
  return strndup (b, n);
}

static void
served_entry_free (struct served *e)
{
  free (e->name);
  free (e->config);
  free (e->status_file);
  free (e->pidfile);
  free (e->listen);
  seen_free (&e->seen);
}

/* The entry just added stays if it is configured here or served now: a
 * volume known only from what a dead server left is no volume of ours.
 * An ad hoc server (no config to check its command line against) is
 * taken from its status file while the pid there lives.
 */
static void
keep_if_served (struct served *v, size_t *n)
{
  struct served *e = &v[*n - 1];
  bool served = e->config ? e->pid != 0
                          : e->seen.pid && e->seen.state != SEEN_NOT_RUNNING
                              && alive (e->seen.pid);

  if (e->configured || served)
    return;
  served_entry_free (e);
  (*n)--;
}

/* A server's registration (plugin/registry.h), RUNDIR/NAME.PID.served:
 * the volume it serves, if it still does.
 */
static void
from_registration (struct served **v, size_t *n, const char *path)
{
  struct json_object *o = json_object_from_file (path);
  const char *config = json_str_or_null (o, "config");
  const char *status_file = json_str_or_null (o, "status_file");
  const char *name = json_str_or_null (o, "name");
  int64_t pid = 0;
  struct served *e;

  if (o == NULL || json_get_int64 (o, "pid", &pid, NULL, 0) == -1 || pid <= 0
      || pid > INT_MAX || !alive (pid) || (config && !pid_serves (pid, config))
      || known (*v, *n, config, status_file) || (e = add (v, n)) == NULL) {
    json_object_put (o);
    return;
  }
  if (config) {
    from_config (e, config, name ? name : "?");
    find_server (e);
    if (e->pid == 0) /* its pidfile elsewhere, its status not yet written */
      e->pid = pid;
    if (e->seen.state == SEEN_NOT_RUNNING) {
      e->seen.state = SEEN_UNKNOWN;
      snprintf (e->seen.reason, sizeof e->seen.reason,
                "server pid %ld runs, but has written no status yet",
                (long) pid);
    }
  }
  else {
    e->name = strdup (name ? name : "?");
    e->status_file = status_file ? strdup (status_file) : NULL;
    if (status_file)
      status_seen (status_file, NULL, 0, &e->seen);
    e->pid = pid;
  }
  json_object_put (o);
}

/* Whether pid runs with this run directory: $NBDSTRIPE_RUNDIR in its
 * environment, or its absence, as ours.  A server of another run
 * directory (a test's, a user's own) is not served "here".  false when
 * its environment cannot be read.
 */
static bool
same_run_dir (long pid)
{
  static const char key[] = "NBDSTRIPE_RUNDIR=";
  char path[64], buf[65536];
  const char *mine = getenv ("NBDSTRIPE_RUNDIR"), *theirs = NULL;
  ssize_t n, len = 0;
  int fd;

  snprintf (path, sizeof path, "/proc/%ld/environ", pid);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd == -1)
    return false;
  while (len < (ssize_t) sizeof buf - 1
         && (n = read (fd, buf + len, sizeof buf - 1 - len)) > 0)
    len += n;
  close (fd);
  buf[len] = '\0';
  for (ssize_t i = 0; i < len; i += strlen (buf + i) + 1)
    if (strncmp (buf + i, key, sizeof key - 1) == 0)
      theirs = buf + i + sizeof key - 1;
  if (mine && *mine == '\0')
    mine = NULL;
  if (theirs && *theirs == '\0')
    theirs = NULL;
  return (mine == NULL && theirs == NULL)
         || (mine && theirs && strcmp (mine, theirs) == 0);
}

/* The nbdkit processes of this host serving the stripe plugin with a
 * config= that nothing above named (a server that could not register,
 * a registration removed by hand), with this run directory.
 */
static void
from_processes (struct served **v, size_t *n)
{
  DIR *d = opendir ("/proc");
  struct dirent *de;

  if (d == NULL)
    return;
  while ((de = readdir (d)) != NULL) {
    char *end, *config;
    long pid = strtol (de->d_name, &end, 10);
    bool stripe;
    struct served *e;

    if (*end || pid <= 0 || !read_cmdline (pid, &config, &stripe))
      continue;
    if (stripe && config && config[0] == '/' && !known (*v, *n, config, NULL)
        && alive (pid) && same_run_dir (pid) && (e = add (v, n)) != NULL) {
      char *s = stem (config, ".conf");
      from_config (e, config, s ? s : "?");
      free (s);
      find_server (e);
      if (e->pid == 0)
        e->pid = pid;
    }
    free (config);
  }
  closedir (d);
}

int
served_list (struct served **out, size_t *nout)
{
  struct served *v = NULL, *e;
  size_t n = 0, np;
  char **paths;
  int r = 0;

  /* Configured. */
  if (scan (conf_dir (), ".conf", &paths, &np) == -1) {
    fprintf (stderr, "nbdstripe: %s: %m\n", conf_dir ());
    r = -1;
  }
  for (size_t i = 0; i < np; ++i) {
    struct stat st;
    char *s;

    if (stat (paths[i], &st) == -1 || !S_ISREG (st.st_mode)
        || (e = add (&v, &n)) == NULL)
      continue;
    e->configured = true;
    s = stem (paths[i], ".conf");
    from_config (e, paths[i], s ? s : "?");
    free (s);
    find_server (e);
  }
  free_paths (paths, np);

  /* Served, by their servers' registrations. */
  if (scan (run_dir (), ".served", &paths, &np) == -1) {
    fprintf (stderr, "nbdstripe: %s: %m\n", run_dir ());
    r = -1;
  }
  for (size_t i = 0; i < np; ++i)
    from_registration (&v, &n, paths[i]);
  free_paths (paths, np);

  /* Served, by their status files. */
  if (scan (run_dir (), ".status.json", &paths, &np) == -1)
    r = -1;
  for (size_t i = 0; i < np; ++i) {
    struct seen seen;
    char *file = abs_path (paths[i]);

    if (file == NULL || known (v, n, NULL, file)) {
      free (file);
      continue;
    }
    status_seen (file, NULL, 0, &seen);
    if ((seen.config && known (v, n, seen.config, NULL))
        || (e = add (&v, &n)) == NULL) {
      seen_free (&seen);
      free (file);
      continue;
    }
    if (seen.config)
      from_config (e, seen.config, seen.name ? seen.name : "?");
    /* This status file is the volume's, whatever its config says. */
    seen_free (&e->seen);
    free (e->status_file);
    e->status_file = file;
    e->seen = seen;
    if (e->name == NULL || !e->loaded) {
      free (e->name);
      e->name =
        seen.name ? strdup (seen.name) : stem (paths[i], ".status.json");
    }
    find_server (e);
    keep_if_served (v, &n);
  }
  free_paths (paths, np);

  /* Served, by their pidfiles (a status file kept elsewhere). */
  if (scan (run_dir (), ".pid", &paths, &np) == -1)
    r = -1;
  for (size_t i = 0; i < np; ++i) {
    long pid = read_pidfile (paths[i]);
    char *config = pid ? cmdline_config (pid) : NULL;

    if (config && !known (v, n, config, NULL) && (e = add (&v, &n))) {
      char *s = stem (paths[i], ".pid");
      from_config (e, config, s ? s : "?");
      free (s);
      free (e->pidfile);
      e->pidfile = abs_path (paths[i]);
      find_server (e);
      keep_if_served (v, &n);
    }
    free (config);
  }
  free_paths (paths, np);

  /* Served, by the processes that serve them. */
  from_processes (&v, &n);

  *out = v;
  *nout = n;
  return r;
}

void
served_free (struct served *v, size_t n)
{
  for (size_t i = 0; i < n; ++i)
    served_entry_free (&v[i]);
  free (v);
}
