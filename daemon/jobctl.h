/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: the one client of a served volume's jobs (replace, grow,
 * shrink, scrub), through its control socket (control.h): a job is
 * started and said to be, followed with its progress to its end and
 * concluded, or cancelled.  What differs from one job to another is a
 * struct jobctl_kind; the options, the offline paths, dry runs and config
 * checks stay with each command.  A job run here (--offline) is shown as
 * a served one is: jobctl_show, or jobctl_follow with j->local.
 */
#ifndef NBDSTRIPE_DAEMON_JOBCTL_H
#define NBDSTRIPE_DAEMON_JOBCTL_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "config.h"

/* What a command that follows a job says, and what its --json prints at
 * the end.  Zeroed to start; o->last released by the command.
 */
struct outcome {
  bool json;
  bool quiet;               /* with json, errors go only in the JSON
                               (grow, shrink) */
  bool lines;               /* with json, the job followed: JSON Lines */
  char err[1024];           /* why it failed, "" */
  struct json_object *last; /* the last job object seen, or NULL */
};

/* An error: on stderr (unless json and quiet), and kept in o->err for
 * --json.
 */
extern void outcome_fail (struct outcome *o, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

/* o->last becomes a reference to job (or NULL); the one it held is
 * dropped.
 */
extern void outcome_keep (struct outcome *o, struct json_object *job);

struct jobctl;
struct volume;

/* One kind of job: what is asked of the server, what its answers are
 * read for, and the words the command has for it.  The server's answers
 * are untrusted: read with json.h's lenient getters.
 */
struct jobctl_kind {
  const char *name;  /* in messages: "replace", "scrub", "grow", "shrink" */
  const char *key;   /* its object in a status answer */
  bool absent_empty; /* a status without it: an empty object, kept and
                        shown (grow, shrink); else skipped */
  const char *cancel_op;  /* the request that cancels it: its op, */
  const char *cancel_job; /* and its "job" (NULL: none) */

  /* The server unreachable: after "PATH: ", printf formats of the
   * reason (%s), asking to start it and to cancel it.
   */
  const char *unserved, *unserved_cancel;
  /* The server gone while it is followed: after "the server went away
   * during the NAME", a printf format of the reason (%s, may be unused).
   */
  const char *gone;

  /* The states it is under way in (NULL-ended): any other ends it. */
  const char *const *under_way;

  /* Its progress: a bar redrawn on stderr when it is a terminal (with
   * the ETA when eta); else, on stdout, a line "NAME: progress" at every
   * 5% of done_key (its bytes done, of bytes_total) and at least every
   * JOBCTL_EVERY_SECONDS -- with --json, one object a line (JSON Lines).
   */
  const char *(*progress) (struct json_object *job, char *buf, size_t len);
  const char *done_key;
  bool eta;

  /* The server took the start request (its answer ans): what the command
   * says of it.
   */
  void (*started) (struct jobctl *j, struct json_object *ans);
  /* Its end, in words: the exit status (0: it did what it was asked). */
  int (*conclude) (struct jobctl *j, struct json_object *job);
  /* The server took the cancel request: the exit status.  NULL: "NAME of
   * volume 'VOLUME' cancelled", 0.
   */
  int (*cancelled) (struct jobctl *j);
};

/* A pipe hears of a job at least this often, however slow it is. */
#define JOBCTL_EVERY_SECONDS 10

/* One job of one volume, followed by one command. */
struct jobctl {
  const struct jobctl_kind *kind;
  const struct stripe_config *cfg;
  const char *volume; /* VOLUME as given, for "nbdstripe status VOLUME" */
  struct outcome *o;
  void *cmd;            /* the command's own, for the kind's functions */
  bool wait;            /* follow it to its end */
  bool started;         /* the server took the start */
  bool waited;          /* it was followed */
  bool tty;             /* stdout and stderr terminals: a bar */
  int last_pct;         /* the progress last shown, */
  double last_shown;    /* and when (CLOCK_MONOTONIC seconds) */
  char ctl[4096];       /* the control socket */
  struct volume *local; /* or the volume, opened here (--offline) */
};

/* A job of kind for cfg's volume; o and cmd stay the caller's. */
extern void jobctl_init (struct jobctl *j, const struct jobctl_kind *kind,
                         const struct stripe_config *cfg, const char *volume,
                         struct outcome *o, void *cmd);

/* req (taken) to the control socket: the answer if the server said ok,
 * else NULL, the error said: the server unreachable (unserved, a printf
 * format of the reason, unless it is not to be trusted) or its refusal
 * (after what).
 */
extern struct json_object *jobctl_ask (struct jobctl *j,
                                       struct json_object *req,
                                       const char *what, const char *unserved);

/* The job's object in a status answer (timeout_ms as control_ask's): 0
 * and a new reference in *out (NULL when there is none, unless
 * absent_empty), or -1 with why when the server did not answer.
 */
extern int jobctl_status (struct jobctl *j, int timeout_ms,
                          struct json_object **out, char *why, size_t whylen);

/* The job as it is now, kept in o->last (without waiting long). */
extern void jobctl_peek (struct jobctl *j);

/* Show the progress of job (a status's object); whether it has ended. */
extern bool jobctl_show (struct jobctl *j, struct json_object *job);

/* Ask the server to start the job (req, taken), say it started, and with
 * j->wait follow it to its end.  The exit status: 1 when it did not
 * start.
 */
extern int jobctl_start (struct jobctl *j, struct json_object *req);

/* Follow the running job with its progress to its end, concluded.  The
 * exit status (1 when the server went away).
 */
extern int jobctl_follow (struct jobctl *j);

/* Ask the server to cancel the job.  The exit status. */
extern int jobctl_cancel (struct jobctl *j);

#endif /* NBDSTRIPE_DAEMON_JOBCTL_H */
