/* engine_blocks.c - the engine's block pools (engine.h; docs/engine.md,
 * "Blocks" and "Windows"): their free lists, the prefix table, the
 * blocks a window gives back, the pairing of a mixed model's windowed
 * blocks with the full layers', and the pools' sizes.  Called under the
 * engine's lock.
 */
#include "engine.h"

#include "base/checked.h"

#include <stdlib.h>
#include <string.h>

/* ---- the free list and the prefix table ---- */

static void lru_unlink(pool *p, uint32_t i) {
  block *b = &p->b[i];
  if (b->prev != NIL) p->b[b->prev].next = b->next;
  else p->lru_head = b->next;
  if (b->next != NIL) p->b[b->next].prev = b->prev;
  else p->lru_tail = b->prev;
  b->prev = b->next = NIL;
  p->n_free--;
}

/* A free block goes to the tail (hashed: evicted last) or the head. */
static void lru_push(pool *p, uint32_t i, int tail) {
  block *b = &p->b[i];
  if (tail) {
    b->prev = p->lru_tail, b->next = NIL;
    if (p->lru_tail != NIL) p->b[p->lru_tail].next = i;
    else p->lru_head = i;
    p->lru_tail = i;
  } else {
    b->next = p->lru_head, b->prev = NIL;
    if (p->lru_head != NIL) p->b[p->lru_head].prev = i;
    else p->lru_tail = i;
    p->lru_head = i;
  }
  p->n_free++;
}

/* A holder of block i of pool p lets it go: free at ref 0, kept for reuse
 * (evicted last) when it holds a reusable prefix. */
void clf__eng_drop(pool *p, uint32_t i) {
  if (--p->b[i].ref == 0) lru_push(p, i, p->b[i].hashed);
}

static uint64_t block_key(const clf_engine *e, uint64_t parent_key, uint64_t isolation, const int64_t *tok) {
  return clf__hash64(tok, e->BS * sizeof *tok, parent_key ^ (isolation * 0x9E3779B97F4A7C15ull) ^ 0x5bd1e995u);
}

/* Block i of pool g leaves the prefix table (pool 1: its pairing with a
 * hashed block of pool 0, which its new epoch ends). */
static void unhash(clf_engine *e, size_t g, uint32_t i) {
  block *b = &e->p[g].b[i];
  if (!b->hashed) return;
  if (g) {
    b->hashed = 0;
    return;
  }
  uint32_t *p = &e->bucket[b->key & (e->nbucket - 1)];
  while (*p != NIL && *p != i) p = &e->p[0].b[*p].hnext;
  if (*p == i) *p = b->hnext;
  b->hashed = 0, b->hnext = NIL;
}

/* The hashed block holding tok after block `parent` (NIL: first) of the
 * same isolation key; NIL when none. */
static uint32_t lookup(const clf_engine *e, uint64_t key, uint64_t isolation, uint32_t parent, const int64_t *tok) {
  const block *B = e->p[0].b;
  for (uint32_t i = e->bucket[key & (e->nbucket - 1)]; i != NIL; i = B[i].hnext) {
    const block *b = &B[i];
    if (b->key == key && b->isolation == isolation && b->parent == parent &&
        (parent == NIL || b->parent_epoch == B[parent].epoch) &&
        memcmp(e->btok + (size_t)i * e->BS, tok, e->BS * sizeof *tok) == 0)
      return i;
  }
  return NIL;
}

/* A block of pool g for a sequence: the least recently freed, unhashed
 * first. */
uint32_t clf__eng_take(clf_engine *e, size_t g) {
  pool *p = &e->p[g];
  const uint32_t i = p->lru_head;
  if (i == NIL) return NIL;
  lru_unlink(p, i);
  unhash(e, g, i);
  p->b[i].ref = 1;
  p->b[i].epoch++;
  p->b[i].mate = NIL;
  return i;
}

/* A sequence gives its blocks back, the last first: hashed ones stay
 * reusable (the prefix evicted last), the rest are taken first. */
void clf__eng_release(clf_engine *e, seq *s) {
  for (size_t g = 0; g < e->n_pools; g++) {
    for (size_t j = s->nblk; j-- > s->first[g];) clf__eng_drop(&e->p[g], s->blk[g][j]);
    s->first[g] = 0;
  }
  s->nblk = s->nhashed = 0;
  s->chain = 0;
}

/* The first block of pool g that rows from position `computed` on read:
 * its layers see at most the last W positions, so none reads before
 * computed + 1 - W. */
static size_t window_first(const clf_engine *e, size_t g, size_t computed) {
  const size_t W = e->p[g].W;
  return W && computed + 1 > W ? (computed + 1 - W) / e->BS : 0;
}

/* The blocks s no longer reads, their pool's window past them, given
 * back, the first first: a block other holders share (copies, the same
 * prefix) stays theirs, and a hashed one stays reusable, free, until
 * taken. */
void clf__eng_window_release(clf_engine *e, seq *s) {
  for (size_t g = 0; g < e->n_pools; g++)
    for (const size_t first = window_first(e, g, s->computed); s->first[g] < first && s->first[g] < s->nblk;
         s->first[g]++) {
      clf__eng_drop(&e->p[g], s->blk[g][s->first[g]]);
      s->blk[g][s->first[g]] = NIL;
    }
}

/* The most blocks of pool g a sequence of up to n positions holds at
 * once: all of them, or with a window those of the W - 1 positions before
 * a step's rows and the rows (at most max_rows), wherever they fall in
 * blocks. */
size_t clf__eng_held(const clf_engine *e, size_t g, size_t n) {
  const size_t all = (n + e->BS - 1) / e->BS, W = e->p[g].W;
  if (!W) return all;
  const size_t span = (W - 1 + e->max_rows + 2 * e->BS - 2) / e->BS;
  return span < all ? span : all;
}

/* Blocks of s that its computed positions fill enter the prefix table
 * (unless the same content is already there). */
void clf__eng_register(clf_engine *e, seq *s) {
  /* (a block or its parent given back by the window ends the chain) */
  block *B = e->p[0].b;
  while (s->nhashed < s->nblk && (s->nhashed + 1) * e->BS <= s->computed && !(s->first[0] && s->nhashed <= s->first[0])) {
    const uint32_t i = s->blk[0][s->nhashed];
    block *b = &B[i];
    const uint32_t parent = s->nhashed ? s->blk[0][s->nhashed - 1] : NIL;
    if (parent != NIL && !B[parent].hashed) break; /* its prefix is another block's: unreachable */
    const int64_t *tok = s->tok + s->nhashed * e->BS;
    const uint64_t key = block_key(e, s->chain, s->isolation, tok);
    if (!b->hashed && lookup(e, key, s->isolation, parent, tok) == NIL) {
      memcpy(e->btok + (size_t)i * e->BS, tok, e->BS * sizeof *tok);
      b->key = key, b->isolation = s->isolation, b->parent = parent;
      b->parent_epoch = parent == NIL ? 0 : B[parent].epoch;
      b->hashed = 1;
      b->hnext = e->bucket[key & (e->nbucket - 1)];
      e->bucket[key & (e->nbucket - 1)] = i;
      /* the windowed layers' block of the same positions, while s holds it */
      const uint32_t w = e->n_pools > 1 && s->nhashed >= s->first[1] ? s->blk[1][s->nhashed] : NIL;
      if (w != NIL) b->mate = w, b->mate_epoch = e->p[1].b[w].epoch, e->p[1].b[w].hashed = 1;
    } else if (!b->hashed) {
      break; /* a duplicate of a hashed block: its children would be unreachable */
    }
    s->chain = key;
    s->nhashed++;
  }
}

size_t clf__eng_cached(const clf_engine *e) {
  size_t n = 0;
  for (uint32_t i = e->p[0].lru_head; i != NIL; i = e->p[0].b[i].next) n += e->p[0].b[i].hashed;
  return n;
}

/* The windowed layers' block paired with block i of pool 0, or NIL when
 * it has been given out again since. */
static uint32_t mate_of(const clf_engine *e, uint32_t i) {
  const block *b = &e->p[0].b[i];
  return b->mate != NIL && e->p[1].b[b->mate].epoch == b->mate_epoch ? b->mate : NIL;
}

/* The prefix of s that the cache holds (full blocks, leaving at least the
 * last token to compute), taken.  With a windowed layers' pool, the
 * prefix ends where that pool still holds the blocks of its window before
 * it (a block before the window is not needed). */
void clf__eng_admit_prefix(clf_engine *e, seq *s) {
  uint64_t chain = 0;
  uint32_t parent = NIL;
  size_t k = 0;
  const size_t full = (s->n - 1) / e->BS;
  for (; k < full; k++) {
    const int64_t *tok = s->tok + k * e->BS;
    const uint64_t key = block_key(e, chain, s->isolation, tok);
    const uint32_t i = lookup(e, key, s->isolation, parent, tok);
    if (i == NIL) break;
    s->blk[0][k] = i;
    chain = key, parent = i;
  }
  if (e->n_pools > 1) {
    for (; k > 0; k--) {
      size_t j = window_first(e, 1, k * e->BS);
      while (j < k && mate_of(e, s->blk[0][j]) != NIL) j++;
      if (j == k) break;
    }
    chain = 0;
    for (size_t j = 0; j < k; j++) chain = block_key(e, chain, s->isolation, s->tok + j * e->BS);
    s->first[1] = window_first(e, 1, k * e->BS);
    for (size_t j = 0; j < k; j++) {
      const uint32_t w = s->blk[1][j] = j >= s->first[1] ? mate_of(e, s->blk[0][j]) : NIL;
      if (w != NIL && e->p[1].b[w].ref++ == 0) lru_unlink(&e->p[1], w);
    }
  }
  for (size_t j = 0; j < k; j++)
    if (e->p[0].b[s->blk[0][j]].ref++ == 0) lru_unlink(&e->p[0], s->blk[0][j]);
  s->nblk = s->nhashed = k, s->chain = chain;
  s->computed = s->cached = k * e->BS;
  e->st.prefix_tokens_reused += s->computed;
}

/* ---- the pools ---- */

/* Which pool each layer's blocks come from: one pool, whose window is
 * the largest layer's when every layer has one; or, when full and
 * windowed layers mix (Gemma 3, Qwen3's use_sliding_window), the full
 * layers' p[0] and the windowed layers' p[1], with the largest window. */
clf_status clf__eng_layers(clf_engine *e) {
  const size_t *w = e->d->kv_windows;
  size_t full = 0, most = 0;
  if (!(e->layer_pool = calloc(e->n_layers + 1, 1)))
    return clf__fail(e->m->ctx, CLF_E_OUT_OF_MEMORY, "clf_engine_create: out of host memory");
  for (size_t i = 0; i < e->n_layers; i++) {
    const size_t wi = w ? w[i] : 0;
    if (!wi) full++;
    else if (wi > most) most = wi;
  }
  e->n_pools = full && most ? 2 : 1;
  e->p[0].W = full ? 0 : most;
  if (e->n_pools == 2) {
    e->p[1].W = most;
    for (size_t i = 0; i < e->n_layers; i++) e->layer_pool[i] = w[i] != 0;
  }
  return CLF_OK;
}

/* The pools' blocks from kv_bytes (by default a quarter of the memory the
 * weights leave, at most what max_sequences sequences of the model's
 * length hold): with two, the windowed layers' pool gets what
 * max_sequences windows hold (as many blocks as the other where kv_bytes
 * is short of that), and the full layers' pool the rest. */
clf_status clf__eng_pool(clf_engine *e, const clf_engine_options *o) {
  static const char op[] = "clf_engine_create";
  clf_context *ctx = e->m->ctx;
  const clf__decoder *d = e->d;
  const size_t row = d->kv_heads * e->BS * d->dh * clf_dtype_size(e->kv_dtype); /* one block of one layer's K */
  size_t n_in[2] = {0, 0}, held[2] = {0, 0}, want = o->kv_bytes, cap = 0, t;
  for (size_t i = 0; i < e->n_layers; i++) n_in[e->layer_pool[i]]++;
  for (size_t g = 0; g < e->n_pools; g++) {
    held[g] = clf__eng_held(e, g, d->limit);
    if (!clf__mul_ok(row, 2 * n_in[g], &e->p[g].bytes) || !e->p[g].bytes ||
        !clf__mul_ok(held[g] * e->max_seqs, e->p[g].bytes, &t) || !clf__add_ok(cap, t, &cap))
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: a block of %zu positions overflows", op, e->BS);
  }
  if (!want) {
    const size_t global = (size_t)ctx->caps.global_mem, weights = clf_model_weight_bytes(e->m);
    want = global > weights ? (global - weights) / 4 : 0;
    if (want > cap) want = cap;
  }
  if (e->n_pools == 1) {
    e->p[0].NB = want / e->p[0].bytes;
  } else {
    const size_t both = e->p[0].bytes + e->p[1].bytes, windows = e->max_seqs * held[1];
    e->p[0].NB = e->p[1].NB = want / both;
    if (e->p[0].NB > windows) e->p[1].NB = windows, e->p[0].NB = (want - windows * e->p[1].bytes) / e->p[0].bytes;
  }
  for (size_t g = 0; g < e->n_pools; g++) {
    pool *p = &e->p[g];
    if (ctx->caps.max_alloc && p->NB > ctx->caps.max_alloc / row) p->NB = (size_t)(ctx->caps.max_alloc / row);
    if (p->NB > (size_t)INT32_MAX / e->BS) p->NB = (size_t)INT32_MAX / e->BS;
    if (p->NB < 1)
      return clf__fail(ctx, CLF_E_INVALID_ARG, "%s: kv_bytes %zu holds no block (one takes %zu bytes: %zu layers x "
                       "K and V x %zu heads x %zu positions x %zu)", op, want, e->p[0].bytes + e->p[1].bytes,
                       e->n_layers, d->kv_heads, e->BS, d->dh);
    if (!(p->b = calloc(p->NB, sizeof *p->b)))
      return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %zu blocks", op, p->NB);
    p->lru_head = p->lru_tail = NIL;
    for (size_t i = 0; i < p->NB; i++) {
      p->b[i].hnext = p->b[i].mate = NIL;
      lru_push(p, (uint32_t)i, 1);
    }
  }
  e->k = calloc(e->n_layers, sizeof *e->k);
  e->v = calloc(e->n_layers, sizeof *e->v);
  e->btok = malloc(e->p[0].NB * e->BS * sizeof *e->btok);
  for (e->nbucket = 16; e->nbucket < 2 * e->p[0].NB; e->nbucket *= 2) {
  }
  e->bucket = malloc(e->nbucket * sizeof *e->bucket);
  if (!e->k || !e->v || !e->btok || !e->bucket)
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "%s: out of host memory for %zu blocks", op, e->p[0].NB);
  for (size_t i = 0; i < e->nbucket; i++) e->bucket[i] = NIL;
  clf_status st;
  for (size_t i = 0; i < e->n_layers; i++) {
    const size_t shape[4] = {e->p[e->layer_pool[i]].NB, d->kv_heads, e->BS, d->dh};
    if ((st = clf_tensor_create(ctx, e->kv_dtype, 4, shape, &e->k[i])) != CLF_OK ||
        (st = clf_tensor_create(ctx, e->kv_dtype, 4, shape, &e->v[i])) != CLF_OK)
      return st;
  }
  return CLF_OK;
}
