// Zero allocations: opening a map (and its source) and every query —
// lookups, layouts, keys, segments, functions, get_data from mmap/buffer,
// load_data_into, build_index, even failures — allocate nothing. Only
// get_data from a FileSource allocates: one block per non-empty copy,
// freed by the DataBuffer.
//
// Counting: global operator new/delete and malloc/calloc/realloc/free (and
// the aligned variants) are replaced by versions that forward to glibc's
// __libc_* entry points and count while a window is open. Under ASan/TSan,
// which own malloc, the sanitizer's malloc/free hooks count instead.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run
// (tests/doctest_main.cpp); code after a REQUIRE on fixture bytes still
// checks for empty, for runners without that listener.
#include "support/wdedup_file.hpp"  // first: see the note there

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "support/sanitizers.hpp"  // WDEDUP_TEST_SANITIZER_MALLOC, WDEDUP_TEST_TSAN
#include "wdedup/runtime.hpp"

// ThreadSanitizer's malloc hook does not fire for posix_memalign (its free
// hook does): under TSan, frees are the exact count and allocs a lower bound.
#if defined(WDEDUP_TEST_TSAN)
constexpr bool kAllocHookSeesMemalign = false;
#else
constexpr bool kAllocHookSeesMemalign = true;
#endif

namespace {
std::atomic<bool> g_counting{false};
std::atomic<std::uint64_t> g_allocs{0};
std::atomic<std::uint64_t> g_frees{0};
inline void count_alloc(const void* p) {
  if (p != nullptr && g_counting.load(std::memory_order_relaxed)) g_allocs.fetch_add(1, std::memory_order_relaxed);
}
inline void count_free(const void* p) {
  if (p != nullptr && g_counting.load(std::memory_order_relaxed)) g_frees.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

#if defined(WDEDUP_TEST_SANITIZER_MALLOC)
// Declared here rather than through <sanitizer/allocator_interface.h>,
// which GCC does not install; both sanitizer runtimes export it.
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*, std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void malloc_hook(const volatile void* p, std::size_t) { count_alloc(const_cast<const void*>(p)); }
void free_hook(const volatile void* p) { count_free(const_cast<const void*>(p)); }
const int g_hooks_installed = __sanitizer_install_malloc_and_free_hooks(malloc_hook, free_hook);
}  // namespace
constexpr bool kCountsMalloc = true;
#elif defined(__GLIBC__)
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);

}  // extern "C"
namespace {
// While set, malloc gives a block under 16 bytes the alignment jemalloc
// gives it (FreeBSD's libc, Android's before Scudo): 8, never 16. They come
// from a pool of their own, 8 bytes into a 16-aligned slot, and are known
// by their address: glibc aligns its own blocks to 8 only on some targets
// (armv7: 200 of 1,000 small blocks 8 past a multiple of 16), so an
// alignment cannot tell the two apart. The test takes a few; a slot is
// never reused (free is a no-op for them).
std::atomic<bool> g_jemalloc_small_blocks{false};
constexpr std::size_t kSmallSlots = 64;
alignas(16) unsigned char g_small_pool[kSmallSlots][32];
std::atomic<std::size_t> g_small_used{0};
bool jemalloc_small_block(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p), lo = reinterpret_cast<std::uintptr_t>(&g_small_pool[0][0]);
  return a >= lo && a < lo + sizeof g_small_pool;
}
}  // namespace
extern "C" {
void* malloc(std::size_t n) {
  void* p = nullptr;
  if (n < 16 && g_jemalloc_small_blocks.load(std::memory_order_relaxed)) {
    const std::size_t slot = g_small_used.fetch_add(1, std::memory_order_relaxed);
    if (slot >= kSmallSlots) std::abort();  // more small blocks than the test takes
    p = &g_small_pool[slot][8];
  } else {
    p = __libc_malloc(n);
  }
  count_alloc(p);
  return p;
}
void* calloc(std::size_t n, std::size_t s) {
  void* p = __libc_calloc(n, s);
  count_alloc(p);
  return p;
}
void* realloc(void* old, std::size_t n) {
  if (jemalloc_small_block(old)) {  // (16 bytes usable past the pointer)
    void* q = malloc(n);
    if (q != nullptr) std::memcpy(q, old, n < 16 ? n : 16);
    if (q != nullptr || n == 0) free(old);
    return q;
  }
  void* p = __libc_realloc(old, n);
  count_alloc(p);  // any realloc is an allocation event
  return p;
}
void free(void* p) {
  count_free(p);
  if (!jemalloc_small_block(p)) __libc_free(p);
}
void* memalign(std::size_t a, std::size_t n) {
  void* p = __libc_memalign(a, n);
  count_alloc(p);
  return p;
}
void* aligned_alloc(std::size_t a, std::size_t n) { return memalign(a, n); }
int posix_memalign(void** out, std::size_t a, std::size_t n) {
  if (a < sizeof(void*) || (a & (a - 1)) != 0) return 22;  // EINVAL
  void* p = memalign(a, n);
  if (p == nullptr) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}  // extern "C"
constexpr bool kCountsMalloc = true;
#else
constexpr bool kCountsMalloc = false;
#endif

#if !defined(WDEDUP_TEST_SANITIZER_MALLOC)
// operator new/delete, counted (they also reach malloc; counting both only
// makes the test stricter). Not replaced under sanitizers: their hooks see
// every allocation already.
void* operator new(std::size_t n) {
  void* p = std::malloc(n ? n : 1);
  if (!p) std::abort();
  return p;
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return std::malloc(n ? n : 1); }
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = nullptr;
  if (posix_memalign(&p, static_cast<std::size_t>(a) < sizeof(void*) ? sizeof(void*) : static_cast<std::size_t>(a),
                     n ? n : 1) != 0)
    std::abort();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) { return operator new(n, a); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif

using namespace wdedup;
using namespace wdedup_test;

namespace {

/// Counts allocations and frees between construction and stop().
struct Window {
  std::uint64_t allocs = 0, frees = 0;
  Window() {
    g_allocs = 0;
    g_frees = 0;
    g_counting = true;
  }
  void stop() {
    g_counting = false;
    allocs = g_allocs;
    frees = g_frees;
  }
  ~Window() { g_counting = false; }
};

// Everything the queries need lives in static storage, so that nothing in
// the window (not even the test) has to allocate.
alignas(4096) std::uint8_t g_metadata[1 << 20];   // lent metadata (many_keys needs ~400 KiB)
alignas(8) std::uint8_t g_index[1 << 17];         // build_index memory
alignas(64) std::uint8_t g_sink[(4 << 20) + 64];  // load_data_into target (large_segment: 4 MiB)

/// Runs every query on every key; returns a checksum so nothing is optimised
/// away, and counts failures that should not happen.
struct QueryStats {
  std::uint64_t checksum = 0;
  std::uint64_t unexpected = 0;
  std::uint64_t copies = 0;  // non-empty get_data results that own memory
};

/// What a window over opens and queries that should allocate nothing must
/// show: no surprise, no copy, no allocation and no free.
void check_nothing_allocated(const QueryStats& q, const Window& w) {
  CHECK(q.unexpected == 0);
  CHECK(q.copies == 0);
  CHECK(w.allocs == 0);
  CHECK(w.frees == 0);
}

void query_everything(NamedDataMap& map, QueryStats& q, bool index_it) {
  const std::size_t n = map.get_num_keys().ok() ? *map.get_num_keys() : 0;
  if (index_it && !map.has_index()) {
    if (NamedDataMap::index_memory_size(n) > sizeof g_index) ++q.unexpected;
    else if (!map.build_index(Span<std::uint8_t>(g_index, sizeof g_index)).ok()) ++q.unexpected;
  }
  for (std::size_t i = 0; i < n; ++i) {
    Result<std::string_view> key = map.get_key(i);
    if (!key) { ++q.unexpected; continue; }
    Result<KeyInfo> info = map.find(*key);
    if (!info) { ++q.unexpected; continue; }
    q.checksum += info->offset + info->size + info->alignment;
    Result<TensorLayout> l = map.get_tensor_layout(*key);
    if (l.ok() != info->has_layout) ++q.unexpected;
    if (l.ok()) q.checksum += l->nbytes() + l->sizes.size();
    {
      Result<DataBuffer> d = map.get_data(*key);
      if (!d) { ++q.unexpected; continue; }
      if (d->owns_memory()) ++q.copies;
      if (d->size()) q.checksum += static_cast<const std::uint8_t*>(d->data())[0];
    }  // a copy is freed here, inside the window
    if (!map.load_data_into(*key, g_sink, sizeof g_sink).ok()) ++q.unexpected;
    if (map.load_data_into(*key, g_sink, 0).ok() != (info->size == 0)) ++q.unexpected;
  }
  // Misses and failures allocate nothing either.
  if (map.find("no such key").ok()) ++q.unexpected;
  if (map.get_data("no such key").ok()) ++q.unexpected;
  if (map.get_tensor_layout("no such key").ok()) ++q.unexpected;
  if (map.get_key(n).ok()) ++q.unexpected;
  for (std::uint32_t s = 0; s < map.segment_count(); ++s) {
    Result<SegmentInfo> si = map.segment(s);
    if (!si) ++q.unexpected;
    else q.checksum += si->content_hash + si->offset;
  }
  for (std::size_t f = 0; f < map.function_count(); ++f) {
    Result<FunctionView> fv = map.function(f);
    if (!fv) { ++q.unexpected; continue; }
    if (!map.find_function(fv->method(), fv->partition_index()).ok()) ++q.unexpected;
    if (!map.find_function(fv->function_name()).ok()) ++q.unexpected;
    if (!map.find_function(fv->blob_key(), fv->function_name()).ok()) ++q.unexpected;
    for (std::size_t t = 0; t < fv->tensor_count(); ++t) {
      Result<FunctionTensorView> row = fv->tensor(t);
      if (!row) { ++q.unexpected; continue; }
      Result<std::string_view> k = fv->key_of(row->tensor_name);
      if (!k || *k != row->key) ++q.unexpected;
    }
    if (fv->key_of("no such tensor").ok()) ++q.unexpected;
  }
}

/// The fixtures (fixture_paths() fails the test if they are missing, rather
/// than let it cover only the generated file) plus the small wdedup file.
std::vector<std::string> all_files() {
  std::vector<std::string> files = fixture_paths();
  files.push_back(wdedup_file_path());
  return files;
}

}  // namespace

TEST_CASE("the counting allocator sees allocations") {
  REQUIRE(kCountsMalloc);  // glibc or a sanitizer: this test must be able to count
  Window w;
  void* p = std::malloc(16);
  std::free(p);
  std::string* s = new std::string(100, 'x');
  delete s;
  w.stop();
  CHECK(w.allocs >= 2);
  CHECK(w.frees >= 2);
}

TEST_CASE("opening and querying a map from mmap or caller memory allocates nothing") {
  const std::vector<std::string> files = all_files();
  for (const std::string& path : files) {
    CAPTURE(path);
    AlignedBytes bytes(read_file(path), 4096);  // Via::Buffer, prepared outside the window
    for (int pass = 0; pass < 2; ++pass) {      // pass 1 also builds a lent index
      // Scanning lookups cost the same per key at any size; a file with
      // thousands of keys (n^2 scans, slow under sanitizers) is indexed in
      // both passes.
      const bool index_it = pass == 1 || bytes.size() > (512u << 10);
      QueryStats q;
      Window w;
      {
        Result<MmapSource> src = MmapSource::open(path.c_str());
        if (!src) { ++q.unexpected; }
        else {
          Result<NamedDataMap> map = NamedDataMap::open(*src);
          if (!map) ++q.unexpected;
          else query_everything(*map, q, index_it);
        }
        BufferSource buf(bytes.data(), bytes.size());
        Result<NamedDataMap> map = NamedDataMap::open(buf);
        if (!map) ++q.unexpected;
        else query_everything(*map, q, index_it);
      }  // munmap here, inside the window
      w.stop();
      check_nothing_allocated(q, w);
    }
  }
}

/// A window over queries of a map that copies (a FileSource's): exactly
/// one block per non-empty copy, each freed by its DataBuffer.
void check_only_copies_allocated(const QueryStats& q, const Window& w, std::uint64_t nonempty) {
  CHECK(q.unexpected == 0);
  CHECK(q.copies == nonempty);
  if (kAllocHookSeesMemalign) CHECK(w.allocs == nonempty);
  else CHECK(w.allocs <= nonempty);
  CHECK(w.frees == nonempty);
}

/// Adds the keys of `map` with non-empty data to `*nonempty`; a failed
/// get_num_keys or key_info is counted in `q.unexpected` (inside a
/// counting window: no doctest assertion there).
void count_nonempty(const NamedDataMap& map, QueryStats& q, std::uint64_t* nonempty) {
  const Result<std::size_t> n = map.get_num_keys();
  if (!n) {
    ++q.unexpected;
    return;
  }
  for (std::size_t i = 0; i < *n; ++i) {
    const Result<KeyInfo> info = map.key_info(i);
    if (!info) ++q.unexpected;
    else if (info->size != 0) ++*nonempty;
  }
}

/// Two files of `path` opened (a MappedFile or a PreadFile), the first
/// moved out of its Result, the second moved over it (which lets the first
/// one's file go), indexed if need be and queried; adds to `q` and counts
/// the keys of non-empty data in `*nonempty`.
template <class File, class Open>
void open_move_query(Open open, QueryStats& q, std::uint64_t* nonempty) {
  Result<File> a = open(0), b = open(1);
  if (!a || !b) {
    ++q.unexpected;
    return;
  }
  File moved = std::move(a).value();  // moved out of the Result
  moved = std::move(b).value();       // moved over: unmaps or closes its first file
  if (!moved.map().check_source()) ++q.unexpected;
  if (!moved->has_index() && !moved.build_index(Span<std::uint8_t>(g_index, sizeof g_index))) ++q.unexpected;
  count_nonempty(moved.map(), q, nonempty);
  NamedDataMap copy = moved.map();  // (query_everything takes a map it may index)
  query_everything(copy, q, false);
}

/// For each file: open_move_query over the file opened by `open(k, path,
/// fd)`, k = 0 by its path and k = 1 from `fd`, a descriptor of it opened
/// here (outside the counted window, and closed after it), then `check` of
/// what the window saw.
template <class File, class Open, class Check>
void each_file_opened_both_ways(Open open, Check check) {
  for (const std::string& path : all_files()) {
    CAPTURE(path);
    QueryStats q;
    std::uint64_t nonempty = 0;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    Window w;
    open_move_query<File>([&](int k) { return open(k, path, fd); }, q, &nonempty);
    // (munmap, or both descriptors closed, inside the window)
    w.stop();
    ::close(fd);
    check(q, w, nonempty);
  }
}

TEST_CASE("a MappedFile opened, moved, moved over and queried allocates nothing") {
  // The second from a descriptor, through a window of the whole file.
  each_file_opened_both_ways<MappedFile>(
      [](int k, const std::string& path, int fd) {
        const std::uint64_t size = static_cast<std::uint64_t>(::lseek(fd, 0, SEEK_END));
        return k == 0 ? MappedFile::open(path.c_str()) : MappedFile::from_fd(fd, {}, FileWindow{0, size});
      },
      [](const QueryStats& q, const Window& w, std::uint64_t) { check_nothing_allocated(q, w); });
}

TEST_CASE("a FileSource map allocates only the copies get_data returns") {
  for (const std::string& path : all_files()) {
    CAPTURE(path);
    QueryStats q;
    std::uint64_t nonempty = 0;
    Window w;
    {
      Result<FileSource> src = FileSource::open(path.c_str());
      if (!src) { ++q.unexpected; }
      else {
        Result<std::uint64_t> need = NamedDataMap::metadata_size(*src);
        if (!need || *need > sizeof g_metadata) { ++q.unexpected; }
        else {
          Result<NamedDataMap> map = NamedDataMap::open(*src, Span<std::uint8_t>(g_metadata, sizeof g_metadata));
          if (!map) ++q.unexpected;
          else {
            count_nonempty(*map, q, &nonempty);
            query_everything(*map, q, true);
          }
        }
      }
    }
    w.stop();
    check_only_copies_allocated(q, w, nonempty);
  }
}

TEST_CASE("a PreadFile opened, moved, moved over and queried allocates only the copies get_data returns") {
  constexpr std::size_t kHalf = sizeof g_metadata / 2;  // one block of lent metadata each
  // The second from a descriptor (FileSource::from_fd duplicates it).
  each_file_opened_both_ways<PreadFile>(
      [](int k, const std::string& path, int fd) {
        const Span<std::uint8_t> memory(g_metadata + static_cast<std::size_t>(k) * kHalf, kHalf);
        return k == 0 ? PreadFile::open(path.c_str(), memory) : PreadFile::from_fd(fd, memory);
      },
      check_only_copies_allocated);
}

TEST_CASE("rejecting malformed files allocates nothing") {
  const std::vector<std::uint8_t> good = read_fixture("layouts.ptd");
  if (good.size() < 100) return;  // read_fixture has failed the test
  const std::vector<std::uint8_t>& wd = wdedup_file_bytes();
  std::vector<std::uint8_t> bad_header = good, bad_index = wd, truncated(good.begin(), good.begin() + 100);
  bad_header[5] ^= 0xFF;  // FT01 identifier
  const std::uint64_t ext = (48 + format::load_u64(wd.data() + format::kHeaderFlatbufferSizePos) + 15) / 16 * 16;
  bad_index[static_cast<std::size_t>(ext + format::ext_header::kKeyCount)] ^= 1;  // WDX1 key_count
  AlignedBytes a(bad_header, 8), b(bad_index, 8), c(truncated, 8);
  Error codes[6] = {};
  int i = 0;
  Window w;
  for (const AlignedBytes* x : {&a, &b, &c}) {
    BufferSource src(x->data(), x->size());
    codes[i++] = NamedDataMap::open(src).error();
    ReadOnlySource ro(x->data(), x->size());
    codes[i++] = NamedDataMap::open(ro, Span<std::uint8_t>(g_metadata, sizeof g_metadata)).error();
  }
  w.stop();
  CHECK(w.allocs == 0);
  CHECK(codes[0] == Error::MalformedHeader);
  CHECK(codes[1] == Error::MalformedHeader);
  CHECK(codes[2] == Error::MalformedIndex);
  CHECK(codes[3] == Error::MalformedIndex);
  CHECK(codes[4] == Error::Truncated);
  CHECK(codes[5] == Error::Truncated);
}

TEST_CASE("a get_data whose read fails frees its copy; a failed load_data_into allocates nothing") {
  // Metadata reads succeed, every read of segment data fails.
  const std::vector<std::uint8_t> simple = read_fixture("simple.ptd");
  if (simple.empty()) return;  // read_fixture has failed the test
  const std::vector<std::uint8_t>& wd = wdedup_file_bytes();
  FailingSource plain(simple.data(), simple.size(), format::load_u64(simple.data() + format::kHeaderSegmentBasePos));
  FailingSource ext(wd.data(), wd.size(), format::load_u64(wd.data() + format::kHeaderSegmentBasePos));
  AlignedBytes plain_meta(64 << 10, 8), ext_meta(64 << 10, 8);
  Result<NamedDataMap> p = NamedDataMap::open(plain, plain_meta.span());
  Result<NamedDataMap> w = NamedDataMap::open(ext, ext_meta.span());
  REQUIRE(p.ok());
  REQUIRE(w.ok());
  if (!p.ok() || !w.ok()) return;
  // simple.b: a plain file records no alignment, so malloc. w.k (16): malloc.
  // w.v (4096, above max_align_t): posix_memalign.
  const std::uint64_t wk = REQUIRE_VALUE(w->find("w.k")).offset;
  const KeyInfo wv_info = REQUIRE_VALUE(w->find("w.v"));
  const std::uint64_t wv = wv_info.offset;
  REQUIRE(wv_info.alignment == 4096);
  const std::uint64_t raw = REQUIRE_VALUE(w->find("raw")).offset;
  Failure f[4];
  Window win;
  {
    Result<DataBuffer> a = p->get_data("simple.b");
    f[0] = a.failure();
    Result<DataBuffer> b = w->get_data("w.k");
    f[1] = b.failure();
    Result<DataBuffer> c = w->get_data("w.v");
    f[2] = c.failure();
    f[3] = w->load_data_into("raw", g_sink, sizeof g_sink).failure();
  }
  win.stop();
  // One block per failed get_data, each freed before the failure returns.
  if (kAllocHookSeesMemalign) CHECK(win.allocs == 3);
  else CHECK(win.allocs <= 3);
  CHECK(win.frees == 3);
  for (const Failure& x : f) {
    CHECK(x.code == Error::IoError);
    CHECK(x.what == FailingSource::kWhat);  // the source's own failure, passed through
  }
  CHECK(f[0].at == 512);  // simple.json: simple.b at base 384 + 128
  CHECK(f[1].at == wk);
  CHECK(f[2].at == wv);
  CHECK(f[3].at == raw);
}

TEST_CASE("DataBuffer move-assignment frees the copy it replaces") {
  std::unique_ptr<Opened> o = open_via(Via::File, fixture("simple.ptd"));
  REQUIRE_MESSAGE(o->ok(), fixtures_hint());
  if (!o->ok()) return;
  const NamedDataMap& m = o->map();
  const std::vector<std::uint8_t> file = read_fixture("simple.ptd");
  if (file.size() < 896) return;  // read_fixture has failed the test
  bool owned[3] = {};
  std::uint64_t frees_after[3] = {};
  std::size_t size_after[2] = {};
  bool bytes_ok = false;
  Window w;
  {
    Result<DataBuffer> a = m.get_data("simple.a");  // 37 bytes at 384
    Result<DataBuffer> b = m.get_data("simple.b");  // 100 bytes at 512
    if (a.ok() && b.ok()) {
      DataBuffer x = std::move(a).value();  // move-construction frees nothing
      owned[0] = x.owns_memory();
      frees_after[0] = g_frees;
      x = std::move(b).value();  // frees simple.a's copy
      frees_after[1] = g_frees;
      owned[1] = x.owns_memory() && !b->owns_memory();
      size_after[0] = x.size();
      size_after[1] = b->size();
      bytes_ok = std::memcmp(x.data(), file.data() + 512, 100) == 0 && b->data() == nullptr;
      x = DataBuffer::view(file.data(), 8);  // a view over a copy: frees simple.b's copy
      frees_after[2] = g_frees;
      owned[2] = x.owns_memory();
    }
  }  // x is a view and a, b are empty: nothing more to free
  w.stop();
  CHECK(owned[0]);
  CHECK(frees_after[0] == 0);
  CHECK(frees_after[1] == 1);
  CHECK(owned[1]);
  CHECK(size_after[0] == 100);
  CHECK(size_after[1] == 0);
  CHECK(bytes_ok);
  CHECK(frees_after[2] == 2);
  CHECK_FALSE(owned[2]);
  CHECK(w.allocs == 2);
  CHECK(w.frees == 2);
}

TEST_CASE("a FileSource copy smaller than its alignment is aligned where malloc aligns small blocks to their size") {
  // jemalloc (FreeBSD's libc, Android's before Scudo) gives malloc(8) an
  // 8-byte alignment where alignof(max_align_t) is 16, as C allows for a
  // block too small to hold a max_align_t: a key of 8 or 12 bytes asking
  // for 16 must not get such a block.
#if defined(WDEDUP_TEST_SANITIZER_MALLOC) || !defined(__GLIBC__)
  MESSAGE("malloc is not replaced in this build: not checked");
#else
  const std::vector<std::uint8_t> bytes = pattern(32, 9);
  NamedDataStore store;
  REQUIRE(store.add_named_data("k8", ByteSpan(bytes.data(), 8), 16).ok());
  REQUIRE(store.add_named_data("k12", ByteSpan(bytes.data() + 8, 12), 16).ok());
  REQUIRE(store.add_named_data("k4", ByteSpan(bytes.data() + 20, 4), 8).ok());
  std::unique_ptr<Opened> o =
      open_via(Via::File, write_temp("alloc_small_aligned.ptd", write_or_die(store, FunctionMaps{}, WriteOptions{})));
  REQUIRE(o->ok());
  // The shim itself: an 8-byte block 8 past a multiple of 16.
  g_jemalloc_small_blocks = true;
  // volatile: clang 13 at -O2 removed this unused malloc/free pair and
  // folded the check below to its view of malloc's alignment.
  void* volatile probe = std::malloc(8);
  g_jemalloc_small_blocks = false;
  CHECK(reinterpret_cast<std::uintptr_t>(probe) % 16 == 8);
  std::free(probe);
  for (const std::string key : {"k8", "k12", "k4"}) {
    CAPTURE(key);
    const KeyInfo k = REQUIRE_VALUE(o->map().find(key));
    g_jemalloc_small_blocks = true;
    Result<DataBuffer> d = o->map().get_data(key);
    g_jemalloc_small_blocks = false;
    REQUIRE(d.ok());
    CHECK(d->owns_memory());
    CHECK(d->size() == k.size);
    CHECK(reinterpret_cast<std::uintptr_t>(d->data()) % k.alignment == 0);
  }
#endif
}
