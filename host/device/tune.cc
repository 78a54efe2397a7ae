// tune.cc - CLBlast GEMM parameter search and the per-device profile.
//
// clf_tune_gemm times candidate parameter sets of CLBlast's two GEMM kernels
// (Xgemm, the "indirect" kernel with its pad/transpose helpers, and
// XgemmDirect) on the GEMM shapes a model issues, checks each result against
// CLBlast's defaults, picks the switch between the two kernels
// (GemmRoutine's XGEMM_MIN_INDIRECT_SIZE), and stores the winner as a text
// profile in the cache directory.  Every context applies the profile of its
// device through clblast::OverrideParameters; CLBlast compiles lazily, so
// applying costs no build.  CLBlast keeps parameters per device for the
// whole process, so the context created last decides for all of them.
#include <clblast.h>

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdarg>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "ops/ops.h"

namespace {

using Params = std::map<std::string, size_t>;  // ordered: stable files and keys
constexpr clblast::Precision kF32 = clblast::Precision::kSingle;
constexpr const char *kFormat = "clformer-gemm-profile 1";
constexpr const char *kSwitch = "XGEMM_MIN_INDIRECT_SIZE";
constexpr size_t kAllDirect = size_t{1} << 20;  // (2^20)^3 exceeds any m*n*k

// The kernels a profile sets, in file order.
enum { XGEMM, DIRECT, ROUTINE, NKERNELS };
const char *const kKernel[NKERNELS] = {"Xgemm", "XgemmDirect", "GemmRoutine"};

struct Profile {
  Params k[NKERNELS];
  bool operator==(const Profile &o) const {
    return k[0] == o.k[0] && k[1] == o.k[1] && k[2] == o.k[2];
  }
};

// ---- CLBlast's process-wide state ----
// CLBlast's own parameters of each device, saved before our first override
// (afterwards RetrieveParameters returns ours), and the devices we changed.
std::mutex g_mu;
std::map<cl_device_id, Profile> g_defaults;
std::set<cl_device_id> g_overridden;

bool defaults_of(cl_device_id dev, Profile *out) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_defaults.find(dev);
  if (it == g_defaults.end()) {
    Profile p;
    for (int i = 0; i < NKERNELS; i++) {
      std::unordered_map<std::string, size_t> m;
      if (clblast::RetrieveParameters(dev, kKernel[i], kF32, m) != clblast::StatusCode::kSuccess) return false;
      p.k[i] = Params(m.begin(), m.end());
    }
    it = g_defaults.emplace(dev, p).first;
  }
  *out = it->second;
  return true;
}

// Sets all three kernels' parameters; false (with CLBlast's code) on failure.
bool set_profile(cl_device_id dev, const Profile &p, int *code) {
  Profile dflt;
  if (!defaults_of(dev, &dflt)) return *code = 0, false;
  std::lock_guard<std::mutex> lock(g_mu);
  for (int i = 0; i < NKERNELS; i++) {
    const std::unordered_map<std::string, size_t> m(p.k[i].begin(), p.k[i].end());
    clblast::StatusCode s = clblast::OverrideParameters(dev, kKernel[i], kF32, m);
    if (s != clblast::StatusCode::kSuccess) return *code = static_cast<int>(s), false;
  }
  g_overridden.insert(dev);
  return true;
}

// Puts CLBlast's own parameters back if we changed them; true if it did.
bool restore_defaults(cl_device_id dev) {
  Profile dflt;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_overridden.count(dev)) return false;
  }
  int code;
  if (!defaults_of(dev, &dflt) || !set_profile(dev, dflt, &code)) return false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_overridden.erase(dev);
  return true;
}

// ---- validity (the constraints of CLBlast's own tuners) ----
size_t get(const Params &p, const char *name) {
  auto it = p.find(name);
  return it == p.end() ? 0 : it->second;
}
bool multiple(size_t a, size_t b) { return b != 0 && a % b == 0; }
bool vec_width(size_t v) { return v == 1 || v == 2 || v == 4 || v == 8 || v == 16; }

bool valid_xgemm(const Params &p, const clf__device_caps &caps) {
  const size_t mwg = get(p, "MWG"), nwg = get(p, "NWG"), kwg = get(p, "KWG"), mdimc = get(p, "MDIMC"),
               ndimc = get(p, "NDIMC"), mdima = get(p, "MDIMA"), ndimb = get(p, "NDIMB"), kwi = get(p, "KWI"),
               vwm = get(p, "VWM"), vwn = get(p, "VWN"), sa = get(p, "SA"), sb = get(p, "SB"),
               gemmk = get(p, "GEMMK"), kreg = get(p, "KREG");
  if (!vec_width(vwm) || !vec_width(vwn) || sa > 1 || sb > 1 || get(p, "STRM") > 1 || get(p, "STRN") > 1 ||
      gemmk > 1 || kreg == 0 || mdima == 0 || ndimb == 0)
    return false;
  if (!multiple(kwg, kwi) || !multiple(mwg, mdimc * vwm) || !multiple(nwg, ndimc * vwn) ||
      !multiple(mwg, mdima * vwm) || !multiple(nwg, ndimb * vwn))
    return false;
  if (gemmk == 0) {
    const size_t threads = mdimc * ndimc;
    if (!multiple(threads, mdima) || !multiple(threads, ndimb) || !multiple(kwg, threads / mdima) ||
        !multiple(kwg, threads / ndimb))
      return false;
  } else if (!multiple(kreg, vwn) || mdimc != mdima || ndimc != ndimb) {
    return false;
  }
  return mdimc * ndimc <= caps.max_wg && mdimc <= caps.max_item_sizes[0] && ndimc <= caps.max_item_sizes[1] &&
         4 * (sa * kwg * mwg + sb * kwg * nwg) <= caps.local_mem;
}

bool valid_direct(const Params &p, const clf__device_caps &caps) {
  const size_t wgd = get(p, "WGD"), mdimcd = get(p, "MDIMCD"), ndimcd = get(p, "NDIMCD"), mdimad = get(p, "MDIMAD"),
               ndimbd = get(p, "NDIMBD"), kwid = get(p, "KWID"), vwmd = get(p, "VWMD"), vwnd = get(p, "VWND"),
               pada = get(p, "PADA"), padb = get(p, "PADB");
  const size_t threads = mdimcd * ndimcd;
  if (!vec_width(vwmd) || !vec_width(vwnd) || pada > 1 || padb > 1 || mdimad == 0 || ndimbd == 0) return false;
  if (!multiple(wgd, kwid) || !multiple(wgd, mdimcd * vwmd) || !multiple(wgd, ndimcd * vwnd) ||
      !multiple(wgd, mdimad * vwmd) || !multiple(wgd, ndimbd * vwnd) || !multiple(threads, mdimad) ||
      !multiple(threads, ndimbd) || !multiple(wgd, threads / mdimad) || !multiple(wgd, threads / ndimbd))
    return false;
  return threads <= caps.max_wg && mdimcd <= caps.max_item_sizes[0] && ndimcd <= caps.max_item_sizes[1] &&
         4 * (wgd * (wgd + pada) + wgd * (wgd + padb)) <= caps.local_mem;
}

bool valid_kernel(int i, const Params &p, const clf__device_caps &caps) {
  return i == XGEMM ? valid_xgemm(p, caps) : i == DIRECT ? valid_direct(p, caps) : true;
}

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
// CPUs and GPUs.  The first Xgemm set is what clblast_tuner_xgemm found on a
// Zen 5 CPU under PoCL (docs/tuning.md).
const char *const kXgemmCpuSeeds[] = {
    "MWG=128 NWG=64 KWG=32 MDIMC=8 NDIMC=16 MDIMA=16 NDIMB=32 KWI=2 VWM=8 VWN=2 STRM=0 STRN=0 SA=1 SB=1",
    "MWG=64 NWG=64 KWG=32 MDIMC=8 NDIMC=8 MDIMA=8 NDIMB=8 KWI=2 VWM=8 VWN=8 STRM=0 STRN=0 SA=0 SB=0",
    "MWG=128 NWG=128 KWG=32 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=8 VWN=8 STRM=0 STRN=0 SA=1 SB=1"};
const char *const kXgemmGpuSeeds[] = {
    "MWG=64 NWG=64 KWG=16 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=2 VWN=2 STRM=0 STRN=0 SA=1 SB=1",
    "MWG=128 NWG=128 KWG=16 MDIMC=16 NDIMC=16 MDIMA=16 NDIMB=16 KWI=2 VWM=4 VWN=4 STRM=1 STRN=1 SA=1 SB=1"};
const char *const kDirectCpuSeeds[] = {
    "WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=2 VWMD=4 VWND=4 PADA=1 PADB=1",
    "WGD=64 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=8 VWMD=8 VWND=8 PADA=1 PADB=1",
    "WGD=32 MDIMCD=8 NDIMCD=8 MDIMAD=8 NDIMBD=8 KWID=8 VWMD=2 VWND=4 PADA=0 PADB=0"};
const char *const kDirectGpuSeeds[] = {
    "WGD=32 MDIMCD=16 NDIMCD=16 MDIMAD=16 NDIMBD=16 KWID=2 VWMD=2 VWND=2 PADA=1 PADB=1",
    "WGD=64 MDIMCD=16 NDIMCD=16 MDIMAD=16 NDIMBD=16 KWID=8 VWMD=4 VWND=4 PADA=1 PADB=1"};

std::string params_text(const Params &p) {
  std::string s;
  for (const auto &kv : p) s += (s.empty() ? "" : " ") + kv.first + "=" + std::to_string(kv.second);
  return s;
}

// "A=1 B=2" over `base`: every name must be one of base's, and with
// `complete` all of them must be given (CLBlast rejects partial sets).
bool parse_params(const std::string &text, const Params &base, bool complete, Params *out, std::string *why) {
  Params p = base;
  std::set<std::string> seen;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    const size_t eq = tok.find('=');
    char *end = nullptr;
    if (eq == std::string::npos || eq == 0 || eq + 1 == tok.size() || !isdigit((unsigned char)tok[eq + 1]))
      return *why = "malformed parameter \"" + tok + "\"", false;
    const std::string name = tok.substr(0, eq);
    const unsigned long long v = strtoull(tok.c_str() + eq + 1, &end, 10);
    if (*end) return *why = "malformed parameter \"" + tok + "\"", false;
    if (!base.count(name)) return *why = "unknown parameter " + name, false;
    p[name] = static_cast<size_t>(v);
    seen.insert(name);
  }
  if (complete)
    for (const auto &kv : base)
      if (!seen.count(kv.first)) return *why = "parameter " + kv.first + " missing", false;
  *out = p;
  return true;
}

// ---- the profile file ----
std::string identity(const clf_context *ctx) {
  char b[512];
  snprintf(b, sizeof b, "%s / %s / %s / CLBlast %d.%d.%d", ctx->dev.platform_name, ctx->dev.device_name,
           ctx->dev.driver_version, CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR, CLBLAST_VERSION_PATCH);
  return b;
}

// <cache>/clblast/<key>.profile, or "" when the disk cache is off.
std::string profile_path(const clf_context *ctx) {
  if (!ctx->cache_dir) return "";
  const std::string id = identity(ctx);
  char b[64];
  snprintf(b, sizeof b, "/clblast/%016llx.profile",
           static_cast<unsigned long long>(clf__hash64(id.data(), id.size(), 0)));
  return ctx->cache_dir + std::string(b);
}

// Reads and checks a profile; on failure *why says what is wrong.
bool load_profile(const clf_context *ctx, const std::string &path, Profile *out, std::string *why) {
  FILE *f = fopen(path.c_str(), "r");
  if (!f) return *why = std::string("cannot read it: ") + strerror(errno), false;
  Profile dflt;
  if (!defaults_of(ctx->dev.device, &dflt)) {
    fclose(f);
    return *why = "CLBlast cannot report its parameters for this device", false;
  }
  std::vector<std::string> lines;
  char buf[4096];
  while (fgets(buf, sizeof buf, f)) lines.emplace_back(buf, strcspn(buf, "\r\n"));
  fclose(f);
  if (lines.empty() || lines[0] != kFormat) return *why = "not a clformer GEMM profile (first line)", false;
  bool have[NKERNELS] = {false, false, false}, have_id = false;
  Profile p = dflt;
  for (size_t n = 1; n < lines.size(); n++) {
    const std::string &l = lines[n];
    const std::string head = l.substr(0, l.find(' ')), rest = l.size() > head.size() ? l.substr(head.size() + 1) : "";
    if (head == "device") {
      if (rest != identity(ctx)) return *why = "made for another device, driver or CLBlast: " + rest, false;
      have_id = true;
      continue;
    }
    if (head.empty() || head == "#" || head == "shape" || head == "default_ms" || head == "tuned_ms") continue;
    int i = 0;
    while (i < NKERNELS && head != kKernel[i]) i++;
    if (i == NKERNELS) return *why = "line " + std::to_string(n + 1) + ": unknown entry \"" + head + "\"", false;
    std::string e;
    if (!parse_params(rest, dflt.k[i], true, &p.k[i], &e)) return *why = head + ": " + e, false;
    if (!valid_kernel(i, p.k[i], ctx->caps)) return *why = head + ": parameters break CLBlast's constraints", false;
    have[i] = true;
  }
  if (!have_id) return *why = "no device line", false;
  for (int i = 0; i < NKERNELS; i++)
    if (!have[i]) return *why = std::string("no ") + kKernel[i] + " line", false;
  *out = p;
  return true;
}

// Writes the profile atomically (temp file + rename).  False on I/O errors.
bool write_profile(const clf_context *ctx, const std::string &path, const Profile &p,
                   const std::vector<clf_gemm_shape> &shapes, double default_ms, double tuned_ms) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return false;
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE *f = fopen(tmp.c_str(), "w");
  if (!f) return false;
  fprintf(f, "%s\ndevice %s\n", kFormat, identity(ctx).c_str());
  for (const auto &s : shapes)
    fprintf(f, "shape m=%zu n=%zu k=%zu trans_a=%d trans_b=%d count=%u\n", s.m, s.n, s.k, s.trans_a, s.trans_b,
            s.count ? s.count : 1);
  fprintf(f, "default_ms %.4f\ntuned_ms %.4f\n", default_ms, tuned_ms);
  for (int i = 0; i < NKERNELS; i++) fprintf(f, "%s %s\n", kKernel[i], params_text(p.k[i]).c_str());
  const bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

void apply(clf_context *ctx) {
  free(ctx->gemm_profile);
  ctx->gemm_profile = nullptr;
  const cl_device_id dev = ctx->dev.device;
  const char *env = getenv("CLFORMER_TUNING");
  const std::string path = profile_path(ctx);
  struct stat st;
  const bool off = env && strcmp(env, "off") == 0;
  if (off || path.empty() || stat(path.c_str(), &st) != 0) {
    if (restore_defaults(dev))
      clf__log(ctx, "CLBlast's own GEMM parameters restored for %s (process-wide)%s", ctx->dev.device_name,
               off ? ": CLFORMER_TUNING=off" : "");
    return;
  }
  Profile p;
  std::string why;
  int code = 0;
  if (!load_profile(ctx, path, &p, &why)) {
    restore_defaults(dev);
    clf__log(ctx, "GEMM tuning profile %s ignored: %s", path.c_str(), why.c_str());
    return;
  }
  if (!set_profile(dev, p, &code)) {
    restore_defaults(dev);
    clf__log(ctx, "GEMM tuning profile %s ignored: CLBlast OverrideParameters failed (%d)", path.c_str(), code);
    return;
  }
  ctx->gemm_profile = strdup(path.c_str());
  clf__log(ctx, "GEMM tuning profile %s applied to %s", path.c_str(), ctx->dev.device_name);
}

}  // namespace


// ---- the search ----
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// One shape's device buffers and its output under CLBlast's defaults.
struct Bench {
  clf_gemm_shape s;
  cl_mem a = nullptr, b = nullptr, c = nullptr;
  std::vector<float> ref;
  double weight() const { return s.count ? s.count : 1; }
  unsigned long long mnk() const { return (unsigned long long)s.m * s.n * s.k; }
};

constexpr double kNever = 1e300;

struct Search {
  clf_context *ctx;
  const clf_tune_options *opts;
  std::vector<Bench> bench;
  Profile dflt;
  Clock::time_point t0 = Clock::now();
  unsigned tried = 0, rejected = 0;
  std::mt19937 rng;
  std::set<std::string> seen;  // "kernel params" already timed

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
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
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
        double scale = 1, diff = 0;
        for (size_t j = 0; j < got.size(); j++) {
          scale = std::max(scale, (double)std::fabs(b.ref[j]));
          const double d = std::fabs((double)got[j] - b.ref[j]);
          diff = d > diff || d != d ? d : diff;  // NaN counts as wrong
        }
        if (!(diff <= 1e-4 * scale)) {
          char m[160];
          snprintf(m, sizeof m, "wrong result on %zux%zux%zu: max error %.3g x scale %.3g", b.s.m, b.s.n, b.s.k,
                   diff / scale, scale);
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
      total += b.weight() * t[1];
      if (total > cutoff) return 0;
    }
    return 1;
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
        say("%s %s: %.3f ms%s", kKernel[which], params_text(c).c_str(), t, t < best_total ? " (best)" : "");
        if (t < best_total) best_total = t, *best = c, *best_ms = ms;
      }
    };
    auto time_left = [&] { return done == 0 || seconds_since(t0) < end; };
    // Seeds of this device's kind first, then the other kind's, then the defaults.
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

clf_status tune(clf_context *ctx, const clf_gemm_shape *shapes, size_t n, const clf_tune_options *opts,
                clf_tune_result *per_shape, clf_tune_report *report) {
  Search S;
  S.ctx = ctx;
  S.opts = opts;
  S.rng.seed(opts->seed);
  const double budget = opts->budget_s > 0 ? opts->budget_s : 300;
  clf_status st = S.setup(shapes, n);
  if (st != CLF_OK) return st;
  if (!defaults_of(ctx->dev.device, &S.dflt))
    return clf__fail(ctx, CLF_E_BLAS, "clf_tune_gemm: CLBlast cannot report its GEMM parameters for %s",
                     ctx->dev.device_name);

  // 1. CLBlast's own parameters: the baseline and the reference output.
  std::vector<double> def_ms, dms, ims, fin_ms;
  std::string why;
  if (S.measure(S.dflt, kNever, &def_ms, &why) < 0) {
    apply(ctx);
    return clf__fail(ctx, CLF_E_BLAS, "clf_tune_gemm: GEMM with CLBlast's own parameters failed: %s", why.c_str());
  }
  const double def_total = S.total(def_ms);
  S.say("defaults: %.3f ms (Xgemm %s; XgemmDirect %s; %s=%zu)", def_total, params_text(S.dflt.k[XGEMM]).c_str(),
        params_text(S.dflt.k[DIRECT]).c_str(), kSwitch, get(S.dflt.k[ROUTINE], kSwitch));

  // 2. XgemmDirect on every shape, then 3. Xgemm on every shape, each with
  // half of what is left of 90% of the budget; the rest checks the result.
  const double after = seconds_since(S.t0), left = std::max(0.0, 0.9 * budget - after);
  Profile base = S.dflt;
  Params best_direct, best_xgemm;
  base.k[ROUTINE][kSwitch] = kAllDirect;
  S.phase(DIRECT, base, after + left / 2, &best_direct, &dms);
  base = S.dflt;
  if (!best_direct.empty()) base.k[DIRECT] = best_direct;
  base.k[ROUTINE][kSwitch] = 0;
  S.phase(XGEMM, base, after + left, &best_xgemm, &ims);

  // 4. The switch, and the combination timed as it will run.
  Profile fin = S.dflt;
  if (!best_direct.empty()) fin.k[DIRECT] = best_direct;
  if (!best_xgemm.empty()) fin.k[XGEMM] = best_xgemm;
  if (dms.empty()) dms.assign(n, kNever);
  if (ims.empty()) ims.assign(n, kNever);
  double est;
  fin.k[ROUTINE][kSwitch] = choose_switch(S.bench, dms, ims, get(S.dflt.k[ROUTINE], kSwitch), &est);
  double fin_total = def_total;
  fin_ms = def_ms;
  if (!(fin == S.dflt) && est < kNever) {
    S.tried++;
    if (S.measure(fin, kNever, &fin_ms, &why) < 0) {
      S.rejected++;
      S.say("combined profile rejected: %s", why.c_str());
      fin_ms = def_ms;
    } else {
      fin_total = S.total(fin_ms);
    }
  }
  S.say("tuned: %.3f ms (Xgemm %s; XgemmDirect %s; %s=%zu) against %.3f ms", fin_total,
        params_text(fin.k[XGEMM]).c_str(), params_text(fin.k[DIRECT]).c_str(), kSwitch, get(fin.k[ROUTINE], kSwitch),
        def_total);

  // Better by 2% or more (less is within the noise of the timing).
  const bool better = fin_total < 0.98 * def_total;
  const std::string path = profile_path(ctx);
  if (report) {
    report->default_ms = def_total;
    report->tuned_ms = fin_total;
    report->tried = S.tried;
    report->rejected = S.rejected;
    report->profile[0] = '\0';
  }
  for (size_t i = 0; per_shape && i < n; i++) per_shape[i] = {def_ms[i], fin_ms[i]};
  st = CLF_OK;
  if (better && path.empty()) {
    int code;
    set_profile(ctx->dev.device, fin, &code);  // measured just now: it applies
    clf__log(ctx, "GEMM tuning: the disk cache is off, so the parameters found hold for this process only");
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
  if (report) report->seconds = seconds_since(S.t0);
  return st;
}

}  // namespace

extern "C" void clf__gemm_profile_apply(clf_context *ctx) {
  try {
    apply(ctx);
  } catch (...) {  // std::bad_alloc: the context goes on with CLBlast's parameters
    clf__log(ctx, "GEMM tuning profile not applied: out of host memory");
  }
}

extern "C" const char *clf_context_gemm_profile(const clf_context *ctx) { return ctx ? ctx->gemm_profile : nullptr; }

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
