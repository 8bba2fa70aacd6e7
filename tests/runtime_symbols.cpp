// tests/runtime_symbols.cpp — every entry point of the runtime half, in one
// object built as a delegate builds it (-fno-exceptions -fno-rtti), so that
// check_runtime_symbols.py can read what that object needs from outside.
// Not a test program: nothing here runs. An embedded runtime may have a C
// library and no C++ runtime library at all (no libstdc++, libc++abi or
// libsupc++), so the object must need nothing of one but what a class with
// virtual functions makes every compiler name: operator delete (the
// deleting destructors of DataSource's sources) and __cxa_pure_virtual
// (DataSource's own vtable, where it is emitted). The header checks
// (runtime_headers.cpp) see which headers are included; this sees what
// the code they hold calls: operator new, a throw, typeinfo, a
// thread-safe static's guard or a std:: function out of line would each
// show here.
#include "wdedup/runtime.hpp"
#include "wdedup/runtime/verify.hpp"

namespace wdedup_symbols {

/// One use of each query, on a map opened any way.
int use_map(const wdedup::NamedDataMap& map, wdedup::KeyView key, void* dst, std::size_t n) noexcept {
  int sum = 0;
  if (wdedup::Result<wdedup::TensorLayout> l = map.get_tensor_layout(key)) sum += static_cast<int>(l->nbytes());
  if (wdedup::Result<wdedup::DataBuffer> d = map.get_data(key)) sum += static_cast<int>(d->size());
  sum += map.load_data_into(key, dst, n) ? 1 : 0;
  if (wdedup::Result<std::size_t> k = map.get_num_keys()) sum += static_cast<int>(*k);
  if (wdedup::Result<wdedup::KeyView> k = map.get_key(0)) sum += static_cast<int>(k->size());
  if (wdedup::Result<wdedup::KeyInfo> i = map.find(key)) sum += static_cast<int>(i->size);
  if (wdedup::Result<wdedup::KeyInfo> i = map.key_info(0)) sum += static_cast<int>(i->size);
  if (wdedup::Result<wdedup::DataBuffer> d = map.key_data(0)) sum += static_cast<int>(d->size());
  if (wdedup::Result<wdedup::TensorLayout> l = map.key_layout(0)) sum += static_cast<int>(l->numel());
  if (wdedup::Result<wdedup::SegmentInfo> s = map.segment(0)) sum += static_cast<int>(s->size);
  sum += static_cast<int>(map.segment_count() + map.function_count() + map.file_size());
  sum += map.has_index() + map.keys_overlap() + map.has_extension() + map.is_memory_backed();
  sum += map.check_source() ? 1 : 0;
  if (wdedup::Result<wdedup::FunctionView> f = map.find_function(key, 0)) {
    sum += static_cast<int>(f->tensor_count() + f->function_name().size() + f->blob_key().size());
    if (wdedup::Result<wdedup::FunctionTensorView> t = f->tensor(0)) sum += static_cast<int>(t->key_index);
    if (wdedup::Result<wdedup::FunctionTensorView> t = f->find_tensor(key)) sum += static_cast<int>(t->key.size());
    if (wdedup::Result<wdedup::KeyView> k = f->key_of(key)) sum += static_cast<int>(k->size());
  }
  if (wdedup::Result<wdedup::FunctionView> f = map.find_function(key)) sum += static_cast<int>(f->tensor_count());
  if (wdedup::Result<wdedup::FunctionView> f = map.find_function(key, key)) sum += static_cast<int>(f->tensor_count());
  if (wdedup::Result<wdedup::FunctionView> f = map.function(0)) sum += static_cast<int>(f->partition_index());
  sum += wdedup::verify_segment(map, 0) ? 1 : 0;
  sum += wdedup::verify_segments(map) ? 1 : 0;
  return sum;
}

/// Each source, and each way of opening a map over it.
int use_sources(const char* path, const void* bytes, std::size_t n, wdedup::Span<std::uint8_t> memory) noexcept {
  int sum = 0;
  char buf[64];
  if (wdedup::Result<wdedup::MmapSource> s = wdedup::MmapSource::open(path))
    if (wdedup::Result<wdedup::NamedDataMap> m = wdedup::NamedDataMap::open(*s)) sum += use_map(*m, path, buf, 64);
  if (wdedup::Result<wdedup::FileSource> s = wdedup::FileSource::open(path)) {
    if (wdedup::Result<std::uint64_t> need = wdedup::NamedDataMap::metadata_size(*s)) sum += static_cast<int>(*need);
    if (wdedup::Result<wdedup::NamedDataMap> m = wdedup::NamedDataMap::open(*s, memory)) sum += use_map(*m, path, buf, 64);
  }
  if (wdedup::Result<wdedup::MappedFile> f = wdedup::MappedFile::open(path)) {
    wdedup::MappedFile moved = static_cast<wdedup::Result<wdedup::MappedFile>&&>(f).value();
    if (wdedup::Result<wdedup::MappedFile> g = wdedup::MappedFile::open(path, wdedup::OpenOptions{}))
      moved = static_cast<wdedup::Result<wdedup::MappedFile>&&>(g).value();
    sum += use_map(moved.map(), path, buf, 64);
  }
  if (wdedup::Result<std::uint64_t> need = wdedup::PreadFile::metadata_size(path)) sum += static_cast<int>(*need);
  if (wdedup::Result<wdedup::PreadFile> f = wdedup::PreadFile::open(path, memory)) {
    wdedup::PreadFile moved = static_cast<wdedup::Result<wdedup::PreadFile>&&>(f).value();
    if (wdedup::Result<wdedup::PreadFile> g = wdedup::PreadFile::open(path, memory, wdedup::OpenOptions{}))
      moved = static_cast<wdedup::Result<wdedup::PreadFile>&&>(g).value();
    sum += use_map(moved.map(), path, buf, 64);
  }
  wdedup::BufferSource b(bytes, n);
  if (wdedup::Result<wdedup::NamedDataMap> m = wdedup::NamedDataMap::open(b)) {
    sum += m->build_index(memory) ? 1 : 0;
    sum += static_cast<int>(wdedup::NamedDataMap::index_memory_size(16));
    sum += use_map(*m, path, buf, 64);
  }
  return sum;
}

}  // namespace wdedup_symbols
