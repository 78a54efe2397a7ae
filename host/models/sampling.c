/* sampling.c - the repetition penalty, no-repeat n-grams, the sampling
 * warpers and the seeded sampler of generate(do_sample=True), each written
 * after its transformers class (generation/logits_process.py), in float32
 * where torch computes in float32 so that the kept tokens are the same.
 */
#include "sampling.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void clf__gen_penalize(const clf__gen_params *p, const int64_t *ids, size_t n, float *s, size_t V,
                       clf__scored *tmp) {
  if (p->repetition_penalty != 1.0) {
    /* gather, then scatter: a token is penalized once however often it occurs */
    const float pen = (float)p->repetition_penalty;
    for (size_t i = 0; i < n; i++)
      if (ids[i] >= 0 && (uint64_t)ids[i] < V) tmp[ids[i]].i = 0;
    for (size_t i = 0; i < n; i++) {
      if (ids[i] < 0 || (uint64_t)ids[i] >= V || tmp[ids[i]].i) continue;
      float *x = &s[ids[i]];
      *x = *x < 0 ? *x * pen : *x / pen;
      tmp[ids[i]].i = 1;
    }
  }
  const size_t N = p->no_repeat_ngram;
  if (N == 0 || n + 1 < N) return;
  /* every earlier n-gram whose first N - 1 tokens are the row's last N - 1 bans its last token */
  for (size_t i = 0; i + N <= n; i++) {
    size_t k = 0;
    while (k + 1 < N && ids[i + k] == ids[n - (N - 1) + k]) k++;
    const int64_t t = ids[i + N - 1];
    if (k + 1 == N && t >= 0 && (uint64_t)t < V) s[t] = -INFINITY;
  }
}

/* torch.sort (not stable) on the CPU is libstdc++'s std::sort of (value,
 * index) pairs compared by value: the order of tied scores, which decides
 * which of them top-p and min-p drop, is that of its introsort, reproduced
 * here step for step (median-of-three pivot, unguarded partition, ranges
 * of 16 left to a final insertion sort).  up: ascending, else descending. */
static int before(const clf__scored *a, const clf__scored *b, int up) { return up ? a->v < b->v : a->v > b->v; }

static void swap_at(clf__scored *a, clf__scored *b) {
  const clf__scored t = *a;
  *a = *b, *b = t;
}

static void median_to_first(clf__scored *r, clf__scored *a, clf__scored *b, clf__scored *c, int up) {
  if (before(a, b, up)) {
    if (before(b, c, up)) swap_at(r, b);
    else if (before(a, c, up)) swap_at(r, c);
    else swap_at(r, a);
  } else if (before(a, c, up)) swap_at(r, a);
  else if (before(b, c, up)) swap_at(r, c);
  else swap_at(r, b);
}

static void introsort(clf__scored *first, clf__scored *last, int up) {
  while (last - first > 16) {
    median_to_first(first, first + 1, first + (last - first) / 2, last - 1, up);
    clf__scored *lo = first + 1, *hi = last;
    for (;;) {
      while (before(lo, first, up)) lo++;
      hi--;
      while (before(first, hi, up)) hi--;
      if (!(lo < hi)) break;
      swap_at(lo, hi);
      lo++;
    }
    introsort(lo, last, up);
    last = lo;
  }
}

static void insert_back(clf__scored *i, int up) {
  const clf__scored val = *i;
  while (before(&val, i - 1, up)) *i = i[-1], i--;
  *i = val;
}

static void std_sort(clf__scored *a, size_t n, int up) {
  /* the depth limit of libstdc++ (2 log2 n, then heapsort) is not taken:
   * partitions of scores are not that unbalanced in practice */
  introsort(a, a + n, up);
  const size_t head = n > 16 ? 16 : n;
  for (size_t i = 1; i < head; i++) {
    if (before(&a[i], &a[0], up)) {
      const clf__scored val = a[i];
      memmove(a + 1, a, i * sizeof *a);
      a[0] = val;
    } else {
      insert_back(a + i, up);
    }
  }
  for (size_t i = head; i < n; i++) insert_back(a + i, up);
}

static void sorted(const float *s, size_t V, clf__scored *tmp, int up) {
  for (size_t v = 0; v < V; v++) tmp[v].v = isnan(s[v]) ? -INFINITY : s[v], tmp[v].i = (uint32_t)v;
  std_sort(tmp, V, up);
}

/* TopKLogitsWarper: below the k-th largest score (ties with it kept). */
static void top_k(const clf__gen_params *p, float *s, size_t V, clf__scored *tmp) {
  size_t k = p->top_k > p->min_keep ? p->top_k : p->min_keep;
  if (k >= V) return;
  sorted(s, V, tmp, 0);
  const float kth = tmp[k - 1].v;
  for (size_t v = 0; v < V; v++)
    if (s[v] < kth) s[v] = -INFINITY;
}

/* TopPLogitsWarper: sorted ascending, softmax (float), cumsum (double
 * accumulation stored as float, as torch's CPU cumsum); the tokens whose
 * cumulative probability is <= 1 - top_p go, the last min_keep stay. */
static void top_p(const clf__gen_params *p, float *s, size_t V, clf__scored *tmp) {
  sorted(s, V, tmp, 1);
  const double mx = tmp[V - 1].v;
  if (mx == -INFINITY) return;
  double sum = 0.0, acc = 0.0;
  for (size_t j = 0; j < V; j++) sum += exp((double)tmp[j].v - mx);
  const float cut = (float)(1.0 - p->top_p);
  /* top_p <= 2^-25 rounds the cut to 1: its limit 0+, the top min_keep
   * alone, said here rather than left to the float cumsum of the others
   * staying at or below 1 (true while the top probability is above ~1e-7) */
  if (cut >= 1.0f) {
    for (size_t j = 0; j + p->min_keep < V; j++) s[tmp[j].i] = -INFINITY;
    return;
  }
  for (size_t j = 0; j + p->min_keep < V; j++) {
    acc += (double)(float)(exp((double)tmp[j].v - mx) / sum);
    if ((float)acc <= cut) s[tmp[j].i] = -INFINITY;
  }
}

/* MinPLogitsWarper (transformers 4.41): probabilities (float) below min_p
 * times the largest go; the min_keep highest scores stay. */
static void min_p(const clf__gen_params *p, float *s, size_t V, clf__scored *tmp) {
  sorted(s, V, tmp, 0);
  const double mx = tmp[0].v;
  if (mx == -INFINITY) return;
  double sum = 0.0;
  for (size_t v = 0; v < V; v++) sum += exp((double)tmp[v].v - mx);
  const float cut = (float)p->min_p * (float)(1.0 / sum);
  for (size_t j = p->min_keep; j < V; j++)
    if ((float)(exp((double)tmp[j].v - mx) / sum) < cut) s[tmp[j].i] = -INFINITY;
}

/* TemperatureLogitsWarper: s / t in float, as torch divides a float tensor
 * by a Python number.  Where that is not a number, the limit is taken
 * instead of torch's inf and NaN, so that every front end gets the same:
 * a t that is 0 as a float (below about 7e-46), or so small that some
 * finite score / t overflows, is t -> 0+: the maximal scores stay (all of
 * them if tied; at mx / t, or the largest float of its sign where that
 * overflows) and every other goes; a t that is infinite as a float is
 * t -> inf: every finite score becomes +-0, -inf stays -inf. */
static void temperature(const clf__gen_params *p, float *s, size_t V) {
  const float t = (float)p->temperature;
  float mx = -INFINITY, big = 0.0f;
  for (size_t v = 0; v < V; v++) {
    if (isfinite(s[v]) && fabsf(s[v]) > big) big = fabsf(s[v]);
    if (s[v] > mx) mx = s[v];
  }
  if (isinf(t)) {
    for (size_t v = 0; v < V; v++)
      if (isfinite(s[v])) s[v] = s[v] / t;
    return;
  }
  if (t > 0.0f && isfinite(big / t)) { /* every score / t is a float: as torch */
    for (size_t v = 0; v < V; v++) s[v] = s[v] / t;
    return;
  }
  const float q = mx / t, keep = mx == 0.0f || !isfinite(mx) ? mx : isfinite(q) ? q : copysignf(FLT_MAX, mx);
  for (size_t v = 0; v < V; v++) s[v] = s[v] == mx ? keep : -INFINITY;
}

void clf__gen_warp(const clf__gen_params *p, float *s, size_t V, clf__scored *tmp) {
  if (p->temperature != 1.0) temperature(p, s, V);
  if (p->top_k) top_k(p, s, V, tmp);
  if (p->top_p < 1.0) top_p(p, s, V, tmp);
  if (p->min_p >= 0.0) min_p(p, s, V, tmp);
}

void clf__gen_process(const clf__gen_params *p, const int64_t *ids, size_t n, float *s, size_t V, clf__scored *tmp) {
  clf__gen_penalize(p, ids, n, s, V, tmp);
  if (p->do_sample) clf__gen_warp(p, s, V, tmp);
}

static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void clf__rng_seed(clf__rng *r, uint64_t seed) {
  for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

double clf__rng_uniform(clf__rng *r) {
  uint64_t *s = r->s;
  const uint64_t out = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return (double)(out >> 11) * 0x1.0p-53;
}

size_t clf__gen_draw(const float *s, size_t V, clf__rng *r) {
  size_t best = 0;
  for (size_t v = 1; v < V; v++)
    if (s[v] > s[best] || isnan(s[best])) best = v;
  const double mx = s[best];
  const double u = clf__rng_uniform(r);
  if (!isfinite(mx)) return best;
  double sum = 0.0, acc = 0.0;
  for (size_t v = 0; v < V; v++)
    if (s[v] > -INFINITY) sum += exp((double)s[v] - mx);
  const double target = u * sum;
  size_t last = best;
  for (size_t v = 0; v < V; v++) {
    if (!(s[v] > -INFINITY)) continue;
    const double e = exp((double)s[v] - mx);
    if (e <= 0.0) continue;
    acc += e, last = v;
    if (acc > target) return v;
  }
  return last;
}
