/* generate.c - decoding as transformers' generate(): greedy search,
 * multinomial sampling (sampling.c) and beam search (BeamSearchScorer) over
 * a model's generation hooks, with the logits processors (repetition
 * penalty, no-repeat n-grams, bad words, min length, forced BOS/EOS).  The
 * logits of a step are the one read-back.
 */
#include "decoder.h"
#include "sampling.h"

#include "base/checked.h"
#include "base/limits.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void clf_generate_options_init(clf_generate_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

int clf_model_is_encoder_decoder(const clf_model *m) { return m && m->is_encdec; }

typedef struct gen {
  clf_model *m;
  size_t R, V, max_len, prompt_len, cur_len;
  size_t fed0; /* positions already in the cache at the first step (a continued conversation) */
  int64_t *tok;  /* [R, max_len] */
  int64_t *mask; /* [R, max_len] decoder-only: attention mask */
  long pad;
  int has_pad;
  clf__gen_params p;
  clf__scored *tmp; /* [V]: the processors' scratch */
  clf__rng rng;
  const clf_generate_options *o;
} gen;

static int in_list(const long *eos, size_t n, int64_t t) {
  for (size_t i = 0; i < n; i++)
    if (eos[i] == t) return 1;
  return 0;
}
static int is_eos(const clf_model *m, int64_t t) { return in_list(m->gen.eos, m->gen.n_eos, t); }

/* The logits processors of generate() for a row's n tokens so far, with
 * the end-of-sequence tokens eos and the sequence's length limit max_len. */
static void process_row(const clf_model *m, const clf__gen_params *p, const long *eos, size_t n_eos, size_t V,
                        size_t max_len, const int64_t *row, size_t n, float *s, clf__scored *tmp) {
  clf__gen_penalize(p, row, n, s, V, tmp);
  if (m->gen.min_length > 0 && (long)n < m->gen.min_length)
    for (size_t i = 0; i < n_eos; i++)
      if (eos[i] >= 0 && (size_t)eos[i] < V) s[eos[i]] = -INFINITY;
  /* NoBadWords: a sequence [.., t] bans t where the tokens before match; [eos] lists are dropped. */
  for (size_t i = 0; i < m->gen.n_bad_words;) {
    size_t j = i;
    while (j < m->gen.n_bad_words && m->gen.bad_words[j] >= 0) j++;
    const size_t len = j - i;
    const long last = len ? m->gen.bad_words[j - 1] : -1;
    int ok = len > 0 && last >= 0 && (size_t)last < V && !(len == 1 && in_list(eos, n_eos, last));
    if (ok && len - 1 > n) ok = 0;
    for (size_t k = 0; ok && k + 1 < len; k++)
      if (row[n - (len - 1) + k] != m->gen.bad_words[i + k]) ok = 0;
    if (ok) s[last] = -INFINITY;
    i = j + 1;
  }
  if (m->gen.has_forced_bos && n == 1 && (size_t)m->gen.forced_bos < V)
    for (size_t v = 0; v < V; v++) s[v] = v == (size_t)m->gen.forced_bos ? 0.0f : -INFINITY;
  if (m->gen.has_forced_eos && n + 1 == max_len && (size_t)m->gen.forced_eos < V)
    for (size_t v = 0; v < V; v++) s[v] = v == (size_t)m->gen.forced_eos ? 0.0f : -INFINITY;
}

/* The logits processors of generate() for the row's tokens so far. */
static void process_logits(const gen *g, const int64_t *row, float *s) {
  process_row(g->m, &g->p, g->m->gen.eos, g->m->gen.n_eos, g->V, g->max_len, row, g->cur_len, s, g->tmp);
}

/* The next token from processed scores s [V]: the argmax (the first of
 * equals), or with do_sample a draw after the warpers. */
static int64_t choose_row(const clf__gen_params *p, clf__rng *rng, float *s, size_t V, clf__scored *tmp) {
  if (p->do_sample) {
    clf__gen_warp(p, s, V, tmp);
    return (int64_t)clf__gen_draw(s, V, rng);
  }
  size_t best = 0;
  for (size_t v = 1; v < V; v++)
    if (s[v] > s[best]) best = v;
  return (int64_t)best;
}

/* Feeds the new tokens of every row (all of them on the first step, and
 * on the step whose positions first pass the decoder's refeed_at: the
 * caches dropped, as transformers' Phi3ForCausalLM drops its past there). */
static clf_status step(gen *g, int first, float *logits) {
  clf_model *m = g->m;
  clf__decoder *d = m->dec;
  const int refeed = !first && d->refeed_at && g->cur_len - 1 == d->refeed_at && d->kv.past == d->refeed_at;
  if (refeed) d->kv.past = 0;
  const size_t R = g->R, n = first ? g->cur_len - g->fed0 : refeed ? g->cur_len : 1, L = g->cur_len;
  int64_t *ids = malloc(2 * R * n * sizeof *ids), *mask = NULL;
  if (!ids) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  int64_t *pos = ids + R * n;
  if (!m->is_encdec) mask = malloc(R * L * sizeof *mask);
  for (size_t r = 0; r < R; r++) {
    const int64_t *t = g->tok + r * g->max_len, *mk = g->mask + r * g->max_len;
    int64_t cum = 0;
    for (size_t i = 0; i < L; i++) {
      /* position_ids = cumsum(mask) - 1, 1 where masked (GPT-2's prepare_inputs_for_generation) */
      cum += mk[i] != 0;
      if (i >= L - n) {
        ids[r * n + i - (L - n)] = t[i];
        pos[r * n + i - (L - n)] = m->is_encdec ? (int64_t)i : (mk[i] ? cum - 1 : 1);
      }
      if (mask) mask[r * L + i] = mk[i];
    }
  }
  clf_status st = (m->is_encdec || mask) ? clf__decoder_step(m, n, ids, pos, mask, logits)
                                         : clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of memory");
  free(ids);
  free(mask);
  return st;
}

static int64_t choose(gen *g, float *s) { return choose_row(&g->p, &g->rng, s, g->V, g->tmp); }

/* Greedy search or sampling (one row per batch row); o->on_token hears of
 * each row's new token until the row is done, and may stop the search. */
static clf_status greedy(gen *g, float *logits) {
  clf_model *m = g->m;
  const size_t R = g->R, V = g->V;
  const clf_generate_options *o = g->o;
  char *done = calloc(R, 1);
  if (!done) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  clf_status st = CLF_OK;
  int stop = 0;
  for (int first = 1; g->cur_len < g->max_len && !stop; first = 0) {
    if ((st = step(g, first, logits)) != CLF_OK) break;
    size_t n_done = 0;
    for (size_t r = 0; r < R; r++) {
      int64_t *row = g->tok + r * g->max_len;
      float *s = logits + r * V;
      process_logits(g, row, s);
      int64_t t = choose(g, s);
      if (done[r] && g->has_pad) t = g->pad;
      row[g->cur_len] = t;
      g->mask[r * g->max_len + g->cur_len] = 1;
      if (!done[r] && o && o->on_token && o->on_token(o->user, r, t)) stop = 1;
      if (is_eos(m, t)) done[r] = 1;
      n_done += done[r];
    }
    g->cur_len++;
    if (m->gen.n_eos && n_done == R) break;
  }
  free(done);
  return st;
}

/* ---- beam search (transformers' BeamSearchScorer and BeamHypotheses) ---- */
typedef struct hyp {
  double score;
  int64_t *tok;
  size_t len;
} hyp;

typedef struct hyps {
  hyp *h; /* up to K + 1 */
  size_t n;
  double worst;
  int done;
} hyps;

static void hyps_add(hyps *H, size_t K, double lp, const int64_t *tok, size_t len, double sum_logprobs,
                     size_t gen_len, size_t max_len) {
  const double score = sum_logprobs / pow((double)gen_len, lp);
  if (!(H->n < K || score > H->worst)) return;
  hyp *x = &H->h[H->n++];
  x->score = score;
  x->len = len;
  memcpy(x->tok, tok, len * sizeof *tok);
  (void)max_len;
  if (H->n > K) {
    /* drop the worst (the first of equal scores), worst = the next one */
    size_t lo = 0, lo2 = (size_t)-1;
    for (size_t i = 1; i < H->n; i++)
      if (H->h[i].score < H->h[lo].score) lo = i;
    for (size_t i = 0; i < H->n; i++)
      if (i != lo && (lo2 == (size_t)-1 || H->h[i].score < H->h[lo2].score)) lo2 = i;
    H->worst = H->h[lo2].score;
    int64_t *keep = H->h[lo].tok;
    memmove(&H->h[lo], &H->h[lo + 1], (H->n - lo - 1) * sizeof *H->h);
    H->n--;
    H->h[H->n].tok = keep; /* the spare buffer goes last */
  } else if (score < H->worst) {
    H->worst = score;
  }
}

static int hyps_is_done(const hyps *H, size_t K, double lp, int early, double best, size_t cur_len,
                        size_t prompt_len, size_t max_len) {
  if (H->n < K) return 0;
  if (early == 1) return 1;
  double denom = (early == -1 && lp > 0.0) ? (double)(max_len - prompt_len) : (double)(cur_len - prompt_len);
  return H->worst >= best / pow(denom, lp);
}

/* A beam search over R = B x K rows: running scores, the candidate and
 * reorder scratch, and each batch row's finished hypotheses. */
typedef struct beams {
  size_t K, B, n_cand;
  float *bscore, *cs, *nsc; /* [R], [n_cand], [R] */
  size_t *cidx;             /* [n_cand] */
  int64_t *ntok, *nidx;     /* [R]: the next token and the row it extends */
  int64_t *tmp, *hbuf;      /* [R, max_len], [B, K + 1, max_len] */
  hyps *hy;                 /* [B] */
  hyp *hmem;                /* [B, K + 1] */
} beams;

static void beams_free(beams *s) {
  free(s->bscore), free(s->cs), free(s->cidx), free(s->ntok), free(s->nidx), free(s->tmp), free(s->nsc);
  free(s->hy), free(s->hbuf), free(s->hmem);
}

static clf_status beams_alloc(gen *g, size_t K, beams *s) {
  clf_model *m = g->m;
  const size_t R = g->R, ML = g->max_len;
  memset(s, 0, sizeof *s);
  s->K = K, s->B = R / K;
  s->n_cand = (m->gen.n_eos + 1 > 2 ? m->gen.n_eos + 1 : 2) * K;
  s->bscore = calloc(R, sizeof *s->bscore), s->cs = malloc(s->n_cand * sizeof *s->cs);
  s->cidx = malloc(s->n_cand * sizeof *s->cidx);
  s->ntok = malloc(R * sizeof *s->ntok), s->nidx = malloc(R * sizeof *s->nidx);
  s->tmp = malloc(R * ML * sizeof *s->tmp), s->nsc = malloc(R * sizeof *s->nsc);
  s->hy = calloc(s->B, sizeof *s->hy), s->hbuf = malloc(s->B * (K + 1) * ML * sizeof *s->hbuf);
  s->hmem = calloc(s->B * (K + 1), sizeof *s->hmem);
  if (!s->bscore || !s->cs || !s->cidx || !s->ntok || !s->nidx || !s->tmp || !s->nsc || !s->hy || !s->hbuf ||
      !s->hmem)
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  for (size_t b = 0; b < s->B; b++) {
    s->hy[b].h = s->hmem + b * (K + 1);
    s->hy[b].worst = 1e9;
    for (size_t k = 0; k <= K; k++) s->hy[b].h[k].tok = s->hbuf + (b * (K + 1) + k) * ML;
    for (size_t k = 1; k < K; k++) s->bscore[b * K + k] = -1e9f;
  }
  return CLF_OK;
}

/* Each row's log-softmax, through the logits processors, plus its beam's
 * running score. */
static void beams_score(gen *g, const beams *s, float *logits) {
  const size_t V = g->V;
  for (size_t r = 0; r < g->R; r++) {
    float *x = logits + r * V;
    double mx = -INFINITY, sum = 0.0;
    for (size_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
    for (size_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
    const double lse = mx + log(sum);
    for (size_t v = 0; v < V; v++) x[v] = (float)((double)x[v] - lse);
    process_logits(g, g->tok + r * g->max_len, x);
    for (size_t v = 0; v < V; v++) x[v] = x[v] + s->bscore[r];
  }
}

/* Batch row b (BeamSearchScorer.process at length cur): the top candidates
 * of its K x V scores; those ending in EOS join the finished hypotheses,
 * the first K others continue. */
static void beams_select(gen *g, beams *s, size_t b, const float *logits, size_t cur) {
  clf_model *m = g->m;
  const size_t K = s->K, V = g->V, ML = g->max_len;
  if (s->hy[b].done) {
    for (size_t k = 0; k < K; k++) s->nsc[b * K + k] = 0, s->ntok[b * K + k] = g->pad, s->nidx[b * K + k] = 0;
    return;
  }
  /* top n_cand of the K*V scores, sorted, the lower index first among equals */
  const float *S = logits + b * K * V;
  float *cs = s->cs;
  size_t *cidx = s->cidx, nc = 0;
  for (size_t i = 0; i < K * V; i++) {
    if (nc == s->n_cand && !(S[i] > cs[nc - 1])) continue;
    size_t j = nc < s->n_cand ? nc++ : nc - 1;
    while (j > 0 && S[i] > cs[j - 1]) cs[j] = cs[j - 1], cidx[j] = cidx[j - 1], j--;
    cs[j] = S[i], cidx[j] = i;
  }
  size_t bi = 0;
  for (size_t rank = 0; rank < nc && bi < K; rank++) {
    const int64_t t = (int64_t)(cidx[rank] % V);
    const size_t src = b * K + cidx[rank] / V;
    if (m->gen.n_eos && is_eos(m, t)) {
      if (rank >= K) continue;
      hyps_add(&s->hy[b], K, m->gen.length_penalty, g->tok + src * ML, g->cur_len, cs[rank], cur - g->prompt_len, ML);
    } else {
      s->nsc[b * K + bi] = cs[rank], s->ntok[b * K + bi] = t, s->nidx[b * K + bi] = (int64_t)src;
      bi++;
    }
  }
  s->hy[b].done = s->hy[b].done || hyps_is_done(&s->hy[b], K, m->gen.length_penalty, m->gen.early_stopping, cs[0], cur,
                                                g->prompt_len, ML);
}

/* input_ids = cat(input_ids[beam_idx], tokens), the mask likewise; 1 when
 * the search is over (every row done, every beam at EOS, or max_length). */
static int beams_advance(gen *g, beams *s) {
  clf_model *m = g->m;
  const size_t R = g->R, ML = g->max_len;
  memcpy(s->tmp, g->tok, R * ML * sizeof *s->tmp);
  size_t all_eos = 1, all_done = 1;
  for (size_t r = 0; r < R; r++) {
    memcpy(g->tok + r * ML, s->tmp + (size_t)s->nidx[r] * ML, g->cur_len * sizeof *s->tmp);
    g->tok[r * ML + g->cur_len] = s->ntok[r];
    g->mask[r * ML + g->cur_len] = 1;
    s->bscore[r] = s->nsc[r];
    all_eos &= m->gen.n_eos && is_eos(m, s->ntok[r]);
  }
  memcpy(s->tmp, g->mask, R * ML * sizeof *s->tmp);
  for (size_t r = 0; r < R; r++)
    memcpy(g->mask + r * ML, s->tmp + (size_t)s->nidx[r] * ML, g->cur_len * sizeof *s->tmp);
  g->cur_len++;
  for (size_t b = 0; b < s->B; b++) all_done &= (size_t)s->hy[b].done;
  return all_done || all_eos || g->cur_len >= ML;
}

/* The open beams join their row's hypotheses; the best one of each row,
 * padded to the longest, is the output. */
static clf_status beams_finalize(gen *g, beams *s, clf_array *out) {
  clf_model *m = g->m;
  const size_t K = s->K, B = s->B, ML = g->max_len;
  size_t maxl = 0, minl = (size_t)-1;
  const hyp **best = calloc(B, sizeof *best);
  if (!best) return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  for (size_t b = 0; b < B; b++) {
    if (!s->hy[b].done)
      for (size_t k = 0; k < K; k++)
        hyps_add(&s->hy[b], K, m->gen.length_penalty, g->tok + (b * K + k) * ML, g->cur_len, s->bscore[b * K + k],
                 g->cur_len - g->prompt_len, ML);
    /* sorted by score (stable) then pop(): the last of the equal best */
    for (size_t i = 0; i < s->hy[b].n; i++)
      if (!best[b] || s->hy[b].h[i].score >= best[b]->score) best[b] = &s->hy[b].h[i];
    maxl = best[b]->len > maxl ? best[b]->len : maxl;
    minl = best[b]->len < minl ? best[b]->len : minl;
  }
  size_t T = maxl + 1 < ML ? maxl + 1 : ML;
  int64_t *d = malloc(B * T * sizeof *d + 1);
  if (!d) {
    free(best);
    return clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  }
  out->dtype = CLF_I64, out->ndim = 2, out->shape[0] = B, out->shape[1] = T;
  for (size_t b = 0; b < B; b++) {
    for (size_t t = 0; t < T; t++) d[b * T + t] = t < best[b]->len ? best[b]->tok[t] : (minl != maxl ? g->pad : 0);
    if (best[b]->len < T) d[b * T + best[b]->len] = m->gen.n_eos ? m->gen.eos[0] : g->pad;
  }
  out->data = d;
  free(best);
  return CLF_OK;
}

static clf_status beam_search(gen *g, size_t K, float *logits, clf_array *out) {
  beams s;
  clf_status st = beams_alloc(g, K, &s);
  for (int first = 1; st == CLF_OK && g->cur_len < g->max_len; first = 0) {
    if ((st = step(g, first, logits)) != CLF_OK) break;
    beams_score(g, &s, logits);
    const size_t cur = g->cur_len + 1; /* BeamSearchScorer.process's cur_len */
    for (size_t b = 0; b < s.B; b++) beams_select(g, &s, b, logits, cur);
    if (beams_advance(g, &s)) break;
    st = clf__decoder_reorder(g->m, s.nidx);
  }
  if (st == CLF_OK) st = beams_finalize(g, &s, out);
  beams_free(&s);
  return st;
}

/* The generation's sizes against the model and host/base/limits.h, before
 * anything is allocated: K beams, the sequence length it may reach (the
 * prompt and max_new_tokens, or max_length) against the position table,
 * the logits of a step. */
static clf_status gen_budget(clf_model *m, const clf_generate_options *o, size_t B, size_t L, size_t K) {
  static const char op[] = "clf_model_generate";
  clf_context *ctx = m->ctx;
  if (K > CLF_LIMIT_BEAMS)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: num_beams %zu is more than the limit of %d", op, K,
                     CLF_LIMIT_BEAMS);
  size_t rows, logits, len = 0;
  if (!clf__mul_ok(B, K, &rows) || !clf__mul_ok(rows, m->vocab, &logits) || logits > CLF_LIMIT_STEP_LOGITS)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %zu rows x %zu beams x a vocabulary of %zu is more logits per "
                     "step than the limit of %zu", op, B, K, m->vocab, CLF_LIMIT_STEP_LOGITS);
  const size_t prompt = m->is_encdec ? 1 : L;
  const char *what = "max_new_tokens";
  if (o && o->max_new_tokens) {
    if (!clf__add_ok(prompt, o->max_new_tokens, &len))
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: max_new_tokens %zu overflows with a prompt of %zu", op,
                       o->max_new_tokens, prompt);
  } else if (m->gen.max_length > 0) {
    len = (size_t)m->gen.max_length, what = "max_length";
  }
  if (m->max_positions && len > m->max_positions)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s makes sequences of %zu tokens, more than the model's %zu "
                     "positions", op, what, len, m->max_positions);
  return CLF_OK;
}

/* An option over the checkpoint's value: 0 unset, CLF_GENERATE_OFF off
 * (top_k, no_repeat_ngram_size). */
static double pick(double opt, double ckpt, double off) { return opt == 0 ? ckpt : opt == CLF_GENERATE_OFF ? off : opt; }

/* The sampling settings of one call (options over the checkpoint's, over
 * GenerationConfig's defaults), checked where they are used: the warpers
 * only with do_sample, as transformers ignores them without. */
static clf_status gen_params_in(clf_model *m, clf_context *ctx, const char *op, const clf_generate_options *o,
                                size_t K, clf__gen_params *p) {
  const clf_generate_options z = {0};
  if (!o) o = &z;
  if (o->do_sample < CLF_GENERATE_OFF || o->do_sample > 1)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: do_sample %d is not 0 (unset), 1 or CLF_GENERATE_OFF", op,
                     o->do_sample);
  if ((o->top_k < 0 && o->top_k != CLF_GENERATE_OFF) ||
      (o->no_repeat_ngram_size < 0 && o->no_repeat_ngram_size != CLF_GENERATE_OFF))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s %ld is negative (0: unset, CLF_GENERATE_OFF: off)", op,
                     o->top_k < 0 && o->top_k != CLF_GENERATE_OFF ? "top_k" : "no_repeat_ngram_size",
                     o->top_k < 0 && o->top_k != CLF_GENERATE_OFF ? o->top_k : o->no_repeat_ngram_size);
  memset(p, 0, sizeof *p);
  p->do_sample = o->do_sample ? o->do_sample == 1 : m->gen.do_sample;
  p->repetition_penalty = o->repetition_penalty != 0 ? o->repetition_penalty : m->gen.repetition_penalty;
  const double ngram = pick((double)o->no_repeat_ngram_size, (double)m->gen.no_repeat_ngram_size, 0.0);
  p->temperature = o->temperature != 0 ? o->temperature : m->gen.temperature;
  const double k = pick((double)o->top_k, (double)m->gen.top_k, 0.0);
  p->top_p = o->top_p != 0 ? o->top_p : m->gen.top_p;
  p->min_p = o->min_p == 0 ? m->gen.min_p : o->min_p == CLF_GENERATE_OFF ? -1.0 : o->min_p;
  p->min_keep = K > 1 ? (m->gen.n_eos > 1 ? m->gen.n_eos + 1 : 2) : 1;
  const char *bad = NULL;
  double val = 0;
  if (!(p->repetition_penalty > 0 && isfinite(p->repetition_penalty)))
    bad = "repetition_penalty (must be > 0)", val = p->repetition_penalty;
  else if (ngram < 0) bad = "no_repeat_ngram_size (must be >= 0)", val = ngram;
  else if (p->do_sample && !(p->temperature > 0 && isfinite(p->temperature)))
    bad = "temperature (must be > 0 when sampling)", val = p->temperature;
  else if (p->do_sample && k < 0) bad = "top_k (must be >= 0)", val = k;
  else if (p->do_sample && !(p->top_p > 0 && p->top_p <= 1)) bad = "top_p (must be in (0, 1])", val = p->top_p;
  else if (p->do_sample && p->min_p != -1.0 && !(p->min_p >= 0 && p->min_p <= 1))
    bad = "min_p (must be in [0, 1])", val = p->min_p;
  if (bad) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %s is %g", op, bad, val);
  p->no_repeat_ngram = (size_t)ngram;
  p->top_k = (size_t)k;
  if (!p->do_sample) p->temperature = 1.0, p->top_k = 0, p->top_p = 1.0, p->min_p = -1.0;
  if (p->do_sample && K > 1)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: do_sample with num_beams %zu (beam sampling) is not supported", op,
                     K);
  if (K > 1 && o->on_token)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: on_token is not supported with beam search (num_beams %zu)", op,
                     K);
  return CLF_OK;
}

static clf_status gen_params(clf_model *m, const clf_generate_options *o, size_t K, clf__gen_params *p) {
  return gen_params_in(m, m->ctx, "clf_model_generate", o, K, p);
}

/* A seed for a call without one: the clock, a counter and an address,
 * mixed by the generator's seeding. */
static uint64_t fresh_seed(void) {
  static _Atomic uint64_t calls;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (++calls * 0x9E3779B97F4A7C15ull) ^
         (uint64_t)(uintptr_t)&ts;
}

/* The arguments checked and g set up for B rows of prompt length L, K
 * beams (the prompt lengths and max_length as transformers derives them). */
static clf_status gen_setup(clf_model *m, const clf_array *input_ids, const clf_array *attention_mask,
                            const clf_generate_options *o, gen *g, size_t *B, size_t *L, size_t *K) {
  static const char op[] = "clf_model_generate";
  clf_context *ctx = m->ctx;
  clf_status st;
  if (!m->dec || !m->dec->head)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: this %s model has no language-model head to generate with", op,
                     m->type);
  if (m->gen.unsupported)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: the checkpoint's generation setting \"%s\" is not supported", op,
                     m->gen.unsupported);
  if (!input_ids) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: input_ids is NULL", op);
  if ((st = clf__check_ids(m, input_ids, "input_ids", B, L)) != CLF_OK) return st;
  if ((st = clf__check_id_range(m, op, input_ids, "input_ids", m->in_vocab)) != CLF_OK) return st;
  if (attention_mask && (st = clf__check_ids(m, attention_mask, "attention_mask", B, L)) != CLF_OK) return st;
  if (*B == 0 || *L == 0)
    return clf__fail(ctx, CLF_E_SHAPE, "%s: input_ids has shape [%zu, %zu], expected at least one token", op, *B,
                     *L);
  if (m->is_encdec && !m->gen.has_dec_start && m->gen.bos < 0)
    return clf__fail(ctx, CLF_E_FORMAT, "%s: the config has neither decoder_start_token_id nor bos_token_id", op);
  *K = o && o->num_beams ? o->num_beams : (m->gen.num_beams > 0 ? (size_t)m->gen.num_beams : 1);
  if ((st = gen_budget(m, o, *B, *L, *K)) != CLF_OK) return st;
  if ((st = gen_params(m, o, *K, &g->p)) != CLF_OK) return st;
  g->m = m;
  g->o = o;
  clf__rng_seed(&g->rng, o && o->seed ? o->seed : fresh_seed());
  g->V = m->vocab;
  g->R = *B * *K;
  g->pad = m->gen.pad, g->has_pad = m->gen.has_pad;
  if (!g->has_pad && m->gen.n_eos) g->pad = m->gen.eos[0], g->has_pad = 1; /* "Setting pad_token_id to eos_token_id" */
  g->prompt_len = m->is_encdec ? 1 : *L;
  g->max_len = o && o->max_new_tokens ? g->prompt_len + o->max_new_tokens
                                      : (size_t)(m->gen.max_length > 0 ? m->gen.max_length : 20);
  if (g->max_len < g->prompt_len) g->max_len = g->prompt_len;
  g->cur_len = g->prompt_len;
  return CLF_OK;
}

/* src [2, R, L]: the ids and the mask as i64, each row repeated K times
 * (repeat_interleave); g's tokens start as the prompt (decoder-only) or the
 * decoder start token (encoder-decoder). */
static void gen_inputs(gen *g, const clf_array *input_ids, const clf_array *attention_mask, size_t L, size_t K,
                       int64_t *src) {
  clf_model *m = g->m;
  const size_t R = g->R, ML = g->max_len;
  int any_pad = 0;
  for (size_t r = 0; r < R; r++)
    for (size_t i = 0; i < L; i++) {
      const size_t k = r / K * L + i;
      src[r * L + i] = clf__id_at(input_ids, k);
      any_pad |= g->has_pad && src[r * L + i] == g->pad;
      src[R * L + r * L + i] = attention_mask ? clf__id_at(attention_mask, k) : 1;
    }
  /* no mask given: pad tokens are masked when pad is not an eos token */
  if (!attention_mask && any_pad && !is_eos(m, g->pad))
    for (size_t i = 0; i < R * L; i++) src[R * L + i] = src[i] != g->pad;
  for (size_t r = 0; r < R; r++) {
    for (size_t i = 0; i < ML; i++) g->mask[r * ML + i] = 1;
    if (m->is_encdec) {
      g->tok[r * ML] = m->gen.has_dec_start ? m->gen.dec_start : m->gen.bos;
    } else {
      memcpy(g->tok + r * ML, src + r * L, L * sizeof *src);
      memcpy(g->mask + r * ML, src + R * L + r * L, L * sizeof *src);
    }
  }
}

/* Greedy decoding's sequences [B, cur_len]. */
static clf_status greedy_output(gen *g, size_t B, clf_array *out) {
  int64_t *d = malloc(B * g->cur_len * sizeof *d + 1);
  if (!d) return clf__fail(g->m->ctx, CLF_E_OUT_OF_MEMORY, "clf_model_generate: out of host memory");
  for (size_t b = 0; b < B; b++) memcpy(d + b * g->cur_len, g->tok + b * g->max_len, g->cur_len * sizeof *d);
  out->dtype = CLF_I64, out->ndim = 2, out->shape[0] = B, out->shape[1] = g->cur_len;
  out->data = d;
  return CLF_OK;
}

/* Where the caches come from: a fresh pair for the call (cont NULL), or a
 * continued conversation's (clf__generate_continue). */
static clf_status gen_caches(gen *g, clf__gen_cont *cont, const clf_array *enc_ids, const clf_array *enc_mask) {
  clf_model *m = g->m;
  if (!cont) return clf__decoder_begin(m, g->R, g->max_len, enc_ids, enc_mask);
  if (g->R != 1 || m->is_encdec)
    return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_chat_respond: a conversation is one row of a decoder-only model");
  cont->kept = 0;
  const int reuse = cont->keep > 0 && cont->keep < g->cur_len && clf__decoder_owned(m, cont->owner) &&
                    m->dec->kv.cap >= g->max_len;
  if (!reuse) {
    clf_status st = clf__decoder_begin(m, 1, g->max_len > cont->cap ? g->max_len : cont->cap, NULL, NULL);
    if (st == CLF_OK) m->dec->owner = cont->owner;
    return st;
  }
  m->dec->kv.past = cont->keep;
  g->fed0 = cont->kept = cont->keep;
  return CLF_OK;
}

static clf_status generate_run(clf_model *m, const clf_array *input_ids, const clf_array *attention_mask,
                               const clf_generate_options *o, clf__gen_cont *cont, clf_array *sequences) {
  static const char op[] = "clf_model_generate";
  gen g = {0};
  size_t B = 0, L = 0, K = 1;
  clf_status st = gen_setup(m, input_ids, attention_mask, o, &g, &B, &L, &K);
  if (st != CLF_OK) return st;
  if (cont && K != 1) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "clf_chat_respond: num_beams %zu: a "
                                       "conversation decodes with one beam (it streams)", K);
  int64_t *src = malloc(2 * g.R * L * sizeof *src);
  g.tok = malloc(g.R * g.max_len * sizeof *g.tok);
  g.mask = malloc(g.R * g.max_len * sizeof *g.mask);
  float *logits = malloc(g.R * g.V * sizeof *logits + 1);
  g.tmp = malloc(g.V * sizeof *g.tmp + 1);
  if (!src || !g.tok || !g.mask || !logits || !g.tmp) {
    st = clf__fail(m->ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
    goto done;
  }
  gen_inputs(&g, input_ids, attention_mask, L, K, src);
  clf_array enc_ids = {.dtype = CLF_I64, .ndim = 2, .shape = {g.R, L}, .data = src};
  clf_array enc_mask = {.dtype = CLF_I64, .ndim = 2, .shape = {g.R, L}, .data = src + g.R * L};
  if ((st = gen_caches(&g, cont, m->is_encdec ? &enc_ids : NULL, m->is_encdec ? &enc_mask : NULL)) != CLF_OK)
    goto done;
  if (K > 1) st = beam_search(&g, K, logits, sequences);
  else if ((st = greedy(&g, logits)) == CLF_OK) st = greedy_output(&g, B, sequences);
  if (st == CLF_OK) snprintf(sequences->name, sizeof sequences->name, "sequences");
done:
  if (!cont || st != CLF_OK) clf__decoder_end(m); /* a conversation keeps its cache for the next turn */
  free(src), free(g.tok), free(g.mask), free(logits), free(g.tmp);
  return st;
}

/* The options' eos_token_ids stand in for the checkpoint's during the call. */
static clf_status generate_call(clf_model *m, const clf_array *input_ids, const clf_array *attention_mask,
                                const clf_generate_options *o, clf__gen_cont *cont, clf_array *sequences) {
  static const char op[] = "clf_model_generate";
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  if (!sequences) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: sequences is NULL", op);
  memset(sequences, 0, sizeof *sequences);
  const size_t n = o ? o->n_eos_token_ids : 0, cap = CLF__ARRAY_LEN(m->gen.eos);
  if (n > cap) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: %zu eos_token_ids, at most %zu", op, n, cap);
  if (n && !o->eos_token_ids) return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: eos_token_ids is NULL", op);
  for (size_t i = 0; i < n; i++)
    if (o->eos_token_ids[i] < 0 || (int64_t)(long)o->eos_token_ids[i] != o->eos_token_ids[i])
      return clf__fail(m->ctx, CLF_E_INVALID_ARG, "%s: eos_token_ids[%zu] is %lld, not a token id", op, i,
                       (long long)o->eos_token_ids[i]);
  long saved[CLF__ARRAY_LEN(m->gen.eos)];
  const size_t saved_n = m->gen.n_eos;
  memcpy(saved, m->gen.eos, sizeof saved);
  if (n) {
    for (size_t i = 0; i < n; i++) m->gen.eos[i] = (long)o->eos_token_ids[i];
    m->gen.n_eos = n;
  }
  const clf_status st = generate_run(m, input_ids, attention_mask, o, cont, sequences);
  memcpy(m->gen.eos, saved, sizeof saved);
  m->gen.n_eos = saved_n;
  return st;
}

clf_status clf_model_generate(clf_model *m, const clf_array *input_ids, const clf_array *attention_mask,
                              const clf_generate_options *o, clf_array *sequences) {
  return generate_call(m, input_ids, attention_mask, o, NULL, sequences);
}

clf_status clf__generate_continue(clf_model *m, const clf_array *input_ids, const clf_generate_options *o,
                                  clf__gen_cont *cont, clf_array *sequences) {
  return generate_call(m, input_ids, NULL, o, cont, sequences);
}

/* ---- one sequence's rules, for the engine (decoder.h) ---- */

clf_status clf__gen_row_init(clf_model *m, clf_context *ctx, const clf_generate_options *o, size_t prompt_len,
                             size_t limit, clf__gen_row *r) {
  static const char op[] = "clf_engine_submit";
  memset(r, 0, sizeof *r);
  if (m->gen.unsupported)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: the checkpoint's generation setting \"%s\" is not supported", op,
                     m->gen.unsupported);
  if (o && o->num_beams > 1)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: num_beams %zu: the engine decodes one beam per sequence "
                     "(beam search runs through clf_model_generate)", op, o->num_beams);
  clf_status st = gen_params_in(m, ctx, op, o, 1, &r->p);
  if (st != CLF_OK) return st;
  const size_t n = o ? o->n_eos_token_ids : 0;
  if (n > CLF__ARRAY_LEN(r->eos))
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %zu eos_token_ids, at most %zu", op, n, CLF__ARRAY_LEN(r->eos));
  if (n && !o->eos_token_ids) return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: eos_token_ids is NULL", op);
  for (size_t i = 0; i < n; i++) {
    if (o->eos_token_ids[i] < 0 || (int64_t)(long)o->eos_token_ids[i] != o->eos_token_ids[i])
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: eos_token_ids[%zu] is %lld, not a token id", op, i,
                       (long long)o->eos_token_ids[i]);
    r->eos[i] = (long)o->eos_token_ids[i];
  }
  r->n_eos = n;
  if (!n) {
    memcpy(r->eos, m->gen.eos, m->gen.n_eos * sizeof *r->eos);
    r->n_eos = m->gen.n_eos;
  }
  clf__rng_seed(&r->rng, o && o->seed ? o->seed : fresh_seed());
  r->max_len = limit;
  r->by_limit = 1;
  if (o && o->max_new_tokens && o->max_new_tokens <= limit - prompt_len) {
    r->max_len = prompt_len + o->max_new_tokens;
    r->by_limit = 0;
  }
  return CLF_OK;
}

int64_t clf__gen_row_next(const clf_model *m, clf__gen_row *r, const int64_t *tok, size_t n, float *s,
                          clf__scored *tmp) {
  process_row(m, &r->p, r->eos, r->n_eos, m->vocab, r->max_len, tok, n, s, tmp);
  return choose_row(&r->p, &r->rng, s, m->vocab, tmp);
}

int clf__gen_row_eos(const clf__gen_row *r, int64_t t) { return in_list(r->eos, r->n_eos, t); }
