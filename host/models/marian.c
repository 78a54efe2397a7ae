/* marian.c - MarianModel / MarianMTModel, the original encoder-decoder
 * Transformer: scaled token embeddings + sinusoidal positions, N post-LN
 * encoder layers, M post-LN decoder layers (causal self-attention with a KV
 * cache, cross-attention with K/V computed once), tied LM head + final bias.
 */
#include "decoder.h"
#include "family.h"

#include <limits.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct marian {
  clf__decoder dec;    /* the runtime's: head [Vd, D] lm_head.weight (tied to dec_emb when absent),
                        * head_bias final_logits_bias; per decoder layer cross K/V [B, H, Ls, Dh] and
                        * self K/V [B, H, cap, Dh] */
  size_t V, Vd, D, P, n_enc, n_dec;
  float emb_scale;     /* sqrt(d_model) with scale_embedding, else 1 */
  clf_tensor *enc_emb; /* [V, D] shared / encoder.embed_tokens */
  clf_tensor *dec_emb; /* [Vd, D] shared / decoder.embed_tokens */
  clf_tensor *enc_pos, *dec_pos; /* [P, D] stored embed_positions, or NULL: sinusoids (HALVES) */
  clf__layer *encoder, *decoder; /* the layers */
  int lm;              /* MarianMTModel: logits */
  clf_tensor *enc_h, *enc_mask; /* generation: encoder states, source mask */
} marian;

static const char *const marian_inputs[] = {"input_ids", "attention_mask", "decoder_input_ids",
                                            "decoder_attention_mask"};
static const char *const mt_outputs[] = {"logits", "encoder_last_hidden_state"};
static const char *const base_outputs[] = {"last_hidden_state", "encoder_last_hidden_state"};
enum { IN_IDS, IN_MASK, IN_DEC, IN_DEC_MASK };

/* What prepare made. */
static void marian_release(clf_model *m) {
  marian *mm = m->impl;
  clf_tensor_destroy(mm->enc_h);
  clf_tensor_destroy(mm->enc_mask);
  mm->enc_h = mm->enc_mask = NULL;
}

/* h = emb[ids] * scale + PE(start..): token embedding and positions. */
static clf_status embed(clf_model *m, const clf_tensor *table, const clf_tensor *pos_table, const clf_tensor *ids,
                        size_t start, clf_tensor *h) {
  marian *mm = m->impl;
  clf_status st = clf_embedding(m->ctx, table, ids, mm->emb_scale, 0, h, NULL);
  if (st != CLF_OK) return st;
  if (pos_table) return clf_position_embedding(m->ctx, pos_table, start, 1, h, NULL);
  return clf_sinusoidal_embedding(m->ctx, CLF_SINUSOID_HALVES, start, 1, h, NULL);
}

/* encoder: embed -> N x post-LN layer; h [B, Ls, D] */
static clf_status encode(clf_model *m, const clf_tensor *ids, const clf_tensor *mask, clf_tensor *h) {
  marian *mm = m->impl;
  clf_status st;
  if ((st = embed(m, mm->enc_emb, mm->enc_pos, ids, 0, h)) != CLF_OK) return st;
  clf_attention_mask am = {mask, 0, NULL};
  clf__layer_io io = {&am, NULL, NULL, NULL, NULL};
  for (size_t i = 0; i < mm->n_enc; i++)
    if ((st = clf__layer_forward(m->ctx, &mm->encoder[i], 0, NULL, h, NULL, &io, &m->ws)) != CLF_OK) return st;
  return CLF_OK;
}

/* decoder: embed at positions past.. -> M x post-LN layer with cross-attention
 * to enc [B, Ls, D]; h [B, n, D].  Self K/V go to the cache when `cached`. */
static clf_status decode(clf_model *m, const clf_tensor *ids, size_t past, const clf_tensor *self_mask, int cached,
                         const clf_tensor *enc, const clf_tensor *enc_mask, clf_tensor **out) {
  marian *mm = m->impl;
  clf_context *ctx = m->ctx;
  clf__kv_cache *kv = &mm->dec.kv;
  const size_t B = enc->shape[0], Ls = enc->shape[1];
  clf_tensor *h;
  clf_status st;
  if ((st = clf__ws_get(ctx, &m->ws2, CLF__WS_H, CLF_F32, 3, (size_t[]){B, ids->shape[1], mm->D}, &h)) != CLF_OK ||
      (st = embed(m, mm->dec_emb, mm->dec_pos, ids, past, h)) != CLF_OK)
    return st;
  clf_attention_mask sm = {self_mask, 1, NULL}, cm = {enc_mask, 0, NULL};
  for (size_t i = 0; i < mm->n_dec; i++) {
    const clf__attn *ca = &mm->decoder[i].cross;
    clf__kv skv = clf__kv_cache_self(kv, i, past), ckv;
    if ((st = clf__kv_cache_cross(ctx, kv, i, (size_t[]){B, ca->heads, Ls, ca->dh}, &ckv)) != CLF_OK) return st;
    clf__layer_io io = {&sm, cached ? &skv : NULL, enc, &cm, &ckv, NULL};
    if ((st = clf__layer_forward(ctx, &mm->decoder[i], 0, NULL, h, NULL, &io, &m->ws2)) != CLF_OK) return st;
  }
  kv->cross_ready = cached; /* generation reuses the cross K/V from here on */
  *out = h;
  return CLF_OK;
}

/* A generation step: decoder positions are past.. (generate passes no
 * decoder mask). */
static clf_status marian_body(clf_model *m, const clf__step *s, clf_tensor **out) {
  marian *mm = m->impl;
  return decode(m, s->ids, s->past, NULL, s->cached, mm->enc_h, mm->enc_mask, out);
}

static clf_status marian_run(clf_model *m, const clf__inputs in, const int *want, clf_array *res) {
  static const char op[] = "clf_model_run";
  clf_context *ctx = m->ctx;
  marian *mm = m->impl;
  clf_status st;
  size_t B = 0, Ls = 0, Ld = 0;
  if (!in[IN_IDS] || !in[IN_DEC])
    return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: marian needs inputs \"input_ids\" and \"decoder_input_ids\" "
                     "(inputs: input_ids, attention_mask, decoder_input_ids, decoder_attention_mask)", op);
  if ((st = clf__check_ids(m, in[IN_IDS], "input_ids", &B, &Ls)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__check_ids(m, in[IN_MASK], "attention_mask", &B, &Ls)) != CLF_OK) return st;
  if ((st = clf__check_ids(m, in[IN_DEC], "decoder_input_ids", &B, &Ld)) != CLF_OK) return st;
  if (in[IN_DEC_MASK] && (st = clf__check_ids(m, in[IN_DEC_MASK], "decoder_attention_mask", &B, &Ld)) != CLF_OK)
    return st;
  if (Ls > mm->P || Ld > mm->P) /* stored or sinusoidal: transformers' table has P rows */
    return clf__fail(ctx, CLF_E_SHAPE, "%s: %zu positions exceed max_position_embeddings %zu", op,
                     Ls > Ld ? Ls : Ld, mm->P);
  if ((st = clf__check_id_range(m, op, in[IN_IDS], "input_ids", mm->V)) != CLF_OK ||
      (st = clf__check_id_range(m, op, in[IN_DEC], "decoder_input_ids", mm->Vd)) != CLF_OK)
    return st;
  clf__decoder_end(m);
  mm->dec.kv.cross_ready = 0;
  clf_tensor *ids, *mask = NULL, *dids, *dmask = NULL, *eh, *dh;
  if ((st = clf__upload_ids(m, &m->ws, CLF__WS_IDS, in[IN_IDS], B, Ls, 0, &ids)) != CLF_OK) return st;
  if (in[IN_MASK] && (st = clf__upload_ids(m, &m->ws, CLF__WS_MASK, in[IN_MASK], B, Ls, 1, &mask)) != CLF_OK)
    return st;
  if ((st = clf__upload_ids(m, &m->ws2, CLF__WS_IDS, in[IN_DEC], B, Ld, 0, &dids)) != CLF_OK) return st;
  if (in[IN_DEC_MASK] &&
      (st = clf__upload_ids(m, &m->ws2, CLF__WS_MASK, in[IN_DEC_MASK], B, Ld, 1, &dmask)) != CLF_OK)
    return st;
  if ((st = clf__ws_get(ctx, &m->ws, CLF__WS_ENC, CLF_F32, 3, (size_t[]){B, Ls, mm->D}, &eh)) != CLF_OK) return st;
  if ((st = encode(m, ids, mask, eh)) != CLF_OK) return st;
  if ((st = decode(m, dids, 0, dmask, 0, eh, mask, &dh)) != CLF_OK) return st;
  if (want[1] && (st = clf__download(m, eh, "encoder_last_hidden_state", &res[1])) != CLF_OK) return st;
  if (want[0] && !mm->lm) return clf__download(m, dh, "last_hidden_state", &res[0]);
  return want[0] ? clf__decoder_logits(m, dh, &res[0]) : CLF_OK;
}

/* Runs the encoder on the (already beam-expanded) source. */
static clf_status marian_prepare(clf_model *m, size_t B, size_t cap, const clf_array *enc_ids,
                                 const clf_array *enc_mask) {
  clf_context *ctx = m->ctx;
  marian *mm = m->impl;
  clf_status st;
  (void)cap; /* checked by the runtime */
  mm->dec.kv.cross_ready = 0;
  const size_t Ls = enc_ids->shape[1];
  if (Ls > mm->P)
    return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_model_generate: the source's %zu positions exceed "
                     "max_position_embeddings %zu", Ls, mm->P);
  clf_tensor *ids;
  if ((st = clf__upload_ids(m, &m->ws, CLF__WS_IDS, enc_ids, B, Ls, 0, &ids)) != CLF_OK) return st;
  if (enc_mask) {
    if ((st = clf_tensor_create(ctx, enc_mask->dtype, 2, (size_t[]){B, Ls}, &mm->enc_mask)) != CLF_OK) return st;
    if ((st = clf_tensor_upload(ctx, mm->enc_mask, enc_mask->data, B * Ls * clf_dtype_size(enc_mask->dtype))) !=
        CLF_OK)
      return st;
  }
  if ((st = clf_tensor_create(ctx, CLF_F32, 3, (size_t[]){B, Ls, mm->D}, &mm->enc_h)) != CLF_OK) return st;
  return encode(m, ids, mm->enc_mask, mm->enc_h);
}

/* the weights of encoder.layers.N. / decoder.layers.N. (cross rows: decoder only) */
static const clf__weight_row marian_layer_rows[] = {
    CLF__QKV(clf__layer, self, "self_attn.%s_proj", YES, "q", "k", "v"), /* 3 x [D, D] */
    CLF__LIN(clf__layer, self.o, "self_attn.out_proj", D, D, YES), /* [D, D] */
    CLF__XLIN(clf__layer, cross.q, "encoder_attn.q_proj"),         /* [D, D] */
    CLF__XKV(clf__layer, cross, "encoder_attn.%s_proj", "k", "v"), /* 2 x [D, D] */
    CLF__XLIN(clf__layer, cross.o, "encoder_attn.out_proj"),       /* [D, D] */
    CLF__LIN(clf__layer, mlp.fc1, "fc1", F, D, YES),               /* [F, D] */
    CLF__LIN(clf__layer, mlp.fc2, "fc2", D, F, YES),               /* [D, F] */
    CLF__LN(clf__layer, ln_self, "self_attn_layer_norm"),
    CLF__XLN(clf__layer, ln_cross, "encoder_attn_layer_norm"),
    CLF__LN(clf__layer, ln_mlp, "final_layer_norm"),
};

/* The rows of an encoder layer (f32 weights stored as the device prefers
 * for many rows: clf__linear_prefers_in_out) or a decoder layer (cross
 * rows too; [in, out] where the device's one-row steps read it as fast:
 * clf__decoder_in_out); in_out says which layout this one gets. */
static clf__block_spec marian_spec(size_t D, size_t F, int cross, int in_out) {
  clf__block_spec s = {.eps = 1e-5f, .qkv_bias = 1, .cross = cross, .layout = CLF_WEIGHT_OUT_IN, .in_out_f32 = in_out};
  clf__spec_dims(&s, D, F, D, D);
  return s;
}

static clf_status load_layer(clf_model *m, const clf__weights *w, const char *lp, int cross, size_t D, size_t H,
                             size_t F, clf_activation act, clf__layer *l) {
  const clf__block_spec spec =
      marian_spec(D, F, cross, cross ? clf__decoder_in_out(m->ctx) : clf__linear_prefers_in_out(m->ctx));
  l->has_cross = cross;
  l->mlp.act = act;
  for (int a = 0; a <= cross; a++) {
    clf__attn *at = a ? &l->cross : &l->self;
    at->heads = H, at->dh = D / H, at->scale = 1.0f / sqrtf((float)(D / H));
  }
  return clf__load_rows(m->ctx, w, &m->params, lp, marian_layer_rows, CLF__ARRAY_LEN(marian_layer_rows), &spec, l);
}

/* config.json keys */
typedef struct marian_dims {
  long V, Vd, D, P, Ne, Nd, He, Hd, Fe, Fd;
  int scale_emb, share;
  const char *act;
} marian_dims;
static const clf__config_key marian_keys[] = {
    CLF__REQ(marian_dims, V, "vocab_size", INT),
    CLF__OPT(marian_dims, Vd, "decoder_vocab_size", INT, (double)LONG_MIN), /* LONG_MIN: vocab_size */
    CLF__REQ(marian_dims, D, "d_model", INT),
    CLF__REQ(marian_dims, P, "max_position_embeddings", INT),
    CLF__REQ(marian_dims, Ne, "encoder_layers", INT),
    CLF__REQ(marian_dims, Nd, "decoder_layers", INT),
    CLF__REQ(marian_dims, He, "encoder_attention_heads", INT),
    CLF__REQ(marian_dims, Hd, "decoder_attention_heads", INT),
    CLF__REQ(marian_dims, Fe, "encoder_ffn_dim", INT),
    CLF__REQ(marian_dims, Fd, "decoder_ffn_dim", INT),
    CLF__OPT(marian_dims, scale_emb, "scale_embedding", BOOL, 0),
    CLF__OPT(marian_dims, share, "share_encoder_decoder_embeddings", BOOL, 1),
    CLF__OPT_STR(marian_dims, act, "activation_function", "gelu"),
};

static long marian_dec_vocab(const marian_dims *d) { return d->Vd == LONG_MIN ? d->V : d->Vd; }

/* both stacks' rows, the decoder over as many rows as the encoder; the head */
static void marian_gemms(const void *dims, const clf__config *c, size_t T, clf__gemm_list *l) {
  const marian_dims *d = dims;
  const clf__block_spec enc = marian_spec((size_t)d->D, (size_t)d->Fe, 0, 1);
  const clf__block_spec dec = marian_spec((size_t)d->D, (size_t)d->Fd, 1, 0);
  clf__rows_gemms(marian_layer_rows, CLF__ARRAY_LEN(marian_layer_rows), &enc, T, d->Ne, l);
  clf__rows_gemms(marian_layer_rows, CLF__ARRAY_LEN(marian_layer_rows), &dec, T, d->Nd, l);
  if (clf__config_has_arch(c, "MarianMTModel")) clf__gemm_add(l, T, marian_dec_vocab(d), d->D, 1, 1);
}

/* The embeddings: shared [V, D] (or the encoder's / decoder's own
 * embed_tokens), and the stored sinusoid tables [P, D] when present (else
 * they are computed). */
static clf_status marian_load_embeddings(clf_model *m, marian *mm, const clf__weights *w, const char *pf, int share) {
  clf_context *ctx = m->ctx;
  clf_status st;
  const size_t d = mm->D, V = mm->V, Vd = mm->Vd, P = mm->P;
  char n1[256], n2[256];
  clf__params *p = &m->params;
  const char *const enc_names[] = {clf__wn(n1, sizeof n1, pf, "shared.weight"),
                                   clf__wn(n2, sizeof n2, pf, "encoder.embed_tokens.weight"), NULL};
  const char *en = clf__weights_pick(w, enc_names);
  if ((st = clf__param(ctx, w, p, en ? en : n1, 2, (size_t[]){V, d}, &mm->enc_emb)) != CLF_OK) return st;
  mm->dec_emb = mm->enc_emb;
  char dn[256];
  if (share) snprintf(dn, sizeof dn, "%s", en ? en : n1);
  else clf__wn(dn, sizeof dn, pf, "decoder.embed_tokens.weight");
  if (!share && (st = clf__param(ctx, w, p, dn, 2, (size_t[]){Vd, d}, &mm->dec_emb)) != CLF_OK) return st;
  /* MarianMTModel's LM head: lm_head.weight, tied to the decoder's embeddings when absent */
  if (mm->lm && (st = clf__decoder_load_head(m, w, "lm_head.weight", !clf__weights_has(w, "lm_head.weight"), dn,
                                             mm->dec_emb)) != CLF_OK)
    return st;
  if (clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "encoder.embed_positions.weight")) &&
      (st = clf__param(ctx, w, p, n1, 2, (size_t[]){P, d}, &mm->enc_pos)) != CLF_OK)
    return st;
  if (clf__weights_has(w, clf__wn(n1, sizeof n1, pf, "decoder.embed_positions.weight")) &&
      (st = clf__param(ctx, w, p, n1, 2, (size_t[]){P, d}, &mm->dec_pos)) != CLF_OK)
    return st;
  return CLF_OK;
}

/* MarianMTModel's final_logits_bias [1, Vd], when present. */
static clf_status marian_load_bias(clf_model *m, marian *mm, const clf__weights *w) {
  clf_context *ctx = m->ctx;
  clf__params *p = &m->params;
  clf_tensor *b2, *b1;
  clf_status st;
  if (!clf__weights_has(w, "final_logits_bias")) return CLF_OK;
  if ((st = clf__param(ctx, w, p, "final_logits_bias", 2, (size_t[]){1, mm->Vd}, &b2)) != CLF_OK ||
      (st = clf_tensor_view(b2, 0, 1, (size_t[]){mm->Vd}, &b1)) != CLF_OK ||
      (st = clf__params_add(ctx, p, b1)) != CLF_OK)
    return st;
  mm->dec.head_bias = b1;
  return CLF_OK;
}

static clf_status marian_load(clf_model *m, const void *dims, const clf__config *c, const clf__weights *w) {
  const marian_dims *dm = dims;
  clf_context *ctx = m->ctx;
  clf_status st;
  const long V = dm->V, D = dm->D, P = dm->P, Ne = dm->Ne, Nd = dm->Nd, He = dm->He, Hd = dm->Hd, Fe = dm->Fe,
             Fd = dm->Fd;
  const int scale_emb = dm->scale_emb, share = dm->share;
  const char *act_name = dm->act;
  long Vd = marian_dec_vocab(dm);
  clf_activation act;
  (void)c;
  if (V <= 0 || Vd <= 0 || D <= 0 || He <= 0 || Hd <= 0 || D % He || D % Hd || Ne < 0 || Nd < 0 || Fe <= 0 ||
      Fd <= 0 || P <= 0)
    return clf__fail(ctx, CLF_E_FORMAT, "clf_model_load: marian config has invalid sizes (vocab_size %ld, d_model "
                     "%ld, attention heads %ld/%ld, ffn dims %ld/%ld)", V, D, He, Hd, Fe, Fd);
  if (clf_activation_from_name(act_name, &act) != CLF_OK)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "clf_model_load: marian activation_function \"%s\" is not supported",
                     act_name);
  if (share) Vd = V;
  marian *mm = clf__model_calloc(m, 1, sizeof *mm);
  if (!mm || !(mm->encoder = clf__model_calloc(m, (size_t)Ne + 1, sizeof *mm->encoder)) ||
      !(mm->decoder = clf__model_calloc(m, (size_t)Nd + 1, sizeof *mm->decoder)))
    return CLF_E_OUT_OF_MEMORY;
  m->impl = mm;
  mm->V = V, mm->Vd = Vd, mm->D = D, mm->P = P, mm->n_enc = Ne, mm->n_dec = Nd;
  mm->dec = (clf__decoder){.body = marian_body, .prepare = marian_prepare, .release = marian_release, .ws = &m->ws2,
                           .V = Vd, .D = D, .kv_heads = Hd, .dh = D / Hd, .limit = P,
                           .limit_key = "max_position_embeddings"};
  if ((st = clf__decoder_attach(m, &mm->dec, (size_t)Nd, 1)) != CLF_OK) return st;
  mm->emb_scale = scale_emb ? sqrtf((float)D) : 1.0f;
  const size_t d = D;
  const char *const probe[] = {"model.shared.weight", "model.encoder.embed_tokens.weight", "shared.weight",
                               "encoder.embed_tokens.weight", NULL};
  const char *found = clf__weights_pick(w, probe);
  const char *pf = found && strncmp(found, "model.", 6) == 0 ? "model." : "";
  mm->lm = *pf != 0;
  m->run = marian_run;
  m->in_names = marian_inputs;
  m->n_in = 4;
  m->out_names = mm->lm ? mt_outputs : base_outputs;
  m->n_out = 2;
  m->vocab = Vd;
  m->in_vocab = V;
  m->max_positions = P;
  m->is_encdec = 1;
  if ((st = marian_load_embeddings(m, mm, w, pf, share)) != CLF_OK) return st;
  for (long i = 0; i < Ne; i++) {
    char lp[128];
    clf__wn(lp, sizeof lp, pf, "encoder.layers.%ld.", i);
    if ((st = load_layer(m, w, lp, 0, d, He, Fe, act, &mm->encoder[i])) != CLF_OK) return st;
  }
  for (long i = 0; i < Nd; i++) {
    char lp[128];
    clf__wn(lp, sizeof lp, pf, "decoder.layers.%ld.", i);
    if ((st = load_layer(m, w, lp, 1, d, Hd, Fd, act, &mm->decoder[i])) != CLF_OK) return st;
  }
  if (mm->lm && (st = marian_load_bias(m, mm, w)) != CLF_OK) return st;
  return CLF_OK;
}

/* MarianModel: last_hidden_state, encoder_last_hidden_state; MarianMTModel:
 * logits, encoder_last_hidden_state. */
const clf__family clf__marian_family = {"marian", {"MarianModel", "MarianMTModel", NULL}, marian_keys,
                                        CLF__ARRAY_LEN(marian_keys), sizeof(marian_dims), marian_load, marian_gemms};
