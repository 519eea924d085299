// Feeds truncated and byte-mutated versions of every .tir file in the repository through the
// parser, verifier, printer and PTX emitter: the only acceptable outcomes are success or
// diagnostics. A crash, hang or sanitizer report fails the suite.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "compiler/Compile.h"
#include "ir/Parser.h"
#include "ir/Printer.h"
#include "ir/Verifier.h"

namespace {

std::vector<std::filesystem::path> tirFiles() {
  std::vector<std::filesystem::path> out;
  for (const char* dir : {"examples", "lit-tests"}) {
    std::filesystem::path root = std::filesystem::path(TRUENOC_SOURCE_DIR) / dir;
    for (const auto& e : std::filesystem::recursive_directory_iterator(root))
      if (e.is_regular_file() && e.path().extension() == ".tir") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs the whole front end on `text`; returns false if an input was rejected without a diagnostic.
bool survives(const std::string& text) {
  using namespace tn;
  ir::Diagnostics diags;
  auto mod = ir::parseModule(text, "fuzz.tir", diags);
  if (!mod) return diags.hasErrors();
  ir::Diagnostics vd;
  if (!ir::verify(*mod, vd)) return vd.hasErrors();
  std::string printed = ir::print(*mod);
  ir::Diagnostics rd;
  auto again = ir::parseModule(printed, "printed.tir", rd);
  if (!again || ir::print(*again) != printed) return false;
  ir::Diagnostics ed;
  compile::Options o;
  o.level = compile::Level::None;
  auto ptx = compile::compile(*mod, mod->target, o, ed).ptx;
  return ptx.has_value() || ed.hasErrors();
}

}  // namespace

TEST_CASE("truncated and mutated .tir inputs give diagnostics, never crashes") {
  auto files = tirFiles();
  REQUIRE(files.size() >= 3);
  std::random_device rd;
  const unsigned seed = rd();
  INFO("seed = " << seed);
  std::mt19937 rng(seed);
  const std::string alphabet = "%^@:,=(){}[]->.0123456789abcdefxyz_ \n\t/";
  size_t variants = 0;
  for (const auto& path : files) {
    const std::string text = slurp(path);
    INFO("file = " << path.string());
    size_t step = std::max<size_t>(1, text.size() / 400);
    for (size_t cut = 0; cut < text.size(); cut += step) {
      INFO("truncated at byte " << cut);
      CHECK(survives(text.substr(0, cut)));
      ++variants;
    }
    for (int i = 0; i < 200 && !text.empty(); ++i) {
      std::string m = text;
      size_t pos = rng() % m.size();
      switch (rng() % 4) {
        case 0: m[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: m.erase(pos, 1); break;
        case 2: m.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        default: m[pos] = static_cast<char>(rng() % 256); break;
      }
      INFO("mutation " << i << " at byte " << pos);
      CHECK(survives(m));
      ++variants;
    }
  }
  MESSAGE("robustness: " << variants << " variants of " << files.size() << " files");
}
