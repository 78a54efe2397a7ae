// gemm_profile.h - the per-device CLBlast GEMM profile (C++ only).
//
// What a profile is (parameters of Xgemm, XgemmDirect and GemmRoutine),
// CLBlast's constraints on them, its text form, its file in the cache
// directory, and setting it on CLBlast.  The tuning search (in the layer
// above) uses these; contexts apply the user's stored profile, else a
// shipped one, through clf__gemm_profile_apply.  A profile also carries the
// work-groups that the search found for the other kernels (Group), which
// the core stores for the layers above without reading them.
#ifndef CLF_CORE_GEMM_PROFILE_H
#define CLF_CORE_GEMM_PROFILE_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core.h"

namespace clf_profile {

using Params = std::map<std::string, size_t>;  // ordered: stable files and keys

// The kernels a profile sets, in file order.
enum { XGEMM, DIRECT, ROUTINE, NKERNELS };
extern const char *const kKernel[NKERNELS];
// GemmRoutine's switch: m*n*k below its cube runs XgemmDirect.
constexpr const char *kSwitch = "XGEMM_MIN_INDIRECT_SIZE";
constexpr size_t kAllDirect = size_t{1} << 20;  // (2^20)^3 exceeds any m*n*k

// Work-groups a profile gives the kernels of the layers above, which the
// core keeps without reading what they are for: its optional lines
// "<Name> KEY=AxB ..." (A and B powers of two, A x B at most kMaxGroup; a
// key left out keeps the kernel's default): "Name a=1x16 b=4x8" gives
// (Name, a) 1 x 16 and (Name, b) 4 x 8.  A word "KEY=N" (1 to kMaxCount)
// is a count rather than a group: stored with b = 0 ("Rows f32=64": the
// most rows of a product the op layer's skinny path takes).  A context
// holds those of the profile it applied (clf__tuned_group in core.h).
constexpr unsigned kMaxGroup = 1024;
constexpr unsigned kMaxCount = 65536;
struct Group {
  std::string name, key;
  unsigned a = 0, b = 0;  // b 0: the count a
  bool operator==(const Group &o) const { return name == o.name && key == o.key && a == o.a && b == o.b; }
};

struct Profile {
  Params k[NKERNELS];
  std::vector<Group> groups;  // in file order, one per (name, key)
  bool operator==(const Profile &o) const {
    return k[0] == o.k[0] && k[1] == o.k[1] && k[2] == o.k[2] && groups == o.groups;
  }
};
// Sets g in p, replacing the group of the same (name, key).
void set_group(Profile *p, const Group &g);
// The "<Name> KEY=AxB ..." lines of p (each ending in a newline), one per
// name in the order first set.
std::string groups_text(const Profile &p);
// The words "KEY=AxB ..." after a line's head `name` into p: 1; 0 with
// *why when one breaks the rules above; -1 when the text is not of that
// form (then the line is no group line at all).
int parse_groups(const std::string &name, const std::string &text, Profile *p, std::string *why);
// ctx's groups into p's (replacing them), and back.
void groups_of(const clf_context *ctx, Profile *p);
void use_groups(clf_context *ctx, const Profile &p);

// CLBlast's own parameters of `dev`, saved before our first override; false
// when CLBlast cannot report them.
bool defaults_of(cl_device_id dev, Profile *out);
// The profile a context last applied to `dev` (a user's or a shipped one);
// false when CLBlast's own parameters are in use.
bool applied_of(cl_device_id dev, Profile *out);
// Sets all three kernels' parameters on CLBlast (process-wide); false with
// CLBlast's status code in *code on failure.
bool set_profile(cl_device_id dev, const Profile &p, int *code);

// A parameter's value, 0 when absent.
size_t get(const Params &p, const char *name);
// Whether p satisfies the constraints of CLBlast's own tuner for kernel i
// on a device with `caps`.
bool valid_kernel(int i, const Params &p, const clf__device_caps &caps);
// "A=1 B=2", and back over `base`: every name must be one of base's, and
// with `complete` all of them must be given (CLBlast rejects partial sets).
std::string params_text(const Params &p);
bool parse_params(const std::string &text, const Params &base, bool complete, Params *out, std::string *why);

// ---- shipped profiles (gemm_shipped.cc) ----
// What decides a device's GEMM parameters, and so what a profile shipped
// with the library is matched on (not the exact device name).
struct Traits {
  std::string platform, device_type, isa, driver;  // device_type "CPU", "GPU", ...
  size_t local_mem_kib = 0, compute_units = 0;
};
// A shipped profile's "match key=value" lines: "" / a full range = any.
struct Match {
  std::string platform, device_type, isa, driver;  // driver: a prefix
  size_t mem_lo = 0, mem_hi = SIZE_MAX, cu_lo = 0, cu_hi = SIZE_MAX;  // inclusive
  int specificity = 0;                                                // traits given
  std::string text;                                                   // for notices
};
// PoCL's CPU ISA in a device name ("pthread-haswell-AMD EPYC" -> "haswell",
// "cpu-skylake-avx512-AMD ..." -> "skylake-avx512"); "" for other platforms.
std::string isa_of(const char *platform, const char *device_name, bool cpu);
Traits traits_of(const clf_device_desc &dev, const clf__device_caps &caps);
// One "key=value" of a match line into *m; false with *why.
bool parse_match(const std::string &kv, Match *m, std::string *why);
bool matches(const Match &m, const Traits &t);

// A profile's text: the format line, "device", "match", "shape", comment
// and timing lines, and one complete parameter line per kernel over
// `dflt`'s names.  Checks nothing device-specific.
struct Parsed {
  Profile p;
  std::string device;  // the "device" line, "" if none
  Match match;
  bool have_match = false;
};
bool parse_profile(const std::string &text, const Profile &dflt, Parsed *out, std::string *why);
// The most specific shipped profile matching ctx's device whose parameters
// keep CLBlast's constraints there; its name in *name ("shipped:<stem>")
// and its match traits in *traits.  Malformed or invalid ones are logged
// and skipped.  False when none applies.
bool pick_shipped(clf_context *ctx, const Profile &dflt, Profile *out, std::string *name, std::string *traits);

// <cache>/clblast/<key>.profile of ctx's device, or "" when the disk cache
// is off.
std::string profile_path(const clf_context *ctx);
// Writes a profile atomically (temp file + rename); false on I/O errors.
bool write_profile(const clf_context *ctx, const std::string &path, const Profile &p,
                   const std::vector<clf_gemm_shape> &shapes, double default_ms, double tuned_ms);
// Applies the user's stored profile of ctx's device, else the most specific
// matching shipped one, else restores CLBlast's own parameters, and logs
// what it did.  May throw std::bad_alloc.
void apply(clf_context *ctx);

}  // namespace clf_profile

#endif  // CLF_CORE_GEMM_PROFILE_H
