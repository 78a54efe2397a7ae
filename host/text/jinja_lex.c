/* jinja_lex.c - a chat template's text as tokens, as Jinja 3.1's lexer makes
 * them with trim_blocks and lstrip_blocks on (transformers' environment).
 *
 * Newlines are normalised to "\n" and one trailing newline dropped
 * (keep_trailing_newline off); "{%-" / "{{-" / "{#-" strip the whitespace
 * before the tag, "-%}" / "-}}" / "-#}" the whitespace after it; "%}" and
 * "#}" eat one newline after them unless written "+%}"; "{%" and "{#" alone
 * on their line take the indentation before them unless written "{%+".
 * Raw blocks become text.
 */
#include "jinja.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

typedef struct lx {
  const char *s;
  size_t n, p;
  jtok *t;
  size_t nt, cap;
  int line_starting;
  clf_status st;
  size_t cp; /* line_col's cursor */
  int cl, cc;
} lx;

static int is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/* 1-based line and column (in code points) of s[p]; positions asked for
 * mostly grow, so the walk resumes from the last one. */
static void line_col(lx *L, size_t p, int *line, int *col) {
  if (p < L->cp) { L->cp = 0; L->cl = 1; L->cc = 1; }
  for (; L->cp < p && L->cp < L->n; L->cp++) {
    if (L->s[L->cp] == '\n') { L->cl++; L->cc = 1; }
    else if (((unsigned char)L->s[L->cp] & 0xC0) != 0x80) L->cc++;
  }
  *line = L->cl;
  *col = L->cc;
}

static clf_status lfail(lx *L, size_t p, const char *what) {
  int line, col;
  line_col(L, p, &line, &col);
  return L->st = clf__fail(NULL, CLF_E_FORMAT, "chat template: %s at %d:%d", what, line, col);
}

static jtok *emit(lx *L, jtok_type t, size_t at, const char *s, size_t n) {
  if (L->nt == L->cap) {
    size_t cap = L->cap ? L->cap * 2 : 64;
    jtok *nt = realloc(L->t, cap * sizeof(*nt));
    if (!nt) { L->st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory"); return NULL; }
    L->t = nt;
    L->cap = cap;
  }
  jtok *k = &L->t[L->nt];
  memset(k, 0, sizeof(*k));
  k->t = t;
  line_col(L, at, &k->line, &k->col);
  k->s = malloc(n + 1);
  if (!k->s) { L->st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory"); return NULL; }
  if (n) memcpy(k->s, s, n);
  k->s[n] = '\0';
  k->n = n;
  L->nt++;
  return k;
}

/* Text s[a..b) before a tag opened with `sign` ('-', '+' or 0) of kind
 * ('{', '%', '#'). */
static void emit_text(lx *L, size_t a, size_t b, char sign, char kind) {
  if (sign == '-') {
    while (b > a && is_ws(L->s[b - 1])) b--;
  } else if (sign != '+' && kind != '{' && kind) {
    size_t l = b;
    while (l > a && L->s[l - 1] != '\n') l--;
    if (l > a || L->line_starting) {
      size_t i = l;
      while (i < b && is_ws(L->s[i])) i++;
      if (i == b && b > l) b = l;
    }
  }
  if (b > a) emit(L, JT_TEXT, a, L->s + a, b - a);
}

/* After an end tag: its "-" (strip), or the newline trim_blocks eats. */
static void after_end(lx *L, int strip, int trim) {
  size_t p0 = L->p;
  if (strip) while (L->p < L->n && is_ws(L->s[L->p])) L->p++;
  else if (trim && L->p < L->n && L->s[L->p] == '\n') L->p++;
  L->line_starting = L->p > p0 ? L->s[L->p - 1] == '\n' : 0;
}

static int starts(const lx *L, size_t p, const char *w) {
  size_t k = strlen(w);
  return p + k <= L->n && !memcmp(L->s + p, w, k);
}

static int name_char(char c, int first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

/* "{% raw %}" at p (after "{%" and its sign): the raw text as one token. */
static int lex_raw(lx *L, size_t p) {
  while (p < L->n && is_ws(L->s[p])) p++;
  if (!starts(L, p, "raw") || (p + 3 < L->n && name_char(L->s[p + 3], 0))) return 0;
  p += 3;
  while (p < L->n && is_ws(L->s[p])) p++;
  int strip = starts(L, p, "-%}");
  if (!strip && !starts(L, p, "%}")) return 0;
  L->p = p + (strip ? 3 : 2);
  if (strip) while (L->p < L->n && is_ws(L->s[L->p])) L->p++;
  for (size_t q = L->p; q + 1 < L->n; q++) {
    if (L->s[q] != '{' || L->s[q + 1] != '%') continue;
    size_t r = q + 2;
    char sign = r < L->n && (L->s[r] == '-' || L->s[r] == '+') ? L->s[r++] : 0;
    while (r < L->n && is_ws(L->s[r])) r++;
    if (!starts(L, r, "endraw")) continue;
    r += 6;
    while (r < L->n && is_ws(L->s[r])) r++;
    int es = starts(L, r, "-%}"), ep = starts(L, r, "+%}");
    if (!es && !ep && !starts(L, r, "%}")) continue;
    emit_text(L, L->p, q, sign, '%');
    L->p = r + (es || ep ? 3 : 2);
    after_end(L, es, !ep);
    return 1;
  }
  lfail(L, p, "missing end of raw directive");
  return 1;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t put_utf8(char *o, uint32_t cp) {
  if (cp < 0x80) { o[0] = (char)cp; return 1; }
  if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
  if (cp < 0x10000) {
    o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
    return 3;
  }
  o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
  o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
  return 4;
}

/* One escape after a backslash at s[*i] (Python's unicode-escape); the
 * bytes go to o, their count returned.  Unknown escapes stay as written. */
static size_t unescape(const char *s, size_t n, size_t *i, char *o) {
  char c = s[*i];
  static const char from[] = "nrtabfv\\'\"\n", to[] = "\n\r\t\a\b\f\v\\'\"";
  const char *f = memchr(from, c, sizeof(from) - 1);
  if (f) {
    (*i)++;
    if (c == '\n') return 0; /* a backslash-newline continues the line */
    o[0] = to[f - from];
    return 1;
  }
  int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (digits && *i + digits < n + 1) {
    uint32_t cp = 0;
    int k;
    for (k = 1; k <= digits && *i + k < n && hexval(s[*i + k]) >= 0; k++) cp = cp * 16 + (uint32_t)hexval(s[*i + k]);
    if (k == digits + 1 && cp <= 0x10FFFF) {
      *i += (size_t)digits + 1;
      return put_utf8(o, cp);
    }
  }
  if (digits || c == 'N') return (size_t)-1; /* truncated \x, \u, \U; \N{name} */
  if (c >= '0' && c <= '7') {
    uint32_t cp = 0;
    int k = 0;
    while (k < 3 && *i < n && s[*i] >= '0' && s[*i] <= '7') { cp = cp * 8 + (uint32_t)(s[*i] - '0'); (*i)++; k++; }
    return put_utf8(o, cp);
  }
  o[0] = '\\';
  return 1;
}

static int lex_string(lx *L) {
  size_t p0 = L->p;
  char q = L->s[L->p++];
  size_t a = L->p;
  while (L->p < L->n && L->s[L->p] != q) L->p += L->s[L->p] == '\\' && L->p + 1 < L->n ? 2 : 1;
  if (L->p >= L->n) return lfail(L, p0, "unterminated string"), -1;
  size_t b = L->p++;
  char *buf = malloc(b - a + 1);
  if (!buf) return L->st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory"), -1;
  size_t w = 0;
  for (size_t i = a; i < b;) {
    if (L->s[i] == '\\' && i + 1 < b) {
      i++;
      size_t k = unescape(L->s, b, &i, buf + w);
      if (k == (size_t)-1) {
        free(buf);
        return lfail(L, i - 1, "malformed escape in string"), -1;
      }
      w += k;
    } else {
      buf[w++] = L->s[i++];
    }
  }
  jtok *k = emit(L, JT_STRING, p0, buf, w);
  free(buf);
  return k ? 0 : -1;
}

static int lex_number(lx *L) {
  size_t p0 = L->p, w = 0;
  char buf[128];
  int is_float = 0;
  for (;;) {
    char c = L->p < L->n ? L->s[L->p] : 0;
    if (c >= '0' && c <= '9') buf[w++] = c;
    else if (c == '_' && w && L->p + 1 < L->n && L->s[L->p + 1] >= '0' && L->s[L->p + 1] <= '9') { L->p++; continue; }
    else if (c == '.' && !is_float && L->p + 1 < L->n && L->s[L->p + 1] >= '0' && L->s[L->p + 1] <= '9') { buf[w++] = c; is_float = 1; }
    else if ((c == 'e' || c == 'E') && L->p + 1 < L->n &&
             ((L->s[L->p + 1] >= '0' && L->s[L->p + 1] <= '9') ||
              ((L->s[L->p + 1] == '+' || L->s[L->p + 1] == '-') && L->p + 2 < L->n && L->s[L->p + 2] >= '0' &&
               L->s[L->p + 2] <= '9'))) {
      buf[w++] = c;
      buf[w++] = L->s[++L->p];
      is_float = 1;
    } else break;
    L->p++;
    if (w > 100) return lfail(L, p0, "number too long"), -1;
  }
  buf[w] = '\0';
  jtok *k = emit(L, is_float ? JT_FLOAT : JT_INT, p0, buf, w);
  if (!k) return -1;
  if (is_float) {
    k->f = strtod(buf, NULL);
  } else {
    int64_t v = 0;
    for (size_t i = 0; i < w; i++) {
      if (v > (INT64_MAX - (buf[i] - '0')) / 10) return lfail(L, p0, "integer past 64 bits"), -1;
      v = v * 10 + (buf[i] - '0');
    }
    k->i = v;
  }
  return 0;
}

static const char *const g_ops[] = {"//", "**", "==", "!=", "<=", ">=", "+", "-", "/", "*", "%", "~", "[", "]", "(",
                                    ")", "{", "}", "<", ">", "=", ".", ":", "|", ",", ";"};

/* Inside "{{ }}" or "{% %}" until its end.  block: 1 for "{%". */
static void lex_tag(lx *L, int block) {
  int depth = 0;
  while (L->st == CLF_OK) {
    while (L->p < L->n && is_ws(L->s[L->p])) L->p++;
    if (L->p >= L->n) { lfail(L, L->p, block ? "missing end of block tag" : "missing end of print tag"); return; }
    size_t p = L->p;
    if (!depth) {
      const char *end = block ? "%}" : "}}";
      int strip = starts(L, p, "-") && starts(L, p + 1, end);
      int plus = block && starts(L, p, "+") && starts(L, p + 1, end);
      if (strip || plus || starts(L, p, end)) {
        if (!emit(L, block ? JT_BLOCK_END : JT_VAR_END, p, end, 2)) return;
        L->p = p + 2 + (strip || plus);
        after_end(L, strip, block && !plus);
        return;
      }
    }
    char c = L->s[p];
    if (c == '\'' || c == '"') { if (lex_string(L)) return; continue; }
    if (c >= '0' && c <= '9') { if (lex_number(L)) return; continue; }
    if (name_char(c, 1)) {
      while (L->p < L->n && name_char(L->s[L->p], 0)) L->p++;
      if (!emit(L, JT_NAME, p, L->s + p, L->p - p)) return;
      continue;
    }
    size_t k;
    for (k = 0; k < CLF__ARRAY_LEN(g_ops) && !starts(L, p, g_ops[k]); k++) {}
    if (k == CLF__ARRAY_LEN(g_ops)) { lfail(L, p, "unexpected character"); return; }
    const char *op = g_ops[k];
    if (*op == '(' || *op == '[' || *op == '{') depth++;
    if ((*op == ')' || *op == ']' || *op == '}') && depth-- == 0) { lfail(L, p, "unexpected closing bracket"); return; }
    if (!emit(L, JT_OP, p, op, strlen(op))) return;
    L->p += strlen(op);
  }
}

/* A comment from after "{#" and its sign. */
static void lex_comment(lx *L) {
  for (size_t q = L->p; q + 1 < L->n; q++) {
    if (L->s[q] != '#' || L->s[q + 1] != '}') continue;
    int strip = q > L->p && L->s[q - 1] == '-', plus = q > L->p && L->s[q - 1] == '+';
    L->p = q + 2;
    after_end(L, strip, !plus);
    return;
  }
  lfail(L, L->p, "missing end of comment tag");
}

static void lex_root(lx *L) {
  L->line_starting = 1;
  while (L->st == CLF_OK && L->p < L->n) {
    size_t q = L->p;
    while (q + 1 < L->n && !(L->s[q] == '{' && (L->s[q + 1] == '{' || L->s[q + 1] == '%' || L->s[q + 1] == '#'))) q++;
    if (q + 1 >= L->n) { emit_text(L, L->p, L->n, 0, 0); L->p = L->n; break; }
    char kind = L->s[q + 1], sign = q + 2 < L->n && (L->s[q + 2] == '-' || L->s[q + 2] == '+') ? L->s[q + 2] : 0;
    size_t after = q + 2 + (sign != 0);
    emit_text(L, L->p, q, sign, kind);
    if (L->st != CLF_OK) return;
    if (kind == '%' && lex_raw(L, after)) continue;
    if (L->st != CLF_OK) return;
    L->p = after;
    if (kind == '#') { lex_comment(L); continue; }
    if (!emit(L, kind == '%' ? JT_BLOCK_BEGIN : JT_VAR_BEGIN, q, L->s + q, 2)) return;
    lex_tag(L, kind == '%');
  }
}

clf_status clf__j_lex(const char *src, jtok **toks, size_t *n) {
  size_t len = strlen(src);
  char *s = malloc(len + 1);
  if (!s) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory");
  size_t w = 0;
  for (size_t i = 0; i < len; i++) {
    if (src[i] == '\r') {
      s[w++] = '\n';
      if (i + 1 < len && src[i + 1] == '\n') i++;
    } else {
      s[w++] = src[i];
    }
  }
  if (w && s[w - 1] == '\n') w--;
  s[w] = '\0';
  lx L = {.s = s, .n = w, .st = CLF_OK, .cl = 1, .cc = 1};
  lex_root(&L);
  if (L.st == CLF_OK) emit(&L, JT_EOF, L.n, "", 0);
  free(s);
  if (L.st != CLF_OK) {
    clf__j_free_tokens(L.t, L.nt);
    return L.st;
  }
  *toks = L.t;
  *n = L.nt;
  return CLF_OK;
}

void clf__j_free_tokens(jtok *toks, size_t n) {
  for (size_t i = 0; toks && i < n; i++) free(toks[i].s);
  free(toks);
}
