// A view of contiguous elements for the runtime's public interface, which consumers compile as
// C++17 (std::span is C++20). It converts from pointer + count, C arrays, anything with data()
// and size() (std::vector, std::array, std::string, std::span) and Span<U> where U* converts to
// T* (Span<float> to Span<const float>); under C++20 it also converts to std::span.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>
#if __cplusplus >= 202002L
#include <span>
#endif

namespace truenort {

template <class T>
class Span {
  template <class C>
  using DataOf = std::remove_pointer_t<decltype(std::declval<C&>().data())>;
  template <class U>
  static constexpr bool kConvertible = std::is_convertible_v<U (*)[], T (*)[]>;

 public:
  constexpr Span() = default;
  constexpr Span(T* data, std::size_t size) : data_(data), size_(size) {}
  template <std::size_t N>
  constexpr Span(T (&array)[N]) : data_(array), size_(N) {}
  template <class C, class = std::enable_if_t<kConvertible<DataOf<C>> &&
                                              std::is_convertible_v<decltype(std::declval<C&>().size()), std::size_t>>>
  constexpr Span(C&& c) : data_(c.data()), size_(c.size()) {}
  template <class U, class = std::enable_if_t<!std::is_same_v<U, T> && kConvertible<U>>>
  constexpr Span(const Span<U>& o) : data_(o.data()), size_(o.size()) {}

  constexpr T* data() const { return data_; }
  constexpr std::size_t size() const { return size_; }
  constexpr std::size_t size_bytes() const { return size_ * sizeof(T); }
  constexpr bool empty() const { return size_ == 0; }
  constexpr T* begin() const { return data_; }
  constexpr T* end() const { return data_ + size_; }
  constexpr T& operator[](std::size_t i) const { return data_[i]; }
#if __cplusplus >= 202002L
  constexpr operator std::span<T>() const { return {data_, size_}; }
#endif

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace truenort
