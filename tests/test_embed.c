/* test_embed.c - (being written) */
#include "harness.h"
static Suite *suite(void) { return suite_create("embed"); }
int main(void) { return th_run(suite()); }
