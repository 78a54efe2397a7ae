/* decoder.h - the one runtime of every model that generates: it owns the KV
 * cache, the step buffer and its single upload per step, the last-row LM
 * head (tied or not, with an optional bias), beam reordering, and
 * begin / step / end.  A family supplies its weights and a body
 * (ids, positions, past, mask) -> hidden states; an encoder-decoder also a
 * prepare hook that runs its encoder.  generate.c drives it.
 */
#ifndef CLF_DECODER_H
#define CLF_DECODER_H

#include "kv.h"
#include "model.h"
#include "sampling.h"

/* What one body call runs on. */
typedef struct clf__step {
  const clf_tensor *ids;  /* i64 [B, n] */
  const clf_tensor *pos;  /* i64 [B, n] positions, or NULL: past.. in every row */
  const clf_tensor *mask; /* [B, past + n] padding mask, or NULL: none */
  size_t past;            /* cache rows already filled */
  int64_t max_pos;        /* the largest position */
  int cached;             /* K/V appended to (and read from) the cache */
  /* Non-NULL: the rows (ids [1, T]) are of many sequences over the paged
   * cache below (the engine); past, mask and the decoder's own cache are
   * not used. */
  const struct clf__paged_step *paged;
} clf__step;

/* A step of the engine (engine.c) over its block pools: the rows'
 * metadata and each layer's pools [NB, Hkv, block, Dh]: the full layers'
 * and the windowed layers' blocks are numbered apart when a model mixes
 * them, each numbering with its own slots and block tables. */
typedef struct clf__paged_step {
  clf__paged_meta pm[2]; /* per block numbering (engine.c's pools) */
  const unsigned char *pool; /* [n_layers]: the numbering of layer i's pools, pm[pool[i]] */
  clf_tensor *const *k, *const *v;
} clf__paged_step;

typedef struct clf__decoder {
  /* set by the family */
  /* The hidden states [B, n, D] the head reads, in *out (a workspace tensor). */
  clf_status (*body)(clf_model *m, const clf__step *s, clf_tensor **out);
  /* Optional, before the caches are made: an encoder-decoder runs its
   * encoder on enc_ids / enc_mask [B, Ls] (already expanded for beams). */
  clf_status (*prepare)(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids, const clf_array *enc_mask);
  void (*release)(clf_model *m); /* optional: frees what prepare made */
  clf__ws *ws;                   /* the workspace the body and head use */
  clf_tensor *head, *head_bias;  /* [V, D] and [V] or NULL */
  float softcap;                 /* > 0: logits = softcap * tanh(logits / softcap) (Gemma 2's final soft-capping) */
  size_t V, D;                   /* logits' vocabulary, hidden width */
  size_t kv_heads, dh;           /* the self-attention caches' [B, kv_heads, cap, dh] */
  size_t limit;                  /* the longest sequence */
  const char *limit_key;         /* the config key it comes from (messages) */
  int need_pos;                  /* forward passes get position_ids 0..L-1 when not given */
  const char *no_engine;         /* why the engine (paged, many sequences) cannot run it; NULL: it can */
  /* [kv.n_layers] or NULL: each layer's self-attention sees at most the
   * last kv_windows[i] positions (0: all of them), so the engine keeps
   * only that many of a sequence's positions for it */
  const size_t *kv_windows;
  /* Non-zero: generation feeds the whole sequence again, the caches
   * dropped, at the step whose new position is this one (Phi-3's longrope
   * switching to its long factors: transformers re-encodes there) */
  size_t refeed_at;
  /* the runtime's */
  clf__kv_cache kv;
  clf_tensor *step; /* i64 [B * 3 cap] while generating: a step's ids, positions and mask */
  /* step's bytes on the host, written to it without a wait (the host
   * would otherwise sleep through the device's copy before a step's first
   * launch), and that write's event until it is waited for */
  int64_t *step_host;
  cl_event step_written;
  unsigned long owner; /* the conversation whose tokens the cache holds (clf__generate_continue), 0: none */
} clf__decoder;

/* The inputs of a decoder-only model: input_ids, attention_mask, position_ids. */
extern const char *const clf__decoder_inputs[3];

/* Whether a decoder's f32 weights are stored [in, out] on ctx's device
 * (clf__block_spec.in_out_f32): on the GPU class, whose matrix-vector
 * kernel (skinny_t) reads that layout coalesced at decoding (a warp's
 * loads of one weight row are adjacent) and whose CLBlast reads it in
 * place at prefill, without the transposing copy [out, in] costs; on
 * CPUs [out, in], whose rows one work-item streams: on PoCL one row times
 * a 3072 x 768 weight took 0.41 ms [out, in] against 0.84 ms [in, out],
 * whose 12 KiB row stride the prefetcher does not follow.  The GEMM shapes
 * the families list (clf_model_gemm_shapes) are the CPU layout's. */
int clf__decoder_in_out(const clf_context *ctx);

/* Attaches d (inside the family's struct) to m, its caches for n_layers
 * (cross-attention ones too when `cross`): m can generate from here on. */
clf_status clf__decoder_attach(clf_model *m, clf__decoder *d, size_t n_layers, int cross);
/* The LM head: `name` [V, D] unless tied; tied, the embedding table
 * `table` (stored as `table_name`): itself in f32, a copy in another
 * weight type (the lookup stays f32).  Under CLF_Q4_K the head is stored
 * as under CLF_Q6_K, as ggml's k-quant files keep their output.weight. */
clf_status clf__decoder_load_head(clf_model *m, const clf__weights *w, const char *name, int tied,
                                  const char *table_name, clf_tensor *table);

/* Generation (generate.c): begin for B rows with room for cap positions;
 * step feeds ids [B, n] at positions pos [B, n] with the padding mask
 * [B, past + n] (NULL: none) and gets the last position's logits [B, V];
 * reorder makes row r of every cache row idx[r]; end frees the caches. */
clf_status clf__decoder_begin(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                              const clf_array *enc_mask);
clf_status clf__decoder_step(clf_model *m, size_t n, const int64_t *ids, const int64_t *pos, const int64_t *mask,
                             float *logits);
clf_status clf__decoder_reorder(clf_model *m, const int64_t *idx);
void clf__decoder_end(clf_model *m);
/* Whether the caches are active and hold conversation `owner`'s tokens
 * (no generate() or forward pass has run since). */
int clf__decoder_owned(const clf_model *m, unsigned long owner);

/* A conversation's turn (chat.c): the caches already hold the first `keep`
 * tokens of the prompt (the conversation `owner` put there; 0: none, or not
 * owner's any more: they are made anew for `cap` positions).  The turn
 * decodes one row as clf_model_generate does and leaves the caches holding
 * every fed token: the sequence less its last token. */
typedef struct clf__gen_cont {
  size_t keep, cap;
  unsigned long owner;
  size_t kept; /* set: the positions the turn found in the cache (keep, or 0 when they were made anew) */
} clf__gen_cont;
clf_status clf__generate_continue(clf_model *m, const clf_array *input_ids, const clf_generate_options *o,
                                  clf__gen_cont *cont, clf_array *sequences);
/* One sequence's decoding rules (generate.c), as clf_model_generate
 * applies them to a row: the settings of o over the checkpoint's, its
 * end-of-sequence tokens, its sampler seeded from o->seed (0: fresh), and
 * the length it stops at: the prompt's prompt_len plus o->max_new_tokens,
 * or `limit` (the model's positions) when that is unset or further
 * (by_limit then 1).  Failures are recorded on ctx (NULL: the calling
 * thread's record, as the engine's submissions from other threads need). */
typedef struct clf__gen_row {
  clf__gen_params p;
  clf__rng rng;
  long eos[8];
  size_t n_eos;
  size_t max_len;
  int by_limit;
} clf__gen_row;
clf_status clf__gen_row_init(clf_model *m, clf_context *ctx, const clf_generate_options *o, size_t prompt_len,
                             size_t limit, clf__gen_row *r);
/* The next token after the n tokens tok, from the logits s [vocab]
 * (overwritten: the processors and warpers run on them); tmp: vocab entries. */
int64_t clf__gen_row_next(const clf_model *m, clf__gen_row *r, const int64_t *tok, size_t n, float *s,
                          clf__scored *tmp);
int clf__gen_row_eos(const clf__gen_row *r, int64_t t);

/* end (the step buffer and what prepare made included), and the cache
 * arrays freed (clf_model_destroy; m->dec NULL: nothing). */
void clf__decoder_free(clf_model *m);

/* A decoder-only forward pass: the inputs (indexed as clf__decoder_inputs)
 * checked, *B, *L and *max_pos set; then run through the body without the
 * cache, *out its hidden states [B, L, D]. */
clf_status clf__decoder_check(clf_model *m, const clf__inputs in, size_t *B, size_t *L, int64_t *max_pos);
clf_status clf__decoder_forward(clf_model *m, const clf__inputs in, size_t B, size_t L, int64_t max_pos,
                                clf_tensor **out);
/* logits [.., V] = the LM head (its bias and soft-capping included) of
 * hidden states x [.., D], on ctx's queue. */
clf_status clf__decoder_head(clf_model *m, clf_context *ctx, const clf_tensor *x, clf_tensor *logits);
/* logits [B, L, V] of hidden states a [B, L, D] through the head, downloaded into res. */
clf_status clf__decoder_logits(clf_model *m, const clf_tensor *a, clf_array *res);

/* The residual stream h and its normed copy a [B, n, D] for a body. */
clf_status clf__decoder_stream(clf_model *m, const clf__step *s, clf_tensor **h, clf_tensor **a);
/* n pre-LN layers on h (embedded): a = ln_self of the first on entry, the
 * cache used when s->cached; on exit a = final(h). */
clf_status clf__decoder_stack(clf_model *m, const clf__layer *layers, size_t n, const clf__ln *final,
                              const clf__step *s, const clf_attention_mask *mask, const clf__rotary *rot,
                              clf_tensor *h, clf_tensor *a);

#endif /* CLF_DECODER_H */
