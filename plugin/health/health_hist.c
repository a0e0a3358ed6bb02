/* SPDX-License-Identifier: BSD-3-Clause */
/* nbdstripe: per-member health, the latency histograms read: bucket
 * edges, quantiles, one operation's histogram of all sizes.  See
 * health_impl.h for the buckets.
 */

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "health_impl.h"

/* The width of bucket b in ns (nominal, for the last one). */
static double
bucket_width (unsigned b)
{
  if (b < SUB)
    return 1;
  return (double) (1ull << (b / SUB - 1));
}

double
health_bucket_lo (unsigned b)
{
  if (b < SUB)
    return b;
  return (SUB + b % SUB) * bucket_width (b);
}

double
health_bucket_hi (unsigned b)
{
  if (b >= NBUCKETS - 1)
    return INFINITY; /* everything slower lands there too */
  return health_bucket_lo (b) + bucket_width (b);
}

/* Quantile q of a histogram, in ns; NAN when empty.
 *
 * It is the rank-th smallest sample (rank = ceil (q * count)), somewhere
 * in its bucket k.  Without the sum of the samples (sum < 0) the answer
 * is placed in the bucket as if its samples were spread evenly.  With
 * it, the answer is the mean of bucket k's samples, their sum being what
 * the other samples leave of sum as far as their buckets' edges tell:
 * exact when all the samples are in bucket k, so that one sample reads
 * as itself (p50 = p99 = the sum) and samples all alike as their value.
 * Then the order statistics bound it: the rank - 1 samples below weigh
 * at least their lower edges and the count - rank + 1 from it up at
 * least itself, so it is at most (sum - those edges) / (count - rank +
 * 1); likewise at least (sum - the upper edges of those above) / rank.
 * A sum that does not fit the buckets (read while requests were being
 * recorded) is ignored.  The answer is always within bucket k: within
 * 12.5% of the true quantile.
 */
double
health_quantile_ns (const uint64_t *b, double q, double sum, uint64_t *count)
{
  uint64_t total = 0, before = 0, rank;
  double lo, hi, below = 0, above = 0, olo = 0, ohi = 0, smin, smax, est;
  double upper, lower;
  unsigned k;

  for (unsigned i = 0; i < NBUCKETS; ++i)
    total += b[i];
  if (count)
    *count = total;
  if (total == 0)
    return NAN;
  rank = (uint64_t) ceil (q * total);
  if (rank == 0)
    rank = 1;
  if (rank > total)
    rank = total;
  for (k = 0; before + b[k] < rank; ++k)
    before += b[k];
  lo = health_bucket_lo (k);
  hi = health_bucket_hi (k); /* INFINITY for the last bucket */
  if (sum < 0)
    return lo + bucket_width (k) * ((double) (rank - before) - 0.5) / b[k];

  for (unsigned i = 0; i < NBUCKETS; ++i) {
    if (i == k || b[i] == 0)
      continue;
    olo += b[i] * health_bucket_lo (i);
    ohi += b[i] * health_bucket_hi (i);
    if (i < k)
      below += b[i] * health_bucket_lo (i);
    else
      above += b[i] * health_bucket_hi (i);
  }
  smin = fmax (b[k] * lo, sum - ohi);
  smax = fmin (b[k] * hi, sum - olo);
  if (smin > smax)
    return lo + bucket_width (k) / 2; /* the sum does not fit */
  est = (smin + smax) / 2 / b[k];

  below += (rank - 1 - before) * lo;
  if (before + b[k] > rank)
    above += (before + b[k] - rank) * hi;
  upper = fmin (hi, (sum - below) / (double) (total - rank + 1));
  lower = fmax (lo, (sum - above) / (double) rank); /* lo when above = inf */
  if (lower <= upper)
    est = fmin (fmax (est, lower), upper);
  return est;
}

/* The histogram of one operation, all sizes. */
void
health_op_hist (uint64_t out[NBUCKETS], uint64_t *sum,
                const struct hist_set *hs, enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] += hs->b[op][s][b];
  if (sum)
    *sum = hs->sum[op];
}

void
health_op_hist_live (uint64_t out[NBUCKETS], uint64_t *sum,
                     struct member_health *m, enum op_kind op)
{
  memset (out, 0, NBUCKETS * sizeof *out);
  for (unsigned s = 0; s < NSIZES; ++s)
    for (unsigned b = 0; b < NBUCKETS; ++b)
      out[b] +=
        atomic_load_explicit (&m->hist[op][s][b], memory_order_relaxed);
  if (sum)
    *sum = atomic_load_explicit (&m->lat_ns[op], memory_order_relaxed);
}

double
health_quantile_us (struct health *h, unsigned i, enum op_kind op, double q,
                    bool window)
{
  uint64_t hb[NBUCKETS], sum;
  double r;

  pthread_mutex_lock (&h->lock);
  if (window)
    health_op_hist (hb, &sum, h->m[i].win, op);
  else
    health_op_hist_live (hb, &sum, &h->m[i], op);
  r = health_quantile_ns (hb, q, (double) sum, NULL) / 1000;
  pthread_mutex_unlock (&h->lock);
  return r;
}
