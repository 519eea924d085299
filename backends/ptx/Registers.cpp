#include "backends/ptx/Registers.h"

namespace tn::ptx {

RegClass regClassOf(ir::Type t) {
  switch (t.scalar) {
    case ir::Scalar::Pred: return RegClass::Pred;
    case ir::Scalar::F32: return RegClass::F32;
    case ir::Scalar::F64: return RegClass::F64;
    default: break;
  }
  unsigned bits = t.bits();
  return bits <= 16 ? RegClass::B16 : bits == 32 ? RegClass::B32 : RegClass::B64;
}

const passes::RegisterFile& registerFile() {
  static const passes::RegisterFile file = {
      kRegClasses,
      [](ir::Type t) { return static_cast<uint8_t>(regClassOf(t)); },
      {"pred", "b16", "b32", "f32", "b64", "f64"},
      {"%p", "%rs", "%r", "%f", "%rd", "%fd"},
      {0, 1, 1, 1, 2, 2},
  };
  return file;
}

std::string_view regClassName(RegClass c) { return registerFile().names[static_cast<size_t>(c)]; }
std::string_view regClassPrefix(RegClass c) { return registerFile().prefixes[static_cast<size_t>(c)]; }

}  // namespace tn::ptx
