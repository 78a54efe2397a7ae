/* ops_movement.c - (being written) */
#include "internal.h"
