// shapes.cc - the GEMMs of one forward pass of a model, from its
// config.json: what `clformer probe --tune` searches CLBlast's parameters for.
#include "model.h"

#include <cjson/cJSON.h>

#include <cstring>
#include <vector>

namespace {

// ---- the GEMMs of a model ----
struct ShapeList {
  std::vector<clf_gemm_shape> v;
  // y [rows, out] = x [rows, in] op(W): W [out, in] (trans_b) or [in, out].
  void linear(size_t r, long out, long in, int trans_b, long count) {
    if (r == 0 || out <= 0 || in <= 0 || count <= 0) return;
    for (auto &s : v)
      if (s.m == r && s.n == (size_t)out && s.k == (size_t)in && s.trans_b == trans_b) {
        s.count += (unsigned)count;
        return;
      }
    v.push_back(clf_gemm_shape{r, (size_t)out, (size_t)in, 0, trans_b, (unsigned)count});
  }
};

bool has_architecture(const clf__config *c, const char *name) {
  const cJSON *archs = cJSON_GetObjectItemCaseSensitive(clf__config_json(c), "architectures");
  const cJSON *a;
  cJSON_ArrayForEach(a, archs) if (cJSON_IsString(a) && strcmp(a->valuestring, name) == 0) return true;
  return false;
}

clf_status model_shapes(const clf__config *c, const char *dir, size_t T, ShapeList *L) {
  const char *type;
  clf_status st;
  if ((st = clf__config_str(nullptr, c, "model_type", &type)) != CLF_OK) return st;
  long D, F, N, V, Ne, Nd, Fe, Fd;
  if (!strcmp(type, "bert") || !strcmp(type, "vit")) {  // separate q, k, v; nn.Linear weights
    if ((st = clf__config_int(nullptr, c, "hidden_size", &D)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "intermediate_size", &F)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "num_hidden_layers", &N)) != CLF_OK)
      return st;
    L->linear(T, D, D, 1, 4 * N);
    L->linear(T, F, D, 1, N);
    L->linear(T, D, F, 1, N);
    return CLF_OK;
  }
  if (!strcmp(type, "gpt2")) {  // fused c_attn; Conv1D weights [in, out]
    if ((st = clf__config_int(nullptr, c, "n_embd", &D)) != CLF_OK ||
        (st = clf__config_int_or(nullptr, c, "n_inner", 0, &F)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "n_layer", &N)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "vocab_size", &V)) != CLF_OK)
      return st;
    if (F == 0) F = 4 * D;
    L->linear(T, 3 * D, D, 0, N);
    L->linear(T, D, D, 0, N);
    L->linear(T, F, D, 0, N);
    L->linear(T, D, F, 0, N);
    if (has_architecture(c, "GPT2LMHeadModel")) L->linear(T, V, D, 1, 1);  // tied wte [V, D]
    return CLF_OK;
  }
  if (!strcmp(type, "marian")) {  // decoder over as many rows as the encoder
    if ((st = clf__config_int(nullptr, c, "d_model", &D)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "encoder_layers", &Ne)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "decoder_layers", &Nd)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "encoder_ffn_dim", &Fe)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "decoder_ffn_dim", &Fd)) != CLF_OK ||
        (st = clf__config_int(nullptr, c, "vocab_size", &V)) != CLF_OK ||
        (st = clf__config_int_or(nullptr, c, "decoder_vocab_size", V, &V)) != CLF_OK)
      return st;
    L->linear(T, D, D, 1, 4 * Ne + 8 * Nd);  // self q k v o; decoder: + cross q k v o
    L->linear(T, Fe, D, 1, Ne);
    L->linear(T, D, Fe, 1, Ne);
    L->linear(T, Fd, D, 1, Nd);
    L->linear(T, D, Fd, 1, Nd);
    if (has_architecture(c, "MarianMTModel")) L->linear(T, V, D, 1, 1);
    return CLF_OK;
  }
  if (!strcmp(type, "swin")) {  // T patch tokens at stage 0; each merge quarters them
    long E, depths[16];
    double ratio;
    size_t ns;
    if ((st = clf__config_int_or(nullptr, c, "embed_dim", 96, &E)) != CLF_OK ||
        (st = clf__config_float_or(nullptr, c, "mlp_ratio", 4.0, &ratio)) != CLF_OK ||
        (st = clf__config_int_list(nullptr, c, "depths", depths, 16, &ns)) != CLF_OK)
      return st;
    size_t rows = T;
    for (size_t s = 0; s < ns && rows > 0; s++, rows /= 4) {
      const long d = E << s, f = static_cast<long>(ratio * d);
      L->linear(rows, d, d, 1, 4 * depths[s]);
      L->linear(rows, f, d, 1, depths[s]);
      L->linear(rows, d, f, 1, depths[s]);
      if (s + 1 < ns) L->linear(rows / 4, 2 * d, 4 * d, 1, 1);  // patch merging
    }
    return CLF_OK;
  }
  return clf__fail(nullptr, CLF_E_UNSUPPORTED,
                   "clf_model_gemm_shapes: model_type \"%s\" in %s/config.json is not supported (bert, vit, gpt2, "
                   "marian, swin)",
                   type, dir);
}

}  // namespace

extern "C" clf_status clf_model_gemm_shapes(const char *model_dir, size_t tokens, clf_gemm_shape *out,
                                           size_t capacity, size_t *count) {
  if (count) *count = 0;
  if (!model_dir || !count || (capacity > 0 && !out))
    return clf__fail(nullptr, CLF_E_INVALID_ARG, "clf_model_gemm_shapes: model_dir, count or out is NULL");
  if (tokens == 0) return clf__fail(nullptr, CLF_E_INVALID_ARG, "clf_model_gemm_shapes: tokens is 0");
  clf__config *c = nullptr;
  clf_status st = clf__config_load(nullptr, model_dir, &c);
  if (st != CLF_OK) return st;
  try {
    ShapeList L;
    st = model_shapes(c, model_dir, tokens, &L);
    if (st == CLF_OK) {
      for (size_t i = 0; i < L.v.size() && i < capacity; i++) out[i] = L.v[i];
      *count = L.v.size();
    }
  } catch (...) {
    st = clf__fail(nullptr, CLF_E_OUT_OF_MEMORY, "clf_model_gemm_shapes: out of host memory");
  }
  clf__config_free(c);
  return st;
}

