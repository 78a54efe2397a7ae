// tune.cc - the CLBlast GEMM parameter search.
//
// clf_tune_gemm times candidate parameter sets of CLBlast's two GEMM kernels
// (Xgemm, the "indirect" kernel with its pad/transpose helpers, and
// XgemmDirect) on the GEMM shapes a model issues, checks each result against
// CLBlast's defaults, picks the switch between the two kernels
// (GemmRoutine's XGEMM_MIN_INDIRECT_SIZE), and stores the winner as the
// device's profile through core/gemm_profile.cc, which every context applies.
#include <clblast.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/gemm_profile.h"
#include "ops/ops.h"

using namespace clf_profile;

namespace {

// ---- search spaces: CLBlast's random-search tuner ranges (GEMMK 0 only) ----
struct Range {
  const char *name;
  std::vector<size_t> values;
};
const std::vector<Range> kXgemmSpace = {
    {"MWG", {16, 32, 64, 128}}, {"NWG", {16, 32, 64, 128}}, {"KWG", {16, 32}},   {"MDIMC", {8, 16, 32}},
    {"NDIMC", {8, 16, 32}},     {"MDIMA", {8, 16, 32}},     {"NDIMB", {8, 16, 32}}, {"KWI", {2}},
    {"VWM", {1, 2, 4, 8}},      {"VWN", {1, 2, 4, 8}},      {"STRM", {0, 1}},     {"STRN", {0, 1}},
    {"SA", {0, 1}},             {"SB", {0, 1}},             {"GEMMK", {0}},       {"KREG", {1}}};
const std::vector<Range> kDirectSpace = {
    {"WGD", {8, 16, 32, 64}}, {"MDIMCD", {8, 16, 32}}, {"NDIMCD", {8, 16, 32}}, {"MDIMAD", {8, 16, 32}},
    {"NDIMBD", {8, 16, 32}},  {"KWID", {2, 8, 16}},    {"VWMD", {1, 2, 4, 8}},  {"VWND", {1, 2, 4, 8}},
    {"PADA", {0, 1}},         {"PADB", {0, 1}}};

// Starting points: configurations of the kind CLBlast's database holds for
// CPUs and GPUs.  The first two Xgemm sets are the winners of
// clblast_tuner_xgemm's random stage on a Zen 5 CPU under PoCL 3.1
// (MEASURED.md: 132 GFLOP/s at 1024^3, 130 GFLOP/s at 128x3072x768), the
// third its fixed stage's best at 128x3072x768 (79 GFLOP/s); the first
// XgemmDirect set is what this search found there for all-MiniLM-L6-v2
// (docs/tuning.md).
const char *const kXgemmCpuSeeds[] = {
    "MWG=128 NWG=64 KWG=32 MDIMC=8 NDIMC=16 MDIMA=16 NDIMB=32 KWI=2 VWM=8 VWN=2 STRM=0 STRN=0 SA=1 SB=1",
    "MWG=128 NWG=128 KWG=16 MDIMC=8 NDIMC=16 MDIMA=16 NDIMB=32 KWI=2 VWM=8 VWN=4 STRM=1 STRN=1 SA=0 SB=0",
    "MWG=64 NWG=64 KWG=32 MDIMC=8 NDIMC=8 MDIMA=8 NDIMB=8 KWI=2 VWM=4 VWN=4 STRM=0 STRN=0 SA=0 SB=0",
    "MWG=64 NWG=64 KWG=32 MDIMC=8 NDIMC=8 MDIMA=8 NDIMB=8 KWI=2 VWM=8 VWN=8 STRM=0 STRN=0 SA=0 SB=0",
    "MWG=128 NWG=128 KWG=32 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=8 VWN=8 STRM=0 STRN=0 SA=1 SB=1"};
const char *const kXgemmGpuSeeds[] = {
    "MWG=64 NWG=64 KWG=16 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=2 VWN=2 STRM=0 STRN=0 SA=1 SB=1",
    "MWG=128 NWG=128 KWG=16 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=4 VWN=4 STRM=1 STRN=1 SA=1 SB=1"};
const char *const kDirectCpuSeeds[] = {
    "WGD=64 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=32 KWID=2 VWMD=8 VWND=2 PADA=1 PADB=0",
    "WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 PADB=1",
    "WGD=64 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=8 VWMD=8 VWND=8 PADA=1 PADB=1",
    "WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=8 VWMD=2 VWND=4 PADA=0 PADB=0"};
const char *const kDirectGpuSeeds[] = {
    "WGD=32 MDIMCD=16 NDIMCD=16 MDIMAD=16 NDIMBD=16 KWID=2 VWMD=2 VWND=2 PADA=1 PADB=1",
    "WGD=64 MDIMCD=16 NDIMCD=16 MDIMAD=16 NDIMBD=16 KWID=8 VWMD=4 VWND=4 PADA=1 PADB=1"};


// ---- the search ----

// max |got - ref| over the scale max(1, max |ref|) (returned), and that scale;
// NaN counts as wrong (it compares as never within a tolerance).
double max_rel_error(const std::vector<float> &ref, const std::vector<float> &got, double *scale) {
  double s = 1, diff = 0;
  for (size_t j = 0; j < got.size(); j++) {
    s = std::max(s, (double)std::fabs(ref[j]));
    const double d = std::fabs((double)got[j] - ref[j]);
    diff = d > diff || d != d ? d : diff;
  }
  *scale = s;
  return diff / s;
}

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One shape's device buffers and its output under CLBlast's defaults.
struct Bench {
  clf_gemm_shape s;
  size_t index = 0;  // position in the caller's list (bench is reordered)
  double best_seen = 1e300;  // fastest call seen under any candidate, ms
  cl_mem a = nullptr, b = nullptr, c = nullptr;
  std::vector<float> ref;
  double weight() const { return s.count ? s.count : 1; }
  double gflops(double ms) const { return 2e-6 * s.m * s.n * s.k / ms; }
  unsigned long long mnk() const { return (unsigned long long)s.m * s.n * s.k; }
};

constexpr double kNever = 1e300;

struct Search {
  clf_context *ctx;
  const clf_tune_options *opts;
  std::vector<Bench> bench;
  Profile dflt;
  Profile before;             // applied when the search began (user's or shipped)
  bool have_before = false;
  Clock::time_point t0 = Clock::now();
  unsigned tried = 0, rejected = 0;
  std::mt19937 rng;
  std::set<std::string> seen;  // "kernel params" already timed
  double def_total = 0;        // CLBlast's defaults on the shapes, ms (count-weighted)

  ~Search() {
    for (auto &b : bench)
      for (cl_mem m : {b.a, b.b, b.c})
        if (m) clReleaseMemObject(m);
  }

  void say(const char *fmt, ...)
#ifdef __GNUC__
      __attribute__((format(printf, 2, 3)))
#endif
  {
    if (!opts->progress) return;
    char line[1024];
    // Where the search is against its budget, then the line.
    const int at = snprintf(line, sizeof line, "[%.0f/%.0f s] ", seconds_since(t0),
                            opts->budget_s > 0 ? opts->budget_s : 300.0);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + at, sizeof line - at, fmt, ap);
    va_end(ap);
    opts->progress(opts->progress_user, line);
  }

  clf_status buffer(size_t n, std::mt19937 &gen, bool zero, cl_mem *out) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> h(n);
    for (auto &x : h) x = zero ? 0.0f : u(gen);
    cl_int err;
    *out = clCreateBuffer(ctx->cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, n * sizeof(float), h.data(), &err);
    return *out ? CLF_OK : clf__fail_cl(ctx, err, "clCreateBuffer", "clf_tune_gemm");
  }

  clf_status setup(const clf_gemm_shape *shapes, size_t n) {
    std::mt19937 gen(1234);
    for (size_t i = 0; i < n; i++) {
      bench.emplace_back();
      Bench &b = bench.back();
      b.s = shapes[i];
      b.index = i;
      clf_status st;
      if ((st = buffer(b.s.m * b.s.k, gen, false, &b.a)) != CLF_OK ||
          (st = buffer(b.s.k * b.s.n, gen, false, &b.b)) != CLF_OK ||
          (st = buffer(b.s.m * b.s.n, gen, true, &b.c)) != CLF_OK)
        return st;
    }
    return CLF_OK;
  }

  clf_status run(const Bench &b) {
    const clf_gemm_shape &s = b.s;
    return clf__sgemm(ctx, s.trans_a, s.trans_b, s.m, s.n, s.k, 1.0f, b.a, 0, s.trans_a ? s.m : s.k, 0, b.b, 0,
                      s.trans_b ? s.k : s.n, 0, 0.0f, b.c, 0, s.n, 0, 1, nullptr);
  }

  // Times every shape under p (median of 3 after a warm-up that builds the
  // program and is checked against the defaults' output): 1 and the
  // per-shape ms in *ms; 0 when the weighted sum passed `cutoff` (stopped
  // early); -1 when p failed, with *why.
  int measure(const Profile &p, double cutoff, std::vector<double> *ms, std::string *why) {
    int code;
    if (!set_profile(ctx->dev.device, p, &code)) return *why = "OverrideParameters failed (" + std::to_string(code) + ")", -1;
    ms->assign(bench.size(), kNever);
    double total = 0;
    std::vector<float> got;
    for (size_t i = 0; i < bench.size(); i++) {
      Bench &b = bench[i];
      cl_int err = CL_SUCCESS;
      got.resize(b.s.m * b.s.n);
      if (run(b) != CLF_OK ||
          (err = clEnqueueReadBuffer(ctx->queue, b.c, CL_TRUE, 0, got.size() * sizeof(float), got.data(), 0, nullptr,
                                     nullptr)) != CL_SUCCESS) {
        *why = err != CL_SUCCESS ? std::string("clEnqueueReadBuffer: ") + clf_cl_error_name(err) : clf_last_error(ctx);
        clf_clear_error(ctx);
        return -1;
      }
      if (b.ref.empty()) {
        b.ref = got;
      } else {
        double scale;
        const double rel = max_rel_error(b.ref, got, &scale);
        if (!(rel <= 1e-4)) {
          char m[160];
          snprintf(m, sizeof m, "wrong result on %zux%zux%zu: max error %.3g x scale %.3g", b.s.m, b.s.n, b.s.k,
                   rel, scale);
          return *why = m, -1;
        }
      }
      double t[3];
      for (double &x : t) {
        const Clock::time_point start = Clock::now();
        if (run(b) != CLF_OK || (err = clFinish(ctx->queue)) != CL_SUCCESS) {
          *why = err != CL_SUCCESS ? std::string("clFinish: ") + clf_cl_error_name(err) : clf_last_error(ctx);
          clf_clear_error(ctx);
          return -1;
        }
        x = seconds_since(start) * 1e3;
      }
      std::sort(t, t + 3);
      (*ms)[i] = t[1];
      b.best_seen = std::min(b.best_seen, t[1]);
      total += b.weight() * t[1];
      if (total > cutoff) return 0;
    }
    return 1;
  }

  // Puts the shapes (and their times in *ms) in order of their share of the
  // GEMM time, costliest first: candidates are judged on those first, and
  // one that is too slow there stops early.
  void costliest_first(std::vector<double> *ms) {
    std::vector<size_t> order(bench.size());
    for (size_t i = 0; i < order.size(); i++) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return bench[a].weight() * (*ms)[a] > bench[b].weight() * (*ms)[b];
    });
    std::vector<Bench> nb;
    std::vector<double> nms;
    for (size_t i : order) nb.push_back(std::move(bench[i])), nms.push_back((*ms)[i]);
    bench.swap(nb);
    for (Bench &b : nb) b.a = b.b = b.c = nullptr;  // moved into bench
    ms->swap(nms);
  }

  double total(const std::vector<double> &ms) const {
    double s = 0;
    for (size_t i = 0; i < bench.size(); i++) s += bench[i].weight() * ms[i];
    return s;
  }

  // A random parameter set of `space` over the defaults (empty if none found).
  Params sample(int which, const std::vector<Range> &space) {
    for (int attempt = 0; attempt < 500; attempt++) {
      Params p = dflt.k[which];
      for (const Range &r : space)
        if (p.count(r.name)) p[r.name] = r.values[rng() % r.values.size()];
      if (valid_kernel(which, p, ctx->caps) && !seen.count(kKernel[which] + params_text(p))) return p;
    }
    return Params();
  }

  // The untried valid sets one step from `best` in one parameter.
  std::vector<Params> neighbours(int which, const std::vector<Range> &space, const Params &best) {
    std::vector<Params> out;
    for (const Range &r : space) {
      if (!best.count(r.name)) continue;
      const auto pos = std::find(r.values.begin(), r.values.end(), best.at(r.name));
      for (size_t j = 0; j < r.values.size(); j++) {
        const long d = pos == r.values.end() ? 1 : std::labs((long)j - (long)(pos - r.values.begin()));
        if (d != 1) continue;
        Params p = best;
        p[r.name] = r.values[j];
        if (valid_kernel(which, p, ctx->caps) && !seen.count(kKernel[which] + params_text(p))) out.push_back(p);
      }
    }
    std::shuffle(out.begin(), out.end(), rng);
    return out;
  }

  // Searches kernel `which` inside `base` (which fixes the other kernel and
  // the switch) until `end` seconds after t0, at least one candidate.
  void phase(int which, const Profile &base, double end, Params *best, std::vector<double> *best_ms) {
    const std::vector<Range> &space = which == XGEMM ? kXgemmSpace : kDirectSpace;
    double best_total = kNever;
    unsigned done = 0;
    auto try_one = [&](const Params &c) {
      const std::string key = kKernel[which] + params_text(c);
      if (c.empty() || seen.count(key) || !valid_kernel(which, c, ctx->caps)) return;
      seen.insert(key);
      Profile p = base;
      p.k[which] = c;
      std::vector<double> ms;
      std::string why;
      tried++, done++;
      const int r = measure(p, best_total < kNever ? 1.5 * best_total : kNever, &ms, &why);
      if (r < 0) {
        rejected++;
        say("%s %s: rejected: %s", kKernel[which], params_text(c).c_str(), why.c_str());
      } else if (r == 0) {
        say("%s %s: slower than 1.5x the best (%.3f ms)", kKernel[which], params_text(c).c_str(), best_total);
      } else {
        const double t = total(ms);
        if (t < best_total) best_total = t, *best = c, *best_ms = ms;
        // (each phase forces every shape onto its kernel; the defaults run
        // each shape where CLBlast's own switch sends it)
        say("%s %s: %.3f ms%s; best so far %.3f ms, the defaults %.3f ms", kKernel[which], params_text(c).c_str(), t,
            t == best_total ? " (best)" : "", best_total, def_total);
      }
    };
    auto time_left = [&] { return done == 0 || seconds_since(t0) < end; };
    // The parameters in use before the search first (a search never ends
    // slower than them unnoticed), seeds of this device's kind, then the
    // other kind's, then the defaults.
    if (have_before) try_one(before.k[which]);
    std::vector<const char *> seeds;
    const bool cpu = ctx->caps.is_cpu;
    auto add = [&](const char *const *list, size_t n) { seeds.insert(seeds.end(), list, list + n); };
    if (which == XGEMM) {
      if (cpu) add(kXgemmCpuSeeds, CLF__ARRAY_LEN(kXgemmCpuSeeds));
      add(kXgemmGpuSeeds, CLF__ARRAY_LEN(kXgemmGpuSeeds));
      if (!cpu) add(kXgemmCpuSeeds, CLF__ARRAY_LEN(kXgemmCpuSeeds));
    } else {
      if (cpu) add(kDirectCpuSeeds, CLF__ARRAY_LEN(kDirectCpuSeeds));
      add(kDirectGpuSeeds, CLF__ARRAY_LEN(kDirectGpuSeeds));
      if (!cpu) add(kDirectCpuSeeds, CLF__ARRAY_LEN(kDirectCpuSeeds));
    }
    const double start = seconds_since(t0), random_end = start + 0.6 * (end - start);
    for (const char *s : seeds) {
      Params c;
      std::string why;
      if (!time_left()) return;
      if (parse_params(s, dflt.k[which], false, &c, &why)) try_one(c);
    }
    if (time_left()) try_one(dflt.k[which]);
    while (time_left() && seconds_since(t0) < random_end) {
      const Params c = sample(which, space);
      if (c.empty()) return;  // the space is exhausted
      try_one(c);
    }
    while (time_left()) {
      std::vector<Params> next = best->empty() ? std::vector<Params>() : neighbours(which, space, *best);
      const Params c = next.empty() ? sample(which, space) : next.front();
      if (c.empty()) return;  // the space is exhausted
      try_one(c);
    }
  }
};

// Integer cube root, rounded down.
size_t icbrt(unsigned long long x) {
  size_t r = static_cast<size_t>(std::cbrt(static_cast<double>(x)));
  while (r > 0 && (unsigned long long)r * r * r > x) r--;
  while ((unsigned long long)(r + 1) * (r + 1) * (r + 1) <= x) r++;
  return r;
}

// The XGEMM_MIN_INDIRECT_SIZE that sends each shape to its faster kernel
// (shapes run direct when m*n*k < S^3), closest to CLBlast's default.
size_t choose_switch(const std::vector<Bench> &bench, const std::vector<double> &dms, const std::vector<double> &ims,
                     size_t dflt, double *cost) {
  std::vector<size_t> order(bench.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return bench[a].mnk() < bench[b].mnk(); });
  size_t best_s = dflt;
  *cost = kNever;
  for (size_t cut = 0; cut <= order.size(); cut++) {  // order[0..cut) direct
    if (cut > 0 && cut < order.size() && bench[order[cut - 1]].mnk() == bench[order[cut]].mnk()) continue;
    double c = 0;
    for (size_t j = 0; j < order.size(); j++) {
      const size_t i = order[j];
      c += bench[i].weight() * (j < cut ? dms[i] : ims[i]);
    }
    const size_t lo = cut == 0 ? 0 : icbrt(bench[order[cut - 1]].mnk()) + 1;
    const size_t hi = cut == order.size() ? kAllDirect : icbrt(bench[order[cut]].mnk());
    if (lo > hi || !(c < *cost)) continue;
    *cost = c;
    best_s = std::min(std::max(dflt, lo), hi);
  }
  return best_s;
}

clf_status shapes_check(clf_context *ctx, const clf_gemm_shape *shapes, size_t n) {
  if (!shapes || n == 0) return clf__fail(ctx, CLF_E_INVALID_ARG, "clf_tune_gemm: no shapes given");
  for (size_t i = 0; i < n; i++) {
    const clf_gemm_shape &s = shapes[i];
    if (s.m == 0 || s.n == 0 || s.k == 0 || s.m > (1u << 20) || s.n > (1u << 20) || s.k > (1u << 20) ||
        (unsigned long long)s.m * s.k > (1ull << 30) || (unsigned long long)s.k * s.n > (1ull << 30) ||
        (unsigned long long)s.m * s.n > (1ull << 30))
      return clf__fail(ctx, CLF_E_INVALID_ARG,
                       "clf_tune_gemm: shapes[%zu] m=%zu n=%zu k=%zu: each dimension must be in [1, 2^20] and each "
                       "matrix at most 2^30 elements",
                       i, s.m, s.n, s.k);
  }
  return CLF_OK;
}

// 2. XgemmDirect on every shape, then 3. Xgemm on every shape, each with
// half of what is left of 90% of the budget (the rest checks the result):
// the best of each in *best and its per-shape times in *ms (empty if none).
void search_kernels(Search &S, double budget, Params best[NKERNELS], std::vector<double> ms[NKERNELS]) {
  const double after = seconds_since(S.t0), left = std::max(0.0, 0.9 * budget - after);
  Profile base = S.dflt;
  base.k[ROUTINE][kSwitch] = kAllDirect;
  S.phase(DIRECT, base, after + left / 2, &best[DIRECT], &ms[DIRECT]);
  base = S.dflt;
  if (!best[DIRECT].empty()) base.k[DIRECT] = best[DIRECT];
  base.k[ROUTINE][kSwitch] = 0;
  S.phase(XGEMM, base, after + left, &best[XGEMM], &ms[XGEMM]);
}

// 4. The switch, and the combination timed as it will run: the final
// profile, with its per-shape times in *fin_ms and their total in
// *fin_total (the defaults' when nothing better was found or it failed).
Profile combine(Search &S, size_t n, const Params best[NKERNELS], std::vector<double> ms[NKERNELS],
                const std::vector<double> &def_ms, double def_total, std::vector<double> *fin_ms, double *fin_total) {
  Profile fin = S.dflt;
  if (!best[DIRECT].empty()) fin.k[DIRECT] = best[DIRECT];
  if (!best[XGEMM].empty()) fin.k[XGEMM] = best[XGEMM];
  if (ms[DIRECT].empty()) ms[DIRECT].assign(n, kNever);
  if (ms[XGEMM].empty()) ms[XGEMM].assign(n, kNever);
  double est;
  fin.k[ROUTINE][kSwitch] = choose_switch(S.bench, ms[DIRECT], ms[XGEMM], get(S.dflt.k[ROUTINE], kSwitch), &est);
  *fin_total = def_total;
  *fin_ms = def_ms;
  std::string why;
  if (!(fin == S.dflt) && est < kNever) {
    S.tried++;
    if (S.measure(fin, kNever, fin_ms, &why) < 0) {
      S.rejected++;
      S.say("combined profile rejected: %s", why.c_str());
      *fin_ms = def_ms;
    } else {
      *fin_total = S.total(*fin_ms);
    }
  }
  S.say("tuned: %.3f ms (Xgemm %s; XgemmDirect %s; %s=%zu) against %.3f ms", *fin_total,
        params_text(fin.k[XGEMM]).c_str(), params_text(fin.k[DIRECT]).c_str(), kSwitch, get(fin.k[ROUTINE], kSwitch),
        def_total);
  return fin;
}

// 1b. The skinny kernel's work-group (kernels/linear.cl: products of 1-8
// rows, decoding) for each weight type: one row times each distinct weight
// [n, k] of the shapes, the time weighted by the shapes' counts.  The
// candidates are SPLIT x ROWS (powers of two up to the device's work-group
// size), the group in use first; each result is checked against the first
// one's.  Until `end` seconds after t0, at least the group in use.
struct SkinnyWeight {
  size_t n, k;
  double count;
};

clf_status skinny_time(Search &S, const std::vector<SkinnyWeight> &ws, const std::vector<clf_tensor *> &w,
                       const std::vector<clf_tensor *> &x, const std::vector<clf_tensor *> &y,
                       std::vector<std::vector<float>> *ref, double *ms, std::string *why) {
  clf_context *ctx = S.ctx;
  *ms = 0;
  for (size_t i = 0; i < ws.size(); i++) {
    std::vector<float> got(ws[i].n);
    clf_status st = clf__linear_skinny(ctx, x[i], w[i], 0, nullptr, CLF_ACT_NONE, y[i], 1, ws[i].n, ws[i].k, nullptr);
    if (st == CLF_OK) st = clf_tensor_download(ctx, y[i], got.data(), got.size() * sizeof(float));
    if (st != CLF_OK) return *why = clf_last_error(ctx), clf_clear_error(ctx), st;
    if ((*ref)[i].empty()) {
      (*ref)[i] = got;
    } else {
      double scale;
      const double rel = max_rel_error((*ref)[i], got, &scale);
      if (!(rel <= 1e-4)) {
        char m[128];
        snprintf(m, sizeof m, "wrong result on [%zu, %zu]: max error %.3g x scale", ws[i].n, ws[i].k, rel);
        return *why = m, CLF_E_OPENCL;
      }
    }
    double t[5];
    for (double &v : t) {
      const Clock::time_point start = Clock::now();
      st = clf__linear_skinny(ctx, x[i], w[i], 0, nullptr, CLF_ACT_NONE, y[i], 1, ws[i].n, ws[i].k, nullptr);
      cl_int err = st == CLF_OK ? clFinish(ctx->queue) : CL_SUCCESS;
      if (st != CLF_OK || err != CL_SUCCESS) {
        *why = err != CL_SUCCESS ? std::string("clFinish: ") + clf_cl_error_name(err) : clf_last_error(ctx);
        clf_clear_error(ctx);
        return st != CLF_OK ? st : CLF_E_OPENCL;
      }
      v = seconds_since(start) * 1e3;
    }
    std::sort(t, t + 5);
    *ms += ws[i].count * t[2];
  }
  return CLF_OK;
}

// The weight types, in the order of clf_tune_report's skinny[].
constexpr int kSkinnyTypes = 4;
const clf_dtype kSkinnyDtype[kSkinnyTypes] = {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0};
const char *skinny_type(int t) { return clf__weight_type_name(kSkinnyDtype[t]); }
using Group = std::pair<unsigned, unsigned>;  // SPLIT, ROWS

// One row times each distinct weight [n, k] of the shapes in type t, on the
// device (random values), and the first candidate's outputs.
struct SkinnyBench {
  std::vector<SkinnyWeight> ws;
  std::vector<clf_tensor *> w, x, y;
  std::vector<std::vector<float>> ref;
  ~SkinnyBench() {
    for (auto *v : {&w, &x, &y})
      for (clf_tensor *t : *v) clf_tensor_destroy(t);
  }
  clf_status setup(Search &S, int t) {
    for (const Bench &b : S.bench) {
      if (!clf__skinny_fits(S.ctx, kSkinnyDtype[t], 0, 1, b.s.k)) continue;
      bool found = false;
      for (SkinnyWeight &e : ws)
        if (e.n == b.s.n && e.k == b.s.k) e.count += b.weight(), found = true;
      if (!found) ws.push_back({b.s.n, b.s.k, b.weight()});
    }
    w.assign(ws.size(), nullptr), x.assign(ws.size(), nullptr), y.assign(ws.size(), nullptr);
    ref.assign(ws.size(), {});
    std::mt19937 gen(77 + t);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    clf_status st = CLF_OK;
    for (size_t i = 0; i < ws.size() && st == CLF_OK; i++) {
      std::vector<float> hw(ws[i].n * ws[i].k), hx(ws[i].k);
      for (float &v : hw) v = u(gen);
      for (float &v : hx) v = u(gen);
      const size_t wsh[2] = {ws[i].n, ws[i].k}, xsh[2] = {1, ws[i].k}, ysh[2] = {1, ws[i].n};
      if ((st = clf_tensor_from_f32(S.ctx, kSkinnyDtype[t], 2, wsh, hw.data(), &w[i])) == CLF_OK &&
          (st = clf_tensor_from_f32(S.ctx, CLF_F32, 2, xsh, hx.data(), &x[i])) == CLF_OK)
        st = clf_tensor_create(S.ctx, CLF_F32, 2, ysh, &y[i]);
    }
    return st;
  }
  // Times type t with group g set on the context; false (counted) when it
  // failed or was wrong.
  bool time(Search &S, int t, Group g, double *ms, bool quiet) {
    const unsigned group[2] = {g.first, g.second};
    std::string why = "out of host memory";
    if (!quiet) S.tried++;
    if (clf__skinny_tune(S.ctx, kSkinnyDtype[t], group) && skinny_time(S, ws, w, x, y, &ref, ms, &why) == CLF_OK)
      return true;
    if (!quiet) S.rejected++, S.say("Skinny %s %ux%u: rejected: %s", skinny_type(t), g.first, g.second, why.c_str());
    return false;
  }
};

// The candidates of type t until `end`, the group in use (cands[0]) first;
// then the winner against it once more, alternately (the candidates were
// timed seconds apart on a machine whose speed drifts): the faster of each
// one's runs decides.  *def_ms kNever when the group in use failed.
void skinny_search(Search &S, int t, SkinnyBench &B, const std::vector<Group> &cands, double end, double *def_ms,
                   double *best_ms, Group *best) {
  *def_ms = *best_ms = kNever;
  *best = cands[0];
  for (size_t c = 0; c < cands.size(); c++) {
    if (c > 0 && seconds_since(S.t0) >= end) break;
    double ms;
    if (!B.time(S, t, cands[c], &ms, false)) {
      if (c == 0) return;  // no reference to check the others against
      continue;
    }
    S.say("Skinny %s %ux%u: %.3f ms%s", skinny_type(t), cands[c].first, cands[c].second, ms,
          ms < *best_ms ? " (best)" : "");
    if (c == 0) *def_ms = ms;
    if (ms < *best_ms) *best_ms = ms, *best = cands[c];
  }
  for (int round = 0; round < 2 && *best != cands[0]; round++)
    for (int which = 0; which < 2; which++) {
      double ms;
      if (B.time(S, t, which ? *best : cands[0], &ms, true)) {
        double &keep_ms = which ? *best_ms : *def_ms;
        keep_ms = std::min(keep_ms, ms);
      }
    }
}

// Each type with an equal share of the time until `end`; its group in
// *fin's groups (the context's, with the one in use unless another was 2%
// faster) and in the report.  True when a type got a faster group.
bool tune_skinny(Search &S, double end, Profile *fin, clf_tune_report *report) {
  clf_context *ctx = S.ctx;
  const double start = seconds_since(S.t0);
  bool any = false;
  groups_of(ctx, fin);
  if (clf__skinny_tiles(ctx, 0, 1)) {  // the CPU class: every [out, in] product runs skinny_tile, no group to search
    S.say("Skinny: not searched: on this device class every [out, in] product runs skinny_tile");
    return false;
  }
  for (int t = 0; t < kSkinnyTypes; t++) {
    unsigned saved[2];
    const bool had = clf__skinny_tuned(ctx, kSkinnyDtype[t], saved);
    SkinnyBench B;
    if (B.setup(S, t) != CLF_OK) {  // leave the type as it is
      S.say("Skinny %s: not tuned: %s", skinny_type(t), clf_last_error(ctx));
      clf_clear_error(ctx);
      continue;
    }
    if (B.ws.empty()) continue;
    size_t s0, r0;
    clf__skinny_shape(ctx, kSkinnyDtype[t], &s0, &r0);
    std::vector<Group> cands = {{(unsigned)s0, (unsigned)r0}};
    for (unsigned sp = 1; sp <= 64; sp *= 2)
      for (unsigned ro = 1; ro <= 64; ro *= 2)
        if (sp * ro <= ctx->caps.max_wg && sp * ro >= 4 && !(sp == s0 && ro == r0)) cands.emplace_back(sp, ro);
    std::shuffle(cands.begin() + 1, cands.end(), S.rng);
    double def_ms, best_ms;
    Group best;
    skinny_search(S, t, B, cands, start + (end - start) * (t + 1) / kSkinnyTypes, &def_ms, &best_ms, &best);
    if (!clf__skinny_tune(ctx, kSkinnyDtype[t], had ? saved : nullptr)) throw std::bad_alloc();
    if (def_ms == kNever) continue;
    const bool better = best_ms < 0.98 * def_ms;
    any |= better;
    if (better) set_group(fin, {CLF__SKINNY_TUNING, skinny_type(t), best.first, best.second});
    else best = cands[0], best_ms = def_ms;
    if (report) report->skinny[t] = {(unsigned)s0, (unsigned)r0, best.first, best.second, def_ms, best_ms};
    S.say("Skinny %s: %ux%u %.3f ms -> %ux%u %.3f ms", skinny_type(t), (unsigned)s0, (unsigned)r0, def_ms, best.first,
          best.second, best_ms);
  }
  return any;
}

// 5. Where CLBlast overtakes the skinny path, per weight type and layout
// (clf__skinny_max_rows): x of M rows times each distinct weight [n, k] of
// the shapes, through the skinny kernels (launches of up to 8 rows) and
// through CLBlast with the profile found (the weight expanded to f32
// first when it is not f32), count-weighted sums of medians, at M = 8,
// 16, 24, 32, 48, 64, 96, 128, ... up to the shapes' largest m (64 at
// least).  The rows kept are where the two sums cross between the last M
// the skinny path won and the first where CLBlast's sum is the smaller,
// both taken as straight lines between those two points (the grid doubles
// every two steps: on PoCL f32 the skinny path won by 4% at 3072 rows and
// lost by 7% at 4096, and keeping 3072 sent Swin-T's 3136-row products,
// where it wins by 27%, to CLBlast); every M where the skinny path wins
// when none is.  Both paths' outputs are compared at each M.
struct RowsKind {
  clf_dtype wt;
  int in_out;
};
constexpr int kRowsKinds = 5;  // in the order of clf_tune_report's rows[]
const RowsKind kRows[kRowsKinds] = {{CLF_F32, 0}, {CLF_F16, 0}, {CLF_Q8_0, 0}, {CLF_Q4_0, 0}, {CLF_F32, 1}};

// The median of three timed calls after a warm-up (false, with *why, when
// one failed); with `enough` > 0, the first timed call alone when it
// already takes more than that (the other path's time, by a margin past the
// noise: on Intel's CPU runtime CLBlast took 6x the skinny path's time at
// 1536 rows, and timing it three times spent the clock that the larger row
// counts needed), or the warm-up alone when `warm` (its kernels were built
// at a smaller m).
bool time_path(clf_context *ctx, bool skinny, const clf_tensor *x, const clf_tensor *w, int in_out, clf_tensor *y,
               size_t m, size_t n, size_t k, double enough, bool warm, double *ms, std::string *why) {
  double t[4];
  for (int i = 0; i < 4; i++) {
    double &v = t[i];
    const Clock::time_point start = Clock::now();
    clf_status st = skinny ? clf__linear_skinny(ctx, x, w, in_out, nullptr, CLF_ACT_NONE, y, m, n, k, nullptr)
                           : clf__linear_gemm(ctx, x, w, in_out, nullptr, CLF_ACT_NONE, y, m, n, k, nullptr);
    cl_int err = st == CLF_OK ? clFinish(ctx->queue) : CL_SUCCESS;
    if (st != CLF_OK || err != CL_SUCCESS) {
      *why = err != CL_SUCCESS ? std::string("clFinish: ") + clf_cl_error_name(err) : clf_last_error(ctx);
      clf_clear_error(ctx);
      return false;
    }
    v = seconds_since(start) * 1e3;
    if ((i == 1 || (i == 0 && warm)) && enough > 0 && v > enough) return *ms = v, true;
  }
  std::sort(t + 1, t + 4);
  *ms = t[2];
  return true;
}

// One kind's weights: each distinct [n, k] of the shapes (count-weighted),
// random values, with x of mmax rows and the two paths' outputs (grown as
// the rows measured pass mmax).
struct RowsBench {
  struct W {
    size_t n, k;
    double count;
    clf_tensor *w = nullptr, *x = nullptr, *y = nullptr, *y2 = nullptr;
  };
  std::vector<W> ws;
  size_t top = 64;  // the shapes' largest m (64 at least)
  size_t mmax = 0;  // the rows x, y and y2 hold
  std::mt19937 gen{91};
  ~RowsBench() {
    for (W &e : ws)
      for (clf_tensor *t : {e.w, e.x, e.y, e.y2}) clf_tensor_destroy(t);
  }
  bool fail(Search &S, std::string *why) { return *why = clf_last_error(S.ctx), clf_clear_error(S.ctx), false; }
  bool setup(Search &S, const RowsKind &kind, std::string *why) {
    for (const Bench &b : S.bench) {
      top = std::max(top, b.s.m);
      if (!kind.in_out && b.s.k % (clf__dtype_is_block(kind.wt) ? CLF__QBLOCK : 8) != 0) continue;
      bool found = false;
      for (W &e : ws)
        if (e.n == b.s.n && e.k == b.s.k) e.count += b.weight(), found = true;
      if (!found) ws.push_back({b.s.n, b.s.k, b.weight()});
    }
    if (ws.empty()) return *why = "no weight of the shapes fits", false;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (W &e : ws) {
      std::vector<float> hw(e.n * e.k);
      for (float &v : hw) v = u(gen);
      const size_t wsh[2] = {kind.in_out ? e.k : e.n, kind.in_out ? e.n : e.k};
      if (clf_tensor_from_f32(S.ctx, kind.wt, 2, wsh, hw.data(), &e.w) != CLF_OK) return fail(S, why);
    }
    return true;
  }
  // x, y and y2 of m rows at least.
  bool grow(Search &S, size_t m, std::string *why) {
    if (m <= mmax) return true;
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (W &e : ws) {
      for (clf_tensor **t : {&e.x, &e.y, &e.y2}) clf_tensor_destroy(*t), *t = nullptr;
      std::vector<float> hx(m * e.k);
      for (float &v : hx) v = u(gen);
      const size_t xsh[2] = {m, e.k}, ysh[2] = {m, e.n};
      if (clf_tensor_from_f32(S.ctx, CLF_F32, 2, xsh, hx.data(), &e.x) != CLF_OK ||
          clf_tensor_create(S.ctx, CLF_F32, 2, ysh, &e.y) != CLF_OK ||
          clf_tensor_create(S.ctx, CLF_F32, 2, ysh, &e.y2) != CLF_OK)
        return fail(S, why);
    }
    mmax = m;
    return true;
  }
  // Both paths on m rows of every weight: their count-weighted times; false
  // (with *why) when one failed or they disagree.
  bool time(Search &S, const RowsKind &kind, size_t m, double *skinny_ms, double *gemm_ms, std::string *why) {
    clf_context *ctx = S.ctx;
    *skinny_ms = *gemm_ms = 0;
    for (W &e : ws) {
      double a, b;
      if (!time_path(ctx, true, e.x, e.w, kind.in_out, e.y, m, e.n, e.k, 0, false, &a, why) ||
          !time_path(ctx, false, e.x, e.w, kind.in_out, e.y2, m, e.n, e.k, 1.5 * a, m > top, &b, why))
        return false;
      std::vector<float> p(mmax * e.n), q(mmax * e.n);  // the first m rows are this call's
      if (clf_tensor_download(ctx, e.y, p.data(), p.size() * sizeof(float)) != CLF_OK ||
          clf_tensor_download(ctx, e.y2, q.data(), q.size() * sizeof(float)) != CLF_OK)
        return *why = clf_last_error(ctx), clf_clear_error(ctx), false;
      p.resize(m * e.n), q.resize(m * e.n);
      double scale;
      const double rel = max_rel_error(q, p, &scale);
      if (!(rel <= 1e-4)) {
        char msg[160];
        snprintf(msg, sizeof msg, "the paths disagree on %zu x [%zu, %zu]: max error %.3g x scale", m, e.n, e.k, rel);
        return *why = msg, false;
      }
      *skinny_ms += e.count * a, *gemm_ms += e.count * b;
    }
    return true;
  }
};

// One kind's crossover in *rows; false (with *why) when it could not be
// measured.  Past the shapes' largest m the rows go on growing (to 4096)
// while the skinny path still wins, so that a device where CLBlast is the
// slow path (Intel's CPU runtime) sends the longer products of other
// models (ViT's 197 rows, Swin's 3136) to the faster kernel too; there
// the clock ends it with the last M won, not as a failure.  The kind has
// `share` seconds from the end of its first M: that one builds its
// kernels, which on a cold cache can take minutes (PoCL under ASan: over
// three), and a clock that counted them would leave no time to measure.
bool rows_of_kind(Search &S, const RowsKind &kind, double share, unsigned *rows, std::string *why) {
  static const size_t kM[] = {8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096};
  RowsBench B;
  *rows = 0;
  if (!B.setup(S, kind, why)) return false;
  unsigned last_skinny = 8;  // the last M the skinny path won (8: it always takes up to 8)
  double last_margin = 0;    // CLBlast's time less the skinny path's there (0: not measured)
  double end = kNever;
  for (size_t m : kM) {
    if (seconds_since(S.t0) >= end) {
      if (m > B.top) break;  // the shapes' rows are all measured
      char msg[96];
      snprintf(msg, sizeof msg, "out of time at %zu rows (the skinny path still faster)", m);
      return *why = msg, false;  // a partial answer would understate it
    }
    if (!B.grow(S, m, why)) {
      if (m > B.top) break;  // past the shapes: as far as the device's memory goes
      return false;
    }
    double sk, ge;
    if (!B.time(S, kind, m, &sk, &ge, why)) return false;
    S.say("Rows %s: %zu rows: skinny %.3f ms, CLBlast %.3f ms%s", clf__skinny_rows_key(kind.wt, kind.in_out), m, sk,
          ge, ge < sk ? " (CLBlast faster)" : "");
    if (end == kNever) end = seconds_since(S.t0) + share;
    if (ge < sk) {
      last_skinny = clf__rows_crossing(last_skinny, last_margin, (unsigned)m, sk - ge);
      break;
    }
    last_skinny = (unsigned)m;
    last_margin = ge - sk;
  }
  *rows = last_skinny;
  return true;
}

// ctx's Tiles line: "on=1" (skinny_tile) or "off=1" (the launches).
bool set_tiles(clf_context *ctx, bool on) {
  static const unsigned one[2] = {1, 0};
  return clf__tuned_group_set(ctx, CLF__TILES_TUNING, on ? "on" : "off", one) &&
         clf__tuned_group_set(ctx, CLF__TILES_TUNING, on ? "off" : "on", nullptr);
}

// After the defaults, on a CPU-class device: the kernel of the [out, in]
// products that the skinny path takes (the profile's Tiles line,
// clf__skinny_tiles), skinny_tile against launches of the skinny kernel,
// each weight type over the shapes' distinct weights (count-weighted sums
// of medians) at 1 row and at the shapes' largest m (256 at most: past
// that the Rows crossover decides).  The tiles are kept when the product of
// the two ratios, tiles over launches, is below 1 (the prefill rows and the
// decoding step count alike); the profile then says "Tiles on=1", else
// "Tiles off=1" (measured: the launches run).  Not measured where
// $CLFORMER_SKINNY_TILE decides.  Leaves ctx's groups as decided; true
// when the choice changed or no line had recorded it.
bool tune_tiles(Search &S) {
  clf_context *ctx = S.ctx;
  if (!ctx->caps.is_cpu) return false;
  if (ctx->env.skinny_tile >= 0) {
    S.say("Tiles: not measured: $CLFORMER_SKINNY_TILE decides");
    return false;
  }
  const bool was_on = clf__skinny_tiles(ctx, 0, 1) != 0;
  unsigned had_on[2], had_off[2];
  const bool had[2] = {clf__tuned_group(ctx, CLF__TILES_TUNING, "on", had_on) != 0,
                       clf__tuned_group(ctx, CLF__TILES_TUNING, "off", had_off) != 0};
  auto restore = [&] {
    if (!clf__tuned_group_set(ctx, CLF__TILES_TUNING, "on", had[0] ? had_on : nullptr) ||
        !clf__tuned_group_set(ctx, CLF__TILES_TUNING, "off", had[1] ? had_off : nullptr))
      throw std::bad_alloc();
  };
  double ms[2][2] = {{0, 0}, {0, 0}};  // [1 row, the shapes' m][launches, tiles]
  for (const clf_dtype wt : {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0}) {
    RowsBench B;
    std::string why;
    if (!B.setup(S, {wt, 0}, &why)) continue;  // no weight of the shapes fits the type
    const size_t ms_rows[2] = {1, std::min<size_t>(B.top, 256)};
    for (int r = 0; r < 2; r++) {
      const size_t m = ms_rows[r];
      if (!B.grow(S, m, &why)) return restore(), S.say("Tiles: not measured: %s", why.c_str()), false;
      for (RowsBench::W &e : B.ws) {
        double t[2];
        for (int on = 0; on < 2; on++)
          if (!set_tiles(ctx, on)) throw std::bad_alloc();
          else if (!time_path(ctx, true, e.x, e.w, 0, e.y, m, e.n, e.k, on ? 1.5 * t[0] : 0, false, &t[on], &why))
            return restore(), S.say("Tiles: not measured: %s", why.c_str()), false;
        ms[r][0] += e.count * t[0], ms[r][1] += e.count * t[1];
      }
    }
  }
  if (ms[0][0] == 0 || ms[1][0] == 0) return restore(), S.say("Tiles: not measured: no weight of the shapes"), false;
  const double ratio = ms[0][1] / ms[0][0] * (ms[1][1] / ms[1][0]);
  const bool on = ratio < 1;
  if (!set_tiles(ctx, on)) throw std::bad_alloc();
  S.say("Tiles: skinny_tile %.3f ms at 1 row, %.3f at the shapes' rows; launches %.3f and %.3f: %s", ms[0][1],
        ms[1][1], ms[0][0], ms[1][0], on ? "the tiles (Tiles on=1)" : "the launches (Tiles off=1)");
  return on != was_on || !had[on ? 0 : 1];
}

// Where the tiles run: skinny_tile's one-row build with the activation in
// the kernel or in a bias_act pass of its own (clf__skinny_act_pass), each
// weight type's one-row products over the shapes' distinct weights
// (count-weighted sums of medians, no activation: the build alone is what
// differs).  The pass is kept ("Tiles act_pass=1") when its build takes
// under 0.9 of the other's: the margin pays for the passes, one a layer
// for the products with an activation.  Not measured where
// $CLFORMER_SKINNY_ACT_PASS decides.  True when the choice changed.
bool tune_act_pass(Search &S) {
  clf_context *ctx = S.ctx;
  if (!clf__skinny_tiles(ctx, 0, 1)) return false;
  if (ctx->env.skinny_act_pass >= 0) {
    S.say("Tiles act_pass: not measured: $CLFORMER_SKINNY_ACT_PASS decides");
    return false;
  }
  static const unsigned one[2] = {1, 0};
  const bool was = clf__skinny_act_pass(ctx) != 0;
  auto set = [&](bool on) {
    if (!clf__tuned_group_set(ctx, CLF__TILES_TUNING, "act_pass", on ? one : nullptr)) throw std::bad_alloc();
  };
  double ms[2] = {0, 0};  // [in the kernel, a pass]
  for (const clf_dtype wt : {CLF_F32, CLF_F16, CLF_Q8_0, CLF_Q4_0}) {
    RowsBench B;
    std::string why;
    if (!B.setup(S, {wt, 0}, &why)) continue;
    if (!B.grow(S, 1, &why)) return set(was), S.say("Tiles act_pass: not measured: %s", why.c_str()), false;
    for (RowsBench::W &e : B.ws)
      for (int on = 0; on < 2; on++) {
        double t;
        set(on);
        if (!time_path(ctx, true, e.x, e.w, 0, e.y, 1, e.n, e.k, 0, false, &t, &why))
          return set(was), S.say("Tiles act_pass: not measured: %s", why.c_str()), false;
        ms[on] += e.count * t;
      }
  }
  if (ms[0] == 0) return set(was), S.say("Tiles act_pass: not measured: no weight of the shapes"), false;
  const bool on = ms[1] < 0.9 * ms[0];
  set(on);
  S.say("Tiles act_pass: one row %.3f ms with the activation in the kernel, %.3f without: %s", ms[0], ms[1],
        on ? "a pass of its own (act_pass=1)" : "in the kernel");
  return on != was;
}

// Where the tiles run: one row against Q4_0 weights in skinny_pair or in
// skinny_tile's one-row build (clf__skinny_pair), the shapes' distinct
// weights (count-weighted sums of medians); the pairs are kept ("Tiles
// pair=1") unless they take longer, else "pairs_off=1" (a profile's
// numbers are 1 or more, so the two choices are two keys, as on/off are;
// both give the same bits; the rule covers Q4_1, whose blocks the pairs
// read alike).  Not measured where $CLFORMER_SKINNY_PAIR decides.  True
// when the choice changed or no line had recorded it.
bool tune_pair(Search &S) {
  clf_context *ctx = S.ctx;
  if (!clf__skinny_tiles(ctx, 0, 1)) return false;
  if (ctx->env.skinny_pair >= 0) {
    S.say("Tiles pair: not measured: $CLFORMER_SKINNY_PAIR decides");
    return false;
  }
  unsigned had_on[2], had_off[2];
  const bool had[2] = {clf__tuned_group(ctx, CLF__TILES_TUNING, "pair", had_on) != 0,
                       clf__tuned_group(ctx, CLF__TILES_TUNING, "pairs_off", had_off) != 0};
  const bool was = clf__skinny_pair(ctx, CLF_Q4_0) != 0;
  static const unsigned one[2] = {1, 0};
  auto set = [&](bool on) {
    if (!clf__tuned_group_set(ctx, CLF__TILES_TUNING, on ? "pair" : "pairs_off", one) ||
        !clf__tuned_group_set(ctx, CLF__TILES_TUNING, on ? "pairs_off" : "pair", nullptr))
      throw std::bad_alloc();
  };
  auto restore = [&] {
    if (!clf__tuned_group_set(ctx, CLF__TILES_TUNING, "pair", had[0] ? had_on : nullptr) ||
        !clf__tuned_group_set(ctx, CLF__TILES_TUNING, "pairs_off", had[1] ? had_off : nullptr))
      throw std::bad_alloc();
  };
  double ms[2] = {0, 0};  // [skinny_tile, pairs]
  RowsBench B;
  std::string why;
  if (!B.setup(S, {CLF_Q4_0, 0}, &why) || !B.grow(S, 1, &why))
    return restore(), S.say("Tiles pair: not measured: %s", why.c_str()), false;
  for (RowsBench::W &e : B.ws)
    for (int on = 0; on < 2; on++) {
      double t;
      set(on);
      if (!time_path(ctx, true, e.x, e.w, 0, e.y, 1, e.n, e.k, 0, false, &t, &why))
        return restore(), S.say("Tiles pair: not measured: %s", why.c_str()), false;
      ms[on] += e.count * t;
    }
  const bool on = ms[1] <= ms[0];
  set(on);
  S.say("Tiles pair: one row of q4 %.3f ms in skinny_tile, %.3f in pairs: %s", ms[0], ms[1],
        on ? "the pairs (pair=1)" : "skinny_tile (pairs_off=1)");
  return on != was || !had[on ? 0 : 1];
}

// The integer path (clf__skinny_int_wanted): the shapes' distinct weights
// as Q8_0 and as Q4_0, at 1, 2, 4 and 8 rows, each on the float path and
// on the integer one's portable build (count-weighted sums of medians).
// The profile says "int=R" for the most rows R up to which every count
// measured the integer path faster, and has no int key where one row was
// not (the float path, as without a profile).  The extension's build is
// not timed: on Intel's CPU runtime, the one device here that has it, it
// ran 4-7x slower than the portable one (performance.md).  Not measured
// where $CLFORMER_SKINNY_INT decides.  True when the choice changed.
bool tune_int(Search &S) {
  clf_context *ctx = S.ctx;
  if (ctx->env.skinny_int >= 0) {
    S.say("Tiles int: not measured: $CLFORMER_SKINNY_INT decides");
    return false;
  }
  unsigned had[2] = {0, 0};
  const unsigned before = clf__tuned_group(ctx, CLF__TILES_TUNING, "int", had) && !had[1] ? had[0] : 0;
  auto set = [&](unsigned rows) {
    const unsigned v[2] = {rows, 0};
    if (!clf__tuned_group_set(ctx, CLF__TILES_TUNING, "int", rows ? v : nullptr)) throw std::bad_alloc();
  };
  static const size_t rows[4] = {1, 2, 4, 8};
  double ms[4][2] = {};  // [rows][float, integer]
  for (const clf_dtype wt : {CLF_Q8_0, CLF_Q4_0}) {
    RowsBench B;
    std::string why;
    if (!B.setup(S, {wt, 0}, &why)) continue;
    if (!B.grow(S, 8, &why)) return set(before), S.say("Tiles int: not measured: %s", why.c_str()), false;
    for (RowsBench::W &e : B.ws)
      for (int r = 0; r < 4; r++)
        for (int on = 0; on < 2; on++) {
          double t;
          set(on ? 8 : 0);
          if (!time_path(ctx, true, e.x, e.w, 0, e.y, rows[r], e.n, e.k, 0, false, &t, &why))
            return set(before), S.say("Tiles int: not measured: %s", why.c_str()), false;
          ms[r][on] += e.count * t;
        }
  }
  if (ms[0][0] == 0) return set(before), S.say("Tiles int: not measured: no weight of the shapes"), false;
  unsigned most = 0;
  for (int r = 0; r < 4 && ms[r][1] < ms[r][0]; r++) most = (unsigned)rows[r];
  set(most);
  char took[48] = "the float path";
  if (most) snprintf(took, sizeof took, "the integer path (int=%u)", most);
  S.say("Tiles int: q8 and q4 at 1, 2, 4, 8 rows, float %.3f %.3f %.3f %.3f ms, integer %.3f %.3f %.3f %.3f: %s",
        ms[0][0], ms[1][0], ms[2][0], ms[3][0], ms[0][1], ms[1][1], ms[2][1], ms[3][1], took);
  return most != before;
}

// Every kind, with the profile found applied to CLBlast, until `end`: each
// kind's rows in *fin's groups and the report.  True when one changed.
bool tune_rows(Search &S, const Profile &gemm, double end, Profile *fin, clf_tune_report *report) {
  clf_context *ctx = S.ctx;
  int code;
  if (!set_profile(ctx->dev.device, gemm, &code)) return false;
  bool any = false;
  // The kinds whose crossover comes early first, f32 [out, in] last: each
  // kind has an equal share of the time left when it starts (what the ones
  // before left over included), besides its builds.
  static const int order[kRowsKinds] = {4, 3, 2, 1, 0};
  for (int pos = 0; pos < kRowsKinds; pos++) {
    const int i = order[pos];
    const RowsKind &kind = kRows[i];
    const char *key = clf__skinny_rows_key(kind.wt, kind.in_out);
    const unsigned before = (unsigned)clf__skinny_max_rows(ctx, kind.wt, kind.in_out, nullptr);
    unsigned rows;
    std::string why;
    const double share = std::max(0.0, end - seconds_since(S.t0)) / (kRowsKinds - pos);
    if (!rows_of_kind(S, kind, share, &rows, &why)) {
      S.say("Rows %s: not measured: %s", key, why.c_str());
      continue;
    }
    if (report) report->rows[i] = {before, rows};
    S.say("Rows %s: the skinny path up to %u rows (was %u)", key, rows, before);
    unsigned had[2];
    const bool same = clf__tuned_group(ctx, CLF__ROWS_TUNING, key, had) && !had[1] && had[0] == rows;
    any |= !same;
    set_group(fin, {CLF__ROWS_TUNING, key, rows, 0});
  }
  return any;
}

// Keeps a profile better by 2% or more (less is within the noise of the
// timing): written to the cache and applied, or, with the disk cache off,
// set for this process only.  Otherwise the stored profile (if any) stays.
clf_status keep(clf_context *ctx, const Profile &fin, bool better, const clf_gemm_shape *shapes, size_t n,
                double def_total, double fin_total, clf_tune_report *report) {
  const std::string path = profile_path(ctx);
  clf_status st = CLF_OK;
  if (better && path.empty()) {
    int code;
    set_profile(ctx->dev.device, fin, &code);  // measured just now: it applies
    use_groups(ctx, fin);
    clf__info(ctx, "GEMM tuning: the disk cache is off, so the parameters found hold for this process only");
  } else if (better) {
    std::vector<clf_gemm_shape> list(shapes, shapes + n);
    if (!write_profile(ctx, path, fin, list, def_total, fin_total))
      st = clf__fail(ctx, CLF_E_IO, "clf_tune_gemm: cannot write the profile %s: %s", path.c_str(), strerror(errno));
    else if (report)
      snprintf(report->profile, sizeof report->profile, "%s", path.c_str());
  }
  // Frees the candidates' programs; the profile's own is rebuilt on first use.
  clblast::ClearCache();
  if (!(better && path.empty())) apply(ctx);
  return st;
}

clf_status tune(clf_context *ctx, const clf_gemm_shape *shapes, size_t n, const clf_tune_options *opts,
                clf_tune_result *per_shape, clf_tune_report *report) {
  Search S;
  S.ctx = ctx;
  S.opts = opts;
  S.rng.seed(opts->seed);
  const double budget = opts->budget_s > 0 ? opts->budget_s : 300;
  clf_status st = S.setup(shapes, n);
  if (st != CLF_OK) return st;
  S.have_before = applied_of(ctx->dev.device, &S.before);
  if (!defaults_of(ctx->dev.device, &S.dflt))
    return clf__fail(ctx, CLF_E_BLAS, "clf_tune_gemm: CLBlast cannot report its GEMM parameters for %s",
                     ctx->dev.device_name);

  // 1. CLBlast's own parameters: the baseline and the reference output.
  std::vector<double> def_ms, fin_ms, ms[NKERNELS];
  std::string why;
  if (S.measure(S.dflt, kNever, &def_ms, &why) < 0) {
    apply(ctx);
    return clf__fail(ctx, CLF_E_BLAS, "clf_tune_gemm: GEMM with CLBlast's own parameters failed: %s", why.c_str());
  }
  S.costliest_first(&def_ms);
  const double def_total = S.def_total = S.total(def_ms);
  for (size_t i = 0; i < n; i++) {
    const Bench &b = S.bench[i];
    S.say("shape m=%zu n=%zu k=%zu ta=%d tb=%d x%u: %.3f ms a call (%.1f GFLOP/s), %.0f%% of the GEMM time", b.s.m,
          b.s.n, b.s.k, b.s.trans_a, b.s.trans_b, (unsigned)b.weight(), def_ms[i], b.gflops(def_ms[i]),
          100 * b.weight() * def_ms[i] / def_total);
  }
  S.say("defaults: %.3f ms (Xgemm %s; XgemmDirect %s; %s=%zu)", def_total, params_text(S.dflt.k[XGEMM]).c_str(),
        params_text(S.dflt.k[DIRECT]).c_str(), kSwitch, get(S.dflt.k[ROUTINE], kSwitch));

  // On a CPU, the tiles or the launches (and where the tiles run, their
  // one-row builds: the activation pass, the pairs); the integer path's
  // rows; then the skinny kernel's groups
  // (where the launches run), with a tenth of the budget.
  const bool tiles_changed = tune_tiles(S) | tune_act_pass(S) | tune_pair(S) | tune_int(S);
  Profile skinny;
  const bool skinny_better = tune_skinny(S, 0.1 * budget, &skinny, report);
  Params best[NKERNELS];
  search_kernels(S, 0.9 * budget, best, ms);  // the last tenth: the crossovers
  double fin_total;
  Profile fin = combine(S, n, best, ms, def_ms, def_total, &fin_ms, &fin_total);
  const bool gemm_better = fin_total < 0.98 * def_total;
  if (!gemm_better) {  // none found: a profile written for its other lines keeps the kernels in force now
    const Profile &now = S.have_before ? S.before : S.dflt;
    for (int k = 0; k < NKERNELS; k++) fin.k[k] = now.k[k];
    fin_total = def_total, fin_ms = def_ms;
  }
  fin.groups = skinny.groups;
  // The crossovers, with the GEMM as it will run and the skinny groups found.
  use_groups(ctx, fin);
  // Its own time, from now: the phases before may overrun their budget (a
  // kernel's first build is not theirs to stop), and a crossover cut short
  // is no answer.  A sixth of the budget, two minutes at least (the
  // reference shapes at 64, 128 and 197 rows take about a minute on a
  // 2-core CPU, split over the five kinds).
  const double rows_end = std::max(budget, seconds_since(S.t0)) + std::max(budget / 6, 120.0);
  const bool rows_changed = tune_rows(S, fin, rows_end, &fin, report);

  if (report) {
    report->default_ms = def_total;
    report->tuned_ms = fin_total;
    report->tried = S.tried;
    report->rejected = S.rejected;
    report->profile[0] = '\0';
  }
  for (size_t i = 0; per_shape && i < n; i++)
    per_shape[S.bench[i].index] = {def_ms[i], fin_ms[i], std::min(S.bench[i].best_seen, fin_ms[i])};
  st = keep(ctx, fin, gemm_better || skinny_better || rows_changed || tiles_changed, shapes, n, def_total, fin_total,
            report);
  if (report) report->seconds = seconds_since(S.t0);
  return st;
}

}  // namespace

extern "C" clf_status clf_tune_gemm(clf_context *ctx, const clf_gemm_shape *shapes, size_t n,
                                   const clf_tune_options *opts, clf_tune_result *per_shape,
                                   clf_tune_report *report) {
  clf_status st = clf__check_ctx(ctx, "clf_tune_gemm");
  if (st != CLF_OK) return st;
  if ((st = shapes_check(ctx, shapes, n)) != CLF_OK) return st;
  const clf_tune_options none = {};
  if (report) memset(report, 0, sizeof *report);
  try {
    return tune(ctx, shapes, n, opts ? opts : &none, per_shape, report);
  } catch (...) {
    clf__gemm_profile_apply(ctx);
    return clf__fail(ctx, CLF_E_OUT_OF_MEMORY, "clf_tune_gemm: out of host memory");
  }
}
