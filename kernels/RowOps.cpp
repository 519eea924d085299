#include "kernels/Library.h"

namespace tn::kernels::lib {

void addRowOps(std::vector<Template>&) {}

}  // namespace tn::kernels::lib
