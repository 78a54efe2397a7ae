/* limits.h - the budgets clformer enforces on sizes that come from files,
 * arguments and generation settings, in one place.  Each is checked before
 * anything is allocated or enqueued, with an error that names the value and
 * the limit (docs/reliability.md lists them).
 */
#ifndef CLF_BASE_LIMITS_H
#define CLF_BASE_LIMITS_H

/* Beams of a beam search (num_beams): transformers sets none; beyond a few
 * dozen a search only costs memory. */
#define CLF_LIMIT_BEAMS 1024
/* Logits held per generation step: rows (batch x beams) x vocabulary
 * floats, 1 GiB. */
#define CLF_LIMIT_STEP_LOGITS ((size_t)1 << 28)

/* Pixels of one image, decoded or given as pixel_values: Pillow's
 * decompression-bomb error threshold (2 x MAX_IMAGE_PIXELS, 178,956,970),
 * so what Pillow opens clformer opens too.  Checked on the declared size,
 * before a decoder allocates. */
#define CLF_LIMIT_IMAGE_PIXELS ((size_t)178956970)
/* A model dimension read from config.json (hidden or intermediate size,
 * patch, window, embed_dim x mlp_ratio): far beyond any checkpoint, small
 * enough that products of a few of them cannot wrap. */
#define CLF_LIMIT_MODEL_DIM ((size_t)1 << 24)

/* A token id in a tokenizer's vocabulary file: 16 M, 60x the largest
 * vocabularies published (Gemma's 256,000). */
#define CLF_LIMIT_VOCAB_ID ((size_t)1 << 24)
/* Bytes of one token of a vocabulary (tokenizer.ggml.tokens, vocab.txt,
 * vocab.json, tokenizer.json's vocab and added tokens, a SentencePiece
 * model's pieces): 34x the longest token of every vocabulary in
 * tests/fixtures (30 bytes, "<|reserved_special_token_100|>").
 * One token of 200 KB kept the SentencePiece GGUF loader, then quadratic in
 * a token's length, busy for a minute. */
#define CLF_LIMIT_TOKEN_BYTES ((size_t)1024)

#endif /* CLF_BASE_LIMITS_H */
