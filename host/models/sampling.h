/* sampling.h - generate()'s score processors that depend on the settings of
 * one call (repetition penalty, no-repeat n-grams), the sampling warpers
 * (temperature, top-k, top-p, min-p) in transformers' order, and the seeded
 * sampler.  Internal: generate.c and the tests use it.
 */
#ifndef CLF_MODELS_SAMPLING_H
#define CLF_MODELS_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

/* The settings of one generate() call, resolved (options over the
 * checkpoint over transformers' defaults) and checked. */
typedef struct clf__gen_params {
  int do_sample;
  double repetition_penalty; /* 1: none */
  size_t no_repeat_ngram;    /* 0: none */
  double temperature;        /* 1: none */
  size_t top_k;              /* 0: none */
  double top_p;              /* 1: none */
  double min_p;              /* < 0: none (transformers' None) */
  size_t min_keep;           /* min_tokens_to_keep of the warpers: 1, or n_eos + 1 with beams */
} clf__gen_params;

/* The processors of one row, in transformers 4.40's order: the repetition
 * penalty (RepetitionPenaltyLogitsProcessor) then no-repeat n-grams
 * (NoRepeatNGramLogitsProcessor), on scores s [V] given the row's ids [n]
 * (ids outside [0, V) are ignored).  tmp: scratch of V entries. */
typedef struct clf__scored {
  float v;
  uint32_t i;
} clf__scored;
void clf__gen_penalize(const clf__gen_params *p, const int64_t *ids, size_t n, float *s, size_t V,
                       clf__scored *tmp);

/* The warpers of _get_logits_warper on s [V]: temperature, top-k, top-p,
 * then min-p (where transformers 4.41 put MinPLogitsWarper; 4.40 has none).
 * Filtered scores become -inf.  tmp: scratch of V entries.  A temperature
 * or top_p at the edge of float (s / t overflowing or t rounding to 0; a
 * cut 1 - top_p rounding to 1) is taken at its limit: only the maximal
 * score(s) stay, finite, never NaN (sampling.c says how). */
void clf__gen_warp(const clf__gen_params *p, float *s, size_t V, clf__scored *tmp);

/* penalize then (when p->do_sample) warp: the scores a token is chosen
 * from, for the tests' comparison with transformers. */
void clf__gen_process(const clf__gen_params *p, const int64_t *ids, size_t n, float *s, size_t V, clf__scored *tmp);

/* xoshiro256** (Blackman and Vigna), its state seeded from one 64-bit seed
 * through splitmix64, as its authors recommend. */
typedef struct clf__rng {
  uint64_t s[4];
} clf__rng;

void clf__rng_seed(clf__rng *r, uint64_t seed);
/* A uniform double in [0, 1) from the top 53 bits of the next output. */
double clf__rng_uniform(clf__rng *r);

/* A token drawn from softmax(s) (computed in double; -inf and NaN never
 * drawn while a finite score exists): the first v whose cumulative
 * probability exceeds u * total for one uniform u.  Returns the first
 * +inf if there is one, the argmax when every score is -inf or NaN. */
size_t clf__gen_draw(const float *s, size_t V, clf__rng *r);

#endif
