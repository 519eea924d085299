// The simulated device's configuration, error names and device memory.
#include "Sim.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <iterator>
#include <string_view>

namespace truenort::sim {

namespace {

struct ErrorText {
  CUresult code;
  const char* name;
  const char* text;
};

// The names and descriptions the CUDA driver gives these codes.
constexpr ErrorText kErrors[] = {
    {err::Success, "CUDA_SUCCESS", "no error"},
    {err::InvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {err::OutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {err::NotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {err::NoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {err::InvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {err::InvalidImage, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {err::InvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {err::InvalidHandle, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {err::NotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {err::NotReady, "CUDA_ERROR_NOT_READY", "device not ready"},
    {err::IllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {err::LaunchOutOfResources, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {err::LaunchTimeout, "CUDA_ERROR_LAUNCH_TIMEOUT", "the launch timed out and was terminated"},
    {err::MisalignedAddress, "CUDA_ERROR_MISALIGNED_ADDRESS", "misaligned address"},
    {err::LaunchFailed, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {err::NotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
};

const ErrorText* find(CUresult r) {
  for (const ErrorText& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

// "80G", "512M", "4096": bytes with an optional K/M/G suffix (powers of two).
std::optional<uint64_t> parseBytes(std::string_view v) {
  unsigned shift = 0;
  if (!v.empty() && (v.back() == 'K' || v.back() == 'M' || v.back() == 'G')) {
    shift = v.back() == 'K' ? 10 : v.back() == 'M' ? 20 : 30;
    v.remove_suffix(1);
  }
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty() || n > (~uint64_t{0} >> shift)) return std::nullopt;
  return n << shift;
}

template <class T>
bool parseNumber(std::string_view v, T& out, T lo, T hi) {
  auto bytes = parseBytes(v);
  if (!bytes || *bytes < static_cast<uint64_t>(lo) || *bytes > static_cast<uint64_t>(hi)) return false;
  out = static_cast<T>(*bytes);
  return true;
}

}  // namespace

const char* errorName(CUresult r) {
  const ErrorText* e = find(r);
  return e ? e->name : nullptr;
}

const char* errorString(CUresult r) {
  const ErrorText* e = find(r);
  return e ? e->text : nullptr;
}

std::optional<std::string> parseConfig(const std::string& text, Config& c) {
  std::string_view rest = text;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string_view::npos) return "TRUENORT_SIM: '" + std::string(item) + "' is not key=value";
    std::string_view key = item.substr(0, eq), value = item.substr(eq + 1);
    bool ok = true;
    if (key == "name") {
      ok = !value.empty() && value.size() < 200;
      c.name = value;
    } else if (key == "sm") {
      ok = parseNumber(value, c.sm, 50u, 1000u);
    } else if (key == "sms") {
      ok = parseNumber(value, c.sms, 1, 100000);
    } else if (key == "memory") {
      ok = parseNumber(value, c.memory, uint64_t{1} << 20, uint64_t{1} << 46);
    } else if (key == "shared_per_block") {
      ok = parseNumber(value, c.sharedPerBlock, 0, 1 << 30);
    } else if (key == "shared_optin") {
      ok = parseNumber(value, c.sharedOptin, 0, 1 << 30);
    } else if (key == "threads") {
      ok = parseNumber(value, c.threads, 0u, 1024u);
    } else if (key == "max_instructions") {
      ok = parseNumber(value, c.maxInstructions, uint64_t{1}, ~uint64_t{0} >> 10);
    } else if (key == "checks") {
      c.checkRaces = value == "all" || value == "races";
      c.checkUninit = value == "all" || value == "uninit";
      ok = c.checkRaces || c.checkUninit || value == "none";
    } else {
      return "TRUENORT_SIM: unknown key '" + std::string(key) +
             "' (known: name, sm, sms, memory, shared_per_block, shared_optin, threads, max_instructions, checks)";
    }
    if (!ok) return "TRUENORT_SIM: invalid value '" + std::string(value) + "' for " + std::string(key);
  }
  if (c.sharedOptin < c.sharedPerBlock) c.sharedOptin = c.sharedPerBlock;
  return std::nullopt;
}

Memory::~Memory() {
  for (auto& [base, b] : blocks_) std::free(b.host);
}

CUresult Memory::allocate(uint64_t bytes, uint64_t& address) {
  if (bytes == 0) return err::InvalidValue;
  if (bytes > capacity_ - used_) return err::OutOfMemory;
  // Addresses are never reused; the interpreter needs them below 2^48 (Sim.h).
  const uint64_t span = (bytes + 0xFFFF) / 0x10000 * 0x10000 + 0x10000;
  if (span > (uint64_t{1} << 47) - next_) return err::OutOfMemory;
  // calloc: the pages of a large, sparsely used allocation are never touched.
  auto* host = static_cast<std::byte*>(std::calloc(bytes, 1));
  if (!host) return err::OutOfMemory;
  address = next_;
  blocks_.emplace(address, Block{host, bytes});
  used_ += bytes;
  next_ += span;  // 64 KiB aligned, a 64 KiB gap after
  return err::Success;
}

CUresult Memory::release(uint64_t address) {
  auto it = blocks_.find(address);
  if (it == blocks_.end()) return err::InvalidValue;
  std::free(it->second.host);
  used_ -= it->second.bytes;
  blocks_.erase(it);
  return err::Success;
}

std::byte* Memory::range(uint64_t address, uint64_t bytes) const {
  auto a = below(address);
  if (!a || address - a->base > a->bytes || a->bytes - (address - a->base) < bytes) return nullptr;
  return a->host + (address - a->base);
}

std::optional<Memory::Allocation> Memory::below(uint64_t address) const {
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return std::nullopt;
  --it;
  return Allocation{it->first, it->second.bytes, it->second.host};
}

BoundedMemory::BoundedMemory(const Memory& memory, const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  std::vector<std::pair<uint64_t, uint64_t>> sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  for (auto [begin, end] : sorted) {
    auto a = memory.below(begin);
    if (!a || begin - a->base >= a->bytes || end <= begin) continue;  // outside any allocation, or empty
    end = std::min(end, a->base + a->bytes);
    if (!ranges_.empty()) {
      Allocation& last = std::prev(ranges_.end())->second;
      const bool sameAllocation = last.host - last.base == a->host - a->base;
      if (sameAllocation && begin <= last.base + last.bytes) {
        last.bytes = std::max(last.bytes, end - last.base);
        continue;
      }
    }
    ranges_[begin] = Allocation{begin, end - begin, a->host + (begin - a->base)};
  }
}

std::optional<BoundedMemory::Allocation> BoundedMemory::below(uint64_t address) const {
  auto it = ranges_.upper_bound(address);
  if (it == ranges_.begin()) return std::nullopt;
  return std::prev(it)->second;
}

}  // namespace truenort::sim
