// wdedup/runtime/error.hpp — the one error vocabulary of wdedup, and the
// runtime's Result<T>. Runtime half: no exceptions, no heap, no <string>.
// The build-time half reuses the same Error codes with richer messages
// (see wdedup/expected.hpp).
#ifndef WDEDUP_RUNTIME_ERROR_HPP
#define WDEDUP_RUNTIME_ERROR_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>
#include <new>

#include "wdedup/runtime/detail/traits.hpp"

namespace wdedup {

/// Every failure wdedup reports. Codes are grouped by who has to act:
/// 0x1x the caller's input, 0x2x a lookup, 0x3x a malformed file, 0x4x I/O.
enum class Error : std::uint32_t {
  Ok = 0x00,                     ///< not an error

  InvalidArgument = 0x10,        ///< an argument is out of its domain
  InvalidAlignment = 0x11,       ///< alignment is zero, negative or too large
  KeyConflict = 0x12,            ///< same key added again with different bytes
  LayoutMismatch = 0x13,         ///< a caller's layout breaks its rules, or disagrees with
                                 ///< the bytes or an earlier layout
  PartitionCountMismatch = 0x14, ///< a strategy needs equal partition counts
  BufferTooSmall = 0x15,         ///< a caller buffer cannot hold the data
  InvalidName = 0x16,            ///< an empty or otherwise unusable name

  NotFound = 0x20,               ///< no such key, function or layout

  Truncated = 0x30,              ///< the file ends before a structure it declares
  MalformedHeader = 0x31,        ///< FT01 identifier or FH01 header is wrong
  MalformedFlatbuffer = 0x32,    ///< a flatbuffer offset, vtable or vector is wrong
  MalformedSegment = 0x33,       ///< a segment range is out of bounds or overlaps
  MalformedKey = 0x34,           ///< a key string or segment index is wrong
  MalformedLayout = 0x35,        ///< a file's tensor layout is inconsistent
  MalformedIndex = 0x36,         ///< the wdedup lookup index is inconsistent
  MalformedFunctionMap = 0x37,   ///< the wdedup function maps are inconsistent
  UnsupportedVersion = 0x38,     ///< a version this reader does not know
  Misaligned = 0x39,             ///< memory handed to the reader is misaligned

  IoError = 0x40,                ///< open/read/write/fsync/rename failed
  OutOfMemory = 0x41,            ///< an allocation the caller asked for failed, or could not
                                 ///< be made: more bytes than std::size_t holds (32-bit targets)
  /// The new file replaced the destination, but the fsync that makes the
  /// rename survive a power loss failed: unlike every other write error,
  /// the destination is no longer the old file.
  NotDurable = 0x42,
};

/// A short, stable, human-readable name for an error code.
constexpr const char* error_name(Error e) noexcept {
  switch (e) {
    case Error::Ok: return "Ok";
    case Error::InvalidArgument: return "InvalidArgument";
    case Error::InvalidAlignment: return "InvalidAlignment";
    case Error::KeyConflict: return "KeyConflict";
    case Error::LayoutMismatch: return "LayoutMismatch";
    case Error::PartitionCountMismatch: return "PartitionCountMismatch";
    case Error::BufferTooSmall: return "BufferTooSmall";
    case Error::InvalidName: return "InvalidName";
    case Error::NotFound: return "NotFound";
    case Error::Truncated: return "Truncated";
    case Error::MalformedHeader: return "MalformedHeader";
    case Error::MalformedFlatbuffer: return "MalformedFlatbuffer";
    case Error::MalformedSegment: return "MalformedSegment";
    case Error::MalformedKey: return "MalformedKey";
    case Error::MalformedLayout: return "MalformedLayout";
    case Error::MalformedIndex: return "MalformedIndex";
    case Error::MalformedFunctionMap: return "MalformedFunctionMap";
    case Error::UnsupportedVersion: return "UnsupportedVersion";
    case Error::Misaligned: return "Misaligned";
    case Error::IoError: return "IoError";
    case Error::OutOfMemory: return "OutOfMemory";
    case Error::NotDurable: return "NotDurable";
  }
  return "Unknown";
}

/// Why a runtime call failed: the code, which check failed (a string with
/// static storage duration, never freed) and where (a file offset, an index
/// or a size, as the check's text says).
struct Failure {
  Error code = Error::Ok;
  const char* what = "";
  std::uint64_t at = 0;
};

/// How a failed system call's check ends its text ("open failed (at =
/// errno)"): its `at` is then the errno, not an offset. A message that
/// names the reason prints `what` without it (sizeof kErrnoSuffix - 1 chars).
inline constexpr char kErrnoSuffix[] = " (at = errno)";

/// The errno a failure keeps, where its check says `at` holds one; else 0.
/// (A source of the caller's own may put anything in `at`: only a value an
/// errno can be, 1 to INT_MAX, is read as one.)
constexpr int failure_errno(const Failure& f) noexcept {
  constexpr std::size_t m = sizeof kErrnoSuffix - 1;
  std::size_t n = 0;
  if (f.what == nullptr) return 0;
  while (f.what[n] != '\0') ++n;
  if (n <= m || f.at == 0 || f.at > 0x7fffffffu) return 0;
  for (std::size_t i = 0; i < m; ++i)
    if (f.what[n - m + i] != kErrnoSuffix[i]) return 0;
  return static_cast<int>(f.at);
}

/// What a program may have run first when the value of a failed Result is used,
/// before the trap: the runtime has no output it may assume, so by default nothing.
/// A function (not a macro: every translation unit sees the same one, and it needs
/// no logging header where wdedup is included), given the Result's Failure, inside a
/// noexcept function; if it returns, the trap follows.
using FailedResultHandler = void (*)(const Failure&) noexcept;

namespace detail {
/// The handler set_failed_result_handler() set (one for the program: an inline
/// variable, constant-initialized, so no guard and no heap).
inline FailedResultHandler failed_result_handler = nullptr;
}  // namespace detail

/// Sets the handler run before the trap of a failed Result's value (null: none)
/// and returns the one before. Set it once, before other threads use wdedup (it
/// is a plain pointer). In an ExecuTorch delegate, for example:
///   wdedup::set_failed_result_handler([](const wdedup::Failure& f) noexcept {
///     ET_LOG(Fatal, "wdedup: %s (at %llu)", f.what, static_cast<unsigned long long>(f.at));
///   });
inline FailedResultHandler set_failed_result_handler(FailedResultHandler handler) noexcept {
  const FailedResultHandler before = detail::failed_result_handler;
  detail::failed_result_handler = handler;
  return before;
}

namespace detail {
/// Stops the program, in every build.
[[noreturn]] inline void trap() noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_trap();
#else
  *static_cast<volatile int*>(nullptr) = 0;
  for (;;) {
  }
#endif
}
/// What accessing the value of a failed Result does: runs the handler set
/// (set_failed_result_handler), then stops the program, in every build, as
/// ExecuTorch's Result does (ET_CHECK). Reading on would hand out
/// uninitialized storage: a DataBuffer's destructor then frees a garbage
/// pointer.
[[noreturn]] inline void value_of_failed_result(const Failure& f) noexcept {
  if (const FailedResultHandler h = failed_result_handler) h(f);
  trap();
}
/// A failure made from Error::Ok, which would otherwise be a Result that
/// is not ok() yet whose error() is Ok (code ported from ExecuTorch returns
/// Error::Ok for success). ExecuTorch maps it to Internal; wdedup has no
/// such code, and the caller passed a code that is not a failure.
constexpr Failure failure_of(Error e, const char* what, std::uint64_t at) noexcept {
  return e == Error::Ok ? Failure{Error::InvalidArgument, "a Result<T> was made from Error::Ok, without a value", 0}
                        : Failure{e, what, at};
}
}  // namespace detail

/// A value or a Failure. Holds T in place: no heap, no exceptions.
/// value(), * and -> of a failed Result stop the program (a trap, in every
/// build, after the handler set_failed_result_handler set, if any), as
/// ExecuTorch's Result does: check ok() first. A Result made from
/// Error::Ok (no value) is a failure with InvalidArgument, so ok() is true
/// exactly when error() is Error::Ok.
template <class T>
class [[nodiscard]] Result {
  static_assert(!detail::traits::is_reference<T>::value,
                "Result<T> holds values; use a pointer for references");

 public:
  Result(const T& v) : ok_(true) { new (&storage_) T(v); }
  Result(T&& v) : ok_(true) { new (&storage_) T(static_cast<T&&>(v)); }
  Result(Failure f) : failure_(detail::failure_of(f.code, f.what, f.at)), ok_(false) {}
  Result(Error e, const char* what = "", std::uint64_t at = 0) : failure_(detail::failure_of(e, what, at)), ok_(false) {}
  /// From a Result of a type that converts to T: a Result<KeyView> is
  /// accepted where a Result<std::string_view> is expected. (The storage is
  /// zeroed first only to keep GCC's -Wmaybe-uninitialized quiet.)
  template <class U,
            detail::traits::enable_if_t<!detail::traits::is_same<U, T>::value && detail::traits::is_class<T>::value &&
                                            detail::traits::is_convertible<const U&, T>::value,
                                        int> = 0>
  Result(const Result<U>& o) : storage_(), failure_(o.failure()), ok_(o.ok()) {
    if (ok_) new (&storage_) T(*o);
  }

  Result(Result&& o) noexcept : failure_(o.failure_), ok_(o.ok_) {
    if (ok_) new (&storage_) T(static_cast<T&&>(*o.ptr()));
  }
  /// Declared only for a T that can be copied (detail::traits::copy_source_t):
  /// Result<DataBuffer> is move-only, and its traits say so.
  Result(const detail::traits::copy_source_t<Result, T>& o) : failure_(o.failure_), ok_(o.ok_) {
    if (ok_) new (&storage_) T(*o.ptr());
  }
  Result& operator=(Result&& o) noexcept {
    if (this != &o) {
      reset();
      failure_ = o.failure_;
      ok_ = o.ok_;
      if (ok_) new (&storage_) T(static_cast<T&&>(*o.ptr()));
    }
    return *this;
  }
  Result& operator=(const detail::traits::copy_source_t<Result, T>& o) {
    if (this != &o) {
      reset();
      failure_ = o.failure_;
      ok_ = o.ok_;
      if (ok_) new (&storage_) T(*o.ptr());
    }
    return *this;
  }
  ~Result() { reset(); }

  bool ok() const noexcept { return ok_; }
  explicit operator bool() const noexcept { return ok_; }
  Error error() const noexcept { return ok_ ? Error::Ok : failure_.code; }
  const Failure& failure() const noexcept { return failure_; }

  T& value() & noexcept { return *checked(); }
  const T& value() const& noexcept { return *checked(); }
  /// Of a temporary Result: the value itself, moved out (by value, not as a
  /// T&&: `auto&& src = *MmapSource::open(p);` then holds the source, where
  /// a reference into the dead Result dangled, with no warning).
  T value() && noexcept { return static_cast<T&&>(*checked()); }
  T& operator*() & noexcept { return *checked(); }
  const T& operator*() const& noexcept { return *checked(); }
  /// Of a temporary Result: the value itself, moved out (by value, as
  /// value() &&; a temporary still, so that what depends on its lifetime can
  /// tell, e.g. NamedDataMap::open).
  T operator*() && noexcept { return static_cast<T&&>(*checked()); }
  T* operator->() noexcept { return checked(); }
  const T* operator->() const noexcept { return checked(); }

 private:
  T* ptr() noexcept { return reinterpret_cast<T*>(&storage_); }
  const T* ptr() const noexcept { return reinterpret_cast<const T*>(&storage_); }
  T* checked() noexcept {
    if (!ok_) detail::value_of_failed_result(failure_);
    return ptr();
  }
  const T* checked() const noexcept {
    if (!ok_) detail::value_of_failed_result(failure_);
    return ptr();
  }
  void reset() noexcept {
    if (ok_) ptr()->~T();
    ok_ = false;
  }

  alignas(T) unsigned char storage_[sizeof(T)];
  Failure failure_{};
  bool ok_;
};

/// Result of an operation that yields nothing but may fail: success is
/// Status() (or Status(Error::Ok), ExecuTorch's spelling, or ok_status());
/// a failure is made from an Error and, optionally, what failed and where,
/// or from a Failure. Not from a bool or a number: `return false;` in a
/// DataSource::read must not compile, as it would otherwise mean success.
class [[nodiscard]] Status {
 public:
  constexpr Status() noexcept = default;
  constexpr Status(Error e, const char* what = "", std::uint64_t at = 0) noexcept : failure_{e, what, at} {}
  constexpr Status(Failure f) noexcept : failure_(f) {}
  template <class N, detail::traits::enable_if_t<detail::traits::is_arithmetic<N>::value, int> = 0>
  Status(N) {
    static_assert(sizeof(N) == 0,
                  "wdedup::Status is made from an Error (and what failed, and where); success is Status() "
                  "or wdedup::ok_status(). A bool or a number would mean success whatever its value");
  }

  constexpr bool ok() const noexcept { return failure_.code == Error::Ok; }
  constexpr explicit operator bool() const noexcept { return ok(); }
  constexpr Error error() const noexcept { return failure_.code; }
  constexpr const Failure& failure() const noexcept { return failure_; }

 private:
  Failure failure_{};
};

/// Success, for a DataSource of one's own: `return wdedup::ok_status();`.
constexpr Status ok_status() noexcept { return Status(); }

namespace detail {
using wdedup::ok_status;  // (its home before it was public)
}  // namespace detail

}  // namespace wdedup

#endif  // WDEDUP_RUNTIME_ERROR_HPP
