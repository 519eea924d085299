// PTX's register classes: what register-liveness assigns and the emitter declares. 8- and 16-bit
// integers, f16 and bf16 live in .b16; shared/local pointers in .b32; the other pointers in .b64.
// Predicates are a file of their own; b64 and f64 registers take two 32-bit hardware registers.
#pragma once

#include <cstdint>
#include <string_view>

#include "ir/Type.h"
#include "passes/RegisterLiveness.h"

namespace tn::ptx {

// In the order the emitter writes their .reg declarations.
enum class RegClass : uint8_t { Pred, B16, B32, F32, B64, F64 };
constexpr size_t kRegClasses = 6;

RegClass regClassOf(ir::Type t);             // the class of one lane of t
std::string_view regClassName(RegClass c);   // "pred", "b16", "b32", "f32", "b64", "f64": also the mov type
std::string_view regClassPrefix(RegClass c); // "%p", "%rs", "%r", "%f", "%rd", "%fd"

// The same classes as register-liveness reads them.
const passes::RegisterFile& registerFile();

}  // namespace tn::ptx
