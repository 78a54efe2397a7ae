/* ops_embed.c - (being written) */
#include "internal.h"
