/* rows.h - a family's weights as data: each layer a table of rows (a
 * linear, a fused group of linears, a norm) stored into the block structs
 * of blocks.h, loaded by one walker, and walked again for the GEMMs of a
 * forward pass, so the two cannot drift apart.
 */
#ifndef CLF_ROWS_H
#define CLF_ROWS_H

#include "blocks.h"

/* Sizes a row names by index into its spec's dims: the model width, the
 * feed-forward width, 3 D (a checkpoint's own fused q, k, v), the query
 * heads' width H Dh, the key/value heads' Hkv Dh, one head's Dh (its
 * per-head norms; set by the family, 0 where it has none), and a
 * checkpoint's own fused projections: q, k, v (Q + 2 KV) and gate, up (2F). */
enum { CLF__DIM_D, CLF__DIM_F, CLF__DIM_3D, CLF__DIM_Q, CLF__DIM_KV, CLF__DIM_DH, CLF__DIM_QKV, CLF__DIM_2F, CLF__DIM_COUNT };
/* LINEAR: NAME.weight [out, in] (+ NAME.bias [out]) into a clf__linear.
 * FUSED: the linears NAME with "%s" each of `parts` concatenated along out
 * into one clf__linear, so that one GEMM makes them (q, k, v; gate, up).
 * LN: NAME.weight/.bias (or the legacy .gamma/.beta); RMS: NAME.weight;
 * both into a clf__ln. */
enum { CLF__ROW_LINEAR, CLF__ROW_FUSED, CLF__ROW_LN, CLF__ROW_RMS };
/* A row's bias: always, never, or as the spec's flag says. */
enum { CLF__BIAS_YES, CLF__BIAS_NO, CLF__BIAS_QKV, CLF__BIAS_ATTN, CLF__BIAS_MLP };
typedef struct clf__row_part {
  const char *name;
  unsigned char out; /* CLF__DIM_* */
} clf__row_part;
typedef struct clf__weight_row {
  size_t at;              /* byte offset in the block struct */
  const char *name;
  unsigned char kind, out, in, bias;
  unsigned char cross;    /* 1: only in layers with cross-attention */
  const clf__row_part *parts; /* FUSED: ended by a NULL name */
} clf__weight_row;

#define CLF__LIN(S, f, name, o, i, bias) \
  {offsetof(S, f), name, CLF__ROW_LINEAR, CLF__DIM_##o, CLF__DIM_##i, CLF__BIAS_##bias, 0, NULL}
#define CLF__XLIN(S, f, name) {offsetof(S, f), name, CLF__ROW_LINEAR, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 1, NULL}
#define CLF__PART(name, o) {name, CLF__DIM_##o}
#define CLF__FUSE(S, f, name, i, bias, ...)                                            \
  {offsetof(S, f), name, CLF__ROW_FUSED, 0, CLF__DIM_##i, CLF__BIAS_##bias, 0, \
   (const clf__row_part[]){__VA_ARGS__, {NULL, 0}}}
/* Self-attention's q, k, v parts into the clf__attn f's qkv. */
#define CLF__QKV(S, f, name, bias, q, k, v) \
  CLF__FUSE(S, f.qkv, name, D, bias, CLF__PART(q, Q), CLF__PART(k, KV), CLF__PART(v, KV))
/* Cross-attention's k, v parts into the clf__attn f's kv. */
#define CLF__XKV(S, f, name, k, v) \
  {offsetof(S, f.kv), name, CLF__ROW_FUSED, 0, CLF__DIM_D, CLF__BIAS_YES, 1, \
   (const clf__row_part[]){CLF__PART(k, Q), CLF__PART(v, Q), {NULL, 0}}}
#define CLF__LN(S, f, name) {offsetof(S, f), name, CLF__ROW_LN, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 0, NULL}
#define CLF__XLN(S, f, name) {offsetof(S, f), name, CLF__ROW_LN, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_YES, 1, NULL}
#define CLF__RMS(S, f, name) {offsetof(S, f), name, CLF__ROW_RMS, CLF__DIM_D, CLF__DIM_D, CLF__BIAS_NO, 0, NULL}
/* A per-head RMSNorm [Dh] (q_norm, k_norm of a clf__attn). */
#define CLF__HEAD_RMS(S, f, name) \
  {offsetof(S, f), name, CLF__ROW_RMS, CLF__DIM_DH, CLF__DIM_DH, CLF__BIAS_NO, 0, NULL}

/* What the rows of one layer are read with. */
typedef struct clf__block_spec {
  size_t dims[CLF__DIM_COUNT];
  float eps;
  int qkv_bias, attn_bias, mlp_bias; /* the BIAS_QKV / _ATTN / _MLP flags */
  int cross;                         /* load the cross rows */
  clf_weight_layout layout;          /* the checkpoint's */
  int in_out_f32;                    /* f32 weights stored [in, out] (clf__store_linear) */
} clf__block_spec;
/* The dims of a layer of width D, feed-forward F, query heads Q = H Dh
 * wide and key/value heads KV = Hkv Dh (both D for multi-head attention). */
void clf__spec_dims(clf__block_spec *s, size_t D, size_t F, size_t Q, size_t KV);

/* The spec of an encoder layer of width D, feed-forward F, multi-head
 * attention with q, k, v biases as qkv_bias says: nn.Linear [out, in],
 * stored [in, out] in f32 when in_out (clf__linear_prefers_in_out: an
 * encoder sees many rows at once; 1 for the device-independent GEMM
 * shapes). */
clf__block_spec clf__spec_encoder(size_t D, size_t F, float eps, int qkv_bias, int in_out);

/* Loads every row (cross rows only with spec->cross) under `prefix` into
 * the block struct at `block`. */
clf_status clf__load_rows(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix,
                          const clf__weight_row *rows, size_t n, const clf__block_spec *spec, void *block);
/* LayerNorm `prefix`.weight/.bias, or the legacy prefix.gamma/.beta. */
clf_status clf__load_ln(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                        float eps, clf__ln *ln);
/* RMSNorm `prefix`.weight. */
clf_status clf__load_rms(clf_context *ctx, const clf__weights *w, clf__params *p, const char *prefix, size_t d,
                         float eps, clf__ln *ln);

/* The GEMMs of a forward pass, merged by shape (the first `cap` kept, all
 * counted). */
typedef struct clf__gemm_list {
  clf_gemm_shape v[128];
  size_t n;
} clf__gemm_list;
/* y [rows, out] = x [rows, in] op(W): W [out, in] (trans_b) or [in, out]. */
void clf__gemm_add(clf__gemm_list *l, size_t rows, long out, long in, int trans_b, long count);
/* The GEMMs of `count` layers of these rows over T rows each: what
 * clf__load_rows would store, with its layout. */
void clf__rows_gemms(const clf__weight_row *rows, size_t n, const clf__block_spec *spec, size_t T, long count,
                     clf__gemm_list *l);

#endif /* CLF_ROWS_H */
