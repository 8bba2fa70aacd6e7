// Reads the store write_store wrote through an installed wdedup's runtime
// half, built as a delegate builds (-fno-exceptions -fno-rtti), and prints
// what it finds: the test compares that line for line.
#include <cstdint>
#include <cstdio>

#include <wdedup/runtime.hpp>

static int fail(const char* what, wdedup::Error e) {
  std::printf("%s: %s\n", what, wdedup::error_name(e));
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  wdedup::Result<wdedup::MmapSource> source = wdedup::MmapSource::open(argv[1]);
  if (!source) return fail("map", source.error());
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(*source);
  if (!map) return fail("open", map.error());
  const char* names[] = {"prefill", "decode"};
  for (const char* method : names) {
    wdedup::Result<wdedup::FunctionView> fn = map->find_function(method, 0);
    if (!fn) return fail(method, fn.error());
    for (std::size_t i = 0; i < fn->tensor_count(); ++i) {
      wdedup::Result<wdedup::FunctionTensorView> t = fn->tensor(i);
      if (!t) return fail("tensor", t.error());
      wdedup::Result<wdedup::KeyInfo> info = map->find(t->key);
      if (!info) return fail("key", info.error());
      static std::uint8_t buf[8192];
      if (info->size > sizeof buf) return 1;
      const wdedup::Status loaded = map->load_data_into(t->key, buf, static_cast<std::size_t>(info->size));
      if (!loaded) return fail("load", loaded.error());
      std::uint64_t sum = 0;
      for (std::size_t b = 0; b < info->size; ++b) sum += buf[b];
      std::printf("%s/%.*s -> %.*s: %llu bytes, align %llu, sum %llu\n", method, static_cast<int>(t->tensor_name.size()),
                  t->tensor_name.data(), static_cast<int>(t->key.size()), t->key.data(),
                  static_cast<unsigned long long>(info->size), static_cast<unsigned long long>(info->alignment),
                  static_cast<unsigned long long>(sum));
    }
  }
  wdedup::Result<std::size_t> keys = map->get_num_keys();
  std::printf("keys %zu\n", keys ? *keys : std::size_t{0});
  return 0;
}
