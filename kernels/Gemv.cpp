#include "kernels/Library.h"

namespace tn::kernels::lib {

void addGemv(std::vector<Template>&) {}

}  // namespace tn::kernels::lib
