/* jinja_parse.c - a chat template's tokens as a tree, with Jinja 3.1's
 * grammar and precedence (jinja2/parser.py), refusing at parse time every
 * statement, filter and test the renderer does not implement, named with
 * its line:column.
 */
#include "jinja.h"
#include "base/status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ps {
  jtok *t;
  size_t n, i;
  jtemplate *tpl;
  int depth;
  clf_status st;
} ps;

static jtok *cur(ps *P) { return &P->t[P->i]; }
static jtok *peek(ps *P, size_t k) { return &P->t[P->i + k < P->n ? P->i + k : P->n - 1]; }

static jnode *perr(ps *P, clf_status st, const jtok *at, const char *fmt, const char *what) {
  if (P->st == CLF_OK) {
    char msg[300];
    snprintf(msg, sizeof(msg), fmt, what);
    P->st = clf__fail(NULL, st, "chat template: %s at %d:%d", msg, at->line, at->col);
  }
  return NULL;
}

static jnode *newn(ps *P, jn_kind k, const jtok *at) {
  if (P->st != CLF_OK) return NULL;
  jtemplate *T = P->tpl;
  if (T->nall == T->capall) {
    size_t cap = T->capall ? T->capall * 2 : 64;
    jnode **a = realloc(T->all, cap * sizeof(*a));
    if (!a) return perr(P, CLF_E_OUT_OF_MEMORY, at, "%s", "out of memory");
    T->all = a;
    T->capall = cap;
  }
  jnode *x = calloc(1, sizeof(*x));
  if (!x) return perr(P, CLF_E_OUT_OF_MEMORY, at, "%s", "out of memory");
  T->all[T->nall++] = x;
  x->k = k;
  x->line = at->line;
  x->col = at->col;
  return x;
}

static int addkid(ps *P, jnode *x, jnode *kid) {
  if (!x || !kid) return -1;
  if ((x->nkids & (x->nkids - 1)) == 0) { /* capacity doubles at powers of two */
    jnode **k = realloc(x->kids, (x->nkids ? x->nkids * 2 : 1) * sizeof(*k));
    if (!k) { perr(P, CLF_E_OUT_OF_MEMORY, cur(P), "%s", "out of memory"); return -1; }
    x->kids = k;
  }
  x->kids[x->nkids++] = kid;
  return 0;
}

static int setname(ps *P, jnode *x, const char *s) {
  if (!x) return -1;
  if (!(x->name = strdup(s))) { perr(P, CLF_E_OUT_OF_MEMORY, cur(P), "%s", "out of memory"); return -1; }
  return 0;
}

static int is_op(ps *P, const char *op) { return cur(P)->t == JT_OP && !strcmp(cur(P)->s, op); }
static int is_name(ps *P, const char *nm) { return cur(P)->t == JT_NAME && !strcmp(cur(P)->s, nm); }

static int expect_op(ps *P, const char *op) {
  if (is_op(P, op)) { P->i++; return 0; }
  perr(P, CLF_E_FORMAT, cur(P), "expected '%s'", op);
  return -1;
}

static jnode *expr(ps *P);
static jnode *or_expr(ps *P);
static jnode *unary(ps *P, int with_filter);

static const char *tok_desc(const jtok *k) {
  switch (k->t) {
  case JT_EOF: return "end of template";
  case JT_BLOCK_END: return "end of statement block";
  case JT_VAR_END: return "end of print statement";
  default: return k->s;
  }
}

static jnode *unexpected(ps *P) { return perr(P, CLF_E_FORMAT, cur(P), "unexpected '%s'", tok_desc(cur(P))); }

/* Literal lists, dicts and parenthesised tuples. */
static jnode *collection(ps *P, const char *close, jn_kind kind) {
  jnode *x = newn(P, kind, cur(P));
  P->i++;
  while (x && !is_op(P, close)) {
    if (x->nkids && expect_op(P, ",")) return NULL;
    if (is_op(P, close)) break;
    jnode *k = expr(P);
    if (addkid(P, x, k)) return NULL;
    if (kind == JN_DICT) {
      if (expect_op(P, ":")) return NULL;
      if (addkid(P, x, expr(P))) return NULL;
    }
  }
  return x && !expect_op(P, close) ? x : NULL;
}

static jnode *primary(ps *P) {
  jtok *k = cur(P);
  jnode *x;
  if (k->t == JT_NAME) {
    static const char *const consts[] = {"true", "True", "false", "False", "none", "None"};
    for (int c = 0; c < 6; c++) {
      if (strcmp(k->s, consts[c])) continue;
      x = newn(P, JN_LIT, k);
      if (x) x->lit = c < 2 ? clf__jv_bool(1) : c < 4 ? clf__jv_bool(0) : clf__jv_none();
      P->i++;
      return x;
    }
    x = newn(P, JN_NAME, k);
    P->i++;
    return setname(P, x, k->s) ? NULL : x;
  }
  if (k->t == JT_STRING) {
    x = newn(P, JN_LIT, k);
    if (!x) return NULL;
    size_t n = 0, m = 0;
    while (peek(P, m)->t == JT_STRING) n += peek(P, m++)->n; /* adjacent strings join */
    char *buf = malloc(n + 1);
    if (!buf) return perr(P, CLF_E_OUT_OF_MEMORY, k, "%s", "out of memory");
    size_t w = 0;
    for (; cur(P)->t == JT_STRING; P->i++) { memcpy(buf + w, cur(P)->s, cur(P)->n); w += cur(P)->n; }
    x->lit = clf__jv_str(NULL, buf, w);
    free(buf);
    return x->lit.t == JV_STR ? x : perr(P, CLF_E_OUT_OF_MEMORY, k, "%s", "out of memory");
  }
  if (k->t == JT_INT || k->t == JT_FLOAT) {
    x = newn(P, JN_LIT, k);
    if (x) x->lit = k->t == JT_INT ? clf__jv_int(k->i) : clf__jv_float(k->f);
    P->i++;
    return x;
  }
  if (is_op(P, "(")) {
    jtok *open = k;
    P->i++;
    if (is_op(P, ")")) { P->i++; return newn(P, JN_TUPLE, open); }
    jnode *e = expr(P);
    if (!e) return NULL;
    if (is_op(P, ",")) {
      x = newn(P, JN_TUPLE, open);
      if (addkid(P, x, e)) return NULL;
      while (is_op(P, ",")) {
        P->i++;
        if (is_op(P, ")")) break;
        if (addkid(P, x, expr(P))) return NULL;
      }
      e = x;
    }
    return expect_op(P, ")") ? NULL : e;
  }
  if (is_op(P, "[")) return collection(P, "]", JN_LIST);
  if (is_op(P, "{")) return collection(P, "}", JN_DICT);
  return unexpected(P);
}

/* Call arguments after "(": positional, name=value, then *expr (call->d)
 * and **expr (call->e) in the order Jinja's parse_call_args allows. */
static int call_args(ps *P, jnode *call) {
  jtok *at = cur(P);
  P->i++;
  while (!is_op(P, ")")) {
    if ((call->nkids || call->d || call->e) && expect_op(P, ",")) return -1;
    if (is_op(P, ")")) break;
    int is_kw = cur(P)->t == JT_NAME && peek(P, 1)->t == JT_OP && !strcmp(peek(P, 1)->s, "=");
    if (call->e || (call->d && !is_kw && !is_op(P, "**")) || (is_op(P, "*") && call->d))
      return perr(P, CLF_E_FORMAT, at, "%s", "invalid syntax for function call expression"), -1;
    if (is_op(P, "*") || is_op(P, "**")) {
      jnode **dst = is_op(P, "*") ? &call->d : &call->e;
      P->i++;
      if (!(*dst = expr(P))) return -1;
    } else if (is_kw) {
      jnode *kw = newn(P, JN_KWARG, cur(P));
      if (setname(P, kw, cur(P)->s)) return -1;
      P->i += 2;
      if (!(kw->a = expr(P)) || addkid(P, call, kw)) return -1;
    } else {
      jnode *a = expr(P);
      if (addkid(P, call, a)) return -1;
    }
  }
  P->i++;
  return 0;
}

static jnode *subscript(ps *P, jnode *obj) {
  jnode *x = newn(P, JN_SUBSCRIPT, cur(P));
  P->i++;
  if (!x) return NULL;
  x->a = obj;
  jnode *idx[3] = {NULL, NULL, NULL};
  int part = 0, slice = 0;
  for (;;) {
    if (is_op(P, ":")) {
      if (++part > 2) return unexpected(P);
      slice = 1;
      P->i++;
      continue;
    }
    if (is_op(P, "]")) break;
    if (idx[part]) return unexpected(P);
    if (!(idx[part] = expr(P))) return NULL;
    if (!slice && is_op(P, ",")) return perr(P, CLF_E_UNSUPPORTED, cur(P), "unsupported %s", "tuple subscript");
  }
  P->i++;
  if (!slice) { x->b = idx[0]; return x->b ? x : unexpected(P); }
  jnode *s = newn(P, JN_SLICE, cur(P));
  if (!s) return NULL;
  s->a = idx[0];
  s->b = idx[1];
  s->c = idx[2];
  x->b = s;
  return x;
}

static jnode *postfix(ps *P, jnode *x) {
  while (x) {
    if (is_op(P, ".")) {
      jtok *at = cur(P);
      P->i++;
      if (cur(P)->t == JT_NAME) {
        jnode *a = newn(P, JN_ATTR, at);
        if (setname(P, a, cur(P)->s)) return NULL;
        a->a = x;
        x = a;
      } else if (cur(P)->t == JT_INT) {
        jnode *a = newn(P, JN_SUBSCRIPT, at), *l = newn(P, JN_LIT, cur(P));
        if (!a || !l) return NULL;
        l->lit = clf__jv_int(cur(P)->i);
        a->a = x;
        a->b = l;
        x = a;
      } else {
        return unexpected(P);
      }
      P->i++;
    } else if (is_op(P, "[")) {
      x = subscript(P, x);
    } else if (is_op(P, "(")) {
      jnode *c = newn(P, JN_CALL, cur(P));
      if (!c) return NULL;
      c->a = x;
      if (call_args(P, c)) return NULL;
      x = c;
    } else {
      break;
    }
  }
  return x;
}

/* Filter or test name, dotted names joined. */
static int dotted_name(ps *P, char *buf, size_t size) {
  if (cur(P)->t != JT_NAME) { unexpected(P); return -1; }
  snprintf(buf, size, "%s", cur(P)->s);
  P->i++;
  while (is_op(P, ".") && peek(P, 1)->t == JT_NAME) {
    size_t l = strlen(buf);
    snprintf(buf + l, size - l, ".%s", peek(P, 1)->s);
    P->i += 2;
  }
  return 0;
}

static jnode *filter_one(ps *P, jnode *input) {
  jtok *at = cur(P);
  char nm[128];
  if (dotted_name(P, nm, sizeof(nm))) return NULL;
  int id = clf__j_filter_id(nm);
  if (id < 0) return perr(P, CLF_E_UNSUPPORTED, at, "unsupported filter '%s'", nm);
  jnode *f = newn(P, JN_FILTER, at);
  if (setname(P, f, nm)) return NULL;
  f->fid = id;
  f->a = input;
  if (is_op(P, "(") && call_args(P, f)) return NULL;
  return f;
}

/* A test's lone argument without parentheses: `is divisibleby 3`. */
static int test_arg_follows(ps *P) {
  jtok *k = cur(P);
  if (k->t == JT_STRING || k->t == JT_INT || k->t == JT_FLOAT) return 1;
  if (k->t == JT_OP) return !strcmp(k->s, "[") || !strcmp(k->s, "{") || !strcmp(k->s, "-");
  if (k->t == JT_NAME)
    return strcmp(k->s, "else") && strcmp(k->s, "or") && strcmp(k->s, "and") && strcmp(k->s, "if") &&
           strcmp(k->s, "in") && strcmp(k->s, "is") && strcmp(k->s, "not");
  return 0;
}

static jnode *test_one(ps *P, jnode *input) {
  jtok *at = cur(P);
  P->i++; /* "is" */
  int neg = 0;
  if (is_name(P, "not")) { neg = 1; P->i++; }
  char nm[128];
  if (dotted_name(P, nm, sizeof(nm))) return NULL;
  int id = clf__j_test_id(nm);
  if (id < 0) return perr(P, CLF_E_UNSUPPORTED, at, "unsupported test '%s'", nm);
  jnode *t = newn(P, JN_TEST, at);
  if (setname(P, t, nm)) return NULL;
  t->fid = id;
  t->op = neg;
  t->a = input;
  if (is_op(P, "(")) {
    if (call_args(P, t)) return NULL;
  } else if (test_arg_follows(P)) {
    jnode *arg = postfix(P, primary(P));
    if (addkid(P, t, arg)) return NULL;
  }
  return t;
}

static jnode *filter_expr(ps *P, jnode *x) {
  while (x) {
    if (is_op(P, "|")) { P->i++; x = filter_one(P, x); }
    else if (is_name(P, "is")) x = test_one(P, x);
    else if (is_op(P, "(")) {
      jnode *c = newn(P, JN_CALL, cur(P));
      if (!c) return NULL;
      c->a = x;
      if (call_args(P, c)) return NULL;
      x = c;
    } else break;
  }
  return x;
}

static jnode *unary(ps *P, int with_filter) {
  jtok *at = cur(P);
  jnode *x;
  if (++P->depth > CLF__J_MAX_DEPTH) return perr(P, CLF_E_UNSUPPORTED, at, "%s", "expression nested too deeply");
  if (is_op(P, "-") || is_op(P, "+")) {
    x = newn(P, is_op(P, "-") ? JN_NEG : JN_POS, at);
    P->i++;
    if (x && !(x->a = unary(P, 0))) x = NULL;
  } else {
    x = postfix(P, primary(P));
  }
  if (with_filter) x = filter_expr(P, x);
  P->depth--;
  return x;
}

static jnode *binop(ps *P, int op, jnode *l, jnode *r, const jtok *at) {
  if (!l || !r) return NULL;
  jnode *x = newn(P, JN_BINOP, at);
  if (!x) return NULL;
  x->op = op;
  x->a = l;
  x->b = r;
  return x;
}

static jnode *pow_expr(ps *P) {
  jnode *x = unary(P, 1);
  while (x && is_op(P, "**")) { jtok *at = cur(P); P->i++; x = binop(P, JO_POW, x, unary(P, 1), at); }
  return x;
}

static jnode *mul_expr(ps *P) {
  jnode *x = pow_expr(P);
  for (;;) {
    int op = is_op(P, "*") ? JO_MUL : is_op(P, "/") ? JO_DIV : is_op(P, "//") ? JO_FLOORDIV : is_op(P, "%") ? JO_MOD : -1;
    if (op < 0 || !x) return x;
    jtok *at = cur(P);
    P->i++;
    x = binop(P, op, x, pow_expr(P), at);
  }
}

static jnode *concat_expr(ps *P) {
  jnode *x = mul_expr(P);
  while (x && is_op(P, "~")) { jtok *at = cur(P); P->i++; x = binop(P, JO_CONCAT, x, mul_expr(P), at); }
  return x;
}

static jnode *add_expr(ps *P) {
  jnode *x = concat_expr(P);
  for (;;) {
    int op = is_op(P, "+") ? JO_ADD : is_op(P, "-") ? JO_SUB : -1;
    if (op < 0 || !x) return x;
    jtok *at = cur(P);
    P->i++;
    x = binop(P, op, x, concat_expr(P), at);
  }
}

static jnode *compare(ps *P) {
  jtok *at = cur(P);
  jnode *x = add_expr(P), *chain = NULL;
  for (;;) {
    int op = is_op(P, "==") ? JO_EQ : is_op(P, "!=") ? JO_NE : is_op(P, "<") ? JO_LT : is_op(P, "<=") ? JO_LE
           : is_op(P, ">") ? JO_GT : is_op(P, ">=") ? JO_GE : is_name(P, "in") ? JO_IN : -1;
    if (op < 0 && is_name(P, "not") && peek(P, 1)->t == JT_NAME && !strcmp(peek(P, 1)->s, "in")) { op = JO_NOTIN; P->i++; }
    if (op < 0 || !x) break;
    jtok *oat = cur(P);
    P->i++;
    if (!chain) {
      if (!(chain = newn(P, JN_COMPARE, at))) return NULL;
      chain->a = x;
    }
    jnode *operand = newn(P, JN_COMPARE, oat);
    if (!operand) return NULL;
    operand->op = op;
    if (!(operand->a = add_expr(P)) || addkid(P, chain, operand)) return NULL;
  }
  return chain && x ? chain : x;
}

static jnode *not_expr(ps *P) {
  if (is_name(P, "not")) {
    jnode *x = newn(P, JN_NOT, cur(P));
    P->i++;
    if (++P->depth > CLF__J_MAX_DEPTH) return perr(P, CLF_E_UNSUPPORTED, cur(P), "%s", "expression nested too deeply");
    if (x && !(x->a = not_expr(P))) x = NULL;
    P->depth--;
    return x;
  }
  return compare(P);
}

static jnode *and_expr(ps *P) {
  jnode *x = not_expr(P);
  while (x && is_name(P, "and")) {
    jnode *y = newn(P, JN_AND, cur(P));
    P->i++;
    if (!y) return NULL;
    y->a = x;
    if (!(y->b = not_expr(P))) return NULL;
    x = y;
  }
  return x;
}

static jnode *or_expr(ps *P) {
  jnode *x = and_expr(P);
  while (x && is_name(P, "or")) {
    jnode *y = newn(P, JN_OR, cur(P));
    P->i++;
    if (!y) return NULL;
    y->a = x;
    if (!(y->b = and_expr(P))) return NULL;
    x = y;
  }
  return x;
}

/* condexpr: `a if c else b`, `a if c` (Undefined when c is false). */
static jnode *expr(ps *P) {
  if (++P->depth > CLF__J_MAX_DEPTH) return perr(P, CLF_E_UNSUPPORTED, cur(P), "%s", "expression nested too deeply");
  jnode *x = or_expr(P);
  while (x && is_name(P, "if")) {
    jnode *c = newn(P, JN_COND, cur(P));
    P->i++;
    if (!c) return NULL;
    c->b = x;
    if (!(c->a = or_expr(P))) return NULL;
    if (is_name(P, "else")) {
      P->i++;
      if (!(c->c = expr(P))) return NULL;
    }
    x = c;
  }
  P->depth--;
  return x;
}

/* ---- statements ---- */

/* expr, or a tuple of them without parentheses (`{{ a, b }}`). */
static jnode *tuple_expr(ps *P) {
  jtok *at = cur(P);
  jnode *x = expr(P);
  if (!x || !is_op(P, ",")) return x;
  jnode *t = newn(P, JN_TUPLE, at);
  if (addkid(P, t, x)) return NULL;
  while (is_op(P, ",")) {
    P->i++;
    if (cur(P)->t == JT_VAR_END || cur(P)->t == JT_BLOCK_END) break;
    if (addkid(P, t, expr(P))) return NULL;
  }
  return t;
}

static int block_end(ps *P) {
  if (cur(P)->t == JT_BLOCK_END) { P->i++; return 0; }
  unexpected(P);
  return -1;
}

static jnode *body(ps *P, const char *const *ends, const char **which);

/* A name, or names separated by commas (for / set targets): a JN_NAME or a
 * JN_TUPLE of them; `ns.attr` when attr_ok. */
static jnode *target(ps *P, int attr_ok) {
  jtok *at = cur(P);
  jnode *t = NULL;
  for (;;) {
    if (cur(P)->t != JT_NAME) return unexpected(P);
    jnode *x = newn(P, JN_NAME, cur(P));
    if (setname(P, x, cur(P)->s)) return NULL;
    P->i++;
    if (attr_ok && is_op(P, ".") && peek(P, 1)->t == JT_NAME) {
      jnode *a = newn(P, JN_ATTR, cur(P));
      if (setname(P, a, peek(P, 1)->s)) return NULL;
      a->a = x;
      P->i += 2;
      return a;
    }
    if (!is_op(P, ",")) {
      if (!t) return x;
      return addkid(P, t, x) ? NULL : t;
    }
    P->i++;
    if (!t && !(t = newn(P, JN_TUPLE, at))) return NULL;
    if (addkid(P, t, x)) return NULL;
  }
}

static jnode *st_for(ps *P, jtok *at) {
  static const char *const ends[] = {"endfor", "else", NULL};
  jnode *x = newn(P, JN_FOR, at);
  if (!x || !(x->d = target(P, 0))) return NULL;
  if (!is_name(P, "in")) return perr(P, CLF_E_FORMAT, cur(P), "expected '%s'", "in");
  P->i++;
  if (!(x->a = or_expr(P))) return NULL; /* no condexpr: its `if` filters */
  if (is_op(P, ",")) return perr(P, CLF_E_UNSUPPORTED, cur(P), "unsupported %s", "tuple after 'in'");
  if (is_name(P, "if")) {
    P->i++;
    if (!(x->b = expr(P))) return NULL;
  }
  if (is_name(P, "recursive")) return perr(P, CLF_E_UNSUPPORTED, cur(P), "unsupported %s", "recursive loop");
  const char *which;
  if (block_end(P) || !(x->c = body(P, ends, &which))) return NULL;
  if (!strcmp(which, "else")) {
    static const char *const end2[] = {"endfor", NULL};
    if (!(x->e = body(P, end2, &which))) return NULL;
  }
  return x;
}

static jnode *st_if(ps *P, jtok *at) {
  static const char *const ends[] = {"endif", "elif", "else", NULL};
  jnode *x = newn(P, JN_IF, at);
  const char *which;
  if (!x || !(x->a = tuple_expr(P)) || block_end(P) || !(x->b = body(P, ends, &which))) return NULL;
  if (!strcmp(which, "elif")) {
    if (++P->depth > CLF__J_MAX_DEPTH) return perr(P, CLF_E_UNSUPPORTED, at, "%s", "statements nested too deeply");
    x->c = st_if(P, cur(P));
    P->depth--;
    return x->c ? x : NULL;
  }
  if (!strcmp(which, "else")) {
    static const char *const end2[] = {"endif", NULL};
    if (!(x->c = body(P, end2, &which))) return NULL;
  }
  return x;
}

static jnode *st_set(ps *P, jtok *at) {
  jnode *tg = target(P, 1);
  if (!tg) return NULL;
  if (is_op(P, "=")) {
    jnode *x = newn(P, JN_SET, at);
    P->i++;
    if (!x) return NULL;
    x->d = tg;
    if (!(x->a = tuple_expr(P)) || block_end(P)) return NULL;
    return x;
  }
  if (tg->k != JN_NAME) return unexpected(P);
  jnode *x = newn(P, JN_SETBLOCK, at);
  if (!x) return NULL;
  x->d = tg;
  while (x && is_op(P, "|")) { P->i++; x->b = filter_one(P, x->b); if (!x->b) return NULL; }
  static const char *const ends[] = {"endset", NULL};
  const char *which;
  if (block_end(P) || !(x->c = body(P, ends, &which))) return NULL;
  return x;
}

/* Which of caller, kwargs, varargs (JM_* bits) the tree x reads as a name
 * (Jinja's find_undeclared; for / set targets are not reads). */
static int special_names(const jnode *x) {
  if (!x) return 0;
  int r = 0;
  if (x->k == JN_NAME && x->name)
    r = !strcmp(x->name, "caller") ? JM_CALLER : !strcmp(x->name, "kwargs") ? JM_KWARGS
      : !strcmp(x->name, "varargs") ? JM_VARARGS : 0;
  int target = x->k == JN_FOR || x->k == JN_SET || x->k == JN_SETBLOCK;
  r |= special_names(x->a) | special_names(x->b) | special_names(x->c) | (target ? 0 : special_names(x->d)) |
       special_names(x->e);
  for (size_t i = 0; i < x->nkids; i++) r |= special_names(x->kids[i]);
  return r;
}

/* A macro's (or a call block's caller's) "(params) %}body{% end %}": the
 * parameters as kids (JN_KWARG, the default in ->a), the body in ->c and
 * in ->op the special names it reads that no parameter declares. */
static jnode *macro_rest(ps *P, jnode *x, const char *end) {
  if (expect_op(P, "(")) return NULL;
  while (!is_op(P, ")")) {
    if (x->nkids && expect_op(P, ",")) return NULL;
    if (cur(P)->t != JT_NAME) return unexpected(P);
    jnode *p = newn(P, JN_KWARG, cur(P));
    if (setname(P, p, cur(P)->s)) return NULL;
    P->i++;
    if (is_op(P, "=")) {
      P->i++;
      if (!(p->a = expr(P))) return NULL;
    } else if (x->nkids && x->kids[x->nkids - 1]->a) {
      return perr(P, CLF_E_FORMAT, cur(P), "%s", "non-default argument follows default argument");
    }
    if (addkid(P, x, p)) return NULL;
  }
  P->i++;
  if (end) {
    const char *const ends[] = {end, NULL};
    const char *which;
    if (block_end(P) || !(x->c = body(P, ends, &which))) return NULL;
  }
  return x;
}

/* The special names x's body reads (after macro_rest has its body). */
static jnode *macro_specials(ps *P, jnode *x, const jtok *at) {
  x->op = special_names(x->c);
  for (size_t i = 0; i < x->nkids; i++) {
    const jnode *p = x->kids[i];
    if (!strcmp(p->name, "caller") && (x->op & JM_CALLER) && !p->a)
      return perr(P, CLF_E_FORMAT, at, "%s", "When defining macros or call blocks the special \"caller\" "
                  "argument must be omitted or be given a default.");
    if (!strcmp(p->name, "caller")) x->op &= ~JM_CALLER;
    if (!strcmp(p->name, "kwargs")) x->op &= ~JM_KWARGS;
    if (!strcmp(p->name, "varargs")) x->op &= ~JM_VARARGS;
  }
  return x;
}

static jnode *st_macro(ps *P, jtok *at) {
  jnode *x = newn(P, JN_MACRO, at);
  if (!x) return NULL;
  if (cur(P)->t != JT_NAME) return unexpected(P);
  if (setname(P, x, cur(P)->s)) return NULL;
  P->i++;
  if (!macro_rest(P, x, "endmacro")) return NULL;
  return macro_specials(P, x, at);
}

/* {% call [(params)] f(args) %}body{% endcall %}: ->a the call, ->b the
 * caller (a JN_MACRO without a name). */
static jnode *st_call(ps *P, jtok *at) {
  jnode *x = newn(P, JN_CALLBLOCK, at), *m = newn(P, JN_MACRO, at);
  if (!x || !m) return NULL;
  x->b = m;
  if (is_op(P, "(") && !macro_rest(P, m, NULL)) return NULL;
  if (!(x->a = expr(P))) return NULL;
  if (x->a->k != JN_CALL) return perr(P, CLF_E_FORMAT, at, "%s", "expected call");
  static const char *const ends[] = {"endcall", NULL};
  const char *which;
  if (block_end(P) || !(m->c = body(P, ends, &which))) return NULL;
  return macro_specials(P, m, at) ? x : NULL;
}

static jnode *st_filter(ps *P, jtok *at) {
  jnode *x = newn(P, JN_FILTERBLOCK, at);
  if (!x) return NULL;
  do {
    if (x->b) P->i++;
    if (!(x->b = filter_one(P, x->b))) return NULL;
  } while (is_op(P, "|"));
  static const char *const ends[] = {"endfilter", NULL};
  const char *which;
  if (block_end(P) || !(x->c = body(P, ends, &which))) return NULL;
  return x;
}

/* One "{% ... %}" after its opening; *end set when it is one of `ends`. */
static jnode *statement(ps *P, const char *const *ends, const char **end) {
  jtok *at = cur(P);
  if (at->t != JT_NAME) return unexpected(P);
  for (int i = 0; ends && ends[i]; i++)
    if (!strcmp(at->s, ends[i])) {
      *end = ends[i];
      P->i++;
      if (strcmp(ends[i], "elif") && block_end(P)) return NULL;
      return NULL;
    }
  P->i++;
  jnode *x;
  if (++P->depth > CLF__J_MAX_DEPTH) return perr(P, CLF_E_UNSUPPORTED, at, "%s", "statements nested too deeply");
  if (!strcmp(at->s, "for")) x = st_for(P, at);
  else if (!strcmp(at->s, "if")) x = st_if(P, at);
  else if (!strcmp(at->s, "set")) x = st_set(P, at);
  else if (!strcmp(at->s, "macro")) x = st_macro(P, at);
  else if (!strcmp(at->s, "call")) x = st_call(P, at);
  else if (!strcmp(at->s, "filter")) x = st_filter(P, at);
  else if (!strcmp(at->s, "generation")) {
    static const char *const e[] = {"endgeneration", NULL};
    const char *which;
    x = newn(P, JN_GENERATION, at);
    if (x && (block_end(P) || !(x->c = body(P, e, &which)))) x = NULL;
  } else if (!strcmp(at->s, "break") || !strcmp(at->s, "continue")) {
    x = newn(P, at->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, at);
    if (x && block_end(P)) x = NULL;
  } else {
    static const char *const known[] = {"endfor", "endif", "elif", "else", "endset", "endmacro", "endfilter",
                                        "endgeneration", "endraw", "endcall", "endblock", "endwith"};
    for (size_t i = 0; i < CLF__ARRAY_LEN(known); i++)
      if (!strcmp(at->s, known[i])) return perr(P, CLF_E_FORMAT, at, "unexpected '%s'", at->s);
    return perr(P, CLF_E_UNSUPPORTED, at, "unsupported statement '%s'", at->s);
  }
  P->depth--;
  return x;
}

/* Statements and text until one of `ends` (NULL: the end of the template). */
static jnode *body(ps *P, const char *const *ends, const char **which) {
  jnode *b = newn(P, JN_BODY, cur(P));
  *which = NULL;
  while (b && P->st == CLF_OK) {
    jtok *k = cur(P);
    if (k->t == JT_EOF) {
      if (ends) return perr(P, CLF_E_FORMAT, k, "missing '%s'", ends[0]);
      return b;
    }
    P->i++;
    jnode *x = NULL;
    if (k->t == JT_TEXT) {
      if ((x = newn(P, JN_TEXT, k)) && (x->lit = clf__jv_str(NULL, k->s, k->n)).t != JV_STR)
        return perr(P, CLF_E_OUT_OF_MEMORY, k, "%s", "out of memory");
    } else if (k->t == JT_VAR_BEGIN) {
      x = newn(P, JN_OUTPUT, k);
      if (x && !(x->a = tuple_expr(P))) return NULL;
      if (cur(P)->t != JT_VAR_END) return unexpected(P);
      P->i++;
    } else if (k->t == JT_BLOCK_BEGIN) {
      x = statement(P, ends, which);
      if (*which) return P->st == CLF_OK ? b : NULL;
    } else {
      return unexpected(P);
    }
    if (addkid(P, b, x)) return NULL;
  }
  return NULL;
}

clf_status clf__j_parse(const char *src, jtemplate **out) {
  jtok *toks;
  size_t n;
  *out = NULL;
  clf_status st = clf__j_lex(src, &toks, &n);
  if (st != CLF_OK) return st;
  jtemplate *T = calloc(1, sizeof(*T));
  if (!T) {
    clf__j_free_tokens(toks, n);
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "chat template: out of memory");
  }
  ps P = {.t = toks, .n = n, .tpl = T, .st = CLF_OK};
  const char *which;
  T->root = body(&P, NULL, &which);
  clf__j_free_tokens(toks, n);
  if (P.st != CLF_OK || !T->root) {
    clf__j_free(T);
    return P.st != CLF_OK ? P.st : clf__fail(NULL, CLF_E_FORMAT, "chat template: malformed");
  }
  *out = T;
  return CLF_OK;
}

void clf__j_free(jtemplate *T) {
  if (!T) return;
  for (size_t i = 0; i < T->nall; i++) {
    jnode *x = T->all[i];
    clf__jv_drop(x->lit);
    free(x->kids);
    free(x->name);
    free(x);
  }
  free(T->all);
  free(T);
}
