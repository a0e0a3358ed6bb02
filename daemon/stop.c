/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe stop: stop the server of a volume and wait until it has
 * gone.
 *
 * The server is the process the volume's pidfile (the config's, else
 * the one beside the status file: volume_pidfile) or the status file
 * names, and only if its command line serves that config (served.c): a
 * pid recycled by another process is never signalled.  The pidfile is
 * what finds a server just started: serve returns only once nbdkit has
 * written it, when the status file may still be the previous run's.
 *
 * The check and the signal go through a pidfd opened before the check,
 * so that the process checked is the process signalled even if it exits
 * in between and its pid is reused; and the wait is poll(2) on that
 * pidfd.  (Without pidfds, Linux before 5.3: kill(2) and a bounded
 * wait with kill(pid, 0).)
 *
 * A volume that is not running (no live process named as its server)
 * is what stop was to bring about: exit status 0, as systemctl stop, and
 * said so; --strict makes it an error (1), for a script that must know
 * it stopped something.
 */

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "json.h"
#include "jsonout.h"
#include "nbdstripe.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

/* What stop is about. */
struct target {
  char *name;
  char *config; /* absolute */
  char *pidfile;
  long status_pid;
};

static void
target_free (struct target *t)
{
  free (t->name);
  free (t->config);
  free (t->pidfile);
}

/* VOLUME as a config (a path, or a name with a config in the config
 * directory), else as the name of a volume served here.  Prints why not
 * and returns -1.
 */
static int
find_target (const char *arg, struct target *t, char *err, size_t errlen)
{
  struct stripe_config cfg;
  struct served *v;
  size_t n, pick = SIZE_MAX, running = 0;
  char *path = volume_config_path (arg);
  struct stat st;
  bool config = path && (volume_is_path (arg) || stat (path, &st) == 0);

  free (path);
  memset (t, 0, sizeof *t);
  if (config) {
    struct seen seen;

    if (load_volume (arg, &cfg, err, errlen) == -1) {
      config_free (&cfg);
      return -1;
    }
    t->name = strdup (cfg.name);
    t->config = realpath (cfg.path, NULL);
    if (t->config == NULL)
      t->config = strdup (cfg.path);
    t->pidfile = volume_pidfile (&cfg);
    status_seen (cfg.health.status_file, cfg.name, cfg.health.set.interval,
                 &seen);
    t->status_pid = seen.pid;
    seen_free (&seen);
    config_free (&cfg);
    return 0;
  }

  served_list (&v, &n);
  for (size_t i = 0; i < n; ++i)
    if (v[i].name && strcmp (v[i].name, arg) == 0) {
      if (pick == SIZE_MAX || (v[i].pid && !v[pick].pid))
        pick = i;
      running += v[i].pid != 0;
    }
  if (pick == SIZE_MAX || running > 1) {
    if (running > 1)
      snprintf (err, errlen,
                "%s: %zu volumes of that name are served here: name one by "
                "its config",
                arg, running);
    else
      snprintf (err, errlen,
                "no volume named '%s': no %s/%s.conf, and none served under "
                "that name",
                arg, conf_dir (), arg);
    fprintf (stderr, "nbdstripe: %s\n", err);
    served_free (v, n);
    return -1;
  }
  t->name = strdup (v[pick].name);
  t->config = v[pick].config ? strdup (v[pick].config) : NULL;
  t->pidfile = v[pick].pidfile ? strdup (v[pick].pidfile) : NULL;
  t->status_pid = v[pick].pid ? v[pick].pid : v[pick].seen.pid;
  served_free (v, n);
  return 0;
}

/* Wait until the process has gone: 1 gone, 0 still there after secs. */
static int
wait_gone (int pidfd, long pid, unsigned secs)
{
  struct timespec pause = { 0, 10 * 1000 * 1000 };

  if (pidfd >= 0) {
    struct pollfd p = { .fd = pidfd, .events = POLLIN };
    int r;

    while ((r = poll (&p, 1, (int) secs * 1000)) == -1 && errno == EINTR)
      ;
    return r > 0;
  }
  for (unsigned i = 0; i < secs * 100; ++i) {
    if (kill ((pid_t) pid, 0) == -1 && errno == ESRCH)
      return 1;
    nanosleep (&pause, NULL);
  }
  return 0;
}

static void
stop_json (const char *arg, const struct target *t, long pid, bool stopped,
           const char *reason, bool ok)
{
  struct json_object *o = json_object_new_object ();

  json_put (o, "name", json_text (t->name ? t->name : arg));
  json_put (o, "config", json_text (t->config));
  json_put (o, "pid", pid ? json_object_new_int64 (pid) : NULL);
  json_put (o, "stopped", json_object_new_boolean (stopped));
  json_put (o, "reason", reason[0] ? json_text (reason) : NULL);
  jsonout_result (o, ok, ok ? NULL : reason, false);
}

int
cmd_stop (const struct command *cmd, int argc, char **argv)
{
  static const struct option opts[] = {
    { "timeout", required_argument, NULL, 't' },
    { "json", no_argument, NULL, 'j' },
    { "strict", no_argument, NULL, 'S' },
    CLI_COMMON_OPTIONS,
    { NULL, 0, NULL, 0 },
  };
  struct target t;
  unsigned long timeout = 30;
  char err[1024] = "", why[512] = "", *end;
  bool json = false, stopped = false, strict = false, not_running = false;
  bool ok;
  long pid = 0;
  int c, pidfd = -1;

  while ((c = getopt_long (argc, argv, "t:jhV", opts, NULL)) != -1) {
    switch (c) {
    case 't':
      errno = 0;
      timeout = strtoul (optarg, &end, 10);
      if (errno || end == optarg || *end || optarg[0] < '0' || optarg[0] > '9'
          || timeout < 1 || timeout > 3600)
        return cli_usage_error (cmd,
                                "--timeout '%s': expected 1 to 3600 "
                                "seconds",
                                optarg);
      break;
    case 'j': json = true; break;
    case 'S': strict = true; break;
    default: return cli_option (cmd, c);
    }
  }
  if ((c = cli_operands (cmd, argc, argv, 1, 1, "VOLUME")) != 0)
    return c;

  if (find_target (argv[optind], &t, err, sizeof err) == -1)
    goto out;
  if (t.config == NULL) {
    snprintf (err, sizeof err,
              "%s: served without a config (nbdkit stripe ... status=): "
              "nothing tells its server apart, stop it yourself",
              t.name);
    fprintf (stderr, "nbdstripe: %s\n", err);
    goto out;
  }
  pid = server_pid (t.config, t.pidfile, t.status_pid, why, sizeof why);
  if (pid == 0) {
    snprintf (err, sizeof err, "%s: not running%s%s%s", t.name,
              why[0] ? " (" : "", why, why[0] ? "; not signalled)" : "");
    /* A live process the pidfile names that is not the server: a
     * recycled pid, or a server started some other way -- not known to
     * be stopped, so an error.
     */
    not_running = why[0] == '\0';
    if (!not_running)
      fprintf (stderr, "nbdstripe: %s\n", err);
    goto out;
  }

  /* Pin the process, check it is still the server, then signal it. */
  pidfd = (int) syscall (SYS_pidfd_open, (pid_t) pid, 0);
  if (pidfd == -1 && errno != ENOSYS) {
    snprintf (err, sizeof err, "%s: not running (pid %ld: %s)", t.name, pid,
              strerror (errno));
    not_running = true;
    pid = 0;
    goto out;
  }
  if (!pid_serves (pid, t.config)
      || (pidfd >= 0 ? syscall (SYS_pidfd_send_signal, pidfd, SIGTERM, NULL, 0)
                     : kill ((pid_t) pid, SIGTERM))
           == -1) {
    int e = errno;
    snprintf (err, sizeof err, "%s: pid %ld: %s", t.name, pid,
              e == ESRCH || !pid_serves (pid, t.config)
                ? "has gone, or no longer serves the volume: not signalled"
                : strerror (e));
    fprintf (stderr, "nbdstripe: %s\n", err);
    goto out;
  }
  if (!wait_gone (pidfd, pid, timeout)) {
    snprintf (err, sizeof err,
              "%s: the server (pid %ld) did not exit within %lu s of "
              "SIGTERM",
              t.name, pid, timeout);
    fprintf (stderr, "nbdstripe: %s\n", err);
    goto out;
  }
  stopped = true;
  if (!json)
    printf ("%s: stopped (server pid %ld)\n", t.name, pid);

out:
  if (not_running) {
    if (strict)
      fprintf (stderr, "nbdstripe: %s\n", err);
    else if (!json)
      printf ("%s: nothing to stop\n", err);
  }
  ok = stopped || (not_running && !strict);
  if (json)
    stop_json (argv[optind], &t, pid, stopped, err, ok);
  if (pidfd >= 0)
    close (pidfd);
  target_free (&t);
  return ok ? 0 : 1;
}
