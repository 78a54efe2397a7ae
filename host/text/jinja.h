/* jinja.h - the Jinja subset chat templates use (internal).
 *
 * jinja_lex.c turns a template into tokens with Jinja's whitespace control
 * (trim_blocks, lstrip_blocks, "-" and "+"); jinja_parse.c builds the tree
 * and refuses what is not implemented; jinja_value.c holds the values
 * (Python's None, bool, int, float, str, list, dict) with str(), repr() and
 * json.dumps, and the budget every render is charged against (its work and
 * the memory of its values); jinja_eval.c evaluates expressions and
 * jinja_exec.c renders statements; jinja_filters.c holds the filters,
 * jinja_methods.c the methods, the tests and the globals.  chat_template.c
 * is the public face.
 */
#ifndef CLF_JINJA_H
#define CLF_JINJA_H

#include "clformer.h"

#include <stddef.h>
#include <stdint.h>

/* ---- limits (hostile templates and contexts) ---- */
#define CLF__J_MAX_DEPTH 200              /* nesting of the parse, of evaluation and of a value
                                             printed, compared or serialized (Python's RecursionError) */
#define CLF__J_MAX_OUTPUT ((size_t)64 << 20) /* bytes of any string built, the output included */
#define CLF__J_MAX_RANGE 100000           /* range()'s length (Jinja's sandbox MAX_RANGE) */
#define CLF__J_MAX_ITEMS 4000000          /* items of a list, characters a loop walks */
/* The budget of one render (clf_template_budget; defaults and the measured
 * cost of real templates in docs/chat.md). */
#define CLF__J_DEFAULT_STEPS 1000000ULL          /* iterations, calls, filters, items made or searched */
#define CLF__J_DEFAULT_BYTES ((uint64_t)128 << 20) /* bytes of text produced, copied or searched */
#define CLF__J_DEFAULT_MEMORY ((uint64_t)64 << 20)  /* bytes of values alive at once */

/* ---- values ---- */
typedef enum { JV_UNDEF, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT, JV_FUNC } jv_type;

typedef struct jstr { long refs; size_t n; char s[]; } jstr; /* NUL-terminated UTF-8 */
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;

typedef struct jv {
  jv_type t;
  union {
    int b;
    int64_t i;
    double f;
    jstr *s; /* JV_STR; JV_UNDEF: its name for messages, or NULL */
    jlist *l;
    jdict *d;
    jfunc *fn;
  } u;
} jv;

/* tuple: 0 a list, 1 a tuple, JL_GEN an iterator (what map, select, reject,
 * selectattr, rejectattr, unique, items and reverse of a list give in
 * Jinja: iterated once, no len(), no index, always true, not JSON) */
struct jlist { long refs; size_t reg; int tuple; size_t n, cap; jv *v; };
#define JL_GEN 2
/* insertion-ordered; ns: a namespace() (attributes may be set) */
struct jdict { long refs; size_t reg; int ns; size_t n, cap; jv *k, *v; };

struct jnode;
/* kind: JF_MACRO (node), JF_GLOBAL / JF_METHOD (id, self), JF_CYCLE (self: the loop index) */
enum { JF_MACRO, JF_GLOBAL, JF_METHOD, JF_CYCLE };
struct jfunc { long refs; size_t reg; int kind, id; jv self; const struct jnode *macro; };
/* reg: the container's place among those its render made (the registry that
 * frees reference cycles when the render ends); JV_NOREG outside a render. */
#define JV_NOREG ((size_t)-1)

/* The render state: errors, limits, the scopes. */
typedef struct jstate jstate;

jv clf__jv_undef(void);
jv clf__jv_none(void);
jv clf__jv_bool(int b);
jv clf__jv_int(int64_t i);
jv clf__jv_float(double f);
jv clf__jv_str(jstate *J, const char *s, size_t n); /* JV_UNDEF with J's error set when out of memory */
jv clf__jv_cstr(jstate *J, const char *s);
jv clf__jv_list(jstate *J, int tuple);
jv clf__jv_dict(jstate *J);
jv clf__jv_func(jstate *J, int kind, int id, jv self, const struct jnode *macro); /* self: borrowed */
jv clf__jv_ref(jv v);   /* one more reference, returned */
void clf__jv_drop(jv v); /* one reference fewer */
int clf__jv_push(jstate *J, jv list, jv item);            /* item: taken; -1 on failure */
int clf__jv_set(jstate *J, jv dict, jv key, jv val);      /* key, val: taken; replaces */
jv clf__jv_get(jv dict, const char *key);                 /* borrowed; JV_UNDEF when absent */
jv clf__jv_getv(jv dict, jv key, int *found);             /* borrowed */
int clf__jv_truthy(jv v);
/* Python's ==: containers that are one object are equal without a look
 * inside (so a value holding itself equals itself); a namespace and a loop
 * are equal only to themselves.  Past CLF__J_MAX_DEPTH levels the render
 * fails with Python's RecursionError message and 0 is returned. */
int clf__jv_equal(jv a, jv b);
/* <0, 0, >0; *ok 0 when Python refuses to order them (or past the depth) */
int clf__jv_compare(jv a, jv b, int *ok);
const char *clf__jv_typename(jv v); /* Python's: 'str', 'dict', ... */
size_t clf__jv_utf8_len(const char *s, size_t n); /* code points */

/* Growable output text; its bytes are charged to the render's budget. */
typedef struct jbuf { char *s; size_t n, cap; int oom; } jbuf;
/* -1 out of memory, past CLF__J_MAX_OUTPUT or past the render's budget */
int clf__jbuf_add(jbuf *b, const char *s, size_t n);
int clf__jbuf_addc(jbuf *b, char c);
int clf__jbuf_adds(jbuf *b, const char *s);
void clf__jbuf_free(jbuf *b); /* b->s freed and its memory given back to the budget */
/* b->s handed out of the render (no longer charged as alive); b emptied */
char *clf__jbuf_take(jbuf *b);
/* str(v) / repr(v) appended (Python's): a list holding itself prints as
 * [...], a dict {...}, as Python's reprlib guard has it */
int clf__jv_write_str(jbuf *b, jv v);
int clf__jv_write_repr(jbuf *b, jv v);
/* json.dumps(v, ensure_ascii=False, indent, separators, sort_keys): indent
 * NULL for none; item_sep / key_sep NULL for the defaults.  -1 out of memory
 * or an error recorded on the render (a circular reference, as json.dumps
 * raises it), -2 not serializable (*bad: the type's name). */
int clf__jv_write_json(jbuf *b, jv v, const char *indent, const char *item_sep, const char *key_sep, int sort_keys,
                  const char **bad);
void clf__jv_float_repr(double f, char out[40]);
/* The number literals of a JSON text in document order, the order cJSON's
 * tree is walked in: whether each was written as an int (no '.', 'e', 'E';
 * within 64 bits) and then its exact value.  cJSON keeps only a double. */
typedef struct jnums { size_t n, next; int64_t *ival; unsigned char *is_int; } jnums;
int clf__jv_scan_numbers(const char *json, jnums *out); /* -1 out of memory */
void clf__jv_free_numbers(jnums *nums);
/* A cJSON tree (a const void *) as a value; nums (may be NULL) the number
 * literals of its text, consumed in order. */
jv clf__jv_from_cjson(jstate *J, const void *json, jnums *nums);

/* ---- the render's budget (jinja_value.c) ---- */
/* Charges work to the render running on this thread (outside a render:
 * nothing): steps (iterations, calls, filters and tests, list items made,
 * dict entries searched) and bytes (text produced, copied or searched).
 * -1 when the render's budget is used up: CLF_E_LIMIT is then recorded on
 * it, naming the budget and the template position, and every later charge
 * fails too. */
int clf__j_charge(uint64_t steps, uint64_t bytes);
/* What a byte costs in the operations that handle text a character at a
 * time (case mapping twice this, replace, split, format, escaping, tojson,
 * slices, indent): charged as this many bytes a byte, before the work. */
#define CLF__J_SLOW 8

/* ---- tokens and the tree ---- */
typedef enum {
  JT_TEXT, JT_VAR_BEGIN, JT_VAR_END, JT_BLOCK_BEGIN, JT_BLOCK_END, JT_NAME, JT_STRING, JT_INT, JT_FLOAT, JT_OP,
  JT_EOF
} jtok_type;

typedef struct jtok {
  jtok_type t;
  int line, col;
  char *s;  /* text / name / string contents / operator (malloc'd) */
  size_t n;
  int64_t i;
  double f;
} jtok;

/* Lexes src into *toks (*n of them, the last JT_EOF).  CLF_E_FORMAT with
 * line:column on a lexical error (message recorded with clf__fail). */
clf_status clf__j_lex(const char *src, jtok **toks, size_t *n);
void clf__j_free_tokens(jtok *toks, size_t n);

typedef enum {
  /* expressions */
  JN_LIT, JN_NAME, JN_LIST, JN_TUPLE, JN_DICT, JN_ATTR, JN_SUBSCRIPT, JN_SLICE, JN_CALL, JN_KWARG, JN_FILTER,
  JN_TEST, JN_BINOP, JN_NEG, JN_POS, JN_NOT, JN_AND, JN_OR, JN_COMPARE, JN_COND,
  /* statements */
  JN_BODY, JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SETBLOCK, JN_MACRO, JN_GENERATION, JN_FILTERBLOCK,
  JN_BREAK, JN_CONTINUE, JN_CALLBLOCK
} jn_kind;

/* JN_MACRO's op: the special names its body reads (implicit parameters) */
enum { JM_CALLER = 1, JM_KWARGS = 2, JM_VARARGS = 4 };

/* binary and comparison operators */
enum { JO_ADD, JO_SUB, JO_MUL, JO_DIV, JO_FLOORDIV, JO_MOD, JO_POW, JO_CONCAT,
       JO_EQ, JO_NE, JO_LT, JO_LE, JO_GT, JO_GE, JO_IN, JO_NOTIN };

typedef struct jnode {
  jn_kind k;
  int line, col;
  int op;       /* JO_*; JN_TEST: negated; JN_MACRO: JM_* */
  char *name;   /* names, attributes, filters, tests, keyword names */
  jv lit;       /* JN_LIT, JN_TEXT */
  struct jnode *a, *b, *c, *d, *e; /* JN_CALL, JN_FILTER, JN_TEST: d *args, e **kwargs */
  struct jnode **kids;
  size_t nkids;
  int fid;      /* JN_FILTER / JN_TEST: the builtin's index */
} jnode;

typedef struct jtemplate {
  jnode *root;
  jnode **all; /* every node, for freeing */
  size_t nall, capall;
} jtemplate;

/* Parses src.  CLF_E_FORMAT (syntax, with line:column), CLF_E_UNSUPPORTED
 * (naming the construct and line:column), CLF_E_OUT_OF_MEMORY. */
clf_status clf__j_parse(const char *src, jtemplate **out);
void clf__j_free(jtemplate *t);
/* Renders with the variables of `vars` (a JSON object, a cJSON *; parsed
 * from vars_text when not NULL, which tells its ints from its floats) over
 * those of `base` (may be NULL).  *out malloc'd.  CLF_E_INVALID_ARG with
 * the template's message on a template error. */
/* budget: the limits (NULL: the defaults); cost (may be NULL): what the
 * render used, memory its peak. */
clf_status clf__j_render(const jtemplate *t, const void *base, const void *vars, const char *vars_text,
                         const clf_template_budget *budget, clf_template_budget *cost, char **out);

/* ---- builtins (jinja_filters.c: filters; jinja_methods.c: methods,
 * tests and globals) ---- */
int clf__j_filter_id(const char *name); /* -1 when not implemented */
int clf__j_test_id(const char *name);
int clf__j_global_id(const char *name);

/* The evaluator's services for the builtins (jinja_eval.c). */
int clf__j_fail(jstate *J, const jnode *at, const char *fmt, ...)
#ifdef __GNUC__
    __attribute__((format(printf, 3, 4)))
#endif
    ;
int clf__j_failed(const jstate *J);
int clf__j_step(jstate *J, const jnode *at); /* counts a step; -1 past the budget */
int clf__j_steps(jstate *J, const jnode *at, size_t n); /* counts n steps */
jv clf__j_getattr(jstate *J, const jnode *at, jv obj, const char *name);
jv clf__j_getitem(jstate *J, const jnode *at, jv obj, jv key);

/* A call's arguments: positional, then keyword (names). */
typedef struct jargs { jv *pos; size_t npos; jv *kw; const char **kwn; size_t nkw; } jargs;
/* The argument `name` at position `i` (or keyword), borrowed; JV_UNDEF + *given 0 when absent. */
jv clf__j_arg(const jargs *a, size_t i, const char *name, int *given);
jv clf__j_apply_filter(jstate *J, const jnode *at, int fid, jv v, const jargs *a);
int clf__j_apply_test(jstate *J, const jnode *at, int tid, jv v, const jargs *a); /* 0/1, -1 error */
jv clf__j_call_global(jstate *J, const jnode *at, int gid, const jargs *a);
jv clf__j_call_method(jstate *J, const jnode *at, int mid, jv self, const jargs *a);
int clf__j_method_id(jv self, const char *name); /* -1 none; -2 refused by the sandbox */
jv clf__j_to_str(jstate *J, jv v); /* str(v) as a new JV_STR */

#endif
