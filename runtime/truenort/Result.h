// Errors as values: every fallible runtime call returns Result<T> (or Status for no value).
// The runtime never throws, prints or exits; the caller decides what to do with an Error.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace truenort {

enum class Errc {
  NoDriver,         // libcuda.so.1 could not be loaded
  DriverTooOld,     // the driver lacks a required entry point or version
  NoDevice,         // no CUDA device, or the ordinal is out of range
  Cuda,             // a driver call failed: see cuda_name
  OutOfMemory,
  InvalidArgument,
  BadBundle,        // the bundle failed validation
  NoCompatibleCode, // no cubin for this device and PTX not present or not allowed
  KernelNotFound,
  SignatureMismatch,
};

struct Error {
  Errc code = Errc::Cuda;
  int cuda_code = 0;        // CUresult when code == Cuda or OutOfMemory
  std::string cuda_name;    // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
  std::string call;         // the driver call or runtime operation that failed
  std::string kernel;       // the kernel involved, if any
  std::string message;      // human-readable detail

  // "cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (out of memory) [kernel rmsnorm]"
  std::string describe() const;
};

template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Error e) : v_(std::move(e)) {}
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  T* operator->() { return &value(); }
  T& operator*() & { return value(); }
  const Error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, Error> v_;
};

// Result for operations without a value.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : err_(std::move(e)), failed_(true) {}
  static Status success() { return {}; }
  bool ok() const { return !failed_; }
  explicit operator bool() const { return ok(); }
  const Error& error() const { return err_; }

 private:
  Error err_;
  bool failed_ = false;
};

}  // namespace truenort
