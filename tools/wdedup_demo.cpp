// tools/wdedup_demo.cpp — the main job: generate the built-in Llama-shaped
// workload (prefill + decode), or take .ptd files exported one method at a
// time (--ptd), deduplicate it under a strategy, print the report, write
// the shared store as an ExecuTorch .ptd and read it back with the runtime
// reader to prove every function's tensors resolve to the right bytes.
//
//   wdedup-demo [--model tiny|small|1b] [--strategy positional|oneblob|disabled|all]
//               [--prefill-partitions N] [--decode-partitions N] [--layers N]
//               [--ptd FILE[,FILE...]]... [--unmapped-keys METHOD] [--unrecorded-alignment N]
//               [--take-replaced-data] [--keep-keys]
//               [--per-method DIR]
//               [--threads N] [--out FILE.ptd] [--json FILE] [--quiet]
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <wdedup/bench.hpp>
#include <wdedup/ptd_writer.hpp>
#include <wdedup/runtime.hpp>
#include <wdedup/wdedup.hpp>

#include "cli.hpp"
#include "read_back.hpp"

namespace {

// ---- a run stopped mid-write removes its temporary file ------------------------
// Every file the demo writes (the stores, the --per-method files, --json)
// is written to a hidden temporary beside it, renamed over it when whole.
// A run stopped by Ctrl-C, SIGTERM or SIGHUP while one is written would
// leave it, as large as the store (2.5 GB at --model 1b): the library says
// where it is (WriteOptions::on_temporary), and the handler removes it,
// then ends the process as the signal would have. So do the checks before
// the work, which make and remove one. (The destination is untouched
// either way: it is only ever replaced by the rename.)
const wdedup::detail::TemporaryWatch kWatch{wdedup_cli::TemporaryFile::note, nullptr};

/// Options of a write whose temporary file the handler below removes.
wdedup::WriteOptions watched_write() {
  wdedup::WriteOptions wo;
  wo.on_temporary = kWatch.on_temporary;
  return wo;
}

extern "C" void remove_temporary_and_die(int sig) {
  wdedup_cli::first_handler_only();
  wdedup_cli::TemporaryFile::remove();
  wdedup_cli::die_by(sig);
}

struct Args {
  std::string model = "tiny";
  std::string strategy = "all";
  std::string out = "wdedup-demo.ptd";
  std::string json;
  std::uint32_t prefill_partitions = 0, decode_partitions = 0, layers = 0;
  bool model_given = false;
  std::vector<std::string> ptd;  ///< .ptd files to merge instead of the built-in workload
  std::string per_method;        ///< one .ptd per method here, written before merging (after, with --keep-keys)
  std::string unmapped_keys;     ///< --ptd: the method that takes a store's keys no function names
  /// --ptd: the alignment of keys whose file records none (0: inferred).
  std::uint32_t unrecorded_alignment = 0;
  bool unrecorded_alignment_given = false;
  /// --ptd: files whose data was replaced since wdedup wrote them (ExecuTorch's
  /// replace_data): read where the flatbuffer says, bytes taken unchecked.
  bool take_replaced_data = false;
  /// --ptd: refuse a merged store that does not keep every key of its files
  /// under its own name, bytes and layout (PtdFiles::check_keys_kept);
  /// otherwise such a store is written with a warning.
  bool keep_keys = false;
  unsigned threads = 0;
  bool quiet = false;
};

void usage(FILE* f) {
  std::fputs(
      "usage: wdedup-demo [options]\n"
      "  --model tiny|small|1b      built-in Llama-shaped workload (default tiny:\n"
      "                             ~2x10 MB; small: ~2x313 MB; 1b: Llama-3.2-1B shapes, ~2x3.0 GB)\n"
      "  --layers N                 override the number of layers\n"
      "  --prefill-partitions N     partitions of prefill (default 1)\n"
      "  --decode-partitions N      partitions of decode (default 1)\n"
      "  --ptd FILE[,FILE...]       instead: .ptd files, one method each, named after the file\n"
      "                             (merge prefill.ptd,decode.ptd); a store wdedup wrote comes\n"
      "                             back as its methods and partitions. The value is split at\n"
      "                             commas (a path holding one cannot be given); repeated --ptd\n"
      "                             flags add up: --ptd a.ptd --ptd b.ptd is --ptd a.ptd,b.ptd\n"
      "  --unmapped-keys METHOD     --ptd: the keys of a store wdedup wrote that no function names\n"
      "                             go to a new method METHOD (default: refused), or to the first\n"
      "                             of METHOD#2, METHOD#3, ... that no method has yet\n"
      "  --unrecorded-alignment N   --ptd: the alignment (a power of two up to 4096) of keys whose\n"
      "                             file records none (ExecuTorch's); default 0: inferred from each\n"
      "                             key's offset, up to 4096, which pads offsets aligned by chance\n"
      "  --take-replaced-data       --ptd: take a store wdedup wrote whose data was replaced since\n"
      "                             (ExecuTorch's replace_data): its segments where they now are,\n"
      "                             its bytes without the content hashes it recorded (default: refused)\n"
      "  --keep-keys                --ptd: refuse (exit 1, nothing written) a merged store that does\n"
      "                             not keep every key of its files under its own name, bytes and\n"
      "                             layout, which a program asking for its data by key (an\n"
      "                             ExecuTorch .pte) needs; default: written, with a warning naming\n"
      "                             the keys (a key whose bytes differ between the files is stored\n"
      "                             as <method>/<key>, found through the function maps only)\n"
      "  --per-method DIR           also write each method on its own as DIR/<method>.ptd, as an\n"
      "                             export that serializes methods apart ships them (files --ptd\n"
      "                             merges back; '' = don't, the default)\n"
      "  --strategy S               positional | oneblob | disabled | all (default all)\n"
      "  --threads N                hashing threads (default 0: every core)\n"
      "  --out FILE                 where to write the store (default wdedup-demo.ptd, and\n"
      "                             build/demo/llama.ptd under scripts/demo.sh; '' = don't);\n"
      "                             with --strategy all, each strategy's to FILE.<strategy>.ptd\n"
      "                             (in place of a .ptd that FILE ends in: llama.ptd ->\n"
      "                             llama.oneblob.ptd)\n"
      "  --json FILE                also write the reports as a JSON array, one per strategy\n"
      "                             run ('' = don't, the default)\n"
      "  --quiet                    no report tables: the workload lines, each strategy's summary\n"
      "                             and what it wrote and read back stay\n"
      "  -h, --help                 this text\n",
      f);
}

using wdedup_cli::counted;

bool parse_u32(const char* s, std::uint32_t* out) {
  // Digits only: strtoul would also take a sign (and wrap "-1" around to
  // 2^64-1) and leading blanks.
  if (*s < '0' || *s > '9') return false;
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v > 0xFFFFFFFFul) return false;
  *out = static_cast<std::uint32_t>(v);
  return true;
}

/// More threads than any machine this runs on has cores (each is a thread
/// of its own, started per call).
constexpr std::uint32_t kMaxThreads = wdedup::DedupOptions::kMaxThreads;

/// Where strategy `tag`'s store goes: --out itself, or with --strategy all
/// FILE.<tag>.ptd. Only a ".ptd" the name ends with is replaced:
/// "d.ptd/store" is "d.ptd/store.<tag>.ptd", not a file beside the
/// directory d.ptd.
std::string out_path(const Args& a, const char* tag) {
  if (a.out.empty() || a.strategy != "all") return a.out;
  const std::string& o = a.out;
  const bool ends_ptd = o.size() >= 4 && o.compare(o.size() - 4, 4, ".ptd") == 0;
  return (ends_ptd ? o.substr(0, o.size() - 4) : o) + "." + tag + ".ptd";
}

/// What the generator would refuse in the settings the flags give, said
/// in the flags' terms (the preset's own values are valid): "" if nothing.
std::string flag_problem(const Args& a, const wdedup::LlamaConfig& c) {
  using wdedup::detail::cat;
  const std::pair<const char*, std::uint32_t> flags[] = {{"--layers", a.layers},
                                                         {"--prefill-partitions", a.prefill_partitions},
                                                         {"--decode-partitions", a.decode_partitions}};
  for (const auto& [flag, value] : flags)
    if (std::string why = wdedup::LlamaConfig::dimension_problem(flag, value); !why.empty()) return why;
  const std::string layers =
      a.layers ? cat("--layers ", c.n_layers) : cat("the ", c.n_layers, " layers of --model ", a.model);
  for (const auto& [flag, value] : {flags[1], flags[2]})
    if (value > c.n_layers)
      return cat(flag, " ", value, " is more than ", layers, " (a partition holds at least one layer)");
  return "";
}

/// Whether --per-method DIR can take the method files: an existing
/// directory where files can be created, or a name for a new one in an
/// existing directory (made later, once the method names are known). An
/// existing one is asked of access(2), not probed with a file of a fixed
/// name (a directory or a link to nothing of that name in it refused it,
/// for a reason that was not DIR's); outputs_writable then tries each
/// method's own file.
bool per_method_usable(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st {};
  const bool exists = ::stat(dir.c_str(), &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) errno = ENOTDIR;
  const bool usable = exists ? S_ISDIR(st.st_mode) && ::access(dir.c_str(), W_OK | X_OK) == 0
                             : wdedup::detail::can_create_file(dir, kWatch);
  if (!usable)
    std::fprintf(stderr, "wdedup-demo: cannot write --per-method %s: %s\n", dir.c_str(),
                 wdedup::detail::cannot_create_reason(dir, errno, kWatch).c_str());
  return usable;
}

bool parse_args(int argc, char** argv, Args* a) {
  for (int i = 1; i < argc; ++i) {
    const std::string opt = argv[i];
    auto value = [&](const char** v, bool number = false) {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "wdedup-demo: %s needs a value\n", opt.c_str());
        return false;
      }
      *v = argv[++i];
      // "--json --quiet" would write the report to a file named --quiet:
      // an option is never taken as a name. (No name here starts with '-':
      // not a model, a strategy; a path that does is written ./-name. A
      // number that does is refused by its caller as not a positive integer.)
      if ((*v)[0] == '-' && !number) {
        std::fprintf(stderr, "wdedup-demo: %s needs a value, got the option '%s' (a path starting with '-' is "
                             "written ./%s)\n", opt.c_str(), *v, *v);
        return false;
      }
      return true;
    };
    const char* v = nullptr;
    std::uint32_t n = 0;
    if (opt == "--help" || opt == "-h") {
      usage(stdout);
      std::exit(wdedup_cli::stdout_flushed("wdedup-demo") ? 0 : 1);
    } else if (opt == "--quiet") {
      a->quiet = true;
    } else if (opt == "--model" || opt == "--strategy" || opt == "--out" || opt == "--json" ||
               opt == "--per-method" || opt == "--unmapped-keys") {
      if (!value(&v)) return false;
      // Its value is a method's name, not an output ('' = none, as for
      // --out, --json and --per-method): taken as the flag left out, it
      // met the refusal of the keys it was given to take ("--unmapped-keys
      // METHOD names a method..."), and the file format has no empty names.
      if (opt == "--unmapped-keys" && *v == '\0') {
        std::fprintf(stderr, "wdedup-demo: --unmapped-keys needs a method name, got ''\n");
        return false;
      }
      (opt == "--model"        ? a->model
       : opt == "--strategy"   ? a->strategy
       : opt == "--out"        ? a->out
       : opt == "--json"       ? a->json
       : opt == "--per-method" ? a->per_method
                               : a->unmapped_keys) = v;
      a->model_given = a->model_given || opt == "--model";
    } else if (opt == "--ptd") {
      if (!value(&v)) return false;
      if (*v == '\0') {
        std::fprintf(stderr, "wdedup-demo: --ptd needs at least one file\n");
        return false;
      }
      // An empty item is refused, not dropped: "a.ptd,,b.ptd" may have
      // lost a name.
      std::vector<std::string> files;
      if (!wdedup_cli::split_items(v, &files)) {
        std::fprintf(stderr, "wdedup-demo: --ptd %s has an empty item (a stray comma)\n", v);
        return false;
      }
      a->ptd.insert(a->ptd.end(), files.begin(), files.end());
    } else if (opt == "--take-replaced-data") {
      a->take_replaced_data = true;
    } else if (opt == "--keep-keys") {
      a->keep_keys = true;
    } else if (opt == "--unrecorded-alignment") {
      if (!value(&v, true)) return false;
      // A power of two up to the page, as ExecuTorch's alignments are (the
      // library takes any value up to 2^32: 2^32 made simple.ptd's merge
      // 12.9 GB, and 4294967295 failed only at the write).
      const std::uint32_t n_max = 4096;
      if (!parse_u32(v, &a->unrecorded_alignment) || a->unrecorded_alignment > n_max ||
          (a->unrecorded_alignment & (a->unrecorded_alignment - 1)) != 0) {
        std::fprintf(stderr, "wdedup-demo: --unrecorded-alignment needs 0 (infer) or a power of two up to %u, got "
                             "'%s'\n", n_max, v);
        return false;
      }
      a->unrecorded_alignment_given = true;
    } else if (opt == "--layers" || opt == "--prefill-partitions" || opt == "--decode-partitions" ||
               opt == "--threads") {
      if (!value(&v, true)) return false;
      // --threads 0 is every core, as DedupOptions::threads = 0 is.
      const bool zero_ok = opt == "--threads";
      const bool parsed = parse_u32(v, &n);
      // Digits alone that parse_u32 refused are a number too large, not
      // one that is not positive: named against the flag's own limit (as
      // typed), not against 32 bits.
      const bool digits = *v != '\0' && std::strspn(v, "0123456789") == std::strlen(v);
      if (opt == "--threads" && digits && (!parsed || n > kMaxThreads)) {
        std::fprintf(stderr, "wdedup-demo: --threads %s is more than %u\n", v, kMaxThreads);
        return false;
      }
      if (digits && !parsed) {
        std::fprintf(stderr, "wdedup-demo: %s\n",
                     wdedup::LlamaConfig::dimension_problem(opt, std::string_view(v)).c_str());
        return false;
      }
      if (!parsed || (n == 0 && !zero_ok)) {
        std::fprintf(stderr, "wdedup-demo: %s needs a %s integer, got '%s'\n", opt.c_str(),
                     zero_ok ? "non-negative" : "positive", v);
        return false;
      }
      if (opt == "--layers") a->layers = n;
      else if (opt == "--prefill-partitions") a->prefill_partitions = n;
      else if (opt == "--decode-partitions") a->decode_partitions = n;
      else a->threads = n;
    } else if (opt.empty() || opt[0] != '-') {
      // Not an option at all: most likely a .ptd file given as the argument
      // of the merge, which "unknown option" did not make plain.
      std::fprintf(stderr, "wdedup-demo: unexpected argument '%s': the demo takes options only (.ptd files to "
                           "merge are given with --ptd)\n", opt.c_str());
      usage(stderr);
      return false;
    } else {
      std::fprintf(stderr, "wdedup-demo: unknown option '%s'\n", opt.c_str());
      usage(stderr);
      return false;
    }
  }
  if (!a->ptd.empty() && (a->model_given || a->layers || a->prefill_partitions || a->decode_partitions)) {
    std::fprintf(stderr,
                 "wdedup-demo: --ptd replaces the built-in workload: --model, --layers and --*-partitions do not "
                 "apply\n");
    return false;
  }
  if (!a->unmapped_keys.empty() && a->ptd.empty()) {
    std::fprintf(stderr, "wdedup-demo: --unmapped-keys applies to --ptd files only\n");
    return false;
  }
  if (a->unrecorded_alignment_given && a->ptd.empty()) {
    std::fprintf(stderr, "wdedup-demo: --unrecorded-alignment applies to --ptd files only\n");
    return false;
  }
  if (a->take_replaced_data && a->ptd.empty()) {
    std::fprintf(stderr, "wdedup-demo: --take-replaced-data applies to --ptd files only\n");
    return false;
  }
  if (a->keep_keys && a->ptd.empty()) {
    std::fprintf(stderr, "wdedup-demo: --keep-keys applies to --ptd files only\n");
    return false;
  }
  if (a->strategy != "positional" && a->strategy != "oneblob" && a->strategy != "disabled" && a->strategy != "all") {
    std::fprintf(stderr, "wdedup-demo: --strategy: unknown strategy '%s' (positional, oneblob, disabled or all)\n",
                 a->strategy.c_str());
    return false;
  }
  // Before the work, not after it (the stores would be written, and then
  // the report lost).
  if (!a->json.empty() && !wdedup::detail::can_create_file(a->json, kWatch)) {
    std::fprintf(stderr, "wdedup-demo: cannot write --json %s: %s\n", a->json.c_str(),
                 wdedup::detail::cannot_create_reason(a->json, errno, kWatch).c_str());
    return false;
  }
  // A directory is no --out under any strategy: with --strategy all it
  // would otherwise become "DIR.oneblob.ptd" beside it, or a hidden
  // "DIR/.oneblob.ptd" inside it. Nor is a name ending in '/', nor
  // anything else there that is not a regular file: /dev/null would become
  // "/dev/null.oneblob.ptd", a file in /dev ('' is the way to write none).
  struct stat st {};
  const bool exists = !a->out.empty() && ::stat(a->out.c_str(), &st) == 0;
  if (exists && S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "wdedup-demo: --out %s is a directory; give the store's file name\n", a->out.c_str());
    return false;
  }
  if (!a->out.empty() && a->out.back() == '/') {
    std::fprintf(stderr, "wdedup-demo: --out %s ends in '/', which names a directory; give the store's file name\n",
                 a->out.c_str());
    return false;
  }
  if (exists && !S_ISREG(st.st_mode)) {
    std::fprintf(stderr, "wdedup-demo: cannot write --out %s: %s; --out '' writes no store\n", a->out.c_str(),
                 wdedup::detail::not_regular_file(st.st_mode).c_str());
    return false;
  }
  if (!a->per_method.empty() && !per_method_usable(a->per_method)) return false;
  return true;
}

/// The strategies this run uses, in order: Positional only on equal
/// partition counts (--strategy positional on others is refused first).
std::vector<const char*> strategies_run(const Args& a, bool equal_partitions) {
  std::vector<const char*> tags;
  for (const char* tag : {"positional", "oneblob", "disabled"})
    if ((a.strategy == tag || a.strategy == "all") && (equal_partitions || std::strcmp(tag, "positional") != 0))
      tags.push_back(tag);
  return tags;
}

/// The file --per-method DIR gets for method `m`.
std::string per_method_file(const std::string& dir, const wdedup::Method& m) { return dir + "/" + m.name + ".ptd"; }

/// `dir` if it exists, else the nearest of its parents that does (stopping
/// at "." or "/"): where a file or directory yet to be made would go, whose
/// limits (NAME_MAX, free space) are the ones it will meet.
std::string nearest_existing_dir(std::string dir) {
  struct stat st {};
  while (::stat(dir.c_str(), &st) != 0 && dir != "." && dir != "/") dir = wdedup::detail::parent_dir(dir);
  return dir;
}

/// Whether `path`, a file in a directory yet to be made, can have its name
/// there (errno ENAMETOOLONG if not): the path, and that of the writer's
/// temporary beside it (detail::temp_name_size), shorter than PATH_MAX, and
/// each of its components that does not exist yet no longer than the
/// NAME_MAX of the nearest directory that does.
bool name_fits(const std::string& path) {
  const std::size_t last = path.rfind('/');
  const std::size_t base = last == std::string::npos ? path.size() : path.size() - last - 1;
  const std::string existing = nearest_existing_dir(wdedup::detail::parent_dir(path));
  long name_max = ::pathconf(existing.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = NAME_MAX;  // no limit, or not known: the usual one
  const std::size_t temp = path.size() - base + wdedup::detail::temp_name_size(base, name_max);
  if (path.size() >= PATH_MAX || temp >= PATH_MAX) {
    errno = ENAMETOOLONG;
    return false;
  }
  // The components past `existing` (a prefix of `path`, but for the "."
  // of a relative path that does not start with "./": then all of them).
  const std::size_t from = existing == "." && path.compare(0, 2, "./") != 0 ? 0
                           : existing == "/"                                 ? 1
                                                                             : existing.size() + 1;
  for (std::size_t at = from; at < path.size();) {
    const std::size_t slash = path.find('/', at);
    const std::size_t end = slash == std::string::npos ? path.size() : slash;
    if (end - at > static_cast<std::size_t>(name_max)) {
      errno = ENAMETOOLONG;
      return false;
    }
    at = end + 1;
  }
  return true;
}

/// Whether every store the run will write can be written: checked once the
/// program is known, before any of the work whose result goes there. That
/// includes each --per-method file: in a DIR that exists, tried (a link to
/// nothing or a directory there would otherwise stop the run after the
/// work, and after the methods before it were written); in one that does
/// not, its name (one too long for the file system stopped the run after
/// DIR was made and the methods before it were written).
bool outputs_writable(const Args& a, const wdedup::Program& program, const std::vector<const char*>& tags) {
  for (const char* tag : tags) {
    const std::string out = out_path(a, tag);
    if (!out.empty() && !wdedup::detail::can_create_file(out, kWatch)) {
      std::fprintf(stderr, "wdedup-demo: cannot write --out %s: %s\n", out.c_str(),
                   wdedup::detail::cannot_create_reason(out, errno, kWatch).c_str());
      return false;
    }
  }
  struct stat st {};
  if (a.per_method.empty()) return true;
  const bool dir_exists = ::stat(a.per_method.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  for (const wdedup::Method& m : program.methods) {
    const std::string path = per_method_file(a.per_method, m);
    if (dir_exists ? !wdedup::detail::can_create_file(path, kWatch) : !name_fits(path)) {
      // (The file name holds the method's name, which may come from a file.)
      std::fprintf(stderr, "wdedup-demo: cannot write --per-method %s: %s\n", wdedup::detail::table_name(path).c_str(),
                   wdedup::detail::cannot_create_reason(path, errno, kWatch).c_str());
      return false;
    }
  }
  return true;
}

/// What a path names, so that two names of one file (a symbolic link,
/// "./", "dir/..") compare equal: the real path of the file, or of its
/// directory and its own name when it does not exist yet. Hard links stay
/// apart: a write renames over the name it is given, which leaves the
/// file's other names holding the old bytes.
std::string file_identity(const std::string& path) {
  if (std::string real = wdedup_cli::real_path(path); !real.empty()) return real;
  const std::size_t slash = path.rfind('/');
  const std::string dir = wdedup::detail::parent_dir(path);
  const std::string real_dir = wdedup_cli::real_path(dir);
  return (real_dir.empty() ? dir : real_dir) + "/" + (slash == std::string::npos ? path : path.substr(slash + 1));
}

/// Refuses a run whose outputs (the stores, --json, the --per-method files)
/// name one file twice, or an input --ptd file: each write would replace
/// the file an earlier one reported written and verified, or the input.
bool outputs_distinct(const Args& a, const wdedup::Program& program, const std::vector<const char*>& tags) {
  struct Named {
    const char* flag;
    std::string path;
  };
  std::vector<Named> paths;
  for (const char* tag : tags)
    if (!a.out.empty()) paths.push_back({"--out", out_path(a, tag)});
  if (!a.json.empty()) paths.push_back({"--json", a.json});
  if (!a.per_method.empty()) {
    std::string dir = a.per_method;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    paths.push_back({"--per-method", dir});  // a directory an --out or --json would need as a file
    for (const wdedup::Method& m : program.methods) paths.push_back({"--per-method", per_method_file(dir, m)});
  }
  const std::size_t outputs = paths.size();
  for (const std::string& in : a.ptd) paths.push_back({"--ptd", in});
  std::vector<std::string> ids;
  for (const Named& n : paths) ids.push_back(file_identity(n.path));
  for (std::size_t i = 0; i < outputs; ++i)
    for (std::size_t j = i + 1; j < paths.size(); ++j)
      if (ids[i] == ids[j]) {
        // (A --per-method file's name holds a method's name, which may come from a file.)
        std::fprintf(stderr, "wdedup-demo: %s %s and %s %s name the same file: %s\n", paths[i].flag,
                     wdedup::detail::table_name(paths[i].path).c_str(), paths[j].flag,
                     wdedup::detail::table_name(paths[j].path).c_str(),
                     j < outputs ? "one output would replace the other" : "the output would replace the input");
        return false;
      }
  return true;
}

/// Refuses a --ptd file given twice, under any two names (a link, a hard
/// link, "./"): it would become two methods of the same bytes, and the
/// report would count one file's weights as saved. (A file that cannot be
/// looked at is left to the import, which names its error.)
bool inputs_distinct(const Args& a) {
  const auto [j, k] = wdedup_cli::same_file_twice(a.ptd);
  // (Escaped, as the import's messages and the workload lines name them.)
  if (k != 0)
    std::fprintf(stderr, "wdedup-demo: --ptd names one file twice (%s and %s): give each file once\n",
                 wdedup::detail::table_name(a.ptd[j]).c_str(), wdedup::detail::table_name(a.ptd[k]).c_str());
  return k == 0;
}

/// Method names come from the input (an imported file's function maps):
/// one that is not a plain file name would put its --per-method file
/// outside DIR. A mistake like the others, refused (exit 2) before any
/// work and before DIR is made.
bool per_method_names_usable(const Args& a, const wdedup::Program& program) {
  if (a.per_method.empty()) return true;
  for (const wdedup::Method& m : program.methods)
    if (m.name.find('/') != std::string::npos || m.name == "." || m.name == "..") {
      std::fprintf(stderr, "wdedup-demo: --per-method: method %s is not usable as a file name in %s\n",
                   wdedup::detail::quote_name(m.name).c_str(), a.per_method.c_str());
      return false;
    }
  return true;
}

/// The checks that need the program's shape (method names, partition
/// counts), before any work: Positional on unequal counts, outputs that
/// cannot be written or that name one file twice. Sets the strategies
/// that run.
bool runs_as_asked(const Args& args, const wdedup::Program& program, std::vector<const char*>* tags) {
  const wdedup::Expected<void> positional_fits = wdedup::Positional::validate(program);
  if (args.strategy == "positional" && !positional_fits) {
    // The library's message names its policies; here they are flags.
    std::string message = positional_fits.message();
    const std::string api = "Strategy<OneBlob> (or Strategy<Disabled>)";
    if (const std::size_t at = message.rfind(api); at != std::string::npos)
      message.replace(at, api.size(), "--strategy oneblob (or disabled)");
    std::fprintf(stderr, "wdedup-demo: --strategy positional: %s\n", message.c_str());
    return false;
  }
  *tags = strategies_run(args, positional_fits.ok());
  return per_method_names_usable(args, program) && outputs_writable(args, program, *tags) &&
         outputs_distinct(args, program, *tags);
}

/// --ptd: whether the merged store keeps every key of the files, as a
/// program exported against them asks for its data (by key). Checked and
/// said once, for the first strategy's store: deduplicate() makes the keys
/// and their bytes before and apart from the policy, so every strategy's
/// store gives the same answer (checking each compared most of the second
/// file's bytes again). With --keep-keys a store that does not is refused.
/// `kept`: the answer, once known. False: refused.
bool keys_kept(const Args& args, const wdedup::PtdFiles& files, const wdedup::DedupResult& r,
               std::optional<wdedup::Expected<void>>* kept) {
  if (!kept->has_value()) {
    kept->emplace(files.check_keys_kept(r.store));
    if (!**kept)
      std::fprintf(stderr,
                   args.keep_keys ? "wdedup-demo: --keep-keys: the merged store does not keep every key of its "
                                    "files, and is not written: %s\n"
                                  : "wdedup-demo: warning: the merged store does not keep every key of its files: %s "
                                    "(--keep-keys refuses such a store)\n",
                   (*kept)->message().c_str());
  }
  return (*kept)->ok() || !args.keep_keys;
}

/// `files`: the --ptd inputs (nullptr for the built-in workload);
/// `keys`: keys_kept's answer, once known.
template <class Policy>
bool run(const Args& args, const wdedup::Program& program, const wdedup::PtdFiles* files, const std::string& out,
         std::string* json, std::optional<wdedup::Expected<void>>* keys) {
  wdedup::DedupOptions opts;
  opts.threads = args.threads;
  auto r = wdedup::deduplicate<wdedup::Strategy<Policy>>(program, opts);
  if (!r) {
    std::fprintf(stderr, "wdedup-demo: %s: %s\n", wdedup::error_name(r.error()), r.message().c_str());
    return false;
  }
  const wdedup::Report& rep = r->report;
  if (!args.quiet) std::fputs(rep.to_table().c_str(), stdout);
  std::printf("%-10s in %llu B, stored %llu B, saved %llu B (%.1f%%), shared across blobs %llu B, %.3f s\n",
              rep.strategy.c_str(), static_cast<unsigned long long>(rep.bytes_in),
              static_cast<unsigned long long>(rep.bytes_stored), static_cast<unsigned long long>(rep.bytes_saved),
              rep.bytes_in ? 100.0 * static_cast<double>(rep.bytes_saved) / static_cast<double>(rep.bytes_in) : 0.0,
              static_cast<unsigned long long>(rep.bytes_shared_across_blobs), rep.seconds_total);
  if (files && !keys_kept(args, *files, *r, keys)) return false;
  if (!out.empty()) {
    // The store is read back before it replaces the file at `out`: one
    // that does not read back fails the write and leaves the previous one.
    struct Check {
      const wdedup::Program& program;
      const wdedup::DedupResult& result;
      wdedup_demo::ReadBack back;
    } check{program, *r, {}};
    wdedup::WriteOptions wo = watched_write();
    wo.check_context = &check;
    wo.check_before_replace = [](const char* written, void* context) -> wdedup::Expected<void> {
      Check& c = *static_cast<Check*>(context);
      c.back = wdedup_demo::read_back(written, c.program, c.result);
      if (!c.back.ok()) return wdedup::Expected<void>(wdedup::Error::IoError, "read-back: " + c.back.problem);
      return {};
    };
    auto stats = wdedup::write_ptd_file(r->store, r->functions, out, wo);
    if (!stats) {
      std::fprintf(stderr, "wdedup-demo: %s\n", stats.message().c_str());
      return false;
    }
    const wdedup_demo::ReadBack& back = check.back;
    std::printf("  wrote %s: %llu bytes\n", out.c_str(), static_cast<unsigned long long>(stats->file_size));
    std::printf("  read back %s with the runtime reader: %s, %s, %s verified\n", out.c_str(),
                counted(back.keys, "key").c_str(), counted(back.functions, "function").c_str(),
                counted(back.tensors, "tensor").c_str());
  }
  // Only a report whose store was written and read back (or that had no
  // store to write) goes into --json: a run whose every write failed
  // leaves the last report in place, as it leaves the stores.
  if (json) *json += (json->empty() ? "" : ",") + rep.to_json();
  if (!args.quiet) std::printf("\n");
  return true;
}

/// --per-method DIR: each method of `program` alone, as a store: its
/// tensors as keys (identical bytes within the method stored once, as
/// ExecuTorch's NamedDataStore does within one export), no function maps.
/// Every store is built before any is written: a method that gives one
/// tensor name two different contents or layouts in its partitions cannot
/// be one store, and is refused with nothing written. 0: built; 2: refused.
int per_method_stores(const std::string& dir, const wdedup::Program& program,
                      std::vector<wdedup::NamedDataStore>* stores) {
  // (Every method name was checked by runs_as_asked: per_method_names_usable.)
  stores->assign(program.methods.size(), wdedup::NamedDataStore());
  for (std::size_t mi = 0; mi < program.methods.size(); ++mi) {
    const wdedup::Method& m = program.methods[mi];
    for (std::size_t p = 0; p < m.partitions.size(); ++p)
      for (const wdedup::Tensor& t : m.partitions[p].tensors)
        if (auto added = (*stores)[mi].add_named_data(t.name, t.bytes, t.alignment, t.layout); !added) {
          std::fprintf(stderr, "wdedup-demo: --per-method %s: method %s cannot be one store: partition %zu: %s\n",
                       dir.c_str(), wdedup::detail::quote_name(m.name).c_str(), p, added.message().c_str());
          return 2;
        }
  }
  return 0;
}

/// Whether the --per-method files fit, checked before the first is written:
/// each within this process's file size limit (RLIMIT_FSIZE), and, written
/// one after another as they are (a file's temporary beside the old file
/// until the rename), all within the free space of `dir`'s file system.
/// The files are written one at a time, each replaced whole or not at all;
/// without this check a run stopped by the second would leave the first
/// replaced and the second old. (Space another process takes meanwhile can
/// still stop the run between two files.) Checked before DIR is made: the
/// free space is that of the nearest directory of `dir` that exists, so a
/// run that writes no file makes no DIR either.
bool per_method_fits(const std::string& dir, const wdedup::Program& program,
                     const std::vector<wdedup::NamedDataStore>& stores) {
  struct rlimit fsize {};
  const bool limited = ::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY;
  const std::string existing = nearest_existing_dir(dir);  // DIR, or where it will be made
  struct statvfs fs {};
  const bool known = ::statvfs(existing.c_str(), &fs) == 0 && fs.f_frsize > 0;
  const auto blocks = [&](std::uint64_t bytes) { return (bytes + fs.f_frsize - 1) / fs.f_frsize * fs.f_frsize; };
  std::uint64_t freed = 0;  // by the files replaced so far (their old sizes; the new ones take their own)
  std::uint64_t taken = 0;  // by the new files written so far
  for (std::size_t mi = 0; mi < program.methods.size(); ++mi) {
    const std::string path = per_method_file(dir, program.methods[mi]);
    wdedup::Expected<wdedup::detail::PtdPlan> plan =
        wdedup::detail::plan_ptd(stores[mi], wdedup::FunctionMaps{}, watched_write());
    if (!plan) {
      std::fprintf(stderr, "wdedup-demo: --per-method: cannot write %s: %s; no file written\n",
                   wdedup::detail::table_name(path).c_str(), plan.message().c_str());
      return false;
    }
    const std::uint64_t size = plan->file_size;
    if (limited && size > static_cast<std::uint64_t>(fsize.rlim_cur)) {
      std::fprintf(stderr,
                   "wdedup-demo: --per-method: cannot write %s: the file would be %llu bytes, more than this "
                   "process's file size limit (%llu bytes: RLIMIT_FSIZE, ulimit -f); no file written\n",
                   wdedup::detail::table_name(path).c_str(), static_cast<unsigned long long>(size),
                   static_cast<unsigned long long>(fsize.rlim_cur));
      return false;
    }
    if (!known) continue;
    // (Root may also use the blocks a file system keeps back for it.)
    const std::uint64_t free_bytes =
        static_cast<std::uint64_t>(::geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * fs.f_frsize;
    const std::uint64_t need = taken + blocks(size);
    if (need > free_bytes + freed) {
      const std::string more =
          freed == 0 ? std::string() : " (" + std::to_string(freed) + " more once the files they replace are gone)";
      std::fprintf(stderr,
                   "wdedup-demo: --per-method: cannot write %s: it and the files before it need %llu bytes, and "
                   "%s has %llu free%s; no file written\n",
                   wdedup::detail::table_name(path).c_str(), static_cast<unsigned long long>(need), existing.c_str(),
                   static_cast<unsigned long long>(free_bytes), more.c_str());
      return false;
    }
    struct stat old {};
    if (::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode))
      freed += static_cast<std::uint64_t>(old.st_blocks) * 512;
    taken += blocks(size);
  }
  return true;
}

/// --per-method DIR: writes per_method_stores' stores to DIR/<method>.ptd.
/// 0: written; 1: a write failed.
int write_per_method(const std::string& dir, const wdedup::Program& program,
                     const std::vector<wdedup::NamedDataStore>& stores) {
  if (!per_method_fits(dir, program, stores)) return 1;
  if (::mkdir(dir.c_str(), 0777) != 0 && errno != EEXIST) {
    std::fprintf(stderr, "wdedup-demo: --per-method: cannot create %s: %s\n", dir.c_str(), std::strerror(errno));
    return 1;
  }
  std::uint64_t total = 0;
  for (std::size_t mi = 0; mi < program.methods.size(); ++mi) {
    const std::string path = per_method_file(dir, program.methods[mi]);
    auto stats = wdedup::write_ptd_file(stores[mi], path, watched_write());
    if (!stats) {
      std::fprintf(stderr, "wdedup-demo: --per-method: %s\n", stats.message().c_str());
      return 1;
    }
    std::printf("  method alone: wrote %s: %llu bytes\n", wdedup::detail::table_name(path).c_str(),
                static_cast<unsigned long long>(stats->file_size));
    total += stats->file_size;
  }
  std::printf("  every method alone: %llu bytes in %s\n\n", static_cast<unsigned long long>(total),
              counted(program.methods.size(), "file").c_str());
  return 0;
}

/// The user's .ptd files as a Program: one method each, or the methods and
/// partitions of a store deduplicate() wrote; the mappings live in `files`.
bool import_files(const Args& args, wdedup::PtdFiles* files, wdedup::Program* program) {
  std::printf("workload: %s:\n", counted(args.ptd.size(), ".ptd file").c_str());
  wdedup::ImportOptions options;
  options.unrecorded_alignment = args.unrecorded_alignment;
  options.open.allow_moved_segments = args.take_replaced_data;
  options.verify_content_hashes = !args.take_replaced_data;
  // Each store's unmapped keys get a method of their own, which the library
  // refuses to share: the first of METHOD, METHOD#2, METHOD#3, ... that no
  // method has yet (as methods named after files are). One name for every
  // file refused the second such store, blaming a METHOD it had made.
  std::vector<std::pair<std::string, std::string>> rest_made;  // (method, the file whose keys it took)
  for (const std::string& path : args.ptd) {
    const std::size_t before = program->methods.size();
    for (unsigned k = 1; !args.unmapped_keys.empty(); ++k) {
      std::string name = k == 1 ? args.unmapped_keys : args.unmapped_keys + "#" + std::to_string(k);
      if (program->find_method(name) == nullptr) {
        options.unmapped_keys_method = std::move(name);
        break;
      }
    }
    if (wdedup::Expected<void> added = files->add(*program, path, {}, options); !added) {
      // The library's message names its option; here it is the flag.
      std::string message = added.message();
      for (const auto& [api, flag] : {std::pair<std::string, std::string>{"ImportOptions::unmapped_keys_method",
                                                                          "--unmapped-keys METHOD"},
                                      {"unmapped_keys_method", "--unmapped-keys"},
                                      {"OpenOptions::allow_moved_segments", "--take-replaced-data"},
                                      {"ImportOptions::verify_content_hashes = false", "--take-replaced-data"}})
        if (const std::size_t at = message.find(api); at != std::string::npos) {
          message.replace(at, api.size(), flag);
          break;  // (the one the library wrote: a key's name quoted after it may hold it too)
        }
      // A later store's method that --unmapped-keys took the name of: the
      // library's message cannot know the flag made it.
      for (const auto& [made, from] : rest_made)
        if (message.find("method " + wdedup::detail::quote_name(made) + " is already in the program") !=
            std::string::npos) {
          message += "; --unmapped-keys made " + wdedup::detail::quote_name(made) + " for the keys of " +
                     wdedup::detail::table_name(from) + " that no function names: give it another METHOD";
          break;
        }
      std::fprintf(stderr, "wdedup-demo: %s\n", message.c_str());
      return false;
    }
    std::size_t tensors = 0, partitions = 0;
    std::string names;
    for (std::size_t m = before; m < program->methods.size(); ++m) {
      // (Escaped: a store someone else wrote names its methods.)
      names += (m == before ? "" : ", ") + wdedup::detail::table_name(program->methods[m].name);
      partitions += program->methods[m].partitions.size();
      for (const wdedup::Partition& p : program->methods[m].partitions) tensors += p.tensors.size();
    }
    // The store's unmapped keys, if it had any, are its last method, after
    // at least one of its functions' (a file without function maps is one
    // method, which may be named after the file as METHOD is).
    if (!options.unmapped_keys_method.empty() && program->methods.size() >= before + 2 &&
        program->methods.back().name == options.unmapped_keys_method)
      rest_made.emplace_back(options.unmapped_keys_method, path);
    // Bytes the file holds: each memory range once (aliased keys share one).
    const wdedup::Span<const wdedup::Method> file_methods(program->methods.data() + before, program->methods.size() - before);
    const std::uint64_t bytes = wdedup::bench::total_bytes(wdedup::bench::input_spans(file_methods));
    std::printf("  %s: %s %s, %s, %s over %s\n", wdedup::detail::table_name(path).c_str(),
                file_methods.size() == 1 ? "method" : "methods", names.c_str(), counted(partitions, "partition").c_str(),
                counted(tensors, "tensor").c_str(), wdedup::detail::human_bytes(bytes).c_str());
  }
  std::printf("\n");
  return true;
}

}  // namespace

int run_demo(int argc, char** argv) {
  wdedup_cli::handle_stop_signals(remove_temporary_and_die);
  Args args;
  if (!parse_args(argc, argv, &args)) return 2;
  std::optional<wdedup::LlamaWorkload> w;
  wdedup::PtdFiles files;
  wdedup::Program imported;
  if (!args.ptd.empty()) {
    // An output that names an input is refused before the inputs are
    // mapped: --out with the strategies that run whatever the files hold
    // (Positional needs their partition counts), --json, the --per-method
    // directory. Its files, named after the methods, are checked below.
    const std::vector<const char*> sure = args.strategy == "all" ? std::vector<const char*>{"oneblob", "disabled"}
                                                                 : std::vector<const char*>{args.strategy.c_str()};
    if (!inputs_distinct(args) || !outputs_distinct(args, wdedup::Program(), sure)) return 2;
    if (!import_files(args, &files, &imported)) return 2;
  } else {
    auto config = wdedup::LlamaConfig::preset(args.model);
    if (!config) {
      // (The library's message names the preset; here it is the flag's value.)
      std::fprintf(stderr, "wdedup-demo: --model: %s\n", config.message().c_str());
      return 2;
    }
    if (args.layers) config->n_layers = args.layers;
    if (args.prefill_partitions) config->prefill_partitions = args.prefill_partitions;
    if (args.decode_partitions) config->decode_partitions = args.decode_partitions;
    if (const std::string why = flag_problem(args, *config); !why.empty()) {
      std::fprintf(stderr, "wdedup-demo: %s\n", why.c_str());
      return 2;
    }
    // Before allocating: a --layers this machine cannot hold would otherwise
    // end with the kernel killing the process part-way.
    if (config->problem().empty()) {
      // (What this process can be given now, as the harness checks: the
      // machine's total let runs start that its other processes, or a
      // container's limit, left no room for.)
      const std::uint64_t need = config->memory_bytes();
      const wdedup::bench::MemoryLimit have = wdedup::bench::memory_limit();
      if (have.known() && need > have.bytes) {
        std::fprintf(stderr,
                     "wdedup-demo: the workload's tensors need %s of memory, more than the %s this process can have "
                     "(%s; a smaller --model or --layers fits)\n",
                     wdedup::detail::human_bytes(need).c_str(), wdedup::detail::human_bytes(have.bytes).c_str(),
                     have.source);
        return 2;
      }
    }
    // The mistakes that depend only on the methods' names and partition
    // counts are refused before generating: under --model 1b that is 5 GB.
    if (config->problem().empty()) {
      wdedup::Program shape;
      for (const char* name : {"prefill", "decode"}) {
        wdedup::Method& m = shape.add_method(name);
        const std::uint32_t n = m.name == "prefill" ? config->prefill_partitions : config->decode_partitions;
        for (std::uint32_t p = 0; p < n; ++p) m.add_partition();
      }
      std::vector<const char*> tags;
      if (!runs_as_asked(args, shape, &tags)) return 2;
    }
    auto generated = wdedup::LlamaWorkload::generate(*config);
    if (!generated) {
      std::fprintf(stderr, "wdedup-demo: %s\n", generated.message().c_str());
      return 2;
    }
    w.emplace(std::move(generated).value());
    const wdedup::LlamaConfig& c = w->config();
    std::printf("workload: Llama-shaped '%s' — dim %u, %s, vocab %u, prefill %s, decode %s, %s in memory\n\n",
                args.model.c_str(), c.dim, counted(c.n_layers, "layer").c_str(), c.vocab_size,
                counted(c.prefill_partitions, "partition").c_str(),
                counted(c.decode_partitions, "partition").c_str(),
                wdedup::detail::human_bytes(w->memory_bytes()).c_str());
  }
  const wdedup::Program& program = w ? w->program() : imported;
  std::vector<const char*> tags;
  if (!runs_as_asked(args, program, &tags)) return 2;  // (again for imported files; the same answer)
  // --per-method: its stores built (or refused) before anything is written.
  // With --keep-keys they are written after the merge, once its keys are
  // known kept: a merge it refuses writes nothing.
  std::vector<wdedup::NamedDataStore> per_method;
  if (!args.per_method.empty()) {
    if (const int rc = per_method_stores(args.per_method, program, &per_method); rc != 0) return rc;
    if (!args.keep_keys)
      if (const int rc = write_per_method(args.per_method, program, per_method); rc != 0) return rc;
  }

  std::string json;
  std::string* jp = args.json.empty() ? nullptr : &json;
  bool ok = true;
  const wdedup::PtdFiles* inputs = args.ptd.empty() ? nullptr : &files;
  std::optional<wdedup::Expected<void>> keys;
  // Where Positional's lines would be, first, as a block of its own (the
  // strategies' are followed by a blank line but for --quiet): printed
  // after the other strategies' reports, it was read as a note on the last.
  if (args.strategy == "all" && std::strcmp(tags.front(), "positional") != 0)
    std::printf("(Positional skipped: the methods have different partition counts)\n%s", args.quiet ? "" : "\n");
  for (const char* tag : tags) {
    const std::string out = out_path(args, tag);
    if (std::strcmp(tag, "positional") == 0)
      ok = run<wdedup::Positional>(args, program, inputs, out, jp, &keys) && ok;
    if (std::strcmp(tag, "oneblob") == 0) ok = run<wdedup::OneBlob>(args, program, inputs, out, jp, &keys) && ok;
    if (std::strcmp(tag, "disabled") == 0)
      ok = run<wdedup::Disabled>(args, program, inputs, out, jp, &keys) && ok;
  }
  if (!args.per_method.empty() && args.keep_keys) {
    if (keys && !keys->ok())
      std::fprintf(stderr, "wdedup-demo: --keep-keys: --per-method %s not written either\n", args.per_method.c_str());
    else if (const int rc = write_per_method(args.per_method, program, per_method); rc != 0)
      return rc;
  }

  // Replaced whole or not at all, as the stores are; and only with a
  // report: a run where every strategy failed leaves the last one.
  if (jp && json.empty()) {
    struct stat st {};
    std::fprintf(stderr, "wdedup-demo: no report to write; --json %s %s\n", args.json.c_str(),
                 ::stat(args.json.c_str(), &st) == 0 ? "left as it was" : "not written");
  } else if (jp) {
    const std::string text = "[" + json + "]\n";
    if (wdedup::Expected<void> written =
            wdedup::detail::write_whole_file(args.json, text, false, wdedup::detail::default_file_ops(), kWatch);
        !written) {
      std::fprintf(stderr, "wdedup-demo: %s\n", written.message().c_str());
      return 1;
    }
  }
  // Everything above went to stdout: lost, it is a failed run.
  if (!wdedup_cli::stdout_flushed("wdedup-demo")) return 1;
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  // Out of memory (a --model or --layers too big for this machine) is one
  // line and exit 1, not an abort (where exceptions are on).
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
  try {
    return run_demo(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "wdedup-demo: out of memory (a smaller --model or --layers fits)\n");
    return 1;
  }
#else
  return run_demo(argc, argv);
#endif
}
