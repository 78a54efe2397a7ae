// fuzz_profile.cc - libFuzzer target: the input as the user's GEMM tuning
// profile of the context's device (<cache>/clblast/<key>.profile), applied
// by clf__gemm_profile_apply (host/core/gemm_profile.cc: the file read,
// parse_profile, the device line, CLBlast's constraints, OverrideParameters)
// on a real context (PoCL, made once).  $CLFORMER_TUNING=user keeps the
// shipped profiles out, so a rejected file restores CLBlast's defaults.
// With CLF_FUZZ_MAKE_SEED=<file> the target writes a valid profile for this
// device there (CLBlast's defaults, with a Skinny and a Rows line, through
// write_profile: its device line is what no mutation could guess) and
// exits: tools/fuzz.sh seeds the corpus with it.
#include "fuzz_util.h"

#include "core/gemm_profile.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>

static std::string path;

extern "C" int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  setenv("CLFORMER_TUNING", "user", 1);
  clf_context *ctx = fz_context();
  path = clf_profile::profile_path(ctx);
  if (path.empty()) {
    fprintf(stderr, "fuzz_profile: the context has no cache directory\n");
    abort();
  }
  mkdir(path.substr(0, path.rfind('/')).c_str(), 0700);
  const char *seed = getenv("CLF_FUZZ_MAKE_SEED");
  if (seed && *seed) {
    clf_profile::Profile p;
    if (!clf_profile::defaults_of(ctx->dev.device, &p)) return fprintf(stderr, "no CLBlast defaults\n"), exit(1), 0;
    p.groups = {{"Skinny", "f32", 1, 16}, {"Skinny", "q8", 4, 8}, {"Rows", "f32", 48, 0}, {"Rows", "q8", 96, 0}};
    const std::vector<clf_gemm_shape> shapes = {{64, 768, 768, 0, 1, 4}};
    exit(clf_profile::write_profile(ctx, seed, p, shapes, 2.0, 1.0) ? 0 : 1);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  clf_context *ctx = fz_context();
  FILE *f = fopen(path.c_str(), "wb");
  if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
  clf__gemm_profile_apply(ctx);
  // Applied: it is the user's file, and the work-groups it set are sane.
  const char *applied = clf_context_gemm_profile(ctx);
  fz_note("profile", applied ? "applied" : "not applied");
  if (applied && path != applied) abort();
  clf_profile::Profile p;
  clf_profile::groups_of(ctx, &p);
  // A count ("Rows f32=64", b 0) is 1 to kMaxCount; a group is two powers
  // of two with a product of at most kMaxGroup.
  for (const clf_profile::Group &g : p.groups) {
    if (g.b == 0) {
      if (!g.a || g.a > clf_profile::kMaxCount) abort();
    } else if (!g.a || g.a * g.b > clf_profile::kMaxGroup || (g.a & (g.a - 1)) || (g.b & (g.b - 1))) {
      abort();
    }
  }
  return 0;
}
