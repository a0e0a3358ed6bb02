/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the control socket.  See include/control.h. */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "control.h"
#include "array.h"
#include "health.h"
#include "json.h"
#include "log.h"
#include "layout.h"
#include "mover.h"
#include "replace.h"
#include "reshape.h"
#include "scrub.h"
#include "util.h"
#include "volume.h"

#define REQUEST_MAX (64 * 1024)
/* A client has this long to send its whole request (not each byte), and
 * each send of the answer this long: a client that trickles or never
 * reads is cut off.
 */
#define CLIENT_TIMEOUT_MS 5000
/* Clients served at once, each by a thread of its own; one more is told
 * the server is busy.
 */
#define MAX_CLIENTS 16

struct client {
  struct control *c;
  int fd;
  pthread_t thread;
  struct client *next;
};

struct control {
  char *path;
  struct array *a;
  struct volume *v; /* &a->volume */
  struct health *h;
  char *config;
  int fd;
  int stop[2]; /* a pipe: written to stop the thread */
  pthread_t thread;
  bool serving; /* the thread runs */
  pthread_mutex_t lock;
  pthread_cond_t cond; /* a client thread ended */
  struct client *clients;
  unsigned nr_clients;
  bool stopping;
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
ok_answer (void)
{
  struct json_object *o = json_object_new_object ();
  json_put (o, "ok", json_object_new_boolean (true));
  return o;
}

/* Every key of req is one of the (NULL-terminated) allowed. */
static const char *
unknown_key (struct json_object *req, const char *const *allowed)
{
  json_object_object_foreach (req, key, val) {
    bool known = false;
    (void) val;
    for (const char *const *a = allowed; *a; ++a)
      if (strcmp (key, *a) == 0)
        known = true;
    if (!known)
      return key;
  }
  return NULL;
}

/* A field that must be a boolean if given: -1 (why) if it is not. */
static int
get_bool (struct json_object *req, const char *key, bool *out, char *why,
          size_t len)
{
  char e[256];

  if (!json_has (req, key))
    return 0;
  if (json_get_bool (req, key, out, e, sizeof e) == -1) {
    snprintf (why, len, "replace: %s", e);
    return -1;
  }
  return 0;
}

/* The replace request's fields, each of its type and range: a request
 * is refused rather than read as something else (a member 2^32 as
 * member 0, "force": "false" as true).
 */
static int
replace_request (struct control *c, struct json_object *req,
                 struct replace_params *p, char *why, size_t len)
{
  static const char *const keys[] = { "op",   "member", "new",
                                      "rate", "force",  "skip_unreadable",
                                      NULL };
  const char *bad = unknown_key (req, keys);
  int64_t v;

  if (bad) {
    snprintf (why, len, "replace: unknown field \"%.100s\"", bad);
    return -1;
  }
  if (json_get_int64 (req, "member", &v, NULL, 0) == -1 || v < 0
      || v >= c->v->nr_members) {
    snprintf (why, len, "replace: \"member\" must be the member's index, "
              "0 to %u", c->v->nr_members - 1);
    return -1;
  }
  p->index = (unsigned) v;
  if (json_get_string (req, "new", &p->new_path, NULL, 0) == -1
      || p->new_path[0] == '\0') {
    snprintf (why, len, "replace: \"new\" must name the new member");
    return -1;
  }
  if (json_has (req, "rate")) {
    if (json_get_int64 (req, "rate", &v, NULL, 0) == -1 || v < 0
        || v == INT64_MAX) {
      snprintf (why, len, "replace: \"rate\" must be bytes a second (0: "
                "as fast as it goes)");
      return -1;
    }
    p->rate = (uint64_t) v;
  }
  if (get_bool (req, "force", &p->force, why, len) == -1
      || get_bool (req, "skip_unreadable", &p->skip_unreadable, why, len)
           == -1)
    return -1;
  return 0;
}

/* A reshape request: kind "grow" (new: the devices), "shrink" (member,
 * size) or "size" (grow --size max); force, dry_run, rate.  Kind
 * "continue" (rate only) is handle's.
 */
static int
reshape_request (struct control *c, struct json_object *req,
                 struct reshape_params *p, const char **paths, char *why,
                 size_t len)
{
  static const char *const keys[] = { "op", "kind", "new", "member", "size",
                                      "force", "dry_run", "rate", NULL };
  static const char *const kinds[] = { "grow", "shrink", "size" };
  struct json_object *x;
  const char *bad = unknown_key (req, keys), *kind = NULL;
  int64_t v;

  if (bad) {
    snprintf (why, len, "reshape: unknown field \"%.100s\"", bad);
    return -1;
  }
  json_get_string (req, "kind", &kind, NULL, 0);
  for (p->kind = RESHAPE_GROW; kind && p->kind <= RESHAPE_SIZE; ++p->kind)
    if (strcmp (kind, kinds[p->kind]) == 0)
      break;
  if (kind == NULL || p->kind > RESHAPE_SIZE) {
    snprintf (why, len, "reshape: \"kind\" must be grow, shrink or size");
    return -1;
  }
  if (p->kind == RESHAPE_GROW) {
    if (json_get_array (req, "new", &x, NULL, 0) == -1
        || json_object_array_length (x) == 0
        || json_object_array_length (x) > LAYOUT_MAX_MEMBERS) {
      snprintf (why, len, "reshape: \"new\" must list the devices to add");
      return -1;
    }
    p->nr_new = json_object_array_length (x);
    for (unsigned k = 0; k < p->nr_new; ++k) {
      struct json_object *e = json_object_array_get_idx (x, k);
      if (!json_object_is_type (e, json_type_string)
          || json_object_get_string_len (e) == 0
          || strlen (json_object_get_string (e))
               != (size_t) json_object_get_string_len (e)) {
        snprintf (why, len, "reshape: \"new\" must list device names");
        return -1;
      }
      paths[k] = json_object_get_string (e);
    }
    p->new_paths = paths;
  }
  if (p->kind == RESHAPE_SHRINK) {
    if (json_get_int64 (req, "member", &v, NULL, 0) == -1 || v < 0
        || v >= c->v->nr_members) {
      snprintf (why, len, "reshape: \"member\" must be the member's index, "
                "0 to %u", c->v->nr_members - 1);
      return -1;
    }
    p->index = (unsigned) v;
    if (json_has (req, "size")
        && json_get_uint64 (req, "size", &p->size, why, len) == -1)
      return -1;
  }
  if (json_has (req, "rate")
      && (json_get_int64 (req, "rate", &v, NULL, 0) == -1 || v < 0
          || v == INT64_MAX)) {
    snprintf (why, len, "reshape: \"rate\" must be bytes a second");
    return -1;
  }
  if (json_has (req, "rate"))
    p->rate = (uint64_t) v;
  if (get_bool (req, "force", &p->force, why, len) == -1
      || get_bool (req, "dry_run", &p->dry_run, why, len) == -1)
    return -1;
  return 0;
}

/* A reshape request with kind "continue": go on with the one paused. */
static bool
continue_request (struct json_object *req)
{
  const char *kind = NULL;

  return json_get_string (req, "kind", &kind, NULL, 0) == 0
         && strcmp (kind, "continue") == 0;
}

/* "status": the live status, or the last job's when health is off. */
static struct json_object *
op_status (struct control *c)
{
  char *text = c->h ? health_status_text (c->h) : NULL;
  struct json_object *st = text ? json_tokener_parse (text) : NULL;
  struct json_object *o;

  free (text);
  o = json_object_new_object ();
  json_put (o, "ok", json_object_new_boolean (true));
  if (st)
    json_put (o, "status", st);
  else {
    struct volume_mover *vm = volume_mover_last (c->v);
    if (vm)
      vm->status (vm, o);
  }
  return o;
}

/* "reshape" with kind "continue": a paused grow or shrink goes on. */
static struct json_object *
op_reshape_continue (struct control *c, struct json_object *req)
{
  static const char *const keys[] = { "op", "kind", "rate", NULL };
  const char *bad = unknown_key (req, keys);
  struct json_object *o;
  int64_t rate = 0;
  char why[1024];

  if (bad) {
    snprintf (why, sizeof why, "reshape: unknown field \"%.100s\"", bad);
    return refusal (why);
  }
  if (json_has (req, "rate")
      && (json_get_int64 (req, "rate", &rate, NULL, 0) == -1 || rate < 0
          || rate == INT64_MAX))
    return refusal ("reshape: \"rate\" must be bytes a second");
  if (reshape_continue (c->v, (uint64_t) rate, why, sizeof why) == 0)
    o = ok_answer ();
  else if (errno == ENOENT || errno == EALREADY) {
    /* Nothing to continue: what there is, for the command to say. */
    o = ok_answer ();
    json_put (o, errno == ENOENT ? "none" : "running",
              json_object_new_boolean (true));
    json_put (o, "why", json_text (why));
  }
  else
    return refusal (why);
  json_put (o, "continued", json_object_new_boolean (!json_has (o, "why")));
  return o;
}

/* "scrub": a patrol read starts. */
static struct json_object *
op_scrub (struct control *c, struct json_object *req)
{
  static const char *const keys[] = { "op", "rate", NULL };
  struct scrub_params p = { .rate = SCRUB_DEFAULT_RATE };
  const char *bad = unknown_key (req, keys);
  int64_t rate;
  char why[1024];

  if (bad) {
    snprintf (why, sizeof why, "scrub: unknown field \"%.100s\"", bad);
    return refusal (why);
  }
  if (json_has (req, "rate")) {
    if (json_get_int64 (req, "rate", &rate, NULL, 0) == -1 || rate < 0
        || rate == INT64_MAX)
      return refusal ("scrub: \"rate\" must be bytes a second (0: as "
                      "fast as it goes)");
    p.rate = (uint64_t) rate;
  }
  if (scrub_start (c->a, &p, why, sizeof why) == -1)
    return refusal (why);
  return ok_answer ();
}

/* "cancel": the replace (default) or the reshape stops. */
static struct json_object *
op_cancel (struct control *c, struct json_object *req)
{
  static const char *const keys[] = { "op", "job", NULL };
  const char *bad = unknown_key (req, keys), *job = "replace";
  char why[1024];

  if (bad) {
    snprintf (why, sizeof why, "cancel: unknown field \"%.100s\"", bad);
    return refusal (why);
  }
  if (json_has (req, "job")
      && (json_get_string (req, "job", &job, NULL, 0) == -1
          || (strcmp (job, "replace") != 0 && strcmp (job, "reshape") != 0)))
    return refusal ("cancel: \"job\" must be replace or reshape");
  if ((strcmp (job, "reshape") == 0 ? reshape_cancel : mover_cancel) (
        c->v, why, sizeof why)
      == -1)
    return refusal (why);
  return ok_answer ();
}

static struct json_object *
handle (struct control *c, struct json_object *req)
{
  struct json_object *o;
  const char *name;
  char why[1024];

  if (json_get_string (req, "op", &name, NULL, 0) == -1)
    return refusal ("the request has no \"op\"");

  if (strcmp (name, "status") == 0)
    return op_status (c);
  if (strcmp (name, "replace") == 0) {
    struct replace_params p = { .config = c->config };
    if (replace_request (c, req, &p, why, sizeof why) == -1
        || replace_start (c->a, &p, why, sizeof why) == -1)
      return refusal (why);
    return ok_answer ();
  }
  if (strcmp (name, "reshape") == 0 && continue_request (req))
    return op_reshape_continue (c, req);
  if (strcmp (name, "reshape") == 0) {
    struct reshape_params p = { .config = c->config };
    const char *paths[LAYOUT_MAX_MEMBERS];
    struct json_object *plan = NULL;
    if (reshape_request (c, req, &p, paths, why, sizeof why) == -1
        || reshape_start (c->v, &p, &plan, why, sizeof why) == -1) {
      json_object_put (plan);
      return refusal (why);
    }
    o = ok_answer ();
    json_put (o, "plan", plan);
    return o;
  }
  if (strcmp (name, "scrub") == 0)
    return op_scrub (c, req);
  if (strcmp (name, "scrub_cancel") == 0) {
    if (scrub_cancel (c->a, why, sizeof why) == -1)
      return refusal (why);
    return ok_answer ();
  }
  if (strcmp (name, "cancel") == 0)
    return op_cancel (c, req);
  if (strcmp (name, "step") == 0 && mover_debug_gate) {
    const char *at = NULL;
    json_get_string (req, "at", &at, NULL, 0);
    if (mover_debug_release (c->v, at, why, sizeof why) == -1)
      return refusal (why);
    return ok_answer ();
  }
  snprintf (why, sizeof why, "unknown op \"%.100s\" (status, replace, "
            "reshape, cancel, scrub, scrub_cancel)", name);
  return refusal (why);
}

/* One client: one request line, one answer line; the whole request
 * within CLIENT_TIMEOUT_MS.
 */
static void
serve_client (struct control *c, int fd)
{
  struct ucred cred;
  socklen_t clen = sizeof cred;
  char *buf = malloc (REQUEST_MAX + 1);
  size_t n = 0;
  struct json_object *req, *ans;
  uint64_t deadline = now_ns () + (uint64_t) CLIENT_TIMEOUT_MS * 1000000;
  struct timeval tv = { CLIENT_TIMEOUT_MS / 1000, 0 };
  char *text;

  if (buf == NULL)
    return;
  (void) setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == -1
      || (cred.uid != 0 && cred.uid != geteuid ())) {
    ans = refusal ("permission denied");
    goto answer;
  }
  for (;;) {
    struct pollfd pfd = { fd, POLLIN, 0 };
    uint64_t now = now_ns ();
    ssize_t r;
    if (now >= deadline
        || poll (&pfd, 1, (int) ((deadline - now) / 1000000) + 1) != 1) {
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
client_main (void *arg)
{
  struct client *cl = arg;
  struct control *c = cl->c;

  serve_client (c, cl->fd);
  pthread_mutex_lock (&c->lock);
  for (struct client **p = &c->clients; *p; p = &(*p)->next)
    if (*p == cl) {
      *p = cl->next;
      break;
    }
  c->nr_clients--;
  close (cl->fd);
  pthread_cond_broadcast (&c->cond);
  pthread_mutex_unlock (&c->lock);
  free (cl);
  return NULL;
}

/* Clients are served each by a thread of its own (detached; control_stop
 * waits for them): one slow client never holds up another, nor the
 * server's shutdown for longer than its current operation.
 */
static void *
control_main (void *arg)
{
  struct control *c = arg;
  pthread_attr_t attr;

  pthread_attr_init (&attr);
  pthread_attr_setdetachstate (&attr, PTHREAD_CREATE_DETACHED);
  for (;;) {
    struct pollfd pfd[2] = { { c->fd, POLLIN, 0 }, { c->stop[0], POLLIN, 0 } };
    struct client *cl;
    int fd;

    if (poll (pfd, 2, -1) == -1) {
      if (errno == EINTR)
        continue;
      stripe_error ("control: poll: %m");
      break;
    }
    if (pfd[1].revents)
      break;
    fd = accept4 (c->fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd == -1)
      continue;
    pthread_mutex_lock (&c->lock);
    cl = c->nr_clients < MAX_CLIENTS ? calloc (1, sizeof *cl) : NULL;
    if (cl) {
      cl->c = c;
      cl->fd = fd;
      cl->next = c->clients;
      c->clients = cl;
      c->nr_clients++;
      if (pthread_create (&cl->thread, &attr, client_main, cl) != 0) {
        c->clients = cl->next;
        c->nr_clients--;
        free (cl);
        cl = NULL;
      }
    }
    pthread_mutex_unlock (&c->lock);
    if (cl == NULL) {
      static const char busy[] =
        "{\"ok\": false, \"error\": \"busy: too many clients\"}\n";
      (void) !send (fd, busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      close (fd);
    }
  }
  pthread_attr_destroy (&attr);
  return NULL;
}

struct control *
control_listen (const char *path, struct array *a)
{
  struct control *c = calloc (1, sizeof *c);
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  struct stat st;
  mode_t old_umask;
  int e;

  if (c == NULL)
    return NULL;
  c->fd = c->stop[0] = c->stop[1] = -1;
  pthread_mutex_init (&c->lock, NULL);
  pthread_cond_init (&c->cond, NULL);
  c->a = a;
  c->v = &a->volume;
  c->h = a->health;
  c->path = strdup (path);
  c->config = a->config_file ? strdup (a->config_file) : NULL;
  if (c->path == NULL || (a->config_file && c->config == NULL))
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
  /* Clients still served: their sockets shut (a read or send waiting on
   * one returns at once), then their threads waited for -- none waits on
   * a client any more, only on what it asked (a replace being started).
   */
  pthread_mutex_lock (&c->lock);
  c->stopping = true;
  for (struct client *cl = c->clients; cl; cl = cl->next)
    shutdown (cl->fd, SHUT_RDWR);
  while (c->nr_clients > 0)
    pthread_cond_wait (&c->cond, &c->lock);
  pthread_mutex_unlock (&c->lock);
  pthread_mutex_destroy (&c->lock);
  pthread_cond_destroy (&c->cond);
  close (c->fd);
  close (c->stop[0]);
  close (c->stop[1]);
  unlink (c->path);
  free (c->path);
  free (c->config);
  free (c);
}
