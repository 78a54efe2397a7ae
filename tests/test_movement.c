/* test_movement.c - (being written) */
#include "harness.h"
static Suite *suite(void) { return suite_create("movement"); }
int main(void) { return th_run(suite()); }
