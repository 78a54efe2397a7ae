/* status.c - the status line of long work on a terminal's stderr: the step
 * under way ("clformer probe: memory bandwidth (3 of 11)") and the kernel
 * program being built, redrawn in place with \r and erased when done, as
 * loading a model draws its percentage.  Nothing when stderr is not a
 * terminal. */
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

int clf_cli_status_line = 1;

static struct {
  int on;             /* stderr is a terminal (asked at the first begin) */
  char step[192];     /* "probe: memory bandwidth (3 of 11)"; "" for none */
  char build[128];    /* the program being built; "" for none */
  int builds;         /* programs built so far */
} st;

static void draw(void) {
  if (!clf_cli_status_line) return; /* erasing the line would take text that stdout wrote on it */
  fprintf(stderr, "\r\033[K");
  if (st.step[0] && st.build[0]) fprintf(stderr, "clformer %s: building %s (%d)", st.step, st.build, st.builds);
  else if (st.step[0]) fprintf(stderr, "clformer %s", st.step);
  else if (st.build[0]) fprintf(stderr, "clformer: building %s (%d)", st.build, st.builds);
  fflush(stderr);
}

static void build_progress(void *user, const char *what) {
  (void)user;
  if (what) st.builds++;
  snprintf(st.build, sizeof st.build, "%s", what ? what : "");
  draw();
}

void clf_cli_show_builds(clf_context_options *o) {
  if (isatty(STDERR_FILENO)) o->progress = build_progress, o->progress_user = NULL;
}

void clf_cli_status_begin(const char *cmd, const char *what, int n, int total) {
  st.on = isatty(STDERR_FILENO);
  if (!st.on) return;
  snprintf(st.step, sizeof st.step, "%s: %s (%d of %d)", cmd, what, n, total);
  draw();
}

void clf_cli_status_end(void) {
  if (!st.on) return;
  st.step[0] = st.build[0] = '\0';
  draw();
}

void clf_cli_status_note(const char *fmt, ...) {
  va_list ap;
  if (st.on && clf_cli_status_line) fprintf(stderr, "\r\033[K");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  if (st.on) draw();
}

void clf_cli_status_flush_stdout(void) {
  const int shown = st.on && clf_cli_status_line && (st.step[0] || st.build[0]);
  if (shown) fprintf(stderr, "\r\033[K");
  fflush(stdout);
  if (shown) draw();
}
