/* blocks.h - the Transformer building blocks shared by every model family:
 * weights of a linear / layer norm / attention / MLP, the layer forward with
 * pre- or post-LN placement, and reusable activation workspaces.
 */
#ifndef CLF_BLOCKS_H
#define CLF_BLOCKS_H

#include <stddef.h>

#include "ops/ops.h"
#include "weights.h"

/* Every device tensor a model owns, destroyed together. */
typedef struct clf__params {
  clf_tensor **t;
  size_t n, cap;
  clf_dtype wtype; /* storage of the linear layers' weights (clf_model_options) */
  int simulate;    /* f32 weights rounded through wtype instead */
  void (*progress)(void *user, size_t done, size_t total); /* clf_model_options */
  void *progress_user;
  size_t done, total; /* f32 bytes loaded, and of the whole checkpoint */
} clf__params;
void clf__params_free(clf__params *p);
clf_status clf__params_add(clf_context *ctx, clf__params *p, clf_tensor *t);

/* Loads `name` with shape checking into the model's parameter list. */
clf_status clf__param(clf_context *ctx, const clf__weights *w, clf__params *p, const char *name, int ndim,
                      const size_t *shape, clf_tensor **out);

typedef struct clf__linear {
  clf_tensor *w; /* [out, in] in the params' wtype, or f32 [in, out] where layout says (clf__block_spec) */
  clf_tensor *b; /* [out] or NULL */
  clf_weight_layout layout;
} clf__linear;

typedef struct clf__ln {
  clf_tensor *g, *b; /* [D] */
  float eps;
} clf__ln;

/* Multi-head attention weights: one fused qkv [3D, D] (GPT-2's c_attn, or
 * q, k, v concatenated at load) split with clf_split_heads, or for
 * cross-attention q [D, D] and a fused kv [2D, D] over the encoder states. */
typedef struct clf__attn {
  clf__linear qkv, q, kv, o;
  size_t heads, dh;
  float scale; /* 1/sqrt(dh) */
} clf__attn;

typedef struct clf__mlp {
  clf__linear fc1, fc2;
  clf_activation act;
} clf__mlp;

/* One layer: self-attention, optional cross-attention, MLP, and their norms.
 * post-LN: h = ln1(h + SA(h)); h = ln2(h + CA(h)); h = ln3(h + MLP(h)).
 * pre-LN:  a = ln1(h) on entry; h += SA(a); a = ln2(h); h += CA(a); ...;
 *          h += MLP(a); a = next_ln(h) (the next layer's ln1 or the final one). */
typedef struct clf__layer {
  clf__attn self, cross;
  int has_cross;
  clf__mlp mlp;
  clf__ln ln_self, ln_cross, ln_mlp;
} clf__layer;

/* A linear layer's weight `wname` [out_f, in_f] (or [in_f, out_f] with
 * CLF_WEIGHT_IN_OUT, transposed here) as a device tensor [out_f, in_f] in
 * p->wtype, owned by p.  CLF_E_UNSUPPORTED, naming the tensor, when a block
 * type cannot hold it (in_f not a multiple of 32). */
clf_status clf__load_weight(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            size_t out_f, size_t in_f, clf_weight_layout layout, clf_tensor **out);
/* Host h [out_f, in_f] (weights a family assembled itself, e.g. q, k, v of
 * different widths fused into one GEMM) as linear l's weight [out_f, in_f]
 * in p->wtype, owned by p; l->b NULL.  Errors name `name`. */
clf_status clf__store_linear(clf_context *ctx, clf__params *p, const char *name, const float *h, size_t out_f,
                             size_t in_f, clf__linear *l);
/* Loaders: "%s" names resolved with the alternatives of clf__weights_pick. */
clf_status clf__load_linear(clf_context *ctx, const clf__weights *w, clf__params *p, const char *wname,
                            const char *bname, size_t out_f, size_t in_f, clf_weight_layout layout, clf__linear *l);
/* LayerNorm `prefix`.weight/.bias, or the legacy prefix.gamma/.beta. */
clf_status clf__load_ln(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                        float eps, clf__ln *ln);

/* A layer's weights as a table: each row a linear (NAME.weight [out, in]
 * and NAME.bias [out]) or a layer norm (NAME.weight/.bias [out]) stored at
 * byte offset `at` of the block struct, its sizes named by index into the
 * dims the caller gives (CLF__DIM_D model width, _F feed-forward, _3D). */
enum { CLF__DIM_D, CLF__DIM_F, CLF__DIM_3D, CLF__DIM_COUNT };
/* CLF__ROW_QKV / _KV: the separate q, k, v (or k, v) projections NAME.%s
 * of `parts`, concatenated at load into the clf__attn's qkv (or kv), so
 * that one GEMM makes them. */
enum { CLF__ROW_LINEAR, CLF__ROW_LN, CLF__ROW_QKV, CLF__ROW_KV };
enum { CLF__BIAS_YES, CLF__BIAS_NO, CLF__BIAS_QKV /* as config.json's qkv_bias */ };
typedef struct clf__weight_row {
  size_t at;
  const char *name;
  unsigned char kind, out, in, bias;
  unsigned char cross; /* 1: only in layers with cross-attention */
  const char *const *parts; /* QKV / KV rows: the names' "%s" parts */
} clf__weight_row;
#define CLF__LIN(S, f, name, o, i, bias) {offsetof(S, f), name, CLF__ROW_LINEAR, CLF__DIM_##o, CLF__DIM_##i, CLF__BIAS_##bias, 0, NULL}
#define CLF__XLIN(S, f, name) {offsetof(S, f), name, CLF__ROW_LINEAR, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 1, NULL}
#define CLF__QKV(S, f, name, bias, ...) \
  {offsetof(S, f), name, CLF__ROW_QKV, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_##bias, 0, (const char *const[]){__VA_ARGS__}}
#define CLF__XKV(S, f, name, ...) \
  {offsetof(S, f), name, CLF__ROW_KV, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 1, (const char *const[]){__VA_ARGS__}}
#define CLF__LN(S, f, name) {offsetof(S, f), name, CLF__ROW_LN, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 0, NULL}
#define CLF__XLN(S, f, name) {offsetof(S, f), name, CLF__ROW_LN, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 1, NULL}
typedef struct clf__block_spec {
  size_t dims[CLF__DIM_COUNT];
  float eps;
  int qkv_bias, cross;
  clf_weight_layout layout; /* the checkpoint's */
  /* f32 weights stored [in, out] (CLF_WEIGHT_IN_OUT): for layers that see
   * many rows at once (encoders), where CLBlast then copies no weight and a
   * few rows run the skinny_t kernel; not for decoders, whose one-row steps
   * run the skinny kernel on [out, in] (1.3-2x faster at one row). */
  int in_out_f32;
} clf__block_spec;
/* Loads every row (cross rows only with spec->cross) under `prefix` into
 * the block struct at `block`. */
clf_status clf__load_rows(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                          const clf__weight_row *rows, size_t n, const clf__block_spec *spec, void *block);

/* Workspace slots: tensors re-created only when their shape changes, so a
 * forward pass allocates once per (batch, length).  Each owner declares its
 * own slots: the blocks the first ones (here), the model runtime the next
 * (model.h), and a family its own from CLF__WS_FAMILY on (in its file), so
 * no one keeps a tensor in a slot that another overwrites. */
enum {
  CLF__WS_Q, CLF__WS_K, CLF__WS_V, CLF__WS_PROJ, CLF__WS_CTX, CLF__WS_HID, CLF__WS_SRC,
  CLF__WS_GLU,     /* a gated MLP's product */
  CLF__WS_BRANCH,  /* a layer's attention / MLP branch before the residual add */
  CLF__WS_BEAM,    /* beam reorder: the row indices */
  CLF__WS_REORDER, /* beam reorder: the gathered rows */
  CLF__WS_BLOCK_SLOTS,
  CLF__WS_COUNT = 32 /* slots in all */
};
typedef struct clf__ws {
  clf_tensor *t[CLF__WS_COUNT];
} clf__ws;
/* The slot's tensor with exactly this dtype and shape (re-created if not). */
clf_status clf__ws_get(clf_context *ctx, clf__ws *ws, int slot, clf_dtype dt, int ndim, const size_t *shape,
                       clf_tensor **out);
void clf__ws_free(clf__ws *ws);

/* Where an attention block's keys and values live: k, v [B, H, Lcap, Dh].
 * New rows are appended at `pos` unless `ready` (cross-attention K/V already
 * computed); attention then uses kv_len rows (0: all). */
typedef struct clf__kv {
  clf_tensor *k, *v;
  size_t pos;
  int ready;
} clf__kv;

/* y [B, Lq, D] = MHA(x [B, Lq, D], src) with src = x (self) or the encoder
 * states (cross).  kv NULL: K/V go to workspace tensors. */
clf_status clf__attn_forward(clf_context *ctx, const clf__attn *a, const clf_tensor *x, const clf_tensor *src,
                             const clf__kv *kv, const clf_attention_mask *mask, clf__ws *ws, clf_tensor *y);
/* y = fc2(act(fc1(x))). */
clf_status clf__mlp_forward(clf_context *ctx, const clf__mlp *m, const clf_tensor *x, clf__ws *ws, clf_tensor *y);

/* What a layer attends to besides itself. */
typedef struct clf__layer_io {
  const clf_attention_mask *self_mask;
  const clf__kv *self_kv;  /* NULL: no cache */
  const clf_tensor *enc;   /* encoder states [B, Ls, D] (cross-attention) */
  const clf_attention_mask *cross_mask;
  const clf__kv *cross_kv; /* NULL: computed into the workspace */
} clf__layer_io;

/* Runs a layer on the residual stream h [B, L, D].  pre_ln: `a` holds
 * ln_self(h) on entry and next_ln(h) on exit.  post_ln: a is scratch. */
clf_status clf__layer_forward(clf_context *ctx, const clf__layer *l, int pre_ln, const clf__ln *next_ln,
                              clf_tensor *h, clf_tensor *a, const clf__layer_io *io, clf__ws *ws);

/* x (+)= LN: the post-LN residual step h = LN(h + f). */
clf_status clf__ln_apply(clf_context *ctx, const clf__ln *ln, const clf_tensor *x, const clf_tensor *res,
                         clf_tensor *sum_out, clf_tensor *y);

/* Sets t (f32) to zeros by an upload from the host, which every tool sees
 * as initialising the memory (Oclgrind does not track clEnqueueFillBuffer). */
clf_status clf__zero(clf_context *ctx, clf_tensor *t);

/* Reorders the batch rows of a cache [N, ...]: row r becomes row idx[r]
 * (beam search), through a device gather into workspace and a copy back. */
clf_status clf__kv_reorder(clf_context *ctx, clf_tensor *cache, const int64_t *idx, clf__ws *ws);

#endif
