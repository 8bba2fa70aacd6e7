// wdedup/runtime/tensor_layout.hpp — scalar types and the non-owning tensor
// layout view the reader returns. Runtime half. The vocabulary (and the
// numeric values, which are stored in files) is ExecuTorch's ScalarType.
#ifndef WDEDUP_RUNTIME_TENSOR_LAYOUT_HPP
#define WDEDUP_RUNTIME_TENSOR_LAYOUT_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>

#include "wdedup/runtime/span.hpp"

namespace wdedup {

/// Element types. Values match ExecuTorch's ScalarType (a byte in the
/// file), so they must never be renumbered. 23-29 are the types newer
/// ExecuTorch schemas added (fp8 variants, unsigned 16-64 bit integers).
/// 8-10 (complex) and 18-21 (bits) are not in the FlatTensor schema's enum,
/// but ExecuTorch's runtime knows them (its layouts size every ScalarType)
/// and its C++ .ptd writer stores a tensor's type as it is: a file holding
/// one must open here as it does there.
enum class ScalarType : std::int8_t {
  Byte = 0,
  Char = 1,
  Short = 2,
  Int = 3,
  Long = 4,
  Half = 5,
  Float = 6,
  Double = 7,
  ComplexHalf = 8,
  ComplexFloat = 9,
  ComplexDouble = 10,
  Bool = 11,
  QInt8 = 12,
  QUInt8 = 13,
  QInt32 = 14,
  BFloat16 = 15,
  QUInt4x2 = 16,
  QUInt2x4 = 17,
  Bits1x8 = 18,
  Bits2x4 = 19,
  Bits4x2 = 20,
  Bits8 = 21,
  Bits16 = 22,
  Float8e5m2 = 23,
  Float8e4m3fn = 24,
  Float8e5m2fnuz = 25,
  Float8e4m3fnuz = 26,
  UInt16 = 27,
  UInt32 = 28,
  UInt64 = 29,
};

/// Bytes per element, or 0 for a value that is not a known ScalarType
/// (how the reader recognises a corrupt type byte). Packed sub-byte types
/// (QUInt4x2, QUInt2x4, Bits1x8 ... Bits8) occupy one byte per element, and
/// a complex element is two of its parts, as in ExecuTorch.
constexpr std::size_t element_size(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Byte: case ScalarType::Char: case ScalarType::Bool:
    case ScalarType::QInt8: case ScalarType::QUInt8:
    case ScalarType::QUInt4x2: case ScalarType::QUInt2x4:
    case ScalarType::Bits1x8: case ScalarType::Bits2x4: case ScalarType::Bits4x2: case ScalarType::Bits8:
    case ScalarType::Float8e5m2: case ScalarType::Float8e4m3fn:
    case ScalarType::Float8e5m2fnuz: case ScalarType::Float8e4m3fnuz:
      return 1;
    case ScalarType::Short: case ScalarType::Half: case ScalarType::BFloat16:
    case ScalarType::Bits16: case ScalarType::UInt16:
      return 2;
    case ScalarType::Int: case ScalarType::Float: case ScalarType::QInt32:
    case ScalarType::UInt32: case ScalarType::ComplexHalf:
      return 4;
    case ScalarType::Long: case ScalarType::Double: case ScalarType::UInt64:
    case ScalarType::ComplexFloat:
      return 8;
    case ScalarType::ComplexDouble:
      return 16;
  }
  return 0;
}

/// ExecuTorch's upper-case spelling ("FLOAT", "BFLOAT16"), as its schema
/// and its .ptd manifests print it; "" for an unknown value.
constexpr const char* scalar_type_name(ScalarType t) noexcept {
  switch (t) {
    case ScalarType::Byte: return "BYTE";
    case ScalarType::Char: return "CHAR";
    case ScalarType::Short: return "SHORT";
    case ScalarType::Int: return "INT";
    case ScalarType::Long: return "LONG";
    case ScalarType::Half: return "HALF";
    case ScalarType::Float: return "FLOAT";
    case ScalarType::Double: return "DOUBLE";
    case ScalarType::ComplexHalf: return "COMPLEXHALF";
    case ScalarType::ComplexFloat: return "COMPLEXFLOAT";
    case ScalarType::ComplexDouble: return "COMPLEXDOUBLE";
    case ScalarType::Bool: return "BOOL";
    case ScalarType::QInt8: return "QINT8";
    case ScalarType::QUInt8: return "QUINT8";
    case ScalarType::QInt32: return "QINT32";
    case ScalarType::BFloat16: return "BFLOAT16";
    case ScalarType::QUInt4x2: return "QUINT4X2";
    case ScalarType::QUInt2x4: return "QUINT2X4";
    case ScalarType::Bits1x8: return "BITS1X8";
    case ScalarType::Bits2x4: return "BITS2X4";
    case ScalarType::Bits4x2: return "BITS4X2";
    case ScalarType::Bits8: return "BITS8";
    case ScalarType::Bits16: return "BITS16";
    case ScalarType::Float8e5m2: return "FLOAT8E5M2";
    case ScalarType::Float8e4m3fn: return "FLOAT8E4M3FN";
    case ScalarType::Float8e5m2fnuz: return "FLOAT8E5M2FNUZ";
    case ScalarType::Float8e4m3fnuz: return "FLOAT8E4M3FNUZ";
    case ScalarType::UInt16: return "UINT16";
    case ScalarType::UInt32: return "UINT32";
    case ScalarType::UInt64: return "UINT64";
  }
  return "";
}

/// A tensor's layout as stored in a file: type, sizes and dim order, viewed
/// in place (the spans point into the store's metadata: valid while that
/// memory is, the source's mapping or the lent metadata buffer, not tied
/// to the NamedDataMap object).
struct TensorLayout {
  ScalarType scalar_type = ScalarType::Byte;
  Span<const std::int32_t> sizes;
  Span<const std::uint8_t> dim_order;

  /// Number of elements (1 for a scalar of rank 0).
  std::uint64_t numel() const noexcept {
    std::uint64_t n = 1;
    for (std::int32_t s : sizes) n *= static_cast<std::uint64_t>(s);
    return n;
  }
  /// Bytes the tensor occupies. Exact for valid layouts (everything a
  /// NamedDataMap returns: it refuses a key's layout that breaks a rule): a
  /// product can wrap only before a size of 0, which makes the result 0 all
  /// the same.
  std::uint64_t nbytes() const noexcept { return numel() * element_size(scalar_type); }
};

namespace detail {

/// The rules a layout must keep, in the order they are checked; kNone: it
/// keeps them all.
enum class LayoutRule : std::uint8_t {
  kNone,
  kUnknownScalarType,
  kRankOver255,
  kDimOrderLength,     ///< dim_order has not one entry per dimension
  kDimOrderPastRank,   ///< dim_order[at] names a dimension past the rank
  kDimOrderTwice,      ///< dim_order[at] names a dimension an earlier entry named
  kNegativeSize,       ///< sizes[at] is negative
  kByteCountOverflow,  ///< the byte count exceeds 2^64 - 1
};

/// The first rule a layout breaks, and the entry that breaks it.
struct LayoutFault {
  LayoutRule rule = LayoutRule::kNone;
  std::size_t at = 0;  ///< the dim_order or sizes index, for the rules that name one
};

/// Checks a layout for internal consistency and computes its byte size
/// without overflow: a known scalar type, a rank of at most 255, a
/// dim_order that is a permutation of 0..rank-1, no negative size, and a
/// byte count that fits in 64 bits. Returns the first rule broken (and
/// leaves *nbytes alone), or kNone. The one statement of these rules: the
/// reader reports layout_rule_message of it, so a broken file says which
/// rule it broke, and the build-time store says it with the values
/// (named_data_store.hpp's layout_problem).
inline LayoutFault check_layout(ScalarType type, const std::int32_t* sizes, std::size_t rank,
                                const std::uint8_t* dim_order, std::size_t dim_order_len,
                                std::uint64_t* nbytes) noexcept {
  const std::size_t esize = element_size(type);
  if (esize == 0) return {LayoutRule::kUnknownScalarType, 0};
  if (rank > 255) return {LayoutRule::kRankOver255, 0};
  if (rank != dim_order_len) return {LayoutRule::kDimOrderLength, 0};
  bool seen[256] = {};
  for (std::size_t i = 0; i < rank; ++i) {
    if (dim_order[i] >= rank) return {LayoutRule::kDimOrderPastRank, i};
    if (seen[dim_order[i]]) return {LayoutRule::kDimOrderTwice, i};
    seen[dim_order[i]] = true;
  }
  // A zero anywhere makes the count 0, whatever precedes it: an overflow
  // is only an error once no zero has followed (else [2^31-1 x3, 0] would
  // be refused and [0, 2^31-1 x3] not).
  std::uint64_t n = esize;
  bool zero = false, overflow = false;
  for (std::size_t i = 0; i < rank; ++i) {
    if (sizes[i] < 0) return {LayoutRule::kNegativeSize, i};
    const auto s = static_cast<std::uint64_t>(sizes[i]);
    if (s == 0) zero = true;
    else if (n > UINT64_MAX / s) overflow = true;
    else n *= s;
  }
  if (overflow && !zero) return {LayoutRule::kByteCountOverflow, 0};
  *nbytes = zero ? 0 : n;
  return {};
}

/// A fixed message for a broken rule (the reader's; no values, no
/// allocation); nullptr for kNone.
constexpr const char* layout_rule_message(LayoutRule rule) noexcept {
  switch (rule) {
    case LayoutRule::kNone: return nullptr;
    case LayoutRule::kUnknownScalarType: return "layout has an unknown scalar type";
    case LayoutRule::kRankOver255: return "layout rank exceeds 255";
    case LayoutRule::kDimOrderLength: return "layout's dim_order does not have one entry per dimension of its sizes";
    case LayoutRule::kDimOrderPastRank: return "layout's dim_order names a dimension past its rank";
    case LayoutRule::kDimOrderTwice: return "layout's dim_order names a dimension twice";
    case LayoutRule::kNegativeSize: return "layout has a negative size";
    case LayoutRule::kByteCountOverflow: return "layout's byte count exceeds 2^64 - 1";
  }
  return "layout breaks an unknown rule";
}

/// check_layout as a yes or no: true (and *nbytes set) for a consistent
/// layout.
inline bool layout_byte_size(ScalarType type, const std::int32_t* sizes, std::size_t rank,
                             const std::uint8_t* dim_order, std::size_t dim_order_len,
                             std::uint64_t* nbytes) noexcept {
  return check_layout(type, sizes, rank, dim_order, dim_order_len, nbytes).rule == LayoutRule::kNone;
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_TENSOR_LAYOUT_HPP
