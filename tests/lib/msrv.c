/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe integration tests: member servers.  See msrv.h. */

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "harness.h"
#include "msrv.h"

static void
msrv_cleanup (void *arg)
{
  struct msrv *m = arg;
  int st;

  if (m->pid > 0) {
    kill (m->pid, SIGKILL);
    reap (m->pid, &st);
    m->pid = 0;
  }
  for (char **a = m->argv; a && *a; a++)
    free (*a);
  free (m->argv);
  free (m->name);
  free (m->sock);
  free (m->log);
  free (m->reqlog);
  memset (m, 0, sizeof *m);
}

static void
msrv_spawn (struct msrv *m)
{
  int lfd = m->transport == MSRV_UNIX ? listen_unix (m->sock)
                                      : listen_tcp_loopback (&m->port);
  m->pid = spawn_nbdkit_argv ((const char *const *) m->argv, false, false, lfd,
                              m->log);
  close (lfd); /* only nbdkit holds the listener now */
  m->runs++;
}

void
msrv_start (struct msrv *m, const char *dir, const char *name,
            const struct msrv_opts *o, const char *const *args)
{
  size_t n = 0, i = 0;

  memset (m, 0, sizeof *m);
  cleanup_push (msrv_cleanup, m);
  m->transport = o ? o->transport : MSRV_UNIX;
  m->name = xstrdup (name);
  if (m->transport == MSRV_UNIX)
    m->sock = xasprintf ("%s/%s.sock", dir, name);
  m->log = xasprintf ("%s/%s.nbdkit.log", dir, name);
  m->reqlog = xasprintf ("%s/%s.requests.log", dir, name);
  while (args[n])
    n++;
  m->argv = xcalloc (n + 10, sizeof *m->argv);
  m->argv[i++] = xstrdup ("nbdkit");
  m->argv[i++] = xstrdup ("-f");
  m->argv[i++] = xstrdup ("--exit-with-parent");
  if (o && o->tls_psk) {
    m->argv[i++] = xstrdup ("--tls=require");
    m->argv[i++] = xasprintf ("--tls-psk=%s", o->tls_psk);
  }
  m->argv[i++] = xstrdup ("--filter=log");
  for (size_t j = 0; j < n; j++)
    m->argv[i++] = xstrdup (args[j]);
  m->argv[i++] = xasprintf ("logfile=%s", m->reqlog);
  m->argv[i++] = xstrdup ("logappend=true");
  m->argv[i] = NULL;
  msrv_spawn (m);
}

void
msrv_kill (struct msrv *m, int sig)
{
  int st;
  if (m->pid <= 0)
    FAIL ("%s: not running", m->name);
  if (kill (m->pid, sig) == -1)
    FAIL ("%s: kill: %m", m->name);
  if (reap (m->pid, &st) == -1)
    FAIL ("%s: waitpid: %m", m->name);
  m->pid = 0;
}

void
msrv_stop (struct msrv *m)
{
  int st;
  if (m->pid <= 0)
    FAIL ("%s: not running", m->name);
  if (kill (m->pid, SIGTERM) == -1)
    FAIL ("%s: kill: %m", m->name);
  if (reap (m->pid, &st) == -1)
    FAIL ("%s: waitpid: %m", m->name);
  m->pid = 0;
  if (!WIFEXITED (st) || WEXITSTATUS (st) != 0) {
    char *log = read_text_file (m->log);
    FAIL ("%s did not exit cleanly on SIGTERM: %s\n--- its log ---\n%s"
          "--- end of log ---",
          m->name, describe_wstatus (st), log);
  }
}

void
msrv_restart (struct msrv *m)
{
  if (m->pid > 0)
    FAIL ("%s: still running", m->name);
  msrv_spawn (m);
}

char *
msrv_uri (const struct msrv *m, const char *psk_file, const char *user)
{
  /* The user goes in the authority (user@): libnbd 1.14 takes no
   * tls-username= parameter (see msrv_uri_tls_username).
   */
  char *u =
    psk_file ? xasprintf ("%s@", user ? user : "nbdstripe") : xstrdup ("");
  char *q = psk_file ? xasprintf ("tls-psk-file=%s", psk_file) : xstrdup ("");
  const char *s = psk_file ? "s" : "";
  char *uri;

  if (m->transport == MSRV_UNIX)
    uri = xasprintf ("nbd%s+unix://%s/?socket=%s%s%s", s, u, m->sock,
                     *q ? "&" : "", q);
  else
    uri = xasprintf ("nbd%s://%s127.0.0.1:%d/%s%s", s, u, m->port,
                     *q ? "?" : "", q);
  free (u);
  free (q);
  return uri;
}

char *
msrv_uri_tls_username (const struct msrv *m, const char *psk_file,
                       const char *user)
{
  if (m->transport == MSRV_UNIX)
    return xasprintf (
      "nbds+unix:///?socket=%s&tls-psk-file=%s&tls-username=%s", m->sock,
      psk_file, user);
  return xasprintf ("nbds://127.0.0.1:%d/?tls-psk-file=%s&tls-username=%s",
                    m->port, psk_file, user);
}

struct nbd_handle *
msrv_connect (const struct msrv *m, const char *psk_file, const char *user)
{
  struct nbd_handle *h = nbd_create ();
  char *uri = msrv_uri (m, psk_file, user);

  if (!h)
    FAIL ("nbd_create: %s", nbd_get_error ());
  track_handle (h);
  if (nbd_set_uri_allow_local_file (h, true) == -1
      || nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) == -1)
    FAIL ("libnbd: %s", nbd_get_error ());
  if (nbd_connect_uri (h, uri) == -1) {
    char *err = xstrdup (nbd_get_error ());
    char *log = read_text_file (m->log);
    FAIL ("connecting to %s (%s) failed: %s\n--- its log ---\n%s--- end of "
          "log ---",
          m->name, uri, err, log);
  }
  free (uri);
  return h;
}

uint64_t
msrv_log_mark (const struct msrv *m)
{
  struct stat st;
  if (stat (m->reqlog, &st) == -1) {
    if (errno == ENOENT)
      return 0;
    FAIL ("stat %s: %m", m->reqlog);
  }
  return st.st_size;
}

/* The log from mark on, NUL-terminated. */
static char *
log_since (const struct msrv *m, uint64_t mark)
{
  size_t len;
  char *all, *out;

  if (access (m->reqlog, F_OK) == -1)
    return xstrdup ("");
  all = read_file (m->reqlog, &len);
  out = xstrdup (mark < len ? all + mark : "");
  free (all);
  return out;
}

void
msrv_connections (const struct msrv *m, uint64_t mark, unsigned *opened,
                  unsigned *peak)
{
  char *text = log_since (m, mark), *save = NULL;
  unsigned open_now = 0;
  /* Connection ids seen connecting since the mark: a Disconnect of an
   * older connection (logged after the mark) does not count.
   */
  size_t cap = 1024;
  bool *seen = xcalloc (cap, sizeof *seen);

  *opened = *peak = 0;
  for (char *l = strtok_r (text, "\n", &save); l;
       l = strtok_r (NULL, "\n", &save)) {
    char *c = strstr (l, " connection="), *end;
    unsigned long id;
    if (!c)
      continue;
    id = strtoul (c + 12, &end, 10);
    if (*end != ' ')
      continue;
    if (id >= cap) {
      size_t ncap = 2 * id + 1;
      seen = realloc (seen, ncap * sizeof *seen);
      if (!seen)
        FAIL ("out of memory");
      memset (seen + cap, 0, (ncap - cap) * sizeof *seen);
      cap = ncap;
    }
    if (strncmp (end, " Connect ", 9) == 0) {
      seen[id] = true;
      (*opened)++;
      if (++open_now > *peak)
        *peak = open_now;
    }
    else if (strncmp (end, " Disconnect ", 12) == 0 && seen[id]) {
      seen[id] = false;
      open_now--;
    }
  }
  free (seen);
  free (text);
}

unsigned
msrv_requests (const struct msrv *m, uint64_t mark, const char *kind,
               const char *with)
{
  char *text = log_since (m, mark), *save = NULL;
  char *pat = xasprintf (" %s id=", kind);
  unsigned n = 0;

  for (char *l = strtok_r (text, "\n", &save); l;
       l = strtok_r (NULL, "\n", &save))
    if (strstr (l, " connection=") && strstr (l, pat)
        && (!with || strstr (l, with)))
      n++;
  free (pat);
  free (text);
  return n;
}

char *
make_psk_file (const char *dir, const char *name, const char *user)
{
  char *path = xasprintf ("%s/%s", dir, name);
  char *log = xasprintf ("%s/%s.psktool.log", dir, name);
  char *cmd;
  int st;

  if (access ("/usr/bin/psktool", X_OK) == -1
      && system ("command -v psktool >/dev/null 2>&1") != 0)
    SKIP ("psktool not found (install gnutls-bin)");
  cmd = xasprintf ("psktool -u '%s' -p '%s' >'%s' 2>&1", user, path, log);
  st = system (cmd);
  if (st != 0 || access (path, R_OK) == -1) {
    char *out = read_text_file (log);
    FAIL ("%s: %s\n%s", cmd, describe_wstatus (st), out);
  }
  free (cmd);
  free (log);
  cleanup_push (free, path);
  return path;
}

void
pause_control (const char *ctl, bool pause)
{
  struct sockaddr_un sun = { .sun_family = AF_UNIX };
  char c = pause ? 'p' : 'r', want = pause ? 'P' : 'R', got = 0;
  int fd;
  ssize_t r;

  if (strlen (ctl) >= sizeof sun.sun_path)
    FAIL ("pause control socket path too long: %s", ctl);
  strcpy (sun.sun_path, ctl);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1)
    FAIL ("socket: %m");
  if (connect (fd, (struct sockaddr *) &sun, sizeof sun) == -1)
    FAIL ("connect %s (the pause filter's control socket exists once its "
          "server has answered a connection): %m",
          ctl);
  if (write (fd, &c, 1) != 1)
    FAIL ("write %s: %m", ctl);
  do
    r = read (fd, &got, 1);
  while (r == -1 && errno == EINTR);
  if (r != 1 || got != want)
    FAIL ("pause control %s: sent '%c', got %s'%c'", ctl, c,
          r == 1 ? "" : "nothing ", r == 1 ? got : ' ');
  close (fd);
}
