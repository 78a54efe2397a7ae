/* test_attention.c - (being written) */
#include "harness.h"
static Suite *suite(void) { return suite_create("attention"); }
int main(void) { return th_run(suite()); }
