/* test_dense.c - (being written) */
#include "harness.h"
static Suite *suite(void) { return suite_create("dense"); }
int main(void) { return th_run(suite()); }
