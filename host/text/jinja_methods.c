/* jinja_methods.c - what a template calls on values and by name: the str
 * and dict methods chat templates use (Python's semantics), the tests of
 * `is`, and the globals (range, namespace, dict, raise_exception,
 * strftime_now).  Lists are immutable, as in Jinja's ImmutableSandbox.
 * Case mapping: lower() as Python's str.lower() (tokenizer.c's table),
 * upper() as that table read backwards, with the few lower cases no
 * capital lowers to (ß, ς, µ, ı, ſ).
 */
#include "jinja.h"
#include "jinja_str.h"
#include "tokenizer.h"
#include "unicode_tables.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- string helpers (jinja_str.h) ---- */

jv clf__j_buf_str(jstate *J, jbuf *b) {
  jv r = clf__jv_undef();
  if (b->oom) clf__j_fail(J, NULL, "a string past %zu bytes (or out of memory)", (size_t)CLF__J_MAX_OUTPUT);
  else r = clf__jv_str(J, b->s ? b->s : "", b->n);
  clf__jbuf_free(b);
  return r;
}

uint32_t clf__j_cp(const char *s, size_t n, size_t *i) {
  int32_t c = clf__utf8_next(s, n, i);
  if (c < 0) { (*i)++; return 0xFFFD; }
  return (uint32_t)c;
}

static void put_cp(jbuf *b, uint32_t cp) {
  if (cp < 128) { clf__jbuf_addc(b, (char)cp); return; }
  char t[4];
  clf__jbuf_add(b, t, clf__utf8_put(t, cp));
}

/* Python's str.upper() of one code point, from the lower-case table read
 * backwards: the smallest code point whose lower case is c (K, not the
 * Kelvin sign, for k), the few without one listed; c when none. */
uint32_t clf__j_upper(uint32_t c) {
  if (c < 128) return c >= 'a' && c <= 'z' ? c - 32 : c;
  /* lower cases no capital lowers to (ß is "SS": clf__j_case) */
  static const uint32_t odd[][2] = {{0xB5, 0x39C}, {0x131, 'I'}, {0x17F, 'S'}, {0x3C2, 0x3A3}, {0xDF, 0xDF}};
  for (size_t k = 0; k < CLF__ARRAY_LEN(odd); k++)
    if (odd[k][0] == c) return odd[k][1];
  uint32_t best = c;
  for (size_t k = 0; k < clf__uc_lower_ranges_len / 4; k++) {
    const int32_t *r = clf__uc_lower_ranges + k * 4;
    int64_t u = (int64_t)c - r[2];
    if (r[2] == 0 || u < r[0] || u > r[1] || (u - r[0]) % r[3] != 0) continue;
    if (best == c || (uint32_t)u < best) best = (uint32_t)u;
  }
  return best;
}

void clf__j_put_lower(jbuf *b, uint32_t c) {
  if (c < 128) { clf__jbuf_addc(b, (char)(c >= 'A' && c <= 'Z' ? c + 32 : c)); return; }
  uint32_t o[2];
  int k = clf__uc_lower(c, o);
  for (int i = 0; i < k; i++) put_cp(b, o[i]);
}

int clf__j_is_cased(uint32_t c) { return c < 128 ? ((c | 32) >= 'a' && (c | 32) <= 'z') : clf__uc_class(c) == CLF__UC_LC; }

jv clf__j_case(jstate *J, jv v, int mode) {
  jbuf b = {0};
  const jstr *s = v.u.s;
  if (clf__j_charge(0, 2 * CLF__J_SLOW * s->n)) return clf__jv_undef(); /* a table look-up a code point */
  int prev_cased = 0, first = 1;
  for (size_t i = 0; i < s->n; first = 0) {
    uint32_t c = clf__j_cp(s->s, s->n, &i);
    int up = mode == 'U' || (mode == 'T' && !prev_cased) || (mode == 'C' && first);
    if (up && c == 0xDF) clf__jbuf_adds(&b, mode == 'U' ? "SS" : "Ss"); /* Python's upper / title of ß */
    else if (up) put_cp(&b, clf__j_upper(c));
    else clf__j_put_lower(&b, c);
    prev_cased = clf__j_is_cased(c);
  }
  return clf__j_buf_str(J, &b);
}

/* Python's str.strip family: which 1 left, 2 right, 3 both; chars NULL: whitespace. */
jv clf__j_strip(jstate *J, jv v, const jstr *chars, int which) {
  const jstr *s = v.u.s;
  size_t a = 0, b = s->n;
  for (;;) { /* left */
    if (!(which & 1) || a >= b) break;
    size_t i = a;
    uint32_t c = clf__j_cp(s->s, b, &i);
    if (!(chars ? clf__j_has_cp(chars, c) : clf__uc_isspace(c))) break;
    a = i;
  }
  while ((which & 2) && b > a) {
    size_t st = b - 1;
    while (st > a && ((unsigned char)s->s[st] & 0xC0) == 0x80) st--;
    size_t i = st;
    uint32_t c = clf__j_cp(s->s, b, &i);
    if (!(chars ? clf__j_has_cp(chars, c) : clf__uc_isspace(c))) break;
    b = st;
  }
  return clf__jv_str(J, s->s + a, b - a);
}

int clf__j_has_cp(const jstr *set, uint32_t c) {
  for (size_t i = 0; i < set->n;)
    if (clf__j_cp(set->s, set->n, &i) == c) return 1;
  return 0;
}

/* s with old replaced by new (count < 0: all), as Python's str.replace. */
jv clf__j_replace(jstate *J, const jstr *s, const jstr *old, const jstr *nw, int64_t count) {
  if (clf__j_charge(0, CLF__J_SLOW * s->n)) return clf__jv_undef();
  jbuf b = {0};
  size_t i = 0;
  int64_t done = 0;
  if (!old->n) { /* between every character, as Python */
    for (size_t k = 0; k <= s->n && !b.oom;) {
      if (count < 0 || done < count) { clf__jbuf_add(&b, nw->s, nw->n); done++; }
      if (k == s->n) break;
      size_t j = k + 1;
      while (j < s->n && ((unsigned char)s->s[j] & 0xC0) == 0x80) j++;
      clf__jbuf_add(&b, s->s + k, j - k);
      k = j;
    }
    return clf__j_buf_str(J, &b);
  }
  while (i < s->n && !b.oom) {
    if ((count < 0 || done < count) && i + old->n <= s->n && !memcmp(s->s + i, old->s, old->n)) {
      clf__jbuf_add(&b, nw->s, nw->n);
      i += old->n;
      done++;
    } else {
      clf__jbuf_addc(&b, s->s[i++]);
    }
  }
  return clf__j_buf_str(J, &b);
}

/* Python's str.split(sep, maxsplit). */
static jv split(jstate *J, const jstr *s, const jstr *sep, int64_t maxsplit) {
  if (clf__j_charge(0, CLF__J_SLOW * s->n)) return clf__jv_undef();
  jv l = clf__jv_list(J, 0);
  size_t i = 0;
  int64_t done = 0;
  if (l.t != JV_LIST) return l;
  if (sep) {
    size_t start = 0;
    while (i + sep->n <= s->n) {
      if ((maxsplit < 0 || done < maxsplit) && !memcmp(s->s + i, sep->s, sep->n)) {
        if (clf__jv_push(J, l, clf__jv_str(J, s->s + start, i - start))) return l;
        i += sep->n;
        start = i;
        done++;
      } else {
        i++;
      }
    }
    clf__jv_push(J, l, clf__jv_str(J, s->s + start, s->n - start));
    return l;
  }
  for (;;) {
    size_t k = i;
    while (k < s->n) { size_t j = k; if (!clf__uc_isspace(clf__j_cp(s->s, s->n, &j))) break; k = j; }
    if (k >= s->n) break;
    size_t e = k;
    if (maxsplit >= 0 && done >= maxsplit) {
      size_t end = s->n; /* the rest, trailing whitespace stripped */
      while (end > k) {
        size_t st = end - 1;
        while (st > k && ((unsigned char)s->s[st] & 0xC0) == 0x80) st--;
        size_t j = st;
        if (!clf__uc_isspace(clf__j_cp(s->s, end, &j))) break;
        end = st;
      }
      clf__jv_push(J, l, clf__jv_str(J, s->s + k, end - k));
      break;
    }
    while (e < s->n) { size_t j = e; if (clf__uc_isspace(clf__j_cp(s->s, s->n, &j))) break; e = j; }
    if (clf__jv_push(J, l, clf__jv_str(J, s->s + k, e - k))) return l;
    done++;
    i = e;
  }
  return l;
}

/* ---- methods ---- */

enum { M_STRIP, M_LSTRIP, M_RSTRIP, M_SPLIT, M_STARTSWITH, M_ENDSWITH, M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE,
       M_REPLACE, M_JOIN, M_FIND, M_COUNT, M_FORMAT, M_STR_N,
       M_ITEMS = M_STR_N, M_KEYS, M_VALUES, M_GET };
static const char *const g_str_methods[] = {"strip", "lstrip", "rstrip", "split", "startswith", "endswith", "upper",
                                            "lower", "title", "capitalize", "replace", "join", "find", "count",
                                            "format"};
static const char *const g_dict_methods[] = {"items", "keys", "values", "get"};
/* modifying methods the immutable sandbox refuses */
static const char *const g_unsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear",
                                       "popitem", "setdefault", "update"};

int clf__j_method_id(jv self, const char *name) {
  if (self.t == JV_STR)
    for (size_t i = 0; i < CLF__ARRAY_LEN(g_str_methods); i++)
      if (!strcmp(name, g_str_methods[i])) return (int)i;
  if (self.t == JV_DICT && !self.u.d->ns)
    for (size_t i = 0; i < CLF__ARRAY_LEN(g_dict_methods); i++)
      if (!strcmp(name, g_dict_methods[i])) return M_STR_N + (int)i;
  if (self.t == JV_LIST || (self.t == JV_DICT && !self.u.d->ns))
    for (size_t i = 0; i < CLF__ARRAY_LEN(g_unsafe); i++)
      if (!strcmp(name, g_unsafe[i]) && (self.t == JV_LIST ? i < 8 : i >= 3)) return -2;
  return -1;
}

static int str_arg(jstate *J, const jnode *at, const jargs *a, size_t i, const char *name, const jstr **out, int opt) {
  int given;
  jv v = clf__j_arg(a, i, name, &given);
  *out = NULL;
  if ((!given || v.t == JV_NONE) && opt) return 0;
  if (v.t != JV_STR) return clf__j_fail(J, at, "argument '%s' must be str, not %s", name, clf__jv_typename(v));
  *out = v.u.s;
  return 0;
}

static int int_arg(jstate *J, const jnode *at, const jargs *a, size_t i, const char *name, int64_t dflt, int64_t *out) {
  int given;
  jv v = clf__j_arg(a, i, name, &given);
  *out = dflt;
  if (!given) return 0;
  if (v.t != JV_INT && v.t != JV_BOOL) return clf__j_fail(J, at, "argument '%s' must be int, not %s", name, clf__jv_typename(v));
  *out = v.t == JV_INT ? v.u.i : v.u.b;
  return 0;
}

/* startswith / endswith: a str or a tuple of them */
static jv affix(jstate *J, const jnode *at, jv self, const jargs *a, int end) {
  jv p = clf__j_arg(a, 0, "prefix", NULL);
  size_t n = p.t == JV_LIST ? p.u.l->n : 1;
  for (size_t k = 0; k < n; k++) {
    jv x = p.t == JV_LIST ? p.u.l->v[k] : p;
    if (x.t != JV_STR) { clf__j_fail(J, at, "%s first arg must be str or a tuple of str", end ? "endswith" : "startswith"); return clf__jv_undef(); }
    size_t m = x.u.s->n;
    if (m <= self.u.s->n && !memcmp(self.u.s->s + (end ? self.u.s->n - m : 0), x.u.s->s, m)) return clf__jv_bool(1);
  }
  return clf__jv_bool(0);
}

static jv str_join(jstate *J, const jnode *at, jv sep, jv seq) {
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, seq, &items, &n)) return clf__jv_undef();
  jbuf b = {0};
  for (size_t i = 0; i < n; i++) {
    if (items[i].t != JV_STR) { clf__j_fail(J, at, "sequence item %zu: expected str instance, %s found", i, clf__jv_typename(items[i])); break; }
    if (i) clf__jbuf_add(&b, sep.u.s->s, sep.u.s->n);
    clf__jbuf_add(&b, items[i].u.s->s, items[i].u.s->n);
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  if (clf__j_failed(J)) { clf__jbuf_free(&b); return clf__jv_undef(); }
  return clf__j_buf_str(J, &b);
}

/* Code point index of sub in s, -1 when absent; or the count of its
 * non-overlapping occurrences. */
static int64_t find_or_count(const jstr *s, const jstr *sub, int count) {
  int64_t c = 0;
  clf__j_charge(0, s->n);
  for (size_t i = 0; i + sub->n <= s->n;) {
    if (!memcmp(s->s + i, sub->s, sub->n)) {
      if (!count) return (int64_t)clf__jv_utf8_len(s->s, i);
      c++;
      i += sub->n ? sub->n : 1;
    } else {
      i++;
    }
  }
  return count ? c : -1;
}

/* str.find / str.count (sub[, start[, end]]): start and end are code point
 * indices adjusted as Python's slices are (CPython's ADJUST_INDICES). */
static jv find_in(jstate *J, const jnode *at, const jstr *s, const jstr *sub, const jargs *a, int count) {
  int64_t len = (int64_t)clf__jv_utf8_len(s->s, s->n), idx[2] = {0, len};
  for (size_t k = 1; k <= 2; k++) {
    int given;
    jv v = clf__j_arg(a, k, NULL, &given);
    if (!given || v.t == JV_NONE) continue;
    if (v.t != JV_INT && v.t != JV_BOOL) {
      clf__j_fail(J, at, "slice indices must be integers or None or have an __index__ method");
      return clf__jv_undef();
    }
    idx[k - 1] = v.t == JV_INT ? v.u.i : v.u.b;
  }
  int64_t st = idx[0], en = idx[1], sublen = (int64_t)clf__jv_utf8_len(sub->s, sub->n);
  if (en > len) en = len;
  else if (en < 0 && (en += len) < 0) en = 0;
  if (st < 0 && (st += len) < 0) st = 0;
  if (st > len || en - st < sublen) return clf__jv_int(count ? 0 : -1);
  if (!sub->n) return clf__jv_int(count ? en - st + 1 : st);
  size_t bs = 0, be; /* the bytes of code points st .. en */
  for (int64_t c = 0; c < st; c++) { bs++; while (bs < s->n && ((unsigned char)s->s[bs] & 0xC0) == 0x80) bs++; }
  be = bs;
  for (int64_t c = st; c < en; c++) { be++; while (be < s->n && ((unsigned char)s->s[be] & 0xC0) == 0x80) be++; }
  int64_t found = -1, n = 0;
  for (size_t i = bs; i + sub->n <= be;) {
    if (memcmp(s->s + i, sub->s, sub->n)) { i++; continue; }
    if (!count) { found = st + (int64_t)clf__jv_utf8_len(s->s + bs, i - bs); break; }
    n++;
    i += sub->n;
  }
  clf__j_charge(0, be - bs);
  return clf__jv_int(count ? n : found);
}

/* Python's str.format for replacement fields without a format spec: {},
 * {0}, {name}, with !s / !r; {{ and }} are braces. */
static jv format(jstate *J, const jnode *at, const jstr *f, const jargs *a) {
  if (clf__j_charge(0, CLF__J_SLOW * f->n)) return clf__jv_undef();
  jbuf b = {0};
  size_t auto_i = 0;
  for (size_t i = 0; i < f->n && !clf__j_failed(J);) {
    char c = f->s[i];
    if ((c == '{' || c == '}') && i + 1 < f->n && f->s[i + 1] == c) { clf__jbuf_addc(&b, c); i += 2; continue; }
    if (c == '}') { clf__j_fail(J, at, "Single '}' encountered in format string"); break; }
    if (c != '{') { clf__jbuf_addc(&b, c); i++; continue; }
    const char *end = memchr(f->s + i, '}', f->n - i);
    if (!end) { clf__j_fail(J, at, "Single '{' encountered in format string"); break; }
    char field[128];
    size_t len = (size_t)(end - f->s) - i - 1;
    if (len >= sizeof(field)) { clf__j_fail(J, at, "format field too long"); break; }
    memcpy(field, f->s + i + 1, len);
    field[len] = '\0';
    i = (size_t)(end - f->s) + 1;
    char *conv = strchr(field, '!');
    if (strchr(field, ':') || strchr(field, '.') || strchr(field, '[') || (conv && strcmp(conv, "!s") && strcmp(conv, "!r"))) {
      clf__j_fail(J, at, "str.format with a format spec, conversion or attribute is not supported");
      break;
    }
    int repr = conv && conv[1] == 'r';
    if (conv) *conv = '\0';
    jv v = clf__jv_undef();
    int given = 0;
    if (!field[0]) v = clf__j_arg(a, auto_i++, NULL, &given);
    else if (field[0] >= '0' && field[0] <= '9') v = clf__j_arg(a, (size_t)strtoul(field, NULL, 10), NULL, &given);
    else for (size_t k = 0; k < a->nkw; k++) if (!strcmp(a->kwn[k], field)) { v = a->kw[k]; given = 1; }
    if (!given) { clf__j_fail(J, at, "Replacement index %s out of range for positional args tuple", field[0] ? field : "0"); break; }
    if (repr) clf__jv_write_repr(&b, v);
    else clf__jv_write_str(&b, v);
  }
  if (clf__j_failed(J)) { clf__jbuf_free(&b); return clf__jv_undef(); }
  return clf__j_buf_str(J, &b);
}

static jv dict_view(jstate *J, jv d, int which) {
  jv l = clf__jv_list(J, 0);
  for (size_t i = 0; l.t == JV_LIST && i < d.u.d->n && !clf__j_failed(J); i++) {
    if (which == M_KEYS) clf__jv_push(J, l, clf__jv_ref(d.u.d->k[i]));
    else if (which == M_VALUES) clf__jv_push(J, l, clf__jv_ref(d.u.d->v[i]));
    else {
      jv t = clf__jv_list(J, 1);
      if (t.t != JV_LIST) break;
      clf__jv_push(J, t, clf__jv_ref(d.u.d->k[i]));
      clf__jv_push(J, t, clf__jv_ref(d.u.d->v[i]));
      clf__jv_push(J, l, t);
    }
  }
  return l;
}

/* (long: one case per method) */
jv clf__j_call_method(jstate *J, const jnode *at, int mid, jv self, const jargs *a) {
  const jstr *x = NULL, *y = NULL;
  int64_t n;
  switch (mid) {
  case M_STRIP: case M_LSTRIP: case M_RSTRIP:
    if (str_arg(J, at, a, 0, "chars", &x, 1)) return clf__jv_undef();
    return clf__j_strip(J, self, x, mid == M_STRIP ? 3 : mid == M_LSTRIP ? 1 : 2);
  case M_SPLIT:
    if (str_arg(J, at, a, 0, "sep", &x, 1) || int_arg(J, at, a, 1, "maxsplit", -1, &n)) return clf__jv_undef();
    if (x && !x->n) { clf__j_fail(J, at, "empty separator"); return clf__jv_undef(); }
    return split(J, self.u.s, x, n);
  case M_STARTSWITH: case M_ENDSWITH: return affix(J, at, self, a, mid == M_ENDSWITH);
  case M_UPPER: return clf__j_case(J, self, 'U');
  case M_LOWER: return clf__j_case(J, self, 'L');
  case M_TITLE: return clf__j_case(J, self, 'T');
  case M_CAPITALIZE: return clf__j_case(J, self, 'C');
  case M_REPLACE:
    if (str_arg(J, at, a, 0, "old", &x, 0) || str_arg(J, at, a, 1, "new", &y, 0) || int_arg(J, at, a, 2, "count", -1, &n))
      return clf__jv_undef();
    return clf__j_replace(J, self.u.s, x, y, n);
  case M_JOIN: return str_join(J, at, self, clf__j_arg(a, 0, "iterable", NULL));
  case M_FIND: case M_COUNT:
    if (str_arg(J, at, a, 0, "sub", &x, 0)) return clf__jv_undef();
    return find_in(J, at, self.u.s, x, a, mid == M_COUNT);
  case M_FORMAT: return format(J, at, self.u.s, a);
  case M_ITEMS: case M_KEYS: case M_VALUES: return dict_view(J, self, mid);
  case M_GET: {
    int found, given;
    jv k = clf__j_arg(a, 0, "key", &given);
    jv v = clf__jv_getv(self, k, &found);
    if (found) return clf__jv_ref(v);
    jv d = clf__j_arg(a, 1, "default", &given);
    return given ? clf__jv_ref(d) : clf__jv_none();
  }
  default: clf__j_fail(J, at, "unknown method"); return clf__jv_undef();
  }
}

/* ---- tests ---- */

enum { T_DEFINED, T_UNDEFINED, T_NONE, T_STRING, T_MAPPING, T_ITERABLE, T_SEQUENCE, T_NUMBER, T_INTEGER, T_FLOAT,
       T_BOOLEAN, T_TRUE, T_FALSE, T_ODD, T_EVEN, T_DIVISIBLEBY, T_IN, T_SAMEAS, T_CALLABLE, T_LOWER, T_UPPER,
       T_EQ, T_NE, T_LT, T_LE, T_GT, T_GE };
static const struct { const char *name; int id; } g_tests[] = {
    {"defined", T_DEFINED}, {"undefined", T_UNDEFINED}, {"none", T_NONE}, {"string", T_STRING},
    {"mapping", T_MAPPING}, {"iterable", T_ITERABLE}, {"sequence", T_SEQUENCE}, {"number", T_NUMBER},
    {"integer", T_INTEGER}, {"float", T_FLOAT}, {"boolean", T_BOOLEAN}, {"true", T_TRUE}, {"false", T_FALSE},
    {"odd", T_ODD}, {"even", T_EVEN}, {"divisibleby", T_DIVISIBLEBY}, {"in", T_IN}, {"sameas", T_SAMEAS},
    {"callable", T_CALLABLE}, {"lower", T_LOWER}, {"upper", T_UPPER}, {"eq", T_EQ}, {"equalto", T_EQ},
    {"==", T_EQ}, {"ne", T_NE}, {"!=", T_NE}, {"lt", T_LT}, {"lessthan", T_LT}, {"<", T_LT}, {"le", T_LE},
    {"<=", T_LE}, {"gt", T_GT}, {"greaterthan", T_GT}, {">", T_GT}, {"ge", T_GE}, {">=", T_GE}};

int clf__j_test_id(const char *name) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(g_tests); i++)
    if (!strcmp(name, g_tests[i].name)) return g_tests[i].id;
  return -1;
}

static int int_of(jstate *J, const jnode *at, jv v, int64_t *out) {
  if (v.t == JV_INT || v.t == JV_BOOL) { *out = v.t == JV_INT ? v.u.i : v.u.b; return 0; }
  return clf__j_fail(J, at, "an integer is required, not '%s'", clf__jv_typename(v));
}

static int str_case_test(jv v, int upper) {
  if (v.t != JV_STR) return 0;
  int cased = 0;
  for (size_t i = 0; i < v.u.s->n; i++) {
    char c = v.u.s->s[i];
    if (c >= 'a' && c <= 'z') { if (upper) return 0; cased = 1; }
    if (c >= 'A' && c <= 'Z') { if (!upper) return 0; cased = 1; }
  }
  return cased;
}

/* (long: one case per test) */
int clf__j_apply_test(jstate *J, const jnode *at, int tid, jv v, const jargs *a) {
  jv o = clf__j_arg(a, 0, NULL, NULL);
  int64_t i = 0, k = 0;
  int ok, c;
  switch (tid) {
  case T_DEFINED: return v.t != JV_UNDEF;
  case T_UNDEFINED: return v.t == JV_UNDEF;
  case T_NONE: return v.t == JV_NONE;
  case T_STRING: return v.t == JV_STR;
  case T_MAPPING: return v.t == JV_DICT && !v.u.d->ns;
  case T_ITERABLE: return v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns) || v.t == JV_UNDEF;
  case T_SEQUENCE: return v.t == JV_STR || v.t == JV_LIST || (v.t == JV_DICT && !v.u.d->ns) || v.t == JV_UNDEF;
  case T_NUMBER: return v.t == JV_INT || v.t == JV_FLOAT || v.t == JV_BOOL;
  case T_INTEGER: return v.t == JV_INT;
  case T_FLOAT: return v.t == JV_FLOAT;
  case T_BOOLEAN: return v.t == JV_BOOL;
  case T_TRUE: return v.t == JV_BOOL && v.u.b;
  case T_FALSE: return v.t == JV_BOOL && !v.u.b;
  case T_ODD: case T_EVEN:
    if (int_of(J, at, v, &i)) return -1;
    return (i % 2 != 0) == (tid == T_ODD);
  case T_DIVISIBLEBY:
    if (int_of(J, at, v, &i) || int_of(J, at, o, &k)) return -1;
    if (!k) return clf__j_fail(J, at, "integer modulo by zero");
    return k == -1 || i % k == 0;
  case T_IN: {
    if (o.t == JV_STR) {
      if (v.t != JV_STR) return clf__j_fail(J, at, "'in <string>' requires string as left operand, not %s", clf__jv_typename(v));
      return find_or_count(o.u.s, v.u.s, 0) >= 0;
    }
    if (o.t == JV_LIST) { for (size_t x = 0; x < o.u.l->n; x++) if (clf__jv_equal(o.u.l->v[x], v)) return 1; return 0; }
    if (o.t == JV_DICT) { clf__jv_getv(o, v, &ok); return ok; }
    if (o.t == JV_UNDEF) return 0;
    return clf__j_fail(J, at, "argument of type '%s' is not iterable", clf__jv_typename(o));
  }
  case T_SAMEAS:
    if (v.t != o.t) return 0;
    if (v.t == JV_NONE || v.t == JV_UNDEF) return 1;
    if (v.t == JV_BOOL || v.t == JV_INT) return clf__jv_equal(v, o);
    return v.t == JV_STR ? v.u.s == o.u.s : v.t == JV_LIST ? v.u.l == o.u.l : v.t == JV_DICT ? v.u.d == o.u.d : 0;
  case T_CALLABLE: return v.t == JV_FUNC;
  case T_LOWER: return str_case_test(v, 0);
  case T_UPPER: return str_case_test(v, 1);
  case T_EQ: return clf__jv_equal(v, o);
  case T_NE: return !clf__jv_equal(v, o);
  default:
    c = clf__jv_compare(v, o, &ok);
    if (!ok) return clf__j_fail(J, at, "'%s' not supported between instances of '%s' and '%s'",
                                tid == T_LT ? "<" : tid == T_LE ? "<=" : tid == T_GT ? ">" : ">=", clf__jv_typename(v), clf__jv_typename(o));
    return tid == T_LT ? c < 0 : tid == T_LE ? c <= 0 : tid == T_GT ? c > 0 : c >= 0;
  }
}

/* ---- globals ---- */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME };
static const char *const g_globals[] = {"range", "namespace", "dict", "raise_exception", "strftime_now"};

int clf__j_global_id(const char *name) {
  for (size_t i = 0; i < CLF__ARRAY_LEN(g_globals); i++)
    if (!strcmp(name, g_globals[i])) return (int)i;
  return -1;
}

static jv range(jstate *J, const jnode *at, const jargs *a) {
  int64_t v[3] = {0, 0, 1};
  if (a->npos < 1 || a->npos > 3 || a->nkw) { clf__j_fail(J, at, "range expected 1 to 3 arguments"); return clf__jv_undef(); }
  for (size_t i = 0; i < a->npos; i++)
    if (int_of(J, at, a->pos[i], &v[a->npos == 1 ? 1 : i])) return clf__jv_undef();
  if (!v[2]) { clf__j_fail(J, at, "range() arg 3 must not be zero"); return clf__jv_undef(); }
  double len = v[2] > 0 ? ((double)v[1] - (double)v[0]) / (double)v[2] : ((double)v[0] - (double)v[1]) / -(double)v[2];
  if (len > CLF__J_MAX_RANGE) {
    clf__j_fail(J, at, "Range too big. The sandbox blocks ranges larger than MAX_RANGE (%d).", CLF__J_MAX_RANGE);
    return clf__jv_undef();
  }
  jv l = clf__jv_list(J, 0);
  for (int64_t i = v[0]; l.t == JV_LIST && (v[2] > 0 ? i < v[1] : i > v[1]);) {
    if (clf__jv_push(J, l, clf__jv_int(i)) || __builtin_add_overflow(i, v[2], &i)) break; /* past 64 bits: the end */
  }
  return l;
}

/* time.strftime(format) of the local time, any length: a byte after the
 * format tells an empty result from one that did not fit. */
static jv strftime_now(jstate *J, const jstr *f) {
  if (memchr(f->s, 0, f->n)) { clf__j_fail(J, NULL, "embedded null character"); return clf__jv_undef(); }
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  jbuf fmt = {0};
  clf__jbuf_add(&fmt, f->s, f->n);
  clf__jbuf_addc(&fmt, 'x');
  jv r = clf__jv_undef();
  for (size_t cap = 256; !fmt.oom && cap <= CLF__J_MAX_OUTPUT; cap *= 2) {
    if (clf__j_charge(0, cap)) break;
    char *out = malloc(cap);
    if (!out) { clf__j_oom(J); break; }
    size_t n = strftime(out, cap, fmt.s, &tm);
    if (n) r = clf__jv_str(J, out, n - 1);
    free(out);
    if (n) break;
  }
  if (fmt.oom || (r.t == JV_UNDEF && !clf__j_failed(J))) clf__j_fail(J, NULL, "strftime_now(): the text is too long");
  clf__jbuf_free(&fmt);
  return r;
}

jv clf__j_call_global(jstate *J, const jnode *at, int gid, const jargs *a) {
  jv r;
  switch (gid) {
  case G_RANGE: return range(J, at, a);
  case G_NAMESPACE: case G_DICT:
    r = clf__jv_dict(J);
    if (r.t != JV_DICT) return r;
    r.u.d->ns = gid == G_NAMESPACE;
    for (size_t i = 0; i < a->npos; i++) {
      jv d = a->pos[i];
      if (d.t != JV_DICT) { clf__j_fail(J, at, "%s() takes a mapping as positional argument", g_globals[gid]); return r; }
      for (size_t k = 0; k < d.u.d->n; k++) clf__jv_set(J, r, clf__jv_ref(d.u.d->k[k]), clf__jv_ref(d.u.d->v[k]));
    }
    for (size_t i = 0; i < a->nkw; i++) clf__jv_set(J, r, clf__jv_cstr(J, a->kwn[i]), clf__jv_ref(a->kw[i]));
    return r;
  case G_RAISE: {
    jv m = clf__j_to_str(J, clf__j_arg(a, 0, "message", NULL));
    if (m.t == JV_STR) clf__j_fail(J, at, "%s", m.u.s->s);
    clf__jv_drop(m);
    return clf__jv_undef();
  }
  case G_STRFTIME: {
    jv f = clf__j_arg(a, 0, "format", NULL);
    if (f.t != JV_STR) { clf__j_fail(J, at, "strftime_now() argument must be str"); return clf__jv_undef(); }
    return strftime_now(J, f.u.s);
  }
  default: clf__j_fail(J, at, "unknown global"); return clf__jv_undef();
  }
}
