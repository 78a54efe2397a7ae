/* cache.c - the on-disk cache of compiled program binaries.
 *
 * An entry is one file named by the hash of its key.  The key is text that
 * covers the library version, platform, device, driver, build options and a
 * 128-bit hash of the source.  Layout (little endian):
 *   magic "CLFCACHE" | u32 format | u32 key_len | u64 bin_len | u64 bin_hash
 *   | key | binary
 * Anything that does not match (magic, format, key, size, checksum) is
 * treated as absent, and the caller compiles from source and rewrites it.
 */
#include "core.h"

#include "base/file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CLF__CACHE_MAGIC "CLFCACHE"
#define CLF__CACHE_FORMAT 1u
#define CLF__CACHE_HEADER 32u
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
  if (!clf__is_file(path)) return NULL; /* absent */
  const size_t klen = strlen(key);
  size_t n = 0;
  unsigned char *file =
      (unsigned char *)clf__read_cached_file(ctx, "cache entry", path, CLF__CACHE_HEADER + klen + CLF__CACHE_MAX_BYTES,
                                             &n, NULL, 0);
  if (!file || n < CLF__CACHE_HEADER || memcmp(file, CLF__CACHE_MAGIC, 8) != 0 ||
      get32(file + 8) != CLF__CACHE_FORMAT || get32(file + 12) != klen)
    goto reject;
  const uint64_t blen = get64(file + 16), bhash = get64(file + 24);
  const unsigned char *fkey = file + CLF__CACHE_HEADER, *bin = fkey + klen;
  if (blen == 0 || blen > CLF__CACHE_MAX_BYTES || n != CLF__CACHE_HEADER + klen + blen) goto reject;
  if (memcmp(fkey, key, klen) != 0 || clf__hash64(bin, (size_t)blen, 0) != bhash) goto reject;
  /* The binary to the front of the buffer, which the caller frees. */
  memmove(file, bin, (size_t)blen);
  *size = (size_t)blen;
  return file;
reject:
  free(file);
  *rejected = 1;
  return NULL;
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
  put64(hdr + 24, clf__hash64(bin, size, 0));
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
