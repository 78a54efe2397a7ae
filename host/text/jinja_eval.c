/* jinja_eval.c - evaluates a chat template's expressions: names through
 * Jinja's scopes (for loops and macros open one, if does not), Python's
 * operators and comparisons, Jinja's default Undefined (prints '', an
 * attribute of it is an error), attributes, items and slices, calls of
 * macros (call blocks' callers, varargs / kwargs), globals and methods,
 * filters and tests, with *args / **kwargs; and the error and limit
 * bookkeeping of a render.  jinja_exec.c renders the statements.
 */
#include "jinja.h"
#include "jinja_str.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int clf__j_oom(jstate *J) {
  if (J && J->st == CLF_OK) J->st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory");
  return -1;
}

int clf__j_failed(const jstate *J) { return J && J->st != CLF_OK; }

int clf__j_fail(jstate *J, const jnode *at, const char *fmt, ...) {
  if (J->st != CLF_OK) return -1;
  char msg[900];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (at) J->st = clf__fail(NULL, CLF_E_INVALID_ARG, "chat template: %s (at %d:%d)", msg, at->line, at->col);
  else J->st = clf__fail(NULL, CLF_E_INVALID_ARG, "chat template: %s", msg);
  return -1;
}

int clf__j_step(jstate *J, const jnode *at) { return clf__j_steps(J, at, 1); }

int clf__j_steps(jstate *J, const jnode *at, size_t n) {
  if (J->st != CLF_OK) return -1;
  if (at) J->at = at;
  return clf__j_charge(n, 0);
}

/* An Undefined carrying its message (what using it reports). */
static jv undef_msg(jstate *J, const char *fmt, ...) {
  char msg[300];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  jv s = clf__jv_cstr(J, msg);
  jv u = clf__jv_undef();
  if (s.t == JV_STR) u.u.s = s.u.s;
  return u;
}

static int undef_fail(jstate *J, const jnode *at, jv u) {
  return clf__j_fail(J, at, "%s", u.u.s ? u.u.s->s : "undefined value");
}

/* ---- scopes ---- */

jv clf__j_lookup(jstate *J, const char *name) {
  for (int i = J->nfr - 1; i >= 0; i--) {
    jv v = clf__jv_get(J->fr[i].vars, name);
    if (v.t != JV_UNDEF || v.u.s) return clf__jv_ref(v); /* an Undefined set here (a parameter not given) too */
    if (J->fr[i].barrier > 0 && J->fr[i].barrier <= i) i = J->fr[i].barrier; /* a macro: then where it was defined */
  }
  int g = clf__j_global_id(name);
  if (g >= 0) return clf__jv_func(J, JF_GLOBAL, g, clf__jv_none(), NULL);
  return undef_msg(J, "'%s' is undefined", name);
}

int clf__j_push_frame(jstate *J, const jnode *at, int barrier) {
  if (J->nfr == CLF__J_MAX_FRAMES) return clf__j_fail(J, at, "scopes nested too deeply");
  jv d = clf__jv_dict(J);
  if (d.t != JV_DICT) return -1;
  J->fr[J->nfr].vars = d;
  J->fr[J->nfr++].barrier = barrier;
  return 0;
}

void clf__j_pop_frame(jstate *J) { clf__jv_drop(J->fr[--J->nfr].vars); }

int clf__j_assign(jstate *J, const char *name, jv v) {
  jv k = clf__jv_cstr(J, name);
  if (k.t != JV_STR) { clf__jv_drop(v); return -1; }
  return clf__jv_set(J, J->fr[J->nfr - 1].vars, k, v);
}

/* ---- expressions ---- */



static jv fail_v(jstate *J, const jnode *at, const char *msg, const char *a, const char *b) {
  clf__j_fail(J, at, msg, a, b);
  return clf__jv_undef();
}

jv clf__j_to_str(jstate *J, jv v) {
  if (v.t == JV_STR) return clf__jv_ref(v);
  jbuf b = {0};
  jv r = clf__jv_undef();
  if (clf__jv_write_str(&b, v)) clf__j_oom(J);
  else r = clf__jv_str(J, b.s ? b.s : "", b.n);
  clf__jbuf_free(&b);
  return r;
}

jv clf__j_getattr(jstate *J, const jnode *at, jv obj, const char *name) {
  if (obj.t == JV_UNDEF) { undef_fail(J, at, obj); return clf__jv_undef(); }
  if (obj.t == JV_DICT && obj.u.d->ns) {
    jv v = clf__jv_get(obj, name);
    return v.t != JV_UNDEF ? clf__jv_ref(v) : undef_msg(J, "'%s' has no attribute '%s'", clf__jv_typename(obj), name);
  }
  int m = clf__j_method_id(obj, name);
  if (m >= 0) return clf__jv_func(J, JF_METHOD, m, obj, NULL);
  if (m == -2) return undef_msg(J, "access to attribute '%s' of '%s' object is unsafe.", name, clf__jv_typename(obj));
  if (obj.t == JV_DICT) {
    jv v = clf__jv_get(obj, name);
    if (v.t != JV_UNDEF) return clf__jv_ref(v);
  }
  return undef_msg(J, "'%s object' has no attribute '%s'", clf__jv_typename(obj), name);
}

/* Python's index of a sequence of n: i, or n + i when negative; -1 outside. */
static int64_t seq_index(jv key, size_t n) {
  int64_t i = key.t == JV_BOOL ? key.u.b : key.u.i;
  if (i < 0) i += (int64_t)n;
  return i >= 0 && (uint64_t)i < n ? i : -1;
}

/* Byte offset of code point `cp` in s (n bytes); n when past the end. */
static size_t cp_offset(const char *s, size_t n, size_t cp) {
  size_t i = 0;
  for (; i < n && cp; cp--) {
    i++;
    while (i < n && ((unsigned char)s[i] & 0xC0) == 0x80) i++;
  }
  return i;
}

jv clf__j_getitem(jstate *J, const jnode *at, jv obj, jv key) {
  if (obj.t == JV_UNDEF) { undef_fail(J, at, obj); return clf__jv_undef(); }
  if (obj.t == JV_LIST && obj.u.l->tuple == JL_GEN) /* Jinja's getitem: a TypeError gives Undefined */
    return undef_msg(J, "'generator object' has no attribute '%s'", key.t == JV_STR ? key.u.s->s : "[]");
  if (obj.t == JV_DICT) {
    int found;
    jv v = clf__jv_getv(obj, key, &found);
    if (found) return clf__jv_ref(v);
  } else if ((obj.t == JV_LIST || obj.t == JV_STR) && (key.t == JV_INT || key.t == JV_BOOL)) {
    if (obj.t == JV_LIST) {
      int64_t i = seq_index(key, obj.u.l->n);
      if (i >= 0) return clf__jv_ref(obj.u.l->v[i]);
    } else {
      int64_t i = seq_index(key, clf__jv_utf8_len(obj.u.s->s, obj.u.s->n));
      if (i >= 0) {
        size_t a = cp_offset(obj.u.s->s, obj.u.s->n, (size_t)i), b = cp_offset(obj.u.s->s, obj.u.s->n, (size_t)i + 1);
        return clf__jv_str(J, obj.u.s->s + a, b - a);
      }
    }
    return undef_msg(J, "%s object has no element %lld", clf__jv_typename(obj), (long long)key.u.i);
  }
  if (key.t == JV_STR) return clf__j_getattr(J, at, obj, key.u.s->s);
  return undef_msg(J, "'%s object' has no attribute '%s'", clf__jv_typename(obj), clf__jv_typename(key));
}

/* Python's slice indices for a sequence of n. */
static int slice_of(jstate *J, const jnode *x, size_t n, int64_t *start, int64_t *stop, int64_t *step) {
  jv v[3] = {clf__jv_none(), clf__jv_none(), clf__jv_none()};
  const jnode *p[3] = {x->a, x->b, x->c};
  for (int i = 0; i < 3; i++) {
    if (p[i]) v[i] = clf__j_ev(J, p[i]);
    if (J->st != CLF_OK) return -1;
    if (v[i].t != JV_NONE && v[i].t != JV_INT && v[i].t != JV_BOOL) {
      clf__jv_drop(v[i]);
      return clf__j_fail(J, x, "slice indices must be integers or None");
    }
  }
  *step = v[2].t == JV_NONE ? 1 : v[2].t == JV_BOOL ? v[2].u.b : v[2].u.i;
  if (*step == 0) return clf__j_fail(J, x, "slice step cannot be zero");
  int64_t len = (int64_t)n, lo = *step < 0 ? -1 : 0, hi = *step < 0 ? len - 1 : len;
  for (int i = 0; i < 2; i++) {
    int64_t *o = i ? stop : start;
    if (v[i].t == JV_NONE) { *o = (*step < 0) == (i == 0) ? hi : lo; continue; }
    int64_t k = v[i].t == JV_BOOL ? v[i].u.b : v[i].u.i;
    if (k < 0) { k += len; if (k < lo) k = lo; }
    else if (k > hi) k = hi;
    *o = k;
  }
  return 0;
}

static jv ev_slice(jstate *J, const jnode *x, jv obj) {
  if (obj.t == JV_UNDEF) { undef_fail(J, x, obj); return clf__jv_undef(); }
  if ((obj.t != JV_LIST && obj.t != JV_STR) || (obj.t == JV_LIST && obj.u.l->tuple == JL_GEN))
    return undef_msg(J, "'%s object' has no attribute 'slice'", clf__jv_typename(obj)); /* Jinja's getitem */
  size_t n = obj.t == JV_LIST ? obj.u.l->n : clf__jv_utf8_len(obj.u.s->s, obj.u.s->n);
  int64_t a = 0, b = 0, s = 1;
  if (slice_of(J, x->b, n, &a, &b, &s)) return clf__jv_undef();
  if (obj.t == JV_LIST) {
    jv r = clf__jv_list(J, obj.u.l->tuple);
    for (int64_t i = a; r.t == JV_LIST && (s > 0 ? i < b : i > b);) {
      if (clf__jv_push(J, r, clf__jv_ref(obj.u.l->v[i])) || __builtin_add_overflow(i, s, &i)) break;
    }
    return r;
  }
  /* the code points a..b by s, in one walk (forwards, or backwards for s < 0) */
  const char *t = obj.u.s->s;
  size_t len = obj.u.s->n;
  jbuf out = {0};
  if (clf__j_charge(0, CLF__J_SLOW * len)) return clf__jv_undef();
  if (s > 0) {
    for (size_t i = 0, c = 0; i < len && (int64_t)c < b && !out.oom; c++) {
      size_t j = i + 1;
      while (j < len && ((unsigned char)t[j] & 0xC0) == 0x80) j++;
      if ((int64_t)c >= a && ((uint64_t)((int64_t)c - a)) % (uint64_t)s == 0) clf__jbuf_add(&out, t + i, j - i);
      i = j;
    }
  } else {
    uint64_t step = (uint64_t)(-(s + 1)) + 1; /* -s without overflow at INT64_MIN */
    int64_t c = (int64_t)n - 1;
    for (size_t e = len; e > 0 && c > b && !out.oom; c--) {
      size_t st = e - 1;
      while (st > 0 && ((unsigned char)t[st] & 0xC0) == 0x80) st--;
      if (c <= a && (uint64_t)(a - c) % step == 0) clf__jbuf_add(&out, t + st, e - st);
      e = st;
    }
  }
  return clf__j_buf_str(J, &out);
}

static int checked_int(jstate *J, const jnode *x, int ovf, int64_t r, jv *out) {
  if (ovf) return clf__j_fail(J, x, "integer overflow (past 64 bits)");
  *out = clf__jv_int(r);
  return 0;
}

static int is_number(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double num_d(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t num_i(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

static const char *const g_opname[] = {"+", "-", "*", "/", "//", "%", "**"};

/* s repeated k times (str or list). */
static jv repeat(jstate *J, const jnode *x, jv s, int64_t k) {
  if (k < 0) k = 0;
  if (s.t == JV_STR && (!s.u.s->n || !k)) return clf__jv_str(J, "", 0);
  if (s.t == JV_LIST && (!s.u.l->n || !k)) return clf__jv_list(J, s.u.l->tuple);
  if (s.t == JV_STR) {
    if ((uint64_t)k > CLF__J_MAX_OUTPUT / s.u.s->n) return fail_v(J, x, "%s%s", "string too long", "");
    size_t total = s.u.s->n * (size_t)k;
    jbuf b = {0};
    clf__jbuf_add(&b, s.u.s->s, s.u.s->n);
    while (b.n < total && !b.oom) clf__jbuf_add(&b, b.s, b.n < total - b.n ? b.n : total - b.n); /* doubling */
    return clf__j_buf_str(J, &b);
  }
  if (s.u.l->n && (uint64_t)k > 1000000 / s.u.l->n) return fail_v(J, x, "%s%s", "list too long", "");
  jv r = clf__jv_list(J, s.u.l->tuple);
  for (int64_t i = 0; i < k && r.t == JV_LIST; i++)
    for (size_t j = 0; j < s.u.l->n; j++)
      if (clf__jv_push(J, r, clf__jv_ref(s.u.l->v[j]))) return r;
  return r;
}

static jv concat_seq(jstate *J, jv a, jv b) {
  if (a.t == JV_STR) {
    jbuf o = {0};
    clf__jbuf_add(&o, a.u.s->s, a.u.s->n);
    clf__jbuf_add(&o, b.u.s->s, b.u.s->n);
    return clf__j_buf_str(J, &o);
  }
  jv r = clf__jv_list(J, a.u.l->tuple);
  for (size_t i = 0; i < a.u.l->n && r.t == JV_LIST; i++) clf__jv_push(J, r, clf__jv_ref(a.u.l->v[i]));
  for (size_t i = 0; i < b.u.l->n && r.t == JV_LIST; i++) clf__jv_push(J, r, clf__jv_ref(b.u.l->v[i]));
  return r;
}

/* Python's float % and // */
static double py_fmod(double a, double b) {
  double m = fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

/* (long: one case per operator, as Python's number tower has them) */
static jv arith(jstate *J, const jnode *x, int op, jv a, jv b) {
  jv r = clf__jv_undef();
  if (a.t == JV_UNDEF || b.t == JV_UNDEF) { undef_fail(J, x, a.t == JV_UNDEF ? a : b); return r; }
  if (op == JO_ADD && a.t == b.t && (a.t == JV_STR || (a.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && a.u.l->tuple != JL_GEN)))
    return concat_seq(J, a, b);
  int seq_a = a.t == JV_STR || (a.t == JV_LIST && a.u.l->tuple != JL_GEN);
  int seq_b = b.t == JV_STR || (b.t == JV_LIST && b.u.l->tuple != JL_GEN);
  if (op == JO_MUL && seq_a && (b.t == JV_INT || b.t == JV_BOOL)) return repeat(J, x, a, num_i(b));
  if (op == JO_MUL && seq_b && (a.t == JV_INT || a.t == JV_BOOL)) return repeat(J, x, b, num_i(a));
  if (!is_number(a) || !is_number(b)) {
    clf__j_fail(J, x, "unsupported operand type(s) for %s: '%s' and '%s'", g_opname[op], clf__jv_typename(a), clf__jv_typename(b));
    return r;
  }
  int fl = a.t == JV_FLOAT || b.t == JV_FLOAT;
  double fa = num_d(a), fb = num_d(b);
  int64_t ia = num_i(a), ib = num_i(b), ir = 0;
  if ((op == JO_DIV || op == JO_FLOORDIV || op == JO_MOD) && (fl ? fb == 0 : ib == 0)) {
    /* Python's ZeroDivisionError texts */
    static const char *const msg[2][3] = {
        {"division by zero", "integer division or modulo by zero", "integer modulo by zero"},
        {"float division by zero", "float floor division by zero", "float modulo"}};
    clf__j_fail(J, x, "%s", msg[fl][op == JO_DIV ? 0 : op == JO_FLOORDIV ? 1 : 2]);
    return r;
  }
  if (op == JO_POW && fa == 0 && (fl ? fb < 0 : ib < 0)) {
    clf__j_fail(J, x, "0.0 cannot be raised to a negative power");
    return r;
  }
  switch (op) {
  case JO_ADD: if (fl) return clf__jv_float(fa + fb); { int o = __builtin_add_overflow(ia, ib, &ir); checked_int(J, x, o, ir, &r); } return r;
  case JO_SUB: if (fl) return clf__jv_float(fa - fb); { int o = __builtin_sub_overflow(ia, ib, &ir); checked_int(J, x, o, ir, &r); } return r;
  case JO_MUL: if (fl) return clf__jv_float(fa * fb); { int o = __builtin_mul_overflow(ia, ib, &ir); checked_int(J, x, o, ir, &r); } return r;
  case JO_DIV: return clf__jv_float(fa / fb);
  case JO_FLOORDIV:
    if (fl) return clf__jv_float(floor(fa / fb));
    if (ia == INT64_MIN && ib == -1) { checked_int(J, x, 1, 0, &r); return r; }
    ir = ia / ib;
    if ((ia % ib != 0) && ((ia < 0) != (ib < 0))) ir--;
    return clf__jv_int(ir);
  case JO_MOD:
    if (fl) return clf__jv_float(py_fmod(fa, fb));
    if (ib == -1) return clf__jv_int(0);
    ir = ia % ib;
    if (ir != 0 && ((ir < 0) != (ib < 0))) ir += ib;
    return clf__jv_int(ir);
  case JO_POW: {
    if (fl || ib < 0) return clf__jv_float(pow(fa, fb));
    if (ia == 0 || ia == 1) return clf__jv_int(ib == 0 ? 1 : ia);
    if (ia == -1) return clf__jv_int(ib % 2 ? -1 : 1);
    int64_t base = ia; /* by squaring: |ia| >= 2 overflows within 63 squarings */
    ir = 1;
    for (int64_t e = ib; e; e >>= 1) {
      if ((e & 1) && __builtin_mul_overflow(ir, base, &ir)) { checked_int(J, x, 1, 0, &r); return r; }
      if (e > 1 && __builtin_mul_overflow(base, base, &base)) { checked_int(J, x, 1, 0, &r); return r; }
    }
    return clf__jv_int(ir);
  }
  default: return r;
  }
}

jv clf__j_add(jstate *J, const jnode *at, jv a, jv b) { return arith(J, at, JO_ADD, a, b); }

static int contains(jstate *J, const jnode *x, jv hay, jv needle) {
  if (hay.t == JV_STR) {
    if (needle.t != JV_STR)
      return clf__j_fail(J, x, "'in <string>' requires string as left operand, not %s", clf__jv_typename(needle)), -1;
    if (!needle.u.s->n) return 1;
    if (clf__j_charge(0, hay.u.s->n)) return -1;
    for (size_t i = 0; i + needle.u.s->n <= hay.u.s->n; i++)
      if (!memcmp(hay.u.s->s + i, needle.u.s->s, needle.u.s->n)) return 1;
    return 0;
  }
  if (hay.t == JV_LIST) {
    for (size_t i = 0; i < hay.u.l->n; i++)
      if (clf__jv_equal(hay.u.l->v[i], needle)) return 1;
    return 0;
  }
  if (hay.t == JV_DICT) {
    int found;
    clf__jv_getv(hay, needle, &found);
    return found;
  }
  if (hay.t == JV_UNDEF) return 0;
  return clf__j_fail(J, x, "argument of type '%s' is not iterable", clf__jv_typename(hay)), -1;
}

static int cmp_op(jstate *J, const jnode *x, int op, jv a, jv b) {
  if (op == JO_EQ) return clf__jv_equal(a, b);
  if (op == JO_NE) return !clf__jv_equal(a, b);
  if (op == JO_IN || op == JO_NOTIN) {
    int c = contains(J, x, b, a);
    return c < 0 ? -1 : op == JO_IN ? c : !c;
  }
  if (a.t == JV_UNDEF || b.t == JV_UNDEF) return undef_fail(J, x, a.t == JV_UNDEF ? a : b);
  int ok, c = clf__jv_compare(a, b, &ok);
  static const char *const nm[] = {"<", "<=", ">", ">="};
  if (!ok)
    return clf__j_fail(J, x, "'%s' not supported between instances of '%s' and '%s'", nm[op - JO_LT],
                       clf__jv_typename(a), clf__jv_typename(b));
  return op == JO_LT ? c < 0 : op == JO_LE ? c <= 0 : op == JO_GT ? c > 0 : c >= 0;
}

static jv ev_compare(jstate *J, const jnode *x) {
  jv left = clf__j_ev(J, x->a);
  for (size_t i = 0; i < x->nkids && J->st == CLF_OK; i++) {
    jv right = clf__j_ev(J, x->kids[i]->a);
    int r = J->st == CLF_OK ? cmp_op(J, x->kids[i], x->kids[i]->op, left, right) : -1;
    clf__jv_drop(left);
    left = right;
    if (r <= 0) { clf__jv_drop(left); return r < 0 ? clf__jv_undef() : clf__jv_bool(0); }
  }
  clf__jv_drop(left);
  return J->st == CLF_OK ? clf__jv_bool(1) : clf__jv_undef();
}

/* f(..., *x): x's items appended to the positional arguments (Python's
 * iterables; Undefined gives none, as Jinja's Undefined iterates). */
static int unpack_star(jstate *J, const jnode *x, jargs *a) {
  jv v = clf__j_ev(J, x->d), *items;
  size_t n;
  if (J->st != CLF_OK) return -1;
  if (v.t != JV_UNDEF && v.t != JV_LIST && v.t != JV_STR && !(v.t == JV_DICT && !v.u.d->ns)) {
    clf__j_fail(J, x->d, "Value after * must be an iterable, not %s", clf__jv_typename(v));
    clf__jv_drop(v);
    return -1;
  }
  int r = clf__j_iter(J, x->d, v, &items, &n);
  clf__jv_drop(v);
  if (r) return -1;
  jv *p = n ? realloc(a->pos, (a->npos + n) * sizeof(*p)) : a->pos;
  if (!p) {
    for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
    free(items);
    return clf__j_oom(J);
  }
  a->pos = p;
  if (n) memcpy(a->pos + a->npos, items, n * sizeof(*p));
  a->npos += n;
  free(items);
  return 0;
}

/* f(..., **d): d's items appended to the keyword arguments, their names
 * pointing into d's keys (*keep holds d).  A name given twice is Python's
 * error in a call; a filter's or test's **d overrides, as Jinja's does. */
static int unpack_dstar(jstate *J, const jnode *x, jargs *a, jv *keep) {
  const char *who = x->k == JN_CALL ? "jinja2.sandbox.SandboxedEnvironment.call() " : "";
  jv v = clf__j_ev(J, x->e);
  if (J->st != CLF_OK) return -1;
  if (v.t == JV_UNDEF) { undef_fail(J, x->e, v); clf__jv_drop(v); return -1; }
  if (v.t != JV_DICT || v.u.d->ns) {
    clf__j_fail(J, x->e, "%sargument after ** must be a mapping, not %s", who, clf__jv_typename(v));
    clf__jv_drop(v);
    return -1;
  }
  *keep = v;
  size_t n = v.u.d->n;
  jv *kw = realloc(a->kw, (a->nkw + n + 1) * sizeof(*kw));
  if (kw) a->kw = kw;
  const char **kwn = kw ? realloc((void *)a->kwn, (a->nkw + n + 1) * sizeof(*kwn)) : NULL;
  if (!kwn) return clf__j_oom(J);
  a->kwn = kwn;
  size_t given = a->nkw; /* d's keys differ from each other: only these can clash */
  for (size_t i = 0; i < n; i++) {
    if (v.u.d->k[i].t != JV_STR) return clf__j_fail(J, x->e, "keywords must be strings");
    const char *name = v.u.d->k[i].u.s->s;
    size_t k = 0;
    while (k < given && strcmp(a->kwn[k], name)) k++;
    if (k < given && x->k == JN_CALL)
      return clf__j_fail(J, x->e, "%sgot multiple values for keyword argument '%s'", who, name);
    if (k < given) clf__jv_drop(a->kw[k]);
    else a->kwn[k = a->nkw++] = name;
    a->kw[k] = clf__jv_ref(v.u.d->v[i]);
  }
  return 0;
}

/* Evaluates a call's arguments, then caller= (when caller is a macro: a
 * call block's), *args and **kwargs; jargs' arrays malloc'd, *keep the
 * **kwargs dict its names point into (free_args). */
static int eval_args(jstate *J, const jnode *x, jv caller, jargs *a, jv *keep) {
  memset(a, 0, sizeof(*a));
  *keep = clf__jv_undef();
  if (!x->nkids && !x->d && !x->e && caller.t != JV_FUNC) return 0;
  a->pos = calloc(x->nkids + 1, sizeof(jv));
  a->kw = calloc(x->nkids + 1, sizeof(jv));
  a->kwn = calloc(x->nkids + 1, sizeof(char *));
  if (!a->pos || !a->kw || !a->kwn) return clf__j_oom(J);
  for (size_t i = 0; i < x->nkids && J->st == CLF_OK; i++) {
    const jnode *k = x->kids[i];
    if (k->k == JN_KWARG) {
      a->kwn[a->nkw] = k->name;
      a->kw[a->nkw++] = clf__j_ev(J, k->a);
    } else {
      if (a->nkw) return clf__j_fail(J, k, "positional argument follows keyword argument");
      a->pos[a->npos++] = clf__j_ev(J, k);
    }
  }
  if (J->st != CLF_OK) return -1;
  if (caller.t == JV_FUNC) {
    a->kwn[a->nkw] = "caller";
    a->kw[a->nkw++] = clf__jv_ref(caller);
  }
  if (x->d && unpack_star(J, x, a)) return -1;
  if (x->e && unpack_dstar(J, x, a, keep)) return -1;
  return 0;
}

static void free_args(jargs *a, jv keep) {
  for (size_t i = 0; i < a->npos; i++) clf__jv_drop(a->pos[i]);
  for (size_t i = 0; i < a->nkw; i++) clf__jv_drop(a->kw[i]);
  free(a->pos);
  free(a->kw);
  free((void *)a->kwn);
  clf__jv_drop(keep);
}

jv clf__j_arg(const jargs *a, size_t i, const char *name, int *given) {
  if (given) *given = 1;
  if (i < a->npos) return a->pos[i];
  for (size_t k = 0; name && k < a->nkw; k++)
    if (!strcmp(a->kwn[k], name)) return a->kw[k];
  if (given) *given = 0;
  return clf__jv_undef();
}


/* Jinja's Macro.__call__: the parameters from the positional arguments,
 * then by name; caller (a call block's, else an Undefined), kwargs (the
 * keyword arguments left) and varargs (the positional ones left) where the
 * body reads them (m->op), else what is left is an error.  *val[p]: the
 * argument, has[p] set when given (else the default or "not provided"
 * applies); used[k]: keyword argument k taken. */
static int bind_args(jstate *J, const jnode *at, const jnode *m, const char *nm, const jargs *a, jv *val,
                     unsigned char *has, unsigned char *used) {
  size_t np = m->nkids, p = 0;
  int found_caller = 0;
  for (; p < np && p < a->npos; p++) { val[p] = clf__jv_ref(a->pos[p]); has[p] = 1; }
  for (; p < np; p++) {
    if (!strcmp(m->kids[p]->name, "caller")) found_caller = 1;
    for (size_t k = 0; k < a->nkw; k++)
      if (!used[k] && !strcmp(a->kwn[k], m->kids[p]->name)) {
        used[k] = has[p] = 1;
        val[p] = clf__jv_ref(a->kw[k]);
        break;
      }
  }
  for (p = 0; a->npos >= np && p < np; p++) found_caller |= !strcmp(m->kids[p]->name, "caller");
  if ((m->op & JM_CALLER) && !found_caller) {
    size_t k = 0;
    while (k < a->nkw && (used[k] || strcmp(a->kwn[k], "caller"))) k++;
    if (k < a->nkw) used[k] = 1;
    val[np] = k < a->nkw ? clf__jv_ref(a->kw[k]) : undef_msg(J, "No caller defined");
  }
  if (m->op & JM_KWARGS) {
    val[np + 1] = clf__jv_dict(J);
    for (size_t k = 0; k < a->nkw && J->st == CLF_OK; k++)
      if (!used[k]) clf__jv_set(J, val[np + 1], clf__jv_cstr(J, a->kwn[k]), clf__jv_ref(a->kw[k]));
  } else {
    for (size_t k = 0; k < a->nkw; k++)
      if (!used[k] && !strcmp(a->kwn[k], "caller"))
        return clf__j_fail(J, at, "macro %s was invoked with two values for the special caller argument. This is "
                           "most likely a bug.", nm);
    for (size_t k = 0; k < a->nkw; k++)
      if (!used[k]) return clf__j_fail(J, at, "macro %s takes no keyword argument '%s'", nm, a->kwn[k]);
  }
  if (m->op & JM_VARARGS) {
    val[np + 2] = clf__jv_list(J, 1);
    for (size_t i = np; i < a->npos && J->st == CLF_OK; i++) clf__jv_push(J, val[np + 2], clf__jv_ref(a->pos[i]));
  } else if (a->npos > np) {
    return clf__j_fail(J, at, "macro %s takes not more than %zu argument(s)", nm, np);
  }
  return J->st == CLF_OK ? 0 : -1;
}

/* def_depth: how many frames were open where the macro was defined (its
 * closure: a macro defined in a loop sees the loop's variables; a call
 * block's caller sees the block's). */
static jv call_macro(jstate *J, const jnode *at, const jnode *m, int def_depth, const jargs *a) {
  char nm[160];
  snprintf(nm, sizeof(nm), m->name ? "'%s'" : "None", m->name ? m->name : "");
  size_t np = m->nkids;
  jv *val = calloc(np + 3, sizeof(*val)); /* the parameters, then caller, kwargs, varargs */
  unsigned char *used = calloc(a->nkw + np + 1, 1), *has = used ? used + a->nkw : NULL;
  if (!val || !used) { free(val); free(used); clf__j_oom(J); return clf__jv_undef(); }
  static const char *const special[] = {"caller", "kwargs", "varargs"};
  jbuf out = {0};
  if (bind_args(J, at, m, nm, a, val, has, used)) {
  } else if (J->depth >= CLF__J_MAX_DEPTH / 2 || clf__j_push_frame(J, at, def_depth)) {
    clf__j_fail(J, at, "macro calls nested too deeply");
  } else {
    J->depth++;
    int loops = J->loops;
    J->loops = 0;
    for (size_t p = 0; p < np + 3 && J->st == CLF_OK; p++) {
      if (p >= np && !(m->op & (1 << (p - np)))) continue;
      jv v = val[p];
      val[p] = clf__jv_undef();
      if (p < np && !has[p]) {
        if (m->kids[p]->a) v = clf__j_ev(J, m->kids[p]->a);
        else v = undef_msg(J, "parameter '%s' was not provided", m->kids[p]->name);
      }
      if (J->st == CLF_OK) clf__j_assign(J, p < np ? m->kids[p]->name : special[p - np], v);
      else clf__jv_drop(v);
    }
    if (J->st == CLF_OK) clf__j_exec_body(J, m->c, &out);
    J->loops = loops;
    J->ctl = 0;
    J->depth--;
    clf__j_pop_frame(J);
  }
  for (size_t p = 0; p < np + 3; p++) clf__jv_drop(val[p]);
  free(val);
  free(used);
  jv r = J->st == CLF_OK ? clf__jv_str(J, out.s ? out.s : "", out.n) : clf__jv_undef();
  clf__jbuf_free(&out);
  return r;
}

static jv call(jstate *J, const jnode *x, jv f, const jargs *a) {
  if (clf__j_step(J, x)) return clf__jv_undef();
  if (f.t == JV_UNDEF) { undef_fail(J, x, f); return clf__jv_undef(); }
  if (f.t != JV_FUNC) return fail_v(J, x, "'%s' object is not callable%s", clf__jv_typename(f), "");
  switch (f.u.fn->kind) {
  case JF_MACRO: return call_macro(J, x, f.u.fn->macro, f.u.fn->id < J->nfr ? f.u.fn->id : J->nfr, a);
  case JF_GLOBAL: return clf__j_call_global(J, x, f.u.fn->id, a);
  case JF_METHOD: return clf__j_call_method(J, x, f.u.fn->id, f.u.fn->self, a);
  default: { /* loop.cycle(...) */
    if (!a->npos) return fail_v(J, x, "%s%s", "no items for cycling given", "");
    return clf__jv_ref(a->pos[f.u.fn->self.u.i % (int64_t)a->npos]);
  }
  }
}

jv clf__j_ev_filter(jstate *J, const jnode *x, jv in) {
  jargs a = {0};
  jv r = clf__jv_undef(), keep = clf__jv_undef();
  if (J->st == CLF_OK && !eval_args(J, x, clf__jv_undef(), &a, &keep) && clf__j_step(J, x) == 0)
    r = clf__j_apply_filter(J, x, x->fid, in, &a);
  free_args(&a, keep);
  return r;
}

/* A call (x: JN_CALL), with caller= when caller is a macro. */
static jv ev_call(jstate *J, const jnode *x, jv caller) {
  jv f = clf__j_ev(J, x->a), r = clf__jv_undef(), keep = clf__jv_undef();
  jargs args = {0};
  if (J->st == CLF_OK && !eval_args(J, x, caller, &args, &keep)) r = call(J, x, f, &args);
  free_args(&args, keep);
  clf__jv_drop(f);
  return r;
}

jv clf__j_ev_callblock(jstate *J, const jnode *x) {
  jv caller = clf__jv_func(J, JF_MACRO, J->nfr, clf__jv_none(), x->b);
  jv r = caller.t == JV_FUNC ? ev_call(J, x->a, caller) : clf__jv_undef();
  clf__jv_drop(caller);
  return r;
}

static jv ev_collection(jstate *J, const jnode *x) {
  if (x->k == JN_DICT) {
    jv d = clf__jv_dict(J);
    for (size_t i = 0; i + 1 < x->nkids && J->st == CLF_OK; i += 2) {
      jv k = clf__j_ev(J, x->kids[i]), v = clf__j_ev(J, x->kids[i + 1]);
      if (J->st == CLF_OK) clf__jv_set(J, d, k, v);
      else { clf__jv_drop(k); clf__jv_drop(v); }
    }
    return d;
  }
  jv l = clf__jv_list(J, x->k == JN_TUPLE);
  for (size_t i = 0; i < x->nkids && J->st == CLF_OK; i++) {
    jv v = clf__j_ev(J, x->kids[i]);
    if (J->st == CLF_OK) clf__jv_push(J, l, v);
  }
  return l;
}

/* (long: one case per expression node kind) */
jv clf__j_ev(jstate *J, const jnode *x) {
  jv a, b, r = clf__jv_undef();
  if (J->st != CLF_OK) return r;
  if (++J->depth > CLF__J_MAX_DEPTH) { J->depth--; clf__j_fail(J, x, "evaluation nested too deeply"); return r; }
  J->at = x;
  switch (x->k) {
  case JN_LIT: r = clf__jv_ref(x->lit); break;
  case JN_NAME: r = clf__j_lookup(J, x->name); break;
  case JN_LIST: case JN_TUPLE: case JN_DICT: r = ev_collection(J, x); break;
  case JN_ATTR:
    a = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) r = clf__j_getattr(J, x, a, x->name);
    clf__jv_drop(a);
    break;
  case JN_SUBSCRIPT:
    a = clf__j_ev(J, x->a);
    if (J->st == CLF_OK && x->b->k == JN_SLICE) r = ev_slice(J, x, a);
    else if (J->st == CLF_OK) {
      b = clf__j_ev(J, x->b);
      if (J->st == CLF_OK) r = clf__j_getitem(J, x, a, b);
      clf__jv_drop(b);
    }
    clf__jv_drop(a);
    break;
  case JN_CALL: r = ev_call(J, x, clf__jv_undef()); break;
  case JN_FILTER:
    a = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) r = clf__j_ev_filter(J, x, a);
    clf__jv_drop(a);
    break;
  case JN_TEST: {
    a = clf__j_ev(J, x->a);
    jargs args = {0};
    jv keep = clf__jv_undef();
    if (J->st == CLF_OK && !eval_args(J, x, clf__jv_undef(), &args, &keep)) {
      int t = clf__j_apply_test(J, x, x->fid, a, &args);
      if (t >= 0) r = clf__jv_bool(x->op ? !t : t);
    }
    free_args(&args, keep);
    clf__jv_drop(a);
    break;
  }
  case JN_BINOP:
    a = clf__j_ev(J, x->a);
    b = clf__j_ev(J, x->b);
    if (J->st == CLF_OK && x->op == JO_CONCAT) {
      jbuf o = {0};
      J->at = x;
      clf__jv_write_str(&o, a);
      clf__jv_write_str(&o, b);
      r = clf__j_buf_str(J, &o);
    } else if (J->st == CLF_OK) {
      r = arith(J, x, x->op, a, b);
    }
    clf__jv_drop(a);
    clf__jv_drop(b);
    break;
  case JN_NEG: case JN_POS:
    a = clf__j_ev(J, x->a);
    if (J->st != CLF_OK) break;
    if (a.t == JV_UNDEF) undef_fail(J, x, a);
    else if (!is_number(a)) clf__j_fail(J, x, "bad operand type for unary %s: '%s'", x->k == JN_NEG ? "-" : "+", clf__jv_typename(a));
    else if (x->k == JN_POS) r = a.t == JV_BOOL ? clf__jv_int(a.u.b) : clf__jv_ref(a);
    else if (a.t == JV_FLOAT) r = clf__jv_float(-a.u.f);
    else if (num_i(a) == INT64_MIN) clf__j_fail(J, x, "integer overflow (past 64 bits)");
    else r = clf__jv_int(-num_i(a));
    clf__jv_drop(a);
    break;
  case JN_NOT:
    a = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) r = clf__jv_bool(!clf__jv_truthy(a));
    clf__jv_drop(a);
    break;
  case JN_AND: case JN_OR:
    a = clf__j_ev(J, x->a);
    if (J->st != CLF_OK || clf__jv_truthy(a) == (x->k == JN_OR)) { r = a; break; }
    clf__jv_drop(a);
    r = clf__j_ev(J, x->b);
    break;
  case JN_COMPARE: r = ev_compare(J, x); break;
  case JN_COND:
    a = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) {
      if (clf__jv_truthy(a)) r = clf__j_ev(J, x->b);
      else if (x->c) r = clf__j_ev(J, x->c);
      else r = undef_msg(J, "the inline if-expression on line %d evaluated to false and no else section was defined.", x->line);
    }
    clf__jv_drop(a);
    break;
  default: clf__j_fail(J, x, "not an expression"); break;
  }
  J->depth--;
  if (J->st != CLF_OK) { clf__jv_drop(r); r = clf__jv_undef(); }
  return r;
}

