// gemm_profile.cc - the per-device CLBlast GEMM profile: its file, checks
// and applying it.
//
// A profile sets the parameters of CLBlast's two GEMM kernels (Xgemm and
// XgemmDirect) and the switch between them (GemmRoutine's
// XGEMM_MIN_INDIRECT_SIZE), and the work-groups a search found for other
// kernels, kept for the layers above as they are (Group); the tuning search
// writes one with write_profile.  Every context applies one through
// clblast::OverrideParameters: the user's own for its device, else a
// shipped one matching the device's traits (gemm_shipped.cc), else none;
// CLBlast compiles lazily, so applying costs no build.  CLBlast keeps parameters per device for the whole process, so the
// context created last decides for all of them.
#include "gemm_profile.h"

#include <clblast.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <sstream>
#include <unordered_map>

#include <sys/stat.h>
#include <unistd.h>

namespace clf_profile {
namespace {
constexpr clblast::Precision kF32 = clblast::Precision::kSingle;
constexpr const char *kFormat = "clformer-gemm-profile 1";
constexpr size_t kMaxBytes = size_t{1} << 20;  // a profile is a few lines
}  // namespace

const char *const kKernel[NKERNELS] = {"Xgemm", "XgemmDirect", "GemmRoutine"};
void set_group(Profile *p, const Group &g) {
  for (Group &h : p->groups)
    if (h.name == g.name && h.key == g.key) return void(h = g);
  p->groups.push_back(g);
}

std::string groups_text(const Profile &p) {
  std::string s;
  std::set<std::string> done;
  for (const Group &g : p.groups) {
    if (!done.insert(g.name).second) continue;
    s += g.name;
    for (const Group &h : p.groups)
      if (h.name == g.name) s += " " + h.key + "=" + std::to_string(h.a) + (h.b ? "x" + std::to_string(h.b) : "");
    s += "\n";
  }
  return s;
}

// A word of letters, digits and '_' (a group line's name or key).
static bool is_word(const std::string &w) {
  return !w.empty() && std::all_of(w.begin(), w.end(), [](unsigned char c) { return isalnum(c) || c == '_'; });
}

int parse_groups(const std::string &name, const std::string &text, Profile *p, std::string *why) {
  std::istringstream in(text);
  std::vector<Group> gs;
  for (std::string w; in >> w;) {
    const size_t eq = w.find('=');
    Group g;
    char end = 0;
    if (eq == std::string::npos || !is_word(g.key = w.substr(0, eq))) return -1;
    const int got = sscanf(w.c_str() + eq + 1, "%ux%u%c", &g.a, &g.b, &end);
    if (got == 1 && isdigit((unsigned char)w[eq + 1]) && w.find('x', eq) == std::string::npos) {  // KEY=N
      if (g.a == 0 || g.a > kMaxCount)
        return *why = "\"" + w + "\": N of KEY=N must be 1 to " + std::to_string(kMaxCount), 0;
      g.b = 0;
      g.name = name;
      gs.push_back(g);
      continue;
    }
    if (got != 2) return -1;
    if (g.a == 0 || g.b == 0 || (g.a & (g.a - 1)) || (g.b & (g.b - 1)) || g.a > kMaxGroup || g.b > kMaxGroup ||
        g.a * g.b > kMaxGroup)
      return *why = "\"" + w + "\": A and B of KEY=AxB must be powers of two with A x B at most " +
                    std::to_string(kMaxGroup), 0;
    g.name = name;
    gs.push_back(g);
  }
  if (gs.empty() || !is_word(name)) return -1;
  for (const Group &g : gs) set_group(p, g);
  return 1;
}

// ---- CLBlast's process-wide state ----
// CLBlast's own parameters of each device, saved before our first override
// (afterwards RetrieveParameters returns ours), and the devices we changed.
static std::mutex g_mu;
static std::map<cl_device_id, Profile> g_defaults;
static std::set<cl_device_id> g_overridden;
static std::map<cl_device_id, Profile> g_applied;  // by apply(), until restored

bool applied_of(cl_device_id dev, Profile *out) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_applied.find(dev);
  if (it == g_applied.end()) return false;
  *out = it->second;
  return true;
}

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
static bool restore_defaults(cl_device_id dev) {
  Profile dflt;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!g_overridden.count(dev)) return false;
  }
  int code;
  if (!defaults_of(dev, &dflt) || !set_profile(dev, dflt, &code)) return false;
  std::lock_guard<std::mutex> lock(g_mu);
  g_overridden.erase(dev);
  g_applied.erase(dev);
  return true;
}

// ---- validity (the constraints of CLBlast's own tuners) ----
// Tiles and per-work-item accumulators at most twice what CLBlast's tuners
// and ours search (tiles of 128, 256 accumulators): a profile with tiles of
// 2048 kept PoCL compiling the GEMM kernel for over 5 minutes, 2^20 failed
// every GEMM.
constexpr size_t kMaxTile = 256, kMaxAccumulators = 256;
size_t get(const Params &p, const char *name) {
  auto it = p.find(name);
  return it == p.end() ? 0 : it->second;
}
static bool multiple(size_t a, size_t b) { return b != 0 && a % b == 0; }
static bool vec_width(size_t v) { return v == 1 || v == 2 || v == 4 || v == 8 || v == 16; }

static bool valid_xgemm(const Params &p, const clf__device_caps &caps) {
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
  if (mwg > kMaxTile || nwg > kMaxTile || kwg > kMaxTile || (mwg / mdimc) * (nwg / ndimc) > kMaxAccumulators)
    return false;
  return mdimc * ndimc <= caps.max_wg && mdimc <= caps.max_item_sizes[0] && ndimc <= caps.max_item_sizes[1] &&
         4 * (sa * kwg * mwg + sb * kwg * nwg) <= caps.local_mem;
}

static bool valid_direct(const Params &p, const clf__device_caps &caps) {
  const size_t wgd = get(p, "WGD"), mdimcd = get(p, "MDIMCD"), ndimcd = get(p, "NDIMCD"), mdimad = get(p, "MDIMAD"),
               ndimbd = get(p, "NDIMBD"), kwid = get(p, "KWID"), vwmd = get(p, "VWMD"), vwnd = get(p, "VWND"),
               pada = get(p, "PADA"), padb = get(p, "PADB");
  const size_t threads = mdimcd * ndimcd;
  if (!vec_width(vwmd) || !vec_width(vwnd) || pada > 1 || padb > 1 || mdimad == 0 || ndimbd == 0) return false;
  if (!multiple(wgd, kwid) || !multiple(wgd, mdimcd * vwmd) || !multiple(wgd, ndimcd * vwnd) ||
      !multiple(wgd, mdimad * vwmd) || !multiple(wgd, ndimbd * vwnd) || !multiple(threads, mdimad) ||
      !multiple(threads, ndimbd) || !multiple(wgd, threads / mdimad) || !multiple(wgd, threads / ndimbd))
    return false;
  if (wgd > kMaxTile || (wgd / mdimcd) * (wgd / ndimcd) > kMaxAccumulators) return false;
  return threads <= caps.max_wg && mdimcd <= caps.max_item_sizes[0] && ndimcd <= caps.max_item_sizes[1] &&
         4 * (wgd * (wgd + pada) + wgd * (wgd + padb)) <= caps.local_mem;
}

bool valid_kernel(int i, const Params &p, const clf__device_caps &caps) {
  return i == XGEMM ? valid_xgemm(p, caps) : i == DIRECT ? valid_direct(p, caps) : true;
}

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
// The device, its driver and CLBlast, and the class and limits when they
// are not the device's own (limits.c): a profile tuned under
// CLFORMER_DEVICE_CLASS=gpu or CLFORMER_LIMITS is kept apart from the
// device's own (its work-groups were searched from the GPU's defaults, its
// GEMM parameters fit the limits).
static std::string identity(const clf_context *ctx) {
  char b[768];
  snprintf(b, sizeof b, "%s / %s / %s / CLBlast %d.%d.%d%s%s%s%s", ctx->dev.platform_name, ctx->dev.device_name,
           ctx->dev.driver_version, CLBLAST_VERSION_MAJOR, CLBLAST_VERSION_MINOR, CLBLAST_VERSION_PATCH,
           ctx->caps.class_forced ? " / class " : "", ctx->caps.class_forced ? clf__class_name(ctx->caps.cls) : "",
           ctx->limits ? " / limits " : "", ctx->limits ? ctx->limits : "");
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

bool parse_profile(const std::string &all, const Profile &dflt, Parsed *out, std::string *why) {
  // Lines end at "\n"; each is kept up to a "\r" or a NUL.
  std::vector<std::string> lines;
  for (size_t at = 0; at < all.size();) {
    const size_t nl = std::min(all.find('\n', at), all.size());
    lines.emplace_back(all.c_str() + at, std::min(strcspn(all.c_str() + at, "\r\n"), nl - at));
    at = nl + 1;
  }
  if (lines.empty() || lines[0] != kFormat) return *why = "not a clformer GEMM profile (first line)", false;
  bool have[NKERNELS] = {false, false, false};
  Parsed r;
  r.p = dflt;
  for (size_t n = 1; n < lines.size(); n++) {
    const std::string &l = lines[n];
    const std::string head = l.substr(0, l.find(' ')), rest = l.size() > head.size() ? l.substr(head.size() + 1) : "";
    const std::string at = "line " + std::to_string(n + 1) + ": ";
    std::string e;
    if (head == "device") {
      r.device = rest;
      continue;
    }
    if (head == "match") {
      // "key=value ...": a word without '=' continues the value before it
      // (platform names hold spaces).
      std::istringstream in(rest);
      std::vector<std::string> kvs;
      for (std::string w; in >> w;)
        if (w.find('=') == std::string::npos && !kvs.empty()) kvs.back() += " " + w;
        else kvs.push_back(w);
      for (const std::string &kv : kvs)
        if (!parse_match(kv, &r.match, &e)) return *why = at + e, false;
      r.have_match = true;
      continue;
    }
    if (head.empty() || head == "#" || head == "shape" || head == "default_ms" || head == "tuned_ms") continue;
    int i = 0;
    while (i < NKERNELS && head != kKernel[i]) i++;
    if (i == NKERNELS) {
      const int g = parse_groups(head, rest, &r.p, &e);
      if (g == 0) return *why = at + head + ": " + e, false;
      if (g < 0)
        return *why = at + "unknown entry \"" + head + "\" (neither a kernel's parameters nor KEY=AxB work-groups)",
               false;
      continue;
    }
    if (!parse_params(rest, dflt.k[i], true, &r.p.k[i], &e)) return *why = at + head + ": " + e, false;
    have[i] = true;
  }
  for (int i = 0; i < NKERNELS; i++)
    if (!have[i]) return *why = std::string("no ") + kKernel[i] + " line", false;
  *out = r;
  return true;
}

// Reads and checks the user's profile; on failure *why says what is wrong.
static bool load_profile(const clf_context *ctx, const std::string &path, const Profile &dflt, Profile *out,
                         std::string *why) {
  char err[1024];
  size_t len = 0;
  char *text = clf__read_cached_file(ctx, "GEMM profile", path.c_str(), kMaxBytes, &len, err, sizeof err);
  if (!text) return *why = err, false;
  const std::string all(text, len);
  free(text);
  Parsed r;
  if (!parse_profile(all, dflt, &r, why)) return false;
  if (r.device.empty()) return *why = "no device line", false;
  if (r.device != identity(ctx)) return *why = "made for another device, driver or CLBlast: " + r.device, false;
  for (int i = 0; i < NKERNELS; i++)
    if (!valid_kernel(i, r.p.k[i], ctx->caps))
      return *why = std::string(kKernel[i]) + ": parameters break CLBlast's constraints", false;
  *out = r.p;
  return true;
}

// Writes the profile atomically (temp file + rename).  False on I/O errors.
bool write_profile(const clf_context *ctx, const std::string &path, const Profile &p,
                   const std::vector<clf_gemm_shape> &shapes, double default_ms, double tuned_ms) {
  const std::string dir = path.substr(0, path.rfind('/'));
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return false;
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  FILE *f = fopen(tmp.c_str(), "w");
  if (!f) return false;
  fprintf(f, "%s\ndevice %s\n", kFormat, identity(ctx).c_str());
  for (const auto &s : shapes)
    fprintf(f, "shape m=%zu n=%zu k=%zu trans_a=%d trans_b=%d count=%u\n", s.m, s.n, s.k, s.trans_a, s.trans_b,
            s.count ? s.count : 1);
  fprintf(f, "default_ms %.4f\ntuned_ms %.4f\n", default_ms, tuned_ms);
  for (int i = 0; i < NKERNELS; i++) fprintf(f, "%s %s\n", kKernel[i], params_text(p.k[i]).c_str());
  fputs(groups_text(p).c_str(), f);
  const bool ok = fflush(f) == 0 && fsync(fileno(f)) == 0;
  if (fclose(f) != 0 || !ok || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

// Sets p on CLBlast and records it as ctx's profile `name`; on failure puts
// CLBlast's parameters back and logs why.
static bool use(clf_context *ctx, const Profile &p, const std::string &name, const std::string &traits) {
  const cl_device_id dev = ctx->dev.device;
  int code = 0;
  if (!set_profile(dev, p, &code)) {
    restore_defaults(dev);
    clf__log(ctx, "GEMM tuning profile %s ignored: CLBlast OverrideParameters failed (%d)", name.c_str(), code);
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g_applied[dev] = p;
  }
  ctx->gemm_profile = strdup(name.c_str());
  use_groups(ctx, p);
  clf__info(ctx, "GEMM tuning profile %s%s%s%s applied to %s", name.c_str(), traits.empty() ? "" : " (matched on ",
           traits.c_str(), traits.empty() ? "" : ")", ctx->dev.device_name);
  return true;
}

// The user's own profile wins; else the most specific shipped one that
// matches the device; else CLBlast's own parameters.
void apply(clf_context *ctx) {
  free(ctx->gemm_profile);
  ctx->gemm_profile = nullptr;
  use_groups(ctx, Profile());
  const cl_device_id dev = ctx->dev.device;
  const bool off = ctx->env.tuning == 0, user_only = ctx->env.tuning == 1;
  const std::string path = off ? "" : profile_path(ctx);
  Profile dflt, p;
  struct stat st;
  std::string why, name, traits;
  const bool known = !off && defaults_of(dev, &dflt);
  if (!path.empty() && stat(path.c_str(), &st) == 0) {
    if (!known) why = "CLBlast cannot report its parameters for this device";
    else if (load_profile(ctx, path, dflt, &p, &why) && use(ctx, p, path, "")) return;
    if (!why.empty()) clf__log(ctx, "GEMM tuning profile %s ignored: %s", path.c_str(), why.c_str());
  }
  if (known && !user_only && pick_shipped(ctx, dflt, &p, &name, &traits) && use(ctx, p, name, traits)) return;
  if (restore_defaults(dev))
    clf__info(ctx, "CLBlast's own GEMM parameters restored for %s (process-wide)%s", ctx->dev.device_name,
             off ? ": CLFORMER_TUNING=off" : "");
}

}  // namespace clf_profile

// ---- the applied profile's work-groups, by (name, key) ----
struct clf__tuned {
  std::vector<clf_profile::Group> groups;
};

namespace clf_profile {
void groups_of(const clf_context *ctx, Profile *p) {
  if (ctx->tuned) p->groups = ctx->tuned->groups;
  else p->groups.clear();
}

void use_groups(clf_context *ctx, const Profile &p) {
  if (!ctx->tuned) ctx->tuned = new clf__tuned;
  ctx->tuned->groups = p.groups;
  clf__plans_forget(ctx);  // plans were made from the groups
}
}  // namespace clf_profile

extern "C" int clf__tuned_group(const clf_context *ctx, const char *name, const char *key, unsigned group[2]) {
  if (!ctx->tuned) return 0;
  for (const clf_profile::Group &g : ctx->tuned->groups)
    if (g.name == name && g.key == key) return group[0] = g.a, group[1] = g.b, 1;
  return 0;
}

extern "C" int clf__tuned_group_set(clf_context *ctx, const char *name, const char *key, const unsigned group[2]) {
  try {
    clf_profile::Profile p;
    clf_profile::groups_of(ctx, &p);
    if (group) clf_profile::set_group(&p, {name, key, group[0], group[1]});
    else
      p.groups.erase(std::remove_if(p.groups.begin(), p.groups.end(),
                                    [&](const clf_profile::Group &g) { return g.name == name && g.key == key; }),
                     p.groups.end());
    clf_profile::use_groups(ctx, p);
    return 1;
  } catch (...) {  // std::bad_alloc
    return 0;
  }
}

extern "C" void clf__tuned_free(clf_context *ctx) {
  delete ctx->tuned;
  ctx->tuned = nullptr;
}

extern "C" void clf__gemm_profile_apply(clf_context *ctx) {
  try {
    clf_profile::apply(ctx);
  } catch (...) {  // std::bad_alloc: the context goes on with CLBlast's parameters
    clf__log(ctx, "GEMM tuning profile not applied: out of host memory");
  }
}

extern "C" const char *clf_context_gemm_profile(const clf_context *ctx) { return ctx ? ctx->gemm_profile : nullptr; }
