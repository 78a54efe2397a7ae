/* test_chat_template.c - chat templates rendered by the library against
 * transformers 4.46.3's apply_chat_template on real models' templates
 * (tests/fixtures/chat_templates, made by
 * tools/fixtures/make_chat_template_fixtures.py): every text byte for byte,
 * every refusal of the template (raise_exception's text verbatim); the
 * tokenizer's template (a list of named ones, a GGUF's); what is refused at
 * parse, bad arguments and hostile templates. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_util.h"
#include "harness.h"

#define CT_FAILS(expr, status, needle)                                                           \
  do {                                                                                           \
    clf_status ct_st_ = (expr);                                                                  \
    ck_assert_msg(ct_st_ == (status), "%s returned %s, expected %s (%s)", #expr,                 \
                  clf_status_name(ct_st_), clf_status_name(status), clf_last_error(NULL));       \
    ck_assert_msg(strstr(clf_last_error(NULL), (needle)) != NULL,                                \
                  "error of %s is \"%s\", expected it to mention \"%s\"", #expr,                 \
                  clf_last_error(NULL), (needle));                                               \
  } while (0)
#define CT_OK(expr)                                                                              \
  do {                                                                                           \
    clf_status ct_st_ = (expr);                                                                  \
    ck_assert_msg(ct_st_ == CLF_OK, "%s returned %s: %s", #expr, clf_status_name(ct_st_),       \
                  clf_last_error(NULL));                                                         \
  } while (0)

static char *fixture_path(const char *rel) {
  const char *root = fixtures();
  char *p = malloc(strlen(root) + strlen(rel) + 2);
  sprintf(p, "%s/%s", root, rel);
  return p;
}

static char *slurp(const char *rel) {
  char *path = fixture_path(rel), *text = read_text(path);
  ck_assert_msg(text != NULL, "cannot read %s", path);
  free(path);
  return text;
}

static cJSON *cases_json(void) {
  char *text = slurp("chat_templates/cases.json");
  cJSON *root = cJSON_Parse(text);
  free(text);
  ck_assert_msg(root != NULL, "chat_templates/cases.json is not JSON");
  return root;
}

/* "" when equal, else where they part: byte offset, line and the text
 * around it on both sides. */
static void diff_at(const char *got, const char *want, char *msg, size_t size) {
  size_t i = 0, line = 1;
  while (got[i] && got[i] == want[i]) line += got[i++] == '\n';
  if (!got[i] && !want[i]) { msg[0] = '\0'; return; }
  size_t from = i > 30 ? i - 30 : 0;
  snprintf(msg, size, "first difference at byte %zu (line %zu): got \"%.60s\" expected \"%.60s\" (lengths %zu, %zu)",
           i, line, got + from, want + from, strlen(got), strlen(want));
}

START_TEST(fixtures_match_transformers) {
  cJSON *root = cases_json(), *c;
  int n = 0, refused = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const char *name = cJSON_GetObjectItem(c, "template")->valuestring;
    const char *conv = cJSON_GetObjectItem(c, "conversation")->valuestring;
    char rel[256];
    snprintf(rel, sizeof(rel), "chat_templates/templates/%s.jinja", name);
    char *src = slurp(rel), *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "context")), *text = NULL;
    clf_chat_template *t = NULL;
    clf_status st = clf_chat_template_parse(src, &t);
    ck_assert_msg(st == CLF_OK, "%s: parse: %s", name, clf_last_error(NULL));
    st = clf_chat_template_render_json(t, ctx, &text);
    const cJSON *want = cJSON_GetObjectItem(c, "expected");
    if (cJSON_IsString(want)) {
      ck_assert_msg(st == CLF_OK, "%s / %s: %s", name, conv, clf_last_error(NULL));
      char msg[512];
      diff_at(text, want->valuestring, msg, sizeof(msg));
      ck_assert_msg(!msg[0], "%s / %s: %s", name, conv, msg);
    } else {
      const char *type = cJSON_GetObjectItem(c, "error_type")->valuestring;
      const char *err = cJSON_GetObjectItem(c, "error")->valuestring;
      ck_assert_msg(st == CLF_E_INVALID_ARG && !text, "%s / %s rendered, transformers raised %s: %s", name, conv, type,
                    err);
      if (!strcmp(type, "TemplateError")) /* raise_exception: its text verbatim */
        ck_assert_msg(strstr(clf_last_error(NULL), err), "%s / %s: \"%s\" lacks \"%s\"", name, conv,
                      clf_last_error(NULL), err);
      refused++;
    }
    n++;
    free(text);
    free(ctx);
    free(src);
    clf_chat_template_destroy(t);
  }
  /* 22 templates x their conversations, as the generator printed them */
  ck_assert_int_eq(n, 264);
  ck_assert_int_eq(refused, 44);
  cJSON_Delete(root);
}
END_TEST

/* One construct or edge each, rendered by transformers' Jinja environment
 * (cases.json "snippets"); where Jinja raised, the library must refuse too
 * (at parse or at render). */
/* One snippet of cases.json parsed and rendered with ctx: the status,
 * *parsed (0: refused at parse); where Jinja gave a text, that text byte
 * for byte.  The caller checks a refusal. */
static clf_status snippet_renders(const cJSON *c, const char *ctx, int *parsed) {
  const char *src = cJSON_GetObjectItem(c, "template_source")->valuestring;
  const cJSON *want = cJSON_GetObjectItem(c, "expected");
  clf_chat_template *t = NULL;
  char *text = NULL;
  clf_status st = clf_chat_template_parse(src, &t);
  *parsed = st == CLF_OK;
  if (*parsed) st = clf_chat_template_render_json(t, ctx, &text);
  if (cJSON_IsString(want)) {
    ck_assert_msg(st == CLF_OK, "%s: %s", src, clf_last_error(NULL));
    char msg[512];
    diff_at(text, want->valuestring, msg, sizeof(msg));
    ck_assert_msg(!msg[0], "%s: %s", src, msg);
  } else {
    ck_assert_msg(st != CLF_OK, "%s rendered \"%s\"; Jinja raised %s", src, text,
                  cJSON_GetObjectItem(c, "error")->valuestring);
  }
  free(text);
  clf_chat_template_destroy(t);
  return st;
}

START_TEST(snippets_match_jinja) {
  cJSON *root = cases_json(), *c;
  char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "snippet_context"));
  int n = 0, parsed;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "snippets")) {
    snippet_renders(c, ctx, &parsed);
    n++;
  }
  ck_assert_int_eq(n, 130);
  free(ctx);
  cJSON_Delete(root);
}
END_TEST

/* {% call %} / caller() and *args / **kwargs (cases.json "call_snippets"):
 * Jinja's text, or its refusal with its message (a syntax error refused
 * at parse time). */
START_TEST(call_snippets_match_jinja) {
  cJSON *root = cases_json(), *c;
  char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "snippet_context"));
  int n = 0, refused = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "call_snippets")) {
    const char *src = cJSON_GetObjectItem(c, "template_source")->valuestring;
    int parsed;
    clf_status st = snippet_renders(c, ctx, &parsed);
    if (!cJSON_IsString(cJSON_GetObjectItem(c, "expected"))) {
      const char *type = cJSON_GetObjectItem(c, "error_type")->valuestring;
      const char *err = cJSON_GetObjectItem(c, "error")->valuestring;
      int syntax = !strcmp(type, "TemplateSyntaxError") || !strcmp(type, "TemplateAssertionError");
      ck_assert_msg(st == (syntax ? CLF_E_FORMAT : CLF_E_INVALID_ARG) && parsed == !syntax,
                    "%s: %s (%s), Jinja raised %s: %s", src, clf_status_name(st), clf_last_error(NULL), type, err);
      ck_assert_msg(strstr(clf_last_error(NULL), err), "%s: \"%s\" lacks \"%s\"", src, clf_last_error(NULL), err);
      refused++;
    }
    n++;
  }
  ck_assert_int_eq(n, 45);
  ck_assert_int_eq(refused, 26);
  free(ctx);
  cJSON_Delete(root);
}
END_TEST

/* The plain message API gives what render_json gives for the same context. */
START_TEST(render_messages) {
  char *src = slurp("chat_templates/templates/smollm2.jinja"), *text;
  clf_chat_template *t;
  CT_OK(clf_chat_template_parse(src, &t));
  clf_chat_message m[] = {{"user", "hello there"}};
  CT_OK(clf_chat_template_render(t, m, 1, 1, &text));
  /* transformers' text for it: tests/fixtures/gguf_models/smollm_like/cases.json "chat" */
  ck_assert_str_eq(text, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                         "Face<|im_end|>\n<|im_start|>user\nhello there<|im_end|>\n<|im_start|>assistant\n");
  free(text);
  CT_OK(clf_chat_template_render(t, NULL, 0, 0, &text));
  ck_assert_str_eq(text, "");
  free(text);
  CT_FAILS(clf_chat_template_render(t, (clf_chat_message[]){{NULL, "x"}}, 1, 0, &text), CLF_E_INVALID_ARG, "role");
  ck_assert_ptr_null(text);
  clf_chat_template_destroy(t);
  free(src);
}
END_TEST

START_TEST(tokenizer_templates) {
  cJSON *root = cases_json();
  const cJSON *td = cJSON_GetObjectItem(root, "tokenizer_dir");
  char *dir = fixture_path("chat_templates/tokenizer_dir"), *text;
  clf_tokenizer *tok;
  clf_chat_template *t;
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template(tok, &t)); /* the list's "default", special tokens from the config */
  char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(td, "messages"));
  char *full = malloc(strlen(ctx) + 64);
  sprintf(full, "{\"messages\": %s, \"add_generation_prompt\": true}", ctx);
  CT_OK(clf_chat_template_render_json(t, full, &text));
  ck_assert_str_eq(text, cJSON_GetObjectItem(td, "expected")->valuestring);
  free(text);
  free(full);
  free(ctx);
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);

  /* the GGUF's tokenizer.chat_template (SmolLM2's), bos/eos from its ids */
  dir = fixture_path("gguf_models/smollm_like/model.gguf");
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template(tok, &t));
  clf_chat_message m[] = {{"user", "hello there"}};
  CT_OK(clf_chat_template_render(t, m, 1, 1, &text));
  char *gguf_cases = slurp("gguf_models/smollm_like/cases.json");
  cJSON *g = cJSON_Parse(gguf_cases);
  ck_assert_str_eq(text, cJSON_GetObjectItem(cJSON_GetObjectItem(g, "chat"), "text")->valuestring);
  free(text);
  CT_OK(clf_chat_template_render_json(t, "{\"messages\": [], \"x\": \"{{ bos_token }}\"}", &text));
  ck_assert_str_eq(text, "");
  free(text);
  cJSON_Delete(g);
  free(gguf_cases);
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);

  /* a tokenizer without one */
  dir = fixture_path("tokenizers_json/llama2");
  CT_OK(clf_tokenizer_load(dir, &tok));
  t = (clf_chat_template *)1;
  CT_FAILS(clf_tokenizer_chat_template(tok, &t), CLF_E_NOT_FOUND, "no chat template");
  ck_assert_ptr_null(t);
  /* ... takes one from elsewhere (a file's) with its special tokens, as
   * clformer chat --chat-template and the server do */
  CT_OK(clf_tokenizer_chat_template_parse(tok, "{{ bos_token }}|{{ eos_token }}|{{ messages[0].content }}", &t));
  CT_OK(clf_chat_template_render(t, m, 1, 1, &text));
  ck_assert_str_eq(text, "<s>|</s>|hello there");
  free(text);
  clf_chat_template_destroy(t);
  CT_FAILS(clf_tokenizer_chat_template_parse(tok, "{% if %}", &t), CLF_E_FORMAT, "1:7");
  ck_assert_ptr_null(t);
  CT_FAILS(clf_tokenizer_chat_template_parse(tok, NULL, &t), CLF_E_INVALID_ARG, "source is NULL");
  CT_FAILS(clf_tokenizer_chat_template_parse(NULL, "x", &t), CLF_E_INVALID_ARG, "tok is NULL");
  clf_tokenizer_destroy(tok);
  free(dir);
  /* a GGUF file's tokenizer without a template: the special tokens of its ids */
  dir = fixture_path("gguf_models/llama_mixed/model.gguf");
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template_parse(tok, "{{ bos_token }}{{ messages[0].content }}", &t));
  CT_OK(clf_chat_template_render(t, m, 1, 1, &text));
  ck_assert_str_eq(text, "<s>hello there");
  free(text);
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);
  CT_FAILS(clf_tokenizer_chat_template(NULL, &t), CLF_E_INVALID_ARG, "NULL");
  cJSON_Delete(root);
}
END_TEST

/* A GGUF without tokenizer.chat_template whose vocabulary has Gemma's turn
 * tokens gets Gemma's turn format (chat_family.c): the texts of
 * llama.cpp's built-in Gemma format (chat_templates/family_gemma, made by
 * tools/fixtures/make_family_template_fixture.py; "<bos>" in front, which
 * llama.cpp adds as it tokenizes), and transformers' on the Gemma 2
 * template's conversations of cases.json that it renders. */
START_TEST(family_template) {
  char *dir = fixture_path("chat_templates/family_gemma/gemma3.gguf"), *text = NULL;
  clf_tokenizer *tok;
  clf_chat_template *t;
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template(tok, &t));
  char *cases = slurp("chat_templates/family_gemma/cases.json");
  cJSON *root = cJSON_Parse(cases), *c;
  int n = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    cJSON *ctx = cJSON_CreateObject();
    cJSON_AddItemReferenceToObject(ctx, "messages", cJSON_GetObjectItem(c, "messages"));
    cJSON_AddItemReferenceToObject(ctx, "add_generation_prompt", cJSON_GetObjectItem(c, "add_generation_prompt"));
    char *json = cJSON_PrintUnformatted(ctx), msg[512];
    CT_OK(clf_chat_template_render_json(t, json, &text));
    const char *want = cJSON_GetObjectItem(c, "llama_cpp")->valuestring;
    ck_assert_msg(!strncmp(text, "<bos>", 5), "%s: \"%s\" does not start with <bos>", json, text);
    diff_at(text + 5, want, msg, sizeof(msg));
    ck_assert_msg(!msg[0], "%s: %s", cJSON_GetObjectItem(c, "name")->valuestring, msg);
    free(text);
    free(json);
    cJSON_Delete(ctx);
    n++;
  }
  ck_assert_int_eq(n, 4);
  cJSON_Delete(root);
  free(cases);
  /* transformers' texts for Gemma 2's template (no system role there) */
  root = cases_json();
  n = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const cJSON *want = cJSON_GetObjectItem(c, "expected");
    if (strcmp(cJSON_GetObjectItem(c, "template")->valuestring, "gemma-2-2b-it") || !cJSON_IsString(want)) continue;
    char *json = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "context")), msg[512];
    CT_OK(clf_chat_template_render_json(t, json, &text));
    diff_at(text, want->valuestring, msg, sizeof(msg));
    ck_assert_msg(!msg[0], "gemma-2-2b-it / %s: %s", cJSON_GetObjectItem(c, "conversation")->valuestring, msg);
    free(text);
    free(json);
    n++;
  }
  ck_assert_msg(n >= 3, "only %d Gemma 2 conversations rendered", n);
  cJSON_Delete(root);
  clf_chat_message bad[] = {{"user", "a"}, {"user", "b"}};
  text = (char *)1;
  CT_FAILS(clf_chat_template_render(t, bad, 2, 1, &text), CLF_E_INVALID_ARG, "alternate");
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);
  /* the tokens decide, not general.architecture ("llama" here): the
   * one_user case of cases.json, with <bos> */
  dir = fixture_path("chat_templates/family_gemma/llama_turns.gguf");
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template(tok, &t));
  clf_chat_message one[] = {{"user", "Hello there."}};
  CT_OK(clf_chat_template_render(t, one, 1, 1, &text));
  ck_assert_str_eq(text, "<bos><start_of_turn>user\nHello there.<end_of_turn>\n<start_of_turn>model\n");
  free(text);
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);
  /* no turn tokens: no template made up */
  dir = fixture_path("chat_templates/family_gemma/gemma3_no_turns.gguf");
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_FAILS(clf_tokenizer_chat_template(tok, &t), CLF_E_NOT_FOUND, "no chat template");
  clf_tokenizer_destroy(tok);
  free(dir);
}
END_TEST

/* Special tokens reach the template as variables; the context overrides them. */
START_TEST(special_tokens_as_variables) {
  char *dir = fixture_path("chat_templates/tokenizer_dir"), *text;
  clf_tokenizer *tok;
  clf_chat_template *t;
  CT_OK(clf_tokenizer_load(dir, &tok));
  CT_OK(clf_tokenizer_chat_template(tok, &t));
  clf_chat_template_destroy(t);
  clf_tokenizer_destroy(tok);
  free(dir);
  CT_OK(clf_chat_template_parse("{{ bos_token }}|{{ tools }}|{{ documents }}|{{ add_generation_prompt }}", &t));
  CT_OK(clf_chat_template_render_json(t, "{\"bos_token\": \"<s>\"}", &text));
  ck_assert_str_eq(text, "<s>|None|None|False");
  free(text);
  clf_chat_template_destroy(t);
}
END_TEST

typedef struct { const char *src; clf_status st; const char *needle; } refusal;

START_TEST(refused_at_parse) {
  static const refusal r[] = {
      {"{{ x }}\n{{ y }}\n  {{ m | xmlattr }}", CLF_E_UNSUPPORTED, "unsupported filter 'xmlattr' at 3:10"},
      {"{% include 'other.jinja' %}", CLF_E_UNSUPPORTED, "unsupported statement 'include' at 1:4"},
      {"{% extends 'base' %}", CLF_E_UNSUPPORTED, "unsupported statement 'extends'"},
      {"{% call m %}{% endcall %}", CLF_E_FORMAT, "expected call at 1:4"},
      {"{% macro m(caller) %}{{ caller() }}{% endmacro %}", CLF_E_FORMAT, "special \"caller\" argument"},
      {"{{ x is prime }}", CLF_E_UNSUPPORTED, "unsupported test 'prime' at 1:6"},
      {"{% for x in y recursive %}{% endfor %}", CLF_E_UNSUPPORTED, "recursive loop"},
      {"{{ f(**kw, *args) }}", CLF_E_FORMAT, "invalid syntax for function call expression at 1:5"},
      {"{{ 1 + }}", CLF_E_FORMAT, "unexpected 'end of print statement' at 1:8"},
      {"{% if x %}yes", CLF_E_FORMAT, "missing 'endif'"},
      {"{% endfor %}", CLF_E_FORMAT, "unexpected 'endfor' at 1:4"},
      {"{{ 'unterminated }}", CLF_E_FORMAT, "unterminated string at 1:4"},
      {"{{ x ]}}", CLF_E_FORMAT, "unexpected closing bracket at 1:6"},
      {"{# never closed", CLF_E_FORMAT, "missing end of comment tag"},
      {"{{ x", CLF_E_FORMAT, "missing end of print tag"},
      {"{{ 99999999999999999999 }}", CLF_E_FORMAT, "integer past 64 bits"},
      {"{{ @ }}", CLF_E_FORMAT, "unexpected character at 1:4"},
  };
  for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
    clf_chat_template *t = (clf_chat_template *)1;
    clf_status st = clf_chat_template_parse(r[i].src, &t);
    ck_assert_msg(st == r[i].st, "%s: %s (%s)", r[i].src, clf_status_name(st), clf_last_error(NULL));
    ck_assert_msg(strstr(clf_last_error(NULL), r[i].needle), "%s: \"%s\" lacks \"%s\"", r[i].src,
                  clf_last_error(NULL), r[i].needle);
    ck_assert_ptr_null(t);
  }
}
END_TEST

/* Template errors at render time: CLF_E_INVALID_ARG with the message. */
START_TEST(refused_at_render) {
  static const refusal r[] = {
      {"{{ raise_exception('Only user and assistant roles are supported!') }}", CLF_E_INVALID_ARG,
       "Only user and assistant roles are supported!"},
      {"{{ messages[0].content.x.y }}", CLF_E_INVALID_ARG, "'str object' has no attribute 'x'"},
      {"{{ nothing.here }}", CLF_E_INVALID_ARG, "'nothing' is undefined"},
      {"{{ 'a' + 1 }}", CLF_E_INVALID_ARG, "unsupported operand type(s) for +: 'str' and 'int'"},
      {"{{ messages.append(1) }}", CLF_E_INVALID_ARG, "unsafe"},
      {"{{ 1 // 0 }}", CLF_E_INVALID_ARG, "integer division or modulo by zero"},
      {"{{ 9223372036854775807 + 1 }}", CLF_E_INVALID_ARG, "integer overflow"},
      {"{% for i in range(1000000) %}{% endfor %}", CLF_E_INVALID_ARG, "Range too big"},
      {"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", CLF_E_INVALID_ARG, "nested too deeply"},
      {"{{ 'x' * 100000000 }}", CLF_E_INVALID_ARG, "too long"},
      {"{% set ns = namespace(s='x' * 1000000) %}{% for i in range(10) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
       "{{ ns.s }}", CLF_E_LIMIT, "budget ("},
      {"{% break %}", CLF_E_INVALID_ARG, "outside of a loop"},
      {"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       CLF_E_LIMIT, "steps budget (1000000 loop iterations, calls and items) at 1:77"},
      {"{{ range(100000)|unique|list|length }}", CLF_E_LIMIT, "steps budget"},
      {"{% for c in ' x' * 3000000 %}{% endfor %}", CLF_E_INVALID_ARG, "more than 4000000 characters"},
      {"{{ messages|tojson(indent=x.y) }}", CLF_E_INVALID_ARG, "'x' is undefined"},
      {"{{ [1, 'a']|sort }}", CLF_E_INVALID_ARG, "not supported between instances"},
  };
  for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
    clf_chat_template *t;
    char *text = (char *)1;
    CT_OK(clf_chat_template_parse(r[i].src, &t));
    clf_status st = clf_chat_template_render_json(t, "{\"messages\": [{\"role\": \"user\", \"content\": \"c\"}]}", &text);
    ck_assert_msg(st == r[i].st, "%s: %s (%s)", r[i].src, clf_status_name(st), clf_last_error(NULL));
    ck_assert_msg(strstr(clf_last_error(NULL), r[i].needle), "%s: \"%s\" lacks \"%s\"", r[i].src,
                  clf_last_error(NULL), r[i].needle);
    ck_assert_ptr_null(text);
    clf_chat_template_destroy(t);
  }
}
END_TEST

/* Numbers of the JSON context as Python's json.loads reads them (the
 * expected text is what transformers' environment printed for them):
 * 1.0 a float, big ints exact, numbers in strings left alone. */
START_TEST(json_numbers) {
  clf_chat_template *t;
  char *text;
  CT_OK(clf_chat_template_parse("{{ a }} {{ b }} {{ c }} {{ d }} {{ e|tojson }}", &t));
  CT_OK(clf_chat_template_render_json(
      t, "{\"a\": 1.0, \"b\": 2, \"c\": 1e3, \"d\": 9007199254740993, \"e\": {\"x\": [1.5, -0.0, 3, \"1.0 \\\" 7\"]}}",
      &text));
  ck_assert_str_eq(text, "1.0 2 1000.0 9007199254740993 {\"x\": [1.5, -0.0, 3, \"1.0 \\\" 7\"]}");
  free(text);
  clf_chat_template_destroy(t);
}
END_TEST

START_TEST(bad_arguments) {
  clf_chat_template *t;
  char *text;
  CT_FAILS(clf_chat_template_parse(NULL, &t), CLF_E_INVALID_ARG, "source is NULL");
  CT_FAILS(clf_chat_template_parse("x", NULL), CLF_E_INVALID_ARG, "out is NULL");
  CT_OK(clf_chat_template_parse("{{ messages|length }}", &t));
  CT_FAILS(clf_chat_template_render_json(t, "{\"messages\": [", &text), CLF_E_INVALID_ARG, "not valid JSON");
  ck_assert_ptr_null(text);
  CT_FAILS(clf_chat_template_render_json(t, "[1, 2]", &text), CLF_E_INVALID_ARG, "not a JSON object");
  CT_FAILS(clf_chat_template_render_json(t, NULL, &text), CLF_E_INVALID_ARG, "context_json is NULL");
  CT_FAILS(clf_chat_template_render_json(NULL, "{}", &text), CLF_E_INVALID_ARG, "t is NULL");
  CT_FAILS(clf_chat_template_render_json(t, "{}", NULL), CLF_E_INVALID_ARG, "text is NULL");
  CT_FAILS(clf_chat_template_render(NULL, NULL, 0, 0, &text), CLF_E_INVALID_ARG, "t is NULL");
  CT_FAILS(clf_chat_template_render(t, NULL, 2, 0, &text), CLF_E_INVALID_ARG, "messages is NULL");
  CT_FAILS(clf_chat_template_render(t, NULL, 0, 0, NULL), CLF_E_INVALID_ARG, "text is NULL");
  CT_OK(clf_chat_template_render_json(t, "{\"messages\": [1, 2, 3]}", &text));
  ck_assert_str_eq(text, "3");
  free(text);
  clf_chat_template_destroy(t);
  clf_chat_template_destroy(NULL);
}
END_TEST

/* Nesting past the limit is refused, not a stack overflow. */
START_TEST(hostile_nesting) {
  size_t n = 100000;
  char *s = malloc(4 * n + 16);
  char *p = s;
  p += sprintf(p, "{{ ");
  for (size_t i = 0; i < n; i++) *p++ = '(';
  *p++ = '1';
  for (size_t i = 0; i < n; i++) *p++ = ')';
  sprintf(p, " }}");
  clf_chat_template *t = (clf_chat_template *)1;
  CT_FAILS(clf_chat_template_parse(s, &t), CLF_E_UNSUPPORTED, "nested too deeply");
  p = s;
  for (size_t i = 0; i < n / 10; i++) p += sprintf(p, "{%% if 1 %%}");
  *p = '\0';
  CT_FAILS(clf_chat_template_parse(s, &t), CLF_E_UNSUPPORTED, "nested too deeply");
  p = s;
  p += sprintf(p, "{{ ");
  for (size_t i = 0; i < n; i++) p += sprintf(p, "not ");
  sprintf(p, "1 }}");
  CT_FAILS(clf_chat_template_parse(s, &t), CLF_E_UNSUPPORTED, "nested too deeply");
  free(s);
  /* a deep JSON context */
  CT_OK(clf_chat_template_parse("{{ x|tojson }}", &t));
  char *ctx = malloc(2 * 900 + 32), *text;
  p = ctx + sprintf(ctx, "{\"x\": ");
  for (int i = 0; i < 900; i++) *p++ = '[';
  for (int i = 0; i < 900; i++) *p++ = ']';
  sprintf(p, "}");
  CT_FAILS(clf_chat_template_render_json(t, ctx, &text), CLF_E_INVALID_ARG, "nested too deeply");
  free(ctx);
  clf_chat_template_destroy(t);
  /* a call block's caller that calls its macro again, without end */
  CT_OK(clf_chat_template_parse("{% macro f() %}{{ caller() }}{% endmacro %}"
                                "{% macro g() %}{% call f() %}{{ g() }}{% endcall %}{% endmacro %}{{ g() }}", &t));
  CT_FAILS(clf_chat_template_render_json(t, "{}", &text), CLF_E_INVALID_ARG, "nested too deeply");
  clf_chat_template_destroy(t);
  CT_OK(clf_chat_template_parse("{% macro f() %}{% call f() %}{% endcall %}{{ caller() }}{% endmacro %}"
                                "{% call f() %}{% endcall %}", &t));
  CT_FAILS(clf_chat_template_render_json(t, "{}", &text), CLF_E_INVALID_ARG, "nested too deeply");
  clf_chat_template_destroy(t);
}
END_TEST

/* ---- hostile templates (issue 38): bounded, never a crash ---- */

#include <sys/resource.h>
#include <time.h>

/* This thread's CPU time: the work a render did, which the budget bounds.
 * Wall time counted whatever else the cores ran too: 1.15 s for a render
 * of about half that while test_tune shared the two cores. */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CT_SANITIZED 1 /* ASan's quarantine and shadow memory: RSS and time are not the library's */
#else
#define CT_SANITIZED 0
#endif

static const char *const k_ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";

/* src rendered under the default budget: its status (the text when OK),
 * within 1 s of CPU time (10 s under a sanitizer). */
static clf_status render_timed(const char *src, char **text) {
  clf_chat_template *t;
  *text = NULL;
  CT_OK(clf_chat_template_parse(src, &t));
  double t0 = now_s();
  clf_status st = clf_chat_template_render_json(t, k_ctx, text);
  double dt = now_s() - t0;
  ck_assert_msg(dt < (CT_SANITIZED ? 10.0 : 1.0), "%s took %.2f s", src, dt);
  clf_chat_template_destroy(t);
  return st;
}

/* A template and Jinja2 3.1.4's text for it (or the words of its refusal). */
typedef struct jinja_case { const char *src, *want; } jinja_case;

/* Each of r[0 .. n) renders Jinja2's text, within render_timed's time. */
static void expect_texts(const jinja_case *r, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char *text;
    clf_status st = render_timed(r[i].src, &text);
    ck_assert_msg(st == CLF_OK, "%s: %s", r[i].src, clf_last_error(NULL));
    ck_assert_msg(!strcmp(text, r[i].want), "%s: got \"%s\", Jinja2 gives \"%s\"", r[i].src, text, r[i].want);
    free(text);
  }
}

/* Each of r[0 .. n) is refused with status `want`, its message holding
 * r[i].want (a budget's refusal also its template position), no text. */
static void expect_refused(const jinja_case *r, size_t n, clf_status want) {
  for (size_t i = 0; i < n; i++) {
    char *text;
    clf_status st = render_timed(r[i].src, &text);
    const char *err = clf_last_error(NULL);
    ck_assert_msg(st == want, "%s: %s (%s)", r[i].src, clf_status_name(st), err);
    ck_assert_msg(strstr(err, r[i].want), "%s: \"%s\" lacks \"%s\"", r[i].src, err, r[i].want);
    if (want == CLF_E_LIMIT) ck_assert_msg(strstr(err, " at 1:"), "%s: %s", r[i].src, err);
    ck_assert_ptr_null(text);
  }
}

/* Work the template does not spell out (repetition, string building,
 * loops) is charged to one budget per render: each of these stops with
 * CLF_E_LIMIT naming the budget and the position, within 1 s and 256 MB. */
START_TEST(hostile_budget) {
  static const jinja_case r[] = {
      /* 0.45 s an iteration before: about 12 hours */
      {"{% for i in range(100000) %}{% set x = 'a' * 60000000 %}{% endfor %}", "budget"},
      {"{% for i in range(100000) %}{% set x = 'a' * 6000000 %}{% endfor %}", "bytes budget"},
      /* 27 s before: the step limit was 20 million */
      {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "steps budget"},
      {"{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}", "steps budget"},
      /* 30 strings of 60 MB kept alive: 1.97 GB RSS before */
      {"{% set ns = namespace(l=[]) %}{% for i in range(30) %}{% set ns.l = ns.l + ['a' * 60000000] %}{% endfor %}",
       "budget"},
      {"{% set ns = namespace(l=[]) %}{% for i in range(30) %}{% set ns.l = ns.l + ['a' * 6000000] %}{% endfor %}",
       "memory budget"},
      {"{% set ns = namespace(l=[]) %}{% for i in range(30) %}{% set ns.l = ns.l + [('a' * 60000000)|upper] %}"
       "{% endfor %}", "budget"},
      /* searching is work too */
      {"{% set s = 'a' * 6000000 %}{% for i in range(100000) %}{% if 'b' in s %}{% endif %}{% endfor %}",
       "bytes budget"},
      {"{% set s = 'ab' * 3000000 %}{% for i in range(100000) %}{{ s.find('c') }}{% endfor %}", "bytes budget"},
      {"{% set s = 'ab' * 3000000 %}{% for i in range(100000) %}{{ s|length }}{% endfor %}", "bytes budget"},
      {"{% set l = range(100000)|list %}{% for i in range(100000) %}{{ l|join(',')|length }}{% endfor %}",
       "budget"},
  };
  struct rusage ru;
  expect_refused(r, sizeof(r) / sizeof(r[0]), CLF_E_LIMIT);
  getrusage(RUSAGE_SELF, &ru);
  if (!CT_SANITIZED) ck_assert_msg(ru.ru_maxrss < 256 * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
}
END_TEST

/* Repetition of an empty operand is empty at once (it looped 2^63 times). */
START_TEST(hostile_repetition) {
  char *text;
  ck_assert_int_eq(render_timed("{{ '' * 9223372036854775807 }}|{{ [] * 9223372036854775807 }}|"
                                "{{ ('a' * 3) * 2 }}|{{ 'ab' * 0 }}|{{ 'ab' * -3 }}|{{ [1] * 3 }}", &text), CLF_OK);
  ck_assert_str_eq(text, "|[]|aaaaaa|||[1, 1, 1]"); /* Jinja2 3.1.4 */
  free(text);
  ck_assert_int_eq(render_timed("{{ ('abc' * 1000000)|length }}", &text), CLF_OK);
  ck_assert_str_eq(text, "3000000");
  free(text);
}
END_TEST

/* A value holding itself prints, compares and serializes as Jinja2 3.1.4
 * has it (expected texts from jinja2.sandbox.ImmutableSandboxedEnvironment),
 * and the cycle is freed (LeakSanitizer in CI: it leaked 402 bytes a render). */
START_TEST(hostile_cycles) {
  static const jinja_case r[] = {
      {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}|{{ ns == ns.x }}",
       "<Namespace {'x': <Namespace {...}>}>|True"},
      {"{% set ns = namespace() %}{% set ns.l = [ns, 1] %}{{ ns }}|{{ ns.l }}|{{ ns in ns.l }}|{{ ns.l == ns.l }}|"
       "{{ [ns.l] == [ns.l] }}",
       "<Namespace {'l': [<Namespace {...}>, 1]}>|[<Namespace {'l': [...]}>, 1]|True|True|True"},
      {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns == ns.x[0] }}", "False"},
      {"{% set ns = namespace() %}{% set ns.x = ns %}{{ ns.x|string }}", "<Namespace {'x': <Namespace {...}>}>"},
      {"{% set ns = namespace(a=[]) %}{% set ns.a = [ns.a] %}{% set l = ns.a %}{{ l|sort }}", "[[]]"},
      {"{% set a = namespace() %}{% set b = namespace(a=a) %}{% set a.b = b %}{{ a == b }}|{{ [a] == [a] }}|"
       "{{ a.b.a.b.a is sameas a }}", "False|True|True"},
  };
  expect_texts(r, sizeof(r) / sizeof(r[0]));
  char *text;
  /* json.dumps: Namespace is not serializable before any cycle is met */
  ck_assert_int_eq(render_timed("{% set ns = namespace() %}{% set ns.l = [ns] %}{{ ns.l|tojson }}", &text),
                   CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "Object of type Namespace is not JSON serializable"));
  /* a value nested deeper than Python's recursion allows: an error, not a stack overflow */
  ck_assert_int_eq(render_timed("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}"
                                "{% endfor %}{{ ns.x }}", &text), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "maximum recursion depth exceeded"));
  ck_assert_int_eq(render_timed("{% set a = namespace(x=[]) %}{% set b = namespace(x=[]) %}"
                                "{% for i in range(1000) %}{% set a.x = [a.x] %}{% set b.x = [b.x] %}{% endfor %}"
                                "{{ a.x == b.x }}", &text), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "maximum recursion depth exceeded in comparison"));
  ck_assert_int_eq(render_timed("{% set a = namespace(x=[]) %}{% for i in range(1000) %}{% set a.x = [a.x] %}"
                                "{% endfor %}{{ a.x|tojson }}", &text), CLF_E_INVALID_ARG);
  ck_assert_ptr_nonnull(strstr(clf_last_error(NULL), "nested too deeply"));
}
END_TEST

/* Integer edges answer what Python and Jinja2 3.1.4 answer. */
START_TEST(hostile_integers) {
  static const jinja_case r[] = {
      {"{{ range(0, 9223372036854775807, 4611686018427387904)|list }}", "[0, 4611686018427387904]"},
      {"{{ range(9223372036854775807, -9223372036854775807, -4611686018427387904)|list|length }}", "4"},
      {"{{ 'abc'.find('', 9223372036854775807) }} {{ 'abc'.find('', 3) }} {{ 'aXbX'.find('X', 2) }} "
       "{{ 'abc'.count('') }} {{ 'h\xc3\xa9llo'.find('l', -2) }} {{ 'abc'.find('b', 0, 1) }} "
       "{{ 'abc'.count('', 5) }} {{ 'abcabc'.count('bc', -9223372036854775807, 9223372036854775807) }}",
       "-1 3 3 4 3 -1 0 2"},
      {"{{ 1e300|round(400) }} {{ 1e300|round(-400) }} {{ 3|round }} {{ 25|round(-1) }} {{ 35|round(-1) }} "
       "{{ -25|round(-1) }} {{ 2.5|round }} {{ 1.25|round(1) }} {{ 1250.0|round(-2) }} {{ 7|round(-30) }}",
       "1e+300 0.0 3 20 40 -20 2.0 1.2 1200.0 0"},
      {"{{ 2 ** 62 }} {{ (-1) ** 9223372036854775807 }} {{ 0 ** 0 }} {{ 1 ** 9223372036854775807 }} {{ 2 ** -1 }}",
       "4611686018427387904 -1 1 1 0.5"},
      {"{{ 'h\xc3\xa9llo'[::-1] }} {{ 'h\xc3\xa9llo'[1:4] }} {{ 'h\xc3\xa9llo'[::2] }} "
       "{{ 'h\xc3\xa9llo'[-1:0:-2] }} {{ 'abc'[::-9223372036854775807] }} {{ [1, 2, 3][::-9223372036854775807] }}",
       "oll\xc3\xa9h \xc3\xa9ll hlo ol c [3]"},
      {"{{ strftime_now('%%' * 1000)|length }}", "1000"},
  };
  expect_texts(r, sizeof(r) / sizeof(r[0]));
  static const jinja_case e[] = {
      {"{{ 0 ** -1 }}", "0.0 cannot be raised to a negative power"},
      {"{{ 0.0 ** -1.5 }}", "0.0 cannot be raised to a negative power"},
      {"{{ 1.5 % 0.0 }}", "float modulo"},
      {"{{ 1 % 0 }}", "integer modulo by zero"},
      {"{{ 1.0 // 0.0 }}", "float floor division by zero"},
      {"{{ 1.0 / 0 }}", "float division by zero"},
      {"{{ 3 ** 40 }}", "integer overflow"},
      {"{{ 1e300|round(400, 'ceil') }}", "int too large to convert to float"},
      {"{{ 1e300|round(300, 'floor') }}", "cannot convert float infinity to integer"},
      {"{{ 9223372036854775807|round(-1) }}", "integer overflow"},
  };
  expect_refused(e, sizeof(e) / sizeof(e[0]), CLF_E_INVALID_ARG);
}
END_TEST

/* A NUL in a string of the context is refused as the server refuses it
 * (it silently cut the text: "a\u0000b" rendered as "a"). */
START_TEST(nul_refused) {
  clf_chat_template *t;
  char *text = (char *)1;
  CT_OK(clf_chat_template_parse("{{ messages[1].content }}", &t));
  CT_FAILS(clf_chat_template_render_json(
               t, "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"user\", \"content\": \"a\\u0000b\"}]}",
               &text),
           CLF_E_INVALID_ARG, "messages[1].content contains a NUL character");
  ck_assert_ptr_null(text);
  CT_FAILS(clf_chat_template_render_json(t, "{\"tools\": [{\"f\": {\"name\\u0000\": 1}}], \"messages\": []}", &text),
           CLF_E_INVALID_ARG, "tools[0].f contains a NUL character");
  /* what follows the JSON value (cJSON reads the first value only) is not looked into */
  CT_OK(clf_chat_template_render_json(t, "{\"messages\": [{}, {\"content\": \"x\"}]}]]]}{\"a\": \"\\u0000\"", &text));
  ck_assert_str_eq(text, "x");
  free(text);
  /* an escaped backslash before u0000 is no NUL */
  CT_OK(clf_chat_template_render_json(
      t, "{\"messages\": [{\"role\": \"user\"}, {\"role\": \"user\", \"content\": \"a\\\\u0000b\"}]}", &text));
  ck_assert_str_eq(text, "a\\u0000b");
  free(text);
  clf_chat_template_destroy(t);
}
END_TEST

/* The budget: settable, reported, and what real templates cost (the
 * fixtures of transformers' templates: docs/chat.md gives these figures). */
START_TEST(budget_api) {
  clf_template_budget b, cost;
  clf_template_budget_default(&b);
  ck_assert_uint_eq(b.steps, 1000000);
  ck_assert_uint_eq(b.bytes, (uint64_t)128 << 20);
  ck_assert_uint_eq(b.memory, (uint64_t)64 << 20);
  CT_FAILS(clf_chat_template_set_budget(NULL, &b), CLF_E_INVALID_ARG, "t is NULL");
  clf_chat_template *t;
  char *text;
  CT_OK(clf_chat_template_parse("{% for i in range(10000) %}{{ i }}{% endfor %}", &t));
  CT_OK(clf_chat_template_render_cost(t, k_ctx, &text, &cost));
  ck_assert_uint_ge(cost.steps, 10000);
  ck_assert_uint_ge(cost.bytes, 38890); /* the digits of 0..9999, at least once */
  ck_assert_uint_gt(cost.memory, 0);
  free(text);
  clf_template_budget small = {5000, 0, 0};
  CT_OK(clf_chat_template_set_budget(t, &small));
  CT_FAILS(clf_chat_template_render_json(t, k_ctx, &text), CLF_E_LIMIT, "steps budget (5000 ");
  small = (clf_template_budget){0, 1000, 0};
  CT_OK(clf_chat_template_set_budget(t, &small));
  CT_FAILS(clf_chat_template_render_json(t, k_ctx, &text), CLF_E_LIMIT, "bytes budget (1000 bytes");
  small = (clf_template_budget){0, 0, 20000};
  CT_OK(clf_chat_template_set_budget(t, &small));
  CT_FAILS(clf_chat_template_render_json(t, k_ctx, &text), CLF_E_LIMIT, "memory budget (20000 bytes");
  CT_OK(clf_chat_template_set_budget(t, NULL)); /* the defaults again */
  CT_OK(clf_chat_template_render_json(t, k_ctx, &text));
  free(text);
  clf_chat_template_destroy(t);
  /* a raised budget: the fixed limits on one string and one list still hold */
  CT_OK(clf_chat_template_parse("{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}"
                                "{% endfor %}", &t));
  clf_template_budget big = {100000000, (uint64_t)4 << 30, (uint64_t)1 << 30};
  CT_OK(clf_chat_template_set_budget(t, &big));
  CT_FAILS(clf_chat_template_render_json(t, k_ctx, &text), CLF_E_INVALID_ARG, "a list past 4000000 items");
  clf_chat_template_destroy(t);

  /* every fixture case: its cost, the largest printed for docs/chat.md */
  cJSON *root = cases_json(), *c;
  clf_template_budget most = {0, 0, 0};
  const char *which[3] = {"", "", ""};
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "cases")) {
    const char *name = cJSON_GetObjectItem(c, "template")->valuestring;
    char rel[256];
    snprintf(rel, sizeof(rel), "chat_templates/templates/%s.jinja", name);
    char *src = slurp(rel), *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "context"));
    CT_OK(clf_chat_template_parse(src, &t));
    clf_status st = clf_chat_template_render_cost(t, ctx, &text, &cost);
    ck_assert_msg(st == CLF_OK || st == CLF_E_INVALID_ARG, "%s: %s", name, clf_last_error(NULL));
    if (cost.steps > most.steps) most.steps = cost.steps, which[0] = name;
    if (cost.bytes > most.bytes) most.bytes = cost.bytes, which[1] = name;
    if (cost.memory > most.memory) most.memory = cost.memory, which[2] = name;
    free(text);
    free(ctx);
    free(src);
    clf_chat_template_destroy(t);
  }
  printf("largest cost of a fixture render: %llu steps (%s), %llu bytes (%s), %llu bytes alive (%s)\n",
         (unsigned long long)most.steps, which[0], (unsigned long long)most.bytes, which[1],
         (unsigned long long)most.memory, which[2]);
  /* no real template comes near the defaults */
  ck_assert_uint_lt(most.steps * 100, b.steps);
  ck_assert_uint_lt(most.bytes * 100, b.bytes);
  ck_assert_uint_lt(most.memory * 100, b.memory);
  cJSON_Delete(root);
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("chat_template");
  TCase *tc = tcase_create("chat_template");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, fixtures_match_transformers);
  tcase_add_test(tc, family_template);
  tcase_add_test(tc, snippets_match_jinja);
  tcase_add_test(tc, call_snippets_match_jinja);
  tcase_add_test(tc, render_messages);
  tcase_add_test(tc, tokenizer_templates);
  tcase_add_test(tc, special_tokens_as_variables);
  tcase_add_test(tc, refused_at_parse);
  tcase_add_test(tc, refused_at_render);
  tcase_add_test(tc, json_numbers);
  tcase_add_test(tc, bad_arguments);
  tcase_add_test(tc, hostile_nesting);
  tcase_add_test(tc, hostile_budget);
  tcase_add_test(tc, hostile_repetition);
  tcase_add_test(tc, hostile_cycles);
  tcase_add_test(tc, hostile_integers);
  tcase_add_test(tc, nul_refused);
  tcase_add_test(tc, budget_api);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
