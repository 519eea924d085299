// The commands' view of the command line: each command declares its options through Options,
// which compiler/Driver.cpp implements over CLI11. CLI11 is header-only and costs every file that
// includes it seconds of compile time, so Driver.cpp is the one file that does.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace tn::cli {

// One declared option; its modifiers return it, for chaining.
class Option {
 public:
  // The kinds of value an option can store into.
  enum class Kind { String, OptionalString, Strings, Unsigned, Int, Int64, UInt64, Flag };

  Option(CLI::Option* option, Kind kind) : option_(option), kind_(kind) {}
  Option& required();
  // Shows the value it holds before parsing in --help.
  Option& showDefault();
  // Refuses values outside [lo, hi] (numeric options), in the option's own type.
  Option& range(int64_t lo, int64_t hi);
  // Refuses values other than these (string options).
  Option& oneOf(std::initializer_list<const char*> values);
  // Refuses to be given together with `other`.
  Option& excludes(const Option& other);

 private:
  CLI::Option* option_;
  Kind kind_;
};

// The options of one subcommand. `names` as CLI11 spells them: "-o,--output", or "FILE" for a
// positional argument. Values go into `into` when the command line is parsed.
class Options {
 public:
  explicit Options(CLI::App& app) : app_(app) {}
  Option option(const std::string& names, std::string& into, const std::string& help);
  // Given, even if empty: nullopt when absent.
  Option option(const std::string& names, std::optional<std::string>& into, const std::string& help);
  // Repeatable.
  Option option(const std::string& names, std::vector<std::string>& into, const std::string& help);
  Option option(const std::string& names, unsigned& into, const std::string& help);
  Option option(const std::string& names, int& into, const std::string& help);
  Option option(const std::string& names, int64_t& into, const std::string& help);
  Option option(const std::string& names, uint64_t& into, const std::string& help);
  Option flag(const std::string& names, bool& into, const std::string& help);

 private:
  CLI::App& app_;
};

}  // namespace tn::cli
