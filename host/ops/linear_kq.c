/* linear_kq.c - the integer path of clf_linear for ggml's k-quants (Q2_K to
 * Q6_K; issue 42): which variant a product runs and its launch of
 * kernels/linear.cl's skinny_kq / skinny_kqdot, over x's 8-bit blocks of
 * 32 that linear.c makes or finds held (the same blocks skinny_int reads).
 */
#include "ops.h"

#include <stdio.h>

int clf__kq_type(clf_dtype wt) {
  return wt == CLF_Q2_K || wt == CLF_Q3_K || wt == CLF_Q4_K || wt == CLF_Q5_K || wt == CLF_Q6_K;
}

enum { KQ_TL = 8 };

int clf__skinny_kq_variant(const clf_context *ctx, clf_dtype wt, size_t M, int dot, char *buf, size_t len) {
  if (!clf__kq_type(wt) || M < 1 || M > CLF__SKINNY_MAX_M || (dot && !ctx->caps.has_int_dot)) return 0;
  const size_t mmax = clf__int_mmax(M);
  return snprintf(buf, len, "linear.skinny_kq%s %s MMAX=%zu TN=%zu TL=%d", dot ? "dot" : "",
                  clf__weight_type_name(wt), mmax, clf__int_tn(mmax), KQ_TL) < (int)len;
}

int clf__kq_kind(clf_context *ctx, clf_dtype wt, int in_out, int aligned, size_t M, size_t K) {
  char pn[96], dn[96];
  if (in_out || !aligned || K % clf__dtype_block(wt) || !clf__skinny_kq_variant(ctx, wt, M, 0, pn, sizeof pn)) return -1;
  const int dot = clf__skinny_kq_variant(ctx, wt, M, 1, dn, sizeof dn);
  if (clf__validating(ctx))
    return dot && clf__variant_validating(ctx, dn) ? 1 : clf__variant_validating(ctx, pn) ? 0 : -1;
  int want_dot = 0;
  if (!clf__int_default_wanted(ctx, wt, M, &want_dot)) return -1;
  if (want_dot && dot && clf__variant_passed(ctx, dn)) return 1;
  return clf_variant_disabled(ctx, pn) ? -1 : 0;
}

void clf__kq_plan(size_t M, int kind, int act_pass, clf__plan *p) {
  p->path = CLF__LINEAR_INTK;
  p->kind = kind;
  p->mmax = clf__int_mmax(M);
  p->tile[0] = 1, p->tile[1] = clf__int_tn(p->mmax), p->tile[2] = KQ_TL;
  p->act_pass = M == 1 && act_pass;
}

clf_status clf__run_kq(clf_context *ctx, const clf__plan *p, const clf_tensor *x, const clf_tensor *w,
                       const clf_tensor *bias, clf_activation act, clf_tensor *y, size_t M, size_t N, size_t K,
                       cl_event *event) {
  const size_t tn = p->tile[1], tl = p->tile[2];
  char types[384], opts[512];
  clf__linear_type_opts(w->dtype, types, sizeof types);
  /* -cl-std=CL3.0 for the packed built-ins, as skinny_idot's build */
  snprintf(opts, sizeof opts, "%s -DINT_KERNEL=1 -DMMAX=%zu -DTN=%zu -DTL=%zu -DINT_DOT=%d%s%s", types, p->mmax, tn,
           tl, p->kind, p->act_pass ? " -DSKINNY_ACT_PASS=1" : "", p->kind ? " -cl-std=CL3.0" : "");
  const char *kname = p->kind ? "skinny_kqdot" : "skinny_kq";
  clf__kernel *k;
  clf_status st = clf__get_kernel(ctx, "linear", opts, kname, &k);
  if (st != CLF_OK) return st;
  if (k->max_wg < tl)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "kernel %s: the device allows %zu work-items of it, not %zu", kname,
                     k->max_wg, tl);
  cl_mem xq;
  cl_uint ds_off;
  if ((st = clf__linear_x_q8(ctx, x, M, K, &xq, &ds_off)) != CLF_OK) return st;
  const clf_tensor *bb = bias ? bias : x;
  cl_int has_bias = bias != NULL, act32 = (cl_int)act;
  cl_uint m32 = (cl_uint)M, n32 = (cl_uint)N, k32 = (cl_uint)K;
  st = clf__set_args(ctx, k, 16, CLF__ARG(xq), CLF__ARG(xq), CLF__ARG(ds_off), CLF__ARG(w->buf), CLF__ARG(w->buf),
                     CLF__ARG(w->buf), CLF__ARG(w->buf), CLF__TARG(bb), CLF__ARG(has_bias), CLF__ARG(act32),
                     CLF__TARG(y), CLF__ARG(m32), CLF__ARG(n32), CLF__ARG(k32));
  if (st != CLF_OK) return st;
  const size_t nt = (N + tn - 1) / tn, local[1] = {tl}, global[1] = {(nt + tl - 1) / tl * tl};
  const int pass = p->act_pass && act != CLF_ACT_NONE;
  if ((st = clf__launch(ctx, k, 1, global, local, pass ? NULL : event)) != CLF_OK || !pass) return st;
  return clf__bias_act(ctx, y, NULL, act, y, event);
}
