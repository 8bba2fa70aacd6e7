// examples/merge_ptd_files.cpp — your model was exported one method at a
// time, so each method's .ptd holds the shared weights again: merge the
// files into one store that holds them once, with a function map per
// method, and check that every method still reads its own bytes before
// the file replaces OUT.
//
//   example_merge_ptd_files [OUT.ptd IN.ptd...]
//
// OUT may not be one of the inputs (exit 2): the merge would replace it.
// Nor may it be an existing file other than a merged store or an empty one
// (exit 2): "prefill.ptd decode.ptd", OUT forgotten, would replace an export.
//
// Without arguments it first writes two such files itself (prefill.ptd and
// decode.ptd, sharing three weights, each with its own mask) into a fresh
// temporary directory, merges them there and removes the directory: it
// never touches files of yours. Built and run as a test.
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <wdedup/runtime.hpp>
#include <wdedup/wdedup.hpp>

namespace {

// The stand-in for two separate exports: what each method's own .ptd holds.
bool write_method_alone(const std::string& path, const std::vector<std::vector<std::uint8_t>>& weights,
                        const std::vector<std::uint8_t>& mask) {
  wdedup::NamedDataStore store;
  for (std::size_t i = 0; i < weights.size(); ++i)
    if (auto r = store.add_named_data("layers." + std::to_string(i) + ".weight",
                                      wdedup::ByteSpan(weights[i].data(), weights[i].size()), 64);
        !r) {
      std::printf("%s\n", r.message().c_str());
      return false;
    }
  if (auto r = store.add_named_data("mask", wdedup::ByteSpan(mask.data(), mask.size()), 16); !r) {
    std::printf("%s\n", r.message().c_str());
    return false;
  }
  auto written = wdedup::write_ptd_file(store, path);
  if (!written) std::printf("%s\n", written.message().c_str());
  return written.ok();
}

// The self-contained run's directory, removed with what it holds on every
// way out.
struct Scratch {
  std::string dir;
  std::vector<std::string> files;
  ~Scratch() {
    if (dir.empty()) return;
    for (const std::string& f : files) std::remove(f.c_str());
    rmdir(dir.c_str());
  }
};

std::uint64_t file_size(const std::string& path) {
  auto s = wdedup::MmapSource::open(path.c_str());
  return s ? s->size() : 0;
}

// The check of a written file before it replaces OUT: every partition of
// every method, found by method name and partition index (as a delegate
// finds its function, whatever the strategy named it), reads the bytes the
// program gave it.
struct Verify {
  const wdedup::Program& program;
  std::size_t checked;

  wdedup::Expected<void> run(const char* path) {
    auto fail = [&](const std::string& what) {
      return wdedup::Expected<void>(wdedup::Error::IoError, what);
    };
    auto file = wdedup::MappedFile::open(path);  // the file mapped and opened
    if (!file) return fail(wdedup::describe_failure(file.failure()));
    const wdedup::NamedDataMap& merged = file->map();
    checked = 0;
    for (const wdedup::Method& m : program.methods)
      for (std::uint32_t p = 0; p < m.partitions.size(); ++p) {
        auto fn = merged.find_function(m.name, p);
        if (!fn) return fail("no function for method " + m.name + " partition " + std::to_string(p));
        for (const wdedup::Tensor& t : m.partitions[p].tensors) {
          auto key = fn->key_of(t.name);
          auto data = key ? merged.get_data(*key) : wdedup::Result<wdedup::DataBuffer>(wdedup::Error::NotFound);
          // (An empty tensor's pointers may be null, which memcmp may not be given.)
          if (!data || data->size() != t.bytes.size() ||
              (!t.bytes.empty() && std::memcmp(data->data(), t.bytes.data(), t.bytes.size()) != 0))
            return fail("method " + m.name + " partition " + std::to_string(p) + " reads other bytes for " + t.name);
          ++checked;
        }
      }
    return {};
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  Scratch scratch;
  std::vector<std::string> inputs;
  std::vector<std::vector<std::uint8_t>> weights;
  std::vector<std::uint8_t> prefill_mask(256, 0x11), decode_mask(64, 0x22);
  // An option where OUT goes ("--help x.ptd") would be taken for OUT's
  // name and written: --help and -h print the usage, anything else that
  // starts with '-' is refused (a path that does is given as ./NAME).
  const auto usage = [&](std::FILE* f) {
    std::fprintf(f, "usage: %s [OUT.ptd IN.ptd...] (no arguments: a self-contained demo)\n", argv[0]);
  };
  if (argc >= 2 && argv[1][0] == '-') {
    const bool help = std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0;
    if (!help) std::fprintf(stderr, "%s: unknown option '%s' (a path that starts with '-' is given as ./%s)\n",
                            argv[0], argv[1], argv[1]);
    usage(help ? stdout : stderr);
    return help ? 0 : 2;
  }
  if (argc == 2) {
    usage(stderr);
    return 2;
  }
  if (argc > 2) {
    out = argv[1];
    inputs.assign(argv + 2, argv + argc);
  } else {
    for (std::size_t i = 0; i < 3; ++i) {
      weights.emplace_back(8192 * (i + 1));
      for (std::size_t j = 0; j < weights.back().size(); ++j) weights.back()[j] = static_cast<std::uint8_t>(j * (i + 5));
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/wdedup-merge-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) {
      std::perror(dir.c_str());
      return 1;
    }
    scratch.dir = dir;
    // The file names become the method names: "prefill", "decode".
    inputs = {dir + "/prefill.ptd", dir + "/decode.ptd"};
    out = dir + "/merged.ptd";
    scratch.files = {inputs[0], inputs[1], out};
    if (!write_method_alone(inputs[0], weights, prefill_mask) || !write_method_alone(inputs[1], weights, decode_mask))
      return 1;
  }

  // An input given twice, under any two names (a link, a hard link, "./":
  // one device and inode), would be two methods of the same bytes.
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    struct stat a {};
    if (::stat(inputs[k].c_str(), &a) != 0) continue;  // (the import names its error)
    for (std::size_t j = 0; j < k; ++j) {
      struct stat b {};
      if (::stat(inputs[j].c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        std::fprintf(stderr, "%s: %s and %s name one file: give each input once\n", argv[0], inputs[j].c_str(),
                     inputs[k].c_str());
        return 2;
      }
    }
  }

  // OUT must not be one of the inputs: the write would replace that file
  // with the merge. (An OUT that exists is compared by what it names, so a
  // symbolic link to an input counts too.)
  if (char* real_out = ::realpath(out.c_str(), nullptr)) {
    const std::string out_id = real_out;
    std::free(real_out);
    for (const std::string& path : inputs)
      if (char* real_in = ::realpath(path.c_str(), nullptr)) {
        const bool same = out_id == real_in;
        std::free(real_in);
        if (same) {
          std::fprintf(stderr, "%s: OUT %s names the input %s: the merge would replace it\n", argv[0], out.c_str(),
                       path.c_str());
          return 2;
        }
      }
  }

  // An OUT that exists is replaced only where it is a merged store (a file
  // with function maps, as this example writes) or empty: an export of one
  // method there (a .ptd without function maps) or another file is most
  // likely an input given without OUT ("prefill.ptd decode.ptd" would
  // replace prefill.ptd with decode.ptd's merge alone).
  if (struct stat st {}; ::stat(out.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size != 0) {
    auto existing = wdedup::MappedFile::open(out.c_str());
    if (!existing || existing->map().function_count() == 0) {
      std::fprintf(stderr,
                   "%s: OUT %s exists and is not a merged store (%s): the merge would replace it; give OUT first "
                   "(OUT.ptd IN.ptd...), or remove it\n",
                   argv[0], out.c_str(),
                   existing ? "a .ptd without function maps, as one method's export is" : "not a .ptd file");
      return 2;
    }
  }

  // 1. Each file becomes a method named after it; the tensors point into
  //    the mapped files, which `files` keeps open.
  wdedup::PtdFiles files;
  wdedup::Program program;
  std::uint64_t bytes_before = 0;
  for (const std::string& path : inputs) {
    if (auto r = files.add(program, path); !r) {
      std::fprintf(stderr, "%s\n", r.message().c_str());
      return 1;
    }
    bytes_before += file_size(path);
  }

  // 2. Deduplicate: identical bytes once, one function map per partition
  //    of every method (OneBlob: "prefill__0", "decode__0").
  auto result = wdedup::deduplicate<wdedup::Strategy<wdedup::OneBlob>>(program);
  if (!result) {
    std::fprintf(stderr, "%s\n", result.message().c_str());
    return 1;
  }

  // 3. A program exported against one of the files (an ExecuTorch .pte)
  //    asks its data map for each tensor by key and reads no function
  //    maps: the merged file stands in for that file only where it keeps
  //    the file's keys under their own names. A key whose bytes differ
  //    between the files (here "mask") is each method's own key
  //    ("prefill/mask", "decode/mask"), found through the function maps.
  const wdedup::Expected<void> kept = files.check_keys_kept(result->store);
  if (!kept) std::printf("note: %s\n", kept.message().c_str());

  // 4. Write the store, and before it replaces OUT check that every
  //    partition of every method reads, through its function map, exactly
  //    the bytes its own file held (a wdedup store given as input comes
  //    back with all its partitions). A file that fails leaves OUT as it
  //    was.
  Verify verify{program, 0};
  wdedup::WriteOptions options;
  options.check_context = &verify;
  options.check_before_replace = [](const char* written, void* context) {
    return static_cast<Verify*>(context)->run(written);
  };
  auto written = wdedup::write_ptd_file(result->store, result->functions, out, options);
  if (!written) {
    std::fprintf(stderr, "%s\n", written.message().c_str());
    return 1;
  }
  std::printf("%zu %s, %llu bytes -> %s, %llu bytes (%llu tensor bytes stored once of %llu)\n", inputs.size(),
              inputs.size() == 1 ? "file" : "files", static_cast<unsigned long long>(bytes_before), out.c_str(),
              static_cast<unsigned long long>(written->file_size),
              static_cast<unsigned long long>(result->report.bytes_stored),
              static_cast<unsigned long long>(result->report.bytes_in));
  bool ok = true;
  if (argc <= 2) {
    auto merged = wdedup::MappedFile::open(out.c_str());
    if (!merged) {
      std::printf("%s: %s\n", out.c_str(), wdedup::describe_failure(merged.failure()).c_str());
      return 1;
    }
    // The self-contained run also knows what to expect: 3 shared weights
    // (48 KiB) and two masks, stored once each, in a file smaller than the
    // two it replaces.
    ok = ok && program.methods.size() == 2 && program.methods[0].name == "prefill" &&
         result->store.buffer_count() == 5 && result->report.bytes_stored == 8192 * 6 + 256 + 64 &&
         written->file_size < bytes_before && verify.checked == 8 && kept.error() == wdedup::Error::NotFound &&
         result->store.find("prefill/mask") != nullptr && result->store.find("decode/mask") != nullptr;
    // ...and the bytes it wrote into the two files: the check before the
    // replace compares the merged file with the import's views of the
    // inputs, so it cannot see an import that viewed the wrong bytes.
    auto reads = [&](const char* function, const std::string& tensor, const std::vector<std::uint8_t>& want) {
      auto fn = merged->map().find_function(function);
      auto key = fn ? fn->key_of(tensor) : wdedup::Result<wdedup::KeyView>(wdedup::Error::NotFound);
      auto data = key ? merged->map().get_data(*key) : wdedup::Result<wdedup::DataBuffer>(wdedup::Error::NotFound);
      const bool same = data && data->size() == want.size() && std::memcmp(data->data(), want.data(), want.size()) == 0;
      if (!same) std::printf("%s: %s %s is not the bytes written\n", out.c_str(), function, tensor.c_str());
      return same;
    };
    for (const char* function : {"prefill__0", "decode__0"})
      for (std::size_t i = 0; i < weights.size(); ++i)
        ok = reads(function, "layers." + std::to_string(i) + ".weight", weights[i]) && ok;
    ok = reads("prefill__0", "mask", prefill_mask) && ok;
    ok = reads("decode__0", "mask", decode_mask) && ok;
  }
  std::printf("%zu tensors checked\n%s\n", verify.checked, ok ? "merge: OK" : "merge: WRONG BYTES");
  return ok ? 0 : 1;
}
