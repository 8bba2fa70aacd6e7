// tests/fuzz/named_data_map_fuzz.cpp — libFuzzer target for the runtime
// reader: any bytes in, and the reader must neither crash nor read out of
// bounds (ASan/UBSan watch that), and every answer it gives must agree with
// its other answers:
//   - opened in place (BufferSource) and through src.read with lent metadata
//     (a source that is not memory-backed), the file opens or fails alike,
//     and both give the same keys, offsets, layouts, bytes and segments;
//   - every key is found by its own name (the first of equal names, for a
//     plain ExecuTorch file without an index), with the KeyInfo of its index;
//   - a layout comes back exactly for the keys said to have one, and is
//     internally consistent, or is MalformedLayout (a layout that breaks its
//     rules opens, as in ExecuTorch), which load_data_into then answers too,
//     copying nothing; load_data_into returns the bytes its layout
//     describes (without one: the segment), a prefix of get_data's, and
//     get_data's view of an in-place map points into the file;
//   - a key that is not in the file is NotFound, before and after
//     build_index, which refuses exactly the files that repeat a key;
//   - every row of every function table names a real key, and find_tensor
//     finds it by its name; find_function finds every function;
//   - opened with OpenOptions::allow_moved_segments, a file opens exactly
//     as without it, unless it was refused for a key entry's data range;
//     then the option lifts that refusal (another check may still refuse
//     the file), and the map it gives says its segments moved, opens alike
//     with lent metadata, and keeps every property above, each key's range
//     its segment's and each key's offset a multiple of its alignment's
//     power-of-two part (all a rewrite keeps).
// The runtime half is built as embedded runtimes build it (no exceptions, no
// RTTI); a broken invariant aborts with a message naming it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "wdedup/runtime.hpp"
#include "wdedup/runtime/verify.hpp"

namespace {

using namespace wdedup;

[[noreturn]] void fail(const char* what, std::uint64_t a, std::uint64_t b) {
  std::fprintf(stderr, "named_data_map_fuzz: invariant broken: %s (%llu, %llu)\n", what,
               static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  std::abort();
}
#define FUZZ_CHECK(cond, a, b) \
  do {                         \
    if (!(cond)) fail(#cond, (a), (b)); \
  } while (0)

/// A source that only reads (like FileSource, without the file): every
/// access goes through read(), so the pread paths are fuzzed too.
class ReadOnlySource final : public DataSource {
 public:
  ReadOnlySource(const std::uint8_t* data, std::uint64_t size) noexcept : data_(data), size_(size) {}
  std::uint64_t size() const noexcept override { return size_; }
  const std::uint8_t* view(std::uint64_t, std::uint64_t) const noexcept override { return nullptr; }
  Status read(std::uint64_t offset, void* dst, std::uint64_t size) const noexcept override {
    if (offset > size_ || size > size_ - offset) return Status(Error::Truncated, "read past the end", offset);
    if (size != 0) std::memcpy(dst, data_ + offset, static_cast<std::size_t>(size));
    return detail::ok_status();
  }

 private:
  const std::uint8_t* data_;
  std::uint64_t size_;
};

bool same_bytes(const void* a, const void* b, std::uint64_t n) {
  return n == 0 || std::memcmp(a, b, static_cast<std::size_t>(n)) == 0;
}

/// Touches every element of a layout (ASan sees an out-of-bounds span) and
/// checks it is one the reader may return.
void check_layout(const TensorLayout& l) {
  std::uint64_t nbytes = 0;
  FUZZ_CHECK(detail::layout_byte_size(l.scalar_type, l.sizes.data(), l.sizes.size(), l.dim_order.data(),
                                      l.dim_order.size(), &nbytes),
             l.sizes.size(), l.dim_order.size());
  FUZZ_CHECK(nbytes == l.nbytes(), nbytes, l.nbytes());
}

/// Index of the first key equal to `k` (a scan, as the reader's own), or UINT32_MAX.
std::uint32_t first_key_equal_to(const NamedDataMap& m, KeyView k) {
  const std::size_t n = *m.get_num_keys();
  for (std::size_t i = 0; i < n; ++i)
    if (*m.get_key(i) == k) return static_cast<std::uint32_t>(i);
  return UINT32_MAX;
}

void check_functions(const NamedDataMap& m) {
  const std::size_t nkeys = *m.get_num_keys();
  for (std::size_t fi = 0; fi < m.function_count(); ++fi) {
    Result<FunctionView> f = m.function(fi);
    FUZZ_CHECK(f, fi, 0);
    Result<FunctionView> by_pos = m.find_function(f->method(), f->partition_index());
    FUZZ_CHECK(by_pos, fi, f->partition_index());
    // Found by either identity, a function is itself: open() refuses two
    // functions for one (method, partition) or with one name in one blob.
    FUZZ_CHECK(by_pos->method() == f->method() && by_pos->partition_index() == f->partition_index(), fi, 0);
    FUZZ_CHECK(by_pos->blob_key() == f->blob_key() && by_pos->function_name() == f->function_name(), fi, 0);
    Result<FunctionView> by_blob = m.find_function(f->blob_key(), f->function_name());
    FUZZ_CHECK(by_blob && by_blob->function_name() == f->function_name(), fi, 0);
    FUZZ_CHECK(by_blob->method() == f->method() && by_blob->partition_index() == f->partition_index(), fi, 0);
    // Every name is a C string a backend can hand on: not empty, NUL-free,
    // NUL-terminated.
    for (const KeyView name : {f->method(), f->blob_key(), f->function_name()}) {
      FUZZ_CHECK(name.size() > 0 && name.data()[name.size()] == '\0', fi, name.size());
      FUZZ_CHECK(std::memchr(name.data(), 0, name.size()) == nullptr, fi, name.size());
    }
    for (std::size_t r = 0; r < f->tensor_count(); ++r) {
      Result<FunctionTensorView> row = f->tensor(r);
      FUZZ_CHECK(row, fi, r);
      FUZZ_CHECK(row->tensor_name.size() > 0 && row->tensor_name.data()[row->tensor_name.size()] == '\0', fi, r);
      FUZZ_CHECK(std::memchr(row->tensor_name.data(), 0, row->tensor_name.size()) == nullptr, fi, r);
      FUZZ_CHECK(row->key_index < nkeys, row->key_index, nkeys);
      FUZZ_CHECK(*m.get_key(row->key_index) == row->key, fi, r);
      Result<FunctionTensorView> found = f->find_tensor(row->tensor_name);
      FUZZ_CHECK(found && found->tensor_name == row->tensor_name, fi, r);
      Result<KeyView> key = f->key_of(row->tensor_name);
      FUZZ_CHECK(key && *key == found->key, fi, r);
    }
    FUZZ_CHECK(!f->tensor(f->tensor_count()), fi, f->tensor_count());
  }
  FUZZ_CHECK(!m.function(m.function_count()), m.function_count(), 0);
}

/// Every lookup of every key, and a missing one, on an opened map.
/// `flat` is the fuzz input: an in-place map's views must point into it.
void check_keys(const NamedDataMap& m, const std::uint8_t* flat, std::size_t flat_size) {
  const std::size_t n = *m.get_num_keys();
  std::vector<std::uint8_t> buffer;
  for (std::size_t i = 0; i < n; ++i) {
    Result<KeyView> k = m.get_key(i);
    FUZZ_CHECK(k, i, n);
    FUZZ_CHECK(k->data()[k->size()] == '\0', i, k->size());
    Result<KeyInfo> info = m.key_info(i);
    FUZZ_CHECK(info && info->key == *k && info->key_index == i, i, 0);
    FUZZ_CHECK(info->offset <= m.file_size() && info->size <= m.file_size() - info->offset, info->offset,
               info->size);
    FUZZ_CHECK(info->segment_index < m.segment_count(), info->segment_index, m.segment_count());
    const SegmentInfo seg = *m.segment(info->segment_index);
    FUZZ_CHECK(info->offset == seg.offset && info->size == seg.size, info->offset, seg.offset);
    // The alignment the key asked for holds in the file (1 where it does
    // not say); where segments moved, its power-of-two part (all that
    // ExecuTorch's replace_data keeps, and all a view is aligned to).
    const std::uint64_t kept = m.segments_moved() ? info->alignment & (~info->alignment + 1) : info->alignment;
    FUZZ_CHECK(info->alignment != 0 && info->offset % kept == 0, info->offset, info->alignment);
    // Equal keys are refused where there is an index; a scan finds the first.
    Result<KeyInfo> found = m.find(*k);
    FUZZ_CHECK(found, i, 0);
    FUZZ_CHECK(found->key_index == (m.has_index() ? i : first_key_equal_to(m, *k)), found->key_index, i);
    FUZZ_CHECK(found->key == *k, i, 0);
    if (found->key_index != i) continue;  // a repeated key of a plain file: answers are its first's
    Result<TensorLayout> layout = m.get_tensor_layout(*k);
    // A layout that breaks its rules does not stop open() (ExecuTorch's
    // reader never reads one there): that key's layout queries and
    // load_data_into say MalformedLayout, at the same place; get_data still
    // gives its bytes.
    const bool faulty = !layout && layout.error() == Error::MalformedLayout;
    FUZZ_CHECK(static_cast<bool>(layout) == (info->has_layout && !faulty), i, info->has_layout);
    if (layout) check_layout(*layout);
    else if (faulty) FUZZ_CHECK(info->has_layout && m.key_layout(i).failure().at == layout.failure().at, i, 0);
    else FUZZ_CHECK(layout.error() == Error::NotFound, i, static_cast<std::uint64_t>(layout.error()));
    Result<DataBuffer> data = m.get_data(*k);
    FUZZ_CHECK(data && data->size() == info->size, i, info->size);
    if (m.is_memory_backed())
      FUZZ_CHECK(static_cast<const std::uint8_t*>(data->data()) == flat + info->offset && info->offset <= flat_size,
                 i, info->offset);
    if (faulty) {
      buffer.assign(static_cast<std::size_t>(info->size) + 1, 0xEE);
      const Status st = m.load_data_into(*k, buffer.data(), buffer.size());
      FUZZ_CHECK(!st && st.error() == Error::MalformedLayout && st.failure().at == layout.failure().at, i, 0);
      for (const std::uint8_t b : buffer) FUZZ_CHECK(b == 0xEE, i, b);
      FUZZ_CHECK(same_bytes(data->data(), flat + info->offset, info->size), i, info->offset);
      continue;
    }
    // load_data_into copies the layout's bytes (at most the segment's), or
    // without a layout the segment's, and nothing past them.
    const std::uint64_t copied = layout ? layout->nbytes() : info->size;
    FUZZ_CHECK(copied <= info->size, copied, info->size);
    buffer.assign(static_cast<std::size_t>(info->size) + 1, 0xEE);
    FUZZ_CHECK(m.load_data_into(*k, buffer.data(), buffer.size()), i, info->size);
    FUZZ_CHECK(same_bytes(buffer.data(), data->data(), copied), i, copied);
    for (std::size_t b = static_cast<std::size_t>(copied); b <= info->size; ++b) FUZZ_CHECK(buffer[b] == 0xEE, i, b);
    FUZZ_CHECK(same_bytes(data->data(), flat + info->offset, info->size), i, info->offset);
    if (copied > 0) {
      Status small = m.load_data_into(*k, buffer.data(), static_cast<std::size_t>(copied - 1));
      FUZZ_CHECK(!small && small.error() == Error::BufferTooSmall && small.failure().at == copied, i, copied);
    }
  }
  FUZZ_CHECK(!m.get_key(n) && !m.key_info(n), n, 0);
  // A key that is not in the file: each key with one more byte, unless
  // that too is a key.
  char longer[64];
  for (std::size_t i = 0; i < n && i < 8; ++i) {
    const KeyView k = *m.get_key(i);
    if (k.size() + 1 > sizeof longer) continue;
    std::memcpy(longer, k.data(), k.size());
    longer[k.size()] = '#';
    const KeyView missing(longer, k.size() + 1);
    if (first_key_equal_to(m, missing) != UINT32_MAX) continue;
    Result<KeyInfo> r = m.find(missing);
    FUZZ_CHECK(!r && r.error() == Error::NotFound, i, 0);
    FUZZ_CHECK(!m.get_tensor_layout(missing) && !m.get_data(missing), i, 0);
  }
}

void check_segments(const NamedDataMap& m) {
  for (std::uint32_t i = 0; i < m.segment_count(); ++i) {
    Result<SegmentInfo> s = m.segment(i);
    FUZZ_CHECK(s, i, 0);
    // Inside the segment data the header declares (which is inside the file).
    const FileHeader& h = m.header();
    FUZZ_CHECK(s->offset >= h.segment_base_offset && s->size <= h.segment_data_size &&
                   s->offset - h.segment_base_offset <= h.segment_data_size - s->size,
               s->offset, s->size);
    FUZZ_CHECK(h.segment_base_offset + h.segment_data_size <= m.file_size(), h.segment_base_offset,
               h.segment_data_size);
    Status v = verify_segment(m, i);
    FUZZ_CHECK(v || v.error() == Error::MalformedSegment || v.error() == Error::NotFound, i,
               static_cast<std::uint64_t>(v.error()));
    FUZZ_CHECK(static_cast<bool>(v) || !s->has_content_hash || v.error() == Error::MalformedSegment, i, 0);
  }
  FUZZ_CHECK(!m.segment(m.segment_count()), m.segment_count(), 0);
}

/// The two maps of one file say the same things.
void check_agree(const NamedDataMap& a, const NamedDataMap& b) {
  FUZZ_CHECK(*a.get_num_keys() == *b.get_num_keys(), *a.get_num_keys(), *b.get_num_keys());
  FUZZ_CHECK(a.segment_count() == b.segment_count() && a.function_count() == b.function_count(), a.segment_count(),
             b.segment_count());
  FUZZ_CHECK(a.has_extension() == b.has_extension(), a.has_extension(), b.has_extension());
  for (std::size_t i = 0; i < *a.get_num_keys(); ++i) {
    const KeyInfo x = *a.key_info(i), y = *b.key_info(i);
    FUZZ_CHECK(x.key == y.key && x.offset == y.offset && x.size == y.size && x.alignment == y.alignment &&
                   x.has_layout == y.has_layout && x.segment_index == y.segment_index,
               i, 0);
  }
  for (std::uint32_t i = 0; i < a.segment_count(); ++i) {
    const SegmentInfo x = *a.segment(i), y = *b.segment(i);
    FUZZ_CHECK(x.offset == y.offset && x.size == y.size && x.content_hash == y.content_hash, i, 0);
    const Status vx = verify_segment(a, i), vy = verify_segment(b, i);
    FUZZ_CHECK(static_cast<bool>(vx) == static_cast<bool>(vy), i, 0);
  }
}

/// build_index succeeds exactly when no key repeats and the keys' strings
/// do not overlap (it refuses those first, MalformedIndex, without hashing
/// them), and lookups then answer as before.
void check_built_index(NamedDataMap& m, const std::uint8_t* flat, std::size_t flat_size) {
  if (m.has_index()) return;
  const std::size_t n = *m.get_num_keys();
  std::vector<std::uint64_t> memory(static_cast<std::size_t>(NamedDataMap::index_memory_size(n) / 8));
  const Span<std::uint8_t> room(reinterpret_cast<std::uint8_t*>(memory.data()), memory.size() * 8);
  if (m.keys_overlap()) {
    const Status st = m.build_index(room);
    FUZZ_CHECK(!st && st.error() == Error::MalformedIndex && !m.has_index(), static_cast<std::uint64_t>(st.error()), 0);
    return;
  }
  bool repeats = false;
  for (std::size_t i = 0; i < n && !repeats; ++i) repeats = first_key_equal_to(m, *m.get_key(i)) != i;
  Status st = m.build_index(room);
  FUZZ_CHECK(static_cast<bool>(st) == !repeats, repeats, static_cast<std::uint64_t>(st.error()));
  if (!st) {
    FUZZ_CHECK(st.error() == Error::MalformedKey && !m.has_index(), 0, 0);
    return;
  }
  FUZZ_CHECK(m.has_index(), 0, 0);
  check_keys(m, flat, flat_size);
}

}  // namespace

/// A file opened in place and with lent metadata: the two agree, and each
/// keeps every property.
void check_pair(NamedDataMap& in_place, NamedDataMap& lent, const std::uint8_t* flat, std::size_t size) {
  check_agree(in_place, lent);
  for (NamedDataMap* m : {&in_place, &lent}) {
    check_keys(*m, flat, size);
    check_segments(*m);
    check_functions(*m);
    check_built_index(*m, flat, size);
  }
}

bool same_text(const char* a, const char* b) { return a == b || (a && b && std::strcmp(a, b) == 0); }

/// Whether `f` is the refusal allow_moved_segments lifts: a key entry's
/// data offset or size that differs from its segment's.
bool moved_range(const Failure& f) {
  return f.code == Error::MalformedIndex && f.what != nullptr &&
         (std::strncmp(f.what, "key entry's data offset differs from its segment", 48) == 0 ||
          std::strncmp(f.what, "key entry's data size differs from its segment", 46) == 0);
}

/// Whether `f` is the refusal allow_moved_segments may put off: a segment
/// offset that does not meet its recorded alignment. Under the option a
/// segment meets only the power-of-two part of it until the file is known
/// not to have moved (ExecuTorch's replace_data keeps no more), so another
/// check may refuse the file first, or it opens as moved.
bool realignable(const Failure& f) {
  return f.code == Error::MalformedIndex && f.what != nullptr &&
         std::strcmp(f.what, "segment alignment is 0, too large, or not met by its offset") == 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // The reader needs 8-byte-aligned memory (as mmap gives); libFuzzer's
  // buffers are not always aligned. Exactly `size` bytes (operator new
  // aligns to 16), so ASan sees a read one byte past the end.
  std::unique_ptr<std::uint8_t[]> copy(new std::uint8_t[size == 0 ? 1 : size]);
  std::uint8_t* flat = copy.get();
  if (size != 0) std::memcpy(flat, data, size);
  const BufferSource mem(flat, size);
  const ReadOnlySource rd(flat, size);

  Result<NamedDataMap> in_place = NamedDataMap::open(mem);
  Result<std::uint64_t> need = NamedDataMap::metadata_size(rd);
  std::vector<std::uint64_t> metadata;
  Result<NamedDataMap> lent(Error::NotFound, "not opened", 0);
  if (need) {
    FUZZ_CHECK(*need <= size, *need, size);
    metadata.resize(static_cast<std::size_t>(*need / 8 + 1));
    lent = NamedDataMap::open(rd, Span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(metadata.data()),
                                                     metadata.size() * 8));
  }
  FUZZ_CHECK(static_cast<bool>(in_place) == static_cast<bool>(lent), static_cast<bool>(in_place),
             static_cast<bool>(lent));
  OpenOptions allow;
  allow.allow_moved_segments = true;
  Result<NamedDataMap> moved = NamedDataMap::open(mem, allow);
  if (in_place) {
    FUZZ_CHECK(moved && !moved->segments_moved(), static_cast<bool>(moved), 0);
    check_agree(*in_place, *moved);
  } else if (!moved_range(in_place.failure()) && !realignable(in_place.failure())) {
    FUZZ_CHECK(!moved && moved.error() == in_place.error() && moved.failure().at == in_place.failure().at &&
                   same_text(moved.failure().what, in_place.failure().what),
               static_cast<std::uint64_t>(moved.error()), static_cast<std::uint64_t>(in_place.error()));
  } else {
    // The option lifts that refusal (or puts it off): what is left is
    // another check's, or the same alignment's for a file that did not move.
    FUZZ_CHECK(moved || !moved_range(moved.failure()), 0, 0);
    if (moved) {
      FUZZ_CHECK(moved->segments_moved() && moved->has_extension(), 0, 0);
      // Through src.read with lent metadata alike.
      Result<NamedDataMap> moved_lent(Error::NotFound, "not opened", 0);
      if (need)
        moved_lent = NamedDataMap::open(
            rd, Span<std::uint8_t>(reinterpret_cast<std::uint8_t*>(metadata.data()), metadata.size() * 8), allow);
      FUZZ_CHECK(moved_lent && moved_lent->segments_moved(), static_cast<bool>(moved_lent), 0);
      check_pair(*moved, *moved_lent, flat, size);
    }
  }
  if (!in_place) {
    // The same check refuses it on both paths, at the same place: where
    // metadata_size() refuses, it is the check open() runs first.
    const Failure other = need ? lent.failure() : need.failure();
    FUZZ_CHECK(in_place.error() == other.code && in_place.failure().at == other.at &&
                   same_text(in_place.failure().what, other.what),
               static_cast<std::uint64_t>(in_place.error()), static_cast<std::uint64_t>(other.code));
    return 0;
  }
  FUZZ_CHECK(in_place->is_memory_backed() && !lent->is_memory_backed(), 0, 0);
  check_pair(*in_place, *lent, flat, size);
  return 0;
}
