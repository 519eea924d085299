// truenoc inspect BUNDLE [--json] [--extract KERNEL:TARGET:KIND]: what a .tnb bundle holds, or one
// of its payloads. The bundle is validated completely (every payload decompressed and
// checksummed) before anything is printed.
#include <cstdio>
#include <map>
#include <memory>

#include "backends/bundle/Bundle.h"
#include "compiler/Command.h"

namespace tn::cli {

namespace {

std::string ratio(uint64_t raw, uint64_t compressed) {
  if (compressed == 0) return "0.00";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(raw) / static_cast<double>(compressed));
  return buf;
}

std::string signature(const std::string& name, const std::vector<bundle::Param>& params) {
  std::string s = name + "(";
  for (size_t i = 0; i < params.size(); ++i) s += (i ? ", " : "") + params[i].name + ": " + params[i].type.name();
  return s + ")";
}

// The targets whose code a kernel's own launch rule serves (all but its variants'), or a variant's.
std::string targetsOf(const bundle::Manifest& m, const bundle::KernelInfo& k, const bundle::Variant* v) {
  std::string s;
  for (const std::string& name : m.targetNames(v ? v->targets : k.ownTargets())) s += (s.empty() ? "" : " ") + name;
  return s;
}

std::string padRight(std::string s, size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  return s;
}

// Whether an ELF64 cubin has a line table (`.debug_line` or `.nv_debug_line_sass`, which ptxas
// writes for PTX with .loc directives under -lineinfo). A cubin it cannot read has none.
bool hasLineInfo(std::string_view elf) {
  auto read = [&](size_t at, size_t bytes) -> std::optional<uint64_t> {
    if (at > elf.size() || bytes > elf.size() - at) return std::nullopt;
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v |= uint64_t(static_cast<unsigned char>(elf[at + i])) << (8 * i);
    return v;
  };
  if (elf.size() < 64 || elf.substr(0, 4) != "\x7f" "ELF" || elf[4] != 2 || elf[5] != 1) return false;
  auto shoff = read(0x28, 8), shentsize = read(0x3A, 2), shnum = read(0x3C, 2), shstrndx = read(0x3E, 2);
  if (!shoff || !shentsize || !shnum || !shstrndx || *shentsize < 64 || *shstrndx >= *shnum) return false;
  auto header = [&](uint64_t i) { return *shoff + i * *shentsize; };
  auto strtab = read(header(*shstrndx) + 0x18, 8), strsize = read(header(*shstrndx) + 0x20, 8);
  if (!strtab || !strsize || *strtab > elf.size() || *strsize > elf.size() - *strtab) return false;
  std::string_view names = elf.substr(*strtab, *strsize);
  for (uint64_t i = 0; i < *shnum; ++i) {
    auto name = read(header(i), 4);
    if (!name || *name >= names.size()) continue;
    std::string_view n = names.substr(*name);
    n = n.substr(0, n.find('\0'));
    if (n == ".debug_line" || n == ".nv_debug_line_sass") return true;
  }
  return false;
}

// What several entries share: a module (format 6) is one payload described by the cubin entries
// of all its kernels; its users and its line table are worked out once per payload.
class Payloads {
 public:
  explicit Payloads(const bundle::Reader& r) : r_(r) {
    for (const bundle::KernelInfo& k : r.manifest().kernels)
      for (const bundle::Entry& e : k.entries) {
        auto [it, fresh] = users_.try_emplace(e.offset, 0);
        if (fresh) order_.push_back(&e);
        ++it->second;
      }
  }
  // How many entries describe e's payload: 1, or the number of kernels in its module.
  uint32_t users(const bundle::Entry& e) const { return users_.at(e.offset); }
  bool shared(const bundle::Entry& e) const { return users(e) > 1; }
  // One entry per shared payload, in payload order.
  std::vector<const bundle::Entry*> modules() const {
    std::vector<const bundle::Entry*> out;
    for (const bundle::Entry* e : order_)
      if (shared(*e)) out.push_back(e);
    return out;
  }
  bool lineInfo(const bundle::Entry& e) {
    auto [it, fresh] = lineInfo_.try_emplace(e.offset, false);
    if (fresh) {
      auto bytes = r_.payload(e);
      it->second = bytes && hasLineInfo(*bytes);
    }
    return it->second;
  }

 private:
  const bundle::Reader& r_;
  std::map<uint64_t, uint32_t> users_;
  std::vector<const bundle::Entry*> order_;
  std::map<uint64_t, bool> lineInfo_;
};

// The targets whose cubin of kernel k carries a line table, "" when none does.
std::string lineInfoTargets(const bundle::Reader& r, Payloads& p, const bundle::KernelInfo& k) {
  std::string out;
  for (const bundle::Entry& e : k.entries) {
    if (e.kind != bundle::PayloadKind::Cubin) continue;
    if (p.lineInfo(e)) out += (out.empty() ? "" : ", ") + r.manifest().targets[e.target].name();
  }
  return out;
}

std::string textReport(const bundle::Reader& r) {
  const bundle::Manifest& m = r.manifest();
  const bundle::BundleStats& st = r.stats();
  std::string out;
  out += "bundle " + m.name + " (format " + std::to_string(r.formatVersion()) + ", " + r.producer() + ")\n";
  out += "targets: ";
  for (size_t i = 0; i < m.targets.size(); ++i) out += (i ? " " : "") + m.targets[i].name();
  out += "\nptx fallback: " + std::string(m.ptxFallback ? "yes" : "no") + "\n";
  out += "ir: " + std::string(m.ir ? "yes" : "no") + "\n";
  out += "ptxas: " + (m.ptxasVersion.empty() ? std::string("none") : m.ptxasVersion) + "\n";
  out += "size: " + std::to_string(st.fileBytes) + " bytes (manifest " + std::to_string(st.manifestBytes) + ", payloads " +
         std::to_string(st.payloadSectionBytes) + " compressed from " + std::to_string(st.rawPayloadBytes) + ", ratio " +
         ratio(st.rawPayloadBytes, st.payloadSectionBytes) + ")\n";
  Payloads payloads(r);
  for (const bundle::Entry* e : payloads.modules())
    out += "module: " + m.targets[e->target].name() + " cubin of " + std::to_string(payloads.users(*e)) + " kernels, " +
           std::to_string(e->rawSize) + " bytes (compressed " + std::to_string(e->compressedSize) + ")\n";
  out += "kernels: " + std::to_string(m.kernels.size()) + "\n";
  for (const bundle::KernelInfo& k : m.kernels) {
    out += "\nkernel " + signature(k.name, k.params) + "\n";
    // A kernel with variants (format 7): each launch rule with the targets it serves, and each
    // variant's whole signature (it differs from the kernel's in tmap parameters or alignments).
    const std::string own = k.variants.empty() ? std::string() : " (" + targetsOf(m, k, nullptr) + ")";
    out += "  launch" + own + ": " + bundle::describe(k.launch) + "\n";
    std::string extents;
    for (const bundle::Param& p : k.params)
      if (p.extent) extents += (extents.empty() ? "" : ", ") + p.name + " [" + p.extent->text() + "]";
    if (!extents.empty()) out += "  extents: " + extents + "\n";
    for (const bundle::TensorMapRule& t : k.launch.tensorMaps) out += "  tensor map" + own + ": " + bundle::describe(t) + "\n";
    for (const bundle::Variant& v : k.variants) {
      const std::string at = " (" + targetsOf(m, k, &v) + ")";
      out += "  variant" + at + ": " + signature(k.name, v.params) + "\n";
      out += "  launch" + at + ": " + bundle::describe(v.launch) + "\n";
      for (const bundle::TensorMapRule& t : v.launch.tensorMaps) out += "  tensor map" + at + ": " + bundle::describe(t) + "\n";
    }
    out += "  target  kind   bytes     compressed  regs  spill-st  spill-ld  smem    stack  cmem\n";
    for (const bundle::Entry& e : k.entries) {
      const bundle::Resources& res = e.resources;
      bool cubin = e.kind == bundle::PayloadKind::Cubin;
      auto n = [&](uint32_t v) { return cubin ? std::to_string(v) : std::string("-"); };
      // A module's sizes are its own, listed above, not this kernel's.
      const bool shared = payloads.shared(e);
      std::string line = "  " + padRight(m.targets[e.target].name(), 8) + padRight(std::string(bundle::payloadKindName(e.kind)), 7) +
                         padRight(shared ? "module" : std::to_string(e.rawSize), 10) +
                         padRight(shared ? "-" : std::to_string(e.compressedSize), 12) +
                         padRight(n(res.registers), 6) + padRight(n(res.spillStores), 10) + padRight(n(res.spillLoads), 10) +
                         padRight(n(res.sharedBytes), 8) + padRight(n(res.stackBytes), 7) + n(res.constBytes);
      out += line + "\n";
    }
    if (std::string lines = lineInfoTargets(r, payloads, k); !lines.empty()) out += "  line info: " + lines + "\n";
  }
  return out;
}

std::string jsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;  // bundle strings are printable ASCII (the reader checks)
  }
  return out + "\"";
}

std::string num(uint64_t v) { return std::to_string(v); }

std::string jsonParams(const std::vector<bundle::Param>& params) {
  std::string out = "[";
  for (size_t i = 0; i < params.size(); ++i) {
    const bundle::Param& p = params[i];
    out += (i ? ", " : "") + std::string("{\"name\": ") + jsonString(p.name) + ", \"type\": " + jsonString(p.type.name()) +
           ", \"align\": " + num(p.align);
    if (p.type.isPointer()) {
      out += ", \"access\": " + jsonString(bundle::accessName(p.access));
      if (p.element) out += ", \"element\": " + jsonString(bundle::elementName(*p.element));
      if (p.extent) out += ", \"extent\": " + jsonString(p.extent->text());
    }
    out += "}";
  }
  return out + "]";
}

std::string jsonLaunch(const bundle::LaunchRule& launch) {
  std::string out = "{\"block\": [";
  for (size_t i = 0; i < launch.block.size(); ++i) out += (i ? ", " : "") + num(launch.block[i]);
  out += "], \"grid\": [";
  for (size_t i = 0; i < launch.grid.size(); ++i) out += (i ? ", " : "") + jsonString(launch.grid[i].text());
  out += "], \"dynamic_shared\": " + jsonString(launch.dynamicShared.text());
  if (!launch.tensorMaps.empty()) {
    out += ", \"tensor_maps\": [";
    for (size_t i = 0; i < launch.tensorMaps.size(); ++i) {
      const bundle::TensorMapRule& t = launch.tensorMaps[i];
      out += (i ? ", " : "") + std::string("{\"param\": ") + jsonString(t.param) + ", \"source\": " + jsonString(t.source) +
             ", \"element\": " + jsonString(bundle::elementName(t.element)) + ", \"dims\": [";
      for (size_t d = 0; d < t.dims.size(); ++d) out += (d ? ", " : "") + jsonString(t.dims[d].text());
      out += "]";
      for (size_t d = 0; d < t.strides.size(); ++d)
        out += ", \"" + std::string(bundle::tensorMapStrideName(d)) + "\": " + jsonString(t.strides[d].text());
      out += ", \"box\": [";
      for (size_t d = 0; d < t.box.size(); ++d) out += (d ? ", " : "") + num(t.box[d]);
      out += "], \"swizzle\": " + num(t.swizzle) + "}";
    }
    out += "]";
  }
  return out + "}";
}

std::string jsonReport(const bundle::Reader& r) {
  const bundle::Manifest& m = r.manifest();
  const bundle::BundleStats& st = r.stats();
  std::string out = "{\n";
  out += "  \"name\": " + jsonString(m.name) + ",\n";
  out += "  \"format_version\": " + num(r.formatVersion()) + ",\n";
  out += "  \"producer\": " + jsonString(r.producer()) + ",\n";
  out += "  \"targets\": [";
  for (size_t i = 0; i < m.targets.size(); ++i) out += (i ? ", " : "") + jsonString(m.targets[i].name());
  out += "],\n  \"ptx_fallback\": " + std::string(m.ptxFallback ? "true" : "false") + ",\n";
  out += "  \"ir\": " + std::string(m.ir ? "true" : "false") + ",\n";
  out += "  \"ptxas_version\": " + jsonString(m.ptxasVersion) + ",\n";
  out += "  \"size\": {\"file\": " + num(st.fileBytes) + ", \"manifest\": " + num(st.manifestBytes) + ", \"payloads\": " +
         num(st.payloadSectionBytes) + ", \"raw_payloads\": " + num(st.rawPayloadBytes) +
         ", \"compression_ratio\": " + ratio(st.rawPayloadBytes, st.payloadSectionBytes) + "},\n";
  Payloads payloads(r);
  out += "  \"modules\": [";
  std::vector<const bundle::Entry*> modules = payloads.modules();
  for (size_t i = 0; i < modules.size(); ++i)
    out += (i ? ", " : "") + std::string("{\"target\": ") + jsonString(m.targets[modules[i]->target].name()) +
           ", \"kernels\": " + num(payloads.users(*modules[i])) + ", \"bytes\": " + num(modules[i]->rawSize) +
           ", \"compressed_bytes\": " + num(modules[i]->compressedSize) + "}";
  out += "],\n";
  out += "  \"kernels\": [";
  for (size_t ki = 0; ki < m.kernels.size(); ++ki) {
    const bundle::KernelInfo& k = m.kernels[ki];
    out += ki ? ",\n" : "\n";
    out += "    {\n      \"name\": " + jsonString(k.name) + ",\n      \"params\": " + jsonParams(k.params) +
           ",\n      \"launch\": " + jsonLaunch(k.launch);
    if (!k.variants.empty()) {
      out += ",\n      \"variants\": [";
      for (size_t i = 0; i < k.variants.size(); ++i) {
        const bundle::Variant& v = k.variants[i];
        out += (i ? ", " : "") + std::string("{\"targets\": [");
        size_t n = 0;
        for (const std::string& name : m.targetNames(v.targets)) out += (n++ ? ", " : "") + jsonString(name);
        out += "], \"params\": " + jsonParams(v.params) + ", \"launch\": " + jsonLaunch(v.launch) + "}";
      }
      out += "]";
    }
    out += ",\n      \"entries\": [";
    for (size_t i = 0; i < k.entries.size(); ++i) {
      const bundle::Entry& e = k.entries[i];
      const bundle::Resources& res = e.resources;
      out += i ? ",\n" : "\n";
      out += "        {\"target\": " + jsonString(m.targets[e.target].name()) + ", \"kind\": " + jsonString(bundle::payloadKindName(e.kind)) +
             ", \"bytes\": " + num(e.rawSize) + ", \"compressed_bytes\": " + num(e.compressedSize);
      if (e.kind == bundle::PayloadKind::Cubin)
        out += ", \"registers\": " + num(res.registers) + ", \"barriers\": " + num(res.barriers) + ", \"shared_bytes\": " +
               num(res.sharedBytes) + ", \"const_bytes\": " + num(res.constBytes) + ", \"stack_bytes\": " + num(res.stackBytes) +
               ", \"spill_stores\": " + num(res.spillStores) + ", \"spill_loads\": " + num(res.spillLoads) +
               ", \"line_info\": " + (payloads.lineInfo(e) ? "true" : "false") +
               ", \"module\": " + (payloads.shared(e) ? "true" : "false");
      out += "}";
    }
    out += k.entries.empty() ? "]\n    }" : "\n      ]\n    }";
  }
  out += m.kernels.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return out;
}

// --extract KERNEL:TARGET:KIND writes that payload, uncompressed, to standard output.
int extract(const bundle::Reader& r, const std::string& what) {
  size_t c1 = what.find(':'), c2 = c1 == std::string::npos ? c1 : what.find(':', c1 + 1);
  std::optional<bundle::PayloadKind> pk = c2 == std::string::npos ? std::nullopt : bundle::payloadKindNamed(what.substr(c2 + 1));
  if (!pk) {
    printErrorf("--extract wants KERNEL:TARGET:KIND (KIND is cubin, ptx or ir), not '%s'", what.c_str());
    return kUsageError;
  }
  std::string kernel = what.substr(0, c1), target = what.substr(c1 + 1, c2 - c1 - 1), kind = what.substr(c2 + 1);
  const bundle::KernelInfo* k = r.manifest().find(kernel);
  std::optional<bundle::Target> parsed = bundle::Target::parse(target);
  int t = parsed ? r.manifest().targetIndex(*parsed) : -1;
  const bundle::Entry* e = k && t >= 0 ? k->find(static_cast<uint32_t>(t), *pk) : nullptr;
  if (!e) {
    printErrorf("the bundle has no %s payload of kernel '%s' for '%s'", kind.c_str(), kernel.c_str(), target.c_str());
    return kInputError;
  }
  auto bytes = r.payload(*e);
  if (!bytes) {
    printErrorf("%s", bytes.error().message.c_str());
    return kInputError;
  }
  return writeOutput("-", *bytes) ? kOk : kInputError;
}

}  // namespace

std::optional<bundle::Reader> openBundle(const std::string& path, std::string& bytes) {
  auto data = readInput(path, io::InputKind::Bundle);
  if (!data) return std::nullopt;
  bytes = std::move(*data);
  std::string name = path == "-" ? "<stdin>" : path;
  auto r = bundle::Reader::open({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
  if (!r) {
    printErrorf("%s: %s", name.c_str(), r.error().message.c_str());
    return std::nullopt;
  }
  if (auto bad = r->verifyPayloads()) {
    printErrorf("%s: %s", name.c_str(), bad->message.c_str());
    return std::nullopt;
  }
  return std::move(*r);
}

Command inspectCommand() {
  return {"inspect", "Show the kernels, launch rules and per-target resources of a .tnb bundle", [](Options& cli) {
            auto input = std::make_shared<std::string>();
            auto json = std::make_shared<bool>(false);
            auto payload = std::make_shared<std::optional<std::string>>();  // given, even if empty
            cli.option("BUNDLE", *input, "Bundle file (.tnb), or - for stdin").required();
            cli.flag("--json", *json, "Print JSON instead of text");
            cli.option("--extract", *payload, "Write one payload (KERNEL:TARGET:KIND, KIND = cubin, ptx or ir) to stdout");
            return std::function<int()>([input, json, payload] {
              std::string bytes;
              auto r = openBundle(*input, bytes);
              if (!r) return int(kInputError);
              if (*payload) return extract(*r, **payload);
              return writeOutput("-", *json ? jsonReport(*r) : textReport(*r)) ? int(kOk) : int(kInputError);
            });
          }};
}

}  // namespace tn::cli
