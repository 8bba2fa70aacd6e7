// wdedup/strategy.hpp — how partitions are grouped into blobs: compile-time
// policies, after ExecuTorch's CoreML POSITIONAL / ONE_BLOB strategies.
// Build-time half.
//
// A policy is a tag type with four static members (see Positional); wrap it
// as Strategy<P> and pass it to deduplicate<Strategy<P>>(program). A policy
// that lacks a member fails to compile with one static_assert naming it.
#ifndef WDEDUP_STRATEGY_HPP
#define WDEDUP_STRATEGY_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <boost/hana/type.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "wdedup/expected.hpp"
#include "wdedup/program.hpp"

namespace wdedup {

namespace detail {

/// Whether a method other than `method` has partitions. ExecuTorch hands a
/// backend's preprocess_multimethod only the methods that have partitions
/// for it (exir/backend/backend_api.py), and CoreML's combines nothing when
/// it is given fewer than two (coreml_preprocess.py: `if len(method_names)
/// <= 1: return super().preprocess_multimethod(...)`, each partition
/// compiled on its own). Stops at the first other method with partitions.
inline bool other_method_has_partitions(const Program& program, std::size_t method) noexcept {
  for (std::size_t i = 0; i < program.methods.size(); ++i)
    if (i != method && !program.methods[i].partitions.empty()) return true;
  return false;
}

/// The blob of a partition compiled on its own: "<method>_partition_<i>".
inline std::string own_blob_key(const Program& program, std::size_t method, std::uint32_t partition) {
  return program.methods[method].name + "_partition_" + std::to_string(partition);
}

}  // namespace detail

/// One blob per partition index ("combined_partition_<i>"); each method is a
/// function of that blob named after the method. Every method with
/// partitions must have the same number of them; a method with none takes
/// no part (ExecuTorch never hands it to the backend). With fewer than two
/// methods with partitions nothing is combined: each partition is a blob of
/// its own, as under Disabled (as ExecuTorch does).
struct Positional {
  static constexpr const char* name = "POSITIONAL";

  static Expected<void> validate(const Program& program) {
    const Method* first = nullptr;
    for (const Method& m : program.methods) {
      if (m.partitions.empty()) continue;
      if (first == nullptr) first = &m;
      if (m.partitions.size() != first->partitions.size()) {
        return Expected<void>(
            Error::PartitionCountMismatch,
            detail::cat("every method must have the same number of partitions: method ",
                        detail::quote_name(m.name), " has ", m.partitions.size(), ", but the first method ",
                        first == &program.methods.front() ? "" : "with partitions ",
                        detail::quote_name(first->name), " has ", first->partitions.size(),
                        "; Strategy<OneBlob> (or Strategy<Disabled>) accepts unequal partition counts"));
      }
    }
    return {};
  }
  static std::string blob_key(const Program& program, std::size_t method, std::uint32_t partition) {
    if (!detail::other_method_has_partitions(program, method)) return detail::own_blob_key(program, method, partition);
    return "combined_partition_" + std::to_string(partition);
  }
  static std::string function_name(const Program& program, std::size_t method, std::uint32_t) {
    return program.methods[method].name;
  }
};

/// One blob for everything ("combined_all"); each partition is a function
/// named "<method>__<partition>". Any partition counts. With fewer than two
/// methods with partitions nothing is combined: each partition is a blob of
/// its own, its function named after the method, as under Disabled (as
/// ExecuTorch does).
struct OneBlob {
  static constexpr const char* name = "ONE_BLOB";

  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program& program, std::size_t method, std::uint32_t partition) {
    if (!detail::other_method_has_partitions(program, method)) return detail::own_blob_key(program, method, partition);
    return "combined_all";
  }
  static std::string function_name(const Program& program, std::size_t method, std::uint32_t partition) {
    if (!detail::other_method_has_partitions(program, method)) return program.methods[method].name;
    return program.methods[method].name + "__" + std::to_string(partition);
  }
};

/// No grouping: one blob per method and partition ("<method>_partition_<i>"),
/// whose single function is named after the method.
struct Disabled {
  static constexpr const char* name = "DISABLED";

  static Expected<void> validate(const Program&) { return {}; }
  static std::string blob_key(const Program& program, std::size_t method, std::uint32_t partition) {
    return detail::own_blob_key(program, method, partition);
  }
  static std::string function_name(const Program& program, std::size_t method, std::uint32_t) {
    return program.methods[method].name;
  }
};

/// The strategy a deduplicate() call uses: Strategy<Positional>,
/// Strategy<OneBlob>, Strategy<Disabled>, or Strategy<YourPolicy>.
template <class Policy>
struct Strategy {
  using policy = Policy;
};

namespace detail {

namespace hana = boost::hana;

/// Used only unevaluated: `implicitly<T>(x)` is well-formed when x converts
/// to T implicitly, as where deduplicate() takes it (a detector written
/// with static_cast accepted explicit conversions it cannot use).
template <class T>
T implicitly(T);
/// Also unevaluated: `x` as deduplicate() reads it, through a const
/// reference (a type whose conversion to std::string_view is not const
/// passed a check on the bare value, then failed inside deduplicate()).
template <class T>
const std::remove_reference_t<T>& as_const_ref(T&&);

// One detector per requirement, so the static_assert can name what is
// missing; each asks what deduplicate() does with the member: the name and
// validate's result converted implicitly, the blob key and function name
// converted implicitly to a std::string_view (so a std::string, a
// std::string_view or a const char* will do; a number or a char, which a
// std::string would take as one character, will not).
//
// The name is named through `*&P::name`: for a static member that is the
// member, for a non-static one a pointer to member, which cannot be
// dereferenced alone (naming a non-static data member directly is allowed
// in decltype, so `name` without `static` would pass).
constexpr auto has_policy_name = hana::is_valid(
    [](auto t) -> decltype((void)implicitly<std::string_view>(as_const_ref(*&decltype(t)::type::name))) {});
// The functions are called as deduplicate() calls them, so overloads and
// templates pass and a non-static one (which needs an object) does not.
// The indexes are std::declval values, not `std::size_t{}`: g++ 12 takes a
// constant 0 for a null pointer, so a policy whose index parameter is a
// std::string_view or const char* passed the check and failed deep inside
// deduplicate() (a review found it), where clang refused it here. They are
// const lvalues, as plan_functions passes them: with rvalues a policy taking
// `std::size_t&&` passed the check and failed inside deduplicate(), and one
// taking `std::size_t&` (which could change the caller's loop counter) was
// refused with a message that did not say why (a review found both).
// Partial specialisations, not hana::is_valid: clang 14 crashed (exit 139)
// on a generic lambda calling a non-static member function without an
// object, and `*&P::f` cannot name an overloaded or template function.
template <class P, class = void>
struct policy_validate_ok : std::false_type {};
template <class P>
struct policy_validate_ok<P, std::void_t<decltype(implicitly<Expected<void>>(P::validate(std::declval<const Program&>())))>>
    : std::true_type {};
template <class P, class = void>
struct policy_blob_key_ok : std::false_type {};
template <class P>
struct policy_blob_key_ok<P, std::void_t<decltype(implicitly<std::string_view>(as_const_ref(P::blob_key(
                                             std::declval<const Program&>(), std::declval<const std::size_t&>(),
                                             std::declval<const std::uint32_t&>()))))>>
    : std::true_type {};
template <class P, class = void>
struct policy_function_name_ok : std::false_type {};
template <class P>
struct policy_function_name_ok<P, std::void_t<decltype(implicitly<std::string_view>(as_const_ref(P::function_name(
                                                  std::declval<const Program&>(), std::declval<const std::size_t&>(),
                                                  std::declval<const std::uint32_t&>()))))>>
    : std::true_type {};

// `static constexpr auto name = nullptr;` converts to a std::string_view as
// well (C++17), and would be read as a C string: no name.
template <class P, class = void>
struct policy_name_is_nullptr : std::false_type {};
template <class P>
struct policy_name_is_nullptr<P, std::void_t<decltype(P::name)>>
    : std::is_same<std::decay_t<decltype(P::name)>, std::nullptr_t> {};

// A policy only declared (its header not included) reads as one missing
// every member: the first static_assert says so instead of naming `name`.
template <class P, class = void>
struct policy_is_complete : std::false_type {};
template <class P>
struct policy_is_complete<P, std::void_t<decltype(sizeof(P))>> : std::true_type {};

template <class P>
constexpr bool policy_has_name =
    decltype(has_policy_name(hana::type_c<P>))::value && !policy_name_is_nullptr<P>::value;
template <class P>
constexpr bool policy_has_validate = policy_validate_ok<P>::value;
template <class P>
constexpr bool policy_has_blob_key = policy_blob_key_ok<P>::value;
template <class P>
constexpr bool policy_has_function_name = policy_function_name_ok<P>::value;

template <class P>
constexpr bool is_strategy_policy = policy_has_name<P> && policy_has_validate<P> &&
                                    policy_has_blob_key<P> && policy_has_function_name<P>;

template <class S>
struct strategy_traits {
  static constexpr bool is_strategy = false;
  using policy = void;
};
template <class P>
struct strategy_traits<Strategy<P>> {
  static constexpr bool is_strategy = true;
  using policy = P;
};

/// Exactly one of these fires for a broken policy: the first missing member.
/// Each member must be public: a `class` policy's members are private
/// unless it says `public:`, and a private member reads as a missing one.
template <class P>
constexpr bool check_policy() {
  // A reference (Strategy<OneBlob&>) has no members to name, yet passes the
  // completeness test (sizeof(T&) is T's): said first, so that the policy
  // it refers to is not blamed for a missing `name` (a review found that).
  constexpr bool reference = std::is_reference<P>::value;
  static_assert(!reference,
                "Strategy<P>: the policy P is a reference type: name the policy type itself "
                "(Strategy<MyPolicy>, not Strategy<MyPolicy&>)");
  constexpr bool complete = !reference && policy_is_complete<P>::value;
  static_assert(reference || complete,
                "Strategy<P>: the policy P is an incomplete type here: include its definition (its "
                "header) before calling deduplicate()");
  static_assert(!complete || policy_has_name<P>,
                "Strategy<P>: the policy P must declare `static constexpr const char* name = "
                "\"MY_POLICY\";` as a public member (printed in reports)");
  static_assert(!complete || !policy_has_name<P> || policy_has_validate<P>,
                "Strategy<P>: the policy P must declare `static wdedup::Expected<void> validate(const "
                "wdedup::Program&)` as a public member (return {} to accept every program): "
                "P::validate(program) must be callable and its result convert implicitly to "
                "wdedup::Expected<void> (a bool does not)");
  static_assert(!complete || !policy_has_name<P> || !policy_has_validate<P> || policy_has_blob_key<P>,
                "Strategy<P>: the policy P must declare `static std::string blob_key(const "
                "wdedup::Program&, std::size_t method, std::uint32_t partition)` as a public member, "
                "naming the blob a partition is compiled into: P::blob_key(program, method, partition) "
                "must be callable with the indexes as const values (by value or by const reference) and "
                "its result convert implicitly to std::string_view (a std::string, a std::string_view or "
                "a const char*; a number or a char does not)");
  static_assert(!complete || !policy_has_name<P> || !policy_has_validate<P> || !policy_has_blob_key<P> ||
                    policy_has_function_name<P>,
                "Strategy<P>: the policy P must declare `static std::string function_name(const "
                "wdedup::Program&, std::size_t method, std::uint32_t partition)` as a public member, "
                "naming the partition's function inside its blob: P::function_name(program, method, "
                "partition) must be callable with the indexes as const values (by value or by const "
                "reference) and its result convert implicitly to std::string_view (a std::string, a "
                "std::string_view or a const char*; a number or a char does not)");
  return is_strategy_policy<P>;
}

/// True when S is Strategy<P> with a complete policy P. A non-Strategy S
/// never instantiates check_policy, so it reports one error, not five.
template <class S>
struct strategy_check {
  static constexpr bool value = false;
};
template <class P>
struct strategy_check<Strategy<P>> {
  static constexpr bool value = check_policy<P>();
};

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_STRATEGY_HPP
