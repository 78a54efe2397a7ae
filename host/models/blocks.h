/* blocks.h - the Transformer blocks every model family is wired from, with
 * what the families differ in as parameters: layer norm or RMS norm, the
 * norm before or after each branch, multi-head or grouped-query attention
 * (with an optional rotary step), a plain or gated MLP, biases or none.
 * The layer forward, and reusable activation workspaces.
 */
#ifndef CLF_BLOCKS_H
#define CLF_BLOCKS_H

#include <stddef.h>

#include "params.h"

/* LayerNorm (g, b) or, with rms, RMSNorm (g only). */
typedef struct clf__ln {
  clf_tensor *g, *b; /* [D]; b NULL for RMS */
  float eps;
  int rms;
} clf__ln;

/* Attention weights: one fused qkv [(H + 2 Hkv) Dh, D] split into heads
 * (q, k, v concatenated at load where the checkpoint has them apart), or
 * for cross-attention q [H Dh, D] and a fused kv [2 H Dh, D] over the
 * encoder states; o [D, H Dh].  kv_heads < heads: grouped-query attention
 * (0: heads). */
typedef struct clf__attn {
  clf__linear qkv, q, kv, o;
  size_t heads, kv_heads, dh;
  float scale; /* 1/sqrt(dh) unless the family scales otherwise */
  /* Self-attention: RMSNorm [dh] of each query and each key head, after
   * the projection and before the rotary step; g NULL: none. */
  clf__ln q_norm, k_norm;
} clf__attn;

/* y = fc2(act(fc1(x))), or gated (SwiGLU and kin): fc1 is gate and up
 * fused [2F, D], y = fc2(act(gate) * up). */
typedef struct clf__mlp {
  clf__linear fc1, fc2;
  clf_activation act;
  int gated;
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
  /* pre-LN only, g NULL where absent: a norm of the self-attention's and of
   * the MLP's output before the residual add (the "sandwich" of Gemma 2 and
   * 3): h += post_self(SA(a)); h += post_mlp(MLP(a)). */
  clf__ln post_self, post_mlp;
  /* Non-zero: this layer's self-attention sees only the last `window`
   * positions (a sliding-window layer among full ones; the mask's own
   * window otherwise), rotated at the rotary step's local frequencies
   * where it has them. */
  size_t window;
} clf__layer;

/* Workspace slots: tensors re-created only when their shape changes, so a
 * forward pass allocates once per (batch, length).  Each owner declares its
 * own slots: the blocks the first ones (here), the model runtime the next
 * (model.h), and a family its own from CLF__WS_FAMILY on (in its file), so
 * no one keeps a tensor in a slot that another overwrites. */
enum {
  CLF__WS_Q, CLF__WS_K, CLF__WS_V, CLF__WS_PROJ, CLF__WS_CTX, CLF__WS_HID, CLF__WS_SRC,
  CLF__WS_GLU,     /* a gated MLP's product */
  CLF__WS_PART,    /* one part's outputs of a linear stored in parts, over several rows */
  CLF__WS_BRANCH,  /* a layer's attention / MLP branch before the residual add */
  CLF__WS_BEAM,    /* beam reorder: the row indices */
  CLF__WS_REORDER, /* beam reorder: the gathered rows */
  CLF__WS_HEADNORM, /* q or k heads taken out of the projection to be normed */
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
  /* Non-NULL: k and v are the layer's block pools [NB, Hkv, block, Dh] of
   * a paged cache (the engine, engine.c), the step's rows described here:
   * each row's new key and value go to its slot, and its attention reads
   * its own sequence through the block table. */
  const clf__paged_meta *paged;
} clf__kv;

/* The rotary step of self-attention: q and k rotated by positions pos
 * [B, L] (i64) at the frequencies inv_freq [Dh / 2] on their way into heads. */
typedef struct clf__rotary {
  const clf_tensor *pos, *inv_freq;
  const clf_tensor *local_inv_freq; /* the sliding-window layers' own frequencies, or NULL: inv_freq */
  float scale;                      /* cos and sin times this (longrope's attention factor); 0: 1 */
} clf__rotary;

/* Whether a product of M rows over l may read x's 8-bit blocks
 * (clf__linear_reads_blocks over its weight or any of its parts; 0 for
 * an unused l, no weight). */
int clf__linear_reads(clf_context *ctx, const clf__linear *l, size_t M);
/* y [.., out] = act(x [.., in] W^T + b) for linear l: clf_linear, or for
 * a linear in parts one product a part into its columns of y (directly
 * for one row; over more, through the workspace and a column copy). */
clf_status clf__linear_run(clf_context *ctx, const clf_tensor *x, const clf__linear *l, clf_activation act,
                           clf__ws *ws, clf_tensor *y);

/* y [B, Lq, D] = MHA(x [B, Lq, D], src) with src = x (self) or the encoder
 * states (cross).  kv NULL: K/V go to workspace tensors.  rot NULL: no
 * rotary step.  out_bias not NULL: y is left without the output
 * projection's bias, which *out_bias gets (NULL: none) for the norm that
 * adds y to the residual stream (clf__ln_apply) to add. */
clf_status clf__attn_forward(clf_context *ctx, const clf__attn *a, const clf_tensor *x, const clf_tensor *src,
                             const clf__kv *kv, const clf_attention_mask *mask, const clf__rotary *rot,
                             clf__ws *ws, clf_tensor *y, const clf_tensor **out_bias);
/* The MLP (plain or gated) on x into y; out_bias as clf__attn_forward's,
 * for its second layer's bias. */
clf_status clf__mlp_forward(clf_context *ctx, const clf__mlp *m, const clf_tensor *x, clf__ws *ws, clf_tensor *y,
                            const clf_tensor **out_bias);

/* What a layer attends to besides itself. */
typedef struct clf__layer_io {
  const clf_attention_mask *self_mask;
  const clf__kv *self_kv;  /* NULL: no cache */
  const clf_tensor *enc;   /* encoder states [B, Ls, D] (cross-attention) */
  const clf_attention_mask *cross_mask;
  const clf__kv *cross_kv; /* NULL: computed into the workspace */
  const clf__rotary *rot;  /* NULL: no rotary step */
} clf__layer_io;

/* Runs a layer on the residual stream h [B, L, D].  pre_ln: `a` holds
 * ln_self(h) on entry and next_ln(h) on exit.  post_ln: a is scratch. */
/* Each of n layers' window into out [n]: its own, else `window` (the
 * stack's); 0 where it sees every position. */
void clf__layers_windows(const clf__layer *l, size_t n, size_t window, size_t *out);
clf_status clf__layer_forward(clf_context *ctx, const clf__layer *l, int pre_ln, const clf__ln *next_ln,
                              clf_tensor *h, clf_tensor *a, const clf__layer_io *io, clf__ws *ws);

/* y = LN(x + (res + res_bias)) (res NULL: LN(x); res_bias NULL: none),
 * the sum to sum_out when not NULL: layer norm or RMS norm as ln says.
 * res_bias is the bias of the layer that made res, left to this pass
 * (out_bias above) instead of one of its own. */
clf_status clf__ln_apply(clf_context *ctx, const clf__ln *ln, const clf_tensor *x, const clf_tensor *res,
                         const clf_tensor *res_bias, clf_tensor *sum_out, clf_tensor *y);

/* Sets t (f32) to zeros by an upload from the host, which every tool sees
 * as initialising the memory (Oclgrind does not track clEnqueueFillBuffer). */
clf_status clf__zero(clf_context *ctx, clf_tensor *t);

#endif
