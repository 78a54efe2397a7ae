/* ops_patch.c - (being written) */
#include "internal.h"
