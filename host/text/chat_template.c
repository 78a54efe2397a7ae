/* chat_template.c - the public chat template API: a parsed Jinja template
 * plus the variables it renders with (the tokenizer's special tokens), and
 * the context transformers' apply_chat_template builds: messages, tools and
 * documents (None unless given), add_generation_prompt.
 */
#include "jinja.h"
#include "tokenizer.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct clf_chat_template {
  jtemplate *tpl;
  cJSON *vars; /* the template's own variables: defaults, then special tokens */
  clf_template_budget budget; /* each render's */
};

void clf_template_budget_default(clf_template_budget *b) {
  if (b) *b = (clf_template_budget){CLF__J_DEFAULT_STEPS, CLF__J_DEFAULT_BYTES, CLF__J_DEFAULT_MEMORY};
}

clf_status clf_chat_template_set_budget(clf_chat_template *t, const clf_template_budget *budget) {
  if (!t) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_set_budget: t is NULL");
  clf_template_budget_default(&t->budget);
  if (budget && budget->steps) t->budget.steps = budget->steps;
  if (budget && budget->bytes) t->budget.bytes = budget->bytes;
  if (budget && budget->memory) t->budget.memory = budget->memory;
  return CLF_OK;
}

int clf__json_nul_path(const char *s, const char *prefix, char *path, size_t cap) {
  enum { MAXD = 32 };
  struct { int arr; long idx; const char *key; size_t klen; } st[MAXD];
  int d = -1, want_key = 0;
  for (size_t i = 0; s[i]; i++) {
    char c = s[i];
    if (c == '{' || c == '[') {
      d++;
      if (d < MAXD) st[d].arr = c == '[', st[d].idx = 0, st[d].key = NULL, st[d].klen = 0;
      want_key = c == '{';
    } else if (c == '}' || c == ']') {
      if (--d < 0) break; /* the end of the value: cJSON ignores what follows it */
    } else if (c == ',' && d >= 0 && d < MAXD) {
      if (st[d].arr) st[d].idx++;
      else want_key = 1;
    } else if (c == '"') {
      size_t a = ++i;
      int nul = 0;
      for (; s[i] && s[i] != '"'; i++)
        if (s[i] == '\\') { nul |= !strncmp(s + i + 1, "u0000", 5); if (s[i + 1]) i++; }
      if (want_key && d >= 0 && d < MAXD) { st[d].key = s + a; st[d].klen = i - a; }
      int was_key = want_key;
      want_key = 0;
      if (!nul) { if (!s[i]) break; continue; }
      size_t o = (size_t)snprintf(path, cap, "%s", prefix ? prefix : "");
      if (o >= cap) o = cap - 1;
      for (int k = 0; k <= d && k < MAXD && o < cap; k++) {
        int last = k == d && was_key; /* a key holding the NUL: the path to its object */
        if (last) break;
        if (st[k].arr) o += (size_t)snprintf(path + o, cap - o, "[%ld]", st[k].idx);
        else if (st[k].key) o += (size_t)snprintf(path + o, cap - o, "%s%.*s", o ? "." : "", (int)st[k].klen, st[k].key);
      }
      if (d >= MAXD || !path[0]) snprintf(path, cap, "%s", was_key ? "a key" : "a string");
      else if (path[0] == '.') memmove(path, path + 1, strlen(path));
      return 1;
    }
  }
  return 0;
}

static clf_status oom(void) { return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory"); }

/* transformers' render(messages=, tools=None, documents=None,
 * add_generation_prompt=False, **special_tokens_map). */
static cJSON *default_vars(const char *special_json) {
  cJSON *v = special_json ? cJSON_Parse(special_json) : cJSON_CreateObject();
  if (!v) return NULL;
  if (!cJSON_AddNullToObject(v, "tools") || !cJSON_AddNullToObject(v, "documents") ||
      !cJSON_AddFalseToObject(v, "add_generation_prompt")) {
    cJSON_Delete(v);
    return NULL;
  }
  return v;
}

static clf_status parse_with(const char *source, const char *special_json, clf_chat_template **out) {
  clf_chat_template *t = calloc(1, sizeof(*t));
  if (!t) return oom();
  clf_template_budget_default(&t->budget);
  clf_status st = clf__j_parse(source, &t->tpl);
  if (st == CLF_OK && !(t->vars = default_vars(special_json))) st = oom();
  if (st != CLF_OK) {
    clf_chat_template_destroy(t);
    return st;
  }
  *out = t;
  return CLF_OK;
}

clf_status clf_chat_template_parse(const char *source, clf_chat_template **out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_parse: out is NULL");
  *out = NULL;
  if (!source) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_parse: source is NULL");
  return parse_with(source, NULL, out);
}

void clf_chat_template_destroy(clf_chat_template *t) {
  if (!t) return;
  clf__j_free(t->tpl);
  cJSON_Delete(t->vars);
  free(t);
}

clf_status clf_chat_template_render(const clf_chat_template *t, const clf_chat_message *messages, size_t n,
                                    int add_generation_prompt, char **text) {
  if (!text) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_render: text is NULL");
  *text = NULL;
  if (!t) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_render: t is NULL");
  if (n && !messages) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_render: messages is NULL");
  for (size_t i = 0; i < n; i++)
    if (!messages[i].role)
      return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_chat_template_render: messages[%zu].role is NULL", i);
  cJSON *ctx = cJSON_CreateObject(), *list = ctx ? cJSON_AddArrayToObject(ctx, "messages") : NULL;
  int ok = list && cJSON_AddBoolToObject(ctx, "add_generation_prompt", add_generation_prompt != 0);
  for (size_t i = 0; ok && i < n; i++) {
    cJSON *m = cJSON_CreateObject();
    ok = m && cJSON_AddItemToArray(list, m) && cJSON_AddStringToObject(m, "role", messages[i].role) &&
         (messages[i].content ? cJSON_AddStringToObject(m, "content", messages[i].content)
                              : cJSON_AddNullToObject(m, "content"));
  }
  clf_status st = ok ? clf__j_render(t->tpl, t->vars, ctx, NULL, &t->budget, NULL, text) : oom();
  cJSON_Delete(ctx);
  return st;
}

static clf_status render_json(const char *fn, const clf_chat_template *t, const char *context_json, char **text,
                              clf_template_budget *cost) {
  if (!text) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: text is NULL", fn);
  *text = NULL;
  if (!t || !context_json) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", fn, t ? "context_json" : "t");
  cJSON *ctx = cJSON_Parse(context_json);
  if (!cJSON_IsObject(ctx)) {
    const char *at = cJSON_GetErrorPtr();
    int parsed = ctx != NULL;
    size_t off = parsed || !at || at < context_json ? 0 : (size_t)(at - context_json);
    cJSON_Delete(ctx);
    return parsed ? clf__fail(NULL, CLF_E_INVALID_ARG, "%s: the context is not a JSON object", fn)
                  : clf__fail(NULL, CLF_E_INVALID_ARG, "%s: the context is not valid JSON (near byte %zu)", fn, off);
  }
  char path[200];
  if (clf__json_nul_path(context_json, NULL, path, sizeof(path))) {
    cJSON_Delete(ctx);
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s contains a NUL character", fn, path);
  }
  clf_status st = clf__j_render(t->tpl, t->vars, ctx, context_json, &t->budget, cost, text);
  cJSON_Delete(ctx);
  return st;
}

clf_status clf_chat_template_render_json(const clf_chat_template *t, const char *context_json, char **text) {
  return render_json("clf_chat_template_render_json", t, context_json, text, NULL);
}

clf_status clf_chat_template_render_cost(const clf_chat_template *t, const char *context_json, char **text,
                                         clf_template_budget *cost) {
  if (cost) memset(cost, 0, sizeof(*cost));
  return render_json("clf_chat_template_render_cost", t, context_json, text, cost);
}

clf_status clf_tokenizer_chat_template(const clf_tokenizer *tok, clf_chat_template **out) {
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_chat_template: out is NULL");
  *out = NULL;
  if (!tok) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_tokenizer_chat_template: tok is NULL");
  if (!tok->chat_template)
    return clf__fail(NULL, CLF_E_NOT_FOUND, "clf_tokenizer_chat_template: the tokenizer has no chat template");
  return parse_with(tok->chat_template, tok->chat_vars, out);
}

clf_status clf_tokenizer_chat_template_parse(const clf_tokenizer *tok, const char *source, clf_chat_template **out) {
  static const char fn[] = "clf_tokenizer_chat_template_parse";
  if (!out) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: out is NULL", fn);
  *out = NULL;
  if (!tok || !source) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: %s is NULL", fn, tok ? "source" : "tok");
  return parse_with(source, tok->chat_vars, out);
}
