/* llama.h - rotary position embeddings of the Llama family (llama.c): the
 * inverse frequencies of each rope_scaling type, computed on the host in
 * float32 in the order of transformers 4.46's ROPE_INIT_FUNCTIONS.
 */
#ifndef CLF_LLAMA_H
#define CLF_LLAMA_H

#include <stddef.h>

typedef enum { CLF__ROPE_DEFAULT, CLF__ROPE_LINEAR, CLF__ROPE_DYNAMIC, CLF__ROPE_LLAMA3 } clf__rope_type;

typedef struct clf__rope {
  clf__rope_type type;
  size_t dim;                   /* head_dim: inv_freq has dim / 2 entries */
  double theta;                 /* rope_theta */
  double factor, low, high;     /* rope_scaling's factor, low/high_freq_factor */
  size_t orig_max;              /* llama3: original_max_position_embeddings */
  size_t max_pos;               /* max_position_embeddings (dynamic: the original length) */
  /* A GGUF file's rope_freqs.weight (llama.cpp's Llama 3.1 conversion): each
   * frequency divided by its factor, as llama.cpp's rope does; 0: none */
  int has_factors;
  float factors[512];
} clf__rope;

/* inv_freq [dim / 2] for a sequence of seq_len positions: seq_len only
 * matters for dynamic (its NTK base for seq_len > max_pos; 0 or less: the
 * initial frequencies). */
void clf__rope_inv_freq(const clf__rope *r, size_t seq_len, float *out);

#endif /* CLF_LLAMA_H */
