/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: which jobs may run at the same time.  See include/jobs.h,
 * which says why the table is as it is.
 */

#include <errno.h>
#include <stdio.h>

#include "jobs.h"

/* Tables, laid out as tables. */
/* clang-format off */
static const char *const names[JOB_KINDS] = {
  [JOB_REPLACE] = "replace",
  [JOB_SPARE]   = "replace onto a spare",
  [JOB_GROW]    = "grow",
  [JOB_SHRINK]  = "shrink",
  [JOB_SIZE]    = "grow --size",
  [JOB_SCRUB]   = "scrub",
};

/* may[running][starting]: 1 where the second may start while the first
 * runs.  The moving jobs share the one job slot; a scrub reads beside
 * any of them.
 */
#define Y 1
#define N 0
static const unsigned char may[JOB_KINDS][JOB_KINDS] = {
  /* running \ starting: replace spare grow shrink size scrub */
  [JOB_REPLACE] = {        N,    N,   N,     N,   N,    Y },
  [JOB_SPARE]   = {        N,    N,   N,     N,   N,    Y },
  [JOB_GROW]    = {        N,    N,   N,     N,   N,    Y },
  [JOB_SHRINK]  = {        N,    N,   N,     N,   N,    Y },
  [JOB_SIZE]    = {        N,    N,   N,     N,   N,    Y },
  [JOB_SCRUB]   = {        Y,    Y,   Y,     Y,   Y,    N },
};
#undef Y
#undef N
/* clang-format on */

const char *
job_name (enum job_kind kind)
{
  return kind < JOB_KINDS ? names[kind] : "job";
}

bool
job_may_overlap (enum job_kind running, enum job_kind starting)
{
  return running < JOB_KINDS && starting < JOB_KINDS && may[running][starting];
}

int
job_may_start (enum job_kind kind, const struct jobs_running *r, char *why,
               size_t len)
{
  for (unsigned k = 0; r && k < r->nr; ++k) {
    const struct job_running *j = &r->job[k];
    if (job_may_overlap (j->kind, kind))
      continue;
    snprintf (why, len, "%s refused: %s %s (%s)", job_name (kind), j->what,
              j->paused ? "must end first" : "is under way", j->detail);
    errno = EAGAIN;
    return -1;
  }
  return 0;
}

void
jobs_add (struct jobs_running *r, enum job_kind kind, bool paused,
          const char *what, const char *detail)
{
  struct job_running *j;

  if (r->nr == JOBS_MAX)
    return;
  j = &r->job[r->nr++];
  j->kind = kind;
  j->paused = paused;
  snprintf (j->what, sizeof j->what, "%s", what);
  snprintf (j->detail, sizeof j->detail, "%s", detail);
}
