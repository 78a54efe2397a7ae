/* jinja_exec.c - a chat template's statements rendered: for loops (loop
 * variables, the inline if, else, unpacking), if, set (names, tuples,
 * namespace attributes, blocks), macros, call blocks, filter blocks,
 * generation, break / continue; and the entry point that loads the variables and
 * renders the whole template.
 */
#include "jinja.h"
#include "jinja_str.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* ---- statements ---- */

/* The items a for loop (or a filter) walks: list items, dict keys, the
 * characters of a str; Undefined gives none. *items malloc'd, referenced. */
int clf__j_iter(jstate *J, const jnode *at, jv v, jv **items, size_t *n) {
  *items = NULL;
  *n = 0;
  if (v.t == JV_UNDEF) return 0;
  size_t cnt = v.t == JV_LIST ? v.u.l->n : v.t == JV_DICT ? v.u.d->n : v.t == JV_STR ? v.u.s->n : 0;
  if (v.t != JV_LIST && v.t != JV_DICT && v.t != JV_STR)
    return clf__j_fail(J, at, "'%s' object is not iterable", clf__jv_typename(v));
  if (v.t == JV_DICT && v.u.d->ns) return clf__j_fail(J, at, "'Namespace' object is not iterable");
  if (!cnt) return 0;
  if (v.t == JV_STR && clf__jv_utf8_len(v.u.s->s, v.u.s->n) > CLF__J_MAX_ITEMS)
    return clf__j_fail(J, at, "iterating a string of more than %d characters", CLF__J_MAX_ITEMS);
  jv *it = calloc(cnt, sizeof(*it));
  if (!it) return clf__j_oom(J);
  size_t k = 0;
  if (v.t == JV_LIST) {
    for (; k < cnt; k++) it[k] = clf__jv_ref(v.u.l->v[k]);
    if (v.u.l->tuple == JL_GEN) { /* an iterator is used up */
      for (size_t i = 0; i < cnt; i++) clf__jv_drop(v.u.l->v[i]);
      v.u.l->n = 0;
    }
  }
  else if (v.t == JV_DICT)
    for (; k < cnt; k++) it[k] = clf__jv_ref(v.u.d->k[k]);
  else
    for (size_t i = 0; i < v.u.s->n && J->st == CLF_OK;) {
      size_t j = i + 1;
      while (j < v.u.s->n && ((unsigned char)v.u.s->s[j] & 0xC0) == 0x80) j++;
      it[k++] = clf__jv_str(J, v.u.s->s + i, j - i);
      i = j;
    }
  *items = it;
  *n = k;
  return J->st == CLF_OK ? 0 : -1;
}

static void drop_items(jv *items, size_t n) {
  for (size_t i = 0; i < n; i++) clf__jv_drop(items[i]);
  free(items);
}

/* Binds a for / set target (a name or a tuple of names) to v (taken). */
static int bind(jstate *J, const jnode *tg, jv v) {
  if (tg->k == JN_NAME) return clf__j_assign(J, tg->name, v);
  if (v.t != JV_LIST && v.t != JV_STR) {
    clf__j_fail(J, tg, "cannot unpack non-iterable %s object", clf__jv_typename(v));
    clf__jv_drop(v);
    return -1;
  }
  jv *items;
  size_t n;
  if (clf__j_iter(J, tg, v, &items, &n)) { clf__jv_drop(v); return -1; }
  clf__jv_drop(v);
  if (n != tg->nkids) {
    drop_items(items, n);
    return clf__j_fail(J, tg, n < tg->nkids ? "not enough values to unpack (expected %zu, got %zu)"
                                            : "too many values to unpack (expected %zu, got %zu)", tg->nkids, n);
  }
  for (size_t i = 0; i < n; i++) {
    if (bind(J, tg->kids[i], items[i])) {
      for (size_t k = i + 1; k < n; k++) clf__jv_drop(items[k]);
      free(items);
      return -1;
    }
  }
  free(items);
  return 0;
}

static int loop_set(jstate *J, jv loop, const char *k, jv v) {
  jv key = clf__jv_cstr(J, k);
  if (key.t != JV_STR) { clf__jv_drop(v); return -1; }
  return clf__jv_set(J, loop, key, v);
}

#define LOOP_FIXED 9 /* index .. depth0: the entries every iteration has */

/* The `loop` variable of iteration i of n into *l: made anew, or, when
 * nothing but the loop holds the last one, that one updated in place. */
static void loop_var(jstate *J, jv *l, jv *items, size_t i, size_t n) {
  int64_t ii = (int64_t)i, nn = (int64_t)n;
  jv fixed[LOOP_FIXED] = {clf__jv_int(ii + 1), clf__jv_int(ii), clf__jv_int(nn - ii), clf__jv_int(nn - ii - 1),
                          clf__jv_bool(i == 0), clf__jv_bool(i + 1 == n), clf__jv_int(nn), clf__jv_int(1),
                          clf__jv_int(0)};
  static const char *const names[LOOP_FIXED] = {"index", "index0", "revindex", "revindex0", "first", "last",
                                                "length", "depth", "depth0"};
  if (l->t == JV_DICT && l->u.d->refs == 1 && l->u.d->n >= LOOP_FIXED) {
    jdict *d = l->u.d;
    for (size_t k = LOOP_FIXED; k < d->n; k++) { clf__jv_drop(d->k[k]); clf__jv_drop(d->v[k]); }
    d->n = LOOP_FIXED;
    for (size_t k = 0; k < LOOP_FIXED; k++) d->v[k] = fixed[k]; /* (numbers: nothing to drop) */
  } else {
    clf__jv_drop(*l);
    *l = clf__jv_dict(J);
    if (l->t != JV_DICT) return;
    l->u.d->ns = 2; /* attributes are its keys */
    for (size_t k = 0; k < LOOP_FIXED; k++) loop_set(J, *l, names[k], fixed[k]);
  }
  if (i > 0) loop_set(J, *l, "previtem", clf__jv_ref(items[i - 1]));
  if (i + 1 < n) loop_set(J, *l, "nextitem", clf__jv_ref(items[i + 1]));
  loop_set(J, *l, "cycle", clf__jv_func(J, JF_CYCLE, 0, clf__jv_int(ii), NULL));
}

/* Keeps the items for which the loop's `if` holds. */
static int loop_filter(jstate *J, const jnode *x, jv *items, size_t *n) {
  size_t w = 0;
  for (size_t i = 0; i < *n; i++) {
    int keep = 0;
    if (J->st == CLF_OK && !clf__j_push_frame(J, x, 0)) {
      if (!bind(J, x->d, clf__jv_ref(items[i]))) {
        jv c = clf__j_ev(J, x->b);
        keep = J->st == CLF_OK && clf__jv_truthy(c);
        clf__jv_drop(c);
      }
      clf__j_pop_frame(J);
    }
    if (keep) items[w++] = items[i];
    else clf__jv_drop(items[i]);
  }
  *n = w;
  return J->st == CLF_OK ? 0 : -1;
}

static int exec_for(jstate *J, const jnode *x, jbuf *out) {
  jv seq = clf__j_ev(J, x->a), *items;
  size_t n;
  int r = J->st == CLF_OK ? clf__j_iter(J, x->a, seq, &items, &n) : -1;
  clf__jv_drop(seq);
  if (r) return -1;
  if (x->b && loop_filter(J, x, items, &n)) { drop_items(items, n); return -1; }
  if (!n) { free(items); return x->e ? clf__j_exec_body(J, x->e, out) : 0; }
  J->loops++;
  jv l = clf__jv_undef();
  for (size_t i = 0; i < n && J->st == CLF_OK; i++) {
    if (clf__j_step(J, x) || clf__j_push_frame(J, x, 0)) break;
    loop_var(J, &l, items, i, n);
    if (J->st == CLF_OK && !bind(J, x->d, clf__jv_ref(items[i])) && !clf__j_assign(J, "loop", clf__jv_ref(l)))
      clf__j_exec_body(J, x->c, out);
    clf__j_pop_frame(J);
    int ctl = J->ctl;
    J->ctl = 0;
    if (ctl == 1) break;
  }
  clf__jv_drop(l);
  J->loops--;
  drop_items(items, n);
  return J->st == CLF_OK ? 0 : -1;
}

static int exec_set(jstate *J, const jnode *x) {
  jv v = clf__j_ev(J, x->a);
  if (J->st != CLF_OK) return -1;
  if (x->d->k != JN_ATTR) return bind(J, x->d, v);
  jv ns = clf__j_lookup(J, x->d->a->name);
  int r;
  if (ns.t != JV_DICT || ns.u.d->ns != 1) {
    r = clf__j_fail(J, x->d, "cannot assign attribute on non-namespace object");
    clf__jv_drop(v);
  } else {
    jv k = clf__jv_cstr(J, x->d->name);
    r = k.t == JV_STR ? clf__jv_set(J, ns, k, v) : (clf__jv_drop(v), -1);
  }
  clf__jv_drop(ns);
  return r;
}

/* A body rendered into a new string, through a filter chain (f: the last
 * filter, whose innermost input is NULL) when f is not NULL. */
static jv render_to_str(jstate *J, const jnode *body, const jnode *f) {
  jbuf b = {0};
  jv r = clf__jv_undef();
  if (!clf__j_exec_body(J, body, &b)) r = clf__jv_str(J, b.s ? b.s : "", b.n);
  clf__jbuf_free(&b);
  if (!f || J->st != CLF_OK) return r;
  const jnode *chain[64];
  int n = 0;
  for (const jnode *k = f; k && n < 64; k = k->a) chain[n++] = k;
  while (n-- > 0 && J->st == CLF_OK) {
    jv y = clf__j_ev_filter(J, chain[n], r);
    clf__jv_drop(r);
    r = y;
  }
  return r;
}

/* (long: one case per statement kind) */
static int exec_node(jstate *J, const jnode *x, jbuf *out) {
  jv v;
  J->at = x;
  switch (x->k) {
  case JN_TEXT: return clf__jbuf_add(out, x->lit.u.s->s, x->lit.u.s->n);
  case JN_OUTPUT:
    v = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) clf__jv_write_str(out, v); /* a failure: out->oom */
    clf__jv_drop(v);
    break;
  case JN_IF:
    v = clf__j_ev(J, x->a);
    if (J->st == CLF_OK) {
      int t = clf__jv_truthy(v);
      if (t) clf__j_exec_body(J, x->b, out);
      else if (x->c && x->c->k == JN_IF) exec_node(J, x->c, out);
      else if (x->c) clf__j_exec_body(J, x->c, out);
    }
    clf__jv_drop(v);
    break;
  case JN_FOR: return exec_for(J, x, out);
  case JN_SET: return exec_set(J, x);
  case JN_SETBLOCK:
    v = render_to_str(J, x->c, x->b);
    return J->st == CLF_OK ? bind(J, x->d, v) : (clf__jv_drop(v), -1);
  case JN_MACRO:
    v = clf__jv_func(J, JF_MACRO, J->nfr, clf__jv_none(), x);
    return v.t == JV_FUNC ? clf__j_assign(J, x->name, v) : -1;
  case JN_GENERATION: /* transformers' CallBlock: its body is a scope of its own */
    if (clf__j_push_frame(J, x, 0)) return -1;
    clf__j_exec_body(J, x->c, out);
    clf__j_pop_frame(J);
    break;
  case JN_CALLBLOCK:
    v = clf__j_ev_callblock(J, x);
    if (J->st == CLF_OK) clf__jv_write_str(out, v);
    clf__jv_drop(v);
    break;
  case JN_FILTERBLOCK:
    v = render_to_str(J, x->c, x->b);
    if (J->st == CLF_OK) clf__jv_write_str(out, v);
    clf__jv_drop(v);
    break;
  case JN_BREAK: case JN_CONTINUE:
    if (!J->loops) return clf__j_fail(J, x, "'%s' outside of a loop", x->k == JN_BREAK ? "break" : "continue");
    J->ctl = x->k == JN_BREAK ? 1 : 2;
    break;
  default: return clf__j_fail(J, x, "not a statement");
  }
  return J->st == CLF_OK ? 0 : -1;
}

int clf__j_exec_body(jstate *J, const jnode *b, jbuf *out) {
  if (++J->depth > CLF__J_MAX_DEPTH) { J->depth--; return clf__j_fail(J, b, "statements nested too deeply"); }
  for (size_t i = 0; i < b->nkids && J->st == CLF_OK && !J->ctl; i++) {
    int r = exec_node(J, b->kids[i], out);
    if ((r || out->oom) && J->st == CLF_OK)
      clf__j_fail(J, b->kids[i], "output past %zu bytes (or out of memory)", (size_t)CLF__J_MAX_OUTPUT);
  }
  J->depth--;
  return J->st == CLF_OK ? 0 : -1;
}

/* cJSON object `vars` into frame 0. */
static void load_vars(jstate *J, const cJSON *vars, jnums *nums) {
  const cJSON *e;
  cJSON_ArrayForEach(e, vars) {
    if (J->st != CLF_OK) return;
    jv v = clf__jv_from_cjson(J, e, nums);
    if (J->st == CLF_OK) clf__j_assign(J, e->string ? e->string : "", v);
    else clf__jv_drop(v);
  }
}

clf_status clf__j_render(const jtemplate *t, const void *base, const void *vars, const char *vars_text,
                         const clf_template_budget *budget, clf_template_budget *cost, char **out) {
  *out = NULL;
  jstate *J = calloc(1, sizeof(*J));
  if (!J) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory");
  J->st = CLF_OK;
  clf_template_budget_default(&J->max);
  if (budget && budget->steps) J->max.steps = budget->steps;
  if (budget && budget->bytes) J->max.bytes = budget->bytes;
  if (budget && budget->memory) J->max.memory = budget->memory;
  jstate *outer = clf__j_cur; /* (none: a render runs no other) */
  clf__j_cur = J;
  jbuf b = {0};
  if (!clf__j_push_frame(J, NULL, 0)) {
    jnums nums = {0};
    if (vars_text && clf__jv_scan_numbers(vars_text, &nums)) clf__j_oom(J);
    if (base && J->st == CLF_OK) load_vars(J, base, NULL);
    if (vars && J->st == CLF_OK) load_vars(J, vars, vars_text ? &nums : NULL);
    clf__jv_free_numbers(&nums);
    if (J->st == CLF_OK) clf__j_exec_body(J, t->root, &b);
    if (J->st == CLF_OK && b.oom) clf__j_oom(J);
  }
  while (J->nfr) clf__j_pop_frame(J);
  clf__j_free_cycles(J);
  clf_status st = J->st;
  char *text = st == CLF_OK ? clf__jbuf_take(&b) : NULL;
  clf__jbuf_free(&b);
  if (cost) *cost = (clf_template_budget){J->steps, J->bytes, J->peak};
  clf__j_cur = outer;
  free(J);
  if (st != CLF_OK) return st;
  if (!text && !(text = calloc(1, 1))) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory");
  *out = text;
  return CLF_OK;
}
