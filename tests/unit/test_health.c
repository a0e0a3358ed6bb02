/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe unit tests: the health rules (plugin/health/health.c), without its
 * threads: operations are recorded as the I/O path records them, and one
 * tick's decisions are run with health_tick at a chosen time.  The
 * states, thresholds and quantiles asserted are those of
 * include/health.h.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <json-c/json.h>

#include "drive.h"
#include "health.h"
#include "health_impl.h" /* health_build_prom */
#include "unit_main.h"

#define MS 1000000ull
#define US 1000ull
#define SEC 1000000000ull

static const char *const paths[] = { "/dev/m0", "/dev/m1", "/dev/m2",
                                     "/dev/m3" };

static struct health *
new_health_floor (unsigned n, unsigned window, unsigned min_samples,
                  unsigned error_threshold, unsigned io_timeout,
                  unsigned slow_floor_us)
{
  struct health_params p = {
    .name = "t",
    .size = 1 << 30,
    .chunk = 65536,
    .set = {
      .interval = 5,
      .window = window,
      .min_samples = min_samples,
      .slow_factor = 4.0,
      .slow_floor_us = slow_floor_us,
      .error_threshold = error_threshold,
      .io_timeout = io_timeout,
      .probe_interval = 2,
      .on_change_timeout = 10,
    },
  };
  struct health *h = health_new (&p, n, paths, NULL);
  assert_non_null (h);
  return h;
}

/* The same with the default floor of the slow verdict. */
static struct health *
new_health (unsigned n, unsigned window, unsigned min_samples,
            unsigned error_threshold, unsigned io_timeout)
{
  return new_health_floor (n, window, min_samples, error_threshold, io_timeout,
                           HEALTH_DEFAULT_SLOW_FLOOR_US);
}

static void
record_n (struct health *h, unsigned i, enum op_kind op, uint64_t bytes,
          uint64_t ns, unsigned n)
{
  for (unsigned k = 0; k < n; ++k)
    health_record (h, i, op, bytes, ns, 0, k * bytes);
}

static void
assert_near (double got, double want, double rel)
{
  if (!(fabs (got - want) <= rel * want)) {
    fprintf (stderr, "got %g, want %g +/- %g%%\n", got, want, rel * 100);
    fail ();
  }
}

static void
latency_quantiles_are_within_7_percent_of_the_truth (void **state
                                                     __attribute__ ((unused)))
{
  static const uint64_t values[] = { 1 * US,   83 * US, 2 * MS,      7 * MS,
                                     333 * MS, 1 * SEC, 5 * US + 123 };
  for (size_t k = 0; k < sizeof values / sizeof values[0]; ++k) {
    struct health *h = new_health (2, 10, 20, 8, 30);
    record_n (h, 0, OP_READ, 4096, values[k], 100);
    health_tick (h, health_now_ns ());
    assert_near (health_quantile_us (h, 0, OP_READ, 0.5, true),
                 values[k] / 1000.0, 0.07);
    assert_near (health_quantile_us (h, 0, OP_READ, 0.5, false),
                 values[k] / 1000.0, 0.07);
    assert_true (isnan (health_quantile_us (h, 1, OP_READ, 0.5, true)));
    health_free (h);
  }

  /* 98% at 100 us, 2% at 10 ms: p50 is the first, p99 the second. */
  struct health *h = new_health (2, 10, 20, 8, 30);
  record_n (h, 0, OP_WRITE, 65536, 100 * US, 980);
  record_n (h, 0, OP_WRITE, 65536, 10 * MS, 20);
  health_tick (h, health_now_ns ());
  assert_near (health_quantile_us (h, 0, OP_WRITE, 0.5, true), 100, 0.07);
  assert_near (health_quantile_us (h, 0, OP_WRITE, 0.99, true), 10000, 0.07);
  health_free (h);
}

/* One request: its p50 and p99 are its latency, not its bucket's
 * middle (issue #16: one flush showed p50 = p99 above the real value, one
 * trim a p50 above the sum).
 */
static void
one_sample_quantiles_are_the_sample_itself (void **state
                                            __attribute__ ((unused)))
{
  static const uint64_t values[] = {
    0, 1, 7, 8, 9, 1000, 17 * US + 1, 131072, 131073, 3 * MS + 999, 200 * SEC
  };
  for (size_t k = 0; k < sizeof values / sizeof values[0]; ++k) {
    struct health *h = new_health (2, 10, 20, 8, 30);
    double want = values[k] / 1000.0;

    health_record (h, 0, OP_FLUSH, 0, values[k], 0, 0);
    health_tick (h, health_now_ns ());
    for (int w = 0; w < 2; ++w) {
      double p50 = health_quantile_us (h, 0, OP_FLUSH, 0.5, w);
      double p99 = health_quantile_us (h, 0, OP_FLUSH, 0.99, w);
      if (fabs (p50 - want) > 1e-9 * want || fabs (p99 - want) > 1e-9 * want) {
        fprintf (stderr, "%" PRIu64 " ns (%s): p50 %.6f us, p99 %.6f us\n",
                 values[k], w ? "window" : "total", p50, p99);
        fail ();
      }
    }
    health_free (h);
  }
}

/* Samples all alike: every quantile is their value.  Otherwise a
 * quantile is within the bucket of the true one: within 12.5% of it
 * (beyond 2^37 ns, where the last bucket has no upper edge, between the
 * smallest and largest sample).
 */
static void
quantiles_exact_for_alike_samples_within_a_bucket_otherwise (
  void **state __attribute__ ((unused)))
{
  static const uint64_t alike[] = { 3, 4097, 100 * US + 1, 7 * MS, 150 * SEC };
  static const uint64_t sets[][4] = {
    { 100 * US, 100 * US + 1, 101 * US, 102 * US },
    { 65537, 65537, 65537, 73000 }, /* one bucket: (65536, 73728] */
    { 1 * US, 1 * US, 1 * US, 50 * MS },
    { 9 * US, 10 * MS, 10 * MS, 10 * MS },
    { 9 * US, 20 * US, 30 * US, 40 * US },
    { 129 * SEC, 130 * SEC, 140 * SEC, 200 * SEC }, /* the last bucket */
  };
  static const double qs[] = { 0.01, 0.25, 0.5, 0.75, 0.99, 1.0 };

  for (size_t k = 0; k < sizeof alike / sizeof alike[0]; ++k) {
    struct health *h = new_health (2, 10, 20, 8, 30);
    double want = alike[k] / 1000.0;

    record_n (h, 0, OP_WRITE, 4096, alike[k], 50);
    health_tick (h, health_now_ns ());
    for (size_t q = 0; q < sizeof qs / sizeof qs[0]; ++q)
      for (int w = 0; w < 2; ++w) {
        double v = health_quantile_us (h, 0, OP_WRITE, qs[q], w);
        if (fabs (v - want) > 1e-9 * want) {
          fprintf (stderr, "50 x %" PRIu64 " ns, q %g: %.6f us\n", alike[k],
                   qs[q], v);
          fail ();
        }
      }
    health_free (h);
  }
  for (size_t k = 0; k < sizeof sets / sizeof sets[0]; ++k) {
    struct health *h = new_health (2, 10, 20, 8, 30);

    for (int j = 0; j < 4; ++j)
      health_record (h, 0, OP_READ, 4096, sets[k][j], 0, 0);
    health_tick (h, health_now_ns ());
    for (size_t q = 0; q < sizeof qs / sizeof qs[0]; ++q)
      for (int w = 0; w < 2; ++w) {
        double v = health_quantile_us (h, 0, OP_READ, qs[q], w);
        int r = (int) ceil (qs[q] * 4);
        double truth = sets[k][(r ? r : 1) - 1] / 1000.0;
        bool last = sets[k][0] >= 129 * SEC; /* unbounded: their mean */
        if (last ? !(v >= sets[k][0] / 1000.0 && v <= sets[k][3] / 1000.0)
                 : !(fabs (v - truth) <= 0.125 * truth)) {
          fprintf (stderr, "set %zu, q %g: %.6f us, truth %.6f us\n", k, qs[q],
                   v, truth);
          fail ();
        }
      }
    health_free (h);
  }
}

/* The whole file as a string (the caller frees it). */
static char *
slurp (const char *path)
{
  FILE *fp = fopen (path, "r");
  char *buf;
  long n;

  assert_non_null (fp);
  assert_int_equal (fseek (fp, 0, SEEK_END), 0);
  n = ftell (fp);
  rewind (fp);
  buf = calloc (1, n + 1);
  assert_non_null (buf);
  assert_int_equal (fread (buf, 1, n, fp), (size_t) n);
  fclose (fp);
  return buf;
}

static void
assert_line (const char *text, const char *line)
{
  char want[512];
  const char *p;

  snprintf (want, sizeof want, "\n%s\n", line);
  p = strstr (text, want);
  if (p == NULL) {
    fprintf (stderr, "no line: %s\n-- file:\n%s", line, text);
    fail ();
  }
}

/* Counts at the le bounds are exact (a latency of exactly 2^17 ns is
 * counted at le = 2^17 ns, one of 2^17 + 1 ns at the next), cumulative,
 * +Inf = _count; flushes are counted with no bytes counter; the last
 * write, once stopped, says up 0 and claims no state.
 */
static void
prometheus_file_histograms_exact_at_le_and_down_once_stopped (
  void **state __attribute__ ((unused)))
{
  char dir[] = "/tmp/nbdstripe-health-test-XXXXXX", prom[64], status[64];
  struct health_params p = {
    .name = "t",
    .size = 1 << 30,
    .chunk = 65536,
    .prometheus_file = prom,
    .status_file = status,
    .set = health_defaults (),
  };
  struct health *h;
  char *text, *js;

  assert_non_null (mkdtemp (dir));
  snprintf (prom, sizeof prom, "%s/m.prom", dir);
  snprintf (status, sizeof status, "%s/s.json", dir);
  h = health_new (&p, 2, paths, NULL);
  assert_non_null (h);
  for (int k = 0; k < 3; ++k)
    health_record (h, 0, OP_READ, 4096, 131072, 0, 0);
  for (int k = 0; k < 2; ++k)
    health_record (h, 0, OP_READ, 4096, 131073, 0, 0);
  health_record (h, 0, OP_READ, 4096, 100 * SEC, 0, 0);
  health_record (h, 0, OP_READ, 4096, 1 * MS, EIO, 0); /* not timed */
  for (int k = 0; k < 4; ++k)
    health_record (h, 1, OP_FLUSH, 0, 5 * US, 0, 0);
  assert_int_equal (health_start (h), 0);
  assert_true (health_free (h)); /* the last write */

  text = slurp (prom);
  assert_true (text[0] == '#');
  assert_line (text, "nbdstripe_up{volume=\"t\"} 0");
#define RB                                                                    \
  "nbdstripe_member_read_latency_seconds_bucket{volume=\"t\",member=\"0\","
  assert_line (text, RB "le=\"1.024e-06\"} 0");
  assert_line (text, RB "le=\"6.5536e-05\"} 0");
  assert_line (text, RB "le=\"0.000131072\"} 3");
  assert_line (text, RB "le=\"0.000262144\"} 5");
  assert_line (text, RB "le=\"68.719476736\"} 5");
  assert_line (text, RB "le=\"+Inf\"} 6");
#undef RB
  assert_line (text,
               "nbdstripe_member_read_latency_seconds_count{volume=\"t\","
               "member=\"0\"} 6");
  assert_line (text, "nbdstripe_member_read_latency_seconds_sum{volume=\"t\","
                     "member=\"0\"} 100.000655362");
  assert_line (text, "nbdstripe_member_read_requests_total{volume=\"t\","
                     "member=\"0\"} 7");
  assert_line (text, "nbdstripe_member_read_errors_total{volume=\"t\","
                     "member=\"0\"} 1");
  assert_line (text, "nbdstripe_member_flush_requests_total{volume=\"t\","
                     "member=\"1\"} 4");
  assert_line (text, "nbdstripe_member_flush_latency_seconds_count{volume="
                     "\"t\",member=\"1\"} 4");
  assert_line (text, "nbdstripe_member_flush_latency_seconds_bucket{volume="
                     "\"t\",member=\"1\",le=\"8.192e-06\"} 4");
  assert_line (text, "nbdstripe_member_flush_latency_seconds_bucket{volume="
                     "\"t\",member=\"1\",le=\"4.096e-06\"} 0");
  assert_null (strstr (text, "flush_bytes"));
  assert_null (strstr (text, "quantile"));
  assert_line (text, "# TYPE nbdstripe_member_read_latency_seconds histogram");
  for (const char *l = text; (l = strstr (l, "_state{")) != NULL; ++l)
    assert_true (strncmp (strchr (l, '}'), "} 0\n", 4) == 0);
  {
    /* Every bucket line of a series at most the next one. */
    uint64_t prev = 0;
    const char *l = text;
    char series[256] = "";
    while ((l = strstr (l, "_bucket{")) != NULL) {
      const char *le = strstr (l, ",le=");
      uint64_t v = strtoull (strchr (l, '}') + 2, NULL, 10);
      if (strlen (series) != (size_t) (le - l)
          || strncmp (series, l, le - l)) {
        snprintf (series, sizeof series, "%.*s", (int) (le - l), l);
        prev = 0;
      }
      assert_true (v >= prev);
      prev = v;
      l = le;
    }
  }
  js = slurp (status);
  assert_non_null (strstr (js, "\"running\": false"));
  free (js);
  free (text);
  unlink (prom);
  unlink (status);
  rmdir (dir);
}

static void
errors_below_threshold_make_member_failing_and_a_success_resets_the_run (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 4, 30);

  assert_int_equal (health_member_state (h, 1), MS_OK);
  for (int k = 0; k < 3; ++k)
    health_record (h, 1, OP_READ, 4096, 10 * US, EIO, 0);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  assert_int_equal (health_member_state (h, 0), MS_OK);

  health_record (h, 1, OP_READ, 4096, 10 * US, 0, 0); /* run reset */
  for (int k = 0; k < 3; ++k)
    health_record (h, 1, OP_WRITE, 4096, 10 * US, EIO, 0);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  health_record (h, 1, OP_WRITE, 4096, 10 * US, EIO, 0); /* 4 in a row */
  assert_int_equal (health_member_state (h, 1), MS_FAILED);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

static void
device_gone_errors_fail_the_member_at_once (void **state
                                            __attribute__ ((unused)))
{
  static const int gone[] = { ENODEV, ENXIO, ESHUTDOWN, ENOTCONN };

  for (size_t k = 0; k < sizeof gone / sizeof gone[0]; ++k) {
    struct health *h = new_health (2, 10, 20, 8, 30);
    health_record (h, 0, OP_READ, 4096, 10 * US, gone[k], 0);
    assert_int_equal (health_member_state (h, 0), MS_FAILED);
    assert_int_equal (health_member_state (h, 1), MS_OK);
    health_free (h);
  }
}

static void
eopnotsupp_is_not_an_error (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 1, 30);

  for (int k = 0; k < 10; ++k)
    health_record (h, 0, OP_ZERO, 65536, 10 * US, EOPNOTSUPP, 0);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

static void
failing_member_is_ok_again_after_a_window_without_error (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();

  health_record (h, 0, OP_READ, 4096, 10 * US, EIO, 0);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  health_tick (h, t + 1 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  health_tick (h, t + 4 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

/* A client's bad request says nothing about the drive: however many,
 * they change no state (they are still counted as failed requests).
 */
static void
client_errors_never_change_a_members_state (void **state
                                            __attribute__ ((unused)))
{
  static const int errs[] = { EINVAL, ENOMEM, EPERM, EACCES, EFBIG,
                              EOVERFLOW };
  struct health *h = new_health (2, 3, 20, 4, 30);

  for (size_t e = 0; e < sizeof errs / sizeof errs[0]; ++e)
    for (int k = 0; k < 20; ++k)
      health_record (h, 1, OP_WRITE, 4096, 10 * US, errs[e], 0);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  /* ... nor do they break a run of real errors, or make one. */
  for (int k = 0; k < 3; ++k)
    health_record (h, 1, OP_READ, 4096, 10 * US, EIO, 0);
  health_record (h, 1, OP_READ, 4096, 10 * US, EINVAL, 0);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  health_record (h, 1, OP_READ, 4096, 10 * US, EIO, 0); /* 4 in a row */
  assert_int_equal (health_member_state (h, 1), MS_FAILED);
  health_free (h);
}

/* ENOSPC: "full", a warning; a real error is still worse; back to ok
 * after a window without it.
 */
static void
out_of_space_makes_a_member_full_not_failed (void **state
                                             __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 4, 30);
  uint64_t t = health_now_ns ();

  for (int k = 0; k < 50; ++k)
    health_record (h, 0, OP_WRITE, 4096, 10 * US, ENOSPC, 0);
  assert_int_equal (health_member_state (h, 0), MS_FULL);
  health_record (h, 0, OP_WRITE, 4096, 10 * US, EDQUOT, 0);
  assert_int_equal (health_member_state (h, 0), MS_FULL);
  health_tick (h, t + 1 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FULL);
  health_tick (h, t + 4 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_OK);

  /* An I/O error on a full member: failing. */
  health_record (h, 1, OP_WRITE, 4096, 10 * US, ENOSPC, 0);
  health_record (h, 1, OP_READ, 4096, 10 * US, EIO, 0);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  health_free (h);
}

/* A drive that turns itself read-only (a worn SSD) is failing. */
static void
erofs_from_a_member_counts_as_its_error (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 4, 30);

  health_record (h, 0, OP_WRITE, 4096, 10 * US, EROFS, 0);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  health_free (h);
}

/* The signature of an SSD out of SLC cache: 5x its peers' latency. */
static void
member_five_times_slower_than_its_peers_is_slow_and_peers_stay_ok (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (4, 10, 20, 8, 30);

  for (unsigned i = 0; i < 4; ++i)
    record_n (h, i, OP_READ, 65536, i == 2 ? 10 * MS : 2 * MS, 30);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 2), MS_SLOW);
  for (unsigned i = 0; i < 4; ++i)
    if (i != 2)
      assert_int_equal (health_member_state (h, i), MS_OK);
  health_free (h);
}

static void
three_times_slower_is_not_slow_with_factor_4 (void **state
                                              __attribute__ ((unused)))
{
  struct health *h = new_health (3, 10, 20, 8, 30);

  for (unsigned i = 0; i < 3; ++i)
    record_n (h, i, OP_WRITE, 4096, i == 0 ? 6 * MS : 2 * MS, 50);
  health_tick (h, health_now_ns ());
  for (unsigned i = 0; i < 3; ++i)
    assert_int_equal (health_member_state (h, i), MS_OK);
  health_free (h);
}

static void
no_latency_verdict_below_min_samples (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 8, 30);

  record_n (h, 0, OP_READ, 4096, 50 * MS, 19);
  record_n (h, 1, OP_READ, 4096, 1 * MS, 100);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 0), MS_OK);
  record_n (h, 0, OP_READ, 4096, 50 * MS, 1);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 0), MS_SLOW);
  health_free (h);
}

/* Page-cache hits are microseconds: 10x of almost nothing is no verdict. */
static void
latency_below_the_floor_is_never_slow (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 8, 30);

  record_n (h, 0, OP_READ, 4096, 50 * US, 100);
  record_n (h, 1, OP_READ, 4096, 5 * US, 100);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

/* Issue 34: on a busy host a member was called slow at a median of
 * 124 us against its peers' 24 us -- 5x, but what the host's scheduling
 * adds, not what its drive does.  Below the default floor (1 ms) no
 * ratio is a verdict.
 */
static void
member_at_124us_against_peers_at_24us_is_not_slow_under_the_default_floor (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (3, 10, 20, 8, 30);

  record_n (h, 0, OP_READ, 4096, 124 * US, 100);
  record_n (h, 1, OP_READ, 4096, 24 * US, 100);
  record_n (h, 2, OP_READ, 4096, 24 * US, 100);
  health_tick (h, health_now_ns ());
  for (unsigned i = 0; i < 3; ++i)
    assert_int_equal (health_member_state (h, i), MS_OK);
  health_free (h);
}

/* The same figures with slow_floor_us lowered to 100: the ratio
 * decides, and 5x is slow.
 */
static void
member_at_124us_against_peers_at_24us_is_slow_with_a_100us_floor (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health_floor (3, 10, 20, 8, 30, 100);

  record_n (h, 0, OP_READ, 4096, 124 * US, 100);
  record_n (h, 1, OP_READ, 4096, 24 * US, 100);
  record_n (h, 2, OP_READ, 4096, 24 * US, 100);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 0), MS_SLOW);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  assert_int_equal (health_member_state (h, 2), MS_OK);
  health_free (h);
}

/* Only requests of the same kind and size class are compared. */
static void
large_requests_are_not_compared_with_small_ones (void **state
                                                 __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 8, 30);

  record_n (h, 0, OP_READ, 1 << 20, 20 * MS, 100);
  record_n (h, 1, OP_READ, 4096, 1 * MS, 100);
  record_n (h, 0, OP_WRITE, 4096, 30 * MS, 100);
  record_n (h, 1, OP_READ, 4096, 1 * MS, 100);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 0), MS_OK);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  health_free (h);
}

static void
slow_member_is_ok_again_once_the_window_has_moved_on (void **state
                                                      __attribute__ ((unused)))
{
  /* window 2 s: snapshots every second, the window is the last two. */
  struct health *h = new_health (2, 2, 20, 8, 30);
  uint64_t t = health_now_ns ();

  record_n (h, 0, OP_READ, 65536, 10 * MS, 30);
  record_n (h, 1, OP_READ, 65536, 1 * MS, 30);
  health_tick (h, t);
  assert_int_equal (health_member_state (h, 0), MS_SLOW);
  for (int s = 1; s <= 3; ++s) {
    record_n (h, 0, OP_READ, 65536, 1 * MS, 30);
    record_n (h, 1, OP_READ, 65536, 1 * MS, 30);
    health_tick (h, t + s * SEC);
  }
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

static void
idle_slow_member_keeps_its_state (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 2, 20, 8, 30);
  uint64_t t = health_now_ns ();

  record_n (h, 0, OP_READ, 65536, 10 * MS, 30);
  record_n (h, 1, OP_READ, 65536, 1 * MS, 30);
  health_tick (h, t);
  assert_int_equal (health_member_state (h, 0), MS_SLOW);
  for (int s = 1; s <= 5; ++s)
    health_tick (h, t + s * SEC);
  assert_int_equal (health_member_state (h, 0), MS_SLOW);
  health_free (h);
}

static void
request_unanswered_past_io_timeout_fails_only_the_members_owing_it (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (3, 10, 20, 8, 2);
  uint64_t t = health_now_ns ();
  _Atomic uint64_t *busy = health_io_begin (h, t);

  assert_non_null (busy);
  atomic_fetch_or (busy, UINT64_C (1) << 1);
  health_tick (h, t + 1 * SEC);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  health_tick (h, t + 3 * SEC);
  assert_int_equal (health_member_state (h, 1), MS_FAILED);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  assert_int_equal (health_member_state (h, 2), MS_OK);
  health_io_end (h);
  health_free (h);

  /* io_timeout = 0: never. */
  h = new_health (3, 10, 20, 8, 0);
  assert_null (health_io_begin (h, health_now_ns ()));
  health_free (h);
}

/* A network round trip is not a slow drive: NBD members are compared
 * with NBD members only.
 */
static void
members_are_compared_only_with_peers_of_their_class (void **state
                                                     __attribute__ ((unused)))
{
  static const unsigned classes[] = { 0, 0, 1, 1 };
  struct health_params p = {
    .name = "t",
    .set = {
      .window = 10,
      .min_samples = 20,
      .slow_factor = 4.0,
      .error_threshold = 8,
      .io_timeout = 30,
    },
    .member_class = classes,
  };
  struct health *h = health_new (&p, 4, paths, NULL);

  assert_non_null (h);
  /* Local members at 200 us, NBD members at 2 ms: nobody is slow. */
  record_n (h, 0, OP_READ, 4096, 200 * US, 50);
  record_n (h, 1, OP_READ, 4096, 200 * US, 50);
  record_n (h, 2, OP_READ, 4096, 2 * MS, 50);
  record_n (h, 3, OP_READ, 4096, 2 * MS, 50);
  health_tick (h, health_now_ns ());
  for (unsigned i = 0; i < 4; ++i)
    assert_int_equal (health_member_state (h, i), MS_OK);
  /* One NBD member 10x its NBD peer: slow. */
  record_n (h, 3, OP_READ, 4096, 40 * MS, 200);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 3), MS_SLOW);
  assert_int_equal (health_member_state (h, 2), MS_OK);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

/* An NVMe reading: spare, its threshold, percentage used, critical
 * warning, media errors, data units written.
 */
static struct drive_health
nvme_reading (unsigned spare, unsigned threshold, unsigned used,
              unsigned warning, unsigned media_errors, unsigned units)
{
  uint8_t page[512] = { 0 };
  struct drive_health d;

  page[0] = warning;
  page[1] = 0x34; /* 308 K */
  page[2] = 0x01;
  page[3] = spare;
  page[4] = threshold;
  page[5] = used;
  page[48] = units & 0xff;
  page[49] = units >> 8;
  page[160] = media_errors;
  drive_health_init (&d);
  snprintf (d.device, sizeof d.device, "/dev/nvme0n1");
  assert_int_equal (drive_nvme_decode (page, sizeof page, &d), 0);
  return d;
}

/* The status as JSON, and member i's object in it (parse_status frees). */
static struct json_object *
status_member (struct health *h, unsigned i, struct json_object **root)
{
  char *text = health_status_text (h);
  struct json_object *members, *m;

  assert_non_null (text);
  *root = json_tokener_parse (text);
  free (text);
  assert_non_null (*root);
  assert_true (json_object_object_get_ex (*root, "members", &members));
  m = json_object_array_get_idx (members, i);
  assert_non_null (m);
  return m;
}

static const char *
member_text (struct json_object *m, const char *key)
{
  struct json_object *v;
  assert_true (json_object_object_get_ex (m, key, &v));
  return json_object_get_string (v);
}

/* The example: the reason says it, the member is failing as long
 * as the drive says so -- a window without I/O errors does not clear it
 * -- and ok again once the drive no longer does.
 */
static void
drive_predicting_failure_makes_the_member_failing_until_it_no_longer_does (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();
  struct drive_health d = nvme_reading (100, 10, 3, 0, 0, 1000);
  struct json_object *root, *m, *drive, *v;

  health_drive_record (h, 0, &d, t);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  d = nvme_reading (8, 10, 3, 0x01, 0, 1200);
  health_drive_record (h, 0, &d, t + 1 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  m = status_member (h, 0, &root);
  assert_string_equal (member_text (m, "state"), "failing");
  assert_string_equal (member_text (m, "reason"),
                       "predicted: available spare 8% < threshold 10%");
  assert_true (json_object_object_get_ex (m, "drive", &drive));
  assert_true (json_object_object_get_ex (drive, "available", &v)
               && json_object_get_boolean (v));
  assert_string_equal (member_text (drive, "predicts_failure"),
                       "predicted: available spare 8% < threshold 10%");
  assert_true (json_object_object_get_ex (drive, "available_spare", &v)
               && json_object_get_int64 (v) == 8);
  json_object_put (root);

  health_tick (h, t + 60 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  d = nvme_reading (100, 10, 3, 0, 0, 1300);
  health_drive_record (h, 0, &d, t + 61 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  health_free (h);
}

/* I/O errors on a member whose drive predicts a failure: failing for the
 * errors, and once they have expired, for the drive again.
 */
static void
io_errors_expiring_leave_the_member_failing_for_its_drive (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();
  struct drive_health d = nvme_reading (100, 10, 3, 0x04, 0, 1000);
  struct json_object *root, *m;

  health_drive_record (h, 1, &d, t);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  health_record (h, 1, OP_READ, 4096, 10 * US, EIO, 8192);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  m = status_member (h, 1, &root);
  assert_non_null (strstr (member_text (m, "reason"), "I/O error"));
  json_object_put (root);
  health_tick (h, health_now_ns () + 4 * SEC);
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  m = status_member (h, 1, &root);
  assert_string_equal (member_text (m, "reason"),
                       "predicted: critical warning 0x04: "
                       "reliability_degraded");
  json_object_put (root);
  health_free (h);
}

/* A reading that fails (asleep, a command refused) says nothing: the
 * verdict stands, the status says why and keeps the last figures.
 */
static void
drive_reading_that_fails_keeps_the_verdict_and_the_last_figures (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();
  struct drive_health d = nvme_reading (100, 10, 3, 0, 2, 1000), bad;
  struct json_object *root, *m, *drive, *v;

  health_drive_record (h, 0, &d, t);
  d = nvme_reading (100, 10, 3, 0, 4, 1000);
  health_drive_record (h, 0, &d, t + SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  drive_health_init (&bad);
  snprintf (bad.reason, sizeof bad.reason, "/dev/nvme0n1: timed out");
  health_drive_record (h, 0, &bad, t + 2 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  m = status_member (h, 0, &root);
  assert_string_equal (member_text (m, "reason"),
                       "predicted: media and data integrity errors grew "
                       "from 2 to 4");
  assert_true (json_object_object_get_ex (m, "drive", &drive));
  assert_true (json_object_object_get_ex (drive, "available", &v)
               && !json_object_get_boolean (v));
  assert_string_equal (member_text (drive, "reason"),
                       "/dev/nvme0n1: timed out");
  assert_true (json_object_object_get_ex (drive, "media_errors", &v)
               && json_object_get_int64 (v) == 4);
  json_object_put (root);
  health_free (h);
}

/* A replaced member is another drive: its verdict and figures go. */
static void
replaced_member_forgets_its_old_drive (void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  struct drive_health d = nvme_reading (5, 10, 3, 0, 0, 1000);
  struct json_object *root, *m, *drive;

  health_drive_record (h, 1, &d, health_now_ns ());
  assert_int_equal (health_member_state (h, 1), MS_FAILING);
  health_member_replaced (h, 1, "/dev/nvme2n1");
  assert_int_equal (health_member_state (h, 1), MS_OK);
  health_tick (h, health_now_ns ());
  assert_int_equal (health_member_state (h, 1), MS_OK);
  m = status_member (h, 1, &root);
  assert_true (json_object_object_get_ex (m, "drive", &drive));
  /* Not read since (no poller here: drive_interval is 0). */
  assert_string_equal (member_text (drive, "reason"),
                       "not read (health.drive_interval is 0)");
  json_object_put (root);
  health_free (h);
}

/* The write rate over the readings, and the endurance at it: 30% used
 * after 3e12 bytes is 1e13 rated; 1e9 bytes written in 100 s is 1e7
 * B/s, so 7e12 bytes left take 7e5 s.
 */
static void
wear_estimate_uses_the_write_rate_between_readings (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (1, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();
  struct drive_health d = nvme_reading (100, 10, 30, 0, 0, 0);
  struct json_object *root, *m, *drive, *wear, *v;

  d.data_written_bytes = INT64_C (3000000000000) - INT64_C (1000000000);
  health_drive_record (h, 0, &d, t);
  d.data_written_bytes = INT64_C (3000000000000);
  health_drive_record (h, 0, &d, t + 100 * SEC);
  m = status_member (h, 0, &root);
  assert_true (json_object_object_get_ex (m, "drive", &drive));
  assert_true (json_object_object_get_ex (drive, "wear", &wear));
  assert_true (json_object_object_get_ex (wear, "write_rate_bytes_per_second",
                                          &v));
  assert_true (fabs (json_object_get_double (v) - 1e7) < 1);
  assert_true (json_object_object_get_ex (wear, "rated_endurance_bytes", &v));
  assert_true (fabs (json_object_get_double (v) - 1e13) < 1);
  assert_true (
    json_object_object_get_ex (wear, "seconds_to_rated_endurance", &v));
  assert_true (fabs (json_object_get_double (v) - 7e5) < 1);
  assert_string_equal (member_text (wear, "estimate"), "estimated");
  json_object_put (root);
  health_free (h);
}

/* A scrub's finding keeps a member failing like its drive's prediction,
 * both said together; each lifted on its own.
 */
static void
scrub_finding_and_drive_prediction_keep_the_member_failing_together (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 3, 20, 8, 30);
  uint64_t t = health_now_ns ();
  struct drive_health d = nvme_reading (8, 10, 3, 0, 0, 1000);
  struct json_object *root, *m;

  health_scrub_result (h, 0, "scrub: 4096 unreadable bytes in 1 place");
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  health_drive_record (h, 0, &d, t);
  m = status_member (h, 0, &root);
  assert_string_equal (member_text (m, "reason"),
                       "predicted: available spare 8% < threshold 10%; "
                       "scrub: 4096 unreadable bytes in 1 place");
  json_object_put (root);
  d = nvme_reading (100, 10, 3, 0, 0, 1100);
  health_drive_record (h, 0, &d, t + SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  m = status_member (h, 0, &root);
  assert_string_equal (member_text (m, "reason"),
                       "scrub: 4096 unreadable bytes in 1 place");
  json_object_put (root);
  health_tick (h, health_now_ns () + 60 * SEC);
  assert_int_equal (health_member_state (h, 0), MS_FAILING);
  health_scrub_result (h, 0, NULL);
  assert_int_equal (health_member_state (h, 0), MS_OK);
  /* Nothing found on a member with nothing to lift: no change. */
  health_scrub_result (h, 1, NULL);
  assert_int_equal (health_member_state (h, 1), MS_OK);
  health_free (h);
}

/* Prometheus's naming rules, which promtool enforces: a counter's name
 * ends in _total, a gauge's never does; each metric has one TYPE, given
 * before its first sample; every sample belongs to a metric so typed
 * (a histogram's by its _bucket, _sum and _count).  Checked on a text
 * with every section there is: members with counters and histograms, a
 * drive reading, and a replace, a reshape, spares and a scrub in the
 * status's extra objects, as health_status.c passes them.
 */
static void
prometheus_names_follow_the_rules_in_every_section (
  void **state __attribute__ ((unused)))
{
  struct health *h = new_health (2, 10, 20, 8, 30);
  struct drive_health d = nvme_reading (100, 10, 3, 0, 0, 1000);
  struct json_object *extra;
  char *text, *line, *save = NULL;
  char typed[64][128], kinds[64][16];
  size_t len, n = 0;
  unsigned counters = 0, gauges = 0, histograms = 0;

  health_record (h, 0, OP_READ, 4096, 131072, 0, 0);
  health_record (h, 1, OP_WRITE, 4096, 131072, 0, 0);
  health_drive_record (h, 0, &d, health_now_ns ());
  extra = json_tokener_parse (
    "{\"replace\": {\"state\": \"copying\", \"member\": 1, "
    "\"bytes_copied\": 1, \"bytes_total\": 2, \"rate\": 3, "
    "\"eta_seconds\": 4},"
    " \"reshape\": {\"state\": \"paused\", \"kind\": \"grow\", "
    "\"bytes_copied\": 1, \"bytes_total\": 2, \"rate\": 3, "
    "\"eta_seconds\": 4, \"members_from\": 2, \"members_to\": 3},"
    " \"spares\": [{\"path\": \"/dev/s0\", \"usable\": true}],"
    " \"scrub\": {\"state\": \"running\", \"bytes_read\": 1, "
    "\"bytes_total\": 2, \"finished_unix\": 5, \"members\": "
    "[{\"unreadable_bytes\": 0}, {\"unreadable_bytes\": 512}]}}");
  assert_non_null (extra);
  text = health_build_prom (h, true, 1e9, extra, &len);
  assert_non_null (text);

  for (line = strtok_r (text, "\n", &save); line;
       line = strtok_r (NULL, "\n", &save)) {
    char name[128], kind[16];
    size_t k, nl;

    if (sscanf (line, "# TYPE %127s %15s", name, kind) == 2) {
      nl = strlen (name);
      for (k = 0; k < n; ++k)
        if (strcmp (typed[k], name) == 0)
          fail_msg ("%s: TYPE given twice", name);
      if (strcmp (kind, "counter") == 0) {
        counters++;
        if (nl < 6 || strcmp (name + nl - 6, "_total") != 0)
          fail_msg ("counter %s: its name does not end in _total", name);
      }
      else if (strcmp (kind, "gauge") == 0) {
        gauges++;
        if (nl >= 6 && strcmp (name + nl - 6, "_total") == 0)
          fail_msg ("gauge %s: its name ends in _total", name);
      }
      else if (strcmp (kind, "histogram") == 0)
        histograms++;
      else
        fail_msg ("%s: unexpected type %s", name, kind);
      assert_true (n < 64);
      strcpy (typed[n], name);
      strcpy (kinds[n], kind);
      n++;
      continue;
    }
    if (line[0] == '#')
      continue;
    nl = strcspn (line, "{ ");
    for (k = 0; k < n; ++k) {
      size_t tl = strlen (typed[k]);
      const char *suffix = line + tl;

      if (strncmp (line, typed[k], tl) != 0)
        continue;
      if (tl == nl)
        break;
      if (strcmp (kinds[k], "histogram") == 0
          && ((nl == tl + 7 && strncmp (suffix, "_bucket", 7) == 0)
              || (nl == tl + 4 && strncmp (suffix, "_sum", 4) == 0)
              || (nl == tl + 6 && strncmp (suffix, "_count", 6) == 0)))
        break;
    }
    if (k == n)
      fail_msg ("sample with no TYPE before it: %s", line);
  }
  /* Every kind of section was there to be checked. */
  assert_true (counters > 0 && gauges > 0 && histograms > 0);
  free (text);
  text = health_build_prom (h, true, 1e9, extra, &len);
  assert_non_null (strstr (text, "nbdstripe_replace_bytes_copied{"));
  assert_non_null (strstr (text, "nbdstripe_reshape_paused{"));
  assert_non_null (strstr (text, "nbdstripe_spares{"));
  assert_non_null (strstr (text, "nbdstripe_scrub_bytes_read{"));
  assert_non_null (strstr (text, "nbdstripe_member_drive_"));
  free (text);
  json_object_put (extra);
  health_free (h);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (latency_quantiles_are_within_7_percent_of_the_truth),
    cmocka_unit_test (one_sample_quantiles_are_the_sample_itself),
    cmocka_unit_test (
      quantiles_exact_for_alike_samples_within_a_bucket_otherwise),
    cmocka_unit_test (
      prometheus_file_histograms_exact_at_le_and_down_once_stopped),
    cmocka_unit_test (
      errors_below_threshold_make_member_failing_and_a_success_resets_the_run),
    cmocka_unit_test (device_gone_errors_fail_the_member_at_once),
    cmocka_unit_test (eopnotsupp_is_not_an_error),
    cmocka_unit_test (failing_member_is_ok_again_after_a_window_without_error),
    cmocka_unit_test (client_errors_never_change_a_members_state),
    cmocka_unit_test (out_of_space_makes_a_member_full_not_failed),
    cmocka_unit_test (erofs_from_a_member_counts_as_its_error),
    cmocka_unit_test (
      member_five_times_slower_than_its_peers_is_slow_and_peers_stay_ok),
    cmocka_unit_test (three_times_slower_is_not_slow_with_factor_4),
    cmocka_unit_test (no_latency_verdict_below_min_samples),
    cmocka_unit_test (latency_below_the_floor_is_never_slow),
    cmocka_unit_test (
      member_at_124us_against_peers_at_24us_is_not_slow_under_the_default_floor),
    cmocka_unit_test (
      member_at_124us_against_peers_at_24us_is_slow_with_a_100us_floor),
    cmocka_unit_test (large_requests_are_not_compared_with_small_ones),
    cmocka_unit_test (slow_member_is_ok_again_once_the_window_has_moved_on),
    cmocka_unit_test (idle_slow_member_keeps_its_state),
    cmocka_unit_test (
      request_unanswered_past_io_timeout_fails_only_the_members_owing_it),
    cmocka_unit_test (members_are_compared_only_with_peers_of_their_class),
    cmocka_unit_test (
      drive_predicting_failure_makes_the_member_failing_until_it_no_longer_does),
    cmocka_unit_test (
      io_errors_expiring_leave_the_member_failing_for_its_drive),
    cmocka_unit_test (
      drive_reading_that_fails_keeps_the_verdict_and_the_last_figures),
    cmocka_unit_test (replaced_member_forgets_its_old_drive),
    cmocka_unit_test (wear_estimate_uses_the_write_rate_between_readings),
    cmocka_unit_test (
      scrub_finding_and_drive_prediction_keep_the_member_failing_together),
    cmocka_unit_test (prometheus_names_follow_the_rules_in_every_section),
  };

  return run_unit_tests ("health", tests, sizeof tests / sizeof tests[0], argc,
                         argv);
}
