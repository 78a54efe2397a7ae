/* test_heads.c - the task heads (BertFor*, GPT2For*, RobertaFor*,
 * XLMRobertaFor*, DistilBertFor*) against the golden
 * fixtures made with transformers (tools/fixtures/make_head_fixtures.py),
 * every head checkpoint run as its base model, the heads with f16 / q8
 * weights, and the errors: a head weight missing, GPT-2 sequence
 * classification of a batch without pad_token_id, an unknown architecture.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clformer.h"
#include "fixture_util.h"
#include "harness.h"

/* The head fixtures, then "roberta" (RobertaModel saved alone: no prefix,
 * a pooler), which the golden and base-model tests read too. */
static const char *const heads[] = {
    "bert_mlm",      "bert_pretrain",  "bert_seqcls",    "bert_tokcls",
    "bert_qa",       "bert_nsp",       "gpt2_seqcls",    "gpt2_tokcls",
    "roberta_mlm",   "roberta_seqcls", "roberta_tokcls", "xlmr_mlm",
    "xlmr_seqcls",   "xlmr_qa",        "distilbert_mlm", "distilbert_seqcls",
    "distilbert_qa", "roberta"};
/* the head fixtures alone */
#define N_HEADS (sizeof heads / sizeof heads[0] - 1)

static void fixture_dir(char *dir, size_t len, const char *name) {
  snprintf(dir, len, "%s/%s", fixtures(), name);
}

/* Every forward case, each output within the fixtures' 1e-4 of scale. */
START_TEST(test_golden) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, heads[_i]);
  check_forward_cases(get_model(dir), dir, 1e-4, heads[_i]);
}
END_TEST

/* The output names: the head's (transformers' names), then the base
 * model's. */
START_TEST(test_output_names) {
  static const struct {
    const char *fixture, *names;
  } want[] = {
      {"bert_mlm", "logits last_hidden_state"},
      {"bert_pretrain", "prediction_logits seq_relationship_logits "
                        "last_hidden_state pooler_output"},
      {"bert_seqcls", "logits last_hidden_state pooler_output"},
      {"bert_tokcls", "logits last_hidden_state"},
      {"bert_qa", "start_logits end_logits last_hidden_state"},
      {"bert_nsp", "logits last_hidden_state pooler_output"},
      {"gpt2_seqcls", "logits last_hidden_state"},
      {"gpt2_tokcls", "logits last_hidden_state"},
      {"roberta", "last_hidden_state pooler_output"},
      {"roberta_mlm", "logits last_hidden_state"},
      {"roberta_seqcls", "logits last_hidden_state"},
      {"xlmr_qa", "start_logits end_logits last_hidden_state"},
      {"distilbert_mlm", "logits last_hidden_state"},
      {"distilbert_seqcls", "logits last_hidden_state"},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    char dir[1024], got[256] = "";
    fixture_dir(dir, sizeof dir, want[i].fixture);
    const char *const *names;
    const size_t n = clf_model_output_names(get_model(dir), &names);
    for (size_t k = 0; k < n; k++)
      snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s",
               k ? " " : "", names[k]);
    ck_assert_str_eq(got, want[i].names);
  }
  char dir[1024];
  fixture_dir(dir, sizeof dir, "bert_seqcls");
  clf_model *m = get_model(dir);
  ck_assert_uint_eq(clf_model_num_labels(m), 3);
  ck_assert_str_eq(clf_model_label(m, 2), "positive");
  /* DistilBERT takes no token types */
  const char *const *in_names;
  fixture_dir(dir, sizeof dir, "distilbert_seqcls");
  ck_assert_uint_eq(clf_model_input_names(get_model(dir), &in_names), 2);
  ck_assert_str_eq(in_names[1], "attention_mask");
  ck_assert_str_eq(clf_model_type(get_model(dir)), "distilbert");
  fixture_dir(dir, sizeof dir, "xlmr_mlm");
  ck_assert_str_eq(clf_model_type(get_model(dir)), "xlm-roberta");
}
END_TEST

/* Only last_hidden_state asked of a head checkpoint (as `clformer embed`
 * asks it): the golden base-model output of the padded case. */
static void read_npy(const char *dir, const char *file, const char *name,
                     clf_array *a) {
  char p[1200];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  ck_assert_msg(clf_npy_read(p, a) == CLF_OK, "%s", clf_last_error(NULL));
  snprintf(a->name, sizeof a->name, "%s", name);
}

START_TEST(test_base_model_use) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, heads[_i]);
  clf_model *m = get_model(dir);
  /* token types only in the BERT fixtures; all rows compared but GPT-2's */
  const int is_bert = !strncmp(heads[_i], "bert", 4),
            causal = !strncmp(heads[_i], "gpt2", 4);
  clf_array in[3], exp, got;
  const char *c = strcmp(heads[_i], "gpt2_seqcls") ? "padded" : "padded_states";
  char f[4][64];
  static const char *const parts[4] = {"input_ids", "attention_mask",
                                       "token_type_ids", "last_hidden_state"};
  for (int k = 0; k < 4; k++)
    snprintf(f[k], sizeof f[k], "%s.%s.npy", c, parts[k]);
  read_npy(dir, f[0], "input_ids", &in[0]);
  read_npy(dir, f[1], "attention_mask", &in[1]);
  if (is_bert)
    read_npy(dir, f[2], "token_type_ids", &in[2]);
  read_npy(dir, f[3], "last_hidden_state", &exp);
  const char *outs[] = {"last_hidden_state"};
  TH_OK(clf_model_run(m, in, is_bert ? 3 : 2, outs, 1, &got));
  ck_assert_uint_eq(clf_array_numel(&got), clf_array_numel(&exp));
  const size_t B = exp.shape[0], L = exp.shape[1], D = exp.shape[2];
  const int64_t *mask = in[1].data;
  for (size_t r = 0; r < B * L;
       r++) /* GPT-2's padded query rows are degenerate */
    if (!causal || mask[r])
      TH_CLOSE((const float *)got.data + r * D, (const float *)exp.data + r * D,
               D, 1e-4);
  clf_array_free(&got), clf_array_free(&exp);
  for (int i = 0; i < (is_bert ? 3 : 2); i++)
    clf_array_free(&in[i]);
}
END_TEST

/* Outputs not asked cost nothing: a head checkpoint asked only for
 * last_hidden_state queues exactly the commands of its base model (the bert
 * and roberta fixtures, same sizes), and its head's GEMMs only when logits
 * are asked. */
static unsigned long commands_of(clf_context *ctx, clf_model *m,
                                 const clf_array *in, size_t n_in,
                                 const char *out) {
  clf_array got;
  TH_OK(clf_model_run(m, in, n_in, &out, 1,
                      &got)); /* warm: kernels built, workspace sized */
  clf_array_free(&got);
  TH_OK(clf_profile_start(ctx));
  TH_OK(clf_model_run(m, in, n_in, &out, 1, &got));
  unsigned long n = 0;
  size_t n_ops;
  clf_profile_entry e[32];
  TH_OK(clf_profile_stop(ctx, e, 32, &n_ops, &n));
  clf_array_free(&got);
  return n;
}

START_TEST(test_unasked_heads_cost_nothing) {
  static const char *const pairs[2][2] = {{"bert_mlm", "bert"},
                                          {"roberta_mlm", "roberta"}};
  clf_context_options o;
  memset(&o, 0, sizeof o);
  o.profiling = 1;
  clf_context *ctx = NULL;
  TH_OK(clf_context_create(&o, &ctx));
  char dir[1024], base[1024];
  fixture_dir(dir, sizeof dir, pairs[_i][0]);
  fixture_dir(base, sizeof base, pairs[_i][1]);
  clf_model *mlm = NULL, *bert = NULL;
  TH_OK(clf_model_load(ctx, dir, &mlm));
  TH_OK(clf_model_load(ctx, base, &bert));
  clf_array in[3];
  const size_t n_in = _i ? 2 : 3; /* RoBERTa's padded case: no token types */
  read_npy(dir, "padded.input_ids.npy", "input_ids", &in[0]);
  read_npy(dir, "padded.attention_mask.npy", "attention_mask", &in[1]);
  if (n_in == 3)
    read_npy(dir, "padded.token_type_ids.npy", "token_type_ids", &in[2]);
  const unsigned long n_base =
      commands_of(ctx, bert, in, n_in, "last_hidden_state");
  ck_assert_uint_gt(n_base, 0);
  ck_assert_uint_eq(commands_of(ctx, mlm, in, n_in, "last_hidden_state"),
                    n_base);
  ck_assert_uint_gt(commands_of(ctx, mlm, in, n_in, "logits"), n_base);
  for (size_t k = 0; k < n_in; k++)
    clf_array_free(&in[k]);
  clf_model_destroy(mlm);
  clf_model_destroy(bert);
  clf_context_destroy(ctx);
}
END_TEST

/* A head checkpoint loaded as BertModel (architectures changed): the head's
 * weights are ignored, the base outputs equal the golden ones. */
START_TEST(test_head_weights_ignored) {
  char *dir = copy_fixture("bert_pretrain", NULL, NULL, 0, NULL), src[1024];
  set_config(dir, "architectures", "[\"BertModel\"]");
  clf_model *m = NULL;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  const char *const *names;
  ck_assert_uint_eq(clf_model_output_names(m, &names), 2);
  ck_assert_str_eq(names[0], "last_hidden_state");
  ck_assert_str_eq(names[1], "pooler_output");
  fixture_dir(src, sizeof src, "bert_pretrain");
  clf_array in[3], ga[2], gb[2];
  read_npy(src, "padded.input_ids.npy", "input_ids", &in[0]);
  read_npy(src, "padded.attention_mask.npy", "attention_mask", &in[1]);
  read_npy(src, "padded.token_type_ids.npy", "token_type_ids", &in[2]);
  const char *outs[] = {"last_hidden_state", "pooler_output"};
  TH_OK(clf_model_run(m, in, 3, outs, 2, ga));
  TH_OK(clf_model_run(get_model(src), in, 3, outs, 2, gb));
  for (int k = 0; k < 2; k++) {
    ck_assert(memcmp(ga[k].data, gb[k].data,
                     clf_array_numel(&gb[k]) * sizeof(float)) == 0);
    clf_array_free(&ga[k]), clf_array_free(&gb[k]);
  }
  for (int k = 0; k < 3; k++)
    clf_array_free(&in[k]);
  clf_model_destroy(m);
  /* no architectures at all: BertModel too */
  set_config(dir, "architectures", "null");
  TH_OK(clf_model_load(th_ctx, dir, &m));
  ck_assert_uint_eq(clf_model_output_names(m, NULL), 2);
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* The heads' linear layers take the weight type: f16 within 2e-3, q8
 * within 5e-2 of transformers (the bounds of test_weight_types.c). */
START_TEST(test_weight_types) {
  static const struct {
    clf_dtype dt;
    double tol;
  } types[] = {{CLF_F16, 2e-3}, {CLF_Q8_0, 5e-2}};
  for (size_t t = 0; t < 2; t++) {
    char dir[1024], what[128];
    fixture_dir(dir, sizeof dir, heads[_i]);
    clf_model_options o;
    clf_model_options_init(&o);
    o.weights = types[t].dt;
    clf_model *m = NULL;
    TH_OK(clf_model_load_with(th_ctx, dir, &o, &m));
    snprintf(what, sizeof what, "%s with %s weights", heads[_i],
             clf_dtype_name(types[t].dt));
    check_forward_cases(m, dir, types[t].tol, what);
    clf_model_destroy(m);
  }
}
END_TEST

/* A weight of the head config.json names, missing: an error naming it. */
START_TEST(test_missing_head_weight) {
  static const struct {
    const char *fixture, *tensor;
  } cases[] = {
      {"bert_mlm", "cls.predictions.transform.dense.weight"},
      {"bert_mlm", "cls.predictions.bias"},
      {"bert_pretrain", "cls.seq_relationship.weight"},
      {"bert_seqcls", "classifier.weight"},
      {"bert_seqcls",
       "bert.pooler.dense.weight"}, /* the classifier reads pooler_output */
      {"bert_tokcls", "classifier.bias"},
      {"bert_qa", "qa_outputs.weight"},
      {"bert_nsp", "cls.seq_relationship.bias"},
      {"gpt2_seqcls", "score.weight"},
      {"gpt2_tokcls", "classifier.weight"},
      {"roberta_mlm", "lm_head.dense.weight"},
      {"roberta_mlm", "lm_head.layer_norm.bias"},
      {"roberta_mlm", "lm_head.bias"},
      {"roberta_seqcls", "classifier.dense.bias"},
      {"roberta_seqcls", "classifier.out_proj.weight"},
      {"roberta_tokcls", "classifier.weight"},
      {"roberta_tokcls", "roberta.encoder.layer.1.output.dense.weight"},
      {"roberta_tokcls", "roberta.embeddings.token_type_embeddings.weight"},
      {"xlmr_qa", "qa_outputs.bias"},
      {"xlmr_mlm", "lm_head.dense.bias"},
      {"distilbert_mlm", "vocab_transform.weight"},
      {"distilbert_mlm", "vocab_layer_norm.weight"},
      {"distilbert_mlm", "vocab_projector.bias"},
      {"distilbert_seqcls", "pre_classifier.weight"},
      {"distilbert_seqcls", "classifier.bias"},
      {"distilbert_qa", "qa_outputs.weight"},
      {"distilbert_qa", "distilbert.transformer.layer.1.ffn.lin2.weight"},
      {"distilbert_qa", "distilbert.embeddings.position_embeddings.weight"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    clf_model *m = NULL;
    char *dir = copy_fixture(cases[i].fixture, cases[i].tensor, NULL, 0, NULL);
    TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_NOT_FOUND, cases[i].tensor);
    ck_assert_ptr_null(m);
    remove_dir(dir);
  }
  /* a classifier whose rows are not id2label's labels */
  clf_model *m = NULL;
  char *dir = copy_fixture("bert_seqcls", NULL, "classifier.weight", 2,
                           (size_t[]){4, 24});
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_SHAPE, "classifier.weight");
  remove_dir(dir);
}
END_TEST

/* Architectures no family has stay refused, by name. */
START_TEST(test_unknown_architecture) {
  clf_model *m = NULL;
  char *dir = copy_fixture("bert_seqcls", NULL, NULL, 0, NULL);
  set_config(dir, "architectures", "[\"BertForMultipleChoice\"]");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED,
           "BertForMultipleChoice");
  remove_dir(dir);
  dir = copy_fixture("gpt2_seqcls", NULL, NULL, 0, NULL);
  set_config(dir, "architectures", "[\"GPT2DoubleHeadsModel\"]");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED,
           "GPT2DoubleHeadsModel");
  remove_dir(dir);
  static const char *const others[][2] = {
      {"roberta_seqcls", "RobertaForMultipleChoice"},
      {"roberta_mlm", "RobertaForCausalLM"},
      {"roberta_mlm", "BertForMaskedLM"}, /* another family's class */
      {"xlmr_seqcls", "XLMRobertaForMultipleChoice"},
      {"xlmr_mlm", "RobertaForMaskedLM"},
      {"distilbert_qa", "DistilBertForMultipleChoice"},
  };
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    char arch[128];
    dir = copy_fixture(others[i][0], NULL, NULL, 0, NULL);
    snprintf(arch, sizeof arch, "[\"%s\"]", others[i][1]);
    set_config(dir, "architectures", arch);
    TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, others[i][1]);
    remove_dir(dir);
  }
  ck_assert_ptr_null(m);
}
END_TEST

/* RoBERTa's position ids count past padding_idx: a row whose positions
 * would pass the table is refused (transformers raises an IndexError), one
 * that fits runs; a pad_token_id outside the table is a config error; a
 * RoBERTa head checkpoint run as RobertaModel has no pooler. */
START_TEST(test_roberta_positions) {
  char src[1024];
  fixture_dir(src, sizeof src, "roberta_mlm");
  clf_model *m = get_model(src);
  int64_t ids[39];
  for (size_t j = 0; j < 39; j++)
    ids[j] = 5 + (int64_t)(j % 100);
  clf_array in = {.name = "input_ids",
                  .dtype = CLF_I64,
                  .ndim = 2,
                  .shape = {1, 39},
                  .data = ids},
            got;
  const char *outs[] = {"last_hidden_state"};
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, &got), CLF_E_SHAPE,
           "max_position_embeddings 40");
  in.shape[1] = 38; /* positions 2 .. 39 */
  TH_OK(clf_model_run(m, &in, 1, outs, 1, &got));
  clf_array_free(&got);
  ids[0] = 1; /* one pad: 39 tokens fit again */
  in.shape[1] = 39;
  TH_OK(clf_model_run(m, &in, 1, outs, 1, &got));
  clf_array_free(&got);

  char *dir = copy_fixture("roberta_seqcls", NULL, NULL, 0, NULL);
  set_config(dir, "pad_token_id", "40");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "pad_token_id 40");
  set_config(dir, "pad_token_id", "1");
  set_config(dir, "architectures", "[\"RobertaModel\"]");
  TH_OK(clf_model_load(th_ctx, dir, &m));
  ck_assert_uint_eq(clf_model_output_names(m, NULL), 1);
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* DistilBERT: token_type_ids is not one of its inputs; its config keys are
 * its own (a missing one named). */
START_TEST(test_distilbert_inputs) {
  char src[1024];
  fixture_dir(src, sizeof src, "distilbert_qa");
  clf_array in[2], got;
  read_npy(src, "ids_only.input_ids.npy", "input_ids", &in[0]);
  read_npy(src, "ids_only.input_ids.npy", "token_type_ids", &in[1]);
  memset(in[1].data, 0, clf_array_numel(&in[1]) * sizeof(int64_t));
  const char *outs[] = {"start_logits"};
  TH_FAILS(clf_model_run(get_model(src), in, 2, outs, 1, &got),
           CLF_E_INVALID_ARG, "token_type_ids");
  clf_array_free(&in[0]), clf_array_free(&in[1]);
  clf_model *m = NULL;
  char *dir = copy_fixture("distilbert_qa", NULL, NULL, 0, NULL);
  set_config(dir, "hidden_dim", "null");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_FORMAT, "hidden_dim");
  set_config(dir, "hidden_dim", "64");
  set_config(dir, "activation", "\"swish2\"");
  TH_FAILS(clf_model_load(th_ctx, dir, &m), CLF_E_UNSUPPORTED, "activation");
  ck_assert_ptr_null(m);
  remove_dir(dir);
}
END_TEST

/* GPT2ForSequenceClassification without pad_token_id: batch 1 takes the
 * last token (transformers' sequence_lengths -1: the golden ids_only case,
 * which holds no pad id), a larger batch is refused as transformers
 * refuses it; a classifier cannot generate. */
START_TEST(test_gpt2_seqcls_no_pad) {
  char *dir = copy_fixture("gpt2_seqcls", NULL, NULL, 0, NULL), src[1024];
  set_config(dir, "pad_token_id", "null");
  clf_model *m = NULL;
  TH_OK(clf_model_load(th_ctx, dir, &m));
  fixture_dir(src, sizeof src, "gpt2_seqcls");
  clf_array in, exp, got;
  read_npy(src, "ids_only.input_ids.npy", "input_ids", &in);
  read_npy(src, "ids_only.logits.npy", "logits", &exp);
  const char *outs[] = {"logits"};
  TH_OK(clf_model_run(m, &in, 1, outs, 1, &got));
  ck_assert_int_eq(got.ndim, 2);
  ck_assert_uint_eq(got.shape[1], 3);
  TH_CLOSE((const float *)got.data, (const float *)exp.data, 3, 1e-4);
  clf_array_free(&got), clf_array_free(&in);
  read_npy(src, "padded.input_ids.npy", "input_ids", &in);
  TH_FAILS(clf_model_run(m, &in, 1, outs, 1, &got), CLF_E_INVALID_ARG,
           "pad_token_id");
  /* last_hidden_state needs no pad token */
  const char *lhs[] = {"last_hidden_state"};
  TH_OK(clf_model_run(m, &in, 1, lhs, 1, &got));
  clf_array_free(&got);
  clf_array seq;
  TH_FAILS(clf_model_generate(m, &in, NULL, NULL, &seq), CLF_E_UNSUPPORTED,
           "gpt2");
  clf_array_free(&in), clf_array_free(&exp);
  clf_model_destroy(m);
  remove_dir(dir);
}
END_TEST

/* clf_model_encode_text: the inputs with which each text classifier scores
 * the fixture's two texts as transformers' text-classification pipeline
 * did (cases.json's "pipeline", from make_head_fixtures.py: the scores
 * within 1e-4, as `clformer classify` is held to them).  input_ids are the
 * tokenizer's ids with its special tokens (BERT's [CLS] first and [SEP]
 * last; GPT-2 adds none, so they equal the plain ids), attention_mask ones,
 * token_type_ids zeros for the models that take them (BERT, DistilBERT as
 * clformer reads it), all [1, n] i64 in that order. */
static const char *const classifiers[] = {"bert_seqcls", "gpt2_seqcls", "roberta_seqcls", "xlmr_seqcls",
                                          "distilbert_seqcls"};

static void check_encoded(const clf_model *m, clf_tokenizer *tok, const char *text, const clf_array in[3],
                          size_t n_in) {
  static const char *const names[3] = {"input_ids", "attention_mask", "token_type_ids"};
  const char *const *model_in;
  const size_t n_model = clf_model_input_names(m, &model_in);
  size_t want = 2;
  for (size_t i = 0; i < n_model; i++) want += !strcmp(model_in[i], "token_type_ids");
  ck_assert_uint_eq(n_in, want);
  int64_t *ids, *plain;
  size_t n, n_plain;
  ck_assert_int_eq(clf_tokenizer_encode(tok, text, 1, &ids, &n), CLF_OK);
  ck_assert_int_eq(clf_tokenizer_encode(tok, text, 0, &plain, &n_plain), CLF_OK);
  const char *first;
  ck_assert_int_eq(clf_tokenizer_token(tok, ids[0], &first), CLF_OK);
  if (!strcmp(clf_model_type(m), "bert")) ck_assert_str_eq(first, "[CLS]");
  if (!strcmp(clf_model_type(m), "gpt2")) ck_assert_uint_eq(n, n_plain);
  else ck_assert_uint_eq(n, n_plain + 2);
  for (size_t k = 0; k < 3; k++) {
    if (k >= n_in) {
      ck_assert_ptr_null(in[k].data);
      continue;
    }
    ck_assert_str_eq(in[k].name, names[k]);
    ck_assert_int_eq(in[k].dtype, CLF_I64);
    ck_assert_int_eq(in[k].ndim, 2);
    ck_assert_uint_eq(in[k].shape[0], 1);
    ck_assert_uint_eq(in[k].shape[1], n);
    for (size_t j = 0; j < n; j++)
      ck_assert_int_eq(((const int64_t *)in[k].data)[j], k == 0 ? ids[j] : k == 1 ? 1 : 0);
  }
  free(ids), free(plain);
}

/* The softmax of in's logits against the pipeline's scores, by label. */
static void check_scores(clf_model *m, clf_array in[3], size_t n_in, const cJSON *results) {
  const char *outs[] = {"logits"};
  clf_array logits;
  TH_OK(clf_model_run(m, in, n_in, outs, 1, &logits));
  ck_assert_int_eq(logits.ndim, 2);
  const size_t nl = logits.shape[1];
  double p[16];
  ck_assert_uint_le(nl, 16);
  ck_assert_int_eq(clf_softmax_top_k(logits.data, nl, 0, p, NULL), CLF_OK);
  const cJSON *r;
  int seen = 0;
  cJSON_ArrayForEach(r, results) {
    const char *label = cJSON_GetObjectItem(r, "label")->valuestring;
    size_t i = 0;
    while (i < nl && strcmp(clf_model_label(m, i), label)) i++;
    ck_assert_msg(i < nl, "no label %s", label);
    const double want = cJSON_GetObjectItem(r, "score")->valuedouble;
    ck_assert_msg(fabs(p[i] - want) <= 1e-4, "%s: %s %.6f, transformers %.6f", clf_model_type(m), label, p[i], want);
    seen++;
  }
  ck_assert_int_eq(seen, (int)nl);
  clf_array_free(&logits);
}

START_TEST(test_encode_text) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, classifiers[_i]);
  clf_model *m = get_model(dir);
  clf_tokenizer *tok;
  ck_assert_int_eq(clf_tokenizer_load(dir, &tok), CLF_OK);
  cJSON *j = load_cases(dir), *p = cJSON_GetObjectItem(j, "pipeline");
  for (int t = 0; t < 2; t++) {
    const char *text = cJSON_GetArrayItem(cJSON_GetObjectItem(p, "texts"), t)->valuestring;
    clf_array in[3];
    size_t n_in;
    TH_OK(clf_model_encode_text(m, tok, text, in, &n_in));
    check_encoded(m, tok, text, in, n_in);
    check_scores(m, in, n_in, cJSON_GetArrayItem(cJSON_GetObjectItem(p, "results"), t));
    for (int k = 0; k < 3; k++) clf_array_free(&in[k]);
  }
  cJSON_Delete(j);
  clf_tokenizer_destroy(tok);
}
END_TEST

/* Its refusals, each leaving the three arrays empty: NULL arguments, text
 * that is not UTF-8 (the tokenizer's error, named), a model without
 * input_ids (ViT). */
START_TEST(test_encode_text_errors) {
  char dir[1024];
  fixture_dir(dir, sizeof dir, "bert_seqcls");
  clf_model *m = get_model(dir);
  clf_tokenizer *tok;
  ck_assert_int_eq(clf_tokenizer_load(dir, &tok), CLF_OK);
  clf_array in[3];
  size_t n_in = 7;
  memset(in, 0xab, sizeof in);
  TH_FAILS(clf_model_encode_text(m, tok, NULL, in, &n_in), CLF_E_INVALID_ARG, "NULL");
  for (int k = 0; k < 3; k++) ck_assert_ptr_null(in[k].data);
  ck_assert_uint_eq(n_in, 0);
  TH_FAILS(clf_model_encode_text(m, tok, "ok \xff", in, &n_in), CLF_E_INVALID_ARG, "not valid UTF-8");
  for (int k = 0; k < 3; k++) ck_assert_ptr_null(in[k].data);
  ck_assert_int_eq(clf_model_encode_text(NULL, tok, "x", in, &n_in), CLF_E_INVALID_ARG);
  fixture_dir(dir, sizeof dir, "vit");
  TH_FAILS(clf_model_encode_text(get_model(dir), tok, "x", in, &n_in), CLF_E_UNSUPPORTED, "takes no input_ids");
  clf_tokenizer_destroy(tok);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("heads");
  TCase *tc = tcase_create("heads");
  tcase_set_timeout(tc, 600);
  tcase_add_unchecked_fixture(tc, NULL, free_models);
  const int n = (int)(sizeof heads / sizeof heads[0]);
  tcase_add_loop_test(tc, test_golden, 0, n);
  tcase_add_test(tc, test_output_names);
  tcase_add_loop_test(tc, test_base_model_use, 0, n);
  tcase_add_test(tc, test_head_weights_ignored);
  tcase_add_loop_test(tc, test_unasked_heads_cost_nothing, 0, 2);
  tcase_add_loop_test(tc, test_weight_types, 0, (int)N_HEADS);
  tcase_add_test(tc, test_missing_head_weight);
  tcase_add_test(tc, test_unknown_architecture);
  tcase_add_test(tc, test_gpt2_seqcls_no_pad);
  tcase_add_test(tc, test_roberta_positions);
  tcase_add_test(tc, test_distilbert_inputs);
  tcase_add_loop_test(tc, test_encode_text, 0, (int)(sizeof classifiers / sizeof classifiers[0]));
  tcase_add_test(tc, test_encode_text_errors);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
