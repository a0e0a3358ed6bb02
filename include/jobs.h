/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: which jobs of a served volume may run at the same time.
 *
 * The jobs: a replace (one member's bytes onto a new device), the
 * automatic replace onto a spare (health's on_failing, the same job
 * started by the server), a grow, a shrink, a grow --size max (the three
 * restripes) and a scrub (the patrol read).  Every path that starts one
 * asks job_may_start with the jobs under way; a refusal names the job
 * under way and how far it is ("grow refused: a grow is under way (3 ->
 * 4 members, 41% done)").
 *
 * The table (jobs.c) is the one place the rules are written; what they
 * rest on:
 * - the replaces and the restripes move data through the volume's one
 *   job slot (mover.h): each changes where bytes are, and neither knows
 *   how to follow the other's change, so no two of them overlap (two
 *   restripes never; a replace waits for a grow or shrink, paused or
 *   not, to end);
 * - a scrub only reads, each member's bytes, and maps an unreadable one
 *   to the volume's bytes through the view a read of it takes when it is
 *   found (a restripe's position splits the volume into the part in the
 *   new layout and the rest in the old), so it may run with any of them,
 *   started before or after; one scrub at a time.
 *
 * A refusal is for now (errno EAGAIN): the job under way ends.
 */
#ifndef NBDSTRIPE_JOBS_H
#define NBDSTRIPE_JOBS_H

#include <stdbool.h>
#include <stddef.h>

enum job_kind {
  JOB_REPLACE,
  JOB_SPARE, /* the automatic replace onto a spare */
  JOB_GROW,
  JOB_SHRINK,
  JOB_SIZE, /* grow --size max */
  JOB_SCRUB,
  JOB_KINDS
};

/* One job under way, as a refusal names it. */
struct job_running {
  enum job_kind kind;
  char what[128];   /* "a grow"; "a grow, paused half-way" */
  char detail[256]; /* "3 -> 4 members, 41% done" */
  bool paused;      /* stopped half-way, it stays until it goes on */
};

/* Every job under way on a volume (at most one in the job slot, one
 * scrub, and one being started).
 */
#define JOBS_MAX 3
struct jobs_running {
  unsigned nr;
  struct job_running job[JOBS_MAX];
};

/* "replace", "replace onto a spare", "grow", "shrink", "grow --size",
 * "scrub".
 */
extern const char *job_name (enum job_kind kind);

/* Whether a job of kind starting may run while one of kind running is. */
extern bool job_may_overlap (enum job_kind running, enum job_kind starting);

/* 0 when a job of kind may start beside every job in r; -1 with why
 * naming the first one it may not run with (errno EAGAIN).
 */
extern int job_may_start (enum job_kind kind, const struct jobs_running *r,
                          char *why, size_t len);

/* Append a job to r (nothing when r is full). */
extern void jobs_add (struct jobs_running *r, enum job_kind kind, bool paused,
                      const char *what, const char *detail);

#endif /* NBDSTRIPE_JOBS_H */
