/* tok_hfrun.c - runs a tokenizer.json pipeline (tok_hf.h): added tokens,
 * normalizers, pre-tokenizers, the BPE model with its merge queue, the
 * template, and the decoder chain, each as the `tokenizers` library (0.19)
 * does it.
 */
#include "tok_hf.h"
#include "base/status.h"

#include <stdlib.h>
#include <string.h>

/* ---- pieces ---- */

static int pieces_add(clf__hf_pieces *p, const char *s, size_t n) {
  if (n == 0) return 0; /* tokenizers drops empty pieces */
  clf__str *v = clf__grow(p->v, &p->cap, p->n + 1, sizeof(*v));
  if (!v) return -1;
  p->v = v;
  memset(&p->v[p->n], 0, sizeof(clf__str));
  return clf__str_add(&p->v[p->n++], s, n);
}

static void pieces_free(clf__hf_pieces *p) {
  for (size_t i = 0; i < p->n; i++) free(p->v[i].s);
  free(p->v);
  memset(p, 0, sizeof(*p));
}

static int starts_with(const clf__str *s, const char *p) {
  size_t l = strlen(p);
  return s->n >= l && !memcmp(s->s, p, l);
}

/* s with every occurrence of `from` (literal) replaced by `to`, into out. */
static int replace_all(const char *s, size_t n, const char *from, const char *to, clf__str *out) {
  size_t fl = strlen(from), tl = strlen(to);
  for (size_t i = 0; i < n;) {
    if (fl && i + fl <= n && !memcmp(s + i, from, fl)) {
      if (clf__str_add(out, to, tl)) return -1;
      i += fl;
    } else {
      if (clf__str_add(out, s + i, 1)) return -1;
      i++;
    }
  }
  return clf__str_add(out, "", 0);
}

/* The matches of re in s: (start, end) pairs appended to *m (2 per match);
 * an empty match moves on by one character.  -1 out of memory or past
 * PCRE2's match limits. */
static int find_all(const pcre2_code *re, const char *s, size_t n, size_t **m, size_t *nm, size_t *cap) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
  if (!md) return -1;
  size_t pos = 0;
  *nm = 0;
  while (pos <= n) {
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) /* the JIT's stack: once more by the interpreter */
      rc = pcre2_match(re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md, NULL);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) { /* a match limit: reported, not a silent cut */
      pcre2_match_data_free(md);
      return -1;
    }
    PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    if (ov[1] == ov[0]) { /* empty: skip a character */
      pos = ov[0] + 1;
      while (pos < n && ((unsigned char)s[pos] & 0xC0) == 0x80) pos++;
      continue;
    }
    size_t *v = clf__grow(*m, cap, *nm + 2, sizeof(size_t));
    if (!v) { pcre2_match_data_free(md); return -1; }
    *m = v;
    v[(*nm)++] = ov[0];
    v[(*nm)++] = ov[1];
    pos = ov[1];
  }
  pcre2_match_data_free(md);
  return 0;
}

/* One piece split by re with a SplitDelimiterBehavior, as tokenizers'
 * NormalizedString::split: the pieces (matches and the text between) are
 * flagged, flipped with invert, then merged by the behaviour. */
static int split_piece(const clf__hf_pre *p, const char *s, size_t n, clf__hf_pieces *out) {
  size_t *m = NULL, nm = 0, cap = 0, nr = 0;
  if (find_all(p->re, s, n, &m, &nm, &cap)) return -1;
  size_t (*r)[3] = malloc((2 * nm + 2) * sizeof(*r)); /* start, end, is_match */
  if (!r) { free(m); return -1; }
  size_t pos = 0;
  for (size_t k = 0; k < nm; k += 2) {
    if (m[k] > pos) { r[nr][0] = pos; r[nr][1] = m[k]; r[nr++][2] = (size_t)p->invert; }
    r[nr][0] = m[k]; r[nr][1] = m[k + 1]; r[nr++][2] = (size_t)!p->invert;
    pos = m[k + 1];
  }
  if (pos < n) { r[nr][0] = pos; r[nr][1] = n; r[nr++][2] = (size_t)p->invert; }
  free(m);
  size_t (*o)[2] = malloc((nr + 1) * sizeof(*o)), no = 0;
  if (!o) { free(r); return -1; }
  int prev = 0;
  if (p->behavior == CLF__HF_MERGED_NEXT) { /* folded from the right */
    for (size_t k = nr; k-- > 0;) {
      if (r[k][2] && !prev && no) o[no - 1][0] = r[k][0];
      else { o[no][0] = r[k][0]; o[no++][1] = r[k][1]; }
      prev = (int)r[k][2];
    }
    for (size_t a = 0, b = no ? no - 1 : 0; a < b; a++, b--) {
      size_t t0 = o[a][0], t1 = o[a][1];
      o[a][0] = o[b][0]; o[a][1] = o[b][1]; o[b][0] = t0; o[b][1] = t1;
    }
  } else {
    for (size_t k = 0; k < nr; k++) {
      int match = (int)r[k][2];
      if (p->behavior == CLF__HF_REMOVED && match) continue;
      if (((p->behavior == CLF__HF_MERGED_PREV && match && !prev) ||
           (p->behavior == CLF__HF_CONTIGUOUS && match == prev)) && no)
        o[no - 1][1] = r[k][1];
      else { o[no][0] = r[k][0]; o[no++][1] = r[k][1]; }
      prev = match;
    }
  }
  int rc = 0;
  for (size_t k = 0; k < no && !rc; k++) rc = pieces_add(out, s + o[k][0], o[k][1] - o[k][0]);
  free(r);
  free(o);
  return rc;
}

/* ---- pre-tokenizers ---- */

static int bytelevel(const clf__hf_pre *p, const clf__str *in, clf__hf_pieces *out) {
  clf__str src = {0}, map = {0};
  clf__hf_pieces parts = {0};
  uint32_t fwd[256];
  clf__byte_map(fwd, NULL);
  int rc = (p->add_prefix_space && !starts_with(in, " ")) ? clf__str_add(&src, " ", 1) : 0;
  if (!rc) rc = clf__str_add(&src, in->s, in->n);
  clf__hf_pre iso = *p;
  iso.behavior = CLF__HF_ISOLATED;
  iso.invert = 0;
  if (!rc) rc = p->re ? split_piece(&iso, src.s, src.n, &parts) : pieces_add(&parts, src.s, src.n);
  for (size_t k = 0; k < parts.n && !rc; k++) {
    map.n = 0;
    for (size_t b = 0; b < parts.v[k].n && !rc; b++) rc = clf__str_addc(&map, fwd[(unsigned char)parts.v[k].s[b]]);
    if (!rc) rc = pieces_add(out, map.s, map.n);
  }
  pieces_free(&parts);
  free(src.s);
  free(map.s);
  return rc;
}

static int metaspace(const clf__hf_pre *p, const clf__str *in, int first, clf__hf_pieces *out) {
  clf__str r = {0}, m = {0};
  int rc = replace_all(in->s, in->n, " ", p->repl, &r);
  int prepend = p->prepend == CLF__HF_PREPEND_ALWAYS || (p->prepend == CLF__HF_PREPEND_FIRST && first);
  if (!rc && prepend && !starts_with(&r, p->repl)) rc = clf__str_add(&m, p->repl, strlen(p->repl));
  if (!rc) rc = clf__str_add(&m, r.s, r.n);
  size_t rl = strlen(p->repl), start = 0;
  for (size_t i = 1; i + rl <= m.n && p->split && !rc; i++) { /* MergedWithNext: a piece starts at each */
    if (memcmp(m.s + i, p->repl, rl)) continue;
    rc = pieces_add(out, m.s + start, i - start);
    start = i;
  }
  if (!rc) rc = pieces_add(out, m.s + start, m.n - start);
  free(r.s);
  free(m.s);
  return rc;
}

/* The pieces of one normalized segment; `first` when it starts the text. */
static int pre_tokenize(const clf__hf *h, const char *s, size_t n, int first, clf__hf_pieces *out) {
  clf__hf_pieces cur = {0}, next = {0};
  int rc = pieces_add(&cur, s, n);
  for (int k = 0; k < h->n_pre && !rc; k++) {
    const clf__hf_pre *p = &h->pre[k];
    for (size_t i = 0; i < cur.n && !rc; i++) {
      if (p->kind == CLF__HF_PRE_SPLIT) rc = split_piece(p, cur.v[i].s, cur.v[i].n, &next);
      else if (p->kind == CLF__HF_PRE_BYTELEVEL) rc = bytelevel(p, &cur.v[i], &next);
      else rc = metaspace(p, &cur.v[i], first && i == 0, &next);
    }
    pieces_free(&cur);
    cur = next;
    memset(&next, 0, sizeof(next));
  }
  if (rc) pieces_free(&cur);
  *out = cur;
  return rc;
}

/* ---- normalizers ---- */

static int regex_replace(const pcre2_code *re, const clf__str *in, const char *to, clf__str *out) {
  size_t *m = NULL, nm = 0, cap = 0, pos = 0;
  int rc = find_all(re, in->s, in->n, &m, &nm, &cap);
  for (size_t k = 0; k < nm && !rc; k += 2) {
    rc = clf__str_add(out, in->s + pos, m[k] - pos) || clf__str_add(out, to, strlen(to));
    pos = m[k + 1];
  }
  if (!rc) rc = clf__str_add(out, in->s + pos, in->n - pos);
  free(m);
  return rc;
}

int clf__hf_normalize(const clf__hf *h, const char *s, size_t n, clf__str *out) {
  int rc = clf__str_add(out, s, n);
  for (int k = 0; k < h->n_norm && !rc; k++) {
    const clf__hf_norm *nm = &h->norm[k];
    clf__str r = {0};
    if (nm->kind == CLF__HF_NORM_NFC) rc = clf__nfc_utf8(out->s, out->n, &r);
    else if (nm->kind == CLF__HF_NORM_PREPEND && out->n)
      rc = clf__str_add(&r, nm->text, strlen(nm->text)) || clf__str_add(&r, out->s, out->n);
    else if (nm->kind == CLF__HF_NORM_PREPEND) rc = clf__str_add(&r, "", 0);
    else if (nm->re) rc = regex_replace(nm->re, out, nm->content, &r);
    else rc = replace_all(out->s, out->n, nm->text, nm->content, &r);
    free(out->s);
    *out = r;
  }
  return rc;
}

/* ---- the BPE model ---- */

typedef struct { int64_t id; size_t len; ptrdiff_t prev, next; } sym;
typedef struct { int64_t rank; size_t pos; int64_t new_id; } merge;
typedef struct { merge *v; size_t n, cap; } heap;

static int merge_less(const merge *a, const merge *b) {
  return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static int heap_push(heap *q, merge m) {
  merge *v = clf__grow(q->v, &q->cap, q->n + 1, sizeof(*v));
  if (!v) return -1;
  q->v = v;
  size_t i = q->n++;
  for (; i > 0 && merge_less(&m, &v[(i - 1) / 2]); i = (i - 1) / 2) v[i] = v[(i - 1) / 2];
  v[i] = m;
  return 0;
}

static merge heap_pop(heap *q) {
  merge top = q->v[0], last = q->v[--q->n];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= q->n) break;
    if (c + 1 < q->n && merge_less(&q->v[c + 1], &q->v[c])) c++;
    if (!merge_less(&q->v[c], &last)) break;
    q->v[i] = q->v[c];
    i = c;
  }
  if (q->n) q->v[i] = last;
  return top;
}

/* The queued merge of symbols a, b (when the pair is a merge). */
static int queue_pair(const clf__hf *h, heap *q, const sym *s, size_t a) {
  int32_t key[2] = {(int32_t)s[a].id, (int32_t)s[s[a].next].id};
  int64_t v = clf__strmap_get(&h->merges, (const char *)key, sizeof(key));
  if (v < 0) return 0;
  merge m = {v >> 32, a, v & 0xFFFFFFFF};
  return heap_push(q, m);
}

/* Word::merge_all: the lowest (rank, position) merge first, re-queueing
 * the pairs the merged symbol makes with its neighbours. */
static int merge_all(const clf__hf *h, sym *s, size_t n) {
  heap q = {0};
  int rc = 0;
  for (size_t i = 0; i + 1 < n && !rc; i++) rc = queue_pair(h, &q, s, i);
  while (q.n && !rc) {
    merge m = heap_pop(&q);
    if (s[m.pos].len == 0 || s[m.pos].next < 0) continue;
    size_t r = (size_t)s[m.pos].next;
    int32_t key[2] = {(int32_t)s[m.pos].id, (int32_t)s[r].id};
    int64_t v = clf__strmap_get(&h->merges, (const char *)key, sizeof(key));
    if (v < 0 || (v & 0xFFFFFFFF) != m.new_id) continue; /* stale */
    s[m.pos].id = m.new_id;
    s[m.pos].len += s[r].len;
    s[r].len = 0;
    s[m.pos].next = s[r].next;
    if (s[r].next >= 0) s[s[r].next].prev = (ptrdiff_t)m.pos;
    if (s[m.pos].prev >= 0) rc = queue_pair(h, &q, s, (size_t)s[m.pos].prev);
    if (!rc && s[m.pos].next >= 0) rc = queue_pair(h, &q, s, m.pos);
  }
  free(q.v);
  return rc;
}

static int sym_add(sym **s, size_t *n, size_t *cap, int64_t id, size_t len) {
  sym *v = clf__grow(*s, cap, *n + 1, sizeof(*v));
  if (!v) return -1;
  *s = v;
  v[*n] = (sym){id, len, (ptrdiff_t)*n - 1, -1};
  if (*n) v[*n - 1].next = (ptrdiff_t)*n;
  (*n)++;
  return 0;
}

/* BPE::merge_word's symbols: each character's id, else its bytes' <0xNN>
 * ids (byte_fallback), else unk (fused with a preceding unk by fuse_unk;
 * dropped when the model has no unk). */
static int word_symbols(const clf_tokenizer *t, const clf__hf *h, const char *w, size_t n, sym **s, size_t *ns) {
  size_t cap = 0, unk_len = 0;
  int rc = 0;
  for (size_t i = 0; i < n && !rc;) {
    size_t a = i;
    clf__utf8_next(w, n, &i);
    if (i == a) i = a + 1; /* a byte that starts no UTF-8 sequence is a unit of its own (it looped for ever) */
    int64_t id = clf__strmap_get(&t->vocab, w + a, i - a);
    if (id >= 0) {
      if (unk_len) rc = sym_add(s, ns, &cap, t->unk_id, unk_len);
      unk_len = 0;
      if (!rc) rc = sym_add(s, ns, &cap, id, i - a);
      continue;
    }
    int all = h->byte_fallback;
    for (size_t b = a; b < i && all; b++) all = h->byte_id[(unsigned char)w[b]] >= 0;
    if (all) {
      for (size_t b = a; b < i && !rc; b++) rc = sym_add(s, ns, &cap, h->byte_id[(unsigned char)w[b]], 1);
      continue;
    }
    if (t->unk_id < 0) continue;
    if (unk_len && !h->fuse_unk) rc = sym_add(s, ns, &cap, t->unk_id, unk_len), unk_len = 0;
    unk_len += i - a;
  }
  if (!rc && unk_len) rc = sym_add(s, ns, &cap, t->unk_id, unk_len);
  return rc;
}

static int bpe_piece(const clf_tokenizer *t, const clf__hf *h, const clf__str *w, clf__ids *out) {
  if (h->ignore_merges) {
    int64_t id = clf__strmap_get(&t->vocab, w->s, w->n);
    if (id >= 0) return clf__ids_push(out, id);
  }
  sym *s = NULL;
  size_t n = 0;
  int rc = word_symbols(t, h, w->s, w->n, &s, &n);
  if (!rc && n > 1) rc = merge_all(h, s, n);
  for (ptrdiff_t k = n ? 0 : -1; k >= 0 && !rc; k = s[k].next) rc = clf__ids_push(out, s[k].id);
  free(s);
  return rc;
}

/* ---- added tokens ---- */

/* Rust's char::is_whitespace (White_Space) of the character at s[i]: its
 * length in bytes, 0 when it is not one. */
static size_t ws_at(const char *s, size_t n, size_t i) {
  size_t j = i;
  int32_t c = clf__utf8_next(s, n, &j);
  int ws = (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
  return ws ? j - i : 0;
}

static size_t ws_before(const char *s, size_t seg, size_t i) {
  size_t k = i - 1;
  while (k > seg && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  return ws_at(s, i, k);
}

/* Whether the character at s[i] is a word character (h->word). */
static int word_char_at(const clf__hf *h, const char *s, size_t n, size_t i) {
  pcre2_match_data *md = pcre2_match_data_create_from_pattern(h->word, NULL);
  int rc = md ? pcre2_match(h->word, (PCRE2_SPTR)s + i, n - i, 0, PCRE2_NO_UTF_CHECK, md, NULL) : -1;
  pcre2_match_data_free(md);
  return rc > 0;
}

static int word_char_before(const clf__hf *h, const char *s, size_t i) {
  size_t k = i - 1;
  while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80) k--;
  return word_char_at(h, s, i, k);
}

/* The leftmost-longest added token of this pass (normalized or not) in
 * s[from..n): its index, *at its start; -1 when none. */
static long find_added(const clf__hf *h, const char *s, size_t n, size_t from, int pass, size_t *at) {
  for (size_t i = from; i < n; i++) {
    if (((unsigned char)s[i] & 0xC0) == 0x80) continue;
    for (size_t k = 0; k < h->n_added; k++) {
      const clf__hf_added *a = &h->added[k];
      /* an empty token (its content, or what normalization left of it) never
       * matches, as in tokenizers' AddedVocabulary; it would match at every
       * position, and split_added would never move on (found by fuzzing) */
      if (!a->len || (h->n_norm && a->normalized != pass) || a->len > n - i || memcmp(s + i, a->match, a->len))
        continue;
      if (a->single_word &&
          ((i > 0 && word_char_before(h, s, i)) || (i + a->len < n && word_char_at(h, s, n, i + a->len))))
        continue;
      *at = i;
      return (long)k;
    }
  }
  return -1;
}

static clf_status encode_text(const clf_tokenizer *t, const clf__hf *h, const char *s, size_t n, int first, clf__ids *out);

/* One normalized segment: normalized added tokens cut out, the rest
 * pre-tokenized and through BPE. */
static int encode_normalized(const clf_tokenizer *t, const clf__hf *h, const char *s, size_t n, int first,
                             clf__ids *out) {
  clf__hf_pieces p = {0};
  int rc = pre_tokenize(h, s, n, first, &p);
  for (size_t i = 0; i < p.n && !rc; i++) rc = bpe_piece(t, h, &p.v[i], out);
  pieces_free(&p);
  return rc;
}

/* s[0..n) split at the added tokens of `pass`; the text between goes to
 * the next stage (normalization then the normalized pass, or the model). */
static int split_added(const clf_tokenizer *t, const clf__hf *h, const char *s, size_t n, int pass, int first,
                       clf__ids *out) {
  size_t seg = 0, at;
  int rc = 0;
  for (long k; !rc && seg <= n && (k = find_added(h, s, n, seg, pass, &at)) >= 0;) {
    const clf__hf_added *a = &h->added[k];
    size_t b = at, e = at + a->len;
    for (size_t l; a->lstrip && b > seg && (l = ws_before(s, seg, b));) b -= l;
    for (size_t l; a->rstrip && e < n && (l = ws_at(s, n, e));) e += l;
    if (b > seg) rc = pass ? encode_normalized(t, h, s + seg, b - seg, first && seg == 0, out)
                           : (int)encode_text(t, h, s + seg, b - seg, seg == 0, out);
    if (!rc) rc = clf__ids_push(out, a->id);
    seg = e;
  }
  if (!rc && seg < n)
    rc = pass ? encode_normalized(t, h, s + seg, n - seg, first && seg == 0, out)
              : (int)encode_text(t, h, s + seg, n - seg, seg == 0, out);
  return rc;
}

/* Raw text between added tokens: normalized, then the normalized pass. */
static clf_status encode_text(const clf_tokenizer *t, const clf__hf *h, const char *s, size_t n, int first,
                              clf__ids *out) {
  clf__str norm = {0};
  int rc = clf__hf_normalize(h, s, n, &norm);
  if (!rc) rc = h->n_norm ? split_added(t, h, norm.s, norm.n, 1, first, out)
                          : encode_normalized(t, h, norm.s, norm.n, first, out);
  free(norm.s);
  return rc ? CLF_E_OUT_OF_MEMORY : CLF_OK;
}

clf_status clf__hf_encode(clf_tokenizer *t, const char *s, size_t n, int add_special, clf__ids *out) {
  const clf__hf *h = t->hf;
  int rc = 0;
  for (int k = 0; add_special && k < h->n_prefix && !rc; k++) rc = clf__ids_push(out, h->prefix[k]);
  if (!rc) rc = split_added(t, h, s, n, 0, 1, out);
  for (int k = 0; add_special && k < h->n_suffix && !rc; k++) rc = clf__ids_push(out, h->suffix[k]);
  return rc ? clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory (or a pattern of "
                             "tokenizer.json past PCRE2's match limits)") : CLF_OK;
}

/* ---- decoders (each maps the list of token strings, as decode_chain) ---- */

static int dec_bytelevel(clf__hf_pieces *p) {
  int inv[256 + 68], rc = 0;
  uint32_t fwd[256];
  clf__byte_map(fwd, inv);
  clf__str bytes = {0}, text = {0};
  for (size_t k = 0; k < p->n && !rc; k++) {
    size_t mark = bytes.n;
    for (size_t j = 0; j < p->v[k].n && !rc;) {
      int32_t c = clf__utf8_next(p->v[k].s, p->v[k].n, &j);
      int b = (c >= 0 && c < 256 + 68) ? inv[c] : -1;
      if (b < 0) { /* a character outside the byte alphabet: the token's own bytes */
        bytes.n = mark;
        rc = clf__str_add(&bytes, p->v[k].s, p->v[k].n);
        break;
      }
      char ch = (char)b;
      rc = clf__str_add(&bytes, &ch, 1);
    }
  }
  if (!rc) rc = clf__utf8_replace((const unsigned char *)bytes.s, bytes.n, &text) || clf__str_add(&text, "", 0);
  pieces_free(p);
  if (!rc) rc = pieces_add(p, text.s, text.n);
  free(bytes.s);
  free(text.s);
  return rc;
}

static int byte_token(const clf__str *s) {
  static const char *hex = "0123456789ABCDEF0123456789abcdef";
  if (s->n != 6 || memcmp(s->s, "<0x", 3) || s->s[5] != '>') return -1;
  const char *a = strchr(hex, s->s[3]), *b = strchr(hex, s->s[4]);
  if (!a || !b || !s->s[3] || !s->s[4]) return -1;
  return (int)((a - hex) % 16 * 16 + (b - hex) % 16);
}

/* ByteFallback: runs of <0xNN> become their UTF-8 text, or one U+FFFD per
 * byte when they are not UTF-8. */
static int flush_bytes(clf__str *bytes, clf__hf_pieces *out) {
  int rc = 0;
  size_t i = 0;
  while (i < bytes->n && clf__utf8_next(bytes->s, bytes->n, &i) >= 0) {}
  if (i == bytes->n) rc = pieces_add(out, bytes->s, bytes->n);
  else
    for (size_t k = 0; k < bytes->n && !rc; k++) rc = pieces_add(out, "\xef\xbf\xbd", 3);
  bytes->n = 0;
  return rc;
}

static int dec_bytefallback(clf__hf_pieces *p) {
  clf__hf_pieces out = {0};
  clf__str bytes = {0};
  int rc = 0;
  for (size_t k = 0; k < p->n && !rc; k++) {
    int b = byte_token(&p->v[k]);
    char ch = (char)b;
    if (b >= 0) rc = clf__str_add(&bytes, &ch, 1);
    else rc = flush_bytes(&bytes, &out) || pieces_add(&out, p->v[k].s, p->v[k].n);
  }
  if (!rc) rc = flush_bytes(&bytes, &out);
  free(bytes.s);
  pieces_free(p);
  *p = out;
  return rc;
}

static int dec_fuse(clf__hf_pieces *p) {
  clf__str all = {0};
  int rc = clf__str_add(&all, "", 0);
  for (size_t k = 0; k < p->n && !rc; k++) rc = clf__str_add(&all, p->v[k].s, p->v[k].n);
  pieces_free(p);
  if (!rc) rc = pieces_add(p, all.s, all.n);
  free(all.s);
  return rc;
}

/* Replace, Strip and Metaspace: one token at a time. */
static int dec_map(const clf__hf_dec *d, clf__hf_pieces *p) {
  int rc = 0;
  for (size_t k = 0; k < p->n && !rc; k++) {
    clf__str r = {0}, *s = &p->v[k];
    if (d->kind == CLF__HF_DEC_REPLACE) {
      rc = replace_all(s->s, s->n, d->from, d->to, &r);
    } else if (d->kind == CLF__HF_DEC_METASPACE) { /* the first token loses its replacements when prepending */
      rc = replace_all(s->s, s->n, d->from, (k == 0 && d->prepend != CLF__HF_PREPEND_NEVER) ? "" : " ", &r);
    } else { /* Strip: up to start / stop characters equal to `to` */
      size_t b = 0, e = s->n, cl = strlen(d->to);
      for (int i = 0; i < d->start && cl && b + cl <= e && !memcmp(s->s + b, d->to, cl); i++) b += cl;
      for (int i = 0; i < d->stop && cl && e >= b + cl && !memcmp(s->s + e - cl, d->to, cl); i++) e -= cl;
      rc = clf__str_add(&r, s->s + b, e - b);
    }
    free(s->s);
    *s = r;
  }
  return rc;
}

clf_status clf__hf_decode(clf_tokenizer *t, const int64_t *ids, size_t n, int skip_special, clf__str *out) {
  const clf__hf *h = t->hf;
  clf__hf_pieces p = {0};
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    if (ids[i] < 0 || (size_t)ids[i] >= t->n_ids || !t->id_to_token[ids[i]]) continue; /* as tokenizers: dropped */
    int special = 0;
    for (size_t k = 0; k < h->n_added && skip_special && !special; k++)
      special = h->added[k].special && h->added[k].id == ids[i];
    if (special) continue;
    const char *tok = t->id_to_token[ids[i]];
    clf__str *v = clf__grow(p.v, &p.cap, p.n + 1, sizeof(*v)); /* kept even when empty */
    if (!v) { rc = -1; break; }
    p.v = v;
    memset(&p.v[p.n], 0, sizeof(clf__str));
    rc = clf__str_add(&p.v[p.n++], tok, strlen(tok));
  }
  for (int k = 0; k < h->n_dec && !rc; k++) {
    const clf__hf_dec *d = &h->dec[k];
    if (d->kind == CLF__HF_DEC_BYTELEVEL) rc = dec_bytelevel(&p);
    else if (d->kind == CLF__HF_DEC_BYTEFALLBACK) rc = dec_bytefallback(&p);
    else if (d->kind == CLF__HF_DEC_FUSE) rc = dec_fuse(&p);
    else rc = dec_map(d, &p);
  }
  for (size_t k = 0; k < p.n && !rc; k++) /* joined with "", or " " without a decoder */
    rc = (k && !h->has_decoder && clf__str_add(out, " ", 1)) || clf__str_add(out, p.v[k].s, p.v[k].n);
  pieces_free(&p);
  return rc ? clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory") : CLF_OK;
}
