// tests/support/ptd_files.hpp — test-only helpers for the runtime tests:
// fixture discovery, reading and writing whole files, aligned byte buffers,
// opening one NamedDataMap through each kind of DataSource, and sources
// that are not memory-backed (one of them failing on demand).
//
// The fixture helpers fail the running test case with a message when the
// fixtures are missing. Under -fno-exceptions doctest itself would carry on
// past a failed REQUIRE (tests/doctest_main.cpp ends the run there
// instead); they still return something safe to iterate (fewer paths,
// empty bytes), so a build with another runner cannot crash on them.
#ifndef WDEDUP_TESTS_SUPPORT_PTD_FILES_HPP
#define WDEDUP_TESTS_SUPPORT_PTD_FILES_HPP

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "require_value.hpp"
#include "wdedup/runtime.hpp"

namespace wdedup_test {

/// The fixtures shipped in ../shared/fixtures/ptd: aliases, alignment, empty,
/// large_segment, layouts, many_keys, simple.
constexpr std::size_t kShippedFixtureCount = 7;

/// Where the fixtures are expected and how to get them, for failure messages.
inline std::string fixtures_hint() {
  return std::string("fixtures are read from " WDEDUP_FIXTURES_DIR
                     ": the shared checkout must sit beside this clone as ../shared "
                     "(or configure with -Dfixtures_dir=DIR)");
}

/// Every *.ptd in the fixtures directory, sorted by name (the directory is
/// iterated, so a new fixture is covered without touching the tests). Fails
/// the running test case if fewer than the shipped set are found: a loop
/// over no fixtures would otherwise pass without testing anything.
inline std::vector<std::string> fixture_paths() {
  std::vector<std::string> out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(WDEDUP_FIXTURES_DIR, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".ptd") out.push_back(it->path().string());
  std::sort(out.begin(), out.end());
  REQUIRE_MESSAGE(out.size() >= kShippedFixtureCount, "found ", out.size(), " .ptd fixtures, expected at least ",
                  kShippedFixtureCount, (ec ? " (" + ec.message() + ")" : std::string()), "; ", fixtures_hint());
  return out;
}

inline std::string fixture(const char* name) { return std::string(WDEDUP_FIXTURES_DIR) + "/" + name; }

inline std::vector<std::uint8_t> read_file(const std::string& path) {
  std::vector<std::uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  std::uint8_t buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

/// The bytes of fixture `name`; fails the running test case (and returns
/// nothing) if the file is missing or empty.
inline std::vector<std::uint8_t> read_fixture(const char* name) {
  std::vector<std::uint8_t> out = read_file(fixture(name));
  REQUIRE_MESSAGE(!out.empty(), "cannot read fixture ", std::string(name), "; ", fixtures_hint());
  return out;
}

inline std::string read_text(const std::string& path) {
  const std::vector<std::uint8_t> b = read_file(path);
  return std::string(b.begin(), b.end());
}

/// Writes `bytes` to `path`; false if the file could not be written whole.
inline bool write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  return std::fclose(f) == 0 && ok;
}

/// Whether `path` names anything, a dangling symbolic link included
/// (lstat: the link itself).
inline bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

/// The names in directory `dir` but "." and "..", in the order readdir
/// gives them; empty if it cannot be read (then *opened, if given, is false).
inline std::vector<std::string> dir_entries(const std::string& dir, bool* opened = nullptr) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (opened != nullptr) *opened = d != nullptr;
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) names.emplace_back(e->d_name);
  ::closedir(d);
  return names;
}

/// Writes `bytes` to WDEDUP_TEST_TMPDIR/name and returns the path. Several
/// test programs write the same file (wdedup_file_path()) and meson runs
/// them in parallel: written in place, one of them truncated the file while
/// another was reading it (a sporadic failure of named_data_map beside
/// allocations). Written to a name of this process's own and renamed over
/// it, a reader sees the old file or the new one, each whole (the same bytes).
inline std::string write_temp(const std::string& name, const std::vector<std::uint8_t>& bytes) {
  const std::string path = std::string(WDEDUP_TEST_TMPDIR) + "/" + name;
  const std::string tmp = path + ".tmp" + std::to_string(static_cast<long long>(::getpid()));
  if (!write_file(tmp, bytes) || std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    write_file(path, bytes);  // (the test that reads it says what is wrong)
  }
  return path;
}

#ifndef WDEDUP_NO_POSIX
/// `source`'s read of 8 bytes at `offset` after its descriptor is made a
/// directory's (`dir`, by dup2): a pread that fails with EISDIR.
inline wdedup::Status read_from_directory(wdedup::FileSource& source, const char* dir, std::uint64_t offset) {
  const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::dup2(fd, source.fd()) == source.fd());
  ::close(fd);
  std::uint8_t b[8];
  return source.read(offset, b, sizeof b);
}
#endif

/// Bytes at an address aligned to `alignment` (plus an optional offset, to
/// make deliberately misaligned buffers).
class AlignedBytes {
 public:
  AlignedBytes() = default;
  explicit AlignedBytes(std::size_t size, std::size_t alignment = 4096, std::size_t misalign = 0)
      : size_(size), misalign_(misalign) {
    const std::size_t total = ((size + misalign + alignment - 1) / alignment + 1) * alignment;
    mem_.reset(static_cast<std::uint8_t*>(std::aligned_alloc(alignment, total)));
    std::memset(mem_.get(), 0, total);
  }
  AlignedBytes(const std::vector<std::uint8_t>& bytes, std::size_t alignment = 4096, std::size_t misalign = 0)
      : AlignedBytes(bytes.size(), alignment, misalign) {
    if (!bytes.empty()) std::memcpy(data(), bytes.data(), bytes.size());
  }
  std::uint8_t* data() const { return mem_.get() + misalign_; }
  std::size_t size() const { return size_; }
  wdedup::Span<std::uint8_t> span() const { return wdedup::Span<std::uint8_t>(data(), size_); }

 private:
  struct Free {
    void operator()(std::uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<std::uint8_t, Free> mem_;
  std::size_t size_ = 0;
  std::size_t misalign_ = 0;
};

/// How a test reaches a file: mmap (in place), pread with lent metadata
/// memory, caller memory (in place), or caller memory at an odd address
/// with lent metadata memory (views where a key's alignment is met there,
/// aligned copies where not). Built with WDEDUP_NO_POSIX (no mmap, no
/// pread), the last two only.
enum class Via { Mmap, File, Buffer, BufferLent };
inline const char* via_name(Via v) {
  return v == Via::Mmap ? "mmap" : v == Via::File ? "file" : v == Via::Buffer ? "buffer" : "buffer, lent";
}
#ifndef WDEDUP_NO_POSIX
constexpr Via kAllVias[] = {Via::Mmap, Via::File, Via::Buffer, Via::BufferLent};
#else
constexpr Via kAllVias[] = {Via::Buffer, Via::BufferLent};
#endif

/// A source and the map opened over it, kept at a stable address (the map
/// points at the source and the lent memory).
struct Opened {
  Via via = Via::Buffer;
#ifndef WDEDUP_NO_POSIX
  std::optional<wdedup::MmapSource> mmap;
  std::optional<wdedup::FileSource> file;
#endif
  AlignedBytes bytes;  // Via::Buffer and Via::BufferLent: the file's contents
  wdedup::BufferSource buffer;
  AlignedBytes metadata;  // Via::File and Via::BufferLent: lent metadata memory
  const wdedup::DataSource* source = nullptr;
  std::optional<wdedup::Result<wdedup::NamedDataMap>> result;

  bool ok() const { return result && result->ok(); }
  // The open map, REQUIRE-d open first: value() of a failed Result traps
  // (SIGILL, no report) and * of an empty optional is undefined.
  const wdedup::NamedDataMap& map() const {
    require_open();
    return result->value();
  }
  wdedup::NamedDataMap& map() {
    require_open();
    return result->value();
  }
  wdedup::Error error() const { return result ? result->error() : wdedup::Error::IoError; }

 private:
  void require_open() const {
    REQUIRE_MESSAGE(ok(), "map() of a file that did not open: ",
                    result ? failure_text(*result) : std::string("nothing was opened"));
  }
};

/// Opens `o`'s source with lent metadata memory, sized as it asks.
inline void open_lent(Opened& o) {
  wdedup::Result<std::uint64_t> need = wdedup::NamedDataMap::metadata_size(*o.source);
  if (!need) {
    o.result.emplace(need.failure());
    return;
  }
  o.metadata = AlignedBytes(static_cast<std::size_t>(*need), 8);
  o.result.emplace(wdedup::NamedDataMap::open(*o.source, o.metadata.span()));
}

#ifndef WDEDUP_NO_POSIX
/// Metadata memory for `path`, as PreadFile::metadata_size says.
inline AlignedBytes metadata_for(const std::string& path) {
  const wdedup::Result<std::uint64_t> need = wdedup::PreadFile::metadata_size(path.c_str());
  REQUIRE_MESSAGE(need.ok(), path, ": ", need.failure().what);
  return AlignedBytes(static_cast<std::size_t>(*need), 8);
}
#endif

inline std::unique_ptr<Opened> open_via(Via via, const std::string& path) {
  auto o = std::make_unique<Opened>();
  o->via = via;
  switch (via) {
#ifndef WDEDUP_NO_POSIX
    case Via::Mmap: {
      wdedup::Result<wdedup::MmapSource> s = wdedup::MmapSource::open(path.c_str());
      if (!s) return o;
      o->mmap.emplace(std::move(s).value());
      o->source = &*o->mmap;
      o->result.emplace(wdedup::NamedDataMap::open(*o->source));
      break;
    }
    case Via::File: {
      wdedup::Result<wdedup::FileSource> s = wdedup::FileSource::open(path.c_str());
      if (!s) return o;
      o->file.emplace(std::move(s).value());
      o->source = &*o->file;
      open_lent(*o);
      break;
    }
#else
    case Via::Mmap:
    case Via::File:
      FAIL("no mmap or pread with WDEDUP_NO_POSIX");
      break;
#endif
    case Via::Buffer: {
      o->bytes = AlignedBytes(read_file(path), 8);
      o->buffer = wdedup::BufferSource(o->bytes.data(), o->bytes.size());
      o->source = &o->buffer;
      o->result.emplace(wdedup::NamedDataMap::open(*o->source));
      break;
    }
    case Via::BufferLent: {
      // One past a page boundary: only alignment 1 is met everywhere.
      o->bytes = AlignedBytes(read_file(path), 4096, 1);
      o->buffer = wdedup::BufferSource(o->bytes.data(), o->bytes.size());
      o->source = &o->buffer;
      open_lent(*o);
      break;
    }
  }
  return o;
}

/// A source that is not memory-backed (like FileSource) over the first
/// `size` bytes of caller memory: exercises the lent-metadata path without
/// touching the file system.
class ReadOnlySource final : public wdedup::DataSource {
 public:
  ReadOnlySource(const std::uint8_t* data, std::uint64_t size) : data_(data), size_(size) {}
  std::uint64_t size() const noexcept override { return size_; }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  wdedup::Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
    if (offset > size_ || size > size_ - offset)
      return wdedup::Status(wdedup::Error::Truncated, "read past the end", offset);
    if (size) std::memcpy(dst, data_ + offset, static_cast<std::size_t>(size));
    return wdedup::detail::ok_status();
  }

 private:
  const std::uint8_t* data_;
  std::uint64_t size_;
};

/// ReadOnlySource that fails like a device: a read reaching byte `fail_from`
/// or past it is IoError (kWhat, at = the read's offset); reads wholly
/// before it succeed. With fail_from at segment_base_offset the metadata
/// reads fine and every read of segment data fails.
class FailingSource final : public wdedup::DataSource {
 public:
  static constexpr const char* kWhat = "injected read failure";
  FailingSource(const std::uint8_t* data, std::uint64_t size, std::uint64_t fail_from)
      : data_(data), size_(size), fail_from_(fail_from) {}
  std::uint64_t size() const noexcept override { return size_; }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  wdedup::Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
    if (offset > size_ || size > size_ - offset)
      return wdedup::Status(wdedup::Error::Truncated, "read past the end", offset);
    if (offset >= fail_from_ || size > fail_from_ - offset) return wdedup::Status(wdedup::Error::IoError, kWhat, offset);
    if (size) std::memcpy(dst, data_ + offset, static_cast<std::size_t>(size));
    return wdedup::detail::ok_status();
  }

 private:
  const std::uint8_t* data_;
  std::uint64_t size_;
  std::uint64_t fail_from_;
};

/// Opens in-memory bytes as a BufferSource map (8-aligned copy).
inline std::unique_ptr<Opened> open_bytes(const std::vector<std::uint8_t>& bytes,
                                          const wdedup::OpenOptions& options = {}) {
  auto o = std::make_unique<Opened>();
  o->bytes = AlignedBytes(bytes, 8);
  o->buffer = wdedup::BufferSource(o->bytes.data(), o->bytes.size());
  o->source = &o->buffer;
  o->result.emplace(wdedup::NamedDataMap::open(*o->source, options));
  return o;
}

/// Opens in-memory bytes as a BufferSource `misalign` bytes past a page,
/// with lent metadata memory (the overload that takes memory anywhere).
inline std::unique_ptr<Opened> open_bytes_lent(const std::vector<std::uint8_t>& bytes, std::size_t misalign) {
  auto o = std::make_unique<Opened>();
  o->bytes = AlignedBytes(bytes, 4096, misalign);
  o->buffer = wdedup::BufferSource(o->bytes.data(), o->bytes.size());
  o->source = &o->buffer;
  open_lent(*o);
  return o;
}

/// A key's bytes, as a string.
inline std::string key_text(wdedup::KeyView k) { return std::string(k.data(), k.size()); }

/// Where the `n` bytes at `needle` occur in bytes[0, end), REQUIRE-d to be
/// exactly one place: a test that patches a file there changes what it
/// means to and nothing else.
inline std::size_t only_place_of(const std::vector<std::uint8_t>& bytes, const void* needle, std::size_t n,
                                 std::size_t end = SIZE_MAX) {
  end = (std::min)(end, bytes.size());
  std::vector<std::size_t> at;
  for (std::size_t p = 0; p + n <= end; ++p)
    if (std::memcmp(bytes.data() + p, needle, n) == 0) at.push_back(p);
  REQUIRE(at.size() == 1);
  return at[0];
}

/// `m` reads every key as `ref` (a map of the same file) does: names, bytes
/// through get_data and load_data_into, offsets and layouts; `each` is
/// given each of m's get_data results, for checks of its own (a view or a
/// copy). Of a file of thousands of keys, every 16th and the last: without
/// an index (many_keys.ptd) each lookup scans, and all 4096 in each check
/// took a minute of a test under ASan.
template <class Each>
void check_reads_as(const wdedup::NamedDataMap& m, const wdedup::NamedDataMap& ref, Each each) {
  // ([[maybe_unused]]: what only assertions read, which the fuzzers' seed
  // maker, built with DOCTEST_CONFIG_DISABLE, compiles away.)
  const std::size_t n = REQUIRE_VALUE(ref.get_num_keys());
  [[maybe_unused]] const std::size_t m_keys = REQUIRE_VALUE(m.get_num_keys());
  REQUIRE(m_keys == n);
  CHECK(m.file_size() == ref.file_size());
  CHECK(m.function_count() == ref.function_count());
  std::vector<std::size_t> keys;
  for (std::size_t i = 0; i < n; i += n > 1024 ? 16 : 1) keys.push_back(i);
  if (n != 0 && keys.back() != n - 1) keys.push_back(n - 1);
  std::vector<std::uint8_t> buf;
  for (const std::size_t i : keys) {
    const wdedup::KeyView k = REQUIRE_VALUE(ref.get_key(i));
    CAPTURE(key_text(k));
    [[maybe_unused]] const wdedup::KeyView m_key = REQUIRE_VALUE(m.get_key(i));
    CHECK(key_text(m_key) == key_text(k));
    wdedup::Result<wdedup::DataBuffer> a = m.get_data(k), b = ref.get_data(k);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a->size() == b->size());
    CHECK(std::memcmp(a->data(), b->data(), a->size()) == 0);
    each(*a);
    buf.assign(b->size() + 1, 0x5A);  // (b's size: `each` may have released a)
    REQUIRE(m.load_data_into(k, buf.data(), b->size()).ok());
    CHECK(std::memcmp(buf.data(), b->data(), b->size()) == 0);
    CHECK(buf.back() == 0x5A);
    [[maybe_unused]] const wdedup::KeyInfo m_info = REQUIRE_VALUE(m.find(k)), ref_info = REQUIRE_VALUE(ref.find(k));
    CHECK(m_info.offset == ref_info.offset);
    wdedup::Result<wdedup::TensorLayout> la = m.get_tensor_layout(k), lb = ref.get_tensor_layout(k);
    REQUIRE(la.ok() == lb.ok());
    if (la.ok()) CHECK(la->nbytes() == lb->nbytes());
  }
}
inline void check_reads_as(const wdedup::NamedDataMap& m, const wdedup::NamedDataMap& ref) {
  check_reads_as(m, ref, [](wdedup::DataBuffer&) {});
}

}  // namespace wdedup_test

#endif  // WDEDUP_TESTS_SUPPORT_PTD_FILES_HPP
