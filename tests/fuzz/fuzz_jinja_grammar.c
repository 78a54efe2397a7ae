/* fuzz_jinja_grammar.c - libFuzzer target: chat templates generated from a
 * grammar of the Jinja subset host/text/jinja_*.c implements.  The input's
 * bytes are read as choices (statement kind, operator, filter, literal ...)
 * that build a template which parses far more often than mutated bytes
 * would, so the renderer's loops, arithmetic, filters, methods, macros and
 * namespaces are reached; it is parsed and rendered with a fixed context
 * (clf_chat_template_render_json), as fuzz_chat_template.c does with raw
 * bytes.  When the bytes run out every choice is the first (a terminal), so
 * generation always ends.  Parse and render errors are expected; crashes,
 * leaks, sanitizer reports, inputs past libFuzzer's -timeout and memory
 * past -rss_limit_mb are findings.  CLF_FUZZ_VERBOSE=1 prints the template
 * an input makes and how its parse or render ended (to read a finding). */
#include "fuzz_util.h"

#include <clformer.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The generated template stops growing here; depth bounds keep each
 * expression and statement finite. */
#define MAX_OUT 8192
#define MAX_EXPR_DEPTH 5
#define MAX_STMT_DEPTH 4
#define MAX_TOP 8

typedef struct {
  const uint8_t *p;
  size_t n;
  char out[MAX_OUT];
  size_t len;
  int full;
} gen;

/* The next choice in [0, k): one byte, 0 when the input is spent. */
static unsigned pick(gen *g, unsigned k) {
  if (!g->n) return 0;
  g->n--;
  return *g->p++ % k;
}

static void emit(gen *g, const char *fmt, ...) {
  if (g->full) return;
  va_list ap;
  va_start(ap, fmt);
  int w = vsnprintf(g->out + g->len, MAX_OUT - g->len, fmt, ap);
  va_end(ap);
  if (w < 0 || (size_t)w >= MAX_OUT - g->len) { g->full = 1; g->out[g->len] = '\0'; return; }
  g->len += (size_t)w;
}

static const char *one_of(gen *g, const char *const *a, size_t n) { return a[pick(g, (unsigned)n)]; }
#define N(a) (sizeof(a) / sizeof((a)[0]))
/* one of a table's strings; one of the strings listed */
#define ONE_OF(g, a) one_of((g), (a), N(a))
#define ONE(g, ...) one_of((g), (const char *const[]){__VA_ARGS__}, N(((const char *const[]){__VA_ARGS__})))

/* Names the fixed context, the loops and the sets below define (and one
 * that nothing defines). */
static const char *const names[] = {"messages", "message", "ns", "x", "k", "v", "s", "n", "l", "d",
                                    "loop", "tools", "bos_token", "add_generation_prompt", "big", "u"};
static const char *const loop_vars[] = {"message", "x", "k", "v"};
static const char *const set_vars[] = {"s", "n", "l", "d", "x"};
static const char *const attrs[] = {"role", "content", "a", "b", "l", "s", "tool_calls", "index", "index0",
                                    "first", "last", "length", "revindex", "previtem", "nextitem", "name"};
/* small ones and the edges of 32 and 64 bits */
static const char *const ints[] = {"0", "1", "2", "3", "-1", "7", "10", "100", "255", "65536", "2147483647",
                                   "4294967296", "4611686018427387904", "9223372036854775807",
                                   "(-9223372036854775807 - 1)"};
static const char *const floats[] = {"0.0", "0.5", "-0.0", "1.5", "3.14159", "1e308", "1e-308", "1e400",
                                     "-2.5", "100.0"};
static const char *const strings[] = {"''", "'a'", "'ab'", "'user'", "'assistant'", "'system'", "'content'",
                                      "'role'", "'a,b,c'", "' x '", "'\\n'", "'{}'", "'{0} {1}'",
                                      "'caf\xc3\xa9'", "'\\u00e9'", "'{{'", "'%s'", "'\\\\'", "\"q'\"",
                                      "'<|im_start|>'", "'a' * 3"};
static const char *const binops[] = {"+", "-", "*", "/", "//", "%", "**", "~", "==", "!=", "<", "<=", ">",
                                     ">=", "in", "not in", "and", "or"};
/* filters with no arguments, then those with arguments made below */
static const char *const filters0[] = {"length", "upper", "lower", "list", "tojson", "string", "int", "float",
                                       "trim", "first", "last", "reverse", "sort", "unique", "items",
                                       "dictsort", "round", "abs", "capitalize", "title", "sum", "min", "max",
                                       "count", "wordcount", "e", "safe", "default", "d", "select", "reject",
                                       "indent", "escape", "float", "batch"};
static const char *const tests[] = {"defined", "undefined", "none", "string", "number", "mapping",
                                    "iterable", "sequence", "even", "odd", "boolean", "integer", "float",
                                    "true", "false", "callable", "lower", "upper"};
static const char *const methods0[] = {"items()", "keys()", "values()", "strip()", "lstrip()", "rstrip()",
                                       "upper()", "lower()", "title()", "capitalize()", "split()", "pop()",
                                       "copy()", "clear()", "popitem()"};

static void expr(gen *g, int depth);

/* An argument list of 0-3 expressions. */
static void args(gen *g, int depth) {
  unsigned k = pick(g, 4);
  for (unsigned i = 0; i < k; i++) {
    if (i) emit(g, ", ");
    expr(g, depth + 1);
  }
}

/* A literal, a name, or a short postfix chain on a name. */
static void atom(gen *g) {
  switch (pick(g, 12)) {
  case 0: emit(g, "%s", ONE_OF(g, ints)); break;
  case 1: emit(g, "%s", ONE_OF(g, names)); break;
  case 2: emit(g, "%s", ONE_OF(g, strings)); break;
  case 3: emit(g, "%s", ONE_OF(g, floats)); break;
  case 4: { /* 63 bits from the input; all ones, an integer the parser refuses (2^64) */
    unsigned long long v = 0;
    for (int i = 0; i < 8; i++) v = v << 8 | pick(g, 256);
    if (v == ~0ULL) emit(g, "18446744073709551616");
    else emit(g, "%llu", v >> 1);
    break;
  }
  case 5: emit(g, "%s", ONE(g, "true", "false", "none", "None", "True")); break;
  case 6: emit(g, "%s.%s", ONE_OF(g, names), ONE_OF(g, attrs)); break;
  case 7: emit(g, "messages[%d]", (int)pick(g, 6) - 2); break;
  case 8: emit(g, "messages[-1].content"); break;
  case 9: emit(g, "loop.index"); break;
  case 10: emit(g, "ns.%s", ONE_OF(g, attrs)); break;
  default: { /* a short raw string from the input, quoted */
    emit(g, "'");
    for (unsigned i = 0, k = pick(g, 8); i < k; i++) {
      unsigned c = pick(g, 256);
      if (c == '\'' || c == '\\' || c < 0x20) emit(g, "\\x%02x", c);
      else emit(g, "%c", (char)c);
    }
    emit(g, "'");
  }
  }
}

/* A filter after "|", with the arguments it takes. */
static void filter(gen *g, int depth) {
  switch (pick(g, 12)) {
  case 0: emit(g, "%s", ONE_OF(g, filters0)); break;
  case 1: emit(g, "join("); if (pick(g, 2)) expr(g, depth + 1); emit(g, ")"); break;
  case 2: emit(g, "replace("); expr(g, depth + 1); emit(g, ", "); expr(g, depth + 1); emit(g, ")"); break;
  case 3: emit(g, "map(attribute=%s)", ONE_OF(g, strings)); break;
  case 4: emit(g, "selectattr(%s", ONE_OF(g, strings));
    if (pick(g, 2)) { emit(g, ", '%s', ", ONE_OF(g, tests)); expr(g, depth + 1); }
    emit(g, ")"); break;
  case 5: emit(g, "round(%u, '%s')", pick(g, 5), ONE(g, "common", "ceil", "floor")); break;
  case 6: emit(g, "tojson(indent=%s)", ONE_OF(g, ints)); break;
  case 7: emit(g, "default("); expr(g, depth + 1); emit(g, pick(g, 2) ? ", true)" : ")"); break;
  case 8: emit(g, "%s(", ONE(g, "indent", "join", "first", "sum", "int", "float")); expr(g, depth + 1); emit(g, ")"); break;
  case 9: emit(g, "indent("); expr(g, depth + 1); emit(g, ")"); break;
  case 10: emit(g, "%s(", ONE(g, "map", "select", "reject", "sort", "dictsort",
                                                           "unique", "int", "string", "attr", "min", "max"));
    args(g, depth); emit(g, ")"); break;
  default: emit(g, "rejectattr(%s)", ONE_OF(g, strings)); break;
  }
}

/* A method call after ".". */
static void method(gen *g, int depth) {
  switch (pick(g, 9)) {
  case 0: emit(g, "%s", ONE_OF(g, methods0)); break;
  case 1: emit(g, "append("); expr(g, depth + 1); emit(g, ")"); break;
  case 2: emit(g, "%s(", ONE(g, "split", "startswith", "endswith", "find", "count",
                                                          "strip", "rstrip", "lstrip", "join"));
    expr(g, depth + 1); emit(g, ")"); break;
  case 3: emit(g, "format("); args(g, depth); emit(g, ")"); break;
  case 4: emit(g, "replace("); expr(g, depth + 1); emit(g, ", "); expr(g, depth + 1);
    if (pick(g, 2)) { emit(g, ", "); expr(g, depth + 1); }
    emit(g, ")"); break;
  case 5: emit(g, "get("); expr(g, depth + 1); emit(g, ")"); break;
  case 6: emit(g, "%s(", ONE(g, "extend", "insert", "remove", "update",
                                                          "setdefault", "pop"));
    args(g, depth); emit(g, ")"); break;
  case 7: emit(g, "split("); expr(g, depth + 1); emit(g, ", "); expr(g, depth + 1); emit(g, ")"); break;
  default: emit(g, "%s", ONE_OF(g, attrs)); break;
  }
}

static void expr(gen *g, int depth) {
  unsigned c = pick(g, 22);
  /* an atom about one time in four, and always at the depth bound */
  if (c >= 18 || depth >= MAX_EXPR_DEPTH || g->full) { atom(g); return; }
  switch (c) {
  case 0: case 1: atom(g); break;
  case 2: case 3: expr(g, depth + 1); emit(g, " %s ", ONE_OF(g, binops)); expr(g, depth + 1); break;
  /* a filter or a test in parentheses, so that what follows applies to it */
  case 4: emit(g, "("); expr(g, depth + 1); emit(g, " | "); filter(g, depth); emit(g, ")"); break;
  case 5: emit(g, "("); expr(g, depth + 1); emit(g, " is %s%s)", pick(g, 2) ? "not " : "", ONE_OF(g, tests)); break;
  case 6: emit(g, "("); expr(g, depth + 1);
    emit(g, " is %s(", ONE(g, "divisibleby", "equalto", "sameas", "gt", "lt", "in"));
    expr(g, depth + 1); emit(g, "))"); break;
  case 7: emit(g, "("); expr(g, depth + 1); emit(g, ")."); method(g, depth); break;
  case 8: emit(g, "["); args(g, depth); emit(g, "]"); break;
  case 9: { /* a dict literal */
    emit(g, "{");
    for (unsigned i = 0, k = pick(g, 4); i < k; i++) {
      if (i) emit(g, ", ");
      expr(g, depth + 1); emit(g, ": "); expr(g, depth + 1);
    }
    emit(g, "}");
    break;
  }
  case 10: emit(g, "range("); args(g, depth); emit(g, ")"); break;
  case 11: { /* a subscript or a slice */
    expr(g, depth + 1);
    emit(g, "[");
    unsigned k = pick(g, 4);
    if (k != 1) expr(g, depth + 1);
    if (k) { emit(g, ":"); if (k > 1) expr(g, depth + 1); }
    if (k == 3) { emit(g, ":"); expr(g, depth + 1); }
    emit(g, "]");
    break;
  }
  case 12: emit(g, "("); expr(g, depth + 1); emit(g, " if "); expr(g, depth + 1);
    if (pick(g, 2)) { emit(g, " else "); expr(g, depth + 1); }
    emit(g, ")"); break;
  case 13: emit(g, "(%s", pick(g, 2) ? "not " : "-"); expr(g, depth + 1); emit(g, ")"); break;
  case 14: emit(g, "namespace(");
    for (unsigned i = 0, k = pick(g, 3); i < k; i++) {
      emit(g, "%s%s=", i ? ", " : "", ONE_OF(g, attrs));
      expr(g, depth + 1);
    }
    emit(g, ")"); break;
  case 15: emit(g, "%s(", ONE(g, "m", "caller", "dict", "raise_exception", "loop.cycle"));
    args(g, depth); emit(g, ")"); break;
  case 16: emit(g, "("); expr(g, depth + 1); emit(g, ")"); break;
  default: emit(g, "%s %s ", ONE_OF(g, ints), ONE_OF(g, binops)); expr(g, depth + 1); break;
  }
}

static void stmts(gen *g, int depth, unsigned max);

/* "{%" or "{%-", and the same for the end. */
static const char *open_tag(gen *g) { return pick(g, 4) ? "{% " : "{%- "; }
static const char *close_tag(gen *g) { return pick(g, 4) ? " %}" : " -%}"; }

static void stmt(gen *g, int depth) {
  unsigned kinds = depth >= MAX_STMT_DEPTH ? 3 : 14;
  switch (pick(g, kinds)) {
  case 0: emit(g, "%s", ONE(g, "t", " ", "\n", "<|user|>", "  x\n  ")); break;
  case 1: emit(g, "{{ "); expr(g, 0); emit(g, " }}"); break;
  case 2: emit(g, "%sset %s = ", open_tag(g), ONE_OF(g, set_vars)); expr(g, 0); emit(g, "%s", close_tag(g)); break;
  case 3: case 4:
    emit(g, "%sif ", open_tag(g)); expr(g, 0); emit(g, "%s", close_tag(g));
    stmts(g, depth + 1, 3);
    for (unsigned i = 0, k = pick(g, 3); i < k; i++) {
      emit(g, "%selif ", open_tag(g)); expr(g, 0); emit(g, "%s", close_tag(g));
      stmts(g, depth + 1, 2);
    }
    if (pick(g, 2)) { emit(g, "%selse%s", open_tag(g), close_tag(g)); stmts(g, depth + 1, 2); }
    emit(g, "%sendif%s", open_tag(g), close_tag(g));
    break;
  case 5: case 6:
    emit(g, "%sfor ", open_tag(g));
    if (pick(g, 3)) emit(g, "%s", ONE_OF(g, loop_vars)); else emit(g, "k, v");
    emit(g, " in "); expr(g, 0);
    if (pick(g, 3) == 0) { emit(g, " if "); expr(g, 1); }
    emit(g, "%s", close_tag(g));
    stmts(g, depth + 1, 3);
    if (pick(g, 4) == 0) emit(g, "{%% %s %%}", pick(g, 2) ? "break" : "continue");
    if (pick(g, 3) == 0) { emit(g, "{%% else %%}"); stmts(g, depth + 1, 1); }
    emit(g, "%sendfor%s", open_tag(g), close_tag(g));
    break;
  case 7: emit(g, "{%% set ns = namespace(%s=", ONE_OF(g, attrs)); expr(g, 1); emit(g, ") %%}"); break;
  case 8: emit(g, "{%% set ns.%s = ", ONE_OF(g, attrs)); expr(g, 0); emit(g, " %%}"); break;
  case 9: emit(g, "{%% macro m(a, b=%s) %%}", ONE_OF(g, ints));
    stmts(g, depth + 1, 3);
    if (pick(g, 2)) emit(g, "{{ caller() if caller is defined }}");
    emit(g, "{%% endmacro %%}");
    break;
  case 10: emit(g, "{{ m("); args(g, 1); emit(g, ") }}"); break; /* ({% call %} is not in the subset) */
  case 11: emit(g, "{%% set %s %%}", ONE_OF(g, set_vars)); stmts(g, depth + 1, 2); emit(g, "{%% endset %%}"); break;
  case 12: emit(g, "{%% filter %s %%}", ONE(g, "upper", "trim", "lower", "tojson", "length"));
    stmts(g, depth + 1, 2); emit(g, "{%% endfilter %%}"); break;
  default: emit(g, "{%% generation %%}"); stmts(g, depth + 1, 2); emit(g, "{%% endgeneration %%}"); break;
  }
}

/* Up to max statements (at least one while the input lasts). */
static void stmts(gen *g, int depth, unsigned max) {
  for (unsigned i = 0, k = 1 + pick(g, max); i < k && !g->full; i++) stmt(g, depth);
}

/* The context every template renders: a chat with a tool call, tools, and
 * the variables the grammar's names use. */
static const char context[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": "
    "\"Hello \\u00e9 {{ x }}\"}, {\"role\": \"assistant\", \"content\": \"a\", \"tool_calls\": [{\"id\": "
    "\"call1\", \"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"x\": 1}}}]}, "
    "{\"role\": \"tool\", \"content\": \"r\"}], \"tools\": [{\"type\": \"function\", \"function\": {\"name\": "
    "\"f\", \"parameters\": {}}}], \"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"s\": \"abc\", "
    "\"n\": 3, \"big\": 9223372036854775807, \"l\": [1, 2, \"x\", [3]], \"d\": {\"a\": 1, \"b\": [2, 3], "
    "\"s\": \"t\"}}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static gen g;
  g.p = data;
  g.n = size;
  g.len = 0;
  g.full = 0;
  g.out[0] = '\0';
  /* A few statements: each render stops at its first error, so a long
   * template is mostly not reached. */
  for (int i = 0; i < MAX_TOP && (i == 0 || g.n) && !g.full; i++) stmt(&g, 0);
  fz_note("template", g.out);
  clf_chat_template *t = NULL;
  char *text = NULL;
  if (clf_chat_template_parse(g.out, &t) != CLF_OK) {
    fz_note("parse", clf_last_error(NULL));
  } else {
    fz_note("render", clf_chat_template_render_json(t, context, &text) == CLF_OK ? text : clf_last_error(NULL));
    free(text);
    clf_chat_template_destroy(t);
  }
  return 0;
}
