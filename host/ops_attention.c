/* ops_attention.c - (being written) */
#include "internal.h"
