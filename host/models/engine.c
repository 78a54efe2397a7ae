/* engine.c - many sequences of one decoder model at once (clformer.h's
 * clf_engine; docs/engine.md): the scheduler over the block pools and
 * their prefix cache (engine_blocks.c), and the step that runs every
 * scheduled row through the family's body over the paged cache (blocks.c's
 * attn_paged).
 *
 * Locking: `lock` guards the queues (incoming, waiting, running) and the
 * flags other threads set (cancelled); the step holds it while it plans
 * and while it takes finished sequences off the lists, and not during the
 * forward pass or the callbacks, which may submit or cancel.  `step_lock`
 * lets one thread step at a time.  Only the stepping thread frees a
 * sequence or touches its tokens and blocks.
 */
#include "engine.h"

#include "base/checked.h"
#include "base/limits.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- queues ---- */

static void list_append(seq **head, seq *s) {
  s->next = NULL;
  while (*head) head = &(*head)->next;
  *head = s;
}

/* The submitted sequences join the end of the waiting queue, in order,
 * in one splice (under the lock). */
static void take_incoming(clf_engine *e) {
  seq **tail = &e->waiting;
  while (*tail) tail = &(*tail)->next;
  *tail = e->incoming;
  e->incoming = NULL;
}

static int list_remove(seq **head, seq *s) {
  for (; *head; head = &(*head)->next)
    if (*head == s) {
      *head = s->next;
      s->next = NULL;
      return 1;
    }
  return 0;
}

static size_t list_len(const seq *s) {
  size_t n = 0;
  for (; s; s = s->next) n++;
  return n;
}

static void seq_free(seq *s) {
  if (!s) return;
  free(s->tok), free(s->blk[0]), free(s->blk[1]), free(s->error), free(s);
}

static void seq_free_all(seq *s) {
  while (s) {
    seq *next = s->next;
    seq_free_all(s->forks);
    seq_free(s);
    s = next;
  }
}

/* s ends: off its list (under the lock), its blocks given back, onto
 * `done` for its on_done after the lock. */
static void finish(clf_engine *e, seq *s, clf_finish_reason why, seq **done) {
  list_remove(s->state == SEQ_RUNNING ? &e->running : &e->waiting, s);
  clf__eng_release(e, s);
  s->why = why;
  s->next = *done;
  *done = s;
  /* copies not yet made from it end with it (their request ended) */
  while (s->forks) {
    seq *f = s->forks;
    s->forks = f->next;
    f->why = why == CLF_FINISH_ERROR ? why : CLF_FINISH_CANCELLED;
    if (s->error && !f->error) f->error = strdup(s->error);
    f->next = *done;
    *done = f;
  }
}

static void report_done(seq *done) {
  while (done) {
    seq *s = done;
    done = s->next;
    const clf_sequence_end end = {s->why, s->error, s->prompt_len, s->n - s->prompt_len, s->cached};
    if (s->on_done) s->on_done(s->user, s->id, &end);
    seq_free(s);
  }
}

/* ---- creation ---- */

const char *clf_finish_name(clf_finish_reason why) {
  switch (why) {
#define FINISH_CASE(NAME, value, name) \
  case CLF_FINISH_##NAME:              \
    return name;
    CLF_FINISH_MAP(FINISH_CASE)
#undef FINISH_CASE
  }
  return "unknown";
}

void clf_engine_options_init(clf_engine_options *o) {
  if (o) memset(o, 0, sizeof *o);
}

/* The rows of a step by default: on a CPU, the fewest rows one launch of
 * the skinny product takes for any weight type a linear layer reads (64,
 * or what `probe --tune` measured per type: a GGUF file mixes them), past
 * which a product expands its weights for CLBlast, whose kernels a process
 * builds on first use (on Intel's runtime a step of more rows cost 2.6 s
 * more, in every process: docs/performance.md); elsewhere 256, the GEMM's
 * ground. */
static size_t engine_step_rows(const clf_context *ctx) {
  if (!ctx->caps.is_cpu) return 256;
  size_t rows = 256;
  for (size_t i = 0; i < clf_dtype_count(); i++) {
    clf_dtype_desc d;
    if (clf_dtype_at(i, &d) != CLF_OK || !d.linear_weight) continue;
    const size_t r = clf__skinny_max_rows(ctx, d.dtype, 0, NULL);
    if (r < rows) rows = r;
  }
  return rows < 16 ? 16 : rows;
}

clf_status clf_engine_create(clf_model *m, const clf_engine_options *o, clf_engine **out) {
  static const char op[] = "clf_engine_create";
  if (!out) return clf__fail(m ? m->ctx : NULL, CLF_E_INVALID_ARG, "%s: out is NULL", op);
  *out = NULL;
  if (!m) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: model is NULL", op);
  clf_context *ctx = m->ctx;
  clf__decoder *d = m->dec;
  if (!d || !d->head || m->is_encdec || !m->vocab)
    return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: this %s model is not a decoder-only language model", op, m->type);
  if (d->no_engine) return clf__fail(ctx, CLF_E_UNSUPPORTED, "%s: %s: %s", op, m->type, d->no_engine);
  clf_engine_options z = {0};
  if (!o) o = &z;
  clf_engine *e = calloc(1, sizeof *e);
  if (!e) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  e->m = m, e->d = d, e->n_layers = d->kv.n_layers, e->V = m->vocab;
  e->BS = o->block_size ? o->block_size : 16;
  e->max_rows = o->max_step_rows ? o->max_step_rows : engine_step_rows(ctx);
  e->max_seqs = o->max_sequences ? o->max_sequences : 64;
  e->kv_dtype = o->kv_dtype;
  e->next_id = 1;
  pthread_mutex_init(&e->lock, NULL);
  pthread_mutex_init(&e->step_lock, NULL);
  clf_status st = CLF_OK;
  size_t logits;
  if (e->kv_dtype != CLF_F32 && e->kv_dtype != CLF_F16)
    st = clf__fail(ctx, CLF_E_INVALID_ARG, "%s: kv_dtype %s: the pool holds f32 or f16", op,
                   clf_dtype_name(e->kv_dtype));
  else if (e->BS > 1024 || e->max_rows > 65536 || e->max_seqs > 4096)
    st = clf__fail(ctx, CLF_E_INVALID_ARG, "%s: block_size %zu, max_step_rows %zu or max_sequences %zu is past its "
                   "limit (1024, 65536, 4096)", op, e->BS, e->max_rows, e->max_seqs);
  else if (!clf__mul_ok(e->max_seqs, e->V, &logits) || logits > CLF_LIMIT_STEP_LOGITS)
    st = clf__fail(ctx, CLF_E_INVALID_ARG, "%s: %zu sequences x a vocabulary of %zu is more logits per step than the "
                   "limit of %zu", op, e->max_seqs, e->V, CLF_LIMIT_STEP_LOGITS);
  else if ((e->logits = malloc(e->max_seqs * e->V * sizeof *e->logits + 1)) == NULL ||
           (e->tmp = malloc(e->V * sizeof *e->tmp + 1)) == NULL ||
           (e->row = malloc(e->V * sizeof *e->row + 1)) == NULL ||
           (e->mask = malloc((e->V + 31) / 32 * sizeof *e->mask + 1)) == NULL ||
           (e->sc = malloc(e->max_seqs * sizeof *e->sc + 1)) == NULL ||
           (e->snap = malloc(e->max_seqs * sizeof *e->snap + 1)) == NULL)
    st = clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  else if ((st = clf__eng_layers(e)) == CLF_OK)
    st = clf__eng_pool(e, o);
  if (st != CLF_OK) {
    clf_engine_destroy(e);
    return st;
  }
  e->st.blocks = e->p[0].NB, e->st.block_size = e->BS, e->st.block_bytes = e->p[0].bytes;
  if (e->n_pools > 1) e->st.window_blocks = e->p[1].NB, e->st.window_block_bytes = e->p[1].bytes;
  *out = e;
  return CLF_OK;
}

/* ---- submission and cancellation ---- */

/* One sequence of request r, with its own sampler seed. */
static clf_status seq_make(clf_engine *e, const clf_engine_request *r, uint64_t seed, seq **out) {
  static const char op[] = "clf_engine_submit";
  clf_model *m = e->m;
  const size_t limit = e->d->limit;
  clf_generate_options o;
  if (r->options) o = *r->options;
  else clf_generate_options_init(&o);
  o.seed = seed;
  seq *s = *out = calloc(1, sizeof *s);
  if (!s) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  clf_status st = clf__gen_row_init(m, NULL, &o, r->n_ids, limit, &s->rules);
  const size_t blocks = (s->rules.max_len + e->BS - 1) / e->BS;
  for (size_t g = 0; g < e->n_pools && st == CLF_OK; g++) {
    const size_t held = clf__eng_held(e, g, s->rules.max_len);
    if (held > e->p[g].NB)
      st = clf__fail(NULL, CLF_E_INVALID_ARG, "%s: a sequence of up to %zu positions needs %zu blocks at once%s, "
                     "more than the pool's %zu (set max_new_tokens, or a larger kv_bytes)", op, s->rules.max_len, held,
                     g ? " for its windowed layers" : "", e->p[g].NB);
  }
  if (st == CLF_OK && ((s->tok = malloc(s->rules.max_len * sizeof *s->tok)) == NULL ||
                       (s->blk[0] = malloc(blocks * sizeof *s->blk[0] + 1)) == NULL ||
                       (e->n_pools > 1 && (s->blk[1] = malloc(blocks * sizeof *s->blk[1] + 1)) == NULL)))
    st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "%s: out of host memory", op);
  if (st != CLF_OK) return st;
  memcpy(s->tok, r->ids, r->n_ids * sizeof *s->tok);
  s->n = s->prompt_len = r->n_ids;
  s->isolation = r->isolation;
  s->on_token = r->on_token, s->on_done = r->on_done, s->user = r->user;
  s->on_token_info = r->on_token_info, s->allowed = r->allowed, s->top_logprobs = r->top_logprobs;
  s->state = SEQ_WAITING;
  return CLF_OK;
}

clf_status clf_engine_submit(clf_engine *e, const clf_engine_request *r, uint64_t *id) {
  static const char op[] = "clf_engine_submit";
  if (!e) return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: engine is NULL", op);
  clf_model *m = e->m;
  if (!r || !r->ids || !r->n_ids)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: the request has no prompt (ids NULL or n_ids 0)", op);
  const size_t limit = e->d->limit, n = r->n ? r->n : 1;
  if (r->n_ids >= limit)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: a prompt of %zu tokens leaves no position to generate in %s's %zu "
                     "(%s)", op, r->n_ids, m->type, limit, e->d->limit_key);
  if (n > CLF_ENGINE_MAX_N || r->top_logprobs > CLF_ENGINE_MAX_TOP_LOGPROBS)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: n %zu or top_logprobs %zu is past its limit (%d, %d)", op, n,
                     r->top_logprobs, CLF_ENGINE_MAX_N, CLF_ENGINE_MAX_TOP_LOGPROBS);
  if (n > e->max_seqs)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: n %zu copies are more than the engine's max_sequences %zu (they "
                     "run together)", op, n, e->max_seqs);
  for (size_t i = 0; i < r->n_ids; i++)
    if (r->ids[i] < 0 || (uint64_t)r->ids[i] >= m->in_vocab)
      return clf__fail(NULL, CLF_E_INVALID_ARG, "%s: ids[%zu] is %lld, outside the vocabulary (0 to %zu)", op, i,
                       (long long)r->ids[i], m->in_vocab - 1);
  const uint64_t seed = r->options ? r->options->seed : 0;
  seq *lead = NULL, **tail = NULL;
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n; i++) {
    seq *s = NULL;
    if ((st = seq_make(e, r, seed ? seed + i : 0, &s)) != CLF_OK) {
      seq_free(s);
      break;
    }
    if (!lead) lead = s, tail = &s->forks;
    else *tail = s, tail = &s->next;
  }
  if (st != CLF_OK) {
    seq_free_all(lead);
    return st;
  }
  pthread_mutex_lock(&e->lock);
  lead->id = e->next_id++;
  for (seq *f = lead->forks; f; f = f->next) f->id = e->next_id++;
  list_append(&e->incoming, lead);
  pthread_mutex_unlock(&e->lock);
  if (id) *id = lead->id;
  return CLF_OK;
}

clf_status clf_engine_cancel(clf_engine *e, uint64_t id) {
  if (!e) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_engine_cancel: engine is NULL");
  int found = 0;
  pthread_mutex_lock(&e->lock);
  seq *lists[3] = {e->incoming, e->waiting, e->running};
  for (int l = 0; l < 3 && !found; l++)
    for (seq *s = lists[l]; s && !found; s = s->next) {
      if (s->id == id) s->cancelled = found = 1;
      for (seq *f = s->forks; f && !found; f = f->next)
        if (f->id == id) f->cancelled = found = 1;
    }
  pthread_mutex_unlock(&e->lock);
  if (!found)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_engine_cancel: no sequence %llu is queued or running",
                     (unsigned long long)id);
  return CLF_OK;
}

/* ---- planning (under the lock) ---- */

/* s goes back to wait at the head of the queue, its blocks given back: it
 * is recomputed from its tokens when admitted again. */
static void preempt(clf_engine *e, seq *s) {
  list_remove(&e->running, s);
  clf__eng_release(e, s);
  s->computed = 0;
  s->state = SEQ_WAITING;
  s->next = e->waiting;
  e->waiting = s;
  e->st.preemptions++;
}

/* The newest running sequence other than `keep`, NULL when none. */
static seq *newest_running(clf_engine *e, const seq *keep) {
  seq *best = NULL;
  for (seq *s = e->running; s; s = s->next)
    if (s != keep && (!best || s->order > best->order)) best = s;
  return best;
}

/* A free block for s, preempting the newest running sequences while the
 * pool has none (their rows in this step dropped); NIL when s itself had
 * to wait. */
static uint32_t take_for(clf_engine *e, seq *s, size_t g, size_t n_sc, size_t *rows) {
  for (;;) {
    const uint32_t b = clf__eng_take(e, g);
    if (b != NIL) return b;
    seq *v = newest_running(e, s);
    if (!v || v->order < s->order) v = s;
    for (size_t i = 0; i < n_sc; i++)
      if (e->sc[i].live && e->sc[i].s == v) e->sc[i].live = 0, *rows -= e->sc[i].count;
    preempt(e, v);
    if (v == s) return NIL;
  }
}

/* Blocks of s for its positions up to `upto`, one of each pool a block
 * of positions.  0 when s had to wait. */
static int grow(clf_engine *e, seq *s, size_t upto, size_t n_sc, size_t *rows) {
  while (s->nblk * e->BS < upto) {
    uint32_t b[2];
    for (size_t g = 0; g < e->n_pools; g++)
      if ((b[g] = take_for(e, s, g, n_sc, rows)) == NIL) {
        for (size_t h = 0; h < g; h++) clf__eng_drop(&e->p[h], b[h]);
        return 0;
      }
    for (size_t g = 0; g < e->n_pools; g++) s->blk[g][s->nblk] = b[g];
    s->nblk++;
  }
  return 1;
}

/* Copy-on-write: the block s writes to next (position `computed`), when
 * other copies of its request hold it too, becomes a copy of its own (one
 * device copy a layer of its pool for K and for V).  Only a forked
 * request's last, partly filled prompt block is ever shared and written:
 * full blocks are never written.  0 when s had to wait; the copy's error
 * in *err. */
static int unshare(clf_engine *e, seq *s, size_t n_sc, size_t *rows, clf_status *err) {
  const size_t bi = s->computed / e->BS;
  for (size_t g = 0; g < e->n_pools && bi < s->nblk; g++) {
    pool *p = &e->p[g];
    if (p->b[s->blk[g][bi]].ref <= 1) continue;
    const uint32_t nb = take_for(e, s, g, n_sc, rows);
    if (nb == NIL) return 0;
    const uint32_t old = s->blk[g][bi];
    if (p->b[old].ref <= 1) { /* a preemption just now left it to s alone */
      clf__eng_drop(p, nb);
      continue;
    }
    clf_context *ctx = e->m->ctx;
    const size_t row = e->d->kv_heads * e->BS * e->d->dh;
    for (size_t l = 0; l < 2 * e->n_layers && *err == CLF_OK; l++) {
      if (e->layer_pool[l % e->n_layers] != g) continue;
      clf_tensor *t = l < e->n_layers ? e->k[l] : e->v[l - e->n_layers], *src = NULL, *dst = NULL;
      if ((*err = clf_tensor_view(t, old * row, 1, &row, &src)) == CLF_OK &&
          (*err = clf_tensor_view(t, nb * row, 1, &row, &dst)) == CLF_OK)
        *err = clf_tensor_copy(ctx, src, dst, NULL);
      clf_tensor_destroy(src), clf_tensor_destroy(dst);
    }
    p->b[old].ref--;
    s->blk[g][bi] = nb;
    e->st.blocks_copied++;
  }
  return 1;
}

/* The running sequences and the copies their prompts will fork. */
static size_t running_slots(const clf_engine *e) {
  size_t n = 0;
  for (const seq *s = e->running; s; s = s->next) n += 1 + list_len(s->forks);
  return n;
}

/* Fills e->sc with this step's rows: decode rows of the running first,
 * then their unfinished prompts, then newly admitted sequences (FIFO,
 * while their whole prompt's blocks are free).  Returns the entries. */
static size_t plan(clf_engine *e, size_t *rows, clf_status *err) {
  size_t n_sc = 0, n_run = 0;
  *rows = 0;
  /* A snapshot: grow() may preempt sequences of the list while it is walked. */
  for (seq *s = e->running; s; s = s->next) e->snap[n_run++] = s;
  const size_t preempted = e->st.preemptions;
  for (int pass = 0; pass < 2; pass++)
    for (size_t i = 0; i < n_run; i++) {
      seq *s = e->snap[i];
      if (s->state != SEQ_RUNNING) continue;
      const size_t need = s->n - s->computed;
      if ((pass == 0) != (need == 1) || *rows >= e->max_rows) continue;
      const size_t count = need < e->max_rows - *rows ? need : e->max_rows - *rows;
      if (!unshare(e, s, n_sc, rows, err) || !grow(e, s, s->computed + count, n_sc, rows)) continue;
      e->sc[n_sc++] = (sched){s, s->computed, count, 0, 1};
      *rows += count;
    }
  /* None admitted after a preemption: the pool is short (and the one sent
   * back, at the head of the queue, must not run twice in this step). */
  while (e->st.preemptions == preempted && e->waiting && *rows < e->max_rows) {
    seq *s = e->waiting;
    /* room for it and the copies its prompt will fork: the running never
     * pass max_sequences (e->sc and e->snap hold that many) */
    if (running_slots(e) + 1 + list_len(s->forks) > e->max_seqs) break;
    clf__eng_admit_prefix(e, s);
    clf__eng_window_release(e, s);
    /* free blocks for all its prompt will hold at once: the whole prompt,
     * or with a window the most it holds while its chunks pass */
    int fits = 1;
    for (size_t g = 0; g < e->n_pools; g++) {
      const size_t hold = clf__eng_held(e, g, s->n), held = s->nblk - s->first[g];
      if (hold > held && hold - held > e->p[g].n_free) fits = 0;
    }
    if (!fits) {
      e->st.prefix_tokens_reused -= s->computed;
      clf__eng_release(e, s);
      s->computed = s->cached = 0;
      break;
    }
    const size_t need = s->n - s->computed, count = need < e->max_rows - *rows ? need : e->max_rows - *rows;
    /* (with a window, only this step's: the window's pool holds less) */
    grow(e, s, e->p[e->n_pools - 1].W ? s->computed + count : s->n, n_sc, rows); /* cannot preempt: they are free */
    e->waiting = s->next;
    s->state = SEQ_RUNNING;
    s->order = e->next_order++;
    list_append(&e->running, s);
    e->sc[n_sc++] = (sched){s, s->computed, count, 0, 1};
    *rows += count;
  }
  return n_sc;
}

/* ---- the step ---- */

/* The i64 metadata of the step in one upload: ids [T], pos [T], seq [T],
 * slot [pools, T], gather [R], table [pools, S, maxb]. */
static clf_status upload(clf_engine *e, size_t n_sc, size_t T, size_t *R, clf__paged_step *ps) {
  clf_context *ctx = e->m->ctx;
  const size_t P = e->n_pools;
  size_t S = 0, maxb = 1;
  for (size_t i = 0; i < n_sc; i++)
    if (e->sc[i].live) {
      S++;
      if (e->sc[i].s->nblk > maxb) maxb = e->sc[i].s->nblk;
    }
  const size_t total = (3 + P) * T + S + P * S * maxb;
  clf__written_wait(&e->host_written); /* the last step's: done by now unless that step failed */
  if (total > e->host_cap) {
    int64_t *h = realloc(e->host, total * sizeof *h);
    if (!h) return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_engine_step: out of host memory");
    e->host = h, e->host_cap = total;
  }
  if (total > e->meta_cap) {
    clf_tensor_destroy(e->meta);
    e->meta = NULL, e->meta_cap = 0;
    clf_status st = clf_tensor_create(ctx, CLF_I64, 1, (size_t[]){total * 2}, &e->meta);
    if (st != CLF_OK) return st;
    e->meta_cap = total * 2;
  }
  int64_t *ids = e->host, *pos = ids + T, *sq = pos + T, *slot = sq + T, *gather = slot + P * T;
  size_t r = 0, si = 0;
  *R = 0;
  for (size_t i = 0; i < n_sc; i++) {
    sched *c = &e->sc[i];
    if (!c->live) continue;
    c->row0 = r;
    for (size_t p = c->start; p < c->start + c->count; p++, r++) {
      ids[r] = c->s->tok[p], pos[r] = (int64_t)p, sq[r] = (int64_t)si;
      for (size_t g = 0; g < P; g++)
        slot[g * T + r] = (int64_t)c->s->blk[g][p / e->BS] * (int64_t)e->BS + (int64_t)(p % e->BS);
    }
    if (c->start + c->count == c->s->n) gather[(*R)++] = (int64_t)(r - 1);
    si++;
  }
  int64_t *table = gather + *R;
  const size_t tab = S * maxb;
  si = 0;
  for (size_t i = 0; i < n_sc; i++) {
    if (!e->sc[i].live) continue;
    const seq *s = e->sc[i].s;
    /* blocks given back (j < first): never read, any block will do */
    for (size_t g = 0; g < P; g++)
      for (size_t j = 0; j < maxb; j++)
        table[g * tab + si * maxb + j] = j >= s->first[g] && j < s->nblk ? (int64_t)s->blk[g][j] : 0;
    si++;
  }
  const size_t used = (3 + P) * T + *R + P * tab;
  clf_tensor *view = NULL;
  clf_status st = clf_tensor_view(e->meta, 0, 1, &used, &view);
  /* not waited for: the host would sleep through the device's copy before
   * the step's first launch (the step's logits are waited for, after it) */
  if (st == CLF_OK) st = clf__tensor_write(ctx, view, e->host, used * sizeof *e->host, &e->host_written);
  clf_tensor_destroy(view);
  for (size_t g = 0; g < P; g++)
    ps->pm[g] = (clf__paged_meta){e->meta, T, 2 * T, (3 + g) * T, (3 + P) * T + *R + g * tab, T, S, maxb, e->BS};
  ps->pool = e->layer_pool;
  ps->k = e->k, ps->v = e->v;
  return st;
}

/* The forward pass of T rows, and the logits [R, V] of the gathered rows. */
static clf_status forward(clf_engine *e, size_t n_sc, size_t T, size_t *R) {
  clf_model *m = e->m;
  clf_context *ctx = m->ctx;
  clf__decoder *d = e->d;
  clf__paged_step ps;
  clf_status st = upload(e, n_sc, T, R, &ps);
  if (st != CLF_OK) return st;
  clf_tensor *ids = NULL, *pos = NULL, *gather = NULL, *a, *row, *lg;
  int64_t max_pos = 0;
  for (size_t i = 0; i < T; i++) max_pos = e->host[T + i] > max_pos ? e->host[T + i] : max_pos;
  if ((st = clf_tensor_view(e->meta, 0, 2, (size_t[]){1, T}, &ids)) == CLF_OK &&
      (st = clf_tensor_view(e->meta, T, 2, (size_t[]){1, T}, &pos)) == CLF_OK &&
      (st = clf_tensor_view(e->meta, (3 + e->n_pools) * T, 2, (size_t[]){1, *R}, &gather)) == CLF_OK) {
    const clf__step s = {ids, pos, NULL, 0, max_pos, 1, &ps};
    /* every row gathered in order (decoding steps): the head reads a as
     * it is, no gather (a launch a step) */
    const int64_t *gi = e->host + (3 + e->n_pools) * T;
    int ident = *R == T;
    for (size_t i = 0; ident && i < T; i++) ident = gi[i] == (int64_t)i;
    if ((st = d->body(m, &s, &a)) == CLF_OK && *R &&
        (st = clf__ws_get(ctx, d->ws, CLF__WS_LOGITS, CLF_F32, 3, (size_t[]){1, *R, d->V}, &lg)) == CLF_OK &&
        (ident ||
         ((st = clf__ws_get(ctx, d->ws, CLF__WS_ROW, CLF_F32, 3, (size_t[]){1, *R, d->D}, &row)) == CLF_OK &&
          (st = clf_gather_rows(ctx, a, 0, gather, row, 0, NULL)) == CLF_OK)) &&
        (st = clf__decoder_head(m, ctx, ident ? a : row, lg)) == CLF_OK)
      st = clf_tensor_download(ctx, lg, e->logits, *R * d->V * sizeof *e->logits);
  }
  clf_tensor_destroy(ids), clf_tensor_destroy(pos), clf_tensor_destroy(gather);
  return st;
}

/* info for token t under the model's scores x [V]: its log-softmax, and
 * the k most probable tokens (ties by lower id) into ids / lp. */
static void token_info(const float *x, size_t V, int64_t t, size_t k, int64_t *ids, float *lp, clf_token_info *info) {
  double mx = -INFINITY, sum = 0;
  for (size_t v = 0; v < V; v++) mx = x[v] > mx ? x[v] : mx;
  for (size_t v = 0; v < V; v++) sum += exp((double)x[v] - mx);
  const double lse = mx + log(sum);
  size_t n = 0;
  for (size_t v = 0; v < V && k; v++) {
    if (n == k && !(x[v] > lp[n - 1])) continue;
    size_t i = n < k ? n++ : k - 1;
    for (; i > 0 && x[v] > lp[i - 1]; i--) lp[i] = lp[i - 1], ids[i] = ids[i - 1];
    lp[i] = x[v], ids[i] = (int64_t)v;
  }
  for (size_t i = 0; i < n; i++) lp[i] = (float)(lp[i] - lse);
  *info = (clf_token_info){t, (float)(x[t] - lse), n, ids, lp};
}

/* s's next token from the model's scores raw [V] (its mask, processors
 * and sampler on a copy), handed to its callback; s->why set when it
 * ends. */
static void next_token(clf_engine *e, seq *s, const float *raw) {
  const size_t V = e->V;
  memcpy(e->row, raw, V * sizeof *e->row);
  if (s->allowed) {
    const size_t W = (V + 31) / 32;
    size_t kept = 0;
    memset(e->mask, 0xff, W * sizeof *e->mask);
    if (s->allowed(s->user, s->id, s->tok, s->n, e->mask, V)) {
      s->why = CLF_FINISH_STOPPED;
      return;
    }
    for (size_t v = 0; v < V; v++) {
      if (e->mask[v / 32] >> (v % 32) & 1u) kept++;
      else e->row[v] = -INFINITY;
    }
    if (!kept) {
      s->error = strdup("clf_engine_step: the request's allowed callback forbade every token");
      s->why = CLF_FINISH_ERROR;
      return;
    }
  }
  const int64_t t = clf__gen_row_next(e->m, &s->rules, s->tok, s->n, e->row, e->tmp);
  s->tok[s->n++] = t;
  int stop = 0;
  if (s->on_token_info) {
    int64_t ids[CLF_ENGINE_MAX_TOP_LOGPROBS];
    float lp[CLF_ENGINE_MAX_TOP_LOGPROBS];
    clf_token_info info;
    token_info(raw, V, t, s->top_logprobs, ids, lp, &info);
    stop = s->on_token_info(s->user, s->id, &info);
  } else if (s->on_token) {
    stop = s->on_token(s->user, s->id, t);
  }
  if (stop) s->why = CLF_FINISH_STOPPED;
  else if (clf__gen_row_eos(&s->rules, t)) s->why = CLF_FINISH_EOS;
  else if (s->n >= s->rules.max_len) s->why = s->rules.by_limit ? CLF_FINISH_CONTEXT : CLF_FINISH_LENGTH;
}

/* The other copies of s's request, made now that its prompt is computed:
 * its blocks shared, each its first token from the same scores. */
static void fork_copies(clf_engine *e, seq *s, const float *raw) {
  for (seq *f = s->forks; f; f = f->next) {
    if (f->cancelled) {
      f->why = CLF_FINISH_CANCELLED;
      continue;
    }
    f->computed = s->computed, f->nhashed = s->nhashed, f->chain = s->chain, f->cached = s->cached;
    for (size_t g = 0; g < e->n_pools; g++) {
      for (size_t j = 0; j < s->nblk; j++)
        if ((f->blk[g][j] = s->blk[g][j]) != NIL) e->p[g].b[f->blk[g][j]].ref++;
      f->first[g] = s->first[g];
    }
    f->nblk = s->nblk;
    next_token(e, f, raw);
  }
}

/* After the pass: each sequence's positions computed, a token for those
 * whose rows reached their end (callbacks without the lock; forks made
 * from prompts that are complete); why set for those that end. */
static void sample(clf_engine *e, size_t n_sc) {
  size_t r = 0;
  for (size_t i = 0; i < n_sc; i++) {
    sched *c = &e->sc[i];
    if (!c->live) continue;
    seq *s = c->s;
    s->computed = c->start + c->count;
    if (s->computed != s->n) continue;
    const float *raw = e->logits + r++ * e->V;
    if (s->forks) fork_copies(e, s, raw), s->forked = 1;
    next_token(e, s, raw);
  }
}

/* The copies forked from s join the running (or end), under the lock. */
static void forks_join(clf_engine *e, seq *s, seq **done) {
  seq *f = s->forks;
  s->forks = NULL;
  while (f) {
    seq *next = f->next;
    f->state = SEQ_RUNNING;
    f->order = e->next_order++;
    if (f->why) {
      f->next = NULL;
      finish(e, f, f->why, done);
    } else {
      clf__eng_register(e, f);
      clf__eng_window_release(e, f);
      list_append(&e->running, f);
    }
    f = next;
  }
}

clf_status clf_engine_step(clf_engine *e, size_t *pending) {
  if (pending) *pending = 0;
  if (!e) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_engine_step: engine is NULL");
  pthread_mutex_lock(&e->step_lock);
  seq *done = NULL;
  pthread_mutex_lock(&e->lock);
  take_incoming(e);
  for (int l = 0; l < 2; l++)
    for (seq *s = l ? e->running : e->waiting, *next; s; s = next) {
      next = s->next;
      if (s->cancelled) finish(e, s, CLF_FINISH_CANCELLED, &done);
    }
  size_t T = 0, R = 0;
  clf_status st = CLF_OK;
  const size_t n_sc = plan(e, &T, &st);
  pthread_mutex_unlock(&e->lock);

  if (st == CLF_OK && T) st = forward(e, n_sc, T, &R);
  if (st == CLF_OK && T) {
    sample(e, n_sc);
    e->st.steps++, e->st.rows += T;
  }

  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < n_sc; i++) {
    seq *s = e->sc[i].s;
    if (!e->sc[i].live) continue;
    if (st != CLF_OK) {
      s->error = strdup(clf_last_error(e->m->ctx));
      finish(e, s, CLF_FINISH_ERROR, &done);
      continue;
    }
    if (s->forked) forks_join(e, s, &done), s->forked = 0;
    clf__eng_register(e, s);
    clf__eng_window_release(e, s);
    if (s->why) finish(e, s, s->why, &done);
  }
  if (pending) *pending = list_len(e->incoming) + list_len(e->waiting) + list_len(e->running);
  pthread_mutex_unlock(&e->lock);
  report_done(done);
  pthread_mutex_unlock(&e->step_lock);
  return st;
}

clf_status clf_engine_run(clf_engine *e) {
  size_t pending = 1;
  clf_status st = CLF_OK;
  while (st == CLF_OK && pending) st = clf_engine_step(e, &pending);
  return st;
}

clf_status clf_engine_stats_get(clf_engine *e, clf_engine_stats *s) {
  if (!e || !s) return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_engine_stats_get: %s is NULL",
                                 e ? "stats" : "engine");
  pthread_mutex_lock(&e->lock);
  *s = e->st;
  s->running = list_len(e->running);
  s->waiting = list_len(e->waiting) + list_len(e->incoming);
  s->blocks_used = e->p[0].NB - e->p[0].n_free;
  s->window_blocks_used = e->n_pools > 1 ? e->p[1].NB - e->p[1].n_free : 0;
  s->blocks_cached = clf__eng_cached(e);
  pthread_mutex_unlock(&e->lock);
  return CLF_OK;
}

void clf_engine_destroy(clf_engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->step_lock);
  seq *done = NULL;
  pthread_mutex_lock(&e->lock);
  take_incoming(e);
  while (e->running) finish(e, e->running, CLF_FINISH_CANCELLED, &done);
  while (e->waiting) finish(e, e->waiting, CLF_FINISH_CANCELLED, &done);
  pthread_mutex_unlock(&e->lock);
  report_done(done);
  pthread_mutex_unlock(&e->step_lock);
  for (size_t i = 0; e->k && i < e->n_layers; i++) clf_tensor_destroy(e->k[i]);
  for (size_t i = 0; e->v && i < e->n_layers; i++) clf_tensor_destroy(e->v[i]);
  clf__written_wait(&e->host_written);
  clf_tensor_destroy(e->meta);
  free(e->k), free(e->v), free(e->p[0].b), free(e->p[1].b), free(e->layer_pool), free(e->btok), free(e->bucket), free(e->host), free(e->logits), free(e->tmp);
  free(e->row), free(e->mask);
  free(e->sc), free(e->snap);
  pthread_mutex_destroy(&e->lock);
  pthread_mutex_destroy(&e->step_lock);
  free(e);
}
