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
START_TEST(snippets_match_jinja) {
  cJSON *root = cases_json(), *c;
  char *ctx = cJSON_PrintUnformatted(cJSON_GetObjectItem(root, "snippet_context"));
  int n = 0;
  cJSON_ArrayForEach(c, cJSON_GetObjectItem(root, "snippets")) {
    const char *src = cJSON_GetObjectItem(c, "template_source")->valuestring;
    const cJSON *want = cJSON_GetObjectItem(c, "expected");
    clf_chat_template *t = NULL;
    char *text = NULL;
    clf_status st = clf_chat_template_parse(src, &t);
    if (st == CLF_OK) st = clf_chat_template_render_json(t, ctx, &text);
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
    const cJSON *want = cJSON_GetObjectItem(c, "expected");
    clf_chat_template *t = NULL;
    char *text = NULL;
    clf_status st = clf_chat_template_parse(src, &t);
    int parsed = st == CLF_OK;
    if (parsed) st = clf_chat_template_render_json(t, ctx, &text);
    if (cJSON_IsString(want)) {
      ck_assert_msg(st == CLF_OK, "%s: %s", src, clf_last_error(NULL));
      char msg[512];
      diff_at(text, want->valuestring, msg, sizeof(msg));
      ck_assert_msg(!msg[0], "%s: %s", src, msg);
    } else {
      const char *type = cJSON_GetObjectItem(c, "error_type")->valuestring;
      const char *err = cJSON_GetObjectItem(c, "error")->valuestring;
      int syntax = !strcmp(type, "TemplateSyntaxError") || !strcmp(type, "TemplateAssertionError");
      ck_assert_msg(st == (syntax ? CLF_E_FORMAT : CLF_E_INVALID_ARG) && parsed == !syntax,
                    "%s: %s (%s), Jinja raised %s: %s", src, clf_status_name(st), clf_last_error(NULL), type, err);
      ck_assert_msg(strstr(clf_last_error(NULL), err), "%s: \"%s\" lacks \"%s\"", src, clf_last_error(NULL), err);
      refused++;
    }
    free(text);
    clf_chat_template_destroy(t);
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
  clf_tokenizer_destroy(tok);
  free(dir);
  CT_FAILS(clf_tokenizer_chat_template(NULL, &t), CLF_E_INVALID_ARG, "NULL");
  cJSON_Delete(root);
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
      {"{{ 1 // 0 }}", CLF_E_INVALID_ARG, "division by zero"},
      {"{{ 9223372036854775807 + 1 }}", CLF_E_INVALID_ARG, "integer overflow"},
      {"{% for i in range(1000000) %}{% endfor %}", CLF_E_INVALID_ARG, "Range too big"},
      {"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", CLF_E_INVALID_ARG, "nested too deeply"},
      {"{{ 'x' * 100000000 }}", CLF_E_INVALID_ARG, "too long"},
      {"{% set ns = namespace(s='x' * 1000000) %}{% for i in range(10) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
       "{{ ns.s }}", CLF_E_INVALID_ARG, "past 67108864 bytes"},
      {"{% break %}", CLF_E_INVALID_ARG, "outside of a loop"},
      {"{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
       CLF_E_INVALID_ARG, "a list past 4000000 items"},
      {"{{ range(100000)|unique|list|length }}", CLF_E_INVALID_ARG, "more than 20000000"},
      {"{% for c in ' x' * 30000000 %}{% endfor %}", CLF_E_INVALID_ARG, "more than 4000000 characters"},
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

static Suite *suite(void) {
  Suite *s = suite_create("chat_template");
  TCase *tc = tcase_create("chat_template");
  tcase_set_timeout(tc, 300);
  tcase_add_test(tc, fixtures_match_transformers);
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
  suite_add_tcase(s, tc);
  return s;
}

int main(void) { return th_run(suite()); }
