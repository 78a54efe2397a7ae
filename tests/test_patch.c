/* test_patch.c - (being written) */
#include "harness.h"
static Suite *suite(void) { return suite_create("patch"); }
int main(void) { return th_run(suite()); }
