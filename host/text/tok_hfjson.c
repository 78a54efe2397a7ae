/* tok_hfjson.c - reads tokenizer.json (the Hugging Face `tokenizers`
 * library's format) into the pipeline of tok_hf.h.
 *
 * What is read: the BPE model (vocab, merges as "a b" strings or [a, b]
 * pairs, unk_token, fuse_unk, byte_fallback, ignore_merges); normalizers
 * Sequence, Prepend, Replace, NFC; pre-tokenizers Sequence, Split (regex or
 * string pattern, every behaviour, invert), ByteLevel, Metaspace, Digits;
 * post-processors Sequence, ByteLevel (ids unchanged), TemplateProcessing,
 * RobertaProcessing, BertProcessing (the single-sequence template);
 * decoders Sequence, ByteLevel, Replace, ByteFallback, Fuse, Strip,
 * Metaspace; added_tokens with special, lstrip, rstrip, single_word and
 * normalized.  Anything else (a WordPiece, Unigram or WordLevel model, BPE
 * dropout, subword prefixes, another component type) is CLF_E_UNSUPPORTED
 * naming it and the file.  Regular expressions go to PCRE2 (UTF, UCP),
 * whose syntax and Unicode classes match the Oniguruma of `tokenizers` on
 * the patterns checkpoints use.
 */
#include "tok_hf.h"
#include "base/status.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HF_UNSUPPORTED(path, what, type)                                                                  \
  clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: %s \"%s\" is not supported", path, what, \
            type)

static const char *jstr(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *key, int dflt) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static clf_status oom(void) { return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory"); }

static char *dup(const char *s) {
  char *c = s ? strdup(s) : NULL;
  return c;
}

/* Oniguruma's \s (what `tokenizers` runs): the White_Space characters.
 * PCRE2 10.42's \s under UCP also takes U+180E, which Oniguruma does not. */
#define ONIG_SPACES "\\t\\n\\x0b\\f\\r \\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}" \
                    "\\x{202f}\\x{205f}\\x{3000}"

/* pattern with \s and \S spelt as Oniguruma's sets (malloc'd); NULL out of
 * memory, or with *bad set for a \S inside a character class. */
static char *onig_spaces(const char *p, int *bad) {
  clf__str o = {0};
  int in_class = 0, rc = clf__str_add(&o, "", 0);
  for (size_t i = 0; p[i] && !rc; i++) {
    if (p[i] == '\\' && (p[i + 1] == 's' || p[i + 1] == 'S')) {
      if (in_class && p[i + 1] == 'S') { *bad = 1; break; }
      const char *pre = in_class ? "" : p[i + 1] == 's' ? "[" : "[^", *post = in_class ? "" : "]";
      rc = clf__str_add(&o, pre, strlen(pre)) || clf__str_add(&o, ONIG_SPACES, strlen(ONIG_SPACES)) ||
           clf__str_add(&o, post, strlen(post));
      i++;
      continue;
    }
    size_t k = (p[i] == '\\' && p[i + 1]) ? 2 : 1; /* an escape is copied whole */
    if (k == 1 && p[i] == '[' && !in_class) { /* a ']' first in the class is a literal */
      in_class = 1;
      k += p[i + 1] == '^';
      k += p[i + k] == ']';
    } else if (k == 1 && p[i] == ']' && in_class) {
      in_class = 0;
    }
    rc = clf__str_add(&o, p + i, k);
    i += k - 1;
  }
  if (rc || *bad) { free(o.s); return NULL; }
  return o.s;
}

/* Compiles pattern (a literal when literal) for PCRE2 with UTF and UCP. */
static clf_status compile(const char *pattern, int literal, const char *path, pcre2_code **re) {
  int err, bad = 0;
  PCRE2_SIZE at;
  uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL takes no UCP */
  char *onig = literal ? NULL : onig_spaces(pattern, &bad);
  if (bad) return HF_UNSUPPORTED(path, "pattern (\\S in a character class)", pattern);
  if (!literal && !onig) return oom();
  *re = pcre2_compile((PCRE2_SPTR)(literal ? pattern : onig), PCRE2_ZERO_TERMINATED, opts, &err, &at, NULL);
  free(onig);
  if (!*re) {
    PCRE2_UCHAR msg[160];
    pcre2_get_error_message(err, msg, sizeof(msg));
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: the pattern \"%.80s\" does not compile "
                     "(at %zu: %s)", path, pattern, (size_t)at, (const char *)msg);
  }
  pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE); /* the interpreter runs it where JIT is unavailable */
  return CLF_OK;
}

/* {"String": s} or {"Regex": r}: *text and *is_regex, or an error. */
static clf_status pattern_of(const cJSON *o, const char *path, const char **text, int *is_regex) {
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
  *text = jstr(p, "String");
  *is_regex = 0;
  if (!*text && (*text = jstr(p, "Regex"))) *is_regex = 1;
  if (!*text) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: a pattern without String or Regex", path);
  return CLF_OK;
}

static clf_status prepend_scheme(const cJSON *o, const char *path, clf__hf_prepend *out) {
  const char *s = jstr(o, "prepend_scheme");
  if (!s) { /* older files: add_prefix_space */
    *out = jbool(o, "add_prefix_space", 1) ? CLF__HF_PREPEND_ALWAYS : CLF__HF_PREPEND_NEVER;
    return CLF_OK;
  }
  if (!strcmp(s, "always")) *out = CLF__HF_PREPEND_ALWAYS;
  else if (!strcmp(s, "first")) *out = CLF__HF_PREPEND_FIRST;
  else if (!strcmp(s, "never")) *out = CLF__HF_PREPEND_NEVER;
  else return HF_UNSUPPORTED(path, "Metaspace prepend_scheme", s);
  return CLF_OK;
}

/* ---- normalizers ---- */

static clf_status load_normalizer(clf__hf *h, const cJSON *o, const char *path) {
  if (!o || cJSON_IsNull(o)) return CLF_OK;
  const char *type = jstr(o, "type");
  if (!type) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: a normalizer without a type", path);
  if (!strcmp(type, "Sequence")) {
    const cJSON *e;
    clf_status st = CLF_OK;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "normalizers")) {
      if ((st = load_normalizer(h, e, path)) != CLF_OK) break;
    }
    return st;
  }
  if (h->n_norm == CLF__HF_MAX_STEPS)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: more than %d normalizers", path, CLF__HF_MAX_STEPS);
  clf__hf_norm *n = &h->norm[h->n_norm++]; /* counted now: clf__hf_free frees what is filled */
  if (!strcmp(type, "NFC")) {
    n->kind = CLF__HF_NORM_NFC;
  } else if (!strcmp(type, "Prepend")) {
    n->kind = CLF__HF_NORM_PREPEND;
    if (!jstr(o, "prepend")) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: Prepend without prepend", path);
    if (!(n->text = dup(jstr(o, "prepend")))) return oom();
  } else if (!strcmp(type, "Replace")) {
    const char *pat;
    int is_re;
    clf_status st = pattern_of(o, path, &pat, &is_re);
    if (st != CLF_OK) return st;
    n->kind = CLF__HF_NORM_REPLACE;
    if (is_re && (st = compile(pat, 0, path, &n->re)) != CLF_OK) return st;
    if ((!is_re && !(n->text = dup(pat))) || !(n->content = dup(jstr(o, "content") ? jstr(o, "content") : "")))
      return oom();
  } else {
    return HF_UNSUPPORTED(path, "normalizer type", type);
  }
  return CLF_OK;
}

/* ---- pre-tokenizers ---- */

static clf_status behavior_of(const char *s, const char *path, clf__hf_behavior *b) {
  static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  for (int i = 0; i < 5; i++)
    if (s && !strcmp(s, names[i])) { *b = (clf__hf_behavior)i; return CLF_OK; }
  return HF_UNSUPPORTED(path, "Split behavior", s ? s : "(none)");
}

static clf_status load_split(clf__hf_pre *p, const cJSON *o, const char *path) {
  const char *pat;
  int is_re;
  clf_status st = pattern_of(o, path, &pat, &is_re);
  if (st == CLF_OK) st = behavior_of(jstr(o, "behavior"), path, &p->behavior);
  if (st == CLF_OK) st = compile(pat, !is_re, path, &p->re);
  p->kind = CLF__HF_PRE_SPLIT;
  p->invert = jbool(o, "invert", 0);
  return st;
}

static clf_status load_pre_one(clf__hf_pre *p, const cJSON *o, const char *type, const char *path) {
  if (!strcmp(type, "Split")) return load_split(p, o, path);
  if (!strcmp(type, "ByteLevel")) {
    p->kind = CLF__HF_PRE_BYTELEVEL;
    p->add_prefix_space = jbool(o, "add_prefix_space", 1);
    return jbool(o, "use_regex", 1) ? compile(CLF__HF_GPT2_PATTERN, 0, path, &p->re) : CLF_OK;
  }
  if (!strcmp(type, "Digits")) { /* Rust's char::is_numeric (Nd, Nl, No), each alone or in runs */
    p->kind = CLF__HF_PRE_SPLIT;
    p->behavior = jbool(o, "individual_digits", 0) ? CLF__HF_ISOLATED : CLF__HF_CONTIGUOUS;
    return compile("\\p{N}", 0, path, &p->re);
  }
  if (!strcmp(type, "Metaspace")) {
    const char *r = jstr(o, "replacement");
    if (!r) r = "\xe2\x96\x81";
    size_t i = 0;
    if (clf__utf8_next(r, strlen(r), &i) < 0 || i != strlen(r))
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: Metaspace's replacement is not one character",
                       path);
    p->kind = CLF__HF_PRE_METASPACE;
    memcpy(p->repl, r, i + 1);
    p->split = jbool(o, "split", 1);
    return prepend_scheme(o, path, &p->prepend);
  }
  return HF_UNSUPPORTED(path, "pre_tokenizer type", type);
}

static clf_status load_pre(clf__hf *h, const cJSON *o, const char *path) {
  if (!o || cJSON_IsNull(o)) return CLF_OK;
  const char *type = jstr(o, "type");
  if (!type) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: a pre_tokenizer without a type", path);
  if (!strcmp(type, "Sequence")) {
    const cJSON *e;
    clf_status st = CLF_OK;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "pretokenizers")) {
      if ((st = load_pre(h, e, path)) != CLF_OK) break;
    }
    return st;
  }
  if (h->n_pre == CLF__HF_MAX_STEPS)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: more than %d pre-tokenizers", path,
                     CLF__HF_MAX_STEPS);
  return load_pre_one(&h->pre[h->n_pre++], o, type, path);
}

/* ---- decoders ---- */

static clf_status load_dec_one(clf__hf_dec *d, const cJSON *o, const char *type, const char *path) {
  if (!strcmp(type, "ByteLevel")) { d->kind = CLF__HF_DEC_BYTELEVEL; return CLF_OK; }
  if (!strcmp(type, "ByteFallback")) { d->kind = CLF__HF_DEC_BYTEFALLBACK; return CLF_OK; }
  if (!strcmp(type, "Fuse")) { d->kind = CLF__HF_DEC_FUSE; return CLF_OK; }
  if (!strcmp(type, "Replace")) {
    const char *pat;
    int is_re;
    clf_status st = pattern_of(o, path, &pat, &is_re);
    if (st != CLF_OK) return st;
    if (is_re) return HF_UNSUPPORTED(path, "decoder Replace with a Regex pattern", pat);
    d->kind = CLF__HF_DEC_REPLACE;
    if (!(d->from = dup(pat)) || !(d->to = dup(jstr(o, "content") ? jstr(o, "content") : ""))) return oom();
    return CLF_OK;
  }
  if (!strcmp(type, "Strip")) {
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "start"), *e = cJSON_GetObjectItemCaseSensitive(o, "stop");
    d->kind = CLF__HF_DEC_STRIP;
    d->start = cJSON_IsNumber(s) ? s->valueint : 0;
    d->stop = cJSON_IsNumber(e) ? e->valueint : 0;
    return (d->to = dup(jstr(o, "content") ? jstr(o, "content") : " ")) ? CLF_OK : oom();
  }
  if (!strcmp(type, "Metaspace")) {
    d->kind = CLF__HF_DEC_METASPACE;
    if (!(d->from = dup(jstr(o, "replacement") ? jstr(o, "replacement") : "\xe2\x96\x81"))) return oom();
    return prepend_scheme(o, path, &d->prepend);
  }
  return HF_UNSUPPORTED(path, "decoder type", type);
}

static clf_status load_decoder(clf__hf *h, const cJSON *o, const char *path) {
  if (!o || cJSON_IsNull(o)) return CLF_OK;
  const char *type = jstr(o, "type");
  if (!type) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: a decoder without a type", path);
  h->has_decoder = 1;
  if (!strcmp(type, "Sequence")) {
    const cJSON *e;
    clf_status st = CLF_OK;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "decoders")) {
      if ((st = load_decoder(h, e, path)) != CLF_OK) break;
    }
    return st;
  }
  if (h->n_dec == CLF__HF_MAX_STEPS)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: more than %d decoders", path, CLF__HF_MAX_STEPS);
  return load_dec_one(&h->dec[h->n_dec++], o, type, path);
}

/* ---- post-processor: the single-sequence template ---- */

static clf_status template_add(clf__hf *h, int after, int64_t id, const char *path) {
  int *n = after ? &h->n_suffix : &h->n_prefix;
  if (*n == CLF__HF_MAX_TEMPLATE)
    return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s: a template with more than %d special ids",
                     path, CLF__HF_MAX_TEMPLATE);
  (after ? h->suffix : h->prefix)[(*n)++] = id;
  return CLF_OK;
}

static clf_status load_template(clf__hf *h, const cJSON *o, const char *path) {
  const cJSON *item, *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
  int after = 0;
  clf_status st = CLF_OK;
  h->n_prefix = h->n_suffix = 0;
  cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(o, "single")) {
    if (cJSON_GetObjectItemCaseSensitive(item, "Sequence")) { after = 1; continue; }
    const char *name = jstr(cJSON_GetObjectItemCaseSensitive(item, "SpecialToken"), "id");
    const cJSON *ids = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(specials, name ? name : ""),
                                                        "ids"), *id;
    if (!name || !cJSON_IsArray(ids))
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: TemplateProcessing names special token \"%s\" "
                       "that its special_tokens do not list", path, name ? name : "(none)");
    cJSON_ArrayForEach(id, ids) {
      if (!cJSON_IsNumber(id) || id->valuedouble < 0)
        return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: special token \"%s\" has a bad id", path, name);
      if ((st = template_add(h, after, (int64_t)id->valuedouble, path)) != CLF_OK) return st;
    }
  }
  return st;
}

static clf_status load_post(clf__hf *h, const cJSON *o, const char *path) {
  if (!o || cJSON_IsNull(o)) return CLF_OK;
  const char *type = jstr(o, "type");
  if (!type) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: a post_processor without a type", path);
  if (!strcmp(type, "Sequence")) {
    const cJSON *e;
    clf_status st = CLF_OK;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "processors")) {
      if ((st = load_post(h, e, path)) != CLF_OK) break;
    }
    return st;
  }
  if (!strcmp(type, "ByteLevel")) return CLF_OK; /* offsets only */
  if (!strcmp(type, "TemplateProcessing")) return load_template(h, o, path);
  if (!strcmp(type, "RobertaProcessing") || !strcmp(type, "BertProcessing")) { /* "cls": [text, id] */
    const cJSON *cls = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "cls"), 1);
    const cJSON *sep = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "sep"), 1);
    if (!cJSON_IsNumber(cls) || !cJSON_IsNumber(sep))
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: %s without cls / sep ids", path, type);
    h->n_prefix = h->n_suffix = 1;
    h->prefix[0] = (int64_t)cls->valuedouble;
    h->suffix[0] = (int64_t)sep->valuedouble;
    return CLF_OK;
  }
  return HF_UNSUPPORTED(path, "post_processor type", type);
}

/* ---- the BPE model ---- */

static clf_status merge_put(clf_tokenizer *t, clf__hf *h, const char *a, const char *b, int64_t rank,
                            const char *path) {
  size_t la = strlen(a), lb = strlen(b);
  int64_t ia = clf__strmap_get(&t->vocab, a, la), ib = clf__strmap_get(&t->vocab, b, lb), im = -1;
  char *ab = malloc(la + lb + 1);
  if (!ab) return oom();
  memcpy(ab, a, la);
  memcpy(ab + la, b, lb + 1);
  if (ia >= 0 && ib >= 0) im = clf__strmap_get(&t->vocab, ab, la + lb);
  free(ab);
  if (im < 0)
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: merge %lld (\"%.40s\" \"%.40s\") has a token "
                     "that is not in the vocabulary", path, (long long)rank, a, b);
  int32_t key[2] = {(int32_t)ia, (int32_t)ib};
  if (clf__strmap_put(&h->merges, (const char *)key, sizeof(key), rank << 32 | im)) return oom();
  return CLF_OK;
}

static clf_status load_merges(clf_tokenizer *t, clf__hf *h, const cJSON *merges, const char *path) {
  const cJSON *m;
  int64_t rank = 0;
  if (!cJSON_IsArray(merges))
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: model.merges is not an array", path);
  cJSON_ArrayForEach(m, merges) {
    clf_status st;
    if (cJSON_IsString(m)) { /* "a b" */
      char *s = m->valuestring, *sp = strchr(s, ' ');
      if (!sp || strchr(sp + 1, ' '))
        return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: merge %lld \"%.40s\" is not two tokens "
                         "separated by one space", path, (long long)rank, s);
      *sp = '\0';
      st = merge_put(t, h, s, sp + 1, rank, path);
      *sp = ' ';
    } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) && cJSON_IsString(m->child->next)) {
      st = merge_put(t, h, m->child->valuestring, m->child->next->valuestring, rank, path);
    } else {
      st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: merge %lld is neither \"a b\" nor [a, b]", path,
                     (long long)rank);
    }
    if (st != CLF_OK) return st;
    rank++;
  }
  return CLF_OK;
}

static clf_status model_options(const cJSON *model, const char *path) {
  const char *type = jstr(model, "type");
  if (!type) type = cJSON_GetObjectItemCaseSensitive(model, "merges") ? "BPE" : "(none)";
  if (strcmp(type, "BPE")) return HF_UNSUPPORTED(path, "model type (only BPE is)", type);
  const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(model, "dropout");
  if (cJSON_IsNumber(dropout) && dropout->valuedouble != 0)
    return HF_UNSUPPORTED(path, "BPE option", "dropout");
  static const char *fixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
  for (int i = 0; i < 2; i++) {
    const char *s = jstr(model, fixes[i]);
    if (s && *s) return HF_UNSUPPORTED(path, "BPE option", fixes[i]);
  }
  return CLF_OK;
}

static clf_status load_model(clf_tokenizer *t, clf__hf *h, const cJSON *model, const char *path) {
  if (!cJSON_IsObject(model)) return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s has no model", path);
  clf_status st = model_options(model, path);
  if (st == CLF_OK) st = clf__tok_vocab_from_json(t, cJSON_GetObjectItemCaseSensitive(model, "vocab"), path);
  if (st == CLF_OK) st = load_merges(t, h, cJSON_GetObjectItemCaseSensitive(model, "merges"), path);
  if (st != CLF_OK) return st;
  h->fuse_unk = jbool(model, "fuse_unk", 0);
  h->byte_fallback = jbool(model, "byte_fallback", 0);
  h->ignore_merges = jbool(model, "ignore_merges", 0);
  for (int b = 0; b < 256; b++) {
    char name[8];
    snprintf(name, sizeof(name), "<0x%02X>", b);
    h->byte_id[b] = clf__strmap_get(&t->vocab, name, 6);
  }
  const char *unk = jstr(model, "unk_token");
  if (unk && (t->unk_id = clf__strmap_get(&t->vocab, unk, strlen(unk))) < 0)
    return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: unk_token \"%.40s\" is not in the vocabulary",
                     path, unk);
  return CLF_OK;
}

/* ---- added tokens ---- */

static int longer_first(const void *a, const void *b) {
  const clf__hf_added *x = a, *y = b;
  return (x->len < y->len) - (x->len > y->len);
}

static clf_status load_added(clf__hf *h, const cJSON *arr, const char *path) {
  const cJSON *e;
  size_t n = (size_t)cJSON_GetArraySize(arr);
  if (!n) return CLF_OK;
  if (!(h->added = calloc(n, sizeof(*h->added)))) return oom();
  cJSON_ArrayForEach(e, arr) {
    const char *text = jstr(e, "content");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
    if (!text || !*text || !cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= 2147483647.0)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: added token %zu has no content or a bad id",
                       path, h->n_added);
    clf_status st = clf__tok_check_len(strlen(text), "%s: added token %zu", path, h->n_added);
    if (st != CLF_OK) return st;
    clf__hf_added *a = &h->added[h->n_added++];
    if (!(a->text = dup(text)) || !(a->match = dup(text))) return oom();
    a->len = strlen(text);
    a->id = (int64_t)id->valuedouble;
    a->special = jbool(e, "special", 0);
    a->lstrip = jbool(e, "lstrip", 0);
    a->rstrip = jbool(e, "rstrip", 0);
    a->single_word = jbool(e, "single_word", 0);
    a->normalized = jbool(e, "normalized", !a->special);
  }
  return CLF_OK;
}

/* tokenizers matches normalized added tokens by their normalized content
 * (under Prepend("▁"), "<x>" is found as "▁<x>"); longest first. */
static clf_status added_matches(clf__hf *h) {
  for (size_t i = 0; i < h->n_added && h->n_norm; i++) {
    clf__hf_added *a = &h->added[i];
    clf__str m = {0};
    if (!a->normalized) continue;
    if (clf__hf_normalize(h, a->text, strlen(a->text), &m)) { free(m.s); return oom(); }
    free(a->match);
    a->match = m.s;
    a->len = m.n;
  }
  if (h->n_added > 1) /* qsort's pointer must not be NULL, even for no elements */
    qsort(h->added, h->n_added, sizeof(*h->added), longer_first);
  return CLF_OK;
}

/* transformers' LlamaTokenizerFast (and Gemma's) rebuild the template from
 * tokenizer_config.json's add_bos_token (default true) / add_eos_token
 * (default false) and bos_token / eos_token; other classes keep the file's. */
static clf_status config_template(clf_tokenizer *t, clf__hf *h, void *config, const char *path) {
  const char *cls = clf__tok_cfg_str(config, "tokenizer_class", "");
  if (strncmp(cls, "LlamaTokenizer", 14) && strncmp(cls, "CodeLlamaTokenizer", 18) &&
      strncmp(cls, "GemmaTokenizer", 14))
    return CLF_OK;
  const char *bos = clf__tok_cfg_str(config, "bos_token", NULL), *eos = clf__tok_cfg_str(config, "eos_token", NULL);
  int add_bos = clf__tok_cfg_bool(config, "add_bos_token", 1) == 1;
  int add_eos = clf__tok_cfg_bool(config, "add_eos_token", 0) == 1;
  h->n_prefix = h->n_suffix = 0;
  const char *names[2] = {add_bos ? bos : NULL, add_eos ? eos : NULL};
  for (int k = 0; k < 2; k++) {
    if (!names[k]) continue;
    int64_t id = -1;
    for (size_t i = 0; i < h->n_added && id < 0; i++)
      if (!strcmp(h->added[i].text, names[k])) id = h->added[i].id;
    if (id < 0) id = clf__strmap_get(&t->vocab, names[k], strlen(names[k]));
    if (id < 0)
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s: tokenizer_config.json's %s \"%.40s\" is not "
                       "a token", path, k ? "eos_token" : "bos_token", names[k]);
    (k ? h->suffix : h->prefix)[0] = id;
    *(k ? &h->n_suffix : &h->n_prefix) = 1;
  }
  return CLF_OK;
}

static clf_status load_all(clf_tokenizer *t, clf__hf *h, const cJSON *root, void *config, const char *path) {
  clf_status st = load_model(t, h, cJSON_GetObjectItemCaseSensitive(root, "model"), path);
  if (st == CLF_OK) st = load_added(h, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), path);
  if (st == CLF_OK) st = load_normalizer(h, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), path);
  if (st == CLF_OK) st = added_matches(h);
  if (st == CLF_OK) /* Rust regex's \w (UTS #18), whose \b bounds single_word tokens */
    st = compile("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", 0, path, &h->word);
  if (st == CLF_OK) st = load_pre(h, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), path);
  if (st == CLF_OK) st = load_post(h, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), path);
  if (st == CLF_OK) st = load_decoder(h, cJSON_GetObjectItemCaseSensitive(root, "decoder"), path);
  if (st == CLF_OK) st = config_template(t, h, config, path);
  for (size_t i = 0; i < h->n_added && st == CLF_OK; i++) /* decode reads added tokens from id_to_token too */
    if (clf__tok_set_token(t, h->added[i].id, h->added[i].text, strlen(h->added[i].text))) st = oom();
  return st;
}

clf_status clf__hf_load_json(clf_tokenizer *t, const void *root, void *config, const char *path) {
  clf__hf *h = calloc(1, sizeof(*h));
  if (!h) return oom();
  t->hf = h; /* freed by clf__hf_free, also on failure */
  return load_all(t, h, root, config, path);
}

clf_status clf__hf_load(clf_tokenizer *t, const char *dir, void *config) {
  char *path = clf__tok_path(dir, "tokenizer.json");
  if (!path) return oom();
  clf_status st;
  char *text = clf__tok_read_text(path, NULL, &st);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (text && !cJSON_IsObject(root))
    st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is not a JSON object", path);
  if (st == CLF_OK) st = clf__hf_load_json(t, root, config, path);
  cJSON_Delete(root);
  free(path);
  return st;
}

void clf__hf_free(clf_tokenizer *t) {
  clf__hf *h = t->hf;
  if (!h) return;
  for (int i = 0; i < h->n_norm; i++) {
    free(h->norm[i].text);
    free(h->norm[i].content);
    pcre2_code_free(h->norm[i].re);
  }
  for (int i = 0; i < h->n_pre; i++) pcre2_code_free(h->pre[i].re);
  for (int i = 0; i < h->n_dec; i++) {
    free(h->dec[i].from);
    free(h->dec[i].to);
  }
  for (size_t i = 0; i < h->n_added; i++) {
    free(h->added[i].text);
    free(h->added[i].match);
  }
  free(h->added);
  clf__strmap_free(&h->merges);
  pcre2_code_free(h->word);
  free(h);
  t->hf = NULL;
}
