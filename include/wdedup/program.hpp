// wdedup/program.hpp — the input of the build-time half: a Program of named
// Methods, each split into indexed Partitions holding named tensors.
// Tensors do not own their bytes: they point at caller memory (often an
// mmap'd file) that must outlive every store and result built from them.
//
// Compile time: the functions that grow vectors are templates on an unused
// `int` parameter (call them as plain functions), so a TU that includes this
// header compiles them only if it calls them.
#ifndef WDEDUP_PROGRAM_HPP
#define WDEDUP_PROGRAM_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "wdedup/runtime/span.hpp"
#include "wdedup/runtime/tensor_layout.hpp"

namespace wdedup {

/// An owning tensor layout (the build-time twin of TensorLayout), with the
/// same vocabulary as ExecuTorch's TensorLayout.
struct Layout {
  ScalarType scalar_type = ScalarType::Byte;
  std::vector<std::int32_t> sizes;
  std::vector<std::uint8_t> dim_order;

  /// Row-major ("contiguous") layout: dim_order = 0, 1, ..., rank-1. Over
  /// rank 255 (the most a dim_order entry can name) dim_order is left
  /// empty: such a layout is refused, for its rank, wherever it is used.
  template <int = 0>
  static Layout contiguous(ScalarType type, std::vector<std::int32_t> sizes) {
    Layout l{type, std::move(sizes), {}};
    if (l.sizes.size() <= 255)
      for (std::size_t i = 0; i < l.sizes.size(); ++i) l.dim_order.push_back(static_cast<std::uint8_t>(i));
    return l;
  }
  /// Channels-last for a rank-4 NCHW tensor: dim_order = 0, 2, 3, 1.
  template <int = 0>
  static Layout channels_last(ScalarType type, std::vector<std::int32_t> sizes) {
    return Layout{type, std::move(sizes), {0, 2, 3, 1}};
  }

  /// An owning copy of a runtime layout (one a NamedDataMap gave).
  template <int = 0>
  static Layout copy_of(const TensorLayout& l) {
    return Layout{l.scalar_type, std::vector<std::int32_t>(l.sizes.begin(), l.sizes.end()),
                  std::vector<std::uint8_t>(l.dim_order.begin(), l.dim_order.end())};
  }
  /// A view with the runtime's type, valid while this Layout lives.
  TensorLayout view() const noexcept {
    return TensorLayout{scalar_type, Span<const std::int32_t>(sizes.data(), sizes.size()),
                        Span<const std::uint8_t>(dim_order.data(), dim_order.size())};
  }
  /// Byte size, or nullopt if the layout is inconsistent (see
  /// detail::layout_byte_size for the rules).
  template <int = 0>
  std::optional<std::uint64_t> nbytes() const noexcept {
    std::uint64_t n = 0;
    if (!detail::layout_byte_size(scalar_type, sizes.data(), sizes.size(), dim_order.data(),
                                  dim_order.size(), &n))
      return std::nullopt;
    return n;
  }

  friend bool operator==(const Layout& a, const Layout& b) noexcept {
    if (a.scalar_type != b.scalar_type || a.sizes.size() != b.sizes.size() ||
        a.dim_order.size() != b.dim_order.size())
      return false;
    for (std::size_t i = 0; i < a.sizes.size(); ++i)
      if (a.sizes[i] != b.sizes[i]) return false;
    for (std::size_t i = 0; i < a.dim_order.size(); ++i)
      if (a.dim_order[i] != b.dim_order[i]) return false;
    return true;
  }
  friend bool operator!=(const Layout& a, const Layout& b) { return !(a == b); }
};

/// One named tensor of a partition. Non-owning: `bytes` is caller memory.
struct Tensor {
  std::string name;
  ByteSpan bytes;
  /// Any positive integer (1 = no requirement); not limited to powers of two.
  std::int64_t alignment = 1;
  std::optional<Layout> layout;
};

/// One backend-compiled piece of a method: an ordered list of tensors.
struct Partition {
  std::vector<Tensor> tensors;

  // Three overloads rather than one with `std::optional<Layout> layout =
  // std::nullopt`: moving that disengaged default made GCC 12 warn
  // -Wmaybe-uninitialized (a false positive, but an error under -Werror)
  // in callers' code at -O1 and up.
  template <int = 0>
  Partition& add(std::string name, ByteSpan bytes, std::int64_t alignment = 1) {
    Tensor& t = tensors.emplace_back();
    t.name = std::move(name);
    t.bytes = bytes;
    t.alignment = alignment;
    return *this;
  }
  template <int = 0>
  Partition& add(std::string name, ByteSpan bytes, std::int64_t alignment, Layout layout) {
    add(std::move(name), bytes, alignment);
    tensors.back().layout.emplace(std::move(layout));
    return *this;
  }
  template <int = 0>
  Partition& add(std::string name, ByteSpan bytes, std::int64_t alignment, std::optional<Layout> layout) {
    if (layout) return add(std::move(name), bytes, alignment, std::move(*layout));
    return add(std::move(name), bytes, alignment);
  }
};

/// A named entry point (`prefill`, `decode`) with partitions 0..n-1.
struct Method {
  std::string name;
  std::vector<Partition> partitions;

  /// The new, empty partition. The reference lives in `partitions` (a
  /// std::vector): the next add_partition() on this method may move it, so
  /// fill a partition before adding the next.
  template <int = 0>
  Partition& add_partition() {
    partitions.emplace_back();
    return partitions.back();
  }
};

/// The whole model: methods in insertion order.
struct Program {
  std::vector<Method> methods;

  /// The new method, without partitions. As with add_partition, the
  /// reference is valid until the next add_method() on this program.
  template <int = 0>
  Method& add_method(std::string name) {
    methods.push_back(Method{std::move(name), {}});
    return methods.back();
  }
  /// The method with this name, or nullptr.
  const Method* find_method(std::string_view name) const noexcept {
    for (const Method& m : methods)
      if (m.name == name) return &m;
    return nullptr;
  }
};

}  // namespace wdedup

#endif  // WDEDUP_PROGRAM_HPP
