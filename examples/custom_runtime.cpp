// examples/custom_runtime.cpp — the reader embedded in a tiny "custom
// runtime": open a store by mmap, resolve the tensor table of a method's
// first partition (decode's by default, whatever the strategy named its
// function: "decode__0" under OneBlob, "decode" under Positional), and load
// its weights into memory the runtime owns (a static arena: no heap), each
// at the alignment its key asks for.
//
//   example_custom_runtime [store.ptd [method]]
//   example_custom_runtime --export store.ptd
//
// Without an argument it first exports a small two-method model with the
// build-time half (the part that would run on a workstation) into a fresh
// temporary directory, then runs the runtime part on it; --export only
// writes that store. Built and run as a test, and built a second time as
// a delegate would build the runtime part: with WDEDUP_EXAMPLE_RUNTIME_ONLY
// defined, against the runtime headers alone, without exceptions or RTTI
// (example_custom_runtime_alone store.ptd [method]; the test runs both on
// the same store and compares what they print).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include <wdedup/runtime.hpp>  // all the runtime part below needs

#ifndef WDEDUP_EXAMPLE_RUNTIME_ONLY
#include <stdlib.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <wdedup/ptd_writer.hpp>  // only for export_demo_store()
#include <wdedup/wdedup.hpp>
#endif

namespace runtime {

// The runtime's own memory: a fixed arena, as on a microcontroller or in a
// delegate that plans its memory ahead of time.
// (In .bss: pages the loads do not reach are never touched.) It starts
// 64 bytes past a 4096 boundary, as a runtime's arena may: rounding the
// offset inside it instead of the address would misplace every tensor that
// asks for more than 64, and the self-check below would see it.
constexpr std::size_t kArenaBytes = 16 << 20;
constexpr std::size_t kArenaAlignment = 4096;
alignas(kArenaAlignment) static std::uint8_t g_arena_storage[64 + kArenaBytes];
static std::uint8_t* const g_arena = g_arena_storage + 64;
static std::size_t g_used = 0;

// `alignment` is the key's: the address is rounded, not the offset in the
// arena. Up to the alignment of the arena's storage (the page, 4096, as
// much as ExecuTorch asks for), where each tensor goes depends on the
// tensors before it only. Past it, it would depend on where the loader put the
// arena, which ASLR changes from run to run (one 32 MiB-aligned byte
// loaded on some runs of a 16 MiB arena and not on others): such keys are
// refused, so a store loads or not the same way on every run.
void* arena_alloc(std::size_t size, std::size_t alignment) {
  if (alignment > kArenaAlignment) return nullptr;
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(g_arena);
  const std::uintptr_t at = (base + g_used + alignment - 1) / alignment * alignment;
  if (at < base || at - base > kArenaBytes || size > kArenaBytes - (at - base)) return nullptr;
  g_used = at - base + size;
  return g_arena + (at - base);
}

struct LoadedTensor {
  char name[64];  // copied: the map's KeyViews die with the mapping
  const void* data;
  std::size_t size;
  std::size_t alignment;  // what its key asks for
};

// Says why `doing` failed: the check that failed, its code, and its number,
// or, where the check's text ends "(at = errno)", the errno's reason.
void print_failure(const char* doing, const char* path, const wdedup::Failure& f) {
  if (const int e = wdedup::failure_errno(f); e != 0)
    std::printf("cannot %s %s: %.*s: %s (%s)\n", doing, path,
                static_cast<int>(std::strlen(f.what) - (sizeof wdedup::kErrnoSuffix - 1)), f.what, std::strerror(e),
                wdedup::error_name(f.code));
  else
    std::printf("cannot %s %s: %s (%s at %llu)\n", doing, path, f.what != nullptr ? f.what : "",
                wdedup::error_name(f.code), static_cast<unsigned long long>(f.at));
}

// Loads every tensor of the function compiled for (method, partition).
// Returns the count, or -1.
int load_function(const char* path, wdedup::KeyView method, std::uint32_t partition, LoadedTensor* out,
                  int capacity) {
  wdedup::Result<wdedup::MmapSource> source = wdedup::MmapSource::open(path);
  if (!source) {
    print_failure("map", path, source.failure());
    return -1;
  }
  wdedup::Result<wdedup::NamedDataMap> map = wdedup::NamedDataMap::open(*source);
  if (!map) {
    print_failure("open", path, map.failure());
    return -1;
  }
  wdedup::Result<wdedup::FunctionView> fn = map->find_function(method, partition);
  if (!fn) {
    // Say which is missing, and what the file has: a .ptd ExecuTorch wrote
    // has no function maps at all, and a misspelled method is best answered
    // with the ones there are.
    std::printf("no function for method %.*s partition %u in %s: ", static_cast<int>(method.size()), method.data(),
                partition, path);
    if (fn.failure().at != 0)
      std::printf("the method has %llu partition%s\n", static_cast<unsigned long long>(fn.failure().at),
                  fn.failure().at == 1 ? "" : "s");
    else if (map->function_count() == 0)
      std::printf("the file has no function maps (a store deduplicate() wrote has them; a .ptd ExecuTorch wrote "
                  "does not)\n");
    else {
      std::printf("its methods are");
      for (std::size_t i = 0; i < map->function_count(); ++i)
        if (wdedup::Result<wdedup::FunctionView> f = map->function(i); f && f->partition_index() == 0)
          std::printf(" %.*s", static_cast<int>(f->method().size()), f->method().data());
      std::printf("\n");
    }
    return -1;
  }
  const wdedup::KeyView function_name = fn->function_name();
  std::printf("function %.*s: method %.*s partition %u, blob %.*s, %zu tensors\n",
              static_cast<int>(function_name.size()), function_name.data(), static_cast<int>(fn->method().size()),
              fn->method().data(), fn->partition_index(), static_cast<int>(fn->blob_key().size()),
              fn->blob_key().data(), fn->tensor_count());
  // A fixed-size table, as an embedded runtime has: a function with more
  // tensors than it holds is an error, not a silent partial load.
  if (fn->tensor_count() > static_cast<std::size_t>(capacity)) {
    std::printf("%.*s has %zu tensors; this runtime holds %d\n", static_cast<int>(function_name.size()),
                function_name.data(), fn->tensor_count(), capacity);
    return -1;
  }
  int n = 0;
  for (std::size_t i = 0; i < fn->tensor_count(); ++i) {
    // Every failure says why, as the ones above do: a runtime that only
    // returns -1 leaves its user nothing to go on (a FileSource's reads can
    // fail with an errno; a map over memory does not fail here).
    wdedup::Result<wdedup::FunctionTensorView> t = fn->tensor(i);
    if (!t) {
      print_failure("read the tensor table of", path, t.failure());
      return -1;
    }
    wdedup::Result<wdedup::KeyInfo> info = map->find(t->key);
    if (!info) {
      print_failure("find a key in", path, info.failure());
      return -1;
    }
    // Sizes and alignments in a file are 64-bit; std::size_t may be 32
    // (armv7): say so rather than narrow them.
    if (info->size > SIZE_MAX || info->alignment > SIZE_MAX) {
      std::printf("%.*s: %llu bytes at alignment %llu do not fit this target's size_t\n",
                  static_cast<int>(t->key.size()), t->key.data(), static_cast<unsigned long long>(info->size),
                  static_cast<unsigned long long>(info->alignment));
      return -1;
    }
    const std::size_t size = static_cast<std::size_t>(info->size);
    void* dst = arena_alloc(size, static_cast<std::size_t>(info->alignment));
    if (dst == nullptr) {
      // An alignment past the arena storage's is refused whatever is used
      // (arena_alloc): not "full".
      if (info->alignment > kArenaAlignment)
        std::printf("%.*s: alignment %llu is past the %zu this runtime places tensors at (where its arena was "
                    "loaded would decide whether it fits)\n",
                    static_cast<int>(t->key.size()), t->key.data(), static_cast<unsigned long long>(info->alignment),
                    kArenaAlignment);
      else
        std::printf("arena full: %llu bytes at alignment %llu do not fit after %zu of %zu bytes\n",
                    static_cast<unsigned long long>(info->size), static_cast<unsigned long long>(info->alignment),
                    g_used, kArenaBytes);
      return -1;
    }
    // A copy into runtime-owned memory; the map itself allocates nothing.
    if (wdedup::Status st = map->load_data_into(t->key, dst, size); !st) {
      print_failure("load a tensor from", path, st.failure());
      return -1;
    }
    std::printf("  %-28.*s <- key %-28.*s %8llu bytes, align %llu\n", static_cast<int>(t->tensor_name.size()),
                t->tensor_name.data(), static_cast<int>(t->key.size()), t->key.data(),
                static_cast<unsigned long long>(info->size), static_cast<unsigned long long>(info->alignment));
    LoadedTensor& lt = out[n++];
    const std::size_t len = t->tensor_name.size() < sizeof lt.name - 1 ? t->tensor_name.size() : sizeof lt.name - 1;
    std::memcpy(lt.name, t->tensor_name.data(), len);
    lt.name[len] = '\0';
    lt.data = dst;
    lt.size = size;
    lt.alignment = static_cast<std::size_t>(info->alignment);
  }
  // The loaded bytes outlive the map and the mapping: they are ours.
  return n;
}

}  // namespace runtime

/// Each build's usage line(s).
static void print_usage(std::FILE* f, const char* argv0) {
#ifdef WDEDUP_EXAMPLE_RUNTIME_ONLY
  std::fprintf(f, "usage: %s store.ptd [method]\n", argv0);
#else
  std::fprintf(f, "usage: %s [store.ptd [method]]\n       %s --export store.ptd\n", argv0, argv0);
#endif
}

/// --help (usage on stdout, exit 0) or another argument that starts with
/// '-' (usage on stderr, exit 2) where a path is expected: it would be
/// taken for a file's name ("cannot map --export: ..."). -1 otherwise.
static int option_instead_of_path(const char* arg, const char* argv0) {
  if (std::strcmp(arg, "--help") == 0 || std::strcmp(arg, "-h") == 0) {
    print_usage(stdout, argv0);
    return 0;
  }
  if (arg[0] != '-') return -1;
#ifndef WDEDUP_EXAMPLE_RUNTIME_ONLY
  if (std::strcmp(arg, "--export") == 0)
    std::fprintf(stderr, "%s: --export needs a path\n", argv0);
  else
#endif
    std::fprintf(stderr, "%s: unknown option '%s' (a path that starts with '-' is given as ./%s)\n", argv0, arg, arg);
  print_usage(stderr, argv0);
  return 2;
}

#ifdef WDEDUP_EXAMPLE_RUNTIME_ONLY
int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    print_usage(stderr, argv[0]);
    return 2;
  }
  if (const int rc = option_instead_of_path(argv[1], argv[0]); rc >= 0) return rc;
  static runtime::LoadedTensor tensors[256];
  return runtime::load_function(argv[1], argc > 2 ? argv[2] : "decode", 0, tensors, 256) < 0 ? 1 : 0;
}
#else
// The export step, for the self-contained run: prefill and decode share
// their weights; each has its own attention mask.
static std::vector<std::vector<std::uint8_t>> g_weights;
static bool export_demo_store(const std::string& path) {
  for (std::size_t i = 0; i < 3; ++i) {
    g_weights.emplace_back(4096 * (i + 1));
    for (std::size_t j = 0; j < g_weights.back().size(); ++j) g_weights.back()[j] = static_cast<std::uint8_t>(j * (i + 3));
  }
  g_weights.emplace_back(256, 0x11);  // prefill mask
  g_weights.emplace_back(64, 0x22);   // decode mask
  std::vector<std::vector<std::uint8_t>> decode_copy(g_weights.begin(), g_weights.begin() + 3);
  wdedup::Program program;
  auto add_weights = [](wdedup::Partition& p, const std::vector<std::vector<std::uint8_t>>& w) {
    for (std::size_t i = 0; i < 3; ++i)
      p.add("layers." + std::to_string(i) + ".weight", wdedup::ByteSpan(w[i].data(), w[i].size()), i == 2 ? 4096 : 64);
  };
  wdedup::Partition& prefill = program.add_method("prefill").add_partition();
  add_weights(prefill, g_weights);
  prefill.add("mask", wdedup::ByteSpan(g_weights[3].data(), 256), 16);
  wdedup::Partition& decode = program.add_method("decode").add_partition();
  add_weights(decode, decode_copy);
  decode.add("mask", wdedup::ByteSpan(g_weights[4].data(), 64), 16);
  auto result = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
  if (!result) {
    std::printf("%s\n", result.message().c_str());
    return false;
  }
  auto written = wdedup::write_ptd_file(result->store, result->functions, path);
  if (!written) {
    std::printf("%s\n", written.message().c_str());
    return false;
  }
  std::printf("exported %s: %llu bytes in, %llu stored\n", path.c_str(),
              static_cast<unsigned long long>(result->report.bytes_in),
              static_cast<unsigned long long>(result->report.bytes_stored));
  return true;
}

int main(int argc, char** argv) {
  std::string path, dir;
  if (argc > 3) {
    print_usage(stderr, argv[0]);
    return 2;
  }
  if (argc == 3 && std::strcmp(argv[1], "--export") == 0) return export_demo_store(argv[2]) ? 0 : 1;
  if (argc > 1) {
    if (const int rc = option_instead_of_path(argv[1], argv[0]); rc >= 0) return rc;
    path = argv[1];
  } else {
    const char* tmp = std::getenv("TMPDIR");
    dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/wdedup-runtime-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      std::perror(dir.c_str());
      return 1;
    }
    path = dir + "/store.ptd";
    const bool exported = export_demo_store(path);
    if (!exported) rmdir(dir.c_str());
    if (!exported) return 1;
  }
  static runtime::LoadedTensor tensors[256];
  const int n = runtime::load_function(path.c_str(), argc > 2 ? argv[2] : "decode", 0, tensors, 256);
  if (argc > 1) return n < 0 ? 1 : 0;
  std::remove(path.c_str());
  rmdir(dir.c_str());
  if (n < 0) return 1;
  // Self-check for the self-contained run: decode__0 got the shared weights
  // and its own mask, byte for byte, each at its alignment (one weight asks
  // for 4096, more than the 64 the arena's start is aligned to).
  bool ok = n == 4 && std::strcmp(tensors[3].name, "mask") == 0 && tensors[3].size == 64 &&
            std::memcmp(tensors[3].data, g_weights[4].data(), 64) == 0;
  for (std::size_t i = 0; i < 3 && ok; ++i)
    ok = tensors[i].size == g_weights[i].size() &&
         std::memcmp(tensors[i].data, g_weights[i].data(), g_weights[i].size()) == 0 &&
         tensors[i].alignment == (i == 2 ? 4096u : 64u);
  for (int i = 0; i < n && ok; ++i) ok = reinterpret_cast<std::uintptr_t>(tensors[i].data) % tensors[i].alignment == 0;
  std::printf("%s\n", ok ? "custom runtime: OK" : "custom runtime: WRONG BYTES");
  return ok ? 0 : 1;
}
#endif  // WDEDUP_EXAMPLE_RUNTIME_ONLY
