// .tir text -> parse -> verify -> the -O2 pipeline -> PTX, through the compile spine as `truenoc
// build` compiles each kernel, for the target the text names (sm_80 when it names none).
// Beyond the sanitizers it checks what no input may break: a module that verifies still verifies
// after the pipeline, and the compiled module prints as text the parser reads back into the same
// module (bundles store that text and the simulated driver runs it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "compiler/Compile.h"
#include "fuzz/Oracle.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tn::ir::Diagnostics diags;
  std::optional<tn::ir::Module> m = tn::ir::parseModule(text, "fuzz.tir", diags);
  if (!m || !tn::ir::verify(*m, diags)) return 0;
  (void)tn::compile::compile(*m, m->target, tn::compile::Options{}, diags);
  tn::ir::Diagnostics post;
  if (!tn::ir::verify(*m, post)) tn::fuzz::broken("fuzz_tir: a verified module fails verification after the -O2 pipeline", post);
  std::string printed = tn::ir::print(*m);
  tn::ir::Diagnostics reparse;
  std::optional<tn::ir::Module> back = tn::ir::parseModule(printed, "compiled.tir", reparse);
  if (!back || !tn::ir::verify(*back, reparse))
    tn::fuzz::broken("fuzz_tir: the compiled module's text does not parse and verify:\n" + printed, reparse);
  if (tn::ir::print(*back) != printed)
    tn::fuzz::broken("fuzz_tir: the compiled module's text prints differently once parsed:\n" + printed, reparse);
  return 0;
}
