// KeyView (wdedup/runtime/key_view.hpp): the runtime's character view,
// which stands in for std::string_view without including it. Checks the
// constructors, bytewise comparisons in every mix with std::string,
// std::string_view and C strings, the conversions (implicit to
// std::string_view, explicit to std::string), Result<KeyView> to
// Result<std::string_view>, and streaming.
#include "wdedup/runtime/key_view.hpp"

// The point of KeyView: the header does not pull in <string_view>.
#if defined(_GLIBCXX_STRING_VIEW) || defined(_LIBCPP_STRING_VIEW)
#error "wdedup/runtime/key_view.hpp pulled in <string_view>"
#endif

#include <doctest/doctest.h>

#include <array>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "wdedup/runtime/error.hpp"

using wdedup::KeyView;

namespace {
std::string_view take_sv(std::string_view v) { return v; }
std::size_t take_kv(KeyView v) { return v.size(); }
}  // namespace

TEST_CASE("KeyView: constructors view the caller's characters") {
  const char text[] = "abc\0def";
  CHECK(KeyView().data() == nullptr);
  CHECK(KeyView().size() == 0);
  CHECK(KeyView().empty());
  const KeyView c = text;  // NUL-terminated: stops at the first NUL
  CHECK(c.data() == text);
  CHECK(c.size() == 3);
  const char* const none = nullptr;  // a null C string: the empty key, not strlen(nullptr)
  const KeyView z = none;
  CHECK(z.data() == nullptr);
  CHECK(z.size() == 0);
  CHECK(z == KeyView(""));
  const KeyView n(text, 7);  // (pointer, size): NULs inside are kept
  CHECK(n.size() == 7);
  CHECK(n.length() == 7);
  CHECK(n[4] == 'd');
  const std::string s = "hello";
  const KeyView fs = s;
  CHECK(fs.data() == s.data());
  CHECK(fs.size() == 5);
  const std::string_view sv = "world!";
  const KeyView fsv = sv;
  CHECK(fsv.data() == sv.data());
  CHECK(fsv.size() == 6);
  const std::vector<char> v = {'x', 'y'};
  CHECK(KeyView(v).size() == 2);  // explicitly: characters, not text
  // A char array's size counts the NUL and what follows: it is no key
  // without saying so (implicitly it made get_data(name) find nothing).
  static_assert(!std::is_convertible<std::array<char, 16>, KeyView>::value, "an array of chars is not text");
  static_assert(!std::is_convertible<std::vector<char>, KeyView>::value, "a vector of chars is not text");
  static_assert(std::is_constructible<KeyView, std::array<char, 16>>::value, "but can be viewed, explicitly");
  static_assert(std::is_convertible<std::string, KeyView>::value && std::is_convertible<std::string_view, KeyView>::value,
                "text converts");
  CHECK(std::string(fs.begin(), fs.end()) == "hello");
  // Arguments of every kind reach a KeyView parameter.
  CHECK(take_kv("four") == 4);
  CHECK(take_kv(s) == 5);
  CHECK(take_kv(sv) == 6);
  CHECK(take_kv(s + "!") == 6);
  static_assert(std::is_trivially_copyable<KeyView>::value, "KeyView is a plain view");
  static_assert(!std::is_convertible<int, KeyView>::value, "no KeyView from an integer");
}

namespace et_like {
/// The shape of ExecuTorch's portable string_view (runtime/core/portable_type/
/// string_view.h), what a delegate's NamedDataMap is handed keys as: a
/// value_type and a static npos, but no traits_type (a trial's adapter
/// had to spell KeyView(key.data(), key.size()) for every call).
class string_view {
 public:
  using value_type = char;
  using size_type = std::size_t;
  static constexpr size_type npos = size_type(-1);
  constexpr string_view(const char* p, size_type n) : p_(p), n_(n) {}
  constexpr const char* data() const noexcept { return p_; }
  constexpr size_type size() const noexcept { return n_; }

 private:
  const char* p_;
  size_type n_;
};
}  // namespace et_like

TEST_CASE("KeyView: ExecuTorch's portable string_view converts implicitly") {
  static_assert(std::is_convertible<et_like::string_view, KeyView>::value, "ExecuTorch's keys are text");
  const char text[] = "layers.0.wq and more";
  const et_like::string_view key(text, 12);
  const KeyView k = key;
  CHECK(k.data() == text);
  CHECK(k.size() == 12);
  CHECK(k == "layers.0.wq ");
  CHECK(take_kv(key) == 12);
}

TEST_CASE("KeyView: substr clamps instead of failing") {
  const KeyView k = "abcdef";
  CHECK(k.substr(2) == "cdef");
  CHECK(k.substr(2, 3) == "cde");
  CHECK(k.substr(4, 100) == "ef");
  // A count that fits the view but not what is left after pos: clamped to
  // what is left (2 characters), not taken whole (3, reading the NUL past it).
  CHECK(k.substr(4, 3) == "ef");
  CHECK(k.substr(4, 3).size() == 2);
  CHECK(k.substr(1, 6).size() == 5);
  CHECK(k.substr(6).empty());
  CHECK(k.substr(100).empty());
  CHECK(k.substr(100).data() == k.data() + 6);
}

TEST_CASE("KeyView: comparisons are bytewise, then by length, in every mix") {
  const KeyView a = "abc";
  CHECK(a.compare("abc") == 0);
  CHECK(a.compare("abd") < 0);
  CHECK(a.compare("abb") > 0);
  CHECK(a.compare("ab") > 0);
  CHECK(a.compare("abcd") < 0);
  CHECK(KeyView().compare(KeyView("", 0)) == 0);
  // Bytes compare unsigned, as std::string_view's char_traits<char> does.
  const char hi[] = {'\x80'}, lo[] = {'\x01'};
  CHECK(KeyView(hi, 1) > KeyView(lo, 1));
  // A NUL inside a key is a byte like any other.
  CHECK(KeyView("a\0b", 3) != KeyView("a\0c", 3));
  CHECK(KeyView("a\0b", 3) != "a");

  const std::string s = "abc";
  const std::string_view sv = "abd";
  CHECK(a == s);
  CHECK(s == a);
  CHECK(a != sv);
  CHECK(sv != a);
  CHECK(a < sv);
  CHECK(sv > a);
  CHECK(a <= s);
  CHECK(s >= a);
  CHECK_FALSE(s < a);
  CHECK_FALSE(a > s);
  CHECK(a == "abc");
  CHECK("abc" == a);
  CHECK(a != "ab");
  CHECK("abd" > a);
  CHECK(a == KeyView("abcdef", 3));
}

TEST_CASE("KeyView: a view of a prefix compares the bytes it views, not those after it in memory") {
  // "ab" viewed in "abd" against "abc": a prefix, so less (-1), though the
  // byte after it in memory ('d') is past the longer key's ('c'); and the
  // longer key greater (1), though its 'c' is before that 'd'.
  const char abd[] = "abd", abc[] = "abc";
  const KeyView ab(abd, 2), full(abc, 3);
  CHECK(ab.compare(full) == -1);
  CHECK(full.compare(ab) == 1);
  CHECK(ab < full);
  CHECK(full > ab);
  CHECK_FALSE(ab >= full);
  CHECK_FALSE(full <= ab);
  CHECK(ab.compare(std::string("abc")) == -1);
  CHECK(ab < std::string_view("abc"));
}

TEST_CASE("KeyView: a string on the left of <, >, <= and >= is the left operand") {
  // Each mixed operator once true and once false: a string before the key
  // ("abb" < "abc") and one after it ("abd" > "abc"), as std::string and as
  // std::string_view.
  const KeyView k = "abc";
  const std::string lo = "abb", hi = "abd";
  const std::string_view svlo = "abb", svhi = "abd";
  CHECK(lo < k);
  CHECK_FALSE(hi < k);
  CHECK(svlo < k);
  CHECK_FALSE(svhi < k);
  CHECK(hi > k);
  CHECK_FALSE(lo > k);
  CHECK(svhi > k);
  CHECK_FALSE(svlo > k);
  CHECK(lo <= k);
  CHECK_FALSE(hi <= k);
  CHECK(svlo <= k);
  CHECK_FALSE(svhi <= k);
  CHECK(hi >= k);
  CHECK_FALSE(lo >= k);
  CHECK(svhi >= k);
  CHECK_FALSE(svlo >= k);
  // And on the right, the same pairs the other way round.
  CHECK(k < hi);
  CHECK_FALSE(k < lo);
  CHECK(k > svlo);
  CHECK_FALSE(k > svhi);
  CHECK(k <= hi);
  CHECK_FALSE(k <= lo);
  CHECK(k >= svlo);
  CHECK_FALSE(k >= svhi);
}

TEST_CASE("KeyView: == and != with a string on either side are false and true for one before, after, shorter or longer") {
  // Each mixed == and != (KeyView with std::string or std::string_view, on
  // either side) once with an equal string and once with each that differs:
  // "abb" before "abc", "abd" after it, its prefix "ab" and "abcd", which it
  // is a prefix of. (Only equal strings were compared: an == that was
  // compare() <= 0, or a != that was compare() < 0, passed.)
  const KeyView k = "abc";
  const std::string equal = "abc", before = "abb", after = "abd";
  const std::string_view shorter = "ab", longer = "abcd";
  CHECK(k == equal);
  CHECK(equal == k);
  CHECK_FALSE(k != equal);
  CHECK_FALSE(equal != k);
  const auto differs = [&k](const auto& other) {
    CHECK_FALSE(k == other);
    CHECK_FALSE(other == k);
    CHECK(k != other);
    CHECK(other != k);
  };
  differs(before);
  differs(after);
  differs(shorter);
  differs(longer);
}

TEST_CASE("KeyView: <= and >= are true for equal keys, false past them, KeyView with KeyView and with strings") {
  const KeyView a = "abc", same("abcdef", 3), b = "abd";
  CHECK(a <= same);
  CHECK(a >= same);
  CHECK(a <= b);
  CHECK_FALSE(b <= a);
  CHECK(b >= a);
  CHECK_FALSE(a >= b);
  CHECK(a < b);
  CHECK_FALSE(a < same);
  const std::string s = "abc", t = "abb";
  CHECK(a <= s);
  CHECK(a >= s);
  CHECK(s <= a);
  CHECK(s >= a);
  CHECK(a >= t);
  CHECK_FALSE(a <= t);
  CHECK(t <= a);
  CHECK_FALSE(t >= a);
}

namespace traits_only {
/// Char traits, as a string type has, but no (pointer, size) constructor:
/// nothing KeyView can convert to.
struct Text {
  using traits_type = std::char_traits<char>;
};
}  // namespace traits_only

TEST_CASE("KeyView: converts to std::string_view implicitly, std::string explicitly") {
  const KeyView k("key\0tail", 8);
  const std::string_view sv = k;
  CHECK(sv.size() == 8);
  CHECK(sv.data() == k.data());
  CHECK(take_sv(k) == std::string_view("key\0tail", 8));
  const std::string s(k);
  CHECK(s == std::string("key\0tail", 8));
  CHECK(static_cast<std::string>(KeyView("x")) == "x");
  std::string t = "<";
  t += KeyView("a");
  t.append(KeyView("b"));
  CHECK(t == "<ab");
  t = KeyView("c");
  CHECK(t == "c");
  static_assert(std::is_convertible<KeyView, std::string_view>::value, "views convert implicitly");
  static_assert(!std::is_convertible<KeyView, std::string>::value, "copies are explicit");
  static_assert(std::is_constructible<std::string, KeyView>::value, "std::string(key) works");
  // Only to a type it can make from its pointer and size: a type with char
  // traits and a default constructor alone is offered no conversion (one
  // declared would make the traits say "convertible" and the conversion
  // fail to compile inside KeyView).
  static_assert(!std::is_constructible<traits_only::Text, KeyView>::value &&
                    !std::is_convertible<KeyView, traits_only::Text>::value,
                "no (pointer, size) constructor: no conversion");
}

TEST_CASE("KeyView: Result<KeyView> converts to Result<std::string_view>") {
  const wdedup::Result<KeyView> ok(KeyView("abc"));
  const wdedup::Result<std::string_view> sv = ok;
  REQUIRE(sv.ok());
  CHECK(*sv == "abc");
  const wdedup::Result<KeyView> bad(wdedup::Error::NotFound, "no such key", 7);
  const wdedup::Result<std::string_view> bsv = bad;
  CHECK(bsv.error() == wdedup::Error::NotFound);
  CHECK(std::string(bsv.failure().what) == "no such key");
  CHECK(bsv.failure().at == 7);
}

TEST_CASE("KeyView: streams its characters") {
  std::ostringstream os;
  os << KeyView("ab\0c", 4) << '|' << KeyView();
  CHECK(os.str() == std::string("ab\0c|", 5));
}
