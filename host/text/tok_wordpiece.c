/* tok_wordpiece.c - BERT's tokenizer: transformers' BasicTokenizer (clean-up,
 * CJK split, NFC, lower case, accent stripping, punctuation split) and the
 * greedy longest-match WordPiece over vocab.txt.
 */
#include "tokenizer.h"
#include "unicode_tables.h"
#include "base/status.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- NFD / NFC ---- */

typedef struct { uint32_t cp, a, b; } decomp;
static decomp *g_dec, *g_comp; /* sorted by cp / by (a, b) */
static size_t g_ndec, g_ncomp;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static int cmp_dec(const void *x, const void *y) {
  const decomp *p = x, *q = y;
  return p->cp < q->cp ? -1 : p->cp > q->cp;
}
static int cmp_comp(const void *x, const void *y) {
  const decomp *p = x, *q = y;
  if (p->a != q->a) return p->a < q->a ? -1 : 1;
  return p->b < q->b ? -1 : p->b > q->b;
}

static void build_tables(void) {
  size_t n = 0;
  for (size_t i = 0; i < clf__uc_decomp_runs_len; i += 2 + 2 * clf__uc_decomp_runs[i + 1]) n += clf__uc_decomp_runs[i + 1];
  g_dec = malloc(n * sizeof(decomp));
  g_comp = malloc(n * sizeof(decomp));
  if (!g_dec || !g_comp) { free(g_dec); free(g_comp); g_dec = g_comp = NULL; return; }
  for (size_t i = 0; i < clf__uc_decomp_runs_len; i += 2 + 2 * clf__uc_decomp_runs[i + 1]) {
    for (uint32_t k = 0; k < clf__uc_decomp_runs[i + 1]; k++) {
      decomp d = {clf__uc_decomp_runs[i] + k, clf__uc_decomp_runs[i + 2 + 2 * k], clf__uc_decomp_runs[i + 3 + 2 * k]};
      g_dec[g_ndec++] = d;
      int excluded = d.b == 0;
      for (size_t e = 0; e < clf__uc_comp_exclusions_len && !excluded; e++) excluded = clf__uc_comp_exclusions[e] == d.cp;
      if (!excluded) g_comp[g_ncomp++] = d;
    }
  }
  qsort(g_dec, g_ndec, sizeof(decomp), cmp_dec);
  qsort(g_comp, g_ncomp, sizeof(decomp), cmp_comp);
}

static int ccc(uint32_t cp) {
  size_t lo = 0, hi = clf__uc_ccc_runs_len;
  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if ((clf__uc_ccc_runs[mid] >> 8) <= cp) lo = mid; else hi = mid;
  }
  return (int)(clf__uc_ccc_runs[lo] & 255);
}

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7, LCOUNT = 19, VCOUNT = 21,
       TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

typedef struct { uint32_t *v; size_t n, cap; } cps;

static int cps_push(cps *a, uint32_t c) {
  uint32_t *v = clf__grow(a->v, &a->cap, a->n + 1, sizeof(*v));
  if (!v) return -1;
  a->v = v;
  a->v[a->n++] = c;
  return 0;
}

static int decompose(uint32_t c, cps *out) {
  if (c >= SBASE && c < SBASE + SCOUNT) {
    uint32_t s = c - SBASE;
    int r = cps_push(out, LBASE + s / NCOUNT) | cps_push(out, VBASE + (s % NCOUNT) / TCOUNT);
    if (s % TCOUNT) r |= cps_push(out, TBASE + s % TCOUNT);
    return r;
  }
  decomp key = {c, 0, 0};
  const decomp *d = g_dec ? bsearch(&key, g_dec, g_ndec, sizeof(decomp), cmp_dec) : NULL;
  if (!d) return cps_push(out, c);
  if (decompose(d->a, out)) return -1;
  return d->b ? decompose(d->b, out) : 0;
}

/* Canonical decomposition and ordering of in[0..n) into out. */
static int nfd(const uint32_t *in, size_t n, cps *out) {
  pthread_once(&g_once, build_tables);
  if (!g_dec) return -1;
  for (size_t i = 0; i < n; i++)
    if (decompose(in[i], out)) return -1;
  for (size_t i = 1; i < out->n; i++) { /* stable insertion sort of each run of marks by class */
    int c = ccc(out->v[i]);
    if (!c) continue;
    for (size_t j = i; j > 0; j--) {
      int p = ccc(out->v[j - 1]);
      if (p <= c) break;
      uint32_t t = out->v[j]; out->v[j] = out->v[j - 1]; out->v[j - 1] = t;
    }
  }
  return 0;
}

static uint32_t compose_pair(uint32_t a, uint32_t b) {
  if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
    return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
  if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
    return a + (b - TBASE);
  decomp key = {0, a, b};
  const decomp *d = bsearch(&key, g_comp, g_ncomp, sizeof(decomp), cmp_comp);
  return d ? d->cp : 0;
}

/* NFC of in[0..n), in place in *a (which receives the result). */
static int nfc(cps *a) {
  size_t i;
  for (i = 0; i < a->n && a->v[i] < 0x300; i++) {}
  if (i == a->n) return 0; /* nothing below U+0300 decomposes away or composes */
  cps d = {0};
  if (nfd(a->v, a->n, &d)) { free(d.v); return -1; }
  size_t w = 0, starter = (size_t)-1;
  int last = 256; /* class of the last character kept after the starter */
  for (size_t r = 0; r < d.n; r++) {
    uint32_t c = d.v[r], comp;
    int cc = ccc(c);
    if (starter != (size_t)-1 && (last < cc || last == 0) && (comp = compose_pair(d.v[starter], c))) {
      d.v[starter] = comp;
      continue;
    }
    if (cc == 0) starter = w;
    last = cc;
    d.v[w++] = c;
  }
  d.n = w;
  free(a->v);
  *a = d;
  return 0;
}

int clf__nfc_utf8(const char *s, size_t n, clf__str *out) {
  cps a = {0};
  for (size_t i = 0; i < n;) {
    int32_t c = clf__utf8_next(s, n, &i);
    if (c < 0 || cps_push(&a, (uint32_t)c)) { free(a.v); return -1; }
  }
  int r = nfc(&a);
  for (size_t i = 0; i < a.n && !r; i++) r = clf__str_addc(out, a.v[i]);
  free(a.v);
  return r;
}

/* ---- BasicTokenizer ---- */

static int is_punct(uint32_t c) {
  if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126)) return 1;
  return clf__uc_class(c) == CLF__UC_P;
}

static int is_cjk(uint32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* Lower case, one character at a time: transformers' PreTrainedTokenizer
 * lower-cases the text with re.sub("(.+?)", ...), one character per match,
 * so Python's final-sigma rule never applies (U+03A3 -> U+03C3 always). */
static int lower(const uint32_t *a, size_t n, cps *out) {
  for (size_t i = 0; i < n; i++) {
    uint32_t l[2];
    int m = clf__uc_lower(a[i], l);
    for (int k = 0; k < m; k++)
      if (cps_push(out, l[k])) return -1;
  }
  return 0;
}

/* Greedy longest-match WordPiece of one word. */
static clf_status wordpiece(clf_tokenizer *t, const uint32_t *w, size_t n, clf__ids *out) {
  if (n == 0) return CLF_OK;
  if (n > 100) return clf__ids_push(out, t->unk_id) ? CLF_E_OUT_OF_MEMORY : CLF_OK;
  char buf[2 + 100 * 4];
  size_t mark = out->n;
  for (size_t start = 0; start < n;) {
    int64_t id = -1;
    size_t end = n;
    for (; end > start; end--) {
      size_t len = 0;
      if (start > 0) { buf[0] = '#'; buf[1] = '#'; len = 2; }
      for (size_t k = start; k < end; k++) len += clf__utf8_put(buf + len, w[k]);
      if ((id = clf__strmap_get(&t->vocab, buf, len)) >= 0) break;
    }
    if (id < 0) { /* the whole word is unknown */
      out->n = mark;
      return clf__ids_push(out, t->unk_id) ? CLF_E_OUT_OF_MEMORY : CLF_OK;
    }
    if (clf__ids_push(out, id)) return CLF_E_OUT_OF_MEMORY;
    start = end;
  }
  return CLF_OK;
}

/* One whitespace-separated token of the basic tokenizer. */
static clf_status basic_token(clf_tokenizer *t, const uint32_t *w, size_t n, clf__ids *out) {
  char buf[64];
  size_t len = 0;
  for (size_t k = 0; k < n && len + 4 < sizeof(buf); k++) len += clf__utf8_put(buf + len, w[k]);
  if (clf__tok_is_special_text(t, buf, len)) return wordpiece(t, w, n, out); /* never_split */
  cps low = {0}, acc = {0};
  const uint32_t *p = w;
  int strip = t->do_lower_case ? t->strip_accents != 0 : t->strip_accents == 1;
  clf_status st = CLF_OK;
  if (t->do_lower_case) {
    if (lower(w, n, &low)) goto oom;
    p = low.v;
    n = low.n;
  }
  if (strip) {
    if (nfd(p, n, &acc)) goto oom;
    size_t k = 0;
    for (size_t i = 0; i < acc.n; i++)
      if (clf__uc_class(acc.v[i]) != CLF__UC_MN) acc.v[k++] = acc.v[i];
    acc.n = k;
    p = acc.v;
    n = k;
  }
  for (size_t i = 0, s = 0; i <= n && st == CLF_OK; i++) { /* split on punctuation */
    if (i == n || is_punct(p[i])) {
      st = wordpiece(t, p + s, i - s, out);
      if (i < n && st == CLF_OK) st = wordpiece(t, p + i, 1, out);
      s = i + 1;
    }
  }
  free(low.v);
  free(acc.v);
  return st;
oom:
  free(low.v);
  free(acc.v);
  return CLF_E_OUT_OF_MEMORY;
}

clf_status clf__wordpiece_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  cps raw = {0}, a = {0};
  clf_status st = CLF_OK;
  for (size_t i = 0; i < n;)
    if (cps_push(&raw, (uint32_t)clf__utf8_next(s, n, &i))) goto oom;
  if (t->do_lower_case) { /* PreTrainedTokenizer.tokenize lower-cases the text first */
    if (lower(raw.v, raw.n, &a)) goto oom;
    free(raw.v);
    raw = a;
    a.v = NULL;
    a.n = a.cap = 0;
  }
  for (size_t i = 0; i < raw.n; i++) { /* _clean_text and _tokenize_chinese_chars */
    uint32_t c = raw.v[i];
    int cls = clf__uc_class(c);
    if (c == 0 || c == 0xFFFD || (cls == CLF__UC_C && c != '\t' && c != '\n' && c != '\r')) continue;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || cls == CLF__UC_ZS) c = ' ';
    if (t->tokenize_chinese && is_cjk(c)) {
      if (cps_push(&a, ' ') || cps_push(&a, c) || cps_push(&a, ' ')) goto oom;
    } else if (cps_push(&a, c)) {
      goto oom;
    }
  }
  if (nfc(&a)) goto oom;
  for (size_t i = 0; i < a.n && st == CLF_OK;) {
    while (i < a.n && clf__uc_isspace(a.v[i])) i++;
    size_t j = i;
    while (j < a.n && !clf__uc_isspace(a.v[j])) j++;
    if (j > i) st = basic_token(t, a.v + i, j - i, out);
    i = j;
  }
  free(raw.v);
  free(a.v);
  if (st == CLF_E_OUT_OF_MEMORY) return clf__fail(NULL, st, "clf_tokenizer_encode: out of memory");
  return st;
oom:
  free(raw.v);
  free(a.v);
  return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
}

/* " ".join(tokens).replace(" ##", "").strip() */
clf_status clf__wordpiece_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  CLF__UNUSED(t);
  clf__str j = {0};
  int oom = 0;
  for (size_t i = 0; i < n; i++) {
    if (i) oom |= clf__str_add(&j, " ", 1);
    oom |= clf__str_add(&j, toks[i], strlen(toks[i]));
  }
  oom |= clf__str_add(&j, "", 0);
  if (oom) { free(j.s); return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory"); }
  size_t w = 0;
  for (size_t i = 0; i < j.n;) {
    if (i + 3 <= j.n && !memcmp(j.s + i, " ##", 3)) { i += 3; continue; }
    j.s[w++] = j.s[i++];
  }
  j.n = w;
  /* strip Python whitespace at both ends */
  size_t b = 0, e = j.n;
  for (;;) {
    size_t k = b;
    int32_t c = b < e ? clf__utf8_next(j.s, e, &k) : -1;
    if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
    b = k;
  }
  while (e > b) {
    size_t k = e - 1;
    while (k > b && ((unsigned char)j.s[k] & 0xC0) == 0x80) k--;
    size_t q = k;
    int32_t c = clf__utf8_next(j.s, e, &q);
    if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
    e = k;
  }
  oom = clf__str_add(out, j.s + b, e - b);
  free(j.s);
  return oom ? clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory") : CLF_OK;
}

/* ---- loading ---- */

clf_status clf__wordpiece_load(clf_tokenizer *t, const char *dir, void *config) {
  char *path = clf__tok_path(dir, "vocab.txt");
  if (!path) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  size_t len;
  clf_status st;
  char *text = clf__tok_read_text(path, &len, &st);
  if (!text) { free(path); return st; }
  int64_t id = 0;
  for (size_t i = 0; i < len && st == CLF_OK; id++) { /* lines end in \n, \r\n or \r (Python's universal newlines) */
    size_t j = i;
    while (j < len && text[j] != '\n' && text[j] != '\r') j++;
    st = clf__tok_check_len(j - i, "%s line %lld", path, (long long)id + 1);
    for (size_t k = i; k < j && st == CLF_OK;)
      if (clf__utf8_next(text, j, &k) < 0) {
        st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s line %lld is not valid UTF-8", path,
                       (long long)id + 1);
        break;
      }
    if (st == CLF_OK && (clf__strmap_put(&t->vocab, text + i, j - i, id) || clf__tok_set_token(t, id, text + i, j - i)))
      st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
    i = j + (j < len && text[j] == '\r' && j + 1 < len && text[j + 1] == '\n' ? 2 : 1);
  }
  free(text);
  if (st == CLF_OK && id == 0) st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is empty", path);
  if (st == CLF_OK) st = clf__wordpiece_settings(t, config, path);
  free(path);
  return st;
}

clf_status clf__wordpiece_settings(clf_tokenizer *t, void *config, const char *path) {
  clf_status st = CLF_OK;
  t->do_lower_case = clf__tok_cfg_bool(config, "do_lower_case", 1) == 1;
  t->strip_accents = clf__tok_cfg_bool(config, "strip_accents", -1);
  t->tokenize_chinese = clf__tok_cfg_bool(config, "tokenize_chinese_chars", 1) != 0;
  /* all_special_tokens' order: unk, sep, pad, cls, mask */
  static const char *keys[] = {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
  static const char *dflt[] = {"[UNK]", "[SEP]", "[PAD]", "[CLS]", "[MASK]"};
  for (int k = 0; k < 5 && st == CLF_OK; k++) st = clf__tok_add_special(t, clf__tok_cfg_str(config, keys[k], dflt[k]));
  if (st == CLF_OK) {
    const char *u = clf__tok_cfg_str(config, "unk_token", "[UNK]"), *c = clf__tok_cfg_str(config, "cls_token", "[CLS]");
    const char *s = clf__tok_cfg_str(config, "sep_token", "[SEP]");
    t->unk_id = clf__strmap_get(&t->vocab, u, strlen(u));
    t->cls_id = clf__strmap_get(&t->vocab, c, strlen(c));
    t->sep_id = clf__strmap_get(&t->vocab, s, strlen(s));
    const char *miss = t->unk_id < 0 ? u : t->cls_id < 0 ? c : t->sep_id < 0 ? s : NULL;
    if (miss) st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s has no %s token", path, miss);
  }
  return st;
}
