/* engine.h - the engine's own structs (engine.c, engine_blocks.c): the
 * block pools and their prefix table, the sequences and a step's rows;
 * and the pools' operations, which engine_blocks.c defines and the
 * scheduler (engine.c) calls under the engine's lock.
 */
#ifndef CLF_ENGINE_H
#define CLF_ENGINE_H

#include "decoder.h"

#include <pthread.h>

#define NIL UINT32_MAX

/* One block of a pool. */
typedef struct block {
  uint32_t ref;          /* sequences holding it */
  uint32_t epoch;        /* how many times it was given out: (id, epoch) names one content */
  int hashed;            /* full and in the prefix table under the key below (pool 1: paired with such a block) */
  uint64_t key;          /* of its tokens, everything before them, and the isolation key */
  uint64_t isolation;
  uint32_t parent, parent_epoch; /* the block before it in its sequence (NIL: the first) */
  uint32_t prev, next;   /* the free list (ref 0): evicted from the head */
  uint32_t hnext;        /* the prefix table's chain */
  /* The windowed layers' block of the same positions (pool 0 of a model
   * that mixes full and windowed layers): NIL, or valid while that block's
   * epoch is still mate_epoch. */
  uint32_t mate, mate_epoch;
} block;

/* One numbering of blocks: the layers that see every position (or all
 * layers), and apart from them, in a model that mixes the two, the
 * windowed layers, which keep only their window's blocks of a sequence. */
typedef struct pool {
  size_t NB;       /* blocks */
  size_t W;        /* its layers see at most the last W positions; 0: all */
  size_t bytes;    /* of one block: its layers' keys and values */
  block *b;
  uint32_t lru_head, lru_tail;
  size_t n_free;
} pool;

enum { SEQ_WAITING, SEQ_RUNNING };

typedef struct seq {
  uint64_t id, order; /* order: when it was last admitted (the newest is preempted first) */
  int64_t *tok;       /* [max_len]: the prompt, then what it generated */
  size_t n, prompt_len, computed; /* tokens; those whose keys and values are in the cache */
  clf__gen_row rules;
  uint32_t *blk[2]; /* per pool [blocks for max_len]: position p in blk[pool][p / BS] */
  size_t nblk, nhashed;
  size_t first[2]; /* per pool, blocks 0..first-1 given back: the pool's window has passed them (blk NIL) */
  size_t cached; /* prompt positions taken from the prefix cache (its last admission's) */
  uint64_t chain;    /* the key of its last hashed block */
  uint64_t isolation;
  int state, cancelled;
  clf_finish_reason why;
  char *error;
  int (*on_token)(void *, uint64_t, int64_t);
  void (*on_done)(void *, uint64_t, const clf_sequence_end *);
  int (*on_token_info)(void *, uint64_t, const clf_token_info *);
  int (*allowed)(void *, uint64_t, const int64_t *, size_t, uint32_t *, size_t);
  size_t top_logprobs;
  void *user;
  int forked;        /* its copies were made this step (they join the running after it) */
  struct seq *forks; /* the other copies of its request, until its prompt is computed (linked by next) */
  struct seq *next;
} seq;

/* A sequence's rows in this step: positions start..start+count-1. */
typedef struct sched {
  seq *s;
  size_t start, count, row0;
  int live;
} sched;

struct clf_engine {
  clf_model *m;
  clf__decoder *d;
  size_t BS, max_rows, max_seqs, n_layers, V;
  pool p[2];                 /* p[0]: the prefix table's; p[1] when the layers mix windowed and full */
  size_t n_pools;
  unsigned char *layer_pool; /* [n_layers] */
  clf_dtype kv_dtype;
  clf_tensor **k, **v; /* [n_layers] pools [NB of its pool, Hkv, BS, Dh] */
  int64_t *btok; /* [p[0].NB, BS]: the tokens of each block */
  uint32_t *bucket;
  size_t nbucket;
  pthread_mutex_t lock, step_lock;
  seq *incoming, *waiting, *running;
  uint64_t next_id, next_order;
  clf_engine_stats st;
  /* the step's buffers, grown as needed */
  clf_tensor *meta;
  size_t meta_cap;
  int64_t *host;
  size_t host_cap;
  cl_event host_written; /* host's write into meta, not waited for: until the next step waits for it */
  float *logits;
  float *row;      /* [V]: one sequence's scores, processed */
  uint32_t *mask;  /* [ceil(V / 32)]: the allowed callback's */
  clf__scored *tmp;
  sched *sc; /* [max_seqs] */
  seq **snap; /* [max_seqs] */
};

/* ---- the pools (engine_blocks.c), under the lock ---- */

/* Which pool each layer's blocks come from, then the pools themselves
 * from the options' kv_bytes. */
clf_status clf__eng_layers(clf_engine *e);
clf_status clf__eng_pool(clf_engine *e, const clf_engine_options *o);
/* A free block of pool g for a sequence (ref 1), NIL when none. */
uint32_t clf__eng_take(clf_engine *e, size_t g);
/* A holder lets block i of pool p go. */
void clf__eng_drop(pool *p, uint32_t i);
/* All of s's blocks given back. */
void clf__eng_release(clf_engine *e, seq *s);
/* The blocks of s its pools' windows have passed given back. */
void clf__eng_window_release(clf_engine *e, seq *s);
/* The most blocks of pool g a sequence of up to n positions holds at once. */
size_t clf__eng_held(const clf_engine *e, size_t g, size_t n);
/* The blocks s's computed positions fill enter the prefix table. */
void clf__eng_register(clf_engine *e, seq *s);
/* The prefix of s the cache holds, taken; s->computed set after it. */
void clf__eng_admit_prefix(clf_engine *e, seq *s);
/* Free blocks of pool 0 that hold a reusable prefix. */
size_t clf__eng_cached(const clf_engine *e);

#endif
