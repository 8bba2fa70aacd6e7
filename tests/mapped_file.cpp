// Tests for wdedup/runtime/mapped_file.hpp: a MappedFile (and a PreadFile,
// over a FileSource with lent metadata memory) reads exactly as a map
// opened over an MmapSource beside it, after being returned, moved, moved
// into a growing vector and moved over; views and function maps it gave
// out stay valid across the moves; each open's failure is passed on, and
// its options too. Built with -fno-exceptions -fno-rtti.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
#include <doctest/doctest.h>

#include "support/wdedup_file.hpp"  // first: see the note there

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/colliding_keys.hpp"
#include "support/nav.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "support/this_case_again.hpp"
#include "wdedup/runtime.hpp"

using namespace wdedup;
using namespace wdedup_test;

static_assert(std::is_nothrow_move_constructible<MappedFile>::value, "a growing std::vector moves it");
static_assert(std::is_nothrow_move_assignable<MappedFile>::value, "moves");
static_assert(!std::is_copy_constructible<MappedFile>::value, "one owner per mapping");
static_assert(!std::is_copy_assignable<MappedFile>::value, "one owner per mapping");
// The map is lent out const only: `file.map() = other.map()` would give the
// next move another file's map to point at this file's source.
static_assert(std::is_same<decltype(std::declval<MappedFile&>().map()), const NamedDataMap&>::value, "const map");
static_assert(std::is_same<decltype(std::declval<MappedFile&>().operator->()), const NamedDataMap*>::value,
              "const map");

namespace {

MappedFile open_or_die(const std::string& path) {
  Result<MappedFile> f = MappedFile::open(path.c_str());
  REQUIRE_MESSAGE(f.ok(), path, ": ", f.failure().what);
  return std::move(f).value();
}

std::string text(KeyView k) { return std::string(k.data(), k.size()); }

/// What a MappedFile of `path` must read as: a map over an MmapSource
/// beside it, both staying where they are.
struct Reference {
  explicit Reference(const std::string& path) : src(MmapSource::open(path.c_str())) {
    REQUIRE(src.ok());
    map.emplace(NamedDataMap::open(*src));
    REQUIRE(map->ok());
  }
  Reference(const Reference&) = delete;
  Reference& operator=(const Reference&) = delete;
  const NamedDataMap* operator->() const { return &map->value(); }
  const NamedDataMap& operator*() const { return map->value(); }

  Result<MmapSource> src;
  std::optional<Result<NamedDataMap>> map;
};

/// `f` (a MappedFile or a PreadFile) reads every key as `ref` (a map over
/// an MmapSource of the same file) does, and its map reads through f's own
/// source: views into the mapping, or copies read through the descriptor.
template <class File>
void check_same(const File& f, const NamedDataMap& ref) {
  constexpr bool mapped = std::is_same<File, MappedFile>::value;
  CHECK(&f.map().source() == &f.source());
  REQUIRE(f.map().check_source().ok());
  CHECK(f->is_memory_backed() == mapped);
  CHECK(f.source().size() == ref.file_size());
  check_reads_as(f.map(), ref, [](DataBuffer& a) {
    if (mapped) CHECK(a.release() == nullptr);          // a view into the mapping, not a copy
    else CHECK(a.owns_memory() == (a.size() != 0));    // a copy, read through the source
  });
}

}  // namespace

TEST_CASE("MappedFile: every fixture and a wdedup file read as over an MmapSource, after every kind of move") {
  std::vector<std::string> paths = fixture_paths();
  paths.push_back(wdedup_file_path());
  for (const std::string& path : paths) {
    CAPTURE(path);
    const Reference ref(path);

    // Returned from a function (a Result, then moved out of it).
    MappedFile first = open_or_die(path);
    check_same(first, *ref);
    // A view taken now, and the address of the mapping.
    const std::uint8_t* base = first.source().data();
    const void* early = nullptr;
    const std::size_t num_keys = REQUIRE_VALUE(ref->get_num_keys());
    if (num_keys != 0) {
      const KeyView key0 = REQUIRE_VALUE(ref->get_key(0));
      early = REQUIRE_VALUE(first->get_data(key0)).data();
    }

    // Moved into a vector that grows: each reallocation moves every element.
    std::vector<MappedFile> files;
    files.push_back(std::move(first));
    for (int i = 0; i < 9; ++i) files.push_back(open_or_die(path));
    REQUIRE(files.capacity() > 1);
    for (const MappedFile& f : files) check_same(f, *ref);
    CHECK(files[0].source().data() == base);  // the same mapping, never copied
    if (early != nullptr) {
      const KeyInfo k0 = REQUIRE_VALUE(ref->key_info(0));
      CHECK(early == base + k0.offset);
      CHECK(std::memcmp(early, ref.src->data() + k0.offset, static_cast<std::size_t>(k0.size)) == 0);
    }
    // The moved-from object holds nothing, and its map says so.
    CHECK(first.source().size() == 0);
    CHECK(first.map().check_source().error() == Error::InvalidArgument);
  }
}

TEST_CASE("MappedFile: an index built before the moves is kept by every move") {
  // many_keys.ptd (ExecuTorch's, 4096 keys) has no index of its own.
  const std::string path = fixture("many_keys.ptd");
  const Reference ref(path);
  const std::size_t n = REQUIRE_VALUE(ref->get_num_keys());
  REQUIRE(n == 4096);
  MappedFile first = open_or_die(path);
  REQUIRE_FALSE(first->has_index());
  AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(n)), 8);
  REQUIRE(first.build_index(index.span()).ok());
  REQUIRE(first->has_index());
  std::vector<MappedFile> files;
  files.push_back(std::move(first));
  for (int i = 0; i < 5; ++i) files.push_back(open_or_die(path));  // (these without)
  const MappedFile& f = files[0];
  CHECK(f->has_index());
  for (std::size_t i = 0; i < n; ++i) {
    const KeyView k = REQUIRE_VALUE(ref->get_key(i));
    const Result<KeyInfo> info = f->find(k);
    REQUIRE(info.ok());
    CHECK(info->key_index == i);
    const KeyInfo ref_info = REQUIRE_VALUE(ref->find(k));
    CHECK(info->offset == ref_info.offset);
  }
  CHECK(f->find("no such key").error() == Error::NotFound);
  CHECK_FALSE(files[1]->has_index());
}

TEST_CASE("MappedFile: a function map found before a move reads the same after it") {
  const Reference ref(wdedup_file_path());
  REQUIRE(ref->function_count() == 3);
  MappedFile a = open_or_die(wdedup_file_path());
  Result<FunctionView> before = a->function(0);
  REQUIRE(before.ok());
  const std::string method = text(before->method()), blob = text(before->blob_key());
  MappedFile b = std::move(a);
  Result<FunctionView> after = b->find_function(before->method(), before->partition_index());
  REQUIRE(after.ok());
  CHECK(text(after->function_name()) == text(before->function_name()));
  CHECK(text(before->method()) == method);  // the view still reads the mapping
  CHECK(text(after->blob_key()) == blob);
  REQUIRE(after->tensor_count() == before->tensor_count());
  const FunctionView ref_function = REQUIRE_VALUE(ref->function(0));
  for (std::size_t i = 0; i < after->tensor_count(); ++i) {
    const FunctionTensorView after_i = REQUIRE_VALUE(after->tensor(i));
    const FunctionTensorView before_i = REQUIRE_VALUE(before->tensor(i));
    const FunctionTensorView ref_i = REQUIRE_VALUE(ref_function.tensor(i));
    CHECK(text(after_i.key) == text(before_i.key));
    CHECK(text(after_i.tensor_name) == text(ref_i.tensor_name));
  }
}

TEST_CASE("MappedFile: moved over, it lets its own file go and reads the other") {
  const std::string simple = fixture("simple.ptd"), aliases = fixture("aliases.ptd");
  const Reference ref(aliases);
  MappedFile a = open_or_die(simple), b = open_or_die(aliases);
  const std::uint8_t* b_base = b.source().data();
  a = std::move(b);
  CHECK(a.source().data() == b_base);
  check_same(a, *ref);
  CHECK(b.source().size() == 0);
  // Assigned to again, the moved-from object works.
  b = open_or_die(simple);
  CHECK(b.source().size() == read_file(simple).size());
  REQUIRE(b.map().check_source().ok());
}

TEST_CASE("MappedFile: a copy of its map fails check_source() once another mapping of the file takes its place") {
  // A user trial's case (2026-12-02): two MappedFiles of one file in a
  // vector; erase(begin()) moves the second over the first, whose mapping
  // goes. A copy of the first's map still points at that slot, whose
  // source now has the same size: the size check alone passed it, and its
  // get_data read the unmapped pages.
  const std::string path = fixture("simple.ptd");
  std::vector<MappedFile> files;
  files.reserve(2);
  files.push_back(open_or_die(path));
  files.push_back(open_or_die(path));
  const std::uint8_t* second = files[1].source().data();
  REQUIRE(second != files[0].source().data());
  const NamedDataMap copy = files[0].map();
  REQUIRE(copy.check_source().ok());
  files.erase(files.begin());
  REQUIRE(files[0].source().data() == second);
  REQUIRE(&copy.source() == &files[0].source());
  REQUIRE(copy.source().size() == copy.file_size());  // what the size check saw
  const Status st = copy.check_source();
  CHECK(st.error() == Error::InvalidArgument);
  CHECK(std::string(st.failure().what) == "the source is not the one opened (moved or replaced since open)");
  CHECK(st.failure().at == copy.file_size());
  // The file's own map still passes.
  CHECK(files[0].map().check_source().ok());
}

TEST_CASE("MappedFile: each open's failure is passed on, and OpenOptions reach the map") {
  {  // the file: MmapSource::open's failure
    const std::string missing = std::string(WDEDUP_TEST_TMPDIR) + "/no such file.ptd";
    const Result<MappedFile> f = MappedFile::open(missing.c_str());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::IoError);
    CHECK(std::string(f.failure().what) == "open failed (at = errno)");
    CHECK(f.failure().at == static_cast<std::uint64_t>(ENOENT));
  }
  {  // its contents: NamedDataMap::open's
    const std::vector<std::uint8_t> good = read_fixture("simple.ptd");
    const std::string cut = write_temp("mapped_file_cut.ptd", std::vector<std::uint8_t>(good.begin(), good.begin() + 40));
    const Result<MappedFile> f = MappedFile::open(cut.c_str());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::Truncated);
    CHECK(std::string(f.failure().what) == "file is smaller than the FT01 identifier and FH01 header");
    CHECK(f.failure().at == 40);
  }
  // A wdedup file whose segments from #1 on moved kShift bytes on (as
  // ExecuTorch's replace_data moves them after giving #0 more bytes; the
  // shift keeps every recorded alignment: 3 and 4096 among them), the WDX1
  // block as written: refused by default, read where the flatbuffer says
  // with allow_moved_segments.
  constexpr std::uint64_t kShift = 3 * 4096;
  std::vector<std::uint8_t> moved = wdedup_file_bytes();
  {
    const Nav n{moved};
    const std::uint32_t count = n.u32(n.segments());
    REQUIRE(count >= 3);
    for (std::uint32_t i = 1; i < count; ++i)
      REQUIRE(kShift % n.u64(n.seg_info(i) + format::segment_info::kAlignment) == 0);
  }
  const std::optional<std::uint64_t> at = move_segments(moved, 1, kShift);  // segment #1's bytes as written
  REQUIRE(at.has_value());
  const std::vector<std::uint8_t> segment(moved.begin() + static_cast<std::ptrdiff_t>(*at + kShift), moved.end());
  const std::string path = write_temp("mapped_file_moved.ptd", moved);
  const Result<MappedFile> refused = MappedFile::open(path.c_str());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Error::MalformedIndex);
  CHECK(std::string(refused.failure().what).rfind("key entry's data offset differs from its segment", 0) == 0);
  OpenOptions options;
  options.allow_moved_segments = true;
  Result<MappedFile> f = MappedFile::open(path.c_str(), options);
  REQUIRE_MESSAGE(f.ok(), std::string(f.failure().what));
  MappedFile g = std::move(f).value();
  CHECK(g->segments_moved());
  const Result<SegmentInfo> s = g->segment(1);
  REQUIRE(s.ok());
  CHECK(s->offset == *at + kShift);
  REQUIRE(s->size <= segment.size());
  const std::uint8_t* bytes = g.source().data() + s->offset;
  CHECK(std::memcmp(bytes, segment.data(), static_cast<std::size_t>(s->size)) == 0);
}

// ---- PreadFile: a FileSource and its map, with lent metadata memory ----------

static_assert(std::is_nothrow_move_constructible<PreadFile>::value, "a growing std::vector moves it");
static_assert(std::is_nothrow_move_assignable<PreadFile>::value, "moves");
static_assert(!std::is_copy_constructible<PreadFile>::value, "one owner per descriptor");
static_assert(std::is_same<decltype(std::declval<PreadFile&>().map()), const NamedDataMap&>::value, "const map");

namespace {

PreadFile open_pread_or_die(const std::string& path, const AlignedBytes& memory) {
  Result<PreadFile> f = PreadFile::open(path.c_str(), memory.span());
  REQUIRE_MESSAGE(f.ok(), path, ": ", f.failure().what);
  return std::move(f).value();
}

}  // namespace

TEST_CASE("PreadFile: every fixture and a wdedup file read as over an MmapSource, after every kind of move") {
  std::vector<std::string> paths = fixture_paths();
  paths.push_back(wdedup_file_path());
  for (const std::string& path : paths) {
    CAPTURE(path);
    const Reference ref(path);
    // The metadata memory is the caller's: one block per file, kept here
    // while the PreadFiles move.
    std::vector<AlignedBytes> memory;
    for (int i = 0; i < 10; ++i) memory.push_back(metadata_for(path));
    const FileSource file_source = REQUIRE_VALUE(FileSource::open(path.c_str()));
    const std::uint64_t metadata_size = REQUIRE_VALUE(NamedDataMap::metadata_size(file_source));
    CHECK(memory[0].size() == metadata_size);

    PreadFile first = open_pread_or_die(path, memory[0]);
    check_same(first, *ref);
    const int fd = first.source().fd();
    // A key name taken now points into the lent memory, which does not move.
    const char* early = nullptr;
    const std::size_t num_keys = REQUIRE_VALUE(ref->get_num_keys());
    KeyView key0;
    if (num_keys != 0) {
      key0 = REQUIRE_VALUE(ref->get_key(0));
      early = REQUIRE_VALUE(first->get_key(0)).data();
    }

    std::vector<PreadFile> files;
    files.push_back(std::move(first));
    for (int i = 1; i < 10; ++i) files.push_back(open_pread_or_die(path, memory[static_cast<std::size_t>(i)]));
    REQUIRE(files.capacity() > 1);
    for (const PreadFile& f : files) check_same(f, *ref);
    CHECK(files[0].source().fd() == fd);  // the same descriptor, moved
    if (early != nullptr) CHECK(std::string(early) == text(key0));
    // The moved-from object holds nothing, and its map refuses to read.
    CHECK(first.source().fd() == -1);
    CHECK(first.map().check_source().error() == Error::InvalidArgument);
    if (num_keys != 0) {
      CHECK(first->get_data(key0).error() == Error::InvalidArgument);
      std::vector<std::uint8_t> room(static_cast<std::size_t>(REQUIRE_VALUE(ref->key_info(0)).size) + 1);
      CHECK(first->load_data_into(key0, room.data(), room.size()).error() == Error::InvalidArgument);
    }
    // Moved over: its own descriptor is closed, the other one's taken.
    const int other_fd = files[1].source().fd();
    files[0] = std::move(files[1]);
    CHECK(files[0].source().fd() == other_fd);
    CHECK(::fcntl(fd, F_GETFD) == -1);  // closed
    check_same(files[0], *ref);
  }
}

TEST_CASE("PreadFile: a function map and an index built before the moves are kept by them") {
  {
    const Reference ref(wdedup_file_path());
    AlignedBytes memory = metadata_for(wdedup_file_path());
    PreadFile a = open_pread_or_die(wdedup_file_path(), memory);
    Result<FunctionView> before = a->function(0);
    REQUIRE(before.ok());
    PreadFile b = std::move(a);
    Result<FunctionView> after = b->find_function(before->method(), before->partition_index());
    REQUIRE(after.ok());
    CHECK(text(after->function_name()) == text(before->function_name()));
    REQUIRE(after->tensor_count() == before->tensor_count());
    const FunctionView ref_function = REQUIRE_VALUE(ref->function(0));
    for (std::size_t i = 0; i < after->tensor_count(); ++i) {
      const FunctionTensorView after_i = REQUIRE_VALUE(after->tensor(i));
      const FunctionTensorView ref_i = REQUIRE_VALUE(ref_function.tensor(i));
      CHECK(text(after_i.key) == text(ref_i.key));
    }
  }
  // many_keys.ptd (ExecuTorch's, 4096 keys) has no index of its own.
  const std::string path = fixture("many_keys.ptd");
  const Reference ref(path);
  const std::size_t n = REQUIRE_VALUE(ref->get_num_keys());
  AlignedBytes memory = metadata_for(path);
  PreadFile first = open_pread_or_die(path, memory);
  REQUIRE_FALSE(first->has_index());
  AlignedBytes index(static_cast<std::size_t>(NamedDataMap::index_memory_size(n)), 8);
  REQUIRE(first.build_index(index.span()).ok());
  std::vector<PreadFile> files;
  files.push_back(std::move(first));
  AlignedBytes memory2 = metadata_for(path);
  files.push_back(open_pread_or_die(path, memory2));  // (without one)
  CHECK(files[0]->has_index());
  CHECK_FALSE(files[1]->has_index());
  for (std::size_t i = 0; i < n; ++i) {
    const KeyView k = REQUIRE_VALUE(ref->get_key(i));
    const Result<KeyInfo> info = files[0]->find(k);
    REQUIRE(info.ok());
    CHECK(info->key_index == i);
  }
}

TEST_CASE("every open by path refuses a null path, before open(2)") {
  const char* const null_path = nullptr;  // (an unset getenv("MODEL"))
  AlignedBytes memory(4096, 8);
  const Failure failures[] = {MmapSource::open(null_path).failure(), FileSource::open(null_path).failure(),
                              MappedFile::open(null_path).failure(),
                              PreadFile::open(null_path, memory.span()).failure(),
                              PreadFile::metadata_size(null_path).failure()};
  for (const Failure& f : failures) {
    CHECK(f.code == Error::InvalidArgument);
    CHECK(std::string(f.what) == "the path is null");
    CHECK(f.at == 0);
  }
}

TEST_CASE("PreadFile: each open's failure is passed on, and OpenOptions reach the map") {
  const std::string simple = fixture("simple.ptd");
  const std::string missing = std::string(WDEDUP_TEST_TMPDIR) + "/no such file.ptd";
  {  // the file: FileSource::open's failure, from both calls
    AlignedBytes memory(4096, 8);
    const Result<PreadFile> f = PreadFile::open(missing.c_str(), memory.span());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::IoError);
    CHECK(std::string(f.failure().what) == "open failed (at = errno)");
    CHECK(f.failure().at == static_cast<std::uint64_t>(ENOENT));
    const Result<std::uint64_t> need = PreadFile::metadata_size(missing.c_str());
    CHECK(need.error() == Error::IoError);
    CHECK(need.failure().at == static_cast<std::uint64_t>(ENOENT));
  }
  const std::uint64_t need = REQUIRE_VALUE(PreadFile::metadata_size(simple.c_str()));
  REQUIRE(need > 8);
  {  // too little memory: how much it needs
    AlignedBytes memory(static_cast<std::size_t>(need - 8), 8);
    const Result<PreadFile> f = PreadFile::open(simple.c_str(), memory.span());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::BufferTooSmall);
    CHECK(std::string(f.failure().what) == "metadata memory is smaller than metadata_size()");
    CHECK(f.failure().at == need);
  }
  {  // memory not 8-byte aligned
    AlignedBytes memory(static_cast<std::size_t>(need), 8, 4);
    const Result<PreadFile> f = PreadFile::open(simple.c_str(), memory.span());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::Misaligned);
  }
  {  // the contents: a cut file
    const std::vector<std::uint8_t> good = read_fixture("simple.ptd");
    const std::string cut = write_temp("pread_file_cut.ptd", std::vector<std::uint8_t>(good.begin(), good.begin() + 40));
    AlignedBytes memory(4096, 8);
    const Result<PreadFile> f = PreadFile::open(cut.c_str(), memory.span());
    REQUIRE_FALSE(f.ok());
    CHECK(f.error() == Error::Truncated);
    CHECK(f.failure().at == 40);
  }
  // allow_moved_segments reaches the map (the file of the MappedFile test).
  std::vector<std::uint8_t> moved = wdedup_file_bytes();
  REQUIRE(move_segments(moved, 1, 3 * 4096).has_value());
  const std::string path = write_temp("pread_file_moved.ptd", moved);
  AlignedBytes memory = metadata_for(path);
  const Result<PreadFile> refused = PreadFile::open(path.c_str(), memory.span());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error() == Error::MalformedIndex);
  OpenOptions options;
  options.allow_moved_segments = true;
  Result<PreadFile> f = PreadFile::open(path.c_str(), memory.span(), options);
  REQUIRE_MESSAGE(f.ok(), std::string(f.failure().what));
  CHECK(f->map().segments_moved());
  // And through from_fd, both kinds (a PreadFile's in memory of its own).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  AlignedBytes memory2 = metadata_for(path);
  CHECK(PreadFile::from_fd(fd, memory2.span()).error() == Error::MalformedIndex);
  Result<PreadFile> pf = PreadFile::from_fd(fd, memory2.span(), options);
  REQUIRE_MESSAGE(pf.ok(), std::string(pf.failure().what));
  CHECK(pf->map().segments_moved());
  CHECK(MappedFile::from_fd(fd).error() == Error::MalformedIndex);
  Result<MappedFile> mf = MappedFile::from_fd(fd, options);
  REQUIRE_MESSAGE(mf.ok(), std::string(mf.failure().what));
  CHECK(mf->map().segments_moved());
  ::close(fd);
}

TEST_CASE("MappedFile and PreadFile: build_index(memory, seed) builds under that seed") {
  // Keys that all hash into the first 16 of 2,048 slots under kChosen
  // (support/colliding_keys.hpp): that seed is refused, another builds. A
  // seed dropped on the way to the map (its own seed then) built both.
  constexpr std::uint64_t kChosen = kCollidingSeed;
  const std::uint64_t slots = NamedDataMap::index_memory_size(kCollidingKeys) / 8;
  REQUIRE(slots == 2048);
  const std::string path = write_temp("mapped_file_colliding.ptd", colliding_keys_file());
  AlignedBytes index(static_cast<std::size_t>(8 * slots), 8);
  const auto check = [&](auto& file) {
    REQUIRE_FALSE(file->has_index());
    const Status st = file.build_index(index.span(), kChosen);
    CHECK(st.error() == Error::MalformedIndex);
    CHECK(std::string(st.failure().what) == "keys collide in the built index under this seed (at = keys placed)");
    CHECK_FALSE(file->has_index());
    REQUIRE(file.build_index(index.span(), kChosen + 1).ok());
    CHECK(file->has_index());
  };
  MappedFile mapped = open_or_die(path);
  check(mapped);
  AlignedBytes memory = metadata_for(path);
  PreadFile pread = open_pread_or_die(path, memory);
  check(pread);
}

TEST_CASE("a copy of a map fails check_source() once another file of its size takes its source's place") {
  // A review's cases (2026-12-02): a file of the same size (simple.ptd with
  // its data bytes changed) opened into the slot a MappedFile's was freed
  // from, whose mapping the kernel may put at the freed one's address; and
  // two PreadFiles of such files in a vector, the first erased (a FileSource
  // has no address to compare). The sizes match; the instances do not.
  const std::string a = fixture("simple.ptd");
  std::vector<std::uint8_t> other = read_fixture("simple.ptd");
  const Reference ref(a);
  const std::uint64_t data_at = REQUIRE_VALUE(ref->key_info(0)).offset;
  other[static_cast<std::size_t>(data_at)] ^= 0xFF;
  const std::string b = write_temp("mapped_file_same_size.ptd", other);
  {
    std::vector<MappedFile> files;
    files.reserve(1);
    files.push_back(open_or_die(a));
    const std::uint64_t first = files[0].source().instance();
    const NamedDataMap copy = files[0].map();
    REQUIRE(copy.check_source().ok());
    files.pop_back();
    files.push_back(open_or_die(b));
    CHECK(files[0].source().instance() != first);
    CHECK(files[0].source().instance() != 0);
    REQUIRE(copy.source().size() == copy.file_size());  // what the size check saw
    const Status st = copy.check_source();
    CHECK(st.error() == Error::InvalidArgument);
    CHECK(std::string(st.failure().what) == "the source is not the one opened (moved or replaced since open)");
    CHECK(files[0].map().check_source().ok());
  }
  {
    AlignedBytes ma = metadata_for(a), mb = metadata_for(b);
    std::vector<PreadFile> files;
    files.reserve(2);
    files.push_back(open_pread_or_die(a, ma));
    files.push_back(open_pread_or_die(b, mb));
    const NamedDataMap copy = files[0].map();
    REQUIRE(copy.check_source().ok());
    files.erase(files.begin());
    REQUIRE(&copy.source() == &files[0].source());
    REQUIRE(copy.source().size() == copy.file_size());
    CHECK(copy.check_source().error() == Error::InvalidArgument);
    // Its reads refuse too, rather than read b's bytes through a's metadata.
    const KeyView key0 = REQUIRE_VALUE(ref->get_key(0));
    CHECK(copy.get_data(key0).error() == Error::InvalidArgument);
    CHECK(files[0].map().check_source().ok());
  }
}

namespace {

/// A moved-from `Source` (MmapSource or FileSource) of `path` has instance
/// 0, and the move hands its number on, by construction and by assignment.
template <class Source>
void check_instance_moves(const std::string& path) {
  Source a = REQUIRE_VALUE(Source::open(path.c_str()));
  const std::uint64_t n = a.instance();
  REQUIRE(n != 0);
  Source b(static_cast<Source&&>(a));
  CHECK(b.instance() == n);
  CHECK(a.instance() == 0);
  Source c = REQUIRE_VALUE(Source::open(path.c_str()));
  CHECK(c.instance() != n);
  c = static_cast<Source&&>(b);
  CHECK(c.instance() == n);
  CHECK(b.instance() == 0);
}

}  // namespace

TEST_CASE("a moved-from MmapSource or FileSource has instance 0; the move hands the number on") {
  // DataSource's contract: a number no other source of the process has had.
  check_instance_moves<MmapSource>(fixture("simple.ptd"));
  check_instance_moves<FileSource>(fixture("simple.ptd"));
}

namespace {
constexpr const char* kFirstSourceChild = "WDEDUP_TEST_FIRST_SOURCE";
}  // namespace

TEST_CASE("the first source a process opens is numbered 1 and its second 2: instance 0 is no number") {
  // DataSource's contract: instance() 0 is a source without a number, which
  // check_source() cannot tell from another. Only a process's first source
  // shows where the count starts, so the check runs in a fresh process (this
  // binary again, this case only), whose first two sources are the
  // FileSource and the MmapSource below; it exits with their numbers as
  // 10 x the first + the second.
  if (std::getenv(kFirstSourceChild) != nullptr) {
    const std::string simple = fixture("simple.ptd");
    Result<FileSource> f = FileSource::open(simple.c_str());
    if (!f.ok()) ::_exit(100);
    Result<MmapSource> m = MmapSource::open(simple.c_str());
    if (!m.ok()) ::_exit(101);
    ::_exit(static_cast<int>(10 * f->instance() + m->instance()));
  }
  const int status = wdedup_test::this_case_again(kFirstSourceChild, "the first source a process opens*");
  REQUIRE(WIFEXITED(status));
  // 12: numbered 1 and 2. 1 would be the FileSource given 0 (no number);
  // 100 and 101 a source that did not open, 127 a binary not run again.
  CHECK(WEXITSTATUS(status) == 12);
}
