/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the on_change program.  Each event, once the status file
 * shows it, goes to the hook thread, which runs PROGRAM EVENT VOLUME
 * INDEX PATH with the NBDSTRIPE_* environment, one at a time and in
 * order, killed (as a process group) past on_change_timeout.  Never in
 * the I/O path.
 */

#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "health_impl.h"
#include "log.h"

extern char **environ;

/* Hand the first n pending events (those the status file just written
 * shows) to the hook thread; later ones wait for the next write.
 */
void
health_hand_events_to_hook (struct health *h, unsigned n)
{
  if (h->pending_overflow) {
    stripe_warning ("health: more than %d state changes at once: some "
                    "on_change events were dropped",
                    MAX_EVENTS);
    h->pending_overflow = false;
  }
  if (n > h->nr_pending)
    n = h->nr_pending;
  for (unsigned k = 0; k < n; ++k) {
    if (h->p.on_change == NULL) {
      health_event_clear (&h->pending[k]);
      continue;
    }
    if (h->hook_len == MAX_EVENTS) {
      stripe_warning ("health: on_change is behind by %d events: dropping "
                      "%s for member %u",
                      MAX_EVENTS, health_event_name (&h->pending[k]),
                      h->pending[k].member);
      health_event_clear (&h->pending[k]);
      continue;
    }
    h->hookq[(h->hook_head + h->hook_len++) % MAX_EVENTS] = h->pending[k];
  }
  memmove (h->pending, h->pending + n,
           (h->nr_pending - n) * sizeof h->pending[0]);
  h->nr_pending -= n;
  pthread_cond_signal (&h->hook_cond);
}

/* The hook's environment in envp (room for 256 + 9): ours without the
 * NBDSTRIPE_ variables, then the event's, malloc'd into vars (the
 * caller frees them).  -1 when out of memory.
 */
static int
hook_env (struct health *h, const struct event *e, const char *path, int nvars,
          char *vars[8], char **envp)
{
  const char *event = health_event_name (e);
  int n = 0;

  if (asprintf (&vars[0], "NBDSTRIPE_EVENT=%s", event) < 0
      || asprintf (&vars[1], "NBDSTRIPE_VOLUME=%s", h->p.name) < 0
      || asprintf (&vars[2], "NBDSTRIPE_MEMBER=%u", e->member) < 0
      || asprintf (&vars[3], "NBDSTRIPE_MEMBER_PATH=%s", path) < 0
      || asprintf (&vars[4], "NBDSTRIPE_STATE=%s",
                   health_state_names[e->state])
           < 0
      || asprintf (&vars[5], "NBDSTRIPE_REASON=%s", e->reason) < 0
      || (nvars > 6
          && (asprintf (&vars[6], "NBDSTRIPE_OLD_PATH=%s",
                        e->old_path ? e->old_path : "")
                < 0
              || asprintf (&vars[7], "NBDSTRIPE_NEW_PATH=%s",
                           e->new_path ? e->new_path : "")
                   < 0)))
    return -1;
  for (char **p = environ; p && *p && n < 256; ++p)
    if (strncmp (*p, "NBDSTRIPE_", 10) != 0)
      envp[n++] = *p;
  for (int k = 0; k < nvars; ++k)
    envp[n++] = vars[k];
  envp[n] = NULL;
  return 0;
}

/* Start the hook with stdin on /dev/null, in a process group of its own
 * (a timeout kills it whole), no signal blocked and every one at its
 * default.  0, or posix_spawn's error.
 */
static int
hook_spawn (struct health *h, const char **argv, char **envp, pid_t *pid)
{
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  int r;

  posix_spawn_file_actions_init (&fa);
  posix_spawn_file_actions_addopen (&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_init (&attr);
  posix_spawnattr_setflags (&attr, POSIX_SPAWN_SETPGROUP
                                     | POSIX_SPAWN_SETSIGMASK
                                     | POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup (&attr, 0);
  {
    sigset_t none, all;
    sigemptyset (&none);
    sigfillset (&all);
    posix_spawnattr_setsigmask (&attr, &none);
    posix_spawnattr_setsigdefault (&attr, &all);
  }
  r =
    posix_spawn (pid, h->p.on_change, &fa, &attr, (char *const *) argv, envp);
  posix_spawn_file_actions_destroy (&fa);
  posix_spawnattr_destroy (&attr);
  return r;
}

/* Wait for the hook at most on_change_timeout, then kill its group, and
 * reap it (*status: waitpid's).  True when it was killed for the
 * timeout.
 */
static bool
hook_wait (struct health *h, pid_t pid, int *status)
{
  bool timed_out = false;
  int r, pidfd = pidfd_open (pid, 0);

  if (pidfd >= 0) {
    struct pollfd pfd = { .fd = pidfd, .events = POLLIN };
    int ms = h->p.set.on_change_timeout * 1000;
    uint64_t end = health_now_ns () + (uint64_t) ms * 1000000;
    for (;;) {
      r = poll (&pfd, 1, ms);
      if (r > 0)
        break;
      if (r == 0 || (r == -1 && errno != EINTR)) {
        timed_out = true;
        break;
      }
      uint64_t now = health_now_ns ();
      ms = now >= end ? 0 : (end - now) / 1000000;
    }
    close (pidfd);
  }
  if (timed_out) {
    kill (-pid, SIGKILL);
    kill (pid, SIGKILL);
  }
  while (waitpid (pid, status, 0) == -1 && errno == EINTR)
    ;
  return timed_out;
}

/* Run PROGRAM EVENT VOLUME INDEX PATH, bounded by on_change_timeout.
 * A replace event's PATH is the member's device it is about (the old
 * one), NBDSTRIPE_OLD_PATH and NBDSTRIPE_NEW_PATH (the spare; "" when
 * none was found) beside it.  The member's path is read under the lock
 * (a replace changes it).
 */
static void
run_hook (struct health *h, const struct event *e)
{
  const char *event = health_event_name (e);
  char *path = NULL;
  char index[16], *envp[256 + 10];
  char *vars[8] = { NULL };
  int nvars = e->kind == EV_STATE ? 6 : 8;
  const char *argv[6];
  pid_t pid;
  int r, status = 0;
  bool timed_out;

  if (e->kind != EV_STATE)
    path = strdup (e->old_path ? e->old_path : "");
  else {
    pthread_mutex_lock (&h->lock);
    path = strdup (h->m[e->member].path);
    pthread_mutex_unlock (&h->lock);
  }
  if (path == NULL) {
    stripe_error ("health: on_change: out of memory");
    return;
  }
  snprintf (index, sizeof index, "%u", e->member);
  argv[0] = h->p.on_change;
  argv[1] = event;
  argv[2] = h->p.name;
  argv[3] = index;
  argv[4] = path;
  argv[5] = NULL;
  if (hook_env (h, e, path, nvars, vars, envp) == -1) {
    stripe_error ("health: on_change: out of memory");
    goto out;
  }

  r = hook_spawn (h, argv, envp, &pid);
  if (r != 0) {
    errno = r;
    stripe_error ("health: on_change %s %s %s %s %s: %m", h->p.on_change,
                  event, h->p.name, index, path);
    goto out;
  }

  timed_out = hook_wait (h, pid, &status);
  if (timed_out)
    stripe_error ("health: on_change %s %s %s %s %s: killed after %u s",
                  h->p.on_change, event, h->p.name, index, path,
                  h->p.set.on_change_timeout);
  else if (WIFEXITED (status) && WEXITSTATUS (status) != 0)
    stripe_error ("health: on_change %s %s %s %s %s: exit status %d",
                  h->p.on_change, event, h->p.name, index, path,
                  WEXITSTATUS (status));
  else if (WIFSIGNALED (status))
    stripe_error ("health: on_change %s %s %s %s %s: killed by signal %d",
                  h->p.on_change, event, h->p.name, index, path,
                  WTERMSIG (status));
  else
    stripe_debug ("health: on_change %s %s %s %s %s: done", h->p.on_change,
                  event, h->p.name, index, path);
out:
  for (int k = 0; k < 8; ++k)
    free (vars[k]);
  free (path);
}

void *
health_hook_main (void *arg)
{
  struct health *h = arg;

  pthread_mutex_lock (&h->lock);
  for (;;) {
    while (h->hook_len == 0 && !h->hook_stop)
      pthread_cond_wait (&h->hook_cond, &h->lock);
    if (h->hook_len == 0)
      break; /* stopping and nothing left */
    struct event e = h->hookq[h->hook_head];
    h->hook_head = (h->hook_head + 1) % MAX_EVENTS;
    h->hook_len--;
    pthread_mutex_unlock (&h->lock);
    run_hook (h, &e);
    health_event_clear (&e);
    pthread_mutex_lock (&h->lock);
  }
  pthread_mutex_unlock (&h->lock);
  return NULL;
}
