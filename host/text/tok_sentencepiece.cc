/* tok_sentencepiece.cc - Marian's tokenizer (transformers' MarianTokenizer):
 * SentencePiece (Debian's libsentencepiece) encodes with source.spm, pieces map
 * to ids through vocab.json; decoding goes through target.spm.  And XLM-R's
 * (XLMRobertaTokenizer): sentencepiece.bpe.model with fairseq's ids.
 */
#include "tokenizer.h"
#include "base/file.h"
#include "base/status.h"

#include <cstdlib>
#include <cstring>

/* Debian's sentencepiece_processor.h uses std::string_view: C++17. */
#if __cplusplus >= 201703L
#include <sentencepiece_processor.h>

#include <new>
#include <string>
#include <vector>

namespace {

sentencepiece::SentencePieceProcessor *load_spm(const char *dir, const char *name, clf_status *st) {
  char *path = clf__tok_path(dir, name);
  if (!path) {
    *st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
    return nullptr;
  }
  if (!clf__path_present(path)) {
    *st = clf__fail(NULL, CLF_E_NOT_FOUND, "clf_tokenizer_load: %s not found (Marian needs source.spm, "
                    "target.spm and vocab.json)", path);
    free(path);
    return nullptr;
  }
  auto *sp = new (std::nothrow) sentencepiece::SentencePieceProcessor();
  if (!sp) {
    free(path);
    *st = clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
    return nullptr;
  }
  /* read here (a regular file, capped) rather than by sp->Load, which
   * would block on a FIFO and read a device without end */
  size_t len = 0;
  char *bytes = clf__tok_read_text(path, &len, st);
  if (!bytes) {
    delete sp;
    free(path);
    return nullptr;
  }
  try {
    auto s = sp->LoadFromSerializedProto(absl::string_view(bytes, len));
    if (!s.ok())
      *st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s is not a SentencePiece model: %s", path,
                      s.ToString().c_str());
    for (int i = 0; s.ok() && i < sp->GetPieceSize() && *st == CLF_OK; i++) /* as every vocabulary */
      *st = clf__tok_check_len(sp->IdToPiece(i).size(), "%s: piece %d", path, i);
    if (*st != CLF_OK) {
      delete sp;
      sp = nullptr;
    }
  } catch (...) {
    *st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s could not be read as a SentencePiece model", path);
    delete sp;
    sp = nullptr;
  }
  free(bytes);
  free(path);
  return sp;
}

/* Python's re.sub(">>.+<<", "", text) on one chunk; `code` gets a match at 0. */
std::string remove_language_codes(const std::string &text, std::string *code) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text.compare(i, 2, ">>") == 0) {
      size_t eol = text.find('\n', i + 2); /* '.' does not match a newline */
      if (eol == std::string::npos) eol = text.size();
      size_t close = eol >= 2 ? text.rfind("<<", eol - 2) : std::string::npos; /* greedy: the last "<<" */
      if (close != std::string::npos && close >= i + 3) {
        if (i == 0) *code = text.substr(0, close + 2);
        i = close + 2;
        continue;
      }
    }
    out += text[i++];
  }
  return out;
}

}  // namespace

extern "C" clf_status clf__spm_load(clf_tokenizer *t, const char *dir, void *config) {
  clf_status st = CLF_OK;
  char *vpath = clf__tok_path(dir, "vocab.json");
  if (!vpath) return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  if (!clf__path_present(vpath))
    st = clf__fail(NULL, CLF_E_NOT_FOUND, "clf_tokenizer_load: %s not found (Marian needs source.spm, "
                   "target.spm and vocab.json)", vpath);
  if (st == CLF_OK && clf__tok_cfg_bool(config, "separate_vocabs", 0) == 1)
    st = clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s/tokenizer_config.json asks for separate_vocabs "
                   "(target_vocab.json), which is not supported", dir);
  if (st == CLF_OK) st = clf__tok_load_vocab_json(t, vpath);
  if (st == CLF_OK) t->spm_source = load_spm(dir, "source.spm", &st);
  if (st == CLF_OK) t->spm_target = load_spm(dir, "target.spm", &st);
  /* all_special_tokens' order: eos, unk, pad */
  static const char *keys[] = {"eos_token", "unk_token", "pad_token"};
  static const char *dflt[] = {"</s>", "<unk>", "<pad>"};
  for (int k = 0; k < 3 && st == CLF_OK; k++) st = clf__tok_add_special(t, clf__tok_cfg_str(config, keys[k], dflt[k]));
  if (st == CLF_OK) {
    const char *u = clf__tok_cfg_str(config, "unk_token", "<unk>"), *e = clf__tok_cfg_str(config, "eos_token", "</s>");
    t->unk_id = clf__strmap_get(&t->vocab, u, strlen(u));
    t->eos_id = clf__strmap_get(&t->vocab, e, strlen(e));
    if (t->unk_id < 0 || t->eos_id < 0)
      st = clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_load: %s has no %s token", vpath, t->unk_id < 0 ? u : e);
  }
  free(vpath);
  return st;
}

extern "C" clf_status clf__spm_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  auto *sp = static_cast<sentencepiece::SentencePieceProcessor *>(t->spm_source);
  try {
    std::string code, text = remove_language_codes(std::string(s, n), &code);
    std::vector<std::string> pieces;
    if (!code.empty()) pieces.push_back(code);
    std::vector<std::string> enc;
    auto status = sp->Encode(text, &enc);
    if (!status.ok())
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_encode: SentencePiece failed: %s", status.ToString().c_str());
    pieces.insert(pieces.end(), enc.begin(), enc.end());
    for (const auto &p : pieces) {
      int64_t id = clf__strmap_get(&t->vocab, p.data(), p.size());
      if (clf__ids_push(out, id >= 0 ? id : t->unk_id))
        return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
    }
  } catch (...) {
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
  }
  return CLF_OK;
}

/* MarianTokenizer.convert_tokens_to_string: special tokens are copied with a
 * space after them, runs of pieces go through target.spm, then "\u2581" -> " "
 * and strip(). */
extern "C" clf_status clf__spm_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  auto *sp = static_cast<sentencepiece::SentencePieceProcessor *>(t->spm_target);
  try {
    std::string s;
    std::vector<std::string> run;
    for (size_t i = 0; i < n; i++) {
      if (clf__tok_is_special_text(t, toks[i], strlen(toks[i]))) {
        s += sp->DecodePieces(run);
        s += toks[i];
        s += ' ';
        run.clear();
      } else {
        run.push_back(toks[i]);
      }
    }
    s += sp->DecodePieces(run);
    std::string r;
    for (size_t i = 0; i < s.size();) {
      if (s.compare(i, 3, "\xe2\x96\x81") == 0) { r += ' '; i += 3; } else { r += s[i++]; }
    }
    size_t b = 0, e = r.size();
    while (b < e) { /* Python's strip() */
      size_t k = b;
      int32_t c = clf__utf8_next(r.data(), e, &k);
      if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
      b = k;
    }
    while (e > b) {
      size_t k = e - 1;
      while (k > b && ((unsigned char)r[k] & 0xC0) == 0x80) k--;
      size_t q = k;
      int32_t c = clf__utf8_next(r.data(), e, &q);
      if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
      e = k;
    }
    if (clf__str_add(out, r.data() + b, e - b)) throw std::bad_alloc();
  } catch (...) {
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory");
  }
  return CLF_OK;
}

/* ---- XLM-R: XLMRobertaTokenizer ---- */

/* fairseq's ids: <s> 0, <pad> 1, </s> 2, <unk> 3, then SentencePiece's id + 1
 * (its own <unk> <s> </s> hidden behind those), <mask> last. */
static clf_status xlmr_vocab(clf_tokenizer *t, sentencepiece::SentencePieceProcessor *sp) {
  const int n = sp->GetPieceSize();
  for (int i = 0; i < n; i++) {
    const std::string &p = sp->IdToPiece(i);
    if (clf__strmap_put(&t->vocab, p.data(), p.size(), i + 1) || clf__tok_set_token(t, i + 1, p.data(), p.size()))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  }
  static const char *fairseq[] = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int i = 0; i < 4; i++)
    if (clf__strmap_put(&t->vocab, fairseq[i], strlen(fairseq[i]), i) || clf__tok_set_token(t, i, fairseq[i], strlen(fairseq[i])))
      return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  return CLF_OK;
}

extern "C" clf_status clf__xlmr_load(clf_tokenizer *t, const char *dir, void *config) {
  clf_status st = CLF_OK;
  auto *sp = load_spm(dir, "sentencepiece.bpe.model", &st);
  if (!sp) return st;
  t->spm_source = sp;
  if ((st = xlmr_vocab(t, sp)) != CLF_OK) return st;
  const char *mask = clf__tok_cfg_str(config, "mask_token", "<mask>");
  int64_t mask_id = sp->GetPieceSize() + 1;
  if (clf__strmap_put(&t->vocab, mask, strlen(mask), mask_id) || clf__tok_set_token(t, mask_id, mask, strlen(mask)))
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_load: out of memory");
  static const char *keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token"};
  static const char *dflt[] = {"<s>", "</s>", "<unk>", "</s>", "<pad>", "<s>"};
  for (int k = 0; k < 6 && st == CLF_OK; k++) st = clf__tok_add_special(t, clf__tok_cfg_str(config, keys[k], dflt[k]));
  if (st == CLF_OK) st = clf__tok_add_special(t, mask);
  if (st != CLF_OK) return st;
  t->special_lstrip |= 1u << (t->n_special - 1); /* AddedToken(mask, lstrip=True) */
  t->cls_id = 0;
  t->sep_id = t->eos_id = 2;
  t->unk_id = 3;
  return CLF_OK;
}

/* sp_model.encode(text, out_type=str); a piece SentencePiece does not know
 * (id 0) is <unk>. */
extern "C" clf_status clf__xlmr_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  auto *sp = static_cast<sentencepiece::SentencePieceProcessor *>(t->spm_source);
  try {
    std::vector<std::string> pieces;
    auto status = sp->Encode(std::string(s, n), &pieces);
    if (!status.ok())
      return clf__fail(NULL, CLF_E_FORMAT, "clf_tokenizer_encode: SentencePiece failed: %s", status.ToString().c_str());
    for (const auto &p : pieces) {
      int64_t id = clf__strmap_get(&t->vocab, p.data(), p.size());
      if (id < 4 && sp->PieceToId(p) == 0) id = t->unk_id;
      if (clf__ids_push(out, id >= 0 ? id : t->unk_id))
        return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
    }
  } catch (...) {
    return clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_encode: out of memory");
  }
  return CLF_OK;
}

/* "".join(tokens).replace("\u2581", " ").strip() */
extern "C" clf_status clf__xlmr_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  CLF__UNUSED(t);
  clf__str all = {nullptr, 0, 0};
  int oom = clf__str_add(&all, "", 0);
  for (size_t i = 0; i < n && !oom; i++) {
    const char *p = toks[i];
    for (const char *q; !oom && (q = strstr(p, "\xe2\x96\x81")); p = q + 3)
      oom = clf__str_add(&all, p, (size_t)(q - p)) || clf__str_add(&all, " ", 1);
    if (!oom) oom = clf__str_add(&all, p, strlen(p));
  }
  size_t b = 0, e = all.n;
  while (!oom && b < e) { /* Python's strip() */
    size_t k = b;
    int32_t c = clf__utf8_next(all.s, e, &k);
    if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
    b = k;
  }
  while (!oom && e > b) {
    size_t k = e - 1;
    while (k > b && ((unsigned char)all.s[k] & 0xC0) == 0x80) k--;
    size_t q = k;
    int32_t c = clf__utf8_next(all.s, e, &q);
    if (c < 0 || !clf__uc_isspace((uint32_t)c)) break;
    e = k;
  }
  if (!oom) oom = clf__str_add(out, all.s + b, e - b);
  free(all.s);
  return oom ? clf__fail(NULL, CLF_E_OUT_OF_MEMORY, "clf_tokenizer_decode: out of memory") : CLF_OK;
}

extern "C" void clf__spm_free(clf_tokenizer *t) {
  delete static_cast<sentencepiece::SentencePieceProcessor *>(t->spm_source);
  delete static_cast<sentencepiece::SentencePieceProcessor *>(t->spm_target);
  t->spm_source = t->spm_target = nullptr;
}

#else /* a C++14 build: no SentencePiece, Marian tokenizers fail to load */

extern "C" clf_status clf__spm_load(clf_tokenizer *t, const char *dir, void *config) {
  CLF__UNUSED(t);
  CLF__UNUSED(config);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s is a Marian SentencePiece tokenizer, but "
                   "clformer was built as C++14 and Debian's SentencePiece headers need C++17 (cpp_std=c++17)",
                   dir);
}
extern "C" clf_status clf__spm_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  CLF__UNUSED(t); CLF__UNUSED(s); CLF__UNUSED(n); CLF__UNUSED(out);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_encode: built without SentencePiece");
}
extern "C" clf_status clf__spm_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  CLF__UNUSED(t); CLF__UNUSED(toks); CLF__UNUSED(n); CLF__UNUSED(out);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_decode: built without SentencePiece");
}
extern "C" void clf__spm_free(clf_tokenizer *t) { CLF__UNUSED(t); }
extern "C" clf_status clf__xlmr_load(clf_tokenizer *t, const char *dir, void *config) {
  CLF__UNUSED(t);
  CLF__UNUSED(config);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_load: %s is an XLM-R SentencePiece tokenizer, but "
                   "clformer was built as C++14 and Debian's SentencePiece headers need C++17 (cpp_std=c++17)",
                   dir);
}
extern "C" clf_status clf__xlmr_encode(clf_tokenizer *t, const char *s, size_t n, clf__ids *out) {
  CLF__UNUSED(t); CLF__UNUSED(s); CLF__UNUSED(n); CLF__UNUSED(out);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_encode: built without SentencePiece");
}
extern "C" clf_status clf__xlmr_decode(clf_tokenizer *t, const char **toks, size_t n, clf__str *out) {
  CLF__UNUSED(t); CLF__UNUSED(toks); CLF__UNUSED(n); CLF__UNUSED(out);
  return clf__fail(NULL, CLF_E_UNSUPPORTED, "clf_tokenizer_decode: built without SentencePiece");
}

#endif
