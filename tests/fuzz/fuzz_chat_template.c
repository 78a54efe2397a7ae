/* fuzz_chat_template.c - libFuzzer target: a chat template and its context.
 * The input is the template's source, then optionally a NUL byte and the
 * context as JSON (clf_chat_template_render_json); without one the
 * template renders two messages with clf_chat_template_render.  Parse and
 * render errors are expected; crashes, leaks, sanitizer reports and hangs
 * (the render limits bound loops, recursion and output) are findings. */
#include <clformer.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *buf = malloc(size + 1);
  if (!buf) return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  size_t tlen = strlen(buf); /* the template ends at the first NUL */
  clf_chat_template *t = NULL;
  char *text = NULL;
  if (clf_chat_template_parse(buf, &t) == CLF_OK) {
    if (tlen < size) {
      clf_chat_template_render_json(t, buf + tlen + 1, &text);
    } else {
      static const clf_chat_message m[] = {{"system", "Be brief."}, {"user", "Hello {{ there }} \xc3\xa9"}};
      clf_chat_template_render(t, m, 2, 1, &text);
    }
    free(text);
    clf_chat_template_destroy(t);
  }
  free(buf);
  return 0;
}
