/* jinja_str.h - what the Jinja modules share beyond jinja.h (internal):
 * string helpers (code points, Python's case mapping, strip, replace) and
 * the evaluator's state and entry points. */
#ifndef CLF_JINJA_STR_H
#define CLF_JINJA_STR_H

#include "jinja.h"

/* b's text as a new str (b->s freed); an error when b overflowed. */
jv clf__j_buf_str(jstate *J, jbuf *b);
/* The code point at s[*i] (advancing), U+FFFD for a bad byte. */
uint32_t clf__j_cp(const char *s, size_t n, size_t *i);
uint32_t clf__j_upper(uint32_t c);           /* Python's str.upper(), one code point to one */
void clf__j_put_lower(jbuf *b, uint32_t c);  /* Python's str.lower() */
int clf__j_is_cased(uint32_t c);
/* mode 'U' upper, 'L' lower, 'T' Python's title(), 'C' capitalize() */
jv clf__j_case(jstate *J, jv str, int mode);
/* strip (which: 1 left, 2 right, 3 both) of chars (NULL: whitespace) */
jv clf__j_strip(jstate *J, jv str, const jstr *chars, int which);
int clf__j_has_cp(const jstr *set, uint32_t c);
jv clf__j_replace(jstate *J, const jstr *s, const jstr *old, const jstr *nw, int64_t count);
/* ---- the evaluator's state and services (jinja_eval.c, jinja_exec.c) ---- */
/* The render running on this thread (set by clf__j_render for its length):
 * what the value functions charge their work and memory to. */
extern _Thread_local struct jstate *clf__j_cur;
/* Frees what a render's values left behind: the containers still alive
 * once its frames are dropped are those held only by reference cycles. */
void clf__j_free_cycles(struct jstate *J);
#define CLF__J_MAX_FRAMES 512

/* barrier: a macro's frame; lookups go on at frame `barrier - 1` (the
 * frames the macro was defined in), 0 for an ordinary frame */
typedef struct jframe { jv vars; int barrier; } jframe;

struct jstate {
  clf_status st;
  const struct jnode *at; /* the node being evaluated: where a limit is reported */
  clf_template_budget max; /* the budget, and what was used of it: */
  uint64_t steps, bytes;
  uint64_t live, peak;     /* bytes of values alive, the most at once */
  jv *objs;                /* the containers made and alive (jlist/jdict/jfunc reg) */
  size_t nobjs, capobjs;
  int depth;
  jframe fr[CLF__J_MAX_FRAMES];
  int nfr;
  int loops; /* for loops open in the current macro */
  int ctl;   /* 1 break, 2 continue pending */
};

jv clf__j_ev(jstate *J, const jnode *x);             /* a new reference; JV_UNDEF on error */
jv clf__j_lookup(jstate *J, const char *name);       /* a new reference; Undefined when unknown */
int clf__j_push_frame(jstate *J, const jnode *at, int barrier); /* barrier: jframe's */
void clf__j_pop_frame(jstate *J);
int clf__j_assign(jstate *J, const char *name, jv v); /* v taken */
jv clf__j_ev_filter(jstate *J, const jnode *x, jv in);
jv clf__j_ev_callblock(jstate *J, const jnode *x); /* {% call %}: what the macro gives */
int clf__j_exec_body(jstate *J, const jnode *b, jbuf *out);
int clf__j_oom(jstate *J);

/* The items iterating v gives (jinja_eval.c); *items malloc'd, referenced. */
int clf__j_iter(jstate *J, const jnode *at, jv v, jv **items, size_t *n);

#endif
