/* jinja_filters.c - the filters of `x | name(args)`, as Jinja 3.1's
 * filters.py defines them, and tojson as transformers overrides it
 * (json.dumps(x, ensure_ascii=False, indent, separators, sort_keys)).
 */
#include "jinja.h"
#include "jinja_str.h"
#include "tokenizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The filters, one row each: X(ID, name), F_ID its number and `name` as a
 * template writes it (`x | name(args)`).  clf__j_filter_id looks a name up
 * here at parse; clf__j_apply_filter runs F_ID's case at render.  A name
 * not here is refused at parse ("unsupported filter"). */
#define J_FILTERS(X) \
  X(TRIM, "trim") X(LENGTH, "length") X(COUNT, "count") X(TOJSON, "tojson") X(FIRST, "first")         \
  X(LAST, "last") X(JOIN, "join") X(DEFAULT, "default") X(D, "d") X(UPPER, "upper") X(LOWER, "lower") \
  X(TITLE, "title") X(CAPITALIZE, "capitalize") X(REPLACE, "replace") X(LIST, "list")                 \
  X(STRING, "string") X(INT, "int") X(FLOAT, "float") X(ABS, "abs") X(ROUND, "round")                 \
  X(INDENT, "indent") X(SAFE, "safe") X(E, "e") X(ESCAPE, "escape") X(UNIQUE, "unique")               \
  X(REVERSE, "reverse") X(SORT, "sort") X(DICTSORT, "dictsort") X(ITEMS, "items")                     \
  X(SELECTATTR, "selectattr") X(REJECTATTR, "rejectattr") X(MAP, "map") X(SELECT, "select")           \
  X(REJECT, "reject") X(SUM, "sum") X(MIN, "min") X(MAX, "max") X(ATTR, "attr")                       \
  X(WORDCOUNT, "wordcount")

#define J_FILTER_ID(id, name) F_##id,
enum { J_FILTERS(J_FILTER_ID) F_N };
#define J_FILTER_NAME(id, name) name,
static const char *const g_filters[F_N] = {J_FILTERS(J_FILTER_NAME)};

int clf__j_filter_id(const char *name) {
  for (int i = 0; i < F_N; i++)
    if (!strcmp(name, g_filters[i])) return i;
  return -1;
}

static jv failv(jstate *J, const jnode *at, const char *msg, const char *a) {
  clf__j_fail(J, at, msg, a);
  return clf__jv_undef();
}

static int want_str(jstate *J, const jnode *at, jv v, const char *what) {
  if (v.t == JV_STR) return 0;
  return clf__j_fail(J, at, "%s expects a string, not %s", what, clf__jv_typename(v));
}

/* Jinja's soft_str: str(v) */
static jv soft(jstate *J, jv v) { return clf__j_to_str(J, v); }

/* Jinja's title filter: the first letter after each run of -, whitespace,
 * (, {, [, < upper, the others lower. */
static jv title(jstate *J, jv v) {
  if (clf__j_charge(0, 2 * CLF__J_SLOW * v.u.s->n)) return clf__jv_undef();
  jbuf b = {0};
  int start = 1;
  for (size_t i = 0; i < v.u.s->n;) {
    uint32_t c = clf__j_cp(v.u.s->s, v.u.s->n, &i);
    int sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || clf__uc_isspace(c);
    char t[4];
    if (sep) { clf__jbuf_add(&b, t, clf__utf8_put(t, c)); start = 1; continue; }
    if (start && c == 0xDF) clf__jbuf_adds(&b, "SS"); /* item[0].upper() */
    else if (start) clf__jbuf_add(&b, t, clf__utf8_put(t, clf__j_upper(c)));
    else clf__j_put_lower(&b, c);
    start = 0;
  }
  return clf__j_buf_str(J, &b);
}

static int is_line_break(uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

/* Jinja 3.1's indent(width, first, blank) over str.splitlines(). */
static jv indent(jstate *J, const jnode *at, jv s, const jargs *a) {
  jv w = clf__j_arg(a, 0, "width", NULL), first = clf__j_arg(a, 1, "first", NULL), blank = clf__j_arg(a, 2, "blank", NULL);
  jbuf ind = {0}, b = {0};
  if (s.t == JV_STR && clf__j_charge(0, CLF__J_SLOW * s.u.s->n)) return clf__jv_undef();
  if (w.t == JV_STR) clf__jbuf_add(&ind, w.u.s->s, w.u.s->n);
  else if (w.t == JV_UNDEF) clf__jbuf_adds(&ind, "    ");
  else if (w.t == JV_INT || w.t == JV_BOOL) for (int64_t i = 0; i < (w.t == JV_INT ? w.u.i : w.u.b) && i < 4096; i++) clf__jbuf_addc(&ind, ' ');
  else { clf__j_fail(J, at, "indent width must be int or str, not %s", clf__jv_typename(w)); return clf__jv_undef(); }
  const char *is = ind.s ? ind.s : "";
  /* the lines of s + "\n" as str.splitlines() cuts them: those of s, and
   * after its last line break one more (empty) unless that break is a
   * lone "\r" the appended "\n" joins */
  const char *p = s.u.s->s;
  size_t n = s.u.s->n, st = 0, line = 0;
  if (clf__jv_truthy(first)) clf__jbuf_add(&b, is, ind.n);
  for (size_t i = 0;;) {
    size_t e = i;
    uint32_t c = 0;
    while (e < n) { size_t j = e; c = clf__j_cp(p, n, &j); if (is_line_break(c)) break; e = j; }
    st = i;
    if (line > 0) {
      clf__jbuf_addc(&b, '\n');
      if (e > st || clf__jv_truthy(blank)) clf__jbuf_add(&b, is, ind.n);
    }
    clf__jbuf_add(&b, p + st, e - st);
    line++;
    if (e >= n) break;
    size_t j = e;
    c = clf__j_cp(p, n, &j);
    if (c == '\r' && j < n && p[j] == '\n') j++;
    if (j >= n && c == '\r' && j == e + 1) break;
    i = j;
  }
  clf__jbuf_free(&ind);
  return clf__j_buf_str(J, &b);
}

/* tojson: transformers' json.dumps(x, ensure_ascii=False, indent=indent,
 * separators=separators, sort_keys=sort_keys); ensure_ascii escapes. */
static jv tojson(jstate *J, const jnode *at, jv v, const jargs *a) {
  jv asc = clf__j_arg(a, 0, "ensure_ascii", NULL), ind = clf__j_arg(a, 1, "indent", NULL);
  jv sep = clf__j_arg(a, 2, "separators", NULL), sk = clf__j_arg(a, 3, "sort_keys", NULL);
  char spaces[256];
  const char *indent = NULL, *is = NULL, *ks = NULL;
  if (v.t == JV_UNDEF) return failv(J, at, "%s", v.u.s ? v.u.s->s : "Object of type Undefined is not JSON serializable");
  if (ind.t == JV_INT) {
    int64_t k = ind.u.i < 0 ? 0 : ind.u.i > 255 ? 255 : ind.u.i;
    memset(spaces, ' ', (size_t)k);
    spaces[k] = '\0';
    indent = spaces;
  } else if (ind.t == JV_STR) {
    indent = ind.u.s->s;
  } else if (ind.t != JV_UNDEF && ind.t != JV_NONE) {
    return failv(J, at, "tojson: indent must be int, str or None, not %s", clf__jv_typename(ind));
  }
  if (sep.t == JV_LIST && sep.u.l->n == 2 && sep.u.l->v[0].t == JV_STR && sep.u.l->v[1].t == JV_STR) {
    is = sep.u.l->v[0].u.s->s;
    ks = sep.u.l->v[1].u.s->s;
  } else if (sep.t != JV_UNDEF && sep.t != JV_NONE) {
    return failv(J, at, "%s", "tojson: separators must be a pair of str");
  }
  jbuf b = {0};
  const char *bad = NULL;
  int r = clf__jv_write_json(&b, v, indent, is, ks, clf__jv_truthy(sk), &bad);
  if (r == -2) { clf__jbuf_free(&b); return failv(J, at, "Object of type %s is not JSON serializable", bad); }
  if (r == 0 && clf__jv_truthy(asc)) { /* ensure_ascii: \\uXXXX, surrogate pairs past the BMP */
    jbuf e = {0};
    for (size_t i = 0; i < b.n;) {
      if ((unsigned char)b.s[i] < 0x80) { clf__jbuf_addc(&e, b.s[i++]); continue; }
      uint32_t c = clf__j_cp(b.s, b.n, &i);
      char t[16];
      if (c >= 0x10000) {
        c -= 0x10000;
        snprintf(t, sizeof(t), "\\u%04x\\u%04x", 0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF));
      } else {
        snprintf(t, sizeof(t), "\\u%04x", c);
      }
      clf__jbuf_adds(&e, t);
    }
    clf__jbuf_free(&b);
    b = e;
  }
  return clf__j_buf_str(J, &b);
}

/* The value at a dotted attribute path ("a.b", "0"), as Jinja's
 * make_attrgetter (getitem first); JV_UNDEF when absent. */
static jv attr_path(jstate *J, const jnode *at, jv v, jv path) {
  if (path.t == JV_INT) return clf__j_getitem(J, at, v, path);
  if (path.t != JV_STR) { clf__j_fail(J, at, "attribute must be a str"); return clf__jv_undef(); }
  jv cur = clf__jv_ref(v);
  const char *p = path.u.s->s;
  while (!clf__j_failed(J)) {
    const char *dot = strchr(p, '.');
    size_t n = dot ? (size_t)(dot - p) : strlen(p);
    jv key;
    int digits = n > 0;
    for (size_t i = 0; i < n; i++) digits &= p[i] >= '0' && p[i] <= '9';
    key = digits && n < 18 ? clf__jv_int(strtoll(p, NULL, 10)) : clf__jv_str(J, p, n);
    jv next = clf__j_getitem(J, at, cur, key);
    clf__jv_drop(key);
    clf__jv_drop(cur);
    cur = next;
    if (!dot) break;
    p = dot + 1;
  }
  return cur;
}

static jv items_list(jstate *J, const jnode *at, jv v) {
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  jv l = clf__jv_list(J, 0);
  for (size_t i = 0; i < n; i++) {
    if (l.t == JV_LIST) clf__jv_push(J, l, items[i]);
    else clf__jv_drop(items[i]);
  }
  free(items);
  return l;
}

/* For sort, unique, min, max, dictsort: the key a value is compared by. */
static jv sort_key(jstate *J, const jnode *at, jv v, jv attribute, int case_sensitive) {
  jv k = attribute.t != JV_UNDEF && attribute.t != JV_NONE ? attr_path(J, at, v, attribute) : clf__jv_ref(v);
  if (!case_sensitive && k.t == JV_STR) {
    jv l = clf__j_case(J, k, 'L');
    clf__jv_drop(k);
    return l;
  }
  return k;
}

typedef struct skey { jv key, val; } skey;

/* Stable merge sort of n entries by key; -1 (an error recorded) when two
 * keys cannot be ordered. */
static int msort(jstate *J, const jnode *at, skey *e, skey *tmp, size_t n, int reverse) {
  if (n < 2) return 0;
  size_t h = n / 2;
  if (msort(J, at, e, tmp, h, reverse) || msort(J, at, e + h, tmp, n - h, reverse)) return -1;
  size_t i = 0, j = h, w = 0;
  while (i < h && j < n) {
    int ok, c = clf__jv_compare(e[i].key, e[j].key, &ok);
    if (!ok) return clf__j_fail(J, at, "'<' not supported between instances of '%s' and '%s'", clf__jv_typename(e[j].key), clf__jv_typename(e[i].key));
    if (reverse ? c < 0 : c > 0) tmp[w++] = e[j++];
    else tmp[w++] = e[i++];
  }
  while (i < h) tmp[w++] = e[i++];
  while (j < n) tmp[w++] = e[j++];
  memcpy(e, tmp, n * sizeof(*e));
  return 0;
}

/* sort / dictsort / min / max / unique share this: the items of v with
 * their keys. mode 's' sort, 'd' dictsort, 'm' min, 'M' max, 'u' unique. */
static jv sorted(jstate *J, const jnode *at, jv v, const jargs *a, int mode) {
  int rev = 0, cs = 0;
  jv attribute = clf__jv_undef();
  if (mode == 's') { rev = clf__jv_truthy(clf__j_arg(a, 0, "reverse", NULL)); cs = clf__jv_truthy(clf__j_arg(a, 1, "case_sensitive", NULL)); attribute = clf__j_arg(a, 2, "attribute", NULL); }
  else if (mode == 'd') { cs = clf__jv_truthy(clf__j_arg(a, 0, "case_sensitive", NULL)); rev = clf__jv_truthy(clf__j_arg(a, 2, "reverse", NULL)); }
  else {
    cs = clf__jv_truthy(clf__j_arg(a, 0, "case_sensitive", NULL));
    attribute = clf__j_arg(a, 1, "attribute", NULL);
  }
  jv by = mode == 'd' ? clf__j_arg(a, 1, "by", NULL) : clf__jv_undef();
  int by_value = by.t == JV_STR && !strcmp(by.u.s->s, "value");
  if (mode == 'd' && v.t != JV_DICT) return failv(J, at, "%s", "You can only sort by either \"key\" or \"value\"");
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  skey *e = calloc(n ? n : 1, sizeof(*e)), *tmp = calloc(n ? n : 1, sizeof(*tmp));
  jv r = clf__jv_undef();
  if (!e || !tmp) { clf__j_fail(J, at, "out of memory"); goto done; }
  for (size_t i = 0; i < n && !clf__j_failed(J); i++) {
    if (mode == 'd') {
      jv t = clf__jv_list(J, 1);
      if (t.t != JV_LIST) break;
      clf__jv_push(J, t, clf__jv_ref(items[i]));
      clf__jv_push(J, t, clf__jv_ref(v.u.d->v[i]));
      e[i].val = t;
      e[i].key = sort_key(J, at, by_value ? v.u.d->v[i] : items[i], clf__jv_undef(), cs);
    } else {
      e[i].val = clf__jv_ref(items[i]);
      e[i].key = sort_key(J, at, items[i], attribute, cs);
    }
  }
  if (clf__j_failed(J)) goto done;
  if (mode == 'u') {
    r = clf__jv_list(J, JL_GEN);
    for (size_t i = 0; i < n && r.t == JV_LIST && !clf__j_steps(J, at, i + 1); i++) {
      size_t k; /* quadratic: each comparison costs a step */
      for (k = 0; k < i && !clf__jv_equal(e[k].key, e[i].key); k++) {}
      if (k == i) clf__jv_push(J, r, clf__jv_ref(e[i].val));
    }
    goto done;
  }
  if (msort(J, at, e, tmp, n, rev)) goto done;
  if (mode == 'm' || mode == 'M') {
    if (n) r = clf__jv_ref(e[mode == 'm' ? 0 : n - 1].val);
    else r = clf__jv_undef();
    if (mode == 'M' && n) { /* max keeps the first of equal maxima, as Python's max */
      size_t k = n - 1;
      while (k > 0 && clf__jv_equal(e[k - 1].key, e[n - 1].key)) k--;
      clf__jv_drop(r);
      r = clf__jv_ref(e[k].val);
    }
    goto done;
  }
  r = clf__jv_list(J, 0);
  for (size_t i = 0; i < n && r.t == JV_LIST; i++) clf__jv_push(J, r, clf__jv_ref(e[i].val));
done:
  for (size_t i = 0; i < n; i++) {
    clf__jv_drop(items[i]);
    if (e) { clf__jv_drop(e[i].key); clf__jv_drop(e[i].val); }
  }
  free(items);
  free(e);
  free(tmp);
  if (clf__j_failed(J)) { clf__jv_drop(r); r = clf__jv_undef(); }
  return r;
}

/* select / reject / selectattr / rejectattr: the test named by the
 * first argument after the attribute (none: truthiness). */
static jv select(jstate *J, const jnode *at, jv v, const jargs *a, int attr, int keep) {
  size_t t0 = attr ? 1 : 0;
  if (!clf__jv_truthy(v)) return clf__jv_list(J, JL_GEN); /* Jinja's `if value:` before anything else */
  jv name = clf__j_arg(a, t0, NULL, NULL);
  int tid = -1;
  if (name.t == JV_STR && (tid = clf__j_test_id(name.u.s->s)) < 0) return failv(J, at, "No test named '%s'.", name.u.s->s);
  if (name.t != JV_STR && name.t != JV_UNDEF) return failv(J, at, "%s", "a test name must be a str");
  if (attr && a->npos < 1) return failv(J, at, "%s", "selectattr / rejectattr need an attribute");
  jargs rest = {a->npos > t0 + 1 ? a->pos + t0 + 1 : NULL, a->npos > t0 + 1 ? a->npos - t0 - 1 : 0, NULL, NULL, 0};
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  jv r = clf__jv_list(J, JL_GEN);
  for (size_t i = 0; i < n && !clf__j_failed(J); i++) {
    jv x = attr ? attr_path(J, at, items[i], a->pos[0]) : clf__jv_ref(items[i]);
    int t = clf__j_failed(J) ? -1 : tid >= 0 ? clf__j_apply_test(J, at, tid, x, &rest) : clf__jv_truthy(x);
    clf__jv_drop(x);
    if (t >= 0 && t == keep && r.t == JV_LIST) clf__jv_push(J, r, clf__jv_ref(items[i]));
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  if (clf__j_failed(J)) { clf__jv_drop(r); return clf__jv_undef(); }
  return r;
}

/* map(attribute=..., default=...) or map('filter', args...) */
static jv map(jstate *J, const jnode *at, jv v, const jargs *a) {
  int given;
  if (!clf__jv_truthy(v)) return clf__jv_list(J, JL_GEN); /* Jinja's `if value:` before anything else */
  jv attribute = clf__j_arg(a, a->npos, "attribute", &given), dflt = clf__j_arg(a, a->npos, "default", NULL);
  int fid = -1;
  if (!given) {
    jv name = clf__j_arg(a, 0, NULL, NULL);
    if (name.t != JV_STR) return failv(J, at, "%s", "map requires a filter name or attribute=");
    if ((fid = clf__j_filter_id(name.u.s->s)) < 0) return failv(J, at, "No filter named '%s'.", name.u.s->s);
  }
  jargs rest = {a->npos > 1 ? a->pos + 1 : NULL, a->npos > 1 ? a->npos - 1 : 0, a->kw, a->kwn, given ? 0 : a->nkw};
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  jv r = clf__jv_list(J, JL_GEN);
  for (size_t i = 0; i < n && !clf__j_failed(J); i++) {
    jv x;
    if (fid >= 0) x = clf__j_apply_filter(J, at, fid, items[i], &rest);
    else {
      x = attr_path(J, at, items[i], attribute);
      if (x.t == JV_UNDEF && dflt.t != JV_UNDEF) { clf__jv_drop(x); x = clf__jv_ref(dflt); }
    }
    if (!clf__j_failed(J) && r.t == JV_LIST) clf__jv_push(J, r, x);
    else clf__jv_drop(x);
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  if (clf__j_failed(J)) { clf__jv_drop(r); return clf__jv_undef(); }
  return r;
}

static jv sum(jstate *J, const jnode *at, jv v, const jargs *a);

static jv length(jstate *J, const jnode *at, jv v) {
  switch (v.t) {
  case JV_UNDEF: return clf__jv_int(0);
  case JV_STR: return clf__jv_int((int64_t)clf__jv_utf8_len(v.u.s->s, v.u.s->n));
  case JV_LIST: if (v.u.l->tuple != JL_GEN) return clf__jv_int((int64_t)v.u.l->n); /* fall through */
  case JV_DICT: if (v.t == JV_DICT && !v.u.d->ns) return clf__jv_int((int64_t)v.u.d->n); /* fall through */
  default: return failv(J, at, "object of type '%s' has no len()", clf__jv_typename(v));
  }
}

static jv first_last(jstate *J, const jnode *at, jv v, int last) {
  if (last && v.t == JV_LIST && v.u.l->tuple == JL_GEN) return failv(J, at, "%s", "'generator' object is not reversible");
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  jv r = clf__jv_undef();
  if (n) r = clf__jv_ref(items[last ? n - 1 : 0]);
  else {
    jv m = clf__jv_cstr(J, last ? "No last item, sequence was empty." : "No first item, sequence was empty.");
    if (m.t == JV_STR) r.u.s = m.u.s;
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  return r;
}

static jv join(jstate *J, const jnode *at, jv v, const jargs *a) {
  jv d = clf__j_arg(a, 0, "d", NULL), attribute = clf__j_arg(a, 1, "attribute", NULL);
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) return clf__jv_undef();
  /* each item read is a step, as a loop's iteration is: a list of 100000
   * ints joined again and again was stopped only by the bytes budget,
   * after 0.8 s of CPU here; the steps budget stops it after 10 joins,
   * in 0.04 s */
  clf__j_charge(n, 0);
  jbuf b = {0};
  for (size_t i = 0; i < n && !clf__j_failed(J); i++) {
    if (i && d.t != JV_UNDEF) clf__jv_write_str(&b, d);
    jv x = attribute.t != JV_UNDEF ? attr_path(J, at, items[i], attribute) : clf__jv_ref(items[i]);
    clf__jv_write_str(&b, x);
    clf__jv_drop(x);
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  if (clf__j_failed(J)) { clf__jbuf_free(&b); return clf__jv_undef(); }
  return clf__j_buf_str(J, &b);
}

/* int(value, default=0, base=10) and float(value, default=0.0) */
static jv to_number(jstate *J, jv v, const jargs *a, int as_float) {
  int given;
  jv dflt = clf__j_arg(a, 0, "default", &given);
  jv d = given ? clf__jv_ref(dflt) : as_float ? clf__jv_float(0) : clf__jv_int(0);
  double f;
  if (v.t == JV_INT || v.t == JV_BOOL) { clf__jv_drop(d); int64_t i = v.t == JV_INT ? v.u.i : v.u.b; return as_float ? clf__jv_float((double)i) : clf__jv_int(i); }
  if (v.t == JV_FLOAT) {
    if (as_float) { clf__jv_drop(d); return clf__jv_ref(v); }
    if (!isfinite(v.u.f) || fabs(v.u.f) >= 9.2e18) return d;
    clf__jv_drop(d);
    return clf__jv_int((int64_t)v.u.f);
  }
  if (v.t != JV_STR) return d;
  jv s = clf__j_strip(J, v, NULL, 3);
  if (s.t != JV_STR) { clf__jv_drop(d); return s; }
  char *end;
  const char *p = s.u.s->s;
  int ok = *p != '\0';
  if (!as_float) {
    long long i = strtoll(p, &end, 10);
    if (ok && *end == '\0') { clf__jv_drop(s); clf__jv_drop(d); return clf__jv_int(i); }
  }
  f = strtod(p, &end);
  ok = ok && *end == '\0' && (p[0] != '0' || p[1] != 'x') && !(p[0] && (p[1] == 'x' || p[1] == 'X'));
  clf__jv_drop(s);
  if (!ok) return d;
  clf__jv_drop(d);
  if (as_float) return clf__jv_float(f);
  return isfinite(f) && fabs(f) < 9.2e18 ? clf__jv_int((int64_t)f) : clf__jv_int(0);
}

/* Jinja's round: Python's round(value, precision) for "common" (an int
 * stays an int; precision past a double's digits leaves the value, far
 * below it gives 0), math.ceil / math.floor(value * 10**p) / 10**p else. */
static jv round_f(jstate *J, const jnode *at, jv v, const jargs *a) {
  jv p = clf__j_arg(a, 0, "precision", NULL), m = clf__j_arg(a, 1, "method", NULL);
  int64_t prec = p.t == JV_INT ? p.u.i : p.t == JV_BOOL ? p.u.b : 0;
  if (v.t != JV_INT && v.t != JV_FLOAT && v.t != JV_BOOL) return failv(J, at, "round expects a number, not %s", clf__jv_typename(v));
  int common = m.t != JV_STR || !strcmp(m.u.s->s, "common");
  if (!common && strcmp(m.u.s->s, "ceil") && strcmp(m.u.s->s, "floor"))
    return failv(J, at, "%s", "method must be common, ceil or floor");
  double x = v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b;
  if (common && v.t != JV_FLOAT) { /* round(int, ndigits) */
    int64_t i = v.t == JV_INT ? v.u.i : v.u.b;
    if (prec >= 0) return clf__jv_int(i);
    if (prec < -18) return clf__jv_int(0);
    int64_t q = 1;
    for (int64_t k = 0; k < -prec; k++) q *= 10;
    int64_t d = i / q, r = i % q, out; /* to the nearest multiple of q, ties to the even one */
    if (r < 0) { r += q; d--; }
    if (r > q - r || (r == q - r && (d & 1))) d++;
    if (__builtin_mul_overflow(d, q, &out)) return failv(J, at, "%s", "integer overflow (past 64 bits)");
    return clf__jv_int(out);
  }
  if (common) {
    if (!isfinite(x) || prec > 323) return clf__jv_float(x); /* CPython's NDIGITS_MAX */
    if (prec < -308) return clf__jv_float(0.0 * x);        /* NDIGITS_MIN */
    if (prec >= 0) { char t[400]; snprintf(t, sizeof(t), "%.*f", (int)prec, x); return clf__jv_float(strtod(t, NULL)); }
    double s = pow(10, (double)-prec), y = x / s, r = nearbyint(y); /* (round half to even) */
    return clf__jv_float(r * s);
  }
  if (prec > 308) return failv(J, at, "%s", "int too large to convert to float"); /* 10**prec as a float */
  double s = pow(10, (double)prec), y = x * s;
  if (isnan(y)) return failv(J, at, "%s", "cannot convert float NaN to integer");
  if (isinf(y)) return failv(J, at, "%s", "cannot convert float infinity to integer");
  return clf__jv_float((!strcmp(m.u.s->s, "ceil") ? ceil(y) : floor(y)) / s);
}

static jv escape(jstate *J, jv v) {
  jv s = soft(J, v);
  if (s.t != JV_STR) return s;
  if (clf__j_charge(0, CLF__J_SLOW * s.u.s->n)) { clf__jv_drop(s); return clf__jv_undef(); }
  jbuf b = {0};
  for (size_t i = 0; i < s.u.s->n; i++) {
    char c = s.u.s->s[i];
    if (c == '&') clf__jbuf_adds(&b, "&amp;");
    else if (c == '<') clf__jbuf_adds(&b, "&lt;");
    else if (c == '>') clf__jbuf_adds(&b, "&gt;");
    else if (c == '"') clf__jbuf_adds(&b, "&#34;");
    else if (c == '\'') clf__jbuf_adds(&b, "&#39;");
    else clf__jbuf_addc(&b, c);
  }
  clf__jv_drop(s);
  return clf__j_buf_str(J, &b);
}

static jv reverse(jstate *J, const jnode *at, jv v) {
  if (v.t == JV_STR) {
    jbuf b = {0};
    for (size_t e = v.u.s->n; e > 0;) {
      size_t st = e - 1;
      while (st > 0 && ((unsigned char)v.u.s->s[st] & 0xC0) == 0x80) st--;
      clf__jbuf_add(&b, v.u.s->s + st, e - st);
      e = st;
    }
    return clf__j_buf_str(J, &b);
  }
  jv l = items_list(J, at, v);
  if (l.t == JV_LIST) l.u.l->tuple = JL_GEN; /* reversed(): an iterator */
  if (l.t == JV_LIST)
    for (size_t i = 0, j = l.u.l->n; i + 1 < j; i++, j--) { jv t = l.u.l->v[i]; l.u.l->v[i] = l.u.l->v[j - 1]; l.u.l->v[j - 1] = t; }
  return l;
}

static jv str_filter(jstate *J, const jnode *at, int fid, jv v, const jargs *a) {
  jv s = soft(J, v), r = clf__jv_undef();
  const char *what = g_filters[fid];
  if (s.t != JV_STR) return s;
  if (fid == F_TRIM) {
    jv c = clf__j_arg(a, 0, "chars", NULL);
    if (c.t != JV_UNDEF && c.t != JV_NONE && !want_str(J, at, c, "trim")) r = clf__j_strip(J, s, c.u.s, 3);
    else if (c.t == JV_UNDEF || c.t == JV_NONE) r = clf__j_strip(J, s, NULL, 3);
  } else if (fid == F_UPPER) r = clf__j_case(J, s, 'U');
  else if (fid == F_LOWER) r = clf__j_case(J, s, 'L');
  else if (fid == F_TITLE) r = title(J, s);
  else if (fid == F_CAPITALIZE) r = clf__j_case(J, s, 'C');
  else if (fid == F_INDENT) r = indent(J, at, s, a);
  else if (fid == F_WORDCOUNT) {
    int64_t words = 0, in = 0;
    if (clf__j_charge(0, CLF__J_SLOW * s.u.s->n)) { clf__jv_drop(s); return clf__jv_undef(); }
    for (size_t i = 0; i < s.u.s->n;) {
      uint32_t c = clf__j_cp(s.u.s->s, s.u.s->n, &i);
      int w = c == '_' || (c < 128 ? ((c | 32) >= 'a' && (c | 32) <= 'z') || (c >= '0' && c <= '9') : !clf__uc_isspace(c) && clf__uc_class(c) != CLF__UC_P);
      words += w && !in;
      in = w;
    }
    r = clf__jv_int(words);
  } else if (fid == F_REPLACE) {
    jv o = clf__j_arg(a, 0, "old", NULL), nw = clf__j_arg(a, 1, "new", NULL), c = clf__j_arg(a, 2, "count", NULL);
    jv os = soft(J, o), ns = soft(J, nw);
    if (os.t == JV_STR && ns.t == JV_STR) r = clf__j_replace(J, s.u.s, os.u.s, ns.u.s, c.t == JV_INT ? c.u.i : -1);
    clf__jv_drop(os);
    clf__jv_drop(ns);
  } else {
    clf__j_fail(J, at, "filter %s", what);
  }
  clf__jv_drop(s);
  return r;
}

/* (long: one case per filter) */
jv clf__j_apply_filter(jstate *J, const jnode *at, int fid, jv v, const jargs *a) {
  int given;
  switch (fid) {
  case F_TRIM: case F_UPPER: case F_LOWER: case F_TITLE: case F_CAPITALIZE: case F_INDENT: case F_REPLACE:
  case F_WORDCOUNT:
    return str_filter(J, at, fid, v, a);
  case F_LENGTH: case F_COUNT: return length(J, at, v);
  case F_TOJSON: return tojson(J, at, v, a);
  case F_FIRST: case F_LAST: return first_last(J, at, v, fid == F_LAST);
  case F_JOIN: return join(J, at, v, a);
  case F_DEFAULT: case F_D: {
    jv d = clf__j_arg(a, 0, "default_value", &given);
    int boolean = clf__jv_truthy(clf__j_arg(a, 1, "boolean", NULL));
    if (v.t == JV_UNDEF || (boolean && !clf__jv_truthy(v))) return given ? clf__jv_ref(d) : clf__jv_cstr(J, "");
    return clf__jv_ref(v);
  }
  case F_LIST: return v.t == JV_LIST && !v.u.l->tuple ? clf__jv_ref(v) : items_list(J, at, v);
  case F_STRING: return soft(J, v);
  case F_INT: return to_number(J, v, a, 0);
  case F_FLOAT: return to_number(J, v, a, 1);
  case F_ABS:
    if (v.t == JV_INT) return v.u.i == INT64_MIN ? failv(J, at, "%s", "integer overflow") : clf__jv_int(v.u.i < 0 ? -v.u.i : v.u.i);
    if (v.t == JV_BOOL) return clf__jv_int(v.u.b);
    if (v.t == JV_FLOAT) return clf__jv_float(fabs(v.u.f));
    return failv(J, at, "bad operand type for abs(): '%s'", clf__jv_typename(v));
  case F_ROUND: return round_f(J, at, v, a);
  case F_SAFE: return clf__jv_ref(v);
  case F_E: case F_ESCAPE: return escape(J, v);
  case F_UNIQUE: return sorted(J, at, v, a, 'u');
  case F_REVERSE: return reverse(J, at, v);
  case F_SORT: return sorted(J, at, v, a, 's');
  case F_DICTSORT: return sorted(J, at, v, a, 'd');
  case F_MIN: return sorted(J, at, v, a, 'm');
  case F_MAX: return sorted(J, at, v, a, 'M');
  case F_ITEMS: {
    if (v.t == JV_UNDEF) return clf__jv_list(J, JL_GEN);
    if (v.t != JV_DICT) return failv(J, at, "Can only get item pairs from a mapping, not %s", clf__jv_typename(v));
    jv r = clf__j_call_method(J, at, clf__j_method_id(v, "items"), v, a);
    if (r.t == JV_LIST) r.u.l->tuple = JL_GEN;
    return r;
  }
  case F_SELECTATTR: case F_REJECTATTR: return select(J, at, v, a, 1, fid == F_SELECTATTR);
  case F_SELECT: case F_REJECT: return select(J, at, v, a, 0, fid == F_SELECT);
  case F_MAP: return map(J, at, v, a);
  case F_SUM: return sum(J, at, v, a);
  case F_ATTR: {
    jv n = clf__j_arg(a, 0, "name", NULL);
    if (n.t != JV_STR) return failv(J, at, "%s", "attr expects a str name");
    return clf__j_getattr(J, at, v, n.u.s->s);
  }
  default: return failv(J, at, "%s", "unknown filter");
  }
}

/* Defined by the evaluator for arithmetic. */
jv clf__j_add(jstate *J, const jnode *at, jv a, jv b);

static jv sum(jstate *J, const jnode *at, jv v, const jargs *a) {
  jv attribute = clf__j_arg(a, 0, "attribute", NULL);
  int given;
  jv start = clf__j_arg(a, 1, "start", &given);
  jv acc = given ? clf__jv_ref(start) : clf__jv_int(0);
  jv *items;
  size_t n;
  if (clf__j_iter(J, at, v, &items, &n)) { clf__jv_drop(acc); return clf__jv_undef(); }
  for (size_t i = 0; i < n && !clf__j_failed(J); i++) {
    jv x = attribute.t != JV_UNDEF && attribute.t != JV_NONE ? attr_path(J, at, items[i], attribute)
                                                               : clf__jv_ref(items[i]);
    jv y = clf__j_failed(J) ? clf__jv_undef() : clf__j_add(J, at, acc, x);
    clf__jv_drop(x);
    clf__jv_drop(acc);
    acc = y;
  }
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
  if (clf__j_failed(J)) { clf__jv_drop(acc); return clf__jv_undef(); }
  return acc;
}
