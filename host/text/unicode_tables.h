/* unicode_tables.h - the Unicode data the tokenizers look code points up in.
 *
 * The tables are generated (unicode_tables.c, by
 * tools/fixtures/make_tokenizer_fixtures.py --unicode-tables) from Python's
 * unicodedata, which the reference tokenizers use; each has its length in
 * clf__NAME_len.  The look-ups themselves are in tokenizer.c (classes, lower
 * case) and tok_wordpiece.c (NFD / NFC).
 */
#ifndef CLF_TEXT_UNICODE_TABLES_H
#define CLF_TEXT_UNICODE_TABLES_H

#include <stddef.h>
#include <stdint.h>

/* start << 4 | CLF__UC_* class of each run of code points with one class. */
extern const uint32_t clf__uc_class_runs[];
extern const size_t clf__uc_class_runs_len;
/* first, last, class: where the `regex` module (GPT-2's pattern) is on a
 * newer Unicode and calls a code point a letter or a number differently. */
extern const uint32_t clf__uc_regex_overrides[];
extern const size_t clf__uc_regex_overrides_len;
/* first, last, delta, step of str.lower() mappings to one code point. */
extern const int32_t clf__uc_lower_ranges[];
extern const size_t clf__uc_lower_ranges_len;
/* Runs of consecutive code points: start, count, then the canonical
 * decomposition (first, second or 0) of each. */
extern const uint32_t clf__uc_decomp_runs[];
extern const size_t clf__uc_decomp_runs_len;
/* Two-part decompositions that NFC does not recompose. */
extern const uint32_t clf__uc_comp_exclusions[];
extern const size_t clf__uc_comp_exclusions_len;
/* start << 8 | canonical combining class of each run. */
extern const uint32_t clf__uc_ccc_runs[];
extern const size_t clf__uc_ccc_runs_len;

#endif /* CLF_TEXT_UNICODE_TABLES_H */
