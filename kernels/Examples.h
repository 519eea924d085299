// The kernels of examples/vadd.tir and examples/row_sum.tir, written with the IR builder.
// test/builder_test.cpp checks that each module prints exactly as its .tir file.
#pragma once

#include "ir/IR.h"

namespace tn::kernels {

// vadd(a, b, c, n): c[i] = a[i] + b[i] for i < n; one thread per element (sm_80, PTX 7.0).
ir::Module buildVaddModule();
// row_sum(x, y, cols): y[row] = sum of row `row` of x; one block of 256 threads per row.
ir::Module buildRowSumModule();

}  // namespace tn::kernels
