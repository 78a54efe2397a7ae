/* test_cli.c - the clformer command line as a person runs it: `run`,
 * `generate` and `embed` on the committed fixtures, exit statuses, the
 * --repeat timing line and the error that lists a model's outputs, `probe`
 * (properties, measurements, the ratios that were `bench`, the
 * self-validation that replaced `selfcheck`), and the option parsing every
 * command shares.  The program's path comes from CLF_CLI, the fixtures from
 * CLF_FIXTURES. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "harness.h"

static char tmp[256];
static const char *cli, *fx;

/* Runs the CLI with `args`, stdout and stderr to files in tmp; returns the
 * exit status. */
static int run_cli(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof(cmd), "'%s' %s >'%s/stdout' 2>'%s/stderr'", cli, args, tmp, tmp);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *slurp(const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmp, name);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  static char buf[65536];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* max |a - b| <= 1e-4 * max(1, max |b|), the fixtures' tolerance. */
static void expect_npy_close(const char *got_path, const char *want_path) {
  clf_array got, want;
  ck_assert_int_eq(clf_npy_read(got_path, &got), CLF_OK);
  ck_assert_int_eq(clf_npy_read(want_path, &want), CLF_OK);
  ck_assert_int_eq(got.ndim, want.ndim);
  for (int i = 0; i < got.ndim; i++) ck_assert_uint_eq(got.shape[i], want.shape[i]);
  if (want.dtype == CLF_I64) {
    ck_assert_int_eq(got.dtype, CLF_I64);
    ck_assert_mem_eq(got.data, want.data, clf_array_numel(&want) * 8);
  } else {
    TH_CLOSE((const float *)got.data, (const float *)want.data, clf_array_numel(&want), 1e-4);
  }
  clf_array_free(&got);
  clf_array_free(&want);
}

/* A JSON file parsed, or NULL. */
static cJSON *clf_cli_test_read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[1 << 20];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  fclose(f);
  buf[n] = 0;
  return cJSON_Parse(buf);
}

static void setup(void) {
  cli = getenv("CLF_CLI");
  fx = getenv("CLF_FIXTURES");
  ck_assert_msg(cli && fx, "CLF_CLI and CLF_FIXTURES must be set (meson test sets them)");
  snprintf(tmp, sizeof(tmp), "%s/clf-cli-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  ck_assert_ptr_nonnull(mkdtemp(tmp));
}

START_TEST(run_bert_matches_transformers) {
  char args[2048], got[512], want[512];
  snprintf(args, sizeof(args),
           "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --in attention_mask=%s/bert/padded.attention_mask.npy"
           " --in token_type_ids=%s/bert/padded.token_type_ids.npy --out last_hidden_state=%s/h.npy"
           " --out pooler_output=%s/p.npy --repeat 3",
           fx, fx, fx, fx, tmp, tmp);
  ck_assert_int_eq(run_cli(args), 0);
  snprintf(got, sizeof(got), "%s/h.npy", tmp);
  snprintf(want, sizeof(want), "%s/bert/padded.last_hidden_state.npy", fx);
  expect_npy_close(got, want);
  snprintf(got, sizeof(got), "%s/p.npy", tmp);
  snprintf(want, sizeof(want), "%s/bert/padded.pooler_output.npy", fx);
  expect_npy_close(got, want);
  /* --repeat 3: one line "forward_ms median=X min=Y max=Z" with min <= median <= max. */
  const char *line = strstr(slurp("stderr"), "forward_ms median=");
  ck_assert_ptr_nonnull(line);
  double med, mn, mx;
  ck_assert_int_eq(sscanf(line, "forward_ms median=%lf min=%lf max=%lf", &med, &mn, &mx), 3);
  ck_assert(mn <= med && med <= mx && mn > 0);
}
END_TEST

START_TEST(run_gpt2_logits) {
  char args[2048], got[512], want[512];
  snprintf(args, sizeof(args),
           "run %s/gpt2 --in input_ids=%s/gpt2/ids_only.input_ids.npy --out logits=%s/l.npy", fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 0);
  snprintf(got, sizeof(got), "%s/l.npy", tmp);
  snprintf(want, sizeof(want), "%s/gpt2/ids_only.logits.npy", fx);
  expect_npy_close(got, want);
}
END_TEST

START_TEST(run_errors_name_the_problem) {
  char args[2048];
  /* An output the model does not produce: the error lists the ones it does. */
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out logits=%s/x.npy",
           fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  const char *err = slurp("stderr");
  ck_assert_ptr_nonnull(strstr(err, "logits"));
  ck_assert_ptr_nonnull(strstr(err, "last_hidden_state"));
  ck_assert_ptr_nonnull(strstr(err, "pooler_output"));
  /* A missing input file. */
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/nope.npy --out last_hidden_state=%s/x.npy", fx, tmp,
           tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "nope.npy"));
  /* Not a model directory. */
  snprintf(args, sizeof(args), "run %s --in input_ids=%s/bert/padded.input_ids.npy --out last_hidden_state=%s/x.npy",
           tmp, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "config.json"));
  /* Usage errors exit 2; --help exits 0 and describes the command. */
  ck_assert_int_eq(run_cli("run"), 2);
  ck_assert_int_eq(run_cli("run x --in nonsense"), 2);
  ck_assert_int_eq(run_cli("frobnicate"), 2);
  ck_assert_int_eq(run_cli("run --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "forward_ms median="));
  ck_assert_int_eq(run_cli("generate --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "--num-beams"));
  ck_assert_int_eq(run_cli("embed --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "cosine"));
  /* --device that matches nothing. */
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out pooler_output=%s/x.npy"
           " --device no-such-device", fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "no-such-device"));
  /* issue 11: a 128-byte .npy of shape (0, 3, 2^40, 2^40) crashed ViT */
  char npy[1024];
  snprintf(npy, sizeof(npy), "%s/huge.npy", tmp);
  FILE *f = fopen(npy, "wb");
  ck_assert_ptr_nonnull(f);
  char head[128];
  int hn = snprintf(head, sizeof(head), "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3, %llu, %llu), }",
                    1ULL << 40, 1ULL << 40);
  memset(head + hn, ' ', sizeof(head) - 10 - (size_t)hn);
  head[sizeof(head) - 11] = '\n';
  fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, f); /* header of 118 bytes: 128 in all */
  fwrite(head, 1, sizeof(head) - 10, f);
  fclose(f);
  snprintf(args, sizeof(args), "run %s/vit --in pixel_values=%s --out last_hidden_state=%s/x.npy", fx, npy, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "size overflows"));
}
END_TEST

START_TEST(generate_matches_transformers) {
  static const struct { const char *fixture, *cas, *extra; int mask; } cases[] = {
      {"marian", "beam3", "--num-beams 3 --max-new-tokens 8", 1},
      {"marian", "greedy", "--max-new-tokens 8", 1},
      {"gpt2", "greedy_b1", "--max-new-tokens 8", 0},
      {"gpt2", "greedy_b2_left_padded", "--max-new-tokens 8", 1},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char args[2048], mask[600] = "", got[512], want[512];
    if (cases[i].mask)
      snprintf(mask, sizeof(mask), "--in attention_mask=%s/%s/%s.attention_mask.npy", fx, cases[i].fixture,
               cases[i].cas);
    snprintf(args, sizeof(args), "generate %s/%s --in input_ids=%s/%s/%s.input_ids.npy %s %s --out sequences=%s/s.npy",
             fx, cases[i].fixture, fx, cases[i].fixture, cases[i].cas, mask, cases[i].extra, tmp);
    ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
    snprintf(got, sizeof(got), "%s/s.npy", tmp);
    snprintf(want, sizeof(want), "%s/%s/%s.sequences.npy", fx, cases[i].fixture, cases[i].cas);
    expect_npy_close(got, want);
  }
}
END_TEST

/* --weights and --profile: the memory line, GPT-2's greedy tokens unchanged
 * with f16 (tests/test_weight_types.c holds the accuracy), the profile
 * table with its totals, and the errors. */
START_TEST(weights_and_profile_options) {
  char args[2048], got[512], want[512];
  snprintf(args, sizeof(args), "generate %s/gpt2 --in input_ids=%s/gpt2/greedy_b1.input_ids.npy --max-new-tokens 8 "
           "--out sequences=%s/s.npy --weights f16 --profile", fx, fx, tmp);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  snprintf(got, sizeof(got), "%s/s.npy", tmp);
  snprintf(want, sizeof(want), "%s/gpt2/greedy_b1.sequences.npy", fx);
  expect_npy_close(got, want);
  const char *err = slurp("stderr");
  ck_assert_msg(strstr(err, "weights f16, ") && strstr(err, " MiB on the device"), "%s", err);
  ck_assert_msg(strstr(err, "profile: device time by op") && (strstr(err, "  skinny ") || strstr(err, "  skinny_tile ")) &&
                    strstr(err, "  all "),
                "%s", err);
  ck_assert_msg(strstr(err, "profile: per new token: ") && strstr(err, " launches"), "%s", err);
  /* decoding's pace, as tools/bench.py reads it: 8 new tokens (the
   * fixture's greedy run has no end-of-sequence token before them), the
   * first one's delay and the time a token after it, both positive */
  const char *pace = strstr(err, "clformer generate: 8 new tokens, the first after ");
  double first = -1, per = -1;
  ck_assert_msg(pace && sscanf(pace, "clformer generate: 8 new tokens, the first after %lf ms, then %lf ms a token",
                               &first, &per) == 2 && first > 0 && per > 0,
                "%s", err);
  /* A few rows run the skinny kernels: skinny_t where BERT's f32 weights
   * are stored [in, out], skinny_tile where the device's profile has them
   * [out, in] (clf__linear_prefers_in_out: PoCL and Intel's runtime with
   * their shipped profiles), skinny or skinny_tile for q8 (always [out,
   * in]; on a CPU skinny_r16f, the 16-row interleave's); more than clf__skinny_max_rows (here lowered to 8: the input has
   * 2 x 11 rows), CLBlast. */
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out last_hidden_state=%s/h.npy "
           "--profile", fx, fx, tmp);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  err = slurp("stderr");
  ck_assert_msg(strstr(err, "profile: per forward pass: ") && (strstr(err, "  skinny_t ") || strstr(err, "  skinny_tile ")),
                "%s", err);
  setenv("CLFORMER_SKINNY_ROWS", "8", 1);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  unsetenv("CLFORMER_SKINNY_ROWS");
  err = slurp("stderr");
  ck_assert_msg(strstr(err, "profile: per forward pass: ") && strstr(err, "clblast_gemm"), "%s", err);
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out last_hidden_state=%s/h.npy "
           "--profile --weights q8", fx, fx, tmp);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  err = slurp("stderr");
  ck_assert_msg(strstr(err, "profile: per forward pass: ") &&
                    (strstr(err, "  skinny ") || strstr(err, "  skinny_tile ") || strstr(err, "  skinny_r16f ")),
                "%s", err);
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out last_hidden_state=%s/h.npy "
           "--weights q5", fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "--weights: weight type \"q5\" is not one of f32, f16, q8, q4"), "%s",
                slurp("stderr"));
  snprintf(args, sizeof(args), "run %s/swin --in pixel_values=%s/swin/batch2.pixel_values.npy --out "
           "last_hidden_state=%s/h.npy --weights q4", fx, fx, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "q4 weights need in-features that are a multiple of 32"), "%s",
                slurp("stderr"));
}
END_TEST

/* The CLI's `generate --prompt` output `out` must be the prompt followed by
 * what the library gives for it: the model's tokenizer (special tokens as
 * add_special says), 6 new tokens (greedy: no sampling), decoded.  The
 * prompt's ids go to *ids / *n when asked for (free *ids). */
static void expect_library_text(const char *model, const char *prompt, int add_special, int greedy, const char *out,
                                int64_t **ids_out, size_t *n_out) {
  clf_tokenizer *tok = NULL;
  clf_model *m = NULL;
  ck_assert_int_eq(clf_tokenizer_load(model, &tok), CLF_OK);
  TH_OK(clf_model_load(th_ctx, model, &m));
  int64_t *ids = NULL;
  size_t n = 0;
  ck_assert_int_eq(clf_tokenizer_encode(tok, prompt, add_special, &ids, &n), CLF_OK);
  clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, n}, .data = ids}, seq;
  clf_generate_options o;
  clf_generate_options_init(&o);
  o.max_new_tokens = 6;
  if (greedy) o.do_sample = CLF_GENERATE_OFF;
  TH_OK(clf_model_generate(m, &in, NULL, &o, &seq));
  char *text = NULL;
  ck_assert_int_eq(clf_tokenizer_decode(tok, (const int64_t *)seq.data + n, seq.shape[1] - n, 1, &text), CLF_OK);
  char want[2048];
  snprintf(want, sizeof(want), "%s%s\n", prompt, text);
  ck_assert_str_eq(out, want);
  free(text);
  if (ids_out) *ids_out = ids, *n_out = n;
  else free(ids);
  clf_array_free(&seq);
  clf_model_destroy(m);
  clf_tokenizer_destroy(tok);
}

/* generate --prompt: the printed text is the prompt followed by the decoded
 * new tokens, as the library's tokenizer + generate give them.  The model is
 * the tiny GPT-2 fixture with the GPT-2 tokenizer fixture's files: a prompt
 * whose ids fit the model's 128-token vocabulary, and one whose ids do not,
 * which is refused (transformers raises an IndexError). */
START_TEST(generate_prompt_prints_text) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd),
           "cp %s/gpt2/config.json %s/gpt2/generation_config.json %s/gpt2/model.safetensors %s/ && "
           "cp %s/tokenizers/gpt2/vocab.json %s/tokenizers/gpt2/merges.txt %s/tokenizers/gpt2/tokenizer_config.json %s/",
           fx, fx, fx, tmp, fx, fx, fx, tmp);
  ck_assert_int_eq(system(cmd), 0);
  char args[1024];
  snprintf(args, sizeof(args), "generate %s --prompt \"The quick brown fox\" --max-new-tokens 6", tmp);
  ck_assert_int_eq(run_cli(args), 1);
  /* (decoded on the engine, as a one-row prompt with a token limit is) */
  ck_assert_msg(strstr(slurp("stderr"), "clf_engine_submit: ids[0] is 305, outside the vocabulary (0 to 127)"),
                "%s", slurp("stderr"));
  const char *prompt = "(a+b)*c=d"; /* ids 8, 65, 11, 66, 9, 10, 67, 29, 68 */
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 6", tmp, prompt);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  expect_library_text(tmp, prompt, 0, 0, slurp("stdout"), NULL, NULL);
}
END_TEST

/* A GGUF file as MODEL: generate --prompt tokenizes with the file's own
 * tokenizer and prints what the library's GGUF tokenizer + model give;
 * tokenize prints that tokenizer's ids. */
START_TEST(generate_gguf_file) {
  char file[1024], args[2048];
  snprintf(file, sizeof file, "%s/gguf_models/smollm_like/model.gguf", fx);
  const char *prompt = "the cat sat on the mat";
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 6 --greedy", file, prompt);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char *out = strdup(slurp("stdout"));
  int64_t *ids = NULL;
  size_t n = 0;
  expect_library_text(file, prompt, 1, 1, out, &ids, &n);
  snprintf(args, sizeof(args), "tokenize %s \"%s\"", file, prompt);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  const char *lines = slurp("stdout");
  for (size_t i = 0; i < n; i++) {
    ck_assert_int_eq(atoll(lines), ids[i]);
    lines = strchr(lines, '\n') + 1;
  }
  ck_assert_str_eq(lines, "");
  free(out);
  free(ids);
}
END_TEST

/* Quiet by default (issue 43): a default run prints none of the library's
 * informational notices ("clformer: GEMM tuning profile ... applied" came
 * with every command), only the command's own "clformer generate: ..."
 * lines; every command takes -v, which shows them. */
START_TEST(quiet_by_default) {
  char file[1024], args[2048], saved[256] = "";
  snprintf(file, sizeof file, "%s/gguf_models/smollm_like/model.gguf", fx);
  const char *env = getenv("CLFORMER_LOG");
  if (env) snprintf(saved, sizeof saved, "%s", env);
  unsetenv("CLFORMER_LOG");
  snprintf(args, sizeof(args), "generate %s --prompt hi --max-new-tokens 2 --greedy", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  const char *err = slurp("stderr");
  ck_assert_msg(strncmp(err, "clformer: ", 10) && !strstr(err, "\nclformer: "), "%s", err);
  snprintf(args, sizeof(args), "generate %s --prompt hi --max-new-tokens 2 --greedy -v", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  if (saved[0]) setenv("CLFORMER_LOG", saved, 1);
}
END_TEST

/* Defaults as llama.cpp's and Ollama's (issue 43): without
 * --max-new-tokens, a prompt's continuation goes on to an end token or the
 * model's positions (the fixture's greedy text reaches its 256), and a line
 * says which limit stopped it; a sampling option samples without
 * --do-sample; chat's help names no option chat refuses. */
START_TEST(generate_defaults) {
  char file[1024], args[2048];
  snprintf(file, sizeof file, "%s/gguf_models/smollm_like/model.gguf", fx);
  snprintf(args, sizeof(args), "generate %s --prompt hi --greedy", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_msg(strstr(slurp("stderr"), "stopped at the end of the model's 256 positions"), "%s", slurp("stderr"));
  snprintf(args, sizeof(args), "generate %s --prompt hi --greedy --max-new-tokens 5", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_msg(strstr(slurp("stderr"), "stopped after --max-new-tokens 5"), "%s", slurp("stderr"));
  snprintf(args, sizeof(args), "generate %s --prompt hi --max-new-tokens 8 --do-sample --temperature 0.9 --seed 0", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char *sampled = strdup(slurp("stdout"));
  snprintf(args, sizeof(args), "generate %s --prompt hi --max-new-tokens 8 --temperature 0.9 --seed 0", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_str_eq(slurp("stdout"), sampled);
  free(sampled);
  ck_assert_int_eq(run_cli("chat --help"), 0);
  ck_assert_msg(!strstr(slurp("stdout"), "num-beams"), "%s", slurp("stdout"));
}
END_TEST

/* Issue 43's small items: --version; `clformer help` and `help COMMAND`;
 * a missing MODEL says a .gguf file is taken too; generate on an encoder
 * prints nothing but its error (the prompt came first). */
START_TEST(version_help_and_paths) {
  char args[2048];
  ck_assert_int_eq(run_cli("--version"), 0);
  ck_assert_str_eq(slurp("stdout"), "clformer " CLF_VERSION_STRING "\n");
  ck_assert_int_eq(run_cli("help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "usage: clformer COMMAND"));
  ck_assert_int_eq(run_cli("help chat"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "usage: clformer chat MODEL"));
  snprintf(args, sizeof(args), "generate %s/no-such-model --prompt hi", tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "no-such-model: No such file or directory (MODEL is a model directory or "
                                        "a .gguf file)"), "%s", slurp("stderr"));
  snprintf(args, sizeof(args), "generate %s/bert_mlm --prompt \"hello world\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_str_eq(slurp("stdout"), "");
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "no language-model head"));
}
END_TEST

/* chat: one user message a line, each reply on a line of its own, the
 * second turn's prompt mostly from the cache (the replies themselves are
 * compared with clformer.Model.chat in tests/python/test_chat.py); usage
 * errors exit 2, a model without a chat template 1, naming it. */
START_TEST(chat_turns_and_refusals) {
  char file[1024], args[2048];
  snprintf(file, sizeof file, "%s/gguf_models/smollm_like/model.gguf", fx);
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 5 --system \"be brief\" < %s/in.txt", file, tmp);
  char in[600];
  snprintf(in, sizeof in, "%s/in.txt", tmp);
  FILE *f = fopen(in, "w");
  ck_assert_ptr_nonnull(f);
  fputs("hello there\n\nwhat is on the mat?\n", f); /* the empty line is skipped */
  fclose(f);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  const char *out = slurp("stdout");
  int lines = 0;
  for (const char *p = out; *p; p++) lines += *p == '\n';
  ck_assert_int_eq(lines, 2);
  const char *err = slurp("stderr");
  const char *first = strstr(err, "clformer chat: "), *second = first ? strstr(first + 1, "clformer chat: ") : NULL;
  ck_assert_msg(first && second, "%s", err);
  ck_assert_msg(strstr(first, " 0 of them cached") && !strstr(second, " 0 of them cached"), "%s", err);
  ck_assert_int_eq(run_cli("chat"), 2);
  snprintf(args, sizeof(args), "chat %s --greedy --do-sample < /dev/null", file);
  ck_assert_int_eq(run_cli(args), 2);
  /* a NUL in a line is refused as the server refuses it (it cut the text):
   * that message is not sent, the next one is */
  f = fopen(in, "w");
  ck_assert_ptr_nonnull(f);
  fwrite("a\0b\nhello there\n", 1, 16, f);
  fclose(f);
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 2 < %s", file, in);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "the message contains a NUL character; it was not sent"));
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "prompt "));
  /* the template's budget: a bad one is a usage error, a small one fails the turn naming it */
  snprintf(args, sizeof(args), "chat %s --template-budget steps=1,bogus=2 < /dev/null", file);
  ck_assert_int_eq(run_cli(args), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--template-budget: \"bogus=2\""));
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 2 --template-budget steps=5 < %s", file, in);
  run_cli(args);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "steps budget (5 "));
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 2 --template-budget steps=2M,bytes=1G,memory=512m < %s",
           file, in);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char cmd[2048];
  snprintf(cmd, sizeof(cmd), "mkdir -p %s/plain && cp %s/gpt2/config.json %s/gpt2/model.safetensors "
           "%s/sampling/tokenizer/* %s/plain/", tmp, fx, fx, fx, tmp);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(args, sizeof(args), "chat %s/plain < %s", tmp, in);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "chat template") != NULL, "%s", slurp("stderr"));
  /* a template given as a file replaces the model's (for a file without
   * one); a file missing or not a template is named */
  snprintf(cmd, sizeof(cmd), "printf '{%%%% for m in messages %%%%}{{ m.role }}: {{ m.content }}\\n{%%%% endfor %%%%}' > "
           "%s/t.jinja && printf '{%%%% for %%%%}' > %s/bad.jinja", tmp, tmp);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 3 --chat-template %s/t.jinja < %s", file, tmp, in);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_msg(strstr(slurp("stderr"), "prompt ") != NULL, "%s", slurp("stderr"));
  int plain = 0, with_bos = 0;
  ck_assert_int_eq(sscanf(strstr(slurp("stderr"), "prompt "), "prompt %d tokens", &plain), 1);
  /* ... rendered with the tokenizer's special tokens: {{ bos_token }} is the file's BOS, one token more */
  snprintf(cmd, sizeof(cmd), "printf '{{ bos_token }}' | cat - %s/t.jinja > %s/bos.jinja", tmp, tmp);
  ck_assert_int_eq(system(cmd), 0);
  snprintf(args, sizeof(args), "chat %s --greedy --max-new-tokens 3 --chat-template %s/bos.jinja < %s", file, tmp, in);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_int_eq(sscanf(strstr(slurp("stderr"), "prompt "), "prompt %d tokens", &with_bos), 1);
  ck_assert_msg(with_bos == plain + 1, "prompt of %d tokens with {{ bos_token }}, %d without", with_bos, plain);
  snprintf(args, sizeof(args), "chat %s --chat-template %s/none.jinja < %s", file, tmp, in);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "none.jinja: No such file") != NULL, "%s", slurp("stderr"));
  snprintf(args, sizeof(args), "chat %s --chat-template %s/bad.jinja < %s", file, tmp, in);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "--chat-template") && strstr(slurp("stderr"), "bad.jinja"), "%s",
                slurp("stderr"));
  snprintf(cmd, sizeof(cmd), "rm -r %s/plain %s %s/t.jinja %s/bos.jinja %s/bad.jinja", tmp, in, tmp, tmp, tmp);
  ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* generate --prompt streams: the tiny GPT-2 with the tokenizer of
 * tests/fixtures/sampling/tokenizer, whose vocabulary was arranged by
 * tools/fixtures/make_sampling_fixtures.py so that greedy decoding from
 * "(a+b)*c=d" gives the tokens 98 then 18, the bytes C4 B9 of U+0139
 * (asserted below).  The streamed text must equal the decode of all the new
 * tokens at once (a character printed before its second byte came would show
 * as U+FFFD), --stop must cut the text before the stop string, and a seed
 * must print the same text twice. */
START_TEST(generate_streams_text) {
  char cmd[2048], args[1024];
  snprintf(cmd, sizeof(cmd),
           "cp %s/gpt2/config.json %s/gpt2/generation_config.json %s/gpt2/model.safetensors %s/sampling/tokenizer/* %s/",
           fx, fx, fx, fx, tmp);
  ck_assert_int_eq(system(cmd), 0);
  const char *prompt = "(a+b)*c=d"; /* 9 tokens */
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 20 --out sequences=%s/s.npy", tmp,
           prompt, tmp);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char *out = strdup(slurp("stdout"));
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "tokens/s"));
  clf_array seq;
  char path[512];
  snprintf(path, sizeof(path), "%s/s.npy", tmp);
  ck_assert_int_eq(clf_npy_read(path, &seq), CLF_OK);
  const int64_t *s = (const int64_t *)seq.data + 9;
  const size_t n = seq.shape[1] - 9;
  ck_assert_msg(n >= 2 && s[0] == 98 && s[1] == 18, "the new tokens no longer split U+0139 across two tokens");
  clf_tokenizer *tok = NULL;
  ck_assert_int_eq(clf_tokenizer_load(tmp, &tok), CLF_OK);
  char *text = NULL, want[2048];
  ck_assert_int_eq(clf_tokenizer_decode(tok, s, n, 1, &text), CLF_OK);
  const char *ch = strstr(text, "\xC4\xB9");
  ck_assert_ptr_eq(ch, text);
  snprintf(want, sizeof(want), "%s%s\n", prompt, text);
  ck_assert_str_eq(out, want);
  /* --stop (repeatable): the text ends before the first stop string */
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 20 --stop zzzz --stop N", tmp, prompt);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  snprintf(want, sizeof(want), "%s%.*s\n", prompt, (int)(strchr(text, 'N') - text), text);
  ck_assert_str_eq(slurp("stdout"), want);
  /* --greedy: a checkpoint whose generation_config.json samples still gives
   * the greedy text; with --do-sample too it is a usage error */
  char gc[600], *greedy_text = strdup(out);
  snprintf(gc, sizeof(gc), "%s/generation_config.json", tmp);
  char *cfg = strdup(slurp("generation_config.json")), *brace = strrchr(cfg, '}');
  ck_assert_ptr_nonnull(brace);
  *brace = '\0';
  FILE *f = fopen(gc, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s,\n  \"do_sample\": true, \"top_k\": 0\n}\n", cfg);
  fclose(f);
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 20 --greedy", tmp, prompt);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_str_eq(slurp("stdout"), greedy_text);
  /* stdout and stderr on one pipe: the text's last newline comes before
   * the tokens/s line */
  char cmd2[4096];
  snprintf(cmd2, sizeof(cmd2), "'%s' generate %s --prompt \"%s\" --max-new-tokens 20 --greedy >'%s/both' 2>&1", cli,
           tmp, prompt, tmp);
  ck_assert_int_eq(system(cmd2), 0);
  const char *both = slurp("both"), *text_at = strstr(both, greedy_text), *speed_at = strstr(both, "tokens/s");
  ck_assert_msg(text_at && speed_at && text_at + strlen(greedy_text) <= speed_at, "%s", both);
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" --max-new-tokens 20 --greedy --do-sample", tmp, prompt);
  ck_assert_int_eq(run_cli(args), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--greedy or --do-sample"));
  free(cfg);
  free(greedy_text);
  /* sampling with a seed: the streamed text is the decode of its sequences,
   * and the same seed prints the same text again */
  snprintf(args, sizeof(args),
           "generate %s --prompt \"%s\" --max-new-tokens 20 --do-sample --seed 24 --out sequences=%s/s.npy", tmp,
           prompt, tmp);
  ck_assert_int_eq(run_cli(args), 0);
  free(out), free(text);
  out = strdup(slurp("stdout"));
  clf_array_free(&seq);
  ck_assert_int_eq(clf_npy_read(path, &seq), CLF_OK);
  ck_assert_int_eq(clf_tokenizer_decode(tok, (const int64_t *)seq.data + 9, seq.shape[1] - 9, 1, &text), CLF_OK);
  snprintf(want, sizeof(want), "%s%s\n", prompt, text);
  ck_assert_str_eq(out, want);
  ck_assert_int_eq(run_cli(args), 0);
  ck_assert_str_eq(slurp("stdout"), out);
  /* out-of-range values are usage errors naming the option */
  /* (--temperature 0 and --seed 0 were refused here until issue 43: 0 is
   * greedy and 0 a seed, as in the server) */
  static const char *bad[][2] = {{"--temperature -1", "--temperature"}, {"--top-p 1.5", "--top-p"},
                                 {"--top-k -1", "--top-k"},            {"--min-p 2", "--min-p"},
                                 {"--seed -1", "--seed"},              {"--repetition-penalty -1", "--repetition-penalty"},
                                 {"--stop x", "--stop needs --prompt"},
                                 {"--temperature 0 --do-sample", "--temperature 0 is greedy"}};
  for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
    snprintf(args, sizeof(args), "generate %s --in input_ids=%s/gpt2/greedy_b1.input_ids.npy %s", tmp, fx, bad[i][0]);
    ck_assert_int_eq(run_cli(args), 2);
    ck_assert_msg(strstr(slurp("stderr"), bad[i][1]), "%s: %s", bad[i][0], slurp("stderr"));
  }
  free(text);
  free(out);
  clf_array_free(&seq);
  clf_tokenizer_destroy(tok);
}
END_TEST

/* embed: the printed cosine matrix equals the one computed here from the
 * library (tokenizer + model run + mean pooling).  The model is the tiny
 * BERT fixture with the first 128 entries of the tokenizer fixture's
 * vocabulary ([PAD] [UNK] [CLS] [SEP] [MASK] first), so every id fits. */
/* `clformer embed DIR` on three texts (padded into one batch) prints the
 * cosines of the mean-pooled last_hidden_state of each text run alone
 * through the library (D = hidden size). */
static void embed_matches_library(const char *dir, int D) {
  static const char *texts[3] = {"the quick brown fox", "a lazy dog, again!", "hello world"};
  char args[2048];
  snprintf(args, sizeof(args), "embed %s \"%s\" \"%s\" \"%s\"", dir, texts[0], texts[1], texts[2]);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", dir, slurp("stderr"));
  const char *out = slurp("stdout");

  clf_tokenizer *tok = NULL;
  clf_model *m = NULL;
  ck_assert_int_eq(clf_tokenizer_load(dir, &tok), CLF_OK);
  TH_OK(clf_model_load(th_ctx, dir, &m));
  float emb[3][64];
  ck_assert_int_le(D, 64);
  for (int i = 0; i < 3; i++) {
    int64_t *ids = NULL;
    size_t n = 0;
    ck_assert_int_eq(clf_tokenizer_encode(tok, texts[i], 1, &ids, &n), CLF_OK);
    clf_array in = {.name = "input_ids", .dtype = CLF_I64, .ndim = 2, .shape = {1, n}, .data = ids}, res;
    const char *outs[1] = {"last_hidden_state"};
    TH_OK(clf_model_run(m, &in, 1, outs, 1, &res));
    ck_assert_int_eq((int)res.shape[2], D);
    const float *h = res.data;
    double norm = 0;
    for (int d = 0; d < D; d++) {
      double s = 0;
      for (size_t j = 0; j < n; j++) s += h[j * D + d];
      emb[i][d] = (float)(s / n);
      norm += (double)emb[i][d] * emb[i][d];
    }
    for (int d = 0; d < D; d++) emb[i][d] /= (float)sqrt(norm);
    clf_array_free(&res);
    free(ids);
  }
  for (int i = 0; i < 3; i++) {
    char tag[8];
    snprintf(tag, sizeof(tag), "[%d]", i);
    const char *row = strstr(out, tag);
    ck_assert_ptr_nonnull(row);
    row += strlen(tag);
    for (int j = 0; j < 3; j++) {
      double want = 0, got;
      for (int d = 0; d < D; d++) want += (double)emb[i][d] * emb[j][d];
      int used = 0;
      ck_assert_int_eq(sscanf(row, "%lf%n", &got, &used), 1);
      row += used;
      /* printed with 4 decimals */
      ck_assert_msg(fabs(got - want) <= 6e-5, "%s: cos[%d][%d] printed %.4f, library gives %.6f", dir, i, j, got,
                    want);
    }
  }
  clf_model_destroy(m);
  clf_tokenizer_destroy(tok);
}

START_TEST(embed_prints_cosines) {
  char cmd[2048];
  snprintf(cmd, sizeof(cmd),
           "cp %s/bert/config.json %s/bert/model.safetensors %s/ && head -n 128 %s/tokenizers/bert/vocab.txt > %s/vocab.txt"
           " && cp %s/tokenizers/bert/tokenizer_config.json %s/",
           fx, fx, tmp, fx, tmp, fx, tmp);
  ck_assert_int_eq(system(cmd), 0);
  embed_matches_library(tmp, 32);
  /* Head checkpoints as base models: DistilBERT takes no token_type_ids,
   * RoBERTa pads with its pad_token_id (1), not 0. */
  static const char *const heads[2] = {"distilbert_mlm", "roberta_mlm"};
  for (int i = 0; i < 2; i++) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", fx, heads[i]);
    embed_matches_library(dir, 32);
  }
}
END_TEST

/* The whole of one output file (malloc'd), however long. */
static char *slurp_alloc(const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", tmp, name);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)len + 1);
  ck_assert_ptr_nonnull(buf);
  ck_assert_uint_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
  buf[len] = '\0';
  fclose(f);
  return buf;
}

static double json_num(const cJSON *obj, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
  ck_assert_msg(cJSON_IsNumber(v), "\"%s\" is not a number", key);
  return v->valuedouble;
}

/* A {median, min, max, runs, unit} object: min <= median <= max, all > 0. */
static void expect_stats(const cJSON *obj, const char *key, int runs) {
  const cJSON *s = cJSON_GetObjectItemCaseSensitive(obj, key);
  ck_assert_msg(cJSON_IsObject(s), "no \"%s\" statistics", key);
  double med = json_num(s, "median"), mn = json_num(s, "min"), mx = json_num(s, "max");
  ck_assert_msg(mn > 0 && mn <= med && med <= mx, "%s: min %g median %g max %g", key, mn, med, mx);
  ck_assert_int_eq((int)json_num(s, "runs"), runs);
}

/* One ratio entry: both timings' statistics (3 runs with --quick) and the
 * ratio of their medians. */
static void expect_ratio(const cJSON *e, const char *num, const char *den, const char *ratio) {
  expect_stats(e, num, 3);
  expect_stats(e, den, 3);
  double n = json_num(cJSON_GetObjectItemCaseSensitive(e, num), "median");
  double d = json_num(cJSON_GetObjectItemCaseSensitive(e, den), "median");
  ck_assert_double_eq_tol(json_num(e, ratio), n / d, 1e-9 * n / d);
}

/* measured.ratios (what `clformer bench` printed): with --quick, the fused
 * attention kernel against the GEMM path on BERT-base L=128 and GPT-2
 * decode, layer norm against a copy on [128, 768]. */
static void expect_ratios(const cJSON *r) {
  ck_assert_msg(cJSON_IsObject(r), "no measured.ratios");
  const cJSON *attn = cJSON_GetObjectItemCaseSensitive(r, "attention");
  const cJSON *ln = cJSON_GetObjectItemCaseSensitive(r, "layer_norm");
  ck_assert_int_eq(cJSON_GetArraySize(attn), 2);
  ck_assert_int_eq(cJSON_GetArraySize(ln), 1);
  const cJSON *e;
  cJSON_ArrayForEach(e, attn) expect_ratio(e, "gemm_ms", "fused_ms", "gemm_over_fused");
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(attn, 0), "name")->valuestring,
                   "BERT-base L=128");
  ck_assert_int_eq((int)json_num(cJSON_GetArrayItem(attn, 1), "Lq"), 1);
  ck_assert_int_eq((int)json_num(cJSON_GetArrayItem(attn, 1), "Lk"), 256);
  cJSON_ArrayForEach(e, ln) expect_ratio(e, "layer_norm_ms", "copy_ms", "layer_norm_over_copy");
  ck_assert_int_eq((int)json_num(cJSON_GetArrayItem(ln, 0), "rows"), 128);
  ck_assert_int_eq((int)json_num(cJSON_GetArrayItem(ln, 0), "cols"), 768);
}

/* probe --json: one entry per device that clf_list_devices reports, the
 * property values equal to what clGetDeviceInfo answers here, and measured
 * numbers that agree with their own timings. */
START_TEST(probe_json_describes_every_device) {
  /* The build measurement makes PoCL export the binary of a kernel it has
   * never seen, and PoCL's LLVM passes leak there; under LeakSanitizer that
   * one known leak is suppressed by tests/lsan-drivers.supp (LSAN_OPTIONS,
   * tests/meson.build), which needs full stacks to see it is PoCL's. */
  const char *asan_was = getenv("ASAN_OPTIONS");
  char *asan_saved = asan_was ? strdup(asan_was) : NULL;
  char asan[1024];
  snprintf(asan, sizeof(asan), "%s%sfast_unwind_on_malloc=0", asan_saved ? asan_saved : "", asan_saved ? ":" : "");
  setenv("ASAN_OPTIONS", asan, 1);
  int rc = run_cli("probe --json --quick --no-validate");
  if (asan_saved) setenv("ASAN_OPTIONS", asan_saved, 1);
  else unsetenv("ASAN_OPTIONS");
  free(asan_saved);
  ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp("stderr"));
  char *text = slurp_alloc("stdout");
  cJSON *root = cJSON_Parse(text);
  ck_assert_msg(root != NULL, "probe --json printed no valid JSON: %.200s", text);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(root, "schema")->valuestring, "clformer-probe");
  ck_assert_int_eq((int)json_num(root, "schema_version"), 1);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(root, "clformer_version")->valuestring, CLF_VERSION_STRING);

  clf_device_desc devs[16];
  size_t n = 0;
  ck_assert_int_eq(clf_list_devices(devs, 16, &n), CLF_OK);
  const cJSON *devices = cJSON_GetObjectItemCaseSensitive(root, "devices");
  ck_assert_int_eq(cJSON_GetArraySize(devices), (int)n);
  for (size_t i = 0; i < n && i < 16; i++) {
    const cJSON *d = cJSON_GetArrayItem(devices, (int)i);
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(d, "properties");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(props, "CL_DEVICE_NAME"),
                                                         "value");
    ck_assert(cJSON_IsString(name));
    /* clf_device_desc truncates long names to its field. */
    ck_assert_int_eq(strncmp(name->valuestring, devs[i].device_name, sizeof(devs[i].device_name) - 1), 0);
    cl_uint cu = 0;
    ck_assert_int_eq(clGetDeviceInfo(devs[i].device, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cu), &cu, NULL), CL_SUCCESS);
    ck_assert_int_eq((cl_uint)json_num(cJSON_GetObjectItemCaseSensitive(props, "CL_DEVICE_MAX_COMPUTE_UNITS"),
                                       "value"), cu);
    char ext[16384] = "";
    ck_assert_int_eq(clGetDeviceInfo(devs[i].device, CL_DEVICE_EXTENSIONS, sizeof(ext), ext, NULL), CL_SUCCESS);
    const cJSON *fp64 = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(d, "extensions_of_interest"),
                                                         "cl_khr_fp64");
    ck_assert(cJSON_IsBool(fp64));
    ck_assert_int_eq(cJSON_IsTrue(fp64), strstr(ext, "cl_khr_fp64") != NULL);
    /* A query the device does not answer is an error in its row, or (one
     * the driver does not know: CL_INVALID_VALUE) "supported": false; not a
     * gap.  PoCL does not know CL_DEVICE_SUB_GROUP_SIZES_INTEL. */
    const cJSON *row;
    cJSON_ArrayForEach(row, props) ck_assert_msg(cJSON_GetObjectItemCaseSensitive(row, "value") ||
                                                     cJSON_IsString(cJSON_GetObjectItemCaseSensitive(row, "error")) ||
                                                     cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(row, "supported")),
                                                 "%s has neither value nor error", row->string);
    if (!strstr(ext, "cl_intel_subgroups")) {
      const cJSON *sg = cJSON_GetObjectItemCaseSensitive(props, "CL_DEVICE_SUB_GROUP_SIZES_INTEL");
      ck_assert_msg(cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(sg, "supported")) ||
                        cJSON_GetObjectItemCaseSensitive(sg, "value"),
                    "CL_DEVICE_SUB_GROUP_SIZES_INTEL without cl_intel_subgroups: neither unsupported nor a value");
    }

    const cJSON *m = cJSON_GetObjectItemCaseSensitive(d, "measured");
    ck_assert_msg(cJSON_IsObject(m), "device %zu: nothing measured (%s)", i,
                  cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "error")));
    const cJSON *bw = cJSON_GetObjectItemCaseSensitive(m, "bandwidth");
    expect_stats(bw, "ms", 3);
    /* GB/s = read + write bytes over the median device time. */
    double bytes = json_num(bw, "bytes"), ms = json_num(cJSON_GetObjectItemCaseSensitive(bw, "ms"), "median");
    ck_assert_double_eq_tol(json_num(bw, "gb_per_s"), 2 * bytes / (ms * 1e6), 1e-9 * json_num(bw, "gb_per_s"));
    const cJSON *g;
    int gemms = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(m, "sgemm")) {
      expect_stats(g, "ms", 3);
      double flops = 2 * json_num(g, "m") * json_num(g, "n") * json_num(g, "k");
      double gms = json_num(cJSON_GetObjectItemCaseSensitive(g, "ms"), "median");
      ck_assert_double_eq_tol(json_num(g, "gflops"), flops / (gms * 1e6), 1e-9 * json_num(g, "gflops"));
      gemms++;
    }
    ck_assert_int_ge(gemms, 3);
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(m, "attention")) {
      expect_stats(g, "ms", 3);
      ck_assert(json_num(g, "gflops") > 0);
    }
    /* One row through each type --weights makes (--quick), about 16 MiB
     * of it in the models' layout: its bytes, GB/s and share of the copy's
     * from its own timing. */
    static const char *const dec_types[] = {"q8_0", "q4_0", "q4_k", "q6_k"};
    static const double dec_block[][2] = {{32, 34}, {32, 18}, {256, 144}, {256, 210}};
    int decs = 0;
    cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(m, "decode_by_type")) {
      ck_assert_int_lt(decs, 4);
      ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(g, "type")), dec_types[decs]);
      expect_stats(g, "ms", 3);
      const double rows = json_num(g, "rows"), cols = json_num(g, "cols"), wb = json_num(g, "weight_bytes");
      /* as many rows (a multiple of 16, at least 16) as fit 16 MiB, or a
       * quarter of the largest allocation where that is less */
      cl_ulong max_alloc = 0;
      ck_assert_int_eq(clGetDeviceInfo(devs[i].device, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof max_alloc, &max_alloc,
                                       NULL), CL_SUCCESS);
      const double target = fmin(16.0 * 1048576, (double)(max_alloc / 4));
      const double row_bytes = cols / dec_block[decs][0] * dec_block[decs][1];
      ck_assert(cols == 4096);
      ck_assert_double_eq(rows, fmax(16, floor(target / row_bytes / 16) * 16));
      ck_assert_double_eq(wb, rows * row_bytes);
      const double dms = json_num(cJSON_GetObjectItemCaseSensitive(g, "ms"), "median"), gbs = json_num(g, "gb_per_s");
      ck_assert_double_eq_tol(gbs, wb / (dms * 1e6), 1e-9 * gbs);
      ck_assert_double_eq_tol(json_num(g, "of_copy"), gbs / json_num(bw, "gb_per_s"), 1e-9 * gbs);
      decs++;
    }
    ck_assert_int_eq(decs, 4);
    expect_ratios(cJSON_GetObjectItemCaseSensitive(m, "ratios"));
    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(m, "kernel_build");
    expect_stats(kb, "cold_ms", 1);
    expect_stats(kb, "cached_ms", 1);
    expect_stats(cJSON_GetObjectItemCaseSensitive(m, "launch_latency"), "host_round_trip_us", 9);
    ck_assert(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(d, "tuning")));
  }
  cJSON_Delete(root);
  free(text);
}
END_TEST

/* The human report has its sections; bad options and devices say so. */
START_TEST(probe_human_and_errors) {
  char args[64];
  snprintf(args, sizeof(args), "probe --device 0:0 --no-measure");
  int rc = run_cli(args);
  ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp("stderr"));
  const char *out = slurp("stdout");
  const char *want[] = {"== device 0:0", "Properties", "CL_DEVICE_NAME", "CL_DEVICE_MAX_WORK_ITEM_SIZES",
                        "cl_khr_fp16", "Self-validation", "GEMM tuning profile", "applied: "};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
    ck_assert_msg(strstr(out, want[i]) != NULL, "no \"%s\" in:\n%s", want[i], out);
  ck_assert_ptr_null(strstr(out, "Measured"));
  ck_assert_ptr_null(strstr(out, "Beside a baseline"));
  /* The self-validation (what `selfcheck` did for layer norm and attention,
   * for every variant): none failed, as the exit status 0 says, and the
   * context's program builds are reported. */
  unsigned variants = 0, built = 0, from_disk = 0;
  double build_ms = -1;
  const char *summary = strstr(out, " variants, 0 failed");
  ck_assert_msg(summary != NULL, "no \"N variants, 0 failed\" in:\n%s", out);
  while (summary > out && summary[-1] != ' ') summary--;
  ck_assert_int_eq(sscanf(summary, "%u", &variants), 1);
  ck_assert_uint_gt(variants, 0);
  const char *programs = strstr(out, "programs: ");
  ck_assert_ptr_nonnull(programs);
  ck_assert_int_eq(sscanf(programs, "programs: %u built from source, %u from the disk cache, %lf ms building", &built,
                          &from_disk, &build_ms), 3);
  ck_assert_uint_gt(built + from_disk, 0);
  ck_assert(build_ms >= 0);

  ck_assert_ptr_nonnull(strstr(out, "Device class: "));
  /* The driver defects probe checks for (the sign-extension compare that
   * Mesa 22.3's rusticl gets wrong; PoCL, the device here, does not). */
  const char *defects = strstr(out, "    driver defects: ");
  ck_assert_msg(defects != NULL, "no driver defects line in:\n%s", out);
  if (strstr(clf_context_device(th_ctx)->platform_name, "Portable Computing Language"))
    ck_assert_msg(!strncmp(defects, "    driver defects: none found", 30), "%.200s", defects);

  /* The class the choices followed, overridden, and the limits; a class
   * that is not one leaves the device unprobed, with the library's error. */
  rc = run_cli("probe --device 0:0 --no-measure --no-validate --json");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp("stderr"));
  cJSON *root = cJSON_Parse(slurp("stdout"));
  ck_assert_ptr_nonnull(root);
  const cJSON *dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(root, "device_class");
  ck_assert(cJSON_IsString(cls));
  ck_assert_str_eq(cls->valuestring, cJSON_GetObjectItemCaseSensitive(dev, "device_class")->valuestring);
  cJSON_Delete(root);
  const char *env_class = getenv("CLFORMER_DEVICE_CLASS"), *env_limits = getenv("CLFORMER_LIMITS");
  char *saved_class = env_class ? strdup(env_class) : NULL, *saved_limits = env_limits ? strdup(env_limits) : NULL;
  setenv("CLFORMER_DEVICE_CLASS", "gpu", 1);
  setenv("CLFORMER_LIMITS", "wg=16", 1);
  rc = run_cli("probe --device 0:0 --no-measure --no-validate --json");
  ck_assert_msg(rc == 0, "exit %d: %s", rc, slurp("stderr"));
  root = cJSON_Parse(slurp("stdout"));
  ck_assert_ptr_nonnull(root);
  dev = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "devices"), 0);
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(root, "device_class")->valuestring, "gpu");
  ck_assert(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(dev, "device_class_overridden")));
  ck_assert_str_eq(cJSON_GetObjectItemCaseSensitive(dev, "limits")->valuestring, "wg=16");
  cJSON_Delete(root);
  setenv("CLFORMER_DEVICE_CLASS", "tpu", 1);
  ck_assert_int_eq(run_cli("probe --device 0:0 --no-measure --no-validate"), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "CLFORMER_DEVICE_CLASS is \"tpu\": not a device class"));
  if (saved_class) setenv("CLFORMER_DEVICE_CLASS", saved_class, 1);
  else unsetenv("CLFORMER_DEVICE_CLASS");
  if (saved_limits) setenv("CLFORMER_LIMITS", saved_limits, 1);
  else unsetenv("CLFORMER_LIMITS");
  free(saved_class);
  free(saved_limits);

  ck_assert_int_eq(run_cli("probe --device nosuchdevice"), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "nosuchdevice"));
  ck_assert_int_eq(run_cli("probe --frobnicate"), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "--frobnicate"));
  ck_assert_int_eq(run_cli("probe --tune --tokens lots"), 2);
  /* --tokens takes a list of up to 8 counts; a bad item names the list. */
  ck_assert_int_eq(run_cli("probe --tune --tokens 32,x"), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "\"32,x\""));
  ck_assert_int_eq(run_cli("probe --tune --tokens 32,,128"), 2);
  ck_assert_int_eq(run_cli("probe --tune --tokens 32,0"), 2);
  ck_assert_int_eq(run_cli("probe --tune --tokens 1,2,3,4,5,6,7,8,9"), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "up to 8"));
  /* --model alone: the KV pool the engine would get (a model that does not
   * load fails the probe; --tokens still goes with --tune). */
  ck_assert_int_eq(run_cli("probe --device 0:0 --no-measure --no-validate --model /no/such/model"), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "    not loaded: "));
  ck_assert_int_eq(run_cli("probe --tokens 32"), 2);
  ck_assert_int_eq(run_cli("probe --help"), 0);
  ck_assert_ptr_nonnull(strstr(slurp("stdout"), "schema_version"));
}
END_TEST

/* stderr holds `want` (a usage error) and the command's usage line. */
static void expect_usage_error(const char *args, const char *want, const char *cmd) {
  ck_assert_msg(run_cli(args) == 2, "%s: not refused as a usage error", args);
  const char *err = slurp("stderr");
  ck_assert_msg(strstr(err, want) != NULL, "%s: no \"%s\" in:\n%s", args, want, err);
  char usage[64];
  snprintf(usage, sizeof(usage), "usage: clformer %s", cmd);
  ck_assert_msg(strstr(err, usage) != NULL, "%s: no \"%s\" in:\n%s", args, usage, err);
}

/* One parser for every command: the same messages for a bad number, a number
 * out of its stated range, an unknown option, a missing value, a missing
 * required option and one argument too many; all exit 2 before any work. */
/* The pipeline transformers ran on the fixture (cases.json "pipeline"). */
static cJSON *pipeline_of(const char *fixture) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s/cases.json", fx, fixture);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  cJSON *j = cJSON_Parse(buf);
  ck_assert_ptr_nonnull(j);
  return j;
}

/* Each "  SCORE  NAME (ID)" line of a block, from *at on: the score within
 * 1e-4 of transformers' (printed with 4 decimals), the name and id exact. */
static const char *expect_scored_line(const char *at, double score, const char *name, int id) {
  double got;
  char got_name[128];
  int got_id, used = 0;
  ck_assert_msg(sscanf(at, " %lf %127s (%d)%n", &got, got_name, &got_id, &used) == 3, "unexpected line: %.60s", at);
  ck_assert_msg(fabs(got - score) <= 1e-4, "score %.4f, transformers %.6f (%s)", got, score, name);
  ck_assert_str_eq(got_name, name);
  ck_assert_int_eq(got_id, id);
  return at + used;
}

/* `fill-mask` prints the top K of transformers' fill-mask pipeline on the
 * fixture's text, in its order, with its scores, at the position of the
 * pipeline's mask token (its mask_token_id in its input_ids). */
static void fill_mask_fixture(const char *fixture) {
  cJSON *j = pipeline_of(fixture), *p = cJSON_GetObjectItem(j, "pipeline"), *r;
  char args[1024], head[64];
  snprintf(args, sizeof(args), "fill-mask %s/%s \"%s\" --top-k %d", fx, fixture,
           cJSON_GetObjectItem(p, "text")->valuestring, cJSON_GetObjectItem(p, "top_k")->valueint);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", fixture, slurp("stderr"));
  int pos = -1, k = 0;
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(p, "input_ids")) {
    if (pos < 0 && r->valueint == cJSON_GetObjectItem(p, "mask_token_id")->valueint) pos = k;
    k++;
  }
  ck_assert_int_ge(pos, 0);
  snprintf(head, sizeof(head), "mask 1 (token %d)\n", pos);
  const char *out = slurp("stdout");
  ck_assert_msg(!strncmp(out, head, strlen(head)), "%s: %s", fixture, out);
  const char *at = out + strlen(head);
  cJSON_ArrayForEach(r, cJSON_GetObjectItem(p, "results")) at =
      expect_scored_line(at, cJSON_GetObjectItem(r, "score")->valuedouble,
                         cJSON_GetObjectItem(r, "token_str")->valuestring, cJSON_GetObjectItem(r, "token")->valueint);
  ck_assert_str_eq(at, "\n");
  cJSON_Delete(j);
}

START_TEST(fill_mask_matches_pipeline) {
  fill_mask_fixture("bert_mlm");       /* [CLS] paris is the [MASK]: token 4 */
  fill_mask_fixture("distilbert_mlm"); /* WordPiece; no token_type_ids */
  char args[1024];
  /* errors: no mask in the text; a model that is no masked LM */
  snprintf(args, sizeof(args), "fill-mask %s/bert_mlm \"no mask here\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "the text has no mask token"));
  snprintf(args, sizeof(args), "fill-mask %s/bert_seqcls \"a [MASK] b\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "(not a masked LM)"));
}
END_TEST

/* The id of `label` in the fixture's config.json id2label. */
static int label_id(const char *fixture, const char *label) {
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s/config.json", fx, fixture);
  FILE *f = fopen(path, "rb");
  ck_assert_ptr_nonnull(f);
  static char buf[1 << 14];
  size_t n = fread(buf, 1, sizeof(buf) - 1, f);
  buf[n] = 0;
  fclose(f);
  cJSON *j = cJSON_Parse(buf), *it;
  int id = -1;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "id2label")) if (!strcmp(it->valuestring, label)) id = atoi(it->string);
  cJSON_Delete(j);
  ck_assert_int_ge(id, 0);
  return id;
}

/* `classify` on a text classifier: each text's labels (id2label) with
 * transformers' text-classification pipeline scores, most probable first
 * (BERT with WordPiece, GPT-2 with its byte-level BPE and the last-token
 * pick); the image path stays for directories with preprocessor_config.json
 * (test_image.c). */
static void classify_text(const char *fixture) {
  cJSON *j = pipeline_of(fixture), *p = cJSON_GetObjectItem(j, "pipeline");
  cJSON *texts = cJSON_GetObjectItem(p, "texts"), *results = cJSON_GetObjectItem(p, "results");
  char args[1024];
  snprintf(args, sizeof(args), "classify %s/%s \"%s\" \"%s\"", fx, fixture,
           cJSON_GetArrayItem(texts, 0)->valuestring, cJSON_GetArrayItem(texts, 1)->valuestring);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  const char *at = slurp("stdout");
  for (int t = 0; t < 2; t++) {
    const char *text = cJSON_GetArrayItem(texts, t)->valuestring;
    ck_assert_msg(!strncmp(at, text, strlen(text)) && at[strlen(text)] == '\n', "block %d: %.60s", t, at);
    at += strlen(text) + 1;
    cJSON *r;
    cJSON_ArrayForEach(r, cJSON_GetArrayItem(results, t)) {
      const char *label = cJSON_GetObjectItem(r, "label")->valuestring;
      at = expect_scored_line(at, cJSON_GetObjectItem(r, "score")->valuedouble, label, label_id(fixture, label));
      at += *at == '\n';
    }
  }
  ck_assert_str_eq(at, "");
  cJSON_Delete(j);
}

START_TEST(classify_text_matches_pipeline) {
  classify_text("bert_seqcls");
  classify_text("gpt2_seqcls");
  classify_text("distilbert_seqcls");
  char args[1024];
  /* a masked LM is no sequence classifier */
  snprintf(args, sizeof(args), "classify %s/bert_mlm \"text\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "not a sequence classifier"));
  /* neither an image processor nor a tokenizer */
  snprintf(args, sizeof(args), "classify %s/bert_qa \"text\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "no preprocessor_config.json (an image classifier) and no tokenizer"));
}
END_TEST

/* RoBERTa and XLM-RoBERTa end to end: fill-mask finds "<mask>" by the
 * tokenizer's mask_token, classify reads the first token's classifier;
 * against the pipelines' values in roberta_mlm / roberta_seqcls
 * (RobertaTokenizer: vocab.json + merges.txt, <s> .. </s>) and xlmr_mlm /
 * xlmr_seqcls (XLMRobertaTokenizer: sentencepiece.bpe.model). */
START_TEST(roberta_matches_pipeline) {
  static const char *const dirs[4] = {"roberta_mlm", "roberta_seqcls",
                                      "xlmr_mlm", "xlmr_seqcls"};
  for (int i = 0; i < 4; i++) {
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", fx, dirs[i]);
    clf_tokenizer *tok = NULL;
    const clf_status st = clf_tokenizer_load(dir, &tok);
    clf_tokenizer_destroy(tok);
    ck_assert_msg(st == CLF_OK, "%s: %s", dirs[i], clf_last_error(NULL));
    if (i % 2 == 0)
      fill_mask_fixture(dirs[i]);
    else
      classify_text(dirs[i]);
  }
}
END_TEST

/* What `generate --prompt P` prints after the prompt: its new text (the
 * line end kept), into buf; the command's stdout less P. */
static void generate_text(const char *model, const char *prompt, const char *extra, char *buf, size_t len) {
  char args[2048];
  snprintf(args, sizeof(args), "generate %s --prompt \"%s\" %s", model, prompt, extra);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  const char *out = slurp("stdout");
  ck_assert_msg(!strncmp(out, prompt, strlen(prompt)), "%s", out);
  snprintf(buf, len, "%s", out + strlen(prompt));
}

/* batch (issue 40): two prompts x --parallel 2 through the engine print,
 * under their headers in submission order, the text `generate` prints for
 * each prompt alone (greedy: the engine's promise of the same tokens);
 * --json carries the same texts and the keys tools/bench_engine.py reads;
 * --prompts FILE is the same as the --prompt list; copy C under --seed S
 * samples as generate --seed S+C; a prompt that leaves no position fails
 * its sequence only (exit 1); usage errors exit 2. */
START_TEST(batch_matches_generate) {
  char file[1024], args[2048], want[4096] = "", text[2][512];
  snprintf(file, sizeof file, "%s/gguf_models/smollm_like/model.gguf", fx);
  const char *prompts[2] = {"the cat sat on the mat", "hello world"};
  for (int p = 0; p < 2; p++) generate_text(file, prompts[p], "--max-new-tokens 5 --greedy", text[p], sizeof text[p]);
  for (int i = 0; i < 4; i++) /* 5 new tokens, no end token among them: "length" */
    snprintf(want + strlen(want), sizeof want - strlen(want), "--- sequence %d (prompt %d, copy %d): length ---\n%s",
             i, i / 2, i % 2, text[i / 2]);
  snprintf(args, sizeof(args), "batch %s --prompt \"%s\" --prompt \"%s\" --parallel 2 --greedy --max-new-tokens 5",
           file, prompts[0], prompts[1]);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_str_eq(slurp("stdout"), want);
  const char *err = slurp("stderr");
  ck_assert_msg(strstr(err, "clformer batch: 4 sequences, 20 new tokens in ") && strstr(err, " tokens/s decoding\n") &&
                strstr(err, "the first token after a median of ") && strstr(err, " preemptions"), "%s", err);

  /* --json: one object; 4 sequences of 5 tokens, the same texts (less the
   * line end generate adds), the library's default block of 16 positions. */
  ck_assert_msg(run_cli(strcat(args, " --json")) == 0, "%s", slurp("stderr"));
  cJSON *root = cJSON_Parse(slurp("stdout"));
  ck_assert_ptr_nonnull(root);
  const cJSON *seqs = cJSON_GetObjectItemCaseSensitive(root, "sequences"), *q;
  ck_assert_int_eq(cJSON_GetArraySize(seqs), 4);
  int i = 0;
  cJSON_ArrayForEach(q, seqs) {
    char line[512];
    snprintf(line, sizeof line, "%s\n", cJSON_GetStringValue(cJSON_GetObjectItem(q, "text")));
    ck_assert_str_eq(line, text[i / 2]);
    ck_assert_int_eq(cJSON_GetObjectItem(q, "prompt")->valueint, i / 2);
    ck_assert_int_eq(cJSON_GetObjectItem(q, "copy")->valueint, i % 2);
    ck_assert_int_eq(cJSON_GetObjectItem(q, "tokens")->valueint, 5);
    ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(q, "finish")), "length");
    ck_assert(cJSON_GetObjectItem(q, "ttft_ms")->valuedouble > 0);
    i++;
  }
  ck_assert_int_eq(cJSON_GetObjectItem(root, "new_tokens")->valueint, 20);
  const char *numbers[] = {"seconds", "tokens_per_s", "decode_tokens_per_s", "ttft_ms_median"};
  for (size_t k = 0; k < sizeof numbers / sizeof *numbers; k++)
    ck_assert_msg(cJSON_GetObjectItem(root, numbers[k])->valuedouble > 0, "%s", numbers[k]);
  const cJSON *kv = cJSON_GetObjectItem(root, "kv");
  ck_assert_int_eq(cJSON_GetObjectItem(kv, "block_size")->valueint, 16);
  ck_assert_int_gt(cJSON_GetObjectItem(kv, "blocks")->valueint, 0);
  ck_assert_int_gt(cJSON_GetObjectItem(kv, "block_bytes")->valueint, 0);
  ck_assert(cJSON_IsNumber(cJSON_GetObjectItem(kv, "prefix_tokens_reused")));
  ck_assert_int_eq(cJSON_GetObjectItem(kv, "preemptions")->valueint, 0);
  ck_assert_int_ge(cJSON_GetObjectItem(root, "steps")->valueint, 5); /* a token a step at most */
  ck_assert_int_ge(cJSON_GetObjectItem(root, "rows")->valueint, 20);
  const int blocks = cJSON_GetObjectItem(kv, "blocks")->valueint, block_bytes = cJSON_GetObjectItem(kv, "block_bytes")->valueint;
  cJSON_Delete(root);

  /* probe --model reports the pool of the same default options: the same
   * blocks, and the fixture's 256 positions in 16 of them per sequence. */
  snprintf(args, sizeof(args), "probe --device 0:0 --no-measure --no-validate --json --model %s", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  root = cJSON_Parse(slurp("stdout"));
  ck_assert_ptr_nonnull(root);
  const cJSON *pool = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "devices"), 0), "kv_pool");
  ck_assert_int_eq(cJSON_GetObjectItem(pool, "blocks")->valueint, blocks);
  ck_assert_int_eq(cJSON_GetObjectItem(pool, "block_size")->valueint, 16);
  ck_assert_int_eq(cJSON_GetObjectItem(pool, "block_bytes")->valueint, block_bytes);
  ck_assert_double_eq(cJSON_GetObjectItem(pool, "bytes")->valuedouble, (double)blocks * block_bytes);
  ck_assert_int_eq(cJSON_GetObjectItem(pool, "max_positions")->valueint, 256);
  ck_assert_int_eq(cJSON_GetObjectItem(pool, "full_sequences")->valueint, blocks / 16);
  cJSON_Delete(root);
  snprintf(args, sizeof(args), "probe --device 0:0 --no-measure --no-validate --model %s", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char line[256];
  snprintf(line, sizeof line, "    %d blocks of 16 positions, ", blocks);
  ck_assert_msg(strstr(slurp("stdout"), line) && strstr(slurp("stdout"), "sequences of the model's full 256 positions"),
                "%s", slurp("stdout"));

  /* --prompts FILE: one prompt a line, the empty one skipped. */
  char path[600];
  snprintf(path, sizeof path, "%s/prompts.txt", tmp);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fprintf(f, "%s\n\n%s\n", prompts[0], prompts[1]);
  fclose(f);
  snprintf(want, sizeof want, "--- sequence 0 (prompt 0, copy 0): length ---\n%s"
           "--- sequence 1 (prompt 1, copy 0): length ---\n%s", text[0], text[1]);
  snprintf(args, sizeof(args), "batch %s --prompts %s --greedy --max-new-tokens 5", file, path);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  ck_assert_str_eq(slurp("stdout"), want);

  /* --seed 5: copy 1 samples as generate --seed 6. */
  generate_text(file, "hi", "--max-new-tokens 6 --temperature 0.9 --seed 6", text[1], sizeof text[1]);
  snprintf(args, sizeof(args), "batch %s --prompt hi --parallel 2 --max-new-tokens 6 --temperature 0.9 --seed 5", file);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  snprintf(want, sizeof want, "--- sequence 1 (prompt 0, copy 1): length ---\n%s", text[1]);
  ck_assert_msg(strstr(slurp("stdout"), want), "%s", slurp("stdout"));

  /* A prompt past the model's 256 positions fails its own sequence. */
  f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  for (int w = 0; w < 300; w++) fputs("cat ", f);
  fputs("\nhi\n", f);
  fclose(f);
  snprintf(args, sizeof(args), "batch %s --prompts %s --greedy --max-new-tokens 2", file, path);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(!strncmp(slurp("stdout"), "--- sequence 0 (prompt 0, copy 0): error ---\n\n"
                                          "--- sequence 1 (prompt 1, copy 0): length ---\n", 92), "%s", slurp("stdout"));
  ck_assert_msg(strstr(slurp("stderr"), "clformer batch: sequence 0: clf_engine_submit: a prompt of "), "%s",
                slurp("stderr"));

  expect_usage_error("batch m", "clformer batch: give either --prompt TEXT (repeatable) or --prompts FILE", "batch");
  expect_usage_error("batch m --prompt a --prompts f", "give either --prompt", "batch");
  expect_usage_error("batch m --prompt a --parallel 0",
                     "clformer batch: --parallel: expected an integer from 1 to 4096, got \"0\"", "batch");
  expect_usage_error("batch m --prompt a --kv-bytes 3x", "--kv-bytes: expected a number of bytes", "batch");
  expect_usage_error("batch m --prompt a --num-beams 2", "clformer batch: unknown option --num-beams", "batch");
  snprintf(args, sizeof(args), "batch %s/nope.txt --prompts %s/nope.txt", tmp, tmp);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "clformer batch: --prompts "), "%s", slurp("stderr"));
  snprintf(args, sizeof(args), "batch %s/bert --prompt hi", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_msg(strstr(slurp("stderr"), "not a decoder-only language model"), "%s", slurp("stderr"));
}
END_TEST

START_TEST(options_parsed_alike) {
  expect_usage_error("run m --in a=b.npy --out c=d.npy --repeat x",
                     "clformer run: --repeat: expected an integer from 0 to 100000, got \"x\"", "run");
  expect_usage_error("run m --in a=b.npy --out c=d.npy --repeat 100001",
                     "clformer run: --repeat: expected an integer from 0 to 100000, got \"100001\"", "run");
  expect_usage_error("run m --in a=b.npy --out c=d.npy --repeat 3x", "got \"3x\"", "run");
  expect_usage_error("generate m --prompt hi --max-new-tokens 0",
                     "clformer generate: --max-new-tokens: expected an integer from 1 to 1000000, got \"0\"",
                     "generate");
  expect_usage_error("generate m --prompt hi --num-beams -2", "--num-beams: expected an integer from 1", "generate");
  expect_usage_error("classify m i.png --top 1e3", "clformer classify: --top: expected an integer from 1 to 100000",
                     "classify");
  expect_usage_error("matrix --timeout 0", "clformer matrix: --timeout: expected an integer from 1 to 604800",
                     "matrix");
  expect_usage_error("probe --tune --budget 0", "clformer probe: --budget: expected a number more than 0, got \"0\"",
                     "probe");
  expect_usage_error("probe --tune --budget fast", "got \"fast\"", "probe");
  /* Unknown options are named, on every command; `devices` took bench's
   * --repeat and --device through the old second loop and now refuses them. */
  expect_usage_error("devices --repeat 3", "clformer devices: unknown option --repeat", "devices");
  expect_usage_error("devices --device 0:0", "clformer devices: unknown option --device", "devices");
  expect_usage_error("run m --in a=b.npy --out c=d.npy --frobnicate", "clformer run: unknown option --frobnicate",
                     "run");
  expect_usage_error("reconstruct m i.png --out o.png --top 3", "clformer reconstruct: unknown option --top",
                     "reconstruct");
  /* A value missing at the end names the option and what it takes. */
  expect_usage_error("run m --in a=b.npy --out c=d.npy --device", "clformer run: --device: expected S after it",
                     "run");
  expect_usage_error("classify m i.png --top", "clformer classify: --top: expected K after it", "classify");
  expect_usage_error("probe --tune --tokens", "--tokens: expected N[,N...] after it", "probe");
  /* Required options and positional arguments. */
  expect_usage_error("run m --in a=b.npy", "clformer run: --out NAME=FILE.npy is required", "run");
  expect_usage_error("run m n --in a=b.npy --out c=d.npy", "clformer run: unexpected argument \"n\"", "run");
  expect_usage_error("probe extra", "clformer probe: unexpected argument \"extra\"", "probe");
  expect_usage_error("embed m", "clformer embed: expected MODEL_DIR TEXT TEXT...", "embed");
  expect_usage_error("generate m --in input_ids=a.npy --in attention_mask=b.npy --in input_ids=c.npy",
                     "clformer generate: --in: given more than 2 times", "generate");
  /* The removed commands are unknown now (probe took them over). */
  ck_assert_int_eq(run_cli("bench"), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "unknown command bench"));
  ck_assert_int_eq(run_cli("selfcheck"), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "unknown command selfcheck"));
}
END_TEST

/* `clformer --help` lists every command of the table with its summary;
 * `clformer CMD --help` and `-h` print its usage line and its options with
 * their ranges and defaults, exit 0 and write nothing on stderr. */
START_TEST(help_from_the_table) {
  static const struct { const char *cmd, *want[3]; } cases[] = {
      {"devices", {"usage: clformer devices [--json]\n", "-h, --help", "marked with *"}},
      {"run", {"usage: clformer run MODEL --in", "--repeat N", "(0 to 100000; default: 0: one pass"}},
      {"generate", {"usage: clformer generate MODEL (--in", "--max-new-tokens N", "(1 to 1000000; default: generate --prompt"}},
      {"embed", {"usage: clformer embed MODEL_DIR TEXT TEXT...", "--device S", "cosine"}},
      {"chat", {"usage: clformer chat MODEL", "--seed S", "(0 to 9e+18; default: a fresh one each time)"}},
      {"batch", {"usage: clformer batch MODEL (--prompt TEXT", "--kv-bytes N", "(0 to 1024; default: 0: the library's, 16)"}},
      {"classify", {"usage: clformer classify MODEL_DIR IMAGE...", "--top K", "(1 to 100000; default 5)"}},
      {"fill-mask", {"usage: clformer fill-mask MODEL_DIR TEXT", "--top-k K", "(1 to 100000; default 5)"}},
      {"reconstruct", {"usage: clformer reconstruct MODEL_DIR IMAGE --out FILE.png", "--noise FILE.npy", "required"}},
      {"probe", {"usage: clformer probe", "--tokens N[,N...]", "(up to 8, each 1 to 1000000)"}},
      {"matrix", {"usage: clformer matrix", "--timeout SEC", "(1 to 604800; default 1800)"}},
  };
  ck_assert_int_eq(run_cli("--help"), 0);
  char *top = strdup(slurp("stdout"));
  ck_assert_ptr_null(strstr(top, "selfcheck"));
  ck_assert_ptr_null(strstr(top, "  bench"));
  ck_assert_ptr_nonnull(strstr(top, "probe"));
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char args[64], line[64];
    snprintf(line, sizeof(line), "\n  %s", cases[i].cmd);
    ck_assert_msg(strstr(top, line) != NULL, "clformer --help does not list %s", cases[i].cmd);
    for (int h = 0; h < 2; h++) {
      snprintf(args, sizeof(args), "%s %s", cases[i].cmd, h ? "-h" : "--help");
      ck_assert_msg(run_cli(args) == 0, "%s did not exit 0", args);
      ck_assert_str_eq(slurp("stderr"), "");
      const char *out = slurp("stdout");
      for (int k = 0; k < 3; k++)
        ck_assert_msg(strstr(out, cases[i].want[k]) != NULL, "%s: no \"%s\" in:\n%s", args, cases[i].want[k], out);
      /* Every option that takes a value states its default or that it is
       * required (issue 43); a flag's default is off. */
      for (const char *l = strstr(out, "\noptions:\n"); l && (l = strstr(l + 1, "\n  --"));) {
        const char *end = strchr(l + 1, '\n'), *sp = strchr(l + 3, ' ');
        const int takes_value = sp && sp < end && sp[1] != ' ';
        char opt[256];
        snprintf(opt, sizeof opt, "%.*s", (int)(end ? end - l - 1 : 200), l + 1);
        ck_assert_msg(!takes_value || strstr(opt, "default") || strstr(opt, "required"), "%s: %s", args, opt);
      }
    }
  }
  free(top);
  /* No command: the list on stderr, exit 2. */
  ck_assert_int_eq(run_cli(""), 2);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "usage: clformer COMMAND"));
}
END_TEST

/* --profile names its clock: the events' timestamps where the driver fills
 * them (PoCL), the host's clock around each finished command where it does
 * not (rusticl; forced here by CLFORMER_PROFILE_CLOCK=wall), and a clock
 * that is not one is refused by name. */
START_TEST(profile_names_its_clock) {
  char args[2048];
  snprintf(args, sizeof(args), "run %s/bert --in input_ids=%s/bert/padded.input_ids.npy --out last_hidden_state=%s/h.npy "
           "--profile", fx, fx, tmp);
  ck_assert_msg(run_cli(args) == 0, "%s: %s", args, slurp("stderr"));
  ck_assert_msg(strstr(slurp("stderr"), "profile: device time by op (OpenCL profiling events)"), "%s", slurp("stderr"));
  setenv("CLFORMER_PROFILE_CLOCK", "wall", 1);
  int rc = run_cli(args);
  ck_assert_msg(rc == 0, "%s: %s", args, slurp("stderr"));
  const char *err = slurp("stderr");
  ck_assert_msg(strstr(err, "profile: time by op (wall clock around each command"), "%s", err);
  const char *per = strstr(err, "profile: per forward pass: ");
  ck_assert_msg(per && strstr(per, " ms of wall time"), "%s", err);
  ck_assert_msg(atof(per + strlen("profile: per forward pass: ")) > 0, "no time measured: %s", err);
  setenv("CLFORMER_PROFILE_CLOCK", "tsc", 1);
  rc = run_cli(args);
  unsetenv("CLFORMER_PROFILE_CLOCK");
  ck_assert_int_eq(rc, 1);
  ck_assert_msg(strstr(slurp("stderr"), "CLFORMER_PROFILE_CLOCK=\"tsc\" is not a clock (events, wall)"), "%s",
                slurp("stderr"));
}
END_TEST

/* Implementations are loaded alone: one in clformer's prefix whose library
 * is missing is listed without its devices by `devices`, is the only one
 * loaded when CLFORMER_DEVICE names it, and makes `matrix` fail naming it;
 * a variant column runs with its setting, which the test program reports. */
START_TEST(implementations_each_alone) {
  char prefix[512], path[1200], args[2048];
  snprintf(prefix, sizeof(prefix), "%s/opencl", tmp);
  snprintf(path, sizeof(path), "mkdir -p '%s/vendors' && echo /nonexistent/libclformer-no-such-icd.so > "
           "'%s/vendors/broken.icd'", prefix, prefix);
  ck_assert_int_eq(system(path), 0);
  const char *saved = getenv("CLFORMER_OPENCL_PREFIX");
  char *saved_prefix = saved ? strdup(saved) : NULL;
  setenv("CLFORMER_OPENCL_PREFIX", prefix, 1);

  ck_assert_msg(run_cli("devices") == 0, "%s", slurp("stderr"));
  const char *out = slurp("stdout");
  const char *line = strstr(out, "   broken ");
  ck_assert_msg(strstr(out, "Not loaded by default") && line, "%s", out);
  char row[300];
  snprintf(row, sizeof(row), "%.*s", (int)strcspn(line, "\n"), line);
  ck_assert_msg(strstr(row, "/nonexistent") == NULL && strstr(row, "no devices"), "%s", out);

  setenv("CLFORMER_DEVICE", "broken", 1);
  int rc = run_cli("devices --json");
  unsetenv("CLFORMER_DEVICE");
  ck_assert_msg(rc == 1, "CLFORMER_DEVICE=broken loaded more than the broken ICD: %s", slurp("stdout"));

  snprintf(args, sizeof(args), "matrix --device broken --suite norm --out %s/m1", tmp);
  ck_assert_int_eq(run_cli(args), 1);
  snprintf(path, sizeof(path), "%s/m1/matrix.md", tmp);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  static char md[65536];
  md[fread(md, 1, sizeof(md) - 1, f)] = 0;
  fclose(f);
  ck_assert_msg(strstr(md, "## Failures\n\n- broken (") && strstr(md, "listing its devices failed"), "%s", md);

  snprintf(args, sizeof(args), "matrix --device \"pthread gpu-class\" --suite norm --suite embed --jobs 2 --out %s/m2",
           tmp);
  rc = run_cli(args);
  ck_assert_msg(rc == 0, "%s: %s", args, slurp("stderr"));
  snprintf(path, sizeof(path), "%s/m2/matrix.json", tmp);
  cJSON *root = clf_cli_test_read_json(path);
  ck_assert_ptr_nonnull(root);
  const cJSON *cols = cJSON_GetObjectItem(root, "columns");
  ck_assert_int_eq(cJSON_GetArraySize(cols), 1);
  const cJSON *c0 = cJSON_GetArrayItem(cols, 0);
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c0, "column")), "pocl pthread gpu-class");
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(c0, "settings")), "CLFORMER_DEVICE_CLASS=gpu");
  ck_assert_int_gt((int)cJSON_GetNumberValue(cJSON_GetObjectItem(c0, "passed")), 0);
  ck_assert_int_eq((int)cJSON_GetNumberValue(cJSON_GetObjectItem(c0, "failed")), 0);
  cJSON_Delete(root);
  snprintf(path, sizeof(path), "%s/m2/reports/c0-norm.json", tmp);
  root = clf_cli_test_read_json(path);
  ck_assert_ptr_nonnull(root);
  ck_assert_str_eq(cJSON_GetStringValue(cJSON_GetObjectItem(root, "device_class")), "gpu");
  cJSON_Delete(root);
  snprintf(path, sizeof(path), "%s/m2/reports/c0-embed.json", tmp); /* the run beside it (--jobs 2) */
  root = clf_cli_test_read_json(path);
  ck_assert_ptr_nonnull(root);
  ck_assert(cJSON_IsTrue(cJSON_GetObjectItem(root, "complete")));
  cJSON_Delete(root);

  if (saved_prefix) setenv("CLFORMER_OPENCL_PREFIX", saved_prefix, 1);
  else unsetenv("CLFORMER_OPENCL_PREFIX");
  free(saved_prefix);
}
END_TEST

/* tokenize: the ids are transformers' (tokenizers/expected.json) and each
 * token is the vocabulary file's entry for its id; special tokens as the
 * model adds them, or none with --no-special. */
static cJSON *read_json(const char *path) {
  FILE *f = fopen(path, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  const long len = ftell(f);
  rewind(f);
  char *text = malloc((size_t)len + 1);
  ck_assert_uint_eq(fread(text, 1, (size_t)len, f), (size_t)len);
  text[len] = '\0';
  fclose(f);
  cJSON *j = cJSON_Parse(text);
  free(text);
  ck_assert_ptr_nonnull(j);
  return j;
}

/* The printed lines "ID\tTOKEN" against ids (a cJSON array) and vocab
 * (token -> id). */
static void expect_tokens(const char *out, const cJSON *ids, const cJSON *vocab) {
  const char *line = out;
  for (int i = 0; i < cJSON_GetArraySize(ids); i++) {
    ck_assert_msg(*line, "output ends after %d tokens", i);
    char *tab;
    const long long id = strtoll(line, &tab, 10);
    ck_assert_int_eq(id, (long long)cJSON_GetArrayItem(ids, i)->valuedouble);
    ck_assert_int_eq(*tab, '\t');
    const char *nl = strchr(tab, '\n');
    ck_assert_ptr_nonnull(nl);
    const cJSON *e;
    const char *name = NULL;
    cJSON_ArrayForEach(e, vocab) if ((long long)e->valuedouble == id) name = e->string;
    ck_assert_msg(name != NULL, "id %lld is not in the vocabulary", id);
    ck_assert_msg(strlen(name) == (size_t)(nl - tab - 1) && !memcmp(name, tab + 1, strlen(name)),
                  "token %d: printed \"%.*s\", the vocabulary has \"%s\"", i, (int)(nl - tab - 1), tab + 1, name);
    line = nl + 1;
  }
  ck_assert_str_eq(line, "");
}

START_TEST(tokenize_prints_ids_and_tokens) {
  char path[512], args[1024];
  snprintf(path, sizeof path, "%s/tokenizers/expected.json", fx);
  cJSON *want = read_json(path);
  snprintf(path, sizeof path, "%s/tokenizers/gpt2/vocab.json", fx);
  cJSON *vocab = read_json(path);
  const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(want, "gpt2"), 0); /* "Hello world!" */
  const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
  snprintf(args, sizeof args, "tokenize %s/tokenizers/gpt2 \"%s\" --no-special", fx, text);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  expect_tokens(slurp("stdout"), cJSON_GetObjectItem(c, "ids"), vocab);
  /* a backslash token prints escaped, as "\\" */
  const cJSON *bs = cJSON_GetObjectItemCaseSensitive(vocab, "\\");
  ck_assert_ptr_nonnull(bs);
  snprintf(args, sizeof args, "tokenize %s/tokenizers/gpt2 \"a\\\\\" --no-special", fx);
  ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
  char want_line[64];
  snprintf(want_line, sizeof want_line, "\n%d\t\\\\\n", bs->valueint);
  ck_assert_msg(strstr(slurp("stdout"), want_line) != NULL, "%s", slurp("stdout"));
  cJSON_Delete(vocab);
  /* BERT: [CLS] .. [SEP] added unless --no-special; its vocab.txt is one
   * token a line, the line number its id. */
  c = cJSON_GetArrayItem(cJSON_GetObjectItem(want, "bert"), 0);
  snprintf(path, sizeof path, "%s/tokenizers/bert/vocab.txt", fx);
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  vocab = cJSON_CreateObject();
  char tokline[256];
  for (int id = 0; fgets(tokline, sizeof tokline, f); id++) {
    tokline[strcspn(tokline, "\r\n")] = '\0';
    if (!cJSON_GetObjectItemCaseSensitive(vocab, tokline)) cJSON_AddNumberToObject(vocab, tokline, id);
  }
  fclose(f);
  for (int special = 0; special < 2; special++) {
    snprintf(args, sizeof args, "tokenize %s/tokenizers/bert \"%s\"%s", fx, text, special ? "" : " --no-special");
    ck_assert_msg(run_cli(args) == 0, "%s", slurp("stderr"));
    expect_tokens(slurp("stdout"), cJSON_GetObjectItem(c, special ? "ids_special" : "ids"), vocab);
    ck_assert(!special || !strncmp(strchr(slurp("stdout"), '\t') + 1, "[CLS]\n", 6));
  }
  cJSON_Delete(vocab);
  cJSON_Delete(want);
  snprintf(args, sizeof args, "tokenize %s/absent \"x\"", fx);
  ck_assert_int_eq(run_cli(args), 1);
  ck_assert_ptr_nonnull(strstr(slurp("stderr"), "clformer tokenize: "));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("cli");
  TCase *tc = tcase_create("cli");
  tcase_add_checked_fixture(tc, setup, NULL);
  tcase_add_test(tc, run_bert_matches_transformers);
  tcase_add_test(tc, run_gpt2_logits);
  tcase_add_test(tc, run_errors_name_the_problem);
  tcase_add_test(tc, generate_matches_transformers);
  tcase_add_test(tc, weights_and_profile_options);
  tcase_add_test(tc, embed_prints_cosines);
  tcase_add_test(tc, generate_prompt_prints_text);
  tcase_add_test(tc, generate_streams_text);
  tcase_add_test(tc, probe_json_describes_every_device);
  tcase_add_test(tc, probe_human_and_errors);
  tcase_add_test(tc, fill_mask_matches_pipeline);
  tcase_add_test(tc, classify_text_matches_pipeline);
  tcase_add_test(tc, roberta_matches_pipeline);
  tcase_add_test(tc, options_parsed_alike);
  tcase_add_test(tc, batch_matches_generate);
  tcase_add_test(tc, help_from_the_table);
  tcase_add_test(tc, tokenize_prints_ids_and_tokens);
  tcase_add_test(tc, generate_gguf_file);
  tcase_add_test(tc, chat_turns_and_refusals);
  tcase_add_test(tc, quiet_by_default);
  tcase_add_test(tc, generate_defaults);
  tcase_add_test(tc, version_help_and_paths);
  tcase_add_test(tc, profile_names_its_clock);
  tcase_add_test(tc, implementations_each_alone);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
