// TEMPORARY placeholder while the emitter is written.
#include "backends/Ptx.h"
namespace tn::ptx {
std::optional<std::string> emit(const ir::Module&, const EmitOptions&, ir::Diagnostics&) { return std::nullopt; }
}
