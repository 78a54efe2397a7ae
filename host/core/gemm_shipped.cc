// gemm_shipped.cc - GEMM profiles shipped with the library (profiles/*.profile,
// embedded at build time): the traits a device is matched on, and picking
// the most specific profile that matches.
//
// A shipped profile is found by what decides CLBlast's parameters (platform,
// device type, PoCL's CPU ISA, driver, local memory, compute units), not by
// the exact device name, so a fresh machine of the same kind gets it.
// gemm_profile.cc applies it when the user has no profile of their own.
#include "gemm_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace clf_profile {
namespace {
// PoCL's CPU drivers, as the prefixes of its device names.
const char *const kPoclDrivers[] = {"cpu-minimal-", "cpu-tbb-", "pthread-", "basic-", "tbb-", "cpu-"};
const char *const kPocl = "Portable Computing Language";
const char *const kIntelCpu = "Intel(R) OpenCL";

// "N", "N-M", "N-", "any" into [*lo, *hi].
bool parse_range(const std::string &v, size_t *lo, size_t *hi) {
  if (v == "any") return *lo = 0, *hi = SIZE_MAX, true;
  char *end = nullptr;
  if (v.empty() || !isdigit((unsigned char)v[0])) return false;
  *lo = strtoull(v.c_str(), &end, 10);
  if (*end == '\0') return *hi = *lo, true;
  if (*end != '-') return false;
  if (end[1] == '\0') return *hi = SIZE_MAX, true;
  if (!isdigit((unsigned char)end[1])) return false;
  *hi = strtoull(end + 1, &end, 10);
  return *end == '\0' && *lo <= *hi;
}
}  // namespace

// Intel's CPU runtime compiles for the host's widest vector ISA, or the
// one $CL_CONFIG_CPU_TARGET_ARCH names (its own setting): "avx512",
// "avx2", "avx" or "sse4".
static std::string intel_isa() {
  static const struct {
    const char *arch, *isa;
  } kArch[] = {{"skx", "avx512"}, {"core-avx512", "avx512"}, {"icelake", "avx512"}, {"sapphirerapids", "avx512"},
               {"core-avx2", "avx2"}, {"corei7-avx", "avx"}, {"corei7", "sse4"}};
  const char *env = clf__env_driver_cpu_arch();
  if (env && *env) {
    for (const auto &a : kArch)
      if (strcmp(env, a.arch) == 0) return a.isa;
    return env;  // as the runtime was told: a profile may name it
  }
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "avx512";
  if (__builtin_cpu_supports("avx2")) return "avx2";
  if (__builtin_cpu_supports("avx")) return "avx";
  return "sse4";
#else
  return "";
#endif
}

std::string isa_of(const char *platform, const char *device_name, bool cpu) {
  if (cpu && strcmp(platform, kIntelCpu) == 0) return intel_isa();
  if (!cpu || strcmp(platform, kPocl) != 0) return "";
  const char *rest = nullptr;
  for (const char *d : kPoclDrivers)
    if (strncmp(device_name, d, strlen(d)) == 0) {
      rest = device_name + strlen(d);
      break;
    }
  if (!rest) return "";
  // LLVM's CPU names are lower case ("skylake-avx512", "x86-64-v3"); the
  // model name that follows starts a '-'-separated part with an upper-case
  // letter or holds a space ("AMD EPYC", "Intel(R) Xeon(R) ...").
  std::string isa;
  for (const char *p = rest; *p;) {
    const char *dash = strchr(p, '-');
    const std::string part(p, dash ? (size_t)(dash - p) : strlen(p));
    if (part.empty() || part.find(' ') != std::string::npos ||
        std::any_of(part.begin(), part.end(), [](char c) { return isupper((unsigned char)c); }))
      break;
    isa += (isa.empty() ? "" : "-") + part;
    if (!dash) break;
    p = dash + 1;
  }
  return isa;
}

Traits traits_of(const clf_device_desc &dev, const clf__device_caps &caps) {
  Traits t;
  t.platform = dev.platform_name;
  // The class the context's choices follow (CLFORMER_DEVICE_CLASS), else
  // the device's.
  const cl_device_type type = caps.cls ? caps.cls : dev.type;
  t.device_type = type & CL_DEVICE_TYPE_CPU           ? "CPU"
                  : type & CL_DEVICE_TYPE_GPU         ? "GPU"
                  : type & CL_DEVICE_TYPE_ACCELERATOR ? "ACCELERATOR"
                                                      : "OTHER";
  t.isa = isa_of(dev.platform_name, dev.device_name, caps.is_cpu);
  t.driver = dev.driver_version;
  t.local_mem_kib = caps.local_mem / 1024;
  t.compute_units = caps.compute_units;
  return t;
}

bool parse_match(const std::string &kv, Match *m, std::string *why) {
  const size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
    return *why = "malformed match \"" + kv + "\" (want key=value)", false;
  const std::string key = kv.substr(0, eq), v = kv.substr(eq + 1);
  const bool any = v == "any";
  std::string *text = key == "platform" ? &m->platform
                      : key == "device_type" ? &m->device_type
                      : key == "isa"         ? &m->isa
                      : key == "driver"      ? &m->driver
                                             : nullptr;
  if (text) {
    if (key == "device_type" && !any && v != "CPU" && v != "GPU" && v != "ACCELERATOR")
      return *why = "match device_type=" + v + ": want CPU, GPU, ACCELERATOR or any", false;
    *text = any ? "" : v;
  } else if (key == "local_mem_kib" || key == "compute_units") {
    size_t *lo = key == "compute_units" ? &m->cu_lo : &m->mem_lo, *hi = key == "compute_units" ? &m->cu_hi : &m->mem_hi;
    if (!parse_range(v, lo, hi)) return *why = "match " + kv + ": want N, N-M, N- or any", false;
  } else {
    return *why = "unknown match trait \"" + key + "\"", false;
  }
  m->specificity += any ? 0 : 1;
  m->text += (m->text.empty() ? "" : ", ") + kv;
  return true;
}

bool matches(const Match &m, const Traits &t) {
  return (m.platform.empty() || m.platform == t.platform) && (m.device_type.empty() || m.device_type == t.device_type) &&
         (m.isa.empty() || m.isa == t.isa) && t.driver.compare(0, m.driver.size(), m.driver) == 0 &&
         m.mem_lo <= t.local_mem_kib && t.local_mem_kib <= m.mem_hi && m.cu_lo <= t.compute_units &&
         t.compute_units <= m.cu_hi;
}

bool pick_shipped(clf_context *ctx, const Profile &dflt, Profile *out, std::string *name, std::string *traits) {
  const Traits t = traits_of(ctx->dev, ctx->caps);
  const clf__kernel_source *best = nullptr;
  Parsed chosen;
  for (size_t i = 0; i < clf__shipped_profiles_count; i++) {
    const clf__kernel_source &s = clf__shipped_profiles[i];
    Parsed p;
    std::string why;
    if (!parse_profile(std::string(s.text, s.length), dflt, &p, &why) ||
        (!p.have_match && !(why = "no match line").empty())) {
      clf__log(ctx, "shipped GEMM profile %s ignored: %s", s.family, why.c_str());
      continue;
    }
    if (!matches(p.match, t) || (best && p.match.specificity <= chosen.match.specificity)) continue;
    int bad = 0;
    while (bad < NKERNELS && valid_kernel(bad, p.p.k[bad], ctx->caps)) bad++;
    if (bad < NKERNELS) {
      clf__log(ctx, "shipped GEMM profile %s ignored: %s parameters break CLBlast's constraints on %s", s.family,
               kKernel[bad], ctx->dev.device_name);
      continue;
    }
    best = &s, chosen = p;
  }
  if (!best) return false;
  *out = chosen.p;
  *name = std::string("shipped:") + best->family;
  *traits = chosen.match.text;
  return true;
}

}  // namespace clf_profile

extern "C" void clf__gemm_isa(const char *platform, const char *device_name, int cpu, char *out, size_t n) {
  snprintf(out, n, "%s", clf_profile::isa_of(platform, device_name, cpu != 0).c_str());
}

extern "C" int clf__gemm_shipped_check(clf_context *ctx, const char *text, const clf_device_desc *dev,
                                       const clf__device_caps *caps, char *why, size_t n) {
  using namespace clf_profile;
  Profile dflt;
  Parsed p;
  std::string e;
  snprintf(why, n, "%s", "");
  if (!defaults_of(ctx->dev.device, &dflt)) return snprintf(why, n, "CLBlast cannot report its parameters"), -1;
  if (!parse_profile(text, dflt, &p, &e) || (!p.have_match && !(e = "no match line").empty()))
    return snprintf(why, n, "%s", e.c_str()), -1;
  if (!matches(p.match, traits_of(*dev, *caps))) return 0;
  for (int i = 0; i < NKERNELS; i++)
    if (!valid_kernel(i, p.p.k[i], *caps)) return snprintf(why, n, "%s breaks CLBlast's constraints", kKernel[i]), 0;
  return 1;
}
