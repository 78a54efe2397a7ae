/* ops_dense.c - (being written) */
#include "internal.h"
