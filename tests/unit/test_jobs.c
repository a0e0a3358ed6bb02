/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: which jobs may run at the same time
 * (plugin/core/jobs.c, include/jobs.h).
 *
 * The table against the rule it writes down, stated here apart from it:
 * of two jobs, they may overlap exactly when one of them is a scrub and
 * the other is not (the jobs that move data share one slot; a scrub reads
 * beside any of them; one scrub at a time).  Then the refusal's words: it
 * names the job under way, how far it is, and whether it must end first.
 */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "jobs.h"
#include "unit_main.h"

static const enum job_kind moving[] = { JOB_REPLACE, JOB_SPARE, JOB_GROW,
                                        JOB_SHRINK, JOB_SIZE };
#define NR_MOVING (sizeof moving / sizeof moving[0])

static struct jobs_running
one (enum job_kind kind, bool paused, const char *what, const char *detail)
{
  struct jobs_running r = { 0 };

  jobs_add (&r, kind, paused, what, detail);
  return r;
}

static void
no_two_jobs_that_move_data_overlap (void **state)
{
  char why[512];

  (void) state;
  for (unsigned a = 0; a < NR_MOVING; ++a)
    for (unsigned b = 0; b < NR_MOVING; ++b) {
      struct jobs_running r = one (moving[a], false, "a job", "1% done");
      assert_false (job_may_overlap (moving[a], moving[b]));
      errno = 0;
      assert_int_equal (job_may_start (moving[b], &r, why, sizeof why), -1);
      assert_int_equal (errno, EAGAIN);
    }
}

static void
a_scrub_overlaps_every_job_that_moves_data_either_way (void **state)
{
  char why[512];

  (void) state;
  for (unsigned a = 0; a < NR_MOVING; ++a) {
    struct jobs_running r = one (moving[a], false, "a job", "1% done");
    struct jobs_running s = one (JOB_SCRUB, false, "a scrub", "1% done");
    assert_true (job_may_overlap (moving[a], JOB_SCRUB));
    assert_true (job_may_overlap (JOB_SCRUB, moving[a]));
    assert_int_equal (job_may_start (JOB_SCRUB, &r, why, sizeof why), 0);
    assert_int_equal (job_may_start (moving[a], &s, why, sizeof why), 0);
  }
}

static void
one_scrub_at_a_time (void **state)
{
  struct jobs_running r = one (JOB_SCRUB, false, "a scrub", "12% done");
  char why[512];

  (void) state;
  assert_false (job_may_overlap (JOB_SCRUB, JOB_SCRUB));
  assert_int_equal (job_may_start (JOB_SCRUB, &r, why, sizeof why), -1);
  assert_string_equal (why, "scrub refused: a scrub is under way (12% done)");
}

static void
nothing_under_way_refuses_nothing (void **state)
{
  struct jobs_running r = { 0 };
  char why[512];

  (void) state;
  for (enum job_kind k = 0; k < JOB_KINDS; ++k) {
    assert_int_equal (job_may_start (k, &r, why, sizeof why), 0);
    assert_int_equal (job_may_start (k, NULL, why, sizeof why), 0);
  }
}

static void
refusal_names_the_job_under_way_and_how_far_it_is (void **state)
{
  struct jobs_running r =
    one (JOB_GROW, false, "a grow", "3 -> 4 members, 41% done");
  char why[512];

  (void) state;
  assert_int_equal (job_may_start (JOB_REPLACE, &r, why, sizeof why), -1);
  assert_string_equal (why, "replace refused: a grow is under way (3 -> 4 "
                            "members, 41% done)");
  assert_int_equal (job_may_start (JOB_SPARE, &r, why, sizeof why), -1);
  assert_string_equal (why, "replace onto a spare refused: a grow is under "
                            "way (3 -> 4 members, 41% done)");
}

static void
paused_job_must_end_first (void **state)
{
  struct jobs_running r = one (JOB_SHRINK, true, "a shrink, paused half-way",
                               "3 -> 2 members, 20% done");
  char why[512];

  (void) state;
  assert_int_equal (job_may_start (JOB_GROW, &r, why, sizeof why), -1);
  assert_string_equal (why, "grow refused: a shrink, paused half-way must "
                            "end first (3 -> 2 members, 20% done)");
}

static void
refusal_names_the_job_it_may_not_run_with_not_the_scrub (void **state)
{
  struct jobs_running r = one (JOB_SCRUB, false, "a scrub", "5% done");
  char why[512];

  (void) state;
  jobs_add (&r, JOB_REPLACE, false, "a replace of member 1", "60% done");
  assert_int_equal (job_may_start (JOB_SIZE, &r, why, sizeof why), -1);
  assert_string_equal (why, "grow --size refused: a replace of member 1 is "
                            "under way (60% done)");
}

static void
every_kind_has_a_name (void **state)
{
  (void) state;
  for (enum job_kind a = 0; a < JOB_KINDS; ++a)
    for (enum job_kind b = 0; b < JOB_KINDS; ++b)
      if (a != b)
        assert_string_not_equal (job_name (a), job_name (b));
  assert_string_equal (job_name (JOB_SCRUB), "scrub");
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (no_two_jobs_that_move_data_overlap),
    cmocka_unit_test (a_scrub_overlaps_every_job_that_moves_data_either_way),
    cmocka_unit_test (one_scrub_at_a_time),
    cmocka_unit_test (nothing_under_way_refuses_nothing),
    cmocka_unit_test (refusal_names_the_job_under_way_and_how_far_it_is),
    cmocka_unit_test (paused_job_must_end_first),
    cmocka_unit_test (refusal_names_the_job_it_may_not_run_with_not_the_scrub),
    cmocka_unit_test (every_kind_has_a_name),
  };

  return run_unit_tests ("jobs", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
