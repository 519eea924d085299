// TEMPORARY placeholder while the verifier is written.
#include "ir/Verifier.h"
namespace tn::ir {
bool verifyKernel(const Module&, const Kernel&, Diagnostics& d) { return !d.hasErrors(); }
bool verify(const Module& m, Diagnostics& d) { for (auto& k : m.kernels) verifyKernel(m, k, d); return !d.hasErrors(); }
}
