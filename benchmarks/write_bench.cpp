// benchmarks/write_bench.cpp — write_ptd_file throughput on a multi-GB store
// against writing the same bytes with plain write() into the same directory.
// The writer reserves the file's size (fallocate) and fsyncs (file, then
// directory after the rename), so the ratio is taken against fallocate +
// write() + fsync: like with like. Measured too, for context: write() +
// fsync without fallocate (on some file systems, this machine's ext4 among
// them, allocating blocks during write() is several times slower),
// fallocate + write() without fsync (what durability costs), and the writer
// with fsync off beside that last one (its own work over the page cache's
// copy, which the device's fsync time otherwise hides).
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wdedup/bench.hpp>
#include <wdedup/named_data_store.hpp>
#include <wdedup/ptd_writer.hpp>
#include <wdedup/runtime.hpp>

#include "harness.hpp"

namespace wbench {
namespace {

namespace bench = wdedup::bench;

/// Removes a file and waits until the file system has committed that (and
/// everything else): freeing a 2 GB file is work too (on a file system
/// mounted with `discard`, TRIMs issued at the next journal commit), and it
/// must not land in the next contender's fsync. Untimed.
void remove_and_settle(const std::string& path) {
  ::unlink(path.c_str());
  ::sync();
}

/// Writes every buffer with write() in pieces of at most 512 KiB (the size
/// of the writer's own writev batches) to a new file, after reserving its size with fallocate if asked;
/// with `fsync`, fsyncs it inside the timed region, otherwise after. Returns
/// the timed seconds, or -1 after report_failure (a full disk, say: the run
/// still writes its JSON).
constexpr std::size_t kPiece = 512 * 1024;

double plain_write(const std::vector<wdedup::ByteSpan>& bufs, const std::string& path, bool fsync, bool preallocate) {
  std::uint64_t total = 0;
  for (const wdedup::ByteSpan& b : bufs) total += b.size();
  int fd = -1;
  auto fail = [&](const char* call) {
    report_failure(std::string(call) + " " + path + ": " + std::strerror(errno));
    if (fd >= 0) ::close(fd);
    ::unlink(path.c_str());
    return -1.0;
  };
  const double t0 = bench::now_seconds();
  fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return fail("open");
#if defined(__linux__)
  if (preallocate && ::fallocate(fd, 0, 0, static_cast<off_t>(total)) != 0 && errno != EOPNOTSUPP)
    return fail("fallocate");
#else
  static_cast<void>(preallocate);
#endif
  for (const wdedup::ByteSpan& b : bufs) {
    const std::uint8_t* p = b.data();
    std::size_t left = b.size();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, std::min<std::size_t>(left, kPiece));
      if (n < 0) {
        if (errno == EINTR) continue;
        return fail("write");
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if (fsync && ::fsync(fd) != 0) return fail("fsync");
  const double t = bench::now_seconds() - t0;
  // Untimed for the no-fsync variant: leave no dirty pages for the next
  // contender's fsync to pay for.
  if (!fsync && ::fsync(fd) != 0) return fail("fsync");
  ::close(fd);
  remove_and_settle(path);
  return t;
}

/// What is wrong with the file write_ptd_file wrote at `path` and said is
/// `file_size` bytes, or "": its size on disk is that, and, read back
/// through NamedDataMap, it holds the keys "w.0", "w.1", ... in order, each
/// with its buffer's bytes. Untimed, once each timed write's clock has
/// stopped: a write that changed, dropped or added a byte would otherwise
/// give a figure. (It reads the file once, mapped: the pages the write
/// just left in the page cache.)
std::string written_problem(const std::string& path, std::uint64_t file_size,
                            const std::vector<wdedup::ByteSpan>& bufs) {
  struct stat sb {};
  if (::stat(path.c_str(), &sb) != 0) return std::string("stat: ") + std::strerror(errno);
  if (static_cast<std::uint64_t>(sb.st_size) != file_size)
    return std::to_string(sb.st_size) + " bytes on disk, not the " + std::to_string(file_size) + " it reported";
  auto src = wdedup::MmapSource::open(path.c_str());
  if (!src) return "mapping it: " + wdedup::describe_failure(src.failure());
  auto map = wdedup::NamedDataMap::open(*src);
  if (!map) return "reading it back: " + wdedup::describe_failure(map.failure());
  if (*map->get_num_keys() != bufs.size())
    return std::to_string(*map->get_num_keys()) + " keys, not " + std::to_string(bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    const std::string name = "w." + std::to_string(i);
    const wdedup::Result<wdedup::KeyView> key = map->get_key(i);
    if (!key || std::string_view(key->data(), key->size()) != name)
      return "key " + std::to_string(i) + " is not '" + name + "'";
    const wdedup::Result<wdedup::DataBuffer> d = map->key_data(i);
    if (!d) return "key '" + name + "': " + wdedup::describe_failure(d.failure());
    if (d->size() != bufs[i].size())
      return "key '" + name + "': " + std::to_string(d->size()) + " bytes, not the " +
             std::to_string(bufs[i].size()) + " written";
    const auto* p = static_cast<const std::uint8_t*>(d->data());
    if (const std::size_t at = first_difference(p, bufs[i].data(), bufs[i].size()); at != bufs[i].size())
      return "key '" + name + "': byte " + std::to_string(at) + " is " + std::to_string(p[at]) + ", not the " +
             std::to_string(bufs[i].data()[at]) + " written";
  }
  return "";
}

}  // namespace

void run_write(const Config& c, Results& out) {
  // Each failure below returns before a row is pushed; should one not (a
  // repetition's failure pushed with -1 s, as mutation sweep h65's B19 did,
  // unseen by bench_quick and bench_args), its rows are still FAILED.
  const FailureScope scope(out);
  // Buffers of up to 64 MiB, each distinct (an index in its first 8 bytes),
  // in one arena written by memset so every page is real memory.
  const std::uint64_t chunk = std::min<std::uint64_t>(64u << 20, c.write_bytes);
  progress(c, "write: preparing a %llu-byte store", static_cast<unsigned long long>(c.write_bytes));
  std::unique_ptr<std::uint8_t[]> arena(new std::uint8_t[c.write_bytes]());
  std::vector<wdedup::ByteSpan> bufs;
  wdedup::NamedDataStore store;
  for (std::uint64_t at = 0, i = 0; at < c.write_bytes; at += chunk, ++i) {
    const std::uint64_t n = std::min(chunk, c.write_bytes - at);
    std::memcpy(arena.get() + at, &i, static_cast<std::size_t>(std::min<std::uint64_t>(8, n)));
    bufs.emplace_back(arena.get() + at, n);
    if (auto a = store.add_named_data("w." + std::to_string(i), bufs.back(), 64); !a) {
      report_failure("building the write store: " + a.message());
      return;
    }
  }
  const std::uint64_t data_bytes = bench::total_bytes(bufs);
  std::uint64_t file_size = 0;
  // write_ptd_file with durability on (its default) or off
  // (WriteOptions::fsync = false). Off is timed against fallocate+write()
  // without fsync: both into the page cache, so the writer's own work (its
  // plan, header, any hashing of the bytes) is not hidden behind the
  // device's fsync time. Its file is fsynced untimed before removal, as
  // plain_write's no-fsync variant does, so no dirty pages are left for the
  // next contender's fsync.
  auto writer = [&](bool fsync) {
    const std::string path = temp_path(c, fsync ? "store.ptd" : "store-nofsync.ptd");
    wdedup::WriteOptions o;
    o.fsync = fsync;
    const double t0 = bench::now_seconds();
    auto st = wdedup::write_ptd_file(store, path, o);
    const double t = bench::now_seconds() - t0;
    if (!st) {
      report_failure("write_ptd_file " + path + (fsync ? "" : " (no fsync)") + ": " + st.message());
      return -1.0;
    }
    file_size = st->file_size;
    if (const std::string wrong = written_problem(path, st->file_size, bufs); !wrong.empty()) {
      report_failure("write_ptd_file " + path + (fsync ? "" : " (no fsync)") + ": " + wrong);
      remove_and_settle(path);
      return -1.0;
    }
    if (!fsync) {
      if (const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC); fd >= 0) {
        ::fsync(fd);
        ::close(fd);
      }
    }
    remove_and_settle(path);
    return t;
  };
  // The five contenders, each with its samples; kOrder indexes this.
  std::vector<double> tw, tf, ta, tn, twn;
  const struct {
    std::function<double()> run;
    std::vector<double>* samples;
  } contenders[] = {
      {[&] { return writer(true); }, &tw},
      {[&] { return plain_write(bufs, temp_path(c, "plain.bin"), true, true); }, &tf},
      {[&] { return plain_write(bufs, temp_path(c, "plain-nofalloc.bin"), true, false); }, &ta},
      {[&] { return plain_write(bufs, temp_path(c, "plain-nofsync.bin"), false, true); }, &tn},
      {[&] { return writer(false); }, &twn},
  };

  // Each repetition writes the store 5 times (2 GB each by default): at
  // most 5 repetitions whatever --reps says (each row's reps is the count).
  const unsigned reps = std::min(c.reps, 5u);
  if (writer(true) < 0) return;  // warm: page cache, allocator, file system
  // The writer (0) and its target's baseline (1, fallocate+write()+fsync)
  // run side by side in every repetition, in the middle, and the order is
  // reversed every other repetition: on a shared virtual disk a write's
  // speed depends on what the previous one left behind, so neither may
  // always follow the same other one.
  // The no-fsync writer (4) sits beside its baseline (3) the same way.
  static constexpr unsigned kOrder[2][5] = {{2, 0, 1, 3, 4}, {4, 3, 1, 0, 2}};
  for (unsigned r = 0; r < reps; ++r) {
    progress(c, "write: repetition %u/%u", r + 1, reps);
    for (unsigned which : kOrder[r % 2]) {
      const double t = contenders[which].run();
      if (t < 0) return;  // reported; no rows from a partial run
      contenders[which].samples->push_back(t);
    }
  }
  auto row = [&](const std::string& base_name, const std::vector<double>& base,
                 const std::vector<double>& subject, const char* how) {
    Row w;
    w.group = "write";
    // Named by the tensor bytes its GB/s counts, in a unit that fits (a
    // user trial's --write-bytes 1000 read "1.38e-06 GB store", the file's
    // size with its header).
    // The unit is the one whose figure, at %.3g, is under 1000: 999,999
    // bytes are "1 MB", where a unit chosen before rounding gave "1e+03 kB"
    // (seen at mutation sweep h65's B22, `d >= 1e6` as `d > 1e6`, which no
    // check caught: nothing ran a store on a unit's edge but 1000 bytes).
    char figure[32], name[96];
    double v = double(data_bytes);
    const char* unit = "B";
    for (const char* larger : {"kB", "MB", "GB"}) {
      std::snprintf(figure, sizeof figure, "%.3g", v);
      if (std::strtod(figure, nullptr) < 1000) break;
      v /= 1000;
      unit = larger;
    }
    std::snprintf(figure, sizeof figure, "%.3g", v);
    std::snprintf(name, sizeof name, "write_ptd_file (%s), %s %s store", how, figure, unit);
    w.name = name;
    // Both count the tensors' bytes (the writer's header and padding are
    // its own cost): the ratio is then baseline time / writer time, as
    // every other table ratio, and a small store's header cannot tip it.
    w.value = bench::gb_per_s(data_bytes, bench::median(subject));
    w.unit = "GB/s";
    w.baseline = base_name;
    w.baseline_value = bench::gb_per_s(data_bytes, bench::median(base));
    w.baseline_unit = "GB/s";
    std::vector<double> ratios;
    for (std::size_t i = 0; i < subject.size() && i < base.size(); ++i)
      ratios.push_back(subject[i] > 0 ? base[i] / subject[i] : 0);
    w.ratio = bench::median(ratios);
    w.ratio_meaning = base_name + " time / write_ptd_file time, the same tensor bytes (median of per-repetition ratios)";
    w.reps = reps;
    w.samples = subject;
    w.baseline_samples = base;
    w.extra = {{"file_size", double(file_size)}, {"data_bytes", double(data_bytes)}};
    if (reps != c.reps) w.note = std::to_string(reps) + " repetitions (at most 5, whatever --reps); ";
    return w;
  };
  Row a = row("fallocate+write()+fsync", tf, tw, "fsync");
  // (Counted before the run by planned_targets, targets.hpp.)
  a.target = Target::ratio_at_least(0.7, ">= 0.7x");
  a.note += "the ratio uses write()+fsync after fallocate, as the writer does (it also fsyncs its directory)";
  out.rows.push_back(std::move(a));
  Row b = row("write()+fsync, no fallocate", ta, tw, "fsync");
  b.note += "plain write() letting the file system allocate blocks as it goes";
  out.rows.push_back(std::move(b));
  Row d = row("fallocate+write(), no fsync", tn, tw, "fsync");
  d.note += "durability's cost: write_ptd_file fsyncs, this baseline does not";
  out.rows.push_back(std::move(d));
  Row e = row("fallocate+write(), no fsync", tn, twn, "no fsync");
  e.note += "like with like without durability: both into the page cache, where the device's fsync time does "
            "not hide the writer's own work, chiefly XXH3 of every segment as it goes by (the WDX1 block's "
            "content hashes; WriteOptions::wdedup_extensions = false leaves them out)";
  out.rows.push_back(std::move(e));
}

}  // namespace wbench
