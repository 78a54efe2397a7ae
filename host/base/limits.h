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

#endif /* CLF_BASE_LIMITS_H */
