#include "kernels/Library.h"

namespace tn::kernels::lib {

void addRope(std::vector<Template>&) {}

}  // namespace tn::kernels::lib
