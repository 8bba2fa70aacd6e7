// tools/cli.hpp — command-line pieces the demo (tools/wdedup_demo.cpp) and
// the benchmark harness (benchmarks/main.cpp) share: splitting a list flag,
// and telling when two paths name one file. Each tool words its own
// refusals; these only answer.
#ifndef WDEDUP_TOOLS_CLI_HPP
#define WDEDUP_TOOLS_CLI_HPP

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include <sys/stat.h>
#include <sys/types.h>

namespace wdedup_cli {

/// The items of a comma-separated list, or false if one is empty ("a,,b",
/// "dedup,"): a stray comma is refused alike by every list flag, rather than
/// taken by some and dropped by others.
inline bool split_items(const std::string& s, std::vector<std::string>* out) {
  out->clear();
  std::size_t at = 0;
  while (at <= s.size()) {
    const std::size_t comma = std::min(s.find(',', at), s.size());
    if (comma == at) return false;
    out->push_back(s.substr(at, comma - at));
    at = comma + 1;
  }
  return true;
}

/// The first two of `paths` that name one file under any two names (a
/// symbolic link, a hard link, "./": one device and inode), as {earlier,
/// later}; {0, 0} if none. A path that cannot be looked at names no file
/// here (the caller's open of it names its error).
inline std::pair<std::size_t, std::size_t> same_file_twice(const std::vector<std::string>& paths) {
  std::vector<std::pair<dev_t, ino_t>> ids(paths.size(), {0, 0});
  for (std::size_t k = 0; k < paths.size(); ++k) {
    struct stat st {};
    if (::stat(paths[k].c_str(), &st) != 0) continue;
    ids[k] = {st.st_dev, st.st_ino};
    for (std::size_t j = 0; j < k; ++j)
      if (ids[j] == ids[k]) return {j, k};
  }
  return {0, 0};
}

/// The real path of `path` (symbolic links, "." and ".." resolved), or ""
/// if it does not exist.
inline std::string real_path(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) return {};
  std::string out = real;
  std::free(real);
  return out;
}

}  // namespace wdedup_cli

#endif  // WDEDUP_TOOLS_CLI_HPP
