// gemm_clblast.cc - (being written)
#include "internal.h"
