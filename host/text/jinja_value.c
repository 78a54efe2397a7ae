/* jinja_value.c - the values templates compute with, as Python has them:
 * reference-counted strings, lists (tuples) and insertion-ordered dicts;
 * equality and ordering, str() and repr(), json.dumps, and values from a
 * JSON context.  Every value made in a render is charged to its budget
 * (clf__j_cur): its bytes as work, its memory while it is alive; the
 * containers a render makes are kept in its registry, so that those held
 * only by reference cycles are freed when it ends.
 */
#include "jinja.h"
#include "jinja_str.h"
#include "tokenizer.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Thread_local jstate *clf__j_cur;

/* ---- the budget ---- */

static int limit(jstate *J, const char *what, uint64_t max, const char *unit) {
  if (J->st != CLF_OK) return -1;
  const jnode *at = J->at;
  char pos[40] = "";
  if (at) snprintf(pos, sizeof(pos), " at %d:%d", at->line, at->col);
  J->st = clf__fail(NULL, CLF_E_LIMIT,
                    "chat template: the render used up its %s budget (%llu %s)%s; "
                    "clf_chat_template_set_budget (--template-budget) raises it",
                    what, (unsigned long long)max, unit, pos);
  return -1;
}

int clf__j_charge(uint64_t steps, uint64_t bytes) {
  jstate *J = clf__j_cur;
  if (!J) return 0;
  if (J->st != CLF_OK) return -1;
  J->steps += steps;
  J->bytes += bytes;
  if (J->steps > J->max.steps) return limit(J, "steps", J->max.steps, "loop iterations, calls and items");
  if (J->bytes > J->max.bytes) return limit(J, "bytes", J->max.bytes, "bytes of text made, copied or searched");
  return 0;
}

/* n bytes more alive; -1 (and nothing taken) past the memory budget. */
static int mem_take(size_t n) {
  jstate *J = clf__j_cur;
  if (!J) return 0;
  if (J->st != CLF_OK) return -1;
  if (n > J->max.memory - J->live) return limit(J, "memory", J->max.memory, "bytes of values alive at once");
  J->live += n;
  if (J->live > J->peak) J->peak = J->live;
  return 0;
}

static void mem_give(size_t n) {
  jstate *J = clf__j_cur;
  if (J) J->live = n < J->live ? J->live - n : 0;
}

/* The registry of containers: v (a list, dict or function) joins it. */
static void reg_add(jv v, size_t *reg) {
  jstate *J = clf__j_cur;
  *reg = JV_NOREG;
  if (!J) return;
  if (J->nobjs == J->capobjs) {
    size_t cap = J->capobjs ? J->capobjs * 2 : 64;
    jv *o = realloc(J->objs, cap * sizeof(*o));
    if (!o) { clf__j_oom(J); return; } /* the render fails; this one is freed by reference counting */
    J->objs = o;
    J->capobjs = cap;
  }
  *reg = J->nobjs;
  J->objs[J->nobjs++] = v;
}

static size_t *reg_of(jv v) {
  return v.t == JV_LIST ? &v.u.l->reg : v.t == JV_DICT ? &v.u.d->reg : &v.u.fn->reg;
}

static void reg_remove(size_t reg) {
  jstate *J = clf__j_cur;
  if (!J || reg == JV_NOREG || reg >= J->nobjs) return;
  J->objs[reg] = J->objs[--J->nobjs];
  if (reg < J->nobjs) *reg_of(J->objs[reg]) = reg;
}

void clf__j_free_cycles(jstate *J) {
  /* Every container left is held by a cycle (or by one that is): pin them
   * all, empty them (dropping what they hold frees the rest), free them. */
  for (size_t i = 0; i < J->nobjs; i++) clf__jv_ref(J->objs[i]);
  for (size_t i = 0; i < J->nobjs; i++) {
    jv v = J->objs[i];
    if (v.t == JV_LIST) {
      for (size_t k = 0; k < v.u.l->n; k++) clf__jv_drop(v.u.l->v[k]);
      v.u.l->n = 0;
    } else if (v.t == JV_DICT) {
      for (size_t k = 0; k < v.u.d->n; k++) { clf__jv_drop(v.u.d->k[k]); clf__jv_drop(v.u.d->v[k]); }
      v.u.d->n = 0;
    } else {
      clf__jv_drop(v.u.fn->self);
      v.u.fn->self = clf__jv_none();
    }
  }
  while (J->nobjs) {
    jv v = J->objs[J->nobjs - 1];
    *reg_of(v) = JV_NOREG;
    J->nobjs--;
    if (v.t == JV_LIST) { free(v.u.l->v); free(v.u.l); }
    else if (v.t == JV_DICT) { free(v.u.d->k); free(v.u.d->v); free(v.u.d); }
    else free(v.u.fn);
  }
  free(J->objs);
  J->objs = NULL;
  J->capobjs = 0;
}

jv clf__jv_undef(void) { jv v = {JV_UNDEF, {.s = NULL}}; return v; }
jv clf__jv_none(void) { jv v = {JV_NONE, {.i = 0}}; return v; }
jv clf__jv_bool(int b) { jv v = {JV_BOOL, {.b = !!b}}; return v; }
jv clf__jv_int(int64_t i) { jv v = {JV_INT, {.i = i}}; return v; }
jv clf__jv_float(double f) { jv v = {JV_FLOAT, {.f = f}}; return v; }

jv clf__jv_str(jstate *J, const char *s, size_t n) {
  jv v = clf__jv_undef();
  if (n >= CLF__J_MAX_OUTPUT) {
    if (J) clf__j_fail(J, J->at, "a string past %zu bytes", (size_t)CLF__J_MAX_OUTPUT);
    return v;
  }
  if (clf__j_charge(0, n) || mem_take(sizeof(jstr) + n + 1)) return v;
  jstr *x = malloc(sizeof(jstr) + n + 1);
  if (!x) { mem_give(sizeof(jstr) + n + 1); if (J) clf__j_oom(J); return v; }
  x->refs = 1;
  x->n = n;
  if (n) memcpy(x->s, s, n);
  x->s[n] = '\0';
  v.t = JV_STR;
  v.u.s = x;
  return v;
}

jv clf__jv_cstr(jstate *J, const char *s) { return clf__jv_str(J, s, strlen(s)); }

jv clf__jv_list(jstate *J, int tuple) {
  jv v = clf__jv_undef();
  if (clf__j_charge(1, 0) || mem_take(sizeof(jlist))) return v;
  jlist *l = calloc(1, sizeof(*l));
  if (!l) { mem_give(sizeof(jlist)); clf__j_oom(J); return v; }
  l->refs = 1;
  l->tuple = tuple;
  v.t = JV_LIST;
  v.u.l = l;
  reg_add(v, &l->reg);
  return v;
}

jv clf__jv_dict(jstate *J) {
  jv v = clf__jv_undef();
  if (clf__j_charge(1, 0) || mem_take(sizeof(jdict))) return v;
  jdict *d = calloc(1, sizeof(*d));
  if (!d) { mem_give(sizeof(jdict)); clf__j_oom(J); return v; }
  d->refs = 1;
  v.t = JV_DICT;
  v.u.d = d;
  reg_add(v, &d->reg);
  return v;
}

jv clf__jv_func(jstate *J, int kind, int id, jv self, const jnode *macro) {
  jv v = clf__jv_undef();
  if (clf__j_charge(1, 0) || mem_take(sizeof(jfunc))) return v;
  jfunc *f = calloc(1, sizeof(*f));
  if (!f) { mem_give(sizeof(jfunc)); clf__j_oom(J); return v; }
  reg_add((jv){JV_FUNC, {.fn = f}}, &f->reg);
  f->refs = 1;
  f->kind = kind;
  f->id = id;
  f->self = clf__jv_ref(self);
  f->macro = macro;
  v.t = JV_FUNC;
  v.u.fn = f;
  return v;
}

jv clf__jv_ref(jv v) {
  switch (v.t) {
  case JV_STR: v.u.s->refs++; break;
  case JV_UNDEF: if (v.u.s) v.u.s->refs++; break;
  case JV_LIST: v.u.l->refs++; break;
  case JV_DICT: v.u.d->refs++; break;
  case JV_FUNC: v.u.fn->refs++; break;
  default: break;
  }
  return v;
}

void clf__jv_drop(jv v) {
  switch (v.t) {
  case JV_STR:
  case JV_UNDEF:
    if (v.u.s && --v.u.s->refs == 0) { mem_give(sizeof(jstr) + v.u.s->n + 1); free(v.u.s); }
    break;
  case JV_LIST:
    if (--v.u.l->refs == 0) {
      reg_remove(v.u.l->reg);
      for (size_t i = 0; i < v.u.l->n; i++) clf__jv_drop(v.u.l->v[i]);
      mem_give(sizeof(jlist) + v.u.l->cap * sizeof(jv));
      free(v.u.l->v);
      free(v.u.l);
    }
    break;
  case JV_DICT:
    if (--v.u.d->refs == 0) {
      reg_remove(v.u.d->reg);
      for (size_t i = 0; i < v.u.d->n; i++) { clf__jv_drop(v.u.d->k[i]); clf__jv_drop(v.u.d->v[i]); }
      mem_give(sizeof(jdict) + v.u.d->cap * 2 * sizeof(jv));
      free(v.u.d->k);
      free(v.u.d->v);
      free(v.u.d);
    }
    break;
  case JV_FUNC:
    if (--v.u.fn->refs == 0) {
      reg_remove(v.u.fn->reg);
      clf__jv_drop(v.u.fn->self);
      mem_give(sizeof(jfunc));
      free(v.u.fn);
    }
    break;
  default: break;
  }
}

int clf__jv_push(jstate *J, jv list, jv item) {
  jlist *l = list.u.l;
  if (l->n >= CLF__J_MAX_ITEMS) {
    clf__jv_drop(item);
    return clf__j_fail(J, NULL, "a list past %d items", CLF__J_MAX_ITEMS);
  }
  if (clf__j_charge(1, 0)) { clf__jv_drop(item); return -1; }
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4;
    if (mem_take((cap - l->cap) * sizeof(jv))) { clf__jv_drop(item); return -1; }
    jv *v = cap < ((size_t)1 << 28) ? realloc(l->v, cap * sizeof(*v)) : NULL;
    if (!v) { mem_give((cap - l->cap) * sizeof(jv)); clf__jv_drop(item); return clf__j_oom(J); }
    l->v = v;
    l->cap = cap;
  }
  l->v[l->n++] = item;
  return 0;
}

jv clf__jv_getv(jv dict, jv key, int *found) {
  jdict *d = dict.u.d;
  clf__j_charge(d->n >> 4, 0);
  for (size_t i = d->n; i-- > 0;)
    if (clf__jv_equal(d->k[i], key)) { *found = 1; return d->v[i]; }
  *found = 0;
  return clf__jv_undef();
}

jv clf__jv_get(jv dict, const char *key) {
  if (dict.t != JV_DICT) return clf__jv_undef();
  jdict *d = dict.u.d;
  size_t n = strlen(key);
  clf__j_charge(d->n >> 4, 0);
  for (size_t i = d->n; i-- > 0;)
    if (d->k[i].t == JV_STR && d->k[i].u.s->n == n && !memcmp(d->k[i].u.s->s, key, n)) return d->v[i];
  return clf__jv_undef();
}

/* key: val appended without looking for key (JSON objects: a key written
 * twice is found at its last place, as json.loads keeps the last). */
static int dict_append(jstate *J, jv dict, jv key, jv val) {
  jdict *d = dict.u.d;
  if (clf__j_charge(1, 0)) { clf__jv_drop(key); clf__jv_drop(val); return -1; }
  if (d->n == d->cap) {
    size_t cap = d->cap ? d->cap * 2 : 4;
    if (mem_take((cap - d->cap) * 2 * sizeof(jv))) { clf__jv_drop(key); clf__jv_drop(val); return -1; }
    jv *k = cap < ((size_t)1 << 28) ? realloc(d->k, cap * sizeof(*k)) : NULL;
    if (k) d->k = k;
    jv *v = k ? realloc(d->v, cap * sizeof(*v)) : NULL;
    if (v) d->v = v;
    if (!k || !v) { /* (a grown k is kept: d->cap still says what is used) */
      mem_give((cap - d->cap) * 2 * sizeof(jv));
      clf__jv_drop(key); clf__jv_drop(val);
      return clf__j_oom(J);
    }
    d->cap = cap;
  }
  d->k[d->n] = key;
  d->v[d->n++] = val;
  return 0;
}

int clf__jv_set(jstate *J, jv dict, jv key, jv val) {
  jdict *d = dict.u.d;
  clf__j_charge(d->n >> 4, 0);
  for (size_t i = 0; i < d->n; i++)
    if (clf__jv_equal(d->k[i], key)) {
      clf__jv_drop(key);
      clf__jv_drop(d->v[i]);
      d->v[i] = val;
      return 0;
    }
  return dict_append(J, dict, key, val);
}

static int is_num(jv v) { return v.t == JV_BOOL || v.t == JV_INT || v.t == JV_FLOAT; }
static double as_double(jv v) { return v.t == JV_FLOAT ? v.u.f : v.t == JV_INT ? (double)v.u.i : v.u.b; }
static int64_t as_int(jv v) { return v.t == JV_INT ? v.u.i : v.u.b; }

int clf__jv_truthy(jv v) {
  switch (v.t) {
  case JV_UNDEF: case JV_NONE: return 0;
  case JV_BOOL: return v.u.b;
  case JV_INT: return v.u.i != 0;
  case JV_FLOAT: return v.u.f != 0;
  case JV_STR: return v.u.s->n != 0;
  case JV_LIST: return v.u.l->tuple == JL_GEN || v.u.l->n != 0;
  case JV_DICT: return v.u.d->n != 0;
  default: return 1;
  }
}

/* Python's RecursionError, on the render running here. */
static void too_deep(const char *where) {
  jstate *J = clf__j_cur;
  if (J) clf__j_fail(J, J->at, "maximum recursion depth exceeded %s", where);
}

static int same_obj(jv a, jv b) {
  return a.t == b.t && ((a.t == JV_LIST && a.u.l == b.u.l) || (a.t == JV_DICT && a.u.d == b.u.d));
}

static int equal_at(jv a, jv b, int depth);

static int dict_equal(jv a, jv b, int depth) {
  if (a.u.d->ns || b.u.d->ns) return 0; /* a Namespace, a loop: no __eq__ (identity, checked before) */
  if (a.u.d->n != b.u.d->n) return 0;
  for (size_t i = 0; i < a.u.d->n; i++) {
    int found = 0;
    jv o = clf__jv_undef();
    for (size_t k = b.u.d->n; k-- > 0;) /* (keys: compared at this depth) */
      if (equal_at(a.u.d->k[i], b.u.d->k[k], depth + 1)) { o = b.u.d->v[k]; found = 1; break; }
    if (!found || !equal_at(a.u.d->v[i], o, depth + 1)) return 0;
  }
  return 1;
}

static int equal_at(jv a, jv b, int depth) {
  if (is_num(a) && is_num(b)) {
    if (a.t == JV_FLOAT || b.t == JV_FLOAT) return as_double(a) == as_double(b);
    return as_int(a) == as_int(b);
  }
  if (a.t != b.t) return 0;
  if (same_obj(a, b)) return 1;
  if ((a.t == JV_LIST || a.t == JV_DICT) && depth > CLF__J_MAX_DEPTH) { too_deep("in comparison"); return 0; }
  switch (a.t) {
  case JV_UNDEF: case JV_NONE: return 1;
  case JV_STR:
    if (a.u.s->n != b.u.s->n) return 0;
    clf__j_charge(0, a.u.s->n);
    return !memcmp(a.u.s->s, b.u.s->s, a.u.s->n);
  case JV_LIST:
    if (a.u.l->tuple == JL_GEN || b.u.l->tuple == JL_GEN) return 0;
    if (a.u.l->n != b.u.l->n || a.u.l->tuple != b.u.l->tuple) return 0;
    clf__j_charge(a.u.l->n >> 4, 0);
    for (size_t i = 0; i < a.u.l->n; i++)
      if (!equal_at(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
    return 1;
  case JV_DICT: return dict_equal(a, b, depth);
  case JV_FUNC: return a.u.fn == b.u.fn;
  default: return 0;
  }
}

int clf__jv_equal(jv a, jv b) { return equal_at(a, b, 0); }

static int compare_at(jv a, jv b, int *ok, int depth) {
  *ok = 1;
  if (is_num(a) && is_num(b)) {
    if (a.t == JV_FLOAT || b.t == JV_FLOAT) {
      double x = as_double(a), y = as_double(b);
      return (x > y) - (x < y);
    }
    int64_t x = as_int(a), y = as_int(b);
    return (x > y) - (x < y);
  }
  if (a.t == JV_STR && b.t == JV_STR) { /* UTF-8 byte order is code point order */
    size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
    clf__j_charge(0, n);
    int c = memcmp(a.u.s->s, b.u.s->s, n);
    if (c) return c < 0 ? -1 : 1;
    return (a.u.s->n > b.u.s->n) - (a.u.s->n < b.u.s->n);
  }
  if (a.t == JV_LIST && b.t == JV_LIST && a.u.l->tuple == b.u.l->tuple && a.u.l->tuple != JL_GEN) {
    if (depth > CLF__J_MAX_DEPTH) { too_deep("in comparison"); *ok = 0; return 0; }
    for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++) {
      if (equal_at(a.u.l->v[i], b.u.l->v[i], depth + 1)) continue;
      return compare_at(a.u.l->v[i], b.u.l->v[i], ok, depth + 1);
    }
    return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
  }
  *ok = 0;
  return 0;
}

int clf__jv_compare(jv a, jv b, int *ok) { return compare_at(a, b, ok, 0); }

const char *clf__jv_typename(jv v) {
  static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list", "dict", "function"};
  if (v.t == JV_LIST && v.u.l->tuple) return v.u.l->tuple == JL_GEN ? "generator" : "tuple";
  if (v.t == JV_DICT && v.u.d->ns) return "Namespace";
  return names[v.t];
}

size_t clf__jv_utf8_len(const char *s, size_t n) {
  size_t c = 0;
  clf__j_charge(0, n);
  for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xC0) != 0x80;
  return c;
}

/* ---- text ---- */

int clf__jbuf_add(jbuf *b, const char *s, size_t n) {
  if (b->oom) return -1;
  if (n > CLF__J_MAX_OUTPUT - b->n || clf__j_charge(0, n)) { b->oom = 1; return -1; }
  /* s may lie in b itself (a repetition doubles what it has) */
  uintptr_t from = (uintptr_t)s, base = (uintptr_t)b->s;
  size_t self = b->s && from >= base && from < base + b->n ? (size_t)(from - base) + 1 : 0;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1) cap *= 2;
    if (mem_take(cap - b->cap)) { b->oom = 1; return -1; }
    char *x = realloc(b->s, cap);
    if (!x) { mem_give(cap - b->cap); b->oom = 1; return -1; }
    b->s = x;
    b->cap = cap;
    if (self) s = b->s + self - 1;
  }
  if (n) memmove(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
  return 0;
}

int clf__jbuf_addc(jbuf *b, char c) { return clf__jbuf_add(b, &c, 1); }

void clf__jbuf_free(jbuf *b) {
  mem_give(b->cap);
  free(b->s);
  b->s = NULL;
  b->n = b->cap = 0;
}

char *clf__jbuf_take(jbuf *b) {
  char *s = b->s;
  mem_give(b->cap);
  b->s = NULL;
  b->n = b->cap = 0;
  return s;
}
int clf__jbuf_adds(jbuf *b, const char *s) { return clf__jbuf_add(b, s, strlen(s)); }

/* Python's repr(float): the shortest digits that read back the same,
 * positional for exponents in [-4, 16), else d.ddde+XX. */
void clf__jv_float_repr(double f, char out[40]) {
  if (isnan(f)) { strcpy(out, "nan"); return; }
  if (isinf(f)) { strcpy(out, f < 0 ? "-inf" : "inf"); return; }
  char e[40];
  int p;
  for (p = 1; p <= 17; p++) {
    snprintf(e, sizeof(e), "%.*e", p - 1, f);
    if (strtod(e, NULL) == f) break;
  }
  /* e: [-]d[.ddd]e[+-]XX */
  char digits[24];
  size_t nd = 0;
  const char *q = e;
  int neg = *q == '-';
  if (neg) q++;
  for (; *q && *q != 'e'; q++)
    if (*q != '.') digits[nd++] = *q;
  int exp = atoi(q + 1);
  while (nd > 1 && digits[nd - 1] == '0') nd--;
  char *o = out;
  if (neg) *o++ = '-';
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      *o++ = '0'; *o++ = '.';
      for (int i = -1; i > exp; i--) *o++ = '0';
      for (size_t i = 0; i < nd; i++) *o++ = digits[i];
    } else {
      for (int i = 0; i <= exp; i++) *o++ = (size_t)i < nd ? digits[i] : '0';
      *o++ = '.';
      if ((size_t)exp + 1 < nd) for (size_t i = (size_t)exp + 1; i < nd; i++) *o++ = digits[i];
      else *o++ = '0';
    }
    *o = '\0';
  } else {
    *o++ = digits[0];
    if (nd > 1) { *o++ = '.'; for (size_t i = 1; i < nd; i++) *o++ = digits[i]; }
    snprintf(o, (size_t)(40 - (o - out)), "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  }
}

/* An int's decimal digits, written backwards from the end of t (40 bytes);
 * returns where they start.  snprintf took 40% of the time of a template
 * that joins a list of 100000 ints over and over until its budget stops
 * it. */
static const char *int_text(int64_t i, char *t) {
  char *o = t + 39;
  uint64_t u = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
  *o = 0;
  do *--o = (char)('0' + u % 10); while (u /= 10);
  if (i < 0) *--o = '-';
  return o;
}

static int write_num(jbuf *b, jv v) {
  char t[40];
  if (v.t == JV_FLOAT) {
    clf__jv_float_repr(v.u.f, t);
    return clf__jbuf_adds(b, t);
  }
  const char *s = int_text(v.u.i, t);
  return clf__jbuf_add(b, s, (size_t)(t + 39 - s));
}

/* repr() of a str: quotes as Python chooses them, escapes for \\, the quote,
 * control characters; other characters as they are. */
static int write_str_repr(jbuf *b, const jstr *s) {
  int sq = memchr(s->s, '\'', s->n) != NULL, dq = memchr(s->s, '"', s->n) != NULL;
  char q = sq && !dq ? '"' : '\'';
  int r = clf__jbuf_addc(b, q);
  for (size_t i = 0; i < s->n && !r; i++) {
    unsigned char c = (unsigned char)s->s[i];
    char t[8];
    if (c == '\\' || c == (unsigned char)q) { t[0] = '\\'; t[1] = (char)c; r = clf__jbuf_add(b, t, 2); }
    else if (c == '\n') r = clf__jbuf_adds(b, "\\n");
    else if (c == '\r') r = clf__jbuf_adds(b, "\\r");
    else if (c == '\t') r = clf__jbuf_adds(b, "\\t");
    else if (c < 0x20 || c == 0x7F) { snprintf(t, sizeof(t), "\\x%02x", c); r = clf__jbuf_adds(b, t); }
    else if (c < 0x80) r = clf__jbuf_addc(b, (char)c);
    else { /* non-printable code points (Python's str.isprintable()) escaped */
      size_t j = i;
      int32_t cp = clf__utf8_next(s->s, s->n, &j);
      int cls = cp < 0 ? CLF__UC_C : clf__uc_class((uint32_t)cp);
      if (cp >= 0 && (cls == CLF__UC_C || cls == CLF__UC_Z || cls == CLF__UC_ZS)) {
        char e[16];
        snprintf(e, sizeof(e), cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", (unsigned)cp);
        r = clf__jbuf_adds(b, e);
      } else {
        r = clf__jbuf_add(b, s->s + i, cp < 0 ? 1 : j - i);
      }
      i = (cp < 0 ? i + 1 : j) - 1;
    }
  }
  return r ? r : clf__jbuf_addc(b, q);
}

/* The containers being printed (Python's reprlib guard): one met again
 * inside itself prints as [...] or {...}. */
typedef struct jseen { const void *p[CLF__J_MAX_DEPTH + 2]; int n; } jseen;

static int seen_has(const jseen *s, const void *p) {
  for (int i = 0; i < s->n; i++)
    if (s->p[i] == p) return 1;
  return 0;
}

static int repr_at(jbuf *b, jv v, jseen *seen);

static int repr_items(jbuf *b, jv v, jseen *seen) {
  int r = 0;
  if (v.t == JV_LIST) {
    r = clf__jbuf_addc(b, v.u.l->tuple ? '(' : '[');
    for (size_t i = 0; i < v.u.l->n && !r; i++) {
      if (i) r = clf__jbuf_adds(b, ", ");
      if (!r) r = repr_at(b, v.u.l->v[i], seen);
    }
    if (!r && v.u.l->tuple && v.u.l->n == 1) r = clf__jbuf_addc(b, ',');
    return r ? r : clf__jbuf_addc(b, v.u.l->tuple ? ')' : ']');
  }
  r = clf__jbuf_addc(b, '{');
  for (size_t i = 0; i < v.u.d->n && !r; i++) {
    if (i) r = clf__jbuf_adds(b, ", ");
    if (!r) r = repr_at(b, v.u.d->k[i], seen);
    if (!r) r = clf__jbuf_adds(b, ": ");
    if (!r) r = repr_at(b, v.u.d->v[i], seen);
  }
  return r ? r : clf__jbuf_addc(b, '}');
}

static int repr_at(jbuf *b, jv v, jseen *seen) {
  switch (v.t) {
  case JV_STR: return write_str_repr(b, v.u.s);
  case JV_LIST: case JV_DICT: {
    if (v.t == JV_LIST && v.u.l->tuple == JL_GEN) return clf__jbuf_adds(b, "<generator object>");
    int ns = v.t == JV_DICT && v.u.d->ns;
    const void *p = v.t == JV_LIST ? (const void *)v.u.l : (const void *)v.u.d;
    /* a tuple has no guard of its own in Python: the list or dict inside it that holds it has */
    int guarded = !(v.t == JV_LIST && v.u.l->tuple);
    if (guarded && seen_has(seen, p))
      return clf__jbuf_adds(b, ns ? "<Namespace {...}>" : v.t == JV_LIST ? "[...]" : "{...}");
    if (seen->n > CLF__J_MAX_DEPTH) {
      too_deep("while getting the repr of an object");
      b->oom = 1;
      return -1;
    }
    seen->p[seen->n++] = guarded ? p : NULL;
    int r = ns ? clf__jbuf_adds(b, "<Namespace ") : 0;
    if (!r) r = repr_items(b, v, seen);
    if (!r && ns) r = clf__jbuf_addc(b, '>');
    seen->n--;
    return r;
  }
  default: return clf__jv_write_str(b, v);
  }
}

int clf__jv_write_repr(jbuf *b, jv v) {
  jseen *seen = malloc(sizeof(*seen));
  if (!seen) { b->oom = 1; return -1; }
  seen->n = 0;
  int r = repr_at(b, v, seen);
  free(seen);
  return r;
}

int clf__jv_write_str(jbuf *b, jv v) {
  switch (v.t) {
  case JV_UNDEF: return 0;
  case JV_NONE: return clf__jbuf_adds(b, "None");
  case JV_BOOL: return clf__jbuf_adds(b, v.u.b ? "True" : "False");
  case JV_INT: case JV_FLOAT: return write_num(b, v);
  case JV_STR: return clf__jbuf_add(b, v.u.s->s, v.u.s->n);
  case JV_FUNC: return clf__jbuf_adds(b, "<function>");
  default: return clf__jv_write_repr(b, v);
  }
}

/* ---- JSON ---- */

static int json_str(jbuf *b, const char *s, size_t n) {
  if (clf__j_charge(0, CLF__J_SLOW * n)) { b->oom = 1; return -1; }
  int r = clf__jbuf_addc(b, '"');
  for (size_t i = 0; i < n && !r; i++) {
    unsigned char c = (unsigned char)s[i];
    char t[8];
    if (c == '"') r = clf__jbuf_adds(b, "\\\"");
    else if (c == '\\') r = clf__jbuf_adds(b, "\\\\");
    else if (c == '\n') r = clf__jbuf_adds(b, "\\n");
    else if (c == '\r') r = clf__jbuf_adds(b, "\\r");
    else if (c == '\t') r = clf__jbuf_adds(b, "\\t");
    else if (c == '\b') r = clf__jbuf_adds(b, "\\b");
    else if (c == '\f') r = clf__jbuf_adds(b, "\\f");
    else if (c < 0x20) { snprintf(t, sizeof(t), "\\u%04x", c); r = clf__jbuf_adds(b, t); }
    else r = clf__jbuf_addc(b, (char)c);
  }
  return r ? r : clf__jbuf_addc(b, '"');
}

typedef struct jopts { const char *indent, *item_sep, *key_sep; int sort; const char **bad; jseen seen; } jopts;

static int json_nl(jbuf *b, const jopts *o, int level) {
  if (!o->indent) return 0;
  int r = clf__jbuf_addc(b, '\n');
  for (int i = 0; i < level && !r; i++) r = clf__jbuf_adds(b, o->indent);
  return r;
}

static int json_key(jbuf *b, jv k, const jopts *o) {
  char t[40];
  switch (k.t) {
  case JV_STR: return json_str(b, k.u.s->s, k.u.s->n);
  case JV_NONE: return clf__jbuf_adds(b, "\"null\"");
  case JV_BOOL: return clf__jbuf_adds(b, k.u.b ? "\"true\"" : "\"false\"");
  case JV_INT: snprintf(t, sizeof(t), "\"%lld\"", (long long)k.u.i); return clf__jbuf_adds(b, t);
  case JV_FLOAT:
    clf__jv_float_repr(k.u.f, t);
    return clf__jbuf_addc(b, '"') || clf__jbuf_adds(b, t) || clf__jbuf_addc(b, '"');
  default: *o->bad = "keys must be str, int, float, bool or None"; return -2;
  }
}

static int json_value(jbuf *b, jv v, jopts *o, int level);

static int json_dict(jbuf *b, jv v, jopts *o, int level) {
  jdict *d = v.u.d;
  if (!d->n) return clf__jbuf_adds(b, "{}");
  size_t *ord = malloc(d->n * sizeof(*ord));
  if (!ord) return -1;
  for (size_t i = 0; i < d->n; i++) ord[i] = i;
  if (o->sort) /* insertion sort: stable, keys compared as Python would */
    for (size_t i = 1; i < d->n; i++)
      for (size_t j = i; j > 0; j--) {
        if (clf__j_charge(1, 0)) { free(ord); return -1; }
        int ok, c = clf__jv_compare(d->k[ord[j - 1]], d->k[ord[j]], &ok);
        if (!ok) { free(ord); *o->bad = "keys of different types cannot be sorted"; return -2; }
        if (c <= 0) break;
        size_t t = ord[j]; ord[j] = ord[j - 1]; ord[j - 1] = t;
      }
  int r = clf__jbuf_addc(b, '{');
  for (size_t i = 0; i < d->n && !r; i++) {
    if (i) r = clf__jbuf_adds(b, o->item_sep);
    if (!r) r = json_nl(b, o, level + 1);
    if (!r) r = json_key(b, d->k[ord[i]], o);
    if (!r) r = clf__jbuf_adds(b, o->key_sep);
    if (!r) r = json_value(b, d->v[ord[i]], o, level + 1);
  }
  free(ord);
  if (!r) r = json_nl(b, o, level);
  return r ? r : clf__jbuf_addc(b, '}');
}

/* A container met again inside itself: json.dumps' check_circular. */
static int json_enter(jbuf *b, jv v, jopts *o) {
  const void *p = v.t == JV_LIST ? (const void *)v.u.l : (const void *)v.u.d;
  if (seen_has(&o->seen, p)) {
    jstate *J = clf__j_cur;
    if (J) clf__j_fail(J, J->at, "Circular reference detected");
    b->oom = 1;
    return -1;
  }
  o->seen.p[o->seen.n++] = p;
  return 0;
}

static int json_value(jbuf *b, jv v, jopts *o, int level) {
  if (level > CLF__J_MAX_DEPTH) { *o->bad = "a value nested too deeply"; return -2; }
  int r;
  switch (v.t) {
  case JV_NONE: return clf__jbuf_adds(b, "null");
  case JV_BOOL: return clf__jbuf_adds(b, v.u.b ? "true" : "false");
  case JV_INT: return write_num(b, v);
  case JV_FLOAT:
    if (isnan(v.u.f)) return clf__jbuf_adds(b, "NaN");
    if (isinf(v.u.f)) return clf__jbuf_adds(b, v.u.f < 0 ? "-Infinity" : "Infinity");
    return write_num(b, v);
  case JV_STR: return json_str(b, v.u.s->s, v.u.s->n);
  case JV_LIST: {
    if (v.u.l->tuple == JL_GEN) break;
    if (!v.u.l->n) return clf__jbuf_adds(b, "[]");
    if (json_enter(b, v, o)) return -1;
    r = clf__jbuf_addc(b, '[');
    for (size_t i = 0; i < v.u.l->n && !r; i++) {
      if (i) r = clf__jbuf_adds(b, o->item_sep);
      if (!r) r = json_nl(b, o, level + 1);
      if (!r) r = json_value(b, v.u.l->v[i], o, level + 1);
    }
    if (!r) r = json_nl(b, o, level);
    o->seen.n--;
    return r ? r : clf__jbuf_addc(b, ']');
  }
  case JV_DICT:
    if (v.u.d->ns) break;
    if (!v.u.d->n) return clf__jbuf_adds(b, "{}");
    if (json_enter(b, v, o)) return -1;
    r = json_dict(b, v, o, level);
    o->seen.n--;
    return r;
  default: break;
  }
  *o->bad = clf__jv_typename(v);
  return -2;
}

int clf__jv_write_json(jbuf *b, jv v, const char *indent, const char *item_sep, const char *key_sep, int sort_keys,
                  const char **bad) {
  jopts *o = malloc(sizeof(*o));
  if (!o) { b->oom = 1; return -1; }
  *o = (jopts){indent, item_sep ? item_sep : indent ? "," : ", ", key_sep ? key_sep : ": ", sort_keys, bad, {{0}, 0}};
  int r = json_value(b, v, o, 0);
  free(o);
  return r;
}

int clf__jv_scan_numbers(const char *s, jnums *out) {
  memset(out, 0, sizeof(*out));
  size_t cap = 0;
  for (size_t i = 0; s[i];) {
    if (s[i] == '"') { /* skip the string */
      for (i++; s[i] && s[i] != '"'; i += s[i] == '\\' && s[i + 1] ? 2 : 1) {}
      if (s[i]) i++;
      continue;
    }
    if (s[i] != '-' && (s[i] < '0' || s[i] > '9')) { i++; continue; }
    size_t a = i;
    int is_int = 1;
    while (s[i] == '-' || s[i] == '+' || s[i] == '.' || s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9')) {
      if (s[i] == '.' || s[i] == 'e' || s[i] == 'E') is_int = 0;
      i++;
    }
    if (out->n == cap) {
      cap = cap ? cap * 2 : 16;
      int64_t *iv = realloc(out->ival, cap * sizeof(*iv));
      if (iv) out->ival = iv;
      unsigned char *ii = iv ? realloc(out->is_int, cap) : NULL;
      if (ii) out->is_int = ii;
      if (!iv || !ii) { clf__jv_free_numbers(out); return -1; }
    }
    char *end;
    errno = 0;
    long long v = is_int ? strtoll(s + a, &end, 10) : 0;
    if (is_int && (errno == ERANGE || end != s + i)) is_int = 0; /* past 64 bits: a float here */
    out->ival[out->n] = v;
    out->is_int[out->n++] = (unsigned char)is_int;
  }
  return 0;
}

void clf__jv_free_numbers(jnums *nums) {
  free(nums->ival);
  free(nums->is_int);
  memset(nums, 0, sizeof(*nums));
}

jv clf__jv_from_cjson(jstate *J, const void *json, jnums *nums) {
  const cJSON *j = json;
  if (!j || cJSON_IsNull(j)) return clf__jv_none();
  if (cJSON_IsBool(j)) return clf__jv_bool(cJSON_IsTrue(j));
  if (cJSON_IsString(j)) return clf__jv_cstr(J, j->valuestring);
  if (cJSON_IsNumber(j)) {
    double d = j->valuedouble;
    if (nums && nums->next < nums->n) {
      size_t k = nums->next++;
      return nums->is_int[k] ? clf__jv_int(nums->ival[k]) : clf__jv_float(d);
    }
    /* without its text: integral values within 64 bits are ints */
    if (d == floor(d) && fabs(d) < 9.2e18) return clf__jv_int((int64_t)d);
    return clf__jv_float(d);
  }
  jv v = cJSON_IsArray(j) ? clf__jv_list(J, 0) : clf__jv_dict(J);
  if (v.t == JV_UNDEF) return v;
  const cJSON *e;
  cJSON_ArrayForEach(e, j) {
    jv x = clf__jv_from_cjson(J, e, nums);
    if (clf__j_failed(J)) { clf__jv_drop(x); break; }
    if (v.t == JV_LIST) { if (clf__jv_push(J, v, x)) break; }
    else {
      jv k = clf__jv_cstr(J, e->string ? e->string : "");
      if (k.t != JV_STR) { clf__jv_drop(x); break; }
      if (dict_append(J, v, k, x)) break;
    }
  }
  return v;
}
