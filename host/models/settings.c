/* settings.c - the generation settings as people give them: the rows of
 * clformer.h's CLF_GENERATE_SETTING_MAP, listed for the command line, the
 * Python package and the server, which take their names, ranges, defaults
 * and help from here instead of each writing them out. */
#include "base/status.h"

#include <stddef.h>

static const clf_generate_setting rows[] = {
#define CLF__GEN_ROW(NAME, name, type, lo, hi, lo_excluded, def, flags, metavar, def_text, help)           \
  {name,                                                                                               \
   CLF_GEN_##type,                                                                                     \
   (lo),                                                                                               \
   (hi),                                                                                               \
   (lo_excluded),                                                                                      \
   !((flags) & CLF_GEN_NO_DEFAULT),                                                                    \
   (def),                                                                                              \
   ((flags) & CLF_GEN_SAMPLING) != 0,                                                                  \
   ((flags) & CLF_GEN_WHOLE) != 0,                                                                     \
   metavar,                                                                                            \
   def_text,                                                                                           \
   help},
    CLF_GENERATE_SETTING_MAP(CLF__GEN_ROW)
#undef CLF__GEN_ROW
};

_Static_assert(sizeof rows / sizeof rows[0] == CLF_GEN_SETTING_COUNT, "one row per clf_generate_setting_id");

size_t clf_generate_setting_count(void) { return CLF_GEN_SETTING_COUNT; }

clf_status clf_generate_setting_at(size_t i, clf_generate_setting *out) {
  if (!out || i >= CLF_GEN_SETTING_COUNT)
    return clf__fail(NULL, CLF_E_INVALID_ARG, "clf_generate_setting_at: %s", out ? "no such row" : "out is NULL");
  *out = rows[i];
  return CLF_OK;
}
