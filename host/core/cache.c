/* cache.c - the cache directory and its compiled program binaries.
 *
 * The directory is private to the user: created 0700, and one that another
 * user could write to (not ours, group- or world-writable) is not used at
 * all, with a notice, since whoever can write an entry can also write a
 * valid digest for it.  An entry is one file named by a hash of its key.
 * The key is text that covers the library version, platform, device,
 * driver, build options and a 128-bit hash of the source.  Layout (little
 * endian):
 *   magic "CLFCACHE" | u32 format | u32 key_len | u64 bin_len
 *   | SHA-256 of (key_len, bin_len, key, binary) | key | binary
 * The digest (Nettle's SHA-256) catches any change to the entry, by
 * accident or by hand, not just the accidents a checksum catches.
 * Anything that does not match (magic, format, key, size, digest) is
 * treated as absent: the caller drops it, compiles from source and
 * rewrites it.
 */
#include "core.h"

#include "base/file.h"

#include <errno.h>
#include <nettle/sha2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLF__CACHE_MAGIC "CLFCACHE"
#define CLF__CACHE_FORMAT 2u
#define CLF__CACHE_HEADER (24u + SHA256_DIGEST_SIZE)
#define CLF__CACHE_MAX_BYTES (256u << 20)

uint64_t clf__hash64(const void *data, size_t len, uint64_t seed) {
  /* FNV-1a with a final avalanche (splitmix64's mixer). */
  const unsigned char *p = data;
  uint64_t h = 1469598103934665603ull ^ seed;
  for (size_t i = 0; i < len; i++) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

char *clf__cache_key(const clf_context *ctx, const char *source, size_t len, const char *options) {
  const clf_device_desc *d = &ctx->dev;
  size_t n = 512 + strlen(options) + sizeof(d->platform_name) + sizeof(d->device_name) +
             sizeof(d->driver_version) + sizeof(d->device_version) + sizeof(d->vendor);
  char *key = malloc(n);
  if (!key) return NULL;
  snprintf(key, n,
           "clformer %s cache %u\nplatform: %s\ndevice: %s\nvendor: %s\ndriver: %s\n"
           "device-version: %s\noptions: %s\nsource: %zu %016llx%016llx\n",
           CLF_VERSION_STRING, CLF__CACHE_FORMAT, d->platform_name, d->device_name, d->vendor,
           d->driver_version, d->device_version, options, len,
           (unsigned long long)clf__hash64(source, len, 0),
           (unsigned long long)clf__hash64(source, len, 0x9e3779b97f4a7c15ull));
  return key;
}

static void clf__entry_path(const clf_context *ctx, const char *key, char *buf, size_t len) {
  snprintf(buf, len, "%s/%016llx.clbin", ctx->cache_dir,
           (unsigned long long)clf__hash64(key, strlen(key), 0));
}

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i)); }
static uint32_t get32(const unsigned char *p) { uint32_t v = 0; for (int i = 3; i >= 0; i--) v = (v << 8) | p[i]; return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v = 0; for (int i = 7; i >= 0; i--) v = (v << 8) | p[i]; return v; }

/* The directory named by opt, $CLFORMER_CACHE_DIR or the XDG default into
 * buf; 0 when the cache is off or there is no home. */
static int cache_dir_path(const char *opt, const clf__env_create *e, char *buf, size_t len) {
  const char *env = opt ? opt : e->cache_dir;
  if (env && *env) {
    if (strcmp(env, "off") == 0) return 0;
    snprintf(buf, len, "%s", env);
    return 1;
  }
  const char *xdg = e->xdg_cache_home, *home = e->home;
  if (xdg && *xdg) snprintf(buf, len, "%s/clformer", xdg);
  else if (home && *home) snprintf(buf, len, "%s/.cache/clformer", home);
  else return 0;
  return 1;
}

char *clf__cache_dir_resolve(clf_context *ctx, const char *opt, const clf__env_create *env) {
  char buf[4096];
  if (!cache_dir_path(opt, env, buf, sizeof buf)) return NULL;
  /* mkdir -p: what is created here is private to the user */
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(buf, 0700);
    *p = '/';
  }
  struct stat sb;
  if ((mkdir(buf, 0700) != 0 && errno != EEXIST) || stat(buf, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
    clf__log(ctx, "not caching compiled programs: the cache directory %s cannot be created or is not a "
             "directory", buf);
    return NULL;
  }
  if (sb.st_uid != geteuid() || (sb.st_mode & (S_IWGRP | S_IWOTH))) {
    clf__log(ctx, "not using the cache directory %s: %s (mode %03o); its entries could have been written by "
             "someone else.  chmod 700 it, or set CLFORMER_CACHE_DIR to a directory of your own",
             buf, sb.st_uid != geteuid() ? "another user owns it" : "others can write to it",
             (unsigned)(sb.st_mode & 0777));
    return NULL;
  }
  return strdup(buf);
}

/* SHA-256 over both lengths, the key and the binary. */
static void entry_digest(const char *key, size_t klen, const unsigned char *bin, size_t blen,
                         uint8_t out[SHA256_DIGEST_SIZE]) {
  unsigned char lens[12];
  put32(lens, (uint32_t)klen);
  put64(lens + 4, blen);
  struct sha256_ctx h;
  sha256_init(&h);
  sha256_update(&h, sizeof lens, lens);
  sha256_update(&h, klen, (const uint8_t *)key);
  sha256_update(&h, blen, bin);
  sha256_digest(&h, SHA256_DIGEST_SIZE, out);
}

char *clf__read_cached_file(const clf_context *ctx, const char *what, const char *path, size_t max_bytes,
                            size_t *len, char *why, size_t why_len) {
  /* clf__fail leaves the build log alone: status, code and message are all
   * a failed read changes. */
  clf__errstate *e = clf__err(ctx), saved;
  memcpy(&saved, e, sizeof(saved));
  char *text = NULL;
  if (clf__read_file((clf_context *)ctx, what, path, max_bytes, &text, len) != CLF_OK && why)
    snprintf(why, why_len, "%s", e->msg);
  e->status = saved.status;
  e->cl = saved.cl;
  memcpy(e->msg, saved.msg, sizeof(e->msg));
  return text;
}

unsigned char *clf__cache_load(const clf_context *ctx, const char *key, size_t *size, int *rejected) {
  char path[4200];
  *rejected = 0;
  if (!ctx->cache_dir) return NULL;
  clf__entry_path(ctx, key, path, sizeof(path));
  if (!clf__path_present(path)) return NULL; /* absent */
  const size_t klen = strlen(key);
  size_t n = 0;
  uint8_t digest[SHA256_DIGEST_SIZE];
  unsigned char *file =
      (unsigned char *)clf__read_cached_file(ctx, "cache entry", path, CLF__CACHE_HEADER + klen + CLF__CACHE_MAX_BYTES,
                                             &n, NULL, 0);
  if (!file || n < CLF__CACHE_HEADER || memcmp(file, CLF__CACHE_MAGIC, 8) != 0 ||
      get32(file + 8) != CLF__CACHE_FORMAT || get32(file + 12) != klen)
    goto reject;
  const uint64_t blen = get64(file + 16);
  const unsigned char *fkey = file + CLF__CACHE_HEADER, *bin = fkey + klen;
  if (blen == 0 || blen > CLF__CACHE_MAX_BYTES || n != CLF__CACHE_HEADER + klen + blen) goto reject;
  if (memcmp(fkey, key, klen) != 0) goto reject;
  entry_digest(key, klen, bin, (size_t)blen, digest);
  if (memcmp(digest, file + 24, SHA256_DIGEST_SIZE) != 0) goto reject;
  /* The binary to the front of the buffer, which the caller frees. */
  memmove(file, bin, (size_t)blen);
  *size = (size_t)blen;
  return file;
reject:
  free(file);
  *rejected = 1;
  return NULL;
}

void clf__cache_drop(const clf_context *ctx, const char *key) {
  char path[4200];
  if (!ctx->cache_dir) return;
  clf__entry_path(ctx, key, path, sizeof(path));
  unlink(path);
}

int clf__cache_store(const clf_context *ctx, const char *key, const unsigned char *bin, size_t size) {
  char path[4200], tmp[4300];
  if (!ctx->cache_dir || !size) return 0;
  clf__entry_path(ctx, key, path, sizeof(path));
  snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return 0; /* a read-only cache is not an error */
  unsigned char hdr[CLF__CACHE_HEADER];
  size_t klen = strlen(key);
  memcpy(hdr, CLF__CACHE_MAGIC, 8);
  put32(hdr + 8, CLF__CACHE_FORMAT);
  put32(hdr + 12, (uint32_t)klen);
  put64(hdr + 16, size);
  entry_digest(key, klen, bin, size, hdr + 24);
  int ok = fwrite(hdr, 1, sizeof(hdr), f) == sizeof(hdr) && fwrite(key, 1, klen, f) == klen &&
           fwrite(bin, 1, size, f) == size;
  ok = (fclose(f) == 0) && ok;
  /* rename() is atomic: a concurrent reader sees the old entry or the new. */
  if (!ok || rename(tmp, path) != 0) {
    remove(tmp);
    return 0;
  }
  return 1;
}
