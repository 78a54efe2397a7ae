/* chat_prompt.c - the input side of `clformer chat`: on a terminal a line
 * editor (libedit: editing keys, history kept in the cache directory, a
 * bracketed paste of several lines taken as one message), elsewhere lines
 * of stdin; both join a `"""` ... `"""` block into one message.  Ctrl-C
 * sets a flag that the streaming reply checks (clf_cli_chat_interrupted). */
#include "cli.h"

#include <errno.h>
#include <histedit.h>
#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <wchar.h>

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
  (void)sig;
  interrupted = 1;
}

int clf_cli_chat_interrupted(void) { return interrupted != 0; }
void clf_cli_chat_clear_interrupt(void) { interrupted = 0; }

/* A growing byte buffer. */
typedef struct bytes {
  char *v;
  size_t n, cap, pos; /* pos: the next byte to hand out, when a queue */
} bytes;

static int bytes_add(bytes *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = (b->n + n + 1) * 2;
    char *v = realloc(b->v, cap);
    if (!v) return 0;
    b->v = v, b->cap = cap;
  }
  memcpy(b->v + b->n, s, n);
  b->n += n;
  b->v[b->n] = '\0';
  return 1;
}

struct clf_cli_prompt {
  EditLine *el; /* NULL: stdin is read line by line */
  History *hist;
  char history_file[4096];
  const char *prompt;
  bytes ahead;    /* bytes read past an escape that began no paste, for libedit */
  bytes paste;    /* a paste of several lines: it ends the line being edited */
  int have_paste;
  int last_intr_empty; /* the last line ended by Ctrl-C was empty */
  mbstate_t mb;
  struct sigaction old_int;
  char *line; /* getline's buffer */
  size_t cap;
};

static const char paste_start[] = "\033[200~", paste_end[] = "\033[201~";

/* One byte from the terminal: 1, 0 at its end, -1 on Ctrl-C or an error. */
static int raw_byte(unsigned char *c) {
  for (;;) {
    if (interrupted) return errno = EINTR, -1;
    const ssize_t n = read(STDIN_FILENO, c, 1);
    if (n == 1) return 1;
    if (n == 0) return 0;
    if (errno != EINTR) return -1;
  }
}

/* The paste after its start marker, up to its end marker, "\r\n" and "\r"
 * as "\n" and the final line ends dropped; 1, or what raw_byte said. */
static int read_paste(clf_cli_prompt *p) {
  const size_t m = sizeof(paste_end) - 1;
  unsigned char c;
  int r;
  p->paste.n = 0;
  bytes_add(&p->paste, "", 0);
  while ((r = raw_byte(&c)) == 1) {
    const char ch = c == '\r' ? '\n' : (char)c;
    if (c == '\n' && p->paste.n && p->paste.v[p->paste.n - 1] == '\n' && p->paste.pos) { /* the \n of \r\n */
      p->paste.pos = 0;
      continue;
    }
    p->paste.pos = c == '\r';
    if (!bytes_add(&p->paste, &ch, 1)) return -1;
    if (p->paste.n >= m && !memcmp(p->paste.v + p->paste.n - m, paste_end, m)) {
      p->paste.n -= m;
      while (p->paste.n && p->paste.v[p->paste.n - 1] == '\n') p->paste.n--;
      p->paste.v[p->paste.n] = '\0';
      p->paste.pos = 0;
      return 1;
    }
  }
  return r;
}

/* The next byte for libedit: those held back first, then the terminal's; a
 * bracketed paste of one line is held back whole, one of several lines is
 * kept in p->paste and ends the line (a '\n'). */
static int next_byte(clf_cli_prompt *p, unsigned char *c) {
  if (p->ahead.pos < p->ahead.n) return *c = (unsigned char)p->ahead.v[p->ahead.pos++], 1;
  p->ahead.n = p->ahead.pos = 0;
  int r = raw_byte(c);
  if (r != 1 || *c != 0x1b) return r;
  size_t k = 1;
  unsigned char d;
  while (paste_start[k] && (r = raw_byte(&d)) == 1) {
    bytes_add(&p->ahead, (const char *)&d, 1);
    if ((char)d != paste_start[k++]) return 1; /* an ESC of another key: its bytes follow */
  }
  if (r != 1) return r;
  p->ahead.n = 0;
  if ((r = read_paste(p)) != 1) return r;
  if (!strchr(p->paste.v, '\n')) return bytes_add(&p->ahead, p->paste.v, p->paste.n), next_byte(p, c);
  p->have_paste = 1;
  return *c = '\n', 1;
}

/* libedit's EL_GETCFN: a character decoded from the locale's bytes. */
static int get_char(EditLine *el, wchar_t *wc) {
  clf_cli_prompt *p;
  el_get(el, EL_CLIENTDATA, &p);
  for (;;) {
    unsigned char c;
    const int r = next_byte(p, &c);
    if (r != 1) return r;
    const char ch = (char)c;
    const size_t n = mbrtowc(wc, &ch, 1, &p->mb);
    if (n == (size_t)-2) continue;
    if (n == (size_t)-1) memset(&p->mb, 0, sizeof p->mb), *wc = c;
    return 1;
  }
}

static char *get_prompt(EditLine *el) {
  clf_cli_prompt *p;
  el_get(el, EL_CLIENTDATA, &p);
  return (char *)p->prompt;
}

clf_cli_prompt *clf_cli_prompt_open(int terminal, const char *cache_dir) {
  clf_cli_prompt *p = calloc(1, sizeof *p);
  if (!p || !terminal) return p;
  setlocale(LC_CTYPE, ""); /* libedit reads and shows the terminal's UTF-8 */
  p->el = el_init("clformer", stdin, stdout, stderr);
  p->hist = history_init();
  if (!p->el || !p->hist) {
    clf_cli_prompt_close(p);
    return NULL;
  }
  HistEvent ev;
  history(p->hist, &ev, H_SETSIZE, 1000);
  history(p->hist, &ev, H_SETUNIQUE, 1);
  if (cache_dir) {
    mkdir(cache_dir, 0700); /* usually there already: the kernel cache's */
    snprintf(p->history_file, sizeof p->history_file, "%s/chat_history", cache_dir);
    history(p->hist, &ev, H_LOAD, p->history_file);
  }
  el_set(p->el, EL_EDITOR, "emacs");
  el_set(p->el, EL_HIST, history, p->hist);
  el_set(p->el, EL_CLIENTDATA, p);
  el_set(p->el, EL_PROMPT, get_prompt);
  el_set(p->el, EL_GETCFN, get_char);
  /* Ctrl-C interrupts a read (no SA_RESTART) and a reply. */
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &p->old_int);
  return p;
}

void clf_cli_prompt_close(clf_cli_prompt *p) {
  if (!p) return;
  HistEvent ev;
  if (p->hist && p->history_file[0]) history(p->hist, &ev, H_SAVE, p->history_file);
  if (p->el) sigaction(SIGINT, &p->old_int, NULL);
  if (p->el) el_end(p->el);
  if (p->hist) history_end(p->hist);
  free(p->ahead.v);
  free(p->paste.v);
  free(p->line);
  free(p);
}

/* One line without its end (malloc'd), NULL at the end of the input, or
 * NULL with *intr set after Ctrl-C (*empty: the line was empty). */
static char *get_line(clf_cli_prompt *p, const char *prompt, int *intr, int *empty, int *pasted) {
  *intr = *empty = *pasted = 0;
  if (!p->el) {
    ssize_t n = getline(&p->line, &p->cap, stdin);
    if (n < 0) return NULL;
    while (n > 0 && (p->line[n - 1] == '\n' || p->line[n - 1] == '\r')) p->line[--n] = '\0';
    if (memchr(p->line, '\0', (size_t)n)) { /* a C string would end there: refused, as the server refuses it */
      fprintf(stderr, "clformer chat: the message contains a NUL character; it was not sent\n");
      return strdup("");
    }
    return strdup(p->line);
  }
  p->prompt = prompt;
  p->have_paste = 0;
  memset(&p->mb, 0, sizeof p->mb);
  fputs("\033[?2004h", stdout); /* bracketed paste on while editing */
  fflush(stdout);
  int count = 0;
  const char *s = el_gets(p->el, &count);
  fputs("\033[?2004l", stdout);
  fflush(stdout);
  if (interrupted) {
    const LineInfo *li = el_line(p->el);
    *empty = li->lastchar == li->buffer;
    interrupted = 0;
    *intr = 1;
    return NULL;
  }
  if (!s || count <= 0) return NULL;
  bytes b = {0};
  size_t n = strlen(s);
  while (n && (s[n - 1] == '\n' || s[n - 1] == '\r')) n--;
  bytes_add(&b, s, n);
  if (p->have_paste) {
    *pasted = 1;
    bytes_add(&b, p->paste.v, p->paste.n);
    printf("%s\n", p->paste.v); /* the paste, seen as it is sent */
    fflush(stdout);
  } else if (n) {
    HistEvent ev;
    history(p->hist, &ev, H_ENTER, b.v);
  }
  return b.v;
}

static int ends_with_quotes(const char *s) {
  const size_t n = strlen(s);
  return n >= 3 && !strcmp(s + n - 3, "\"\"\"");
}

char *clf_cli_prompt_read(clf_cli_prompt *p, int *literal) {
  for (;;) {
    int intr, empty, pasted;
    char *line = get_line(p, "> ", &intr, &empty, &pasted);
    *literal = pasted;
    if (intr) {
      fputs("\n", stdout);
      if (empty && p->last_intr_empty) return NULL;
      if (empty) fputs("(Ctrl-C again or Ctrl-D leaves; /help lists the commands)\n", stdout);
      p->last_intr_empty = empty;
      continue;
    }
    p->last_intr_empty = 0;
    if (!line) {
      if (p->el) fputs("\n", stdout); /* the shell's prompt on a line of its own */
      return NULL;
    }
    if (pasted || strncmp(line, "\"\"\"", 3)) return line;
    /* """ ... """: the lines between, one message */
    *literal = 1;
    bytes b = {0};
    const char *rest = line + 3;
    int done = strlen(rest) >= 3 && ends_with_quotes(rest), lines = rest[0] != '\0';
    bytes_add(&b, rest, strlen(rest) - (done ? 3 : 0));
    free(line);
    while (!done) {
      line = get_line(p, "... ", &intr, &empty, &pasted);
      if (intr) {
        fputs("\n", stdout);
        free(b.v), b.v = NULL; /* the block is dropped */
        break;
      }
      if (!line) break; /* the end of the input sends what came */
      done = ends_with_quotes(line);
      if (done) line[strlen(line) - 3] = '\0';
      if (lines++) bytes_add(&b, "\n", 1);
      bytes_add(&b, line, strlen(line));
      free(line);
    }
    if (!b.v) continue;
    return b.v;
  }
}
