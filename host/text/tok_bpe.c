/* tok_bpe.c - GPT-2's byte-level BPE (transformers' GPT2Tokenizer): the
 * pre-tokenisation pattern, the byte-to-unicode map, merges by rank over
 * vocab.json + merges.txt, and byte-level decoding with U+FFFD replacement.
 */
#include "tokenizer.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

/* bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other
 * 68 to U+0100.. in byte order.  inv (may be NULL) gets the inverse, indexed
 * by code point (-1 where none). */
void clf__byte_map(uint32_t fwd[256], int inv[256 + 68]) {
  uint32_t n = 0;
  for (unsigned b = 0; b < 256; b++) {
    int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
    fwd[b] = printable ? b : 256 + n++;
  }
  if (!inv) return;
  for (unsigned c = 0; c < 256 + 68; c++) inv[c] = -1;
  for (unsigned b = 0; b < 256; b++) inv[fwd[b]] = (int)b;
}

/* The `regex` module's \s (White_Space), which GPT-2's pattern uses. */
static int re_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
static int re_letter(uint32_t c) {
  int k = clf__uc_regex_class(c);
  return k == CLF__UC_LC || k == CLF__UC_LO;
}
static int re_number(uint32_t c) { return clf__uc_regex_class(c) == CLF__UC_N; }
static int re_other(uint32_t c) { return !re_space(c) && !re_letter(c) && !re_number(c); }

/* Length (in code points) of the match of
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * at c[i] (each alternative in order, as re.findall tries them). */
static size_t pretoken(const uint32_t *c, size_t n, size_t i) {
  if (c[i] == '\'' && i + 1 < n) {
    static const char *suf[] = {"s", "t", "re", "ve", "m", "ll", "d"};
    for (size_t k = 0; k < CLF__ARRAY_LEN(suf); k++) {
      size_t l = strlen(suf[k]), j = 0;
      while (j < l && i + 1 + j < n && c[i + 1 + j] == (uint32_t)suf[k][j]) j++;
      if (j == l) return l + 1;
    }
  }
  int (*cls[3])(uint32_t) = {re_letter, re_number, re_other};
  for (int k = 0; k < 3; k++) {
    size_t j = i;
    if (c[j] == ' ' && j + 1 < n && cls[k](c[j + 1])) j++;
    if (!cls[k](c[j])) continue;
    while (j < n && cls[k](c[j])) j++;
    return j - i;
  }
  size_t j = i; /* c[i] is whitespace here */
  while (j < n && re_space(c[j])) j++;
  if (j == n || j - i == 1) return j - i; /* \s+(?!\S) to the end, or \s+ of one */
  return j - i - 1;                     /* leave the last space to the next word */
}

typedef struct { size_t s, e; } span;

/* BPE of one pre-token (mapped to the byte alphabet, UTF-8 in w[0..n)). */
static clf_status bpe_word(clf_tokenizer *t, const char *w, size_t n, clf__ids *out, clf__str *key) {
  span *sym = malloc((n ? n : 1) * sizeof(span));
  size_t m = 0;
  if (!sym) return CLF_E_OUT_OF_MEMORY;
  for (size_t i = 0; i < n;) {
    size_t s = i;
    clf__utf8_next(w, n, &i);
    sym[m].s = s;
    sym[m++].e = i;
  }
  while (m > 1) {
    int64_t best = -1;
    size_t at = 0;
    for (size_t k = 0; k + 1 < m; k++) {
      key->n = 0;
      if (clf__str_add(key, w + sym[k].s, sym[k].e - sym[k].s) || clf__str_add(key, " ", 1) ||
          clf__str_add(key, w + sym[k + 1].s, sym[k + 1].e - sym[k + 1].s)) {
        free(sym);
        return CLF_E_OUT_OF_MEMORY;
      }
      int64_t r = clf__strmap_get(&t->ranks, key->s, key->n);
      if (r >= 0 && (best < 0 || r < best)) { best = r; at = k; }
    }
    if (best < 0) break;
    /* merge every non-overlapping occurrence of the best pair, left to right */
    size_t la = sym[at].e - sym[at].s, lb = sym[at + 1].e - sym[at + 1].s;
    const char *a = w + sym[at].s, *b = w + sym[at + 1].s;
    size_t o = 0;
    for (size_t k = 0; k < m; k++) {
      if (k + 1 < m && sym[k].e - sym[k].s == la && !memcmp(w + sym[k].s, a, la) &&
          sym[k + 1].e - sym[k + 1].s == lb && !memcmp(w + sym[k + 1].s, b, lb)) {
        sym[o].s = sym[k].s;
        sym[o++].e = sym[k + 1].e;
        k++;
      } else {
        sym[o++] = sym[k];
      }
    }
    m = o;
  }
  for (size_t k = 0; k < m; k++) {
    int64_t id = clf__strmap_get(&t->vocab, w + sym[k].s, sym[k].e - sym[k].s);
    if (id < 0) id = t->unk_id;
    if (id >= 0 && clf__ids_push(out, id)) { free(sym); return CLF_E_OUT_OF_MEMORY; }
  }
  free(sym);
  return CLF_OK;
}

clf_status clf__bpe_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  uint32_t *c = malloc(n * sizeof(uint32_t));
  size_t *off = malloc((n + 1) * sizeof(size_t)), m = 0;
  clf__str word = {0}, key = {0};
  clf_status st = CLF_OK;
  uint32_t fwd[256];
  clf__byte_map(fwd, NULL);
  if (!c || !off) st = CLF_E_OUT_OF_MEMORY;
  for (size_t i = 0; i < n && st == CLF_OK; m++) {
    off[m] = i;
    c[m] = (uint32_t)clf__utf8_next(s, n, &i);
  }
  if (off) off[m] = n;
  for (size_t i = 0; i < m && st == CLF_OK;) {
    size_t l = pretoken(c, m, i);
    word.n = 0;
    for (size_t b = off[i]; b < off[i + l] && st == CLF_OK; b++)
      if (clf__str_addc(&word, fwd[(unsigned char)s[b]])) st = CLF_E_OUT_OF_MEMORY;
    if (st == CLF_OK) st = bpe_word(t, word.s, word.n, out, &key);
    i += l;
  }
  free(c); free(off); free(word.s); free(key.s);
  if (st != CLF_OK) return clf__fail(NULL, st, "clf_tokenizer_encode: out of memory");
  return CLF_OK;
}

/* Python's bytes.decode("utf-8", errors="replace"): each maximal invalid
 * subsequence becomes one U+FFFD. */
int clf__utf8_replace(const unsigned char *b, size_t n, clf__str *out) {
  for (size_t i = 0; i < n;) {
    unsigned c = b[i];
    size_t need = 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) { if (clf__str_add(out, (const char *)b + i, 1)) return -1; i++; continue; }
    if (c >= 0xC2 && c <= 0xDF) need = 1;
    else if (c >= 0xE0 && c <= 0xEF) { need = 2; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
    else if (c >= 0xF0 && c <= 0xF4) { need = 3; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
    size_t k = 1;
    while (need && k <= need && i + k < n) {
      unsigned d = b[i + k];
      if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) break;
      k++;
    }
    if (need && k == need + 1) {
      if (clf__str_add(out, (const char *)b + i, k)) return -1;
      i += k;
    } else {
      if (clf__str_addc(out, 0xFFFD)) return -1;
      i += k; /* the valid prefix (at least the lead byte) is replaced */
    }
  }
  return 0;
}

clf_status clf__bpe_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  CLF__UNUSED(t);
  clf__str bytes = {0};
  int oom = 0, inv[256 + 68];
  uint32_t fwd[256];
  clf__byte_map(fwd, inv);
  for (size_t i = 0; i < n && !oom; i++) {
    size_t len = strlen(toks[i]);
    for (size_t j = 0; j < len && !oom;) {
      size_t s = j;
      int32_t cp = clf__utf8_next(toks[i], len, &j);
      if (cp < 0) { j = s + 1; cp = 0xFFFD; }
      int b = cp < 256 + 68 ? inv[cp] : -1;
      if (b >= 0) {
        char ch = (char)b;
        oom |= clf__str_add(&bytes, &ch, 1);
      } else { /* not of the byte alphabet (an added token): its own UTF-8 */
        oom |= clf__str_add(&bytes, toks[i] + s, j - s);
      }
    }
  }
  if (!oom) oom |= clf__utf8_replace((const unsigned char *)bytes.s, bytes.n, out);
  free(bytes.s);
  return oom ? clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory") : CLF_OK;
}

static clf_status gpt2_specials(clf_tokenizer *t, void *config) {
  static const char *keys[] = {"bos_token", "eos_token", "unk_token", "pad_token"};
  clf_status st = CLF_OK;
  for (int k = 0; k < 4 && st == CLF_OK; k++)
    st = clf__tok_add_special(t, clf__tok_cfg_str(config, keys[k], k < 3 ? "<|endoftext|>" : NULL));
  const char *u = clf__tok_cfg_str(config, "unk_token", "<|endoftext|>");
  const char *e = clf__tok_cfg_str(config, "eos_token", "<|endoftext|>");
  t->unk_id = clf__strmap_get(&t->vocab, u, strlen(u));
  t->eos_id = clf__strmap_get(&t->vocab, e, strlen(e));
  return st;
}

/* RobertaTokenizer: <s> X </s> (cls, sep), <mask> taking the spaces before
 * it (its AddedToken's lstrip; tokenizer.c reads the flags). */
static clf_status roberta_specials(clf_tokenizer *t, void *config, const char *vpath) {
  static const char *keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                               "mask_token"};
  static const char *dflt[] = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>", "<mask>"};
  clf_status st = CLF_OK;
  for (int k = 0; k < 7 && st == CLF_OK; k++) st = clf__tok_add_special(t, clf__tok_cfg_str(config, keys[k], dflt[k]));
  const char *names[4] = {clf__tok_cfg_str(config, "cls_token", "<s>"), clf__tok_cfg_str(config, "sep_token", "</s>"),
                          clf__tok_cfg_str(config, "unk_token", "<unk>"), clf__tok_cfg_str(config, "eos_token", "</s>")};
  int64_t *ids[4] = {&t->cls_id, &t->sep_id, &t->unk_id, &t->eos_id};
  for (int k = 0; k < 4 && st == CLF_OK; k++)
    if ((*ids[k] = clf__strmap_get(&t->vocab, names[k], strlen(names[k]))) < 0)
      st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s has no %s token (RoBERTa)", vpath, names[k]);
  const char *mask = clf__tok_cfg_str(config, "mask_token", "<mask>"); /* AddedToken(mask, lstrip=True) */
  for (int k = 0; k < t->n_special && st == CLF_OK; k++)
    if (!strcmp(t->special[k], mask)) t->special_lstrip |= 1u << k;
  return st;
}

clf_status clf__bpe_load(clf_tokenizer *t, const char *dir, void *config) {
  char *vpath = clf__tok_path(dir, "vocab.json"), *mpath = clf__tok_path(dir, "merges.txt");
  clf_status st = (vpath && mpath) ? CLF_OK : clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  if (st == CLF_OK) st = clf__tok_load_vocab_json(t, vpath);
  size_t len = 0;
  char *text = st == CLF_OK ? clf__tok_read_text(mpath, &len, &st) : NULL;
  int64_t rank = 0;
  size_t line = 0;
  for (size_t i = 0; text && i < len && st == CLF_OK; line++) {
    size_t j = i;
    while (j < len && text[j] != '\n') j++;
    size_t e = j;
    if (e > i && text[e - 1] == '\r') e--;
    if (line == 0 && e - i >= 8 && !memcmp(text + i, "#version", 8)) { i = j + 1; continue; }
    if (e > i) { /* "left right": two non-empty symbols and one space */
      const char *sp = memchr(text + i, ' ', e - i);
      if (!sp || sp == text + i || sp + 1 == text + e || memchr(sp + 1, ' ', (size_t)(text + e - sp - 1)))
        st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s line %zu: expected two symbols separated "
                       "by one space, got \"%.*s\"", mpath, line + 1, (int)(e - i > 40 ? 40 : e - i), text + i);
      else if (clf__strmap_put(&t->ranks, text + i, e - i, rank++)) /* a repeated merge: the later rank, as a dict */
        st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
    }
    i = j + 1;
  }
  free(text);
  t->add_prefix_space = clf__tok_cfg_bool(config, "add_prefix_space", 0) == 1;
  if (st == CLF_OK) st = t->roberta ? roberta_specials(t, config, vpath) : gpt2_specials(t, config);
  free(vpath);
  free(mpath);
  return st;
}
