/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the control socket.  See include/control.h. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control.h"
#include "health.h"
#include "json.h"
#include "log.h"
#include "replace.h"
#include "volume.h"

#define REQUEST_MAX (64 * 1024)
#define CLIENT_TIMEOUT_MS 5000

struct control {
  char *path;
  struct volume *v;
  struct health *h;
  char *config;
  int fd;
  int stop[2]; /* a pipe: written to stop the thread */
  pthread_t thread;
  bool serving; /* the thread runs */
};

void
control_path (const char *status_file, char *out, size_t len)
{
  static const char suffix[] = ".status.json";
  size_t n = strlen (status_file), s = sizeof suffix - 1;

  if (n > s && strcmp (status_file + n - s, suffix) == 0)
    snprintf (out, len, "%.*s.ctl", (int) (n - s), status_file);
  else
    snprintf (out, len, "%s.ctl", status_file);
}

static struct json_object *
refusal (const char *why)
{
  struct json_object *o = json_object_new_object ();
  json_put (o, "ok", json_object_new_boolean (false));
  json_put (o, "error", json_text (why));
  return o;
}

static struct json_object *
handle (struct control *c, struct json_object *req)
{
  struct json_object *op, *x, *o;
  const char *name;
  char why[1024];

  if (!json_object_object_get_ex (req, "op", &op)
      || !json_object_is_type (op, json_type_string))
    return refusal ("the request has no \"op\"");
  name = json_object_get_string (op);

  if (strcmp (name, "status") == 0) {
    char *text = c->h ? health_status_text (c->h) : NULL;
    struct json_object *st = text ? json_tokener_parse (text) : NULL;
    free (text);
    o = json_object_new_object ();
    json_put (o, "ok", json_object_new_boolean (true));
    if (st)
      json_put (o, "status", st);
    else {
      struct json_object *r = replace_status (c->v);
      if (r)
        json_put (o, "replace", r);
    }
    return o;
  }
  if (strcmp (name, "replace") == 0) {
    struct replace_params p = { .config = c->config };
    if (!json_object_object_get_ex (req, "member", &x)
        || !json_object_is_type (x, json_type_int)
        || json_object_get_int64 (x) < 0)
      return refusal ("replace: \"member\" must be the member's index");
    p.index = (unsigned) json_object_get_int64 (x);
    if (!json_object_object_get_ex (req, "new", &x)
        || !json_object_is_type (x, json_type_string))
      return refusal ("replace: \"new\" must name the new member");
    p.new_path = json_object_get_string (x);
    if (json_object_object_get_ex (req, "rate", &x))
      p.rate = json_object_get_int64 (x) > 0 ? json_object_get_int64 (x) : 0;
    if (json_object_object_get_ex (req, "force", &x))
      p.force = json_object_get_boolean (x);
    if (json_object_object_get_ex (req, "skip_unreadable", &x))
      p.skip_unreadable = json_object_get_boolean (x);
    if (replace_start (c->v, &p, why, sizeof why) == -1)
      return refusal (why);
    o = json_object_new_object ();
    json_put (o, "ok", json_object_new_boolean (true));
    return o;
  }
  if (strcmp (name, "cancel") == 0) {
    if (replace_cancel (c->v, why, sizeof why) == -1)
      return refusal (why);
    o = json_object_new_object ();
    json_put (o, "ok", json_object_new_boolean (true));
    return o;
  }
  if (strcmp (name, "step") == 0 && replace_debug_gate) {
    const char *at = NULL;
    if (json_object_object_get_ex (req, "at", &x)
        && json_object_is_type (x, json_type_string))
      at = json_object_get_string (x);
    if (replace_debug_release (c->v, at, why, sizeof why) == -1)
      return refusal (why);
    o = json_object_new_object ();
    json_put (o, "ok", json_object_new_boolean (true));
    return o;
  }
  snprintf (why, sizeof why, "unknown op \"%.100s\" (status, replace, "
            "cancel)", name);
  return refusal (why);
}

/* One client: one request line, one answer line. */
static void
serve_client (struct control *c, int fd)
{
  struct ucred cred;
  socklen_t clen = sizeof cred;
  char *buf = malloc (REQUEST_MAX + 1);
  size_t n = 0;
  struct json_object *req, *ans;
  char *text;

  if (buf == NULL)
    return;
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == -1
      || (cred.uid != 0 && cred.uid != geteuid ())) {
    ans = refusal ("permission denied");
    goto answer;
  }
  for (;;) {
    struct pollfd pfd = { fd, POLLIN, 0 };
    ssize_t r;
    if (poll (&pfd, 1, CLIENT_TIMEOUT_MS) != 1) {
      free (buf);
      return;
    }
    r = read (fd, buf + n, REQUEST_MAX - n);
    if (r <= 0)
      break;
    n += r;
    if (memchr (buf, '\n', n) || n == REQUEST_MAX)
      break;
  }
  buf[n] = '\0';
  req = json_tokener_parse (buf);
  if (req == NULL || !json_object_is_type (req, json_type_object))
    ans = refusal ("the request is not a JSON object on one line");
  else
    ans = handle (c, req);
  json_object_put (req);

answer:
  text = json_text_of (ans);
  json_object_put (ans);
  if (text) {
    size_t len = strlen (text), done = 0;
    while (done < len) {
      ssize_t w = send (fd, text + done, len - done, MSG_NOSIGNAL);
      if (w <= 0)
        break;
      done += w;
    }
    if (done == len && (len == 0 || text[len - 1] != '\n'))
      (void) send (fd, "\n", 1, MSG_NOSIGNAL);
  }
  free (text);
  free (buf);
}

static void *
control_main (void *arg)
{
  struct control *c = arg;

  for (;;) {
    struct pollfd pfd[2] = { { c->fd, POLLIN, 0 }, { c->stop[0], POLLIN, 0 } };
    int fd;

    if (poll (pfd, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      stripe_error ("control: poll: %m");
      return NULL;
    }
    if (pfd[1].revents)
      return NULL;
    fd = accept4 (c->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1)
      continue;
    serve_client (c, fd);
    close (fd);
  }
}

struct control *
control_listen (const char *path, struct volume *v, struct health *h,
                const char *config)
{
  struct control *c = calloc (1, sizeof *c);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct stat st;
  mode_t old_umask;
  int e;

  if (c == NULL)
    return NULL;
  c->fd = c->stop[0] = c->stop[1] = -1;
  c->v = v;
  c->h = h;
  c->path = strdup (path);
  c->config = config ? strdup (config) : NULL;
  if (c->path == NULL || (config && c->config == NULL))
    goto err;
  if (strlen (path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    goto err;
  }
  strcpy (sa.sun_path, path);
  /* Its directory, as the status file's (/run/nbdstripe). */
  {
    char dir[sizeof sa.sun_path];
    snprintf (dir, sizeof dir, "%s", path);
    for (char *s = strchr (dir + 1, '/'); s; s = strchr (s + 1, '/')) {
      *s = '\0';
      if (mkdir (dir, 0755) == -1 && errno != EEXIST)
        goto err;
      *s = '/';
    }
  }
  /* A socket left by a server that died: gone.  Anything else stays. */
  if (lstat (path, &st) == 0) {
    if (!S_ISSOCK (st.st_mode)) {
      errno = EEXIST;
      goto err;
    }
    unlink (path);
  }
  c->fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (c->fd == -1)
    goto err;
  old_umask = umask (0177);
  e = bind (c->fd, (struct sockaddr *) &sa, sizeof sa);
  umask (old_umask);
  if (e == -1 || chmod (path, 0600) == -1 || listen (c->fd, 8) == -1
      || pipe2 (c->stop, O_CLOEXEC) == -1)
    goto err;
  return c;

err:
  e = errno;
  if (c->fd != -1)
    close (c->fd);
  if (c->stop[0] != -1) {
    close (c->stop[0]);
    close (c->stop[1]);
  }
  free (c->path);
  free (c->config);
  free (c);
  errno = e;
  return NULL;
}

int
control_serve (struct control *c)
{
  int e = pthread_create (&c->thread, NULL, control_main, c);

  if (e != 0) {
    errno = e;
    return -1;
  }
  c->serving = true;
  return 0;
}

void
control_stop (struct control *c)
{
  if (c == NULL)
    return;
  if (c->serving) {
    (void) !write (c->stop[1], "x", 1);
    pthread_join (c->thread, NULL);
  }
  close (c->fd);
  close (c->stop[0]);
  close (c->stop[1]);
  unlink (c->path);
  free (c->path);
  free (c->config);
  free (c);
}
