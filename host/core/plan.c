/* plan.c - the context's kernel plans: an op's choice of kernel, tile and
 * work-group for one shape, made once (by the op, which knows what to ask)
 * and kept here by its key, so that a call only looks it up.  What a plan
 * was made from (the tuned work-groups, the self-validation verdicts, the
 * environment as read at creation) changes only through calls that forget
 * every plan (clf__plans_forget).  A context is used by one thread at a
 * time (docs/threads-and-faults.md), so the table needs no lock.
 */
#include "core.h"

#include <string.h>

static size_t slot_of(const clf__plan_key *k) {
  size_t h = (size_t)k->op * 31u + (size_t)k->dtype;
  h = h * 31u + (size_t)k->flags;
  h = h * 1000003u + k->m;
  h = h * 1000003u + k->k;
  h = h * 1000003u + k->n;
  return h % CLF__PLAN_SLOTS;
}

static int same_key(const clf__plan_key *a, const clf__plan_key *b) {
  return a->op == b->op && a->dtype == b->dtype && a->flags == b->flags && a->m == b->m && a->k == b->k &&
         a->n == b->n;
}

const clf__plan *clf__plan_find(clf_context *ctx, const clf__plan_key *key) {
  ctx->plan_stats.lookups++;
  const size_t home = slot_of(key);
  for (size_t i = 0; i < CLF__PLAN_PROBES; i++) {
    const clf__plan *p = &ctx->plans[(home + i) % CLF__PLAN_SLOTS];
    if (!p->used) return NULL;
    if (same_key(&p->key, key)) return p;
  }
  return NULL;
}

void clf__plan_keep(clf_context *ctx, const clf__plan *plan) {
  const size_t home = slot_of(&plan->key);
  size_t at = home;
  for (size_t i = 0; i < CLF__PLAN_PROBES; i++) {
    const size_t s = (home + i) % CLF__PLAN_SLOTS;
    if (!ctx->plans[s].used || same_key(&ctx->plans[s].key, &plan->key)) {
      at = s;
      break;
    }
  }
  ctx->plans[at] = *plan; /* full near home: the home slot's plan is made again when next asked for */
  ctx->plans[at].used = 1;
  ctx->plan_stats.made++;
}

void clf__plans_forget(clf_context *ctx) {
  memset(ctx->plans, 0, sizeof ctx->plans);
  ctx->plan_stats.forgotten++;
}

void clf__plan_stats_get(const clf_context *ctx, clf__plan_stats *out) { *out = ctx->plan_stats; }
