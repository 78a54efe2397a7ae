/* timing.c - the clock and the sort of run times that the tools share
 * (cmd_model.c, probe_measure.c, icd.c): the library's own clock is
 * internal to it, and the tools use the public header only. */
#include <stdlib.h>
#include <time.h>

#include "cli.h"

double clf_cli_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

void clf_cli_sort_times(double *t, size_t n) { qsort(t, n, sizeof(double), cmp_double); }
