/* options.c - one argument parser for every clformer subcommand: options
 * looked up in the command's table, numbers checked against the ranges the
 * table states, and the usage and help texts written from the same table. */
#include "options.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

int clf_cli_usage_error(const clf_cli_command *cmd, const char *fmt, ...) {
  va_list ap;
  fprintf(stderr, "clformer %s: ", cmd->name);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fprintf(stderr, "\nusage: clformer %s%s%s\n(`clformer %s --help` describes the options)\n", cmd->name,
          *cmd->synopsis ? " " : "", cmd->synopsis, cmd->name);
  return 2;
}

/* The range part of an option's help: " (an integer from 1 to 64; default 7)". */
static void describe_range(const clf_cli_option *o, char *buf, size_t len) {
  buf[0] = '\0';
  if (o->values) {
    snprintf(buf, len, " (one of ");
    o->values(buf + strlen(buf), len - strlen(buf));
  }
  switch (o->kind) {
  case CLF_OPT_LONG:
    snprintf(buf, len, " (%.0f to %.0f", o->min, o->max);
    if (o->setting && o->max >= 1e9) snprintf(buf, len, " (%.0f to %g", o->min, o->max);
    break;
  case CLF_OPT_DOUBLE:
    snprintf(buf, len, o->max < HUGE_VAL ? " (%s %g, at most %g" : " (%s %g", o->count ? "at least" : "more than",
             o->min, o->max);
    break;
  case CLF_OPT_SIZES:
    snprintf(buf, len, " (up to %d, each %.0f to %.0f", o->count, o->min, o->max);
    break;
  case CLF_OPT_STRINGS:
    snprintf(buf, len, " (repeatable, up to %d times", o->count);
    break;
  default:
    break;
  }
  size_t n = strlen(buf);
  if (o->def_text)
    snprintf(buf + n, len - n, "%sdefault: %s", n ? "; " : " (", o->def_text);
  else if (o->def != 0 && o->def >= o->min && (o->kind == CLF_OPT_LONG || o->kind == CLF_OPT_DOUBLE))
    snprintf(buf + n, len - n, "%sdefault %g", n ? "; " : " (", o->def);
  n = strlen(buf);
  if (o->required) snprintf(buf + n, len - n, "%srequired", n ? "; " : " (");
  n = strlen(buf);
  if (n) snprintf(buf + n, len - n, ")");
}

void clf_cli_print_help(const clf_cli_command *cmd, FILE *f) {
  fprintf(f, "usage: clformer %s%s%s\n", cmd->name, *cmd->synopsis ? " " : "", cmd->synopsis);
  if (cmd->details) fputs(cmd->details, f);
  fprintf(f, "options:\n");
  const clf_cli_option *rows[128];
  const int n = clf_cli_option_rows(cmd, rows, 128);
  for (int i = 0; i < n; i++) {
    const clf_cli_option *o = rows[i];
    char head[64], range[512];
    snprintf(head, sizeof(head), "%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
    describe_range(o, range, sizeof(range));
    fprintf(f, "  %-22s %s%s\n", head, o->help, range);
  }
  fprintf(f, "  %-22s %s\n", "-v, --verbose", "the library's notices on stderr (a tuning profile applied), as CLFORMER_LOG=info");
  fprintf(f, "  %-22s %s\n", "-h, --help", "this help");
}

/* The library's generation settings as option rows, made once: "--top-k"
 * (the name with '-' for '_'), the kind from the type, the range, the
 * default in words and the help from the row; the offset is the setting's
 * within clf_cli_sampling. */
typedef struct setting_row {
  clf_generate_setting s;
  clf_cli_option o;
  char name[48];
} setting_row;

static const setting_row *setting_rows(void) {
  static setting_row rows[CLF_GEN_SETTING_COUNT];
  static int made;
  if (made) return rows;
  for (size_t i = 0; i < CLF_GEN_SETTING_COUNT; i++) {
    setting_row *r = &rows[i];
    if (clf_generate_setting_at(i, &r->s) != CLF_OK) continue; /* not past the count */
    snprintf(r->name, sizeof r->name, "--%s", r->s.name);
    for (char *c = r->name; *c; c++)
      if (*c == '_') *c = '-';
    r->o = (clf_cli_option){
        .name = r->name,
        .metavar = r->s.metavar,
        .kind = r->s.type == CLF_GEN_BOOL ? CLF_OPT_FLAG : r->s.type == CLF_GEN_INT ? CLF_OPT_LONG : CLF_OPT_DOUBLE,
        .offset = offsetof(clf_cli_sampling, v) + i * sizeof(clf_cli_setting),
        .min = r->s.min,
        .max = r->s.max,
        .count = !r->s.min_excluded, /* CLF_OPT_DOUBLE: min allowed */
        .help = r->s.help,
        .def_text = r->s.default_text,
        .setting = &r->s};
  }
  made = 1;
  return rows;
}

/* The rows of one CLF_OPT_SETTINGS row of a command (its offset added),
 * made once per such row; how many into *n. */
static const clf_cli_option *settings_of(const clf_cli_option *marker, int *n) {
  static struct {
    const clf_cli_option *marker;
    clf_cli_option rows[CLF_GEN_SETTING_COUNT];
    int n;
  } made[8];
  int k = 0;
  while (k < 8 && made[k].marker && made[k].marker != marker) k++;
  if (k == 8) return *n = 0, NULL; /* more settings rows than commands have */
  if (!made[k].marker) {
    const setting_row *rows = setting_rows();
    for (size_t i = 0; i < CLF_GEN_SETTING_COUNT; i++) {
      const int flags = (rows[i].s.sampling ? CLF_GEN_SAMPLING : 0) | (rows[i].s.whole ? CLF_GEN_WHOLE : 0);
      if (!rows[i].o.name || (flags & marker->count)) continue;
      made[k].rows[made[k].n] = rows[i].o;
      made[k].rows[made[k].n++].offset += marker->offset;
    }
    made[k].marker = marker;
  }
  *n = made[k].n;
  return made[k].rows;
}

int clf_cli_option_rows(const clf_cli_command *cmd, const clf_cli_option **rows, int max) {
  int n = 0;
  for (const clf_cli_option *o = cmd->options; o && o->name; o++) {
    if (o->kind != CLF_OPT_SETTINGS) {
      if (n < max) rows[n++] = o;
      continue;
    }
    int k;
    const clf_cli_option *s = settings_of(o, &k);
    for (int i = 0; i < k && n < max; i++) rows[n++] = &s[i];
  }
  return n;
}

static const clf_cli_option *find_option(const clf_cli_command *cmd, const char *name) {
  const clf_cli_option *rows[128];
  const int n = clf_cli_option_rows(cmd, rows, 128);
  for (int i = 0; i < n; i++)
    if (!strcmp(rows[i]->name, name)) return rows[i];
  return NULL;
}

/* A whole-string integer within [min, max]. */
static int parse_integer(const char *s, double min, double max, long long *v) {
  char *end;
  errno = 0;
  *v = strtoll(s, &end, 10);
  return end != s && !*end && !errno && (double)*v >= min && (double)*v <= max;
}

static int parse_sizes(const clf_cli_option *o, const char *s, clf_cli_sizes *out) {
  out->n = 0;
  for (const char *p = s;;) {
    const char *comma = strchr(p, ',');
    char item[32];
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    long long v;
    if (len >= sizeof(item) || out->n == o->count) return 0;
    memcpy(item, p, len);
    item[len] = '\0';
    if (!parse_integer(item, o->min, o->max, &v)) return 0;
    out->v[out->n++] = (size_t)v;
    if (!comma) return 1;
    p = comma + 1;
  }
}

/* Stores one option's value; 1, or 0 with what was wrong in err. */
static int store(const clf_cli_option *o, const char *v, void *opts, char *err, size_t elen) {
  char *field = (char *)opts + o->offset;
  clf_cli_setting *setting = o->setting ? (clf_cli_setting *)field : NULL;
  long long n;
  char *end;
  double d;
  switch (o->kind) {
  case CLF_OPT_FLAG:
    if (setting) *setting = (clf_cli_setting){1, 1, 0};
    else *(int *)field = 1;
    return 1;
  case CLF_OPT_STRING:
    *(const char **)field = v;
    return 1;
  case CLF_OPT_LONG:
    if (!parse_integer(v, o->min, o->max, &n))
      return snprintf(err, elen, "%s: expected an integer from %.0f to %.0f, got \"%s\"", o->name, o->min, o->max, v),
             0;
    if (setting) *setting = (clf_cli_setting){1, n, 0};
    else *(long *)field = (long)n;
    return 1;
  case CLF_OPT_DOUBLE:
    errno = 0;
    d = strtod(v, &end);
    if (end == v || *end || errno || !((d > o->min || (o->count && d == o->min)) && d <= o->max)) {
      const char *from = o->count ? "at least" : "more than"; /* count: the range includes min */
      if (o->max < HUGE_VAL)
        snprintf(err, elen, "%s: expected a number %s %g and at most %g, got \"%s\"", o->name, from, o->min, o->max, v);
      else
        snprintf(err, elen, "%s: expected a number %s %g, got \"%s\"", o->name, from, o->min, v);
      return 0;
    }
    if (setting) *setting = (clf_cli_setting){1, 0, d};
    else *(double *)field = d;
    return 1;
  case CLF_OPT_STRINGS: {
    clf_cli_strings *l = (clf_cli_strings *)field;
    if (l->n >= o->count || l->n >= CLF_CLI_MAX_LIST)
      return snprintf(err, elen, "%s: given more than %d times", o->name, o->count), 0;
    l->v[l->n++] = v;
    return 1;
  }
  case CLF_OPT_SETTINGS:
    return 1; /* not an option itself: its rows are */
  case CLF_OPT_SIZES:
    if (!parse_sizes(o, v, (clf_cli_sizes *)field))
      return snprintf(err, elen, "%s: expected up to %d integers from %.0f to %.0f separated by commas, got \"%s\"",
                      o->name, o->count, o->min, o->max, v),
             0;
    return 1;
  }
  return 1;
}

const clf_cli_option *clf_cli_set_option(const clf_cli_command *cmd, const char *name, const char *value, void *opts,
                                         char *err, size_t elen) {
  const clf_cli_option *o = find_option(cmd, name);
  if (!o) return snprintf(err, elen, "unknown option %s", name), NULL;
  if (o->kind != CLF_OPT_FLAG && !value) return snprintf(err, elen, "%s: expected %s after it", o->name, o->metavar), NULL;
  return store(o, value, opts, err, elen) ? o : NULL;
}

static void set_defaults(const clf_cli_command *cmd, void *opts) {
  memset(opts, 0, cmd->opts_size);
  for (const clf_cli_option *o = cmd->options; o && o->name; o++) {
    char *field = (char *)opts + o->offset;
    if (o->kind == CLF_OPT_LONG) *(long *)field = (long)o->def;
    if (o->kind == CLF_OPT_DOUBLE) *(double *)field = o->def;
  }
}

/* Whether an option the table marks required is still missing. */
static const clf_cli_option *missing_required(const clf_cli_command *cmd, const unsigned char *seen) {
  int i = 0;
  for (const clf_cli_option *o = cmd->options; o && o->name; o++, i++)
    if (o->required && !seen[i]) return o;
  return NULL;
}

int clf_cli_parse(const clf_cli_command *cmd, int argc, char **argv, void *opts, char **pos, int *npos) {
  unsigned char seen[64] = {0};
  int options_done = 0;
  set_defaults(cmd, opts);
  *npos = 0;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const clf_cli_option *o = options_done ? NULL : find_option(cmd, a);
    if (!options_done && !strcmp(a, "--")) {
      options_done = 1;
    } else if (!options_done && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
      clf_cli_print_help(cmd, stdout);
      return 0;
    } else if (!options_done && (!strcmp(a, "--verbose") || !strcmp(a, "-v"))) {
      setenv("CLFORMER_LOG", "info", 1); /* the library's notices of what it chose, too */
    } else if (o) {
      if (o->kind != CLF_OPT_FLAG && i + 1 >= argc)
        return clf_cli_usage_error(cmd, "%s: expected %s after it", o->name, o->metavar);
      char err[512];
      if (!store(o, o->kind == CLF_OPT_FLAG ? NULL : argv[++i], opts, err, sizeof err))
        return clf_cli_usage_error(cmd, "%s", err);
      if (!o->setting && o - cmd->options < (long)sizeof(seen)) seen[o - cmd->options] = 1;
    } else if (!options_done && a[0] == '-' && a[1] && !cmd->free_text) {
      return clf_cli_usage_error(cmd, "unknown option %s", a);
    } else if (cmd->max_args >= 0 && *npos >= cmd->max_args) {
      return clf_cli_usage_error(cmd, "unexpected argument \"%s\"", a);
    } else {
      pos[(*npos)++] = argv[i];
    }
  }
  if (*npos < cmd->min_args) return clf_cli_usage_error(cmd, "expected %s", cmd->synopsis);
  const clf_cli_option *m = missing_required(cmd, seen);
  if (m) return clf_cli_usage_error(cmd, "%s %s is required", m->name, m->metavar);
  return -1;
}

int clf_cli_template_budget(const char *s, clf_template_budget *b, char *err, size_t elen) {
  *b = (clf_template_budget){0, 0, 0};
  while (*s) {
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    char part[80];
    if (len >= sizeof part) len = sizeof part - 1;
    memcpy(part, s, len);
    part[len] = '\0';
    s += comma ? len + 1 : len;
    if (!part[0]) continue;
    char *eq = strchr(part, '='), *end;
    uint64_t *field = !eq ? NULL : !strncmp(part, "steps=", 6) ? &b->steps : !strncmp(part, "bytes=", 6) ? &b->bytes
                                 : !strncmp(part, "memory=", 7) ? &b->memory : NULL;
    errno = 0;
    unsigned long long v = field && eq[1] >= '0' && eq[1] <= '9' ? strtoull(eq + 1, &end, 10) : 0;
    unsigned shift = field && eq[1] >= '0' && eq[1] <= '9' ? (*end == 'K' || *end == 'k' ? 10 : *end == 'M' || *end == 'm' ? 20
                                                               : *end == 'G' || *end == 'g' ? 30 : 0) : 0;
    if (field && shift) end++;
    if (!field || !(eq[1] >= '0' && eq[1] <= '9') || *end || errno || v == 0 || v > (UINT64_MAX >> shift))
      return snprintf(err, elen, "--template-budget: \"%s\": expected steps=N, bytes=N or memory=N (N a positive "
                      "integer, K/M/G allowed)", part), 0;
    *field = (uint64_t)v << shift;
  }
  return 1;
}
