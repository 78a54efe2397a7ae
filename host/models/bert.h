/* bert.h - the BERT family (bert.c) as a base other encoders are made
 * from (nomic-bert: its own rows and names, rotary positions, a gated
 * MLP): the config struct its key tables fill, the kind that says what an
 * encoder differs in, and the loader and GEMM list over a kind.
 */
#ifndef CLF_BERT_H
#define CLF_BERT_H

#include <stddef.h>

#include "family.h"
#include "rows.h"

/* config.json of an encoder, read by the family's key table. */
typedef struct clf__bert_dims {
  long V, D, H, N, F, P, T;
  long n_labels; /* num_labels (0: absent) */
  long pad;      /* pad_token_id: RoBERTa's padding_idx */
  double eps;
  double theta;  /* the rotary base of a rotary kind */
  int tie;
  const char *act, *pe_type;
  long pooling, pool_dflt; /* pooling_type (-1: absent) and what its absence means */
} clf__bert_dims;

/* clf_model_embed's pooling: pooling_type (a GGUF file's {arch}.pooling_type),
 * else pooling_type_default: mean for a Hugging Face directory, which states
 * none, and none for a GGUF file without the key, as llama.cpp takes it. */
#define CLF__BERT_POOLING_KEYS                                                      \
  CLF__OPT(clf__bert_dims, pooling, "pooling_type", INT, -1),                       \
  CLF__OPT(clf__bert_dims, pool_dflt, "pooling_type_default", INT, CLF__POOL_MEAN)

/* The heads an encoder's architectures name (bert.c's enum bert_head). */
#define CLF__BERT_HEADS 7

/* What differs between the encoders built on BERT's: names, and how
 * positions and the MLP are made. */
typedef struct clf__bert_kind {
  const char *type, *prefix;        /* model_type; the base model's weight prefix ("bert.") */
  const char *archs[CLF__BERT_HEADS]; /* each head's class (NULL: the family has none) */
  const char *stack;                /* the layers: STACK.N. ("encoder.layer") */
  const clf__weight_row *rows;      /* the layer's weights */
  size_t n_rows;
  const char *sizes;                /* the config keys of V, D, H, F (messages) */
  const char *act_key;              /* the config key of the activation */
  const char *emb_ln;               /* the embeddings' LayerNorm (NULL: "embeddings.LayerNorm") */
  int token_types;                  /* token_type_embeddings and the input token_type_ids */
  int roberta_pos;                  /* positions from input_ids past padding_idx */
  /* No position table: q and k rotated by position (rotate-half) at the
   * config's rotary base, dims theta */
  int rotary;
  /* The MLP gated: fc1 is gate | up fused [2F, D], y = fc2(silu(gate) *
   * up); the activation key must say "swiglu" */
  int gated;
  float eps;                        /* the LayerNorms' eps when fixed (DistilBERT), else 0: config's */
  const char *mlm[4];               /* the MLM head: dense, LayerNorm, decoder weight, bias */
  const char *mlm_bias2;            /* the bias's other name */
  int mlm_gelu;                     /* 1: the MLM dense's activation is gelu, not the config's */
  const char *seq_dense, *seq_out;  /* the sequence head (seq_dense NULL: the pooler, then seq_out) */
  clf_activation seq_act;           /* and its activation */
} clf__bert_kind;

/* A family's load and gemms (clf__family) over its kind; dims a
 * clf__bert_dims. */
clf_status clf__bert_load(clf_model *m, const clf__bert_kind *k, const void *dims, const clf__config *c,
                          const clf__weights *w);
void clf__bert_gemms(const clf__bert_kind *k, const void *dims, const clf__config *c, size_t T, clf__gemm_list *l);

#endif /* CLF_BERT_H */
