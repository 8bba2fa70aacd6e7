// The runtime half stays light: the umbrella <wdedup/runtime.hpp> pulls in
// no <string>, <vector>, <map>, <memory>, <iostream>, <atomic>, xxhash or
// Boost (checked at compile time below, before anything else is included),
// and every header under include/wdedup/runtime includes only the allowed
// standard and POSIX headers (checked by reading them). Each public runtime
// header is also compiled on its own by the `headers` suite
// (tests/headers/meson.build); the last test case checks that every public
// runtime header is listed there, so a new header cannot slip through.
#include "wdedup/runtime.hpp"

// libstdc++ and libc++ include guards of the forbidden headers.
#if defined(_GLIBCXX_STRING) || defined(_LIBCPP_STRING)
#error "wdedup/runtime.hpp pulled in <string>"
#endif
#if defined(_GLIBCXX_VECTOR) || defined(_LIBCPP_VECTOR)
#error "wdedup/runtime.hpp pulled in <vector>"
#endif
#if defined(_GLIBCXX_MAP) || defined(_LIBCPP_MAP)
#error "wdedup/runtime.hpp pulled in <map>"
#endif
#if defined(_GLIBCXX_MEMORY) || defined(_LIBCPP_MEMORY)
#error "wdedup/runtime.hpp pulled in <memory>"
#endif
#if defined(_GLIBCXX_IOSTREAM) || defined(_LIBCPP_IOSTREAM)
#error "wdedup/runtime.hpp pulled in <iostream>"
#endif
#if defined(_GLIBCXX_ATOMIC) || defined(_LIBCPP_ATOMIC)
#error "wdedup/runtime.hpp pulled in <atomic>"
#endif
#if defined(_GLIBCXX_FUNCTIONAL) || defined(_LIBCPP_FUNCTIONAL)
#error "wdedup/runtime.hpp pulled in <functional>"
#endif
#if defined(XXHASH_H_5627135585666179) || defined(XXH_VERSION_MAJOR)
#error "wdedup/runtime.hpp pulled in xxhash.h (only wdedup/runtime/verify.hpp may)"
#endif
#if defined(BOOST_CONFIG_HPP) || defined(BOOST_VERSION)
#error "wdedup/runtime.hpp pulled in Boost"
#endif
// Remember the verdict for the run-time report, then include the rest.
namespace {
constexpr bool kUmbrellaIsLight = true;
}

// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// The includes the style guide allows in runtime headers.
const std::set<std::string> kAllowedSystem = {
    "cstddef", "cstdint", "cstring", "type_traits", "string_view", "new", "cstdlib",
    "fcntl.h", "unistd.h", "sys/mman.h", "sys/stat.h", "cerrno",
};

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Every `#include` of a file, as written ("<x>" or "\"x\"").
std::vector<std::string> includes_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const std::size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line.compare(start, 1, "#") != 0) continue;
    std::size_t p = line.find_first_not_of(" \t", start + 1);
    if (p == std::string::npos || line.compare(p, 7, "include") != 0) continue;
    p = line.find_first_of("<\"", p);
    if (p == std::string::npos) continue;
    const std::size_t end = line.find(line[p] == '<' ? '>' : '"', p + 1);
    out.push_back(line.substr(p, end - p + 1));
  }
  return out;
}

std::vector<std::filesystem::path> runtime_headers() {
  std::vector<std::filesystem::path> out;
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::path(WDEDUP_INCLUDE_DIR) / "wdedup" / "runtime";
  for (std::filesystem::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".hpp") out.push_back(it->path());
  out.push_back(std::filesystem::path(WDEDUP_INCLUDE_DIR) / "wdedup" / "runtime.hpp");
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("the runtime umbrella pulls in nothing heavy") {
  CHECK(kUmbrellaIsLight);  // the #error checks above decided this at compile time
}

TEST_CASE("runtime headers include only the allowed standard/POSIX headers and runtime headers") {
  const std::vector<std::filesystem::path> headers = runtime_headers();
  REQUIRE(headers.size() >= 10);
  for (const std::filesystem::path& h : headers) {
    const std::string name = h.filename().string();
    CAPTURE(h.string());
    // xxhash.h comes in through runtime/detail/xxhash.hpp alone, and of the
    // runtime headers only verify.hpp (not in the umbrella) includes that.
    const bool is_verify = name == "verify.hpp", is_xxhash = name == "xxhash.hpp";
    for (const std::string& inc : includes_of(slurp(h))) {
      CAPTURE(inc);
      const std::string bare = inc.substr(1, inc.size() - 2);
      if (inc[0] == '"') {
        // Project headers: only the runtime half (never the build-time half).
        CHECK((bare == "wdedup/runtime.hpp" || bare.rfind("wdedup/runtime/", 0) == 0));
        if (bare == "wdedup/runtime/detail/xxhash.hpp") CHECK(is_verify);
      } else if (is_xxhash && bare == "xxhash.h") {
        // The wrapper's one include outside the standard library.
      } else {
        CHECK(kAllowedSystem.count(bare) == 1);
        // POSIX comes in through file_sources.hpp alone, which
        // WDEDUP_NO_POSIX leaves out (the headers suite compiles the rest
        // against stand-ins that #error).
        if (bare.find(".h") != std::string::npos) CHECK(name == "file_sources.hpp");
      }
    }
  }
  // The umbrella does not include verify.hpp.
  const std::string umbrella = slurp(std::filesystem::path(WDEDUP_INCLUDE_DIR) / "wdedup" / "runtime.hpp");
  CHECK(umbrella.find("verify.hpp\"") == std::string::npos);
}

TEST_CASE("every public runtime header is compiled on its own by the headers suite") {
  const std::string suite = slurp(std::filesystem::path(WDEDUP_INCLUDE_DIR) / ".." / "tests" / "headers" / "meson.build");
  REQUIRE(!suite.empty());
  for (const std::filesystem::path& h : runtime_headers()) {
    const std::string rel = std::filesystem::relative(h, WDEDUP_INCLUDE_DIR).generic_string();
    if (rel.find("/detail/") != std::string::npos) continue;  // internal: compiled through the public ones
    CAPTURE(rel);
    CHECK(suite.find("'" + rel + "'") != std::string::npos);
  }
}
