// tests/crash_safety.cpp — write_ptd_file replaces files crash-safely
// (wdedup/ptd_writer.hpp, wdedup/detail/atomic_file.hpp): a process killed
// at any point leaves the destination absent, at its previous version or
// complete; every failing step (full disk, I/O error, bad path, unwritable
// directory) leaves the destination untouched, removes the temporary file
// and reports Error::IoError naming the path, the operation and the reason.
#include "support/instances.hpp"  // first: see there
#include <doctest/doctest.h>

#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "wdedup/ptd_writer.hpp"
#include "support/pattern.hpp"
#include "support/ptd_files.hpp"
#include "support/require_value.hpp"

using namespace wdedup;

namespace {

using wdedup_test::pattern;    // tests/support/pattern.hpp
using wdedup_test::exists;     // tests/support/ptd_files.hpp
using wdedup_test::read_file;  // tests/support/ptd_files.hpp

/// A fresh, empty directory under the test build directory.
std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(WDEDUP_TEST_TMPDIR) + "/crash_safety_" + name;
  const std::string cmd = "rm -rf '" + dir + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  REQUIRE(::mkdir(dir.c_str(), 0755) == 0);
  return dir;
}

/// Names in `dir` other than the ones listed.
std::vector<std::string> others(const std::string& dir, const std::vector<std::string>& expected) {
  bool opened = false;
  const std::vector<std::string> names = wdedup_test::dir_entries(dir, &opened);
  REQUIRE(opened);
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (std::find(expected.begin(), expected.end(), n) == expected.end()) out.push_back(n);
  return out;
}

/// A store over `data`: one key per buffer plus an alias, mixed alignments.
NamedDataStore store_over(const std::vector<std::vector<std::uint8_t>>& data) {
  NamedDataStore s;
  for (std::size_t i = 0; i < data.size(); ++i) {
    Expected<void> r = s.add_named_data("layer." + std::to_string(i) + ".weight",
                                        ByteSpan(data[i].data(), data[i].size()), i % 2 ? 4096 : 64);
    REQUIRE(r.ok());
  }
  if (!data.empty()) REQUIRE(s.add_named_data("alias.0", ByteSpan(data[0].data(), data[0].size()), 16).ok());
  return s;
}

std::vector<std::uint8_t> serialize(const NamedDataStore& s) {
  Expected<std::vector<std::uint8_t>> r = serialize_ptd(s);
  REQUIRE(r.ok());
  return std::move(r).value();
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// The errno AtomicFile::open(path, 0) refuses `path` with
/// (failure_errno()), or -1 where it opens.
int open_refused_errno(const std::string& path) {
  detail::AtomicFile file;
  return file.open(path, 0).ok() ? -1 : file.failure_errno();
}

/// FileOps that fails one chosen step with a chosen errno, and can also
/// dribble writes (short writes and EINTR) to exercise the retry loops.
class FaultyOps final : public detail::FileOps {
 public:
  enum class Step { None, MakeTemp, Chmod, Reserve, Write, Pwrite, Fsync, Close, Rename, FsyncDir };
  FaultyOps() = default;
  /// Fails `step` with `error`.
  FaultyOps(Step step, int error_) : fail(step), error(error_) {}
  Step fail = Step::None;
  int error = EIO;
  std::uint64_t fail_after_bytes = 0;  ///< Write: succeed this many bytes first
  bool dribble = false;                ///< short writes and EINTR
  std::uint64_t written = 0;
  int writes = 0;

  int make_temp(char* t, mode_t m) override { return fail == Step::MakeTemp ? set() : FileOps::make_temp(t, m); }
  int fchmod(int fd, mode_t m) override { return fail == Step::Chmod ? set() : FileOps::fchmod(fd, m); }
  int reserve(int fd, off_t size) override { return fail == Step::Reserve ? set() : FileOps::reserve(fd, size); }
  ssize_t writev(int fd, const struct iovec* iov, int count) override {
    ++writes;
    if (dribble && writes % 3 == 0) {
      errno = EINTR;
      return -1;
    }
    std::uint64_t total = 0;
    for (int i = 0; i < count; ++i) total += iov[i].iov_len;
    std::uint64_t limit = dribble ? 1000 : total;
    if (fail == Step::Write) {
      if (written >= fail_after_bytes) return set();
      limit = std::min<std::uint64_t>(limit, fail_after_bytes - written);
    }
    // Write at most `limit` bytes (a short write when it cuts the iovecs).
    std::vector<struct iovec> part;
    for (int i = 0; i < count && limit > 0; ++i) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(limit, iov[i].iov_len));
      part.push_back(iovec{iov[i].iov_base, n});
      limit -= n;
    }
    const ssize_t w = FileOps::writev(fd, part.data(), static_cast<int>(part.size()));
    if (w > 0) written += static_cast<std::uint64_t>(w);
    return w;
  }
  ssize_t pwrite(int fd, const void* p, std::size_t n, off_t off) override {
    if (fail == Step::Pwrite) return set();
    ++pwrites;
    if (dribble && pwrites % 3 == 1) {  // the first call too
      errno = EINTR;
      return -1;
    }
    return FileOps::pwrite(fd, p, dribble ? std::min<std::size_t>(n, 5) : n, off);
  }
  int pwrites = 0;
  int fsync(int fd) override { return fail == Step::Fsync ? set() : FileOps::fsync(fd); }
  int close(int fd) override {
    if (fail == Step::Close) {
      FileOps::close(fd);  // the descriptor is gone either way, as with a real close error
      return set();
    }
    return FileOps::close(fd);
  }
  int rename(const char* a, const char* b) override { return fail == Step::Rename ? set() : FileOps::rename(a, b); }
  int unlink_error = 0;  ///< removing the temporary file fails with this (0: it does not)
  int unlink(const char* path) override {
    if (unlink_error == 0) return FileOps::unlink(path);
    errno = unlink_error;
    return -1;
  }
  int fsync_directory(const char* d) override {
    return fail == Step::FsyncDir ? set() : FileOps::fsync_directory(d);
  }

 private:
  int set() {
    errno = error;
    return -1;
  }
};

}  // namespace

/// The write both failing-step tests below make: four buffers of about
/// 700 KB (more than one write batch, offsets past 2 MB to fail at), one
/// function map, and the bytes the destination held before. The second
/// test's exact messages hold its sizes (a 2,812,440-byte file).
struct FailingStepWrite {
  std::vector<std::vector<std::uint8_t>> data = [] {
    std::vector<std::vector<std::uint8_t>> d;
    for (std::size_t i = 0; i < 4; ++i) d.push_back(pattern(700000 + 1000 * i, 10 + i));
    return d;
  }();
  NamedDataStore store = store_over(data);  // (after data: it points into it)
  FunctionMaps maps{{FunctionMap{"forward", 0, "blob", "forward", {{"w", "layer.0.weight"}}}}};
  std::vector<std::uint8_t> old_bytes = pattern(12345, 99);
};

TEST_CASE("every failing step leaves the destination untouched and removes the temporary file") {
  const FailingStepWrite w;

  using Step = FaultyOps::Step;
  struct Case {
    Step step;
    int error;
    std::uint64_t after;
    const char* operation;
  } cases[] = {
      {Step::MakeTemp, EMFILE, 0, "create a temporary file in directory"},
      {Step::Chmod, EPERM, 0, "chmod temporary file"},
      {Step::Reserve, ENOSPC, 0, "bytes for temporary file"},
      {Step::Write, ENOSPC, 0, "write to temporary file"},
      {Step::Write, ENOSPC, 1500000, "write to temporary file"},
      {Step::Write, EIO, 2000001, "write to temporary file"},
      {Step::Pwrite, EIO, 0, "write to temporary file"},
      {Step::Fsync, EIO, 0, "fsync temporary file"},
      {Step::Close, EIO, 0, "close temporary file"},
      {Step::Rename, EXDEV, 0, "rename"},
  };
  for (bool had_old : {true, false}) {
    for (const Case& c : cases) {
      // A new file is created with its mode (the kernel's umask or default
      // ACL); only a replacement is given one, the replaced file's.
      if (c.step == Step::Chmod && !had_old) continue;
      CAPTURE(had_old);
      CAPTURE(static_cast<int>(c.step));
      CAPTURE(c.after);
      const std::string dir = fresh_dir("faults");
      const std::string dest = dir + "/model.ptd";
      if (had_old) REQUIRE(wdedup_test::write_file(dest, w.old_bytes));
      FaultyOps ops(c.step, c.error);
      ops.fail_after_bytes = c.after;
      Expected<WriteStats> r = detail::write_ptd_file_with(w.store, w.maps, dest, WriteOptions{}, ops);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == Error::IoError);
      INFO(r.message());
      CHECK(contains(r.message(), "cannot write '" + dest + "': "));
      CHECK(contains(r.message(), c.operation));
      CHECK(contains(r.message(), std::strerror(c.error)));
      if (had_old) CHECK(read_file(dest) == w.old_bytes);
      else CHECK_FALSE(exists(dest));
      CHECK(others(dir, {"model.ptd"}).empty());  // no temporary file left
    }
  }
}

TEST_CASE("each failing step's error says, exactly, which file, which step, where in the file and why") {
  // The test above looks for pieces of each message; this one reads each
  // whole: the temporary file by its name, the size reserved and the
  // offset a write failed at (a message that said "at offset 0" for a
  // write that failed 1,500,000 bytes in, or dropped the temporary file's
  // name, passed it). The destination keeps its bytes and its mode.
  const FailingStepWrite w;
  Expected<detail::PtdPlan> plan = detail::plan_ptd(w.store, w.maps, WriteOptions{});
  REQUIRE(plan.ok());
  REQUIRE(plan->file_size == 2812440);
  REQUIRE(plan->segment_info_offset == 792);

  using Step = FaultyOps::Step;
  struct Case {
    Step step;
    int error;
    std::uint64_t after;
    std::string operation;  // "<temp>" stands for the temporary file's quoted name
  };
  const Case cases[] = {
      {Step::Chmod, EPERM, 0, "chmod temporary file <temp>"},
      {Step::Reserve, ENOSPC, 0, "reserve 2812440 bytes for temporary file <temp>"},
      {Step::Write, ENOSPC, 0, "write to temporary file <temp> at offset 0"},
      {Step::Write, ENOSPC, 1500000, "write to temporary file <temp> at offset 1500000"},
      {Step::Write, EIO, 2000001, "write to temporary file <temp> at offset 2000001"},
      {Step::Pwrite, EIO, 0, "write to temporary file <temp> at offset 792"},
      {Step::Fsync, EIO, 0, "fsync temporary file <temp>"},
      {Step::Close, EIO, 0, "close temporary file <temp>"},
      {Step::Rename, EXDEV, 0, "rename <temp> to <dest>"},
      // A step that fails without setting errno (0): an I/O error, not a success.
      {Step::Reserve, 0, 0, "reserve 2812440 bytes for temporary file <temp>"},
      {Step::Fsync, 0, 0, "fsync temporary file <temp>"},
      {Step::Close, 0, 0, "close temporary file <temp>"},
      {Step::Rename, 0, 0, "rename <temp> to <dest>"},
  };
  for (const Case& c : cases) {
    CAPTURE(static_cast<int>(c.step));
    CAPTURE(c.error);
    CAPTURE(c.after);
    const std::string dir = fresh_dir("fault_messages");
    const std::string dest = dir + "/model.ptd";
    REQUIRE(wdedup_test::write_file(dest, w.old_bytes));
    REQUIRE(::chmod(dest.c_str(), 0640) == 0);
    std::string temp;  // as on_temporary was told it
    WriteOptions o;
    o.temporary_context = &temp;
    o.on_temporary = [](const char* path, bool exists, void* context) {
      if (exists) *static_cast<std::string*>(context) = path;
    };
    FaultyOps ops(c.step, c.error);
    ops.fail_after_bytes = c.after;
    Expected<WriteStats> r = detail::write_ptd_file_with(w.store, w.maps, dest, o, ops);
    REQUIRE_FALSE(r.ok());
    REQUIRE(temp.rfind(dir + "/.model.ptd.tmp-", 0) == 0);
    std::string operation = c.operation;
    const std::string quoted_temp = "'" + temp + "'", quoted_dest = "'" + dest + "'";
    operation.replace(operation.find("<temp>"), 6, quoted_temp);
    if (const std::size_t at = operation.find("<dest>"); at != std::string::npos) operation.replace(at, 6, quoted_dest);
    CHECK(r.error() == Error::IoError);
    CHECK(r.message() == "cannot write " + quoted_dest + ": " + operation + " failed: " +
                             std::strerror(c.error != 0 ? c.error : EIO));
    CHECK(read_file(dest) == w.old_bytes);
    struct stat st {};
    REQUIRE(::stat(dest.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(others(dir, {"model.ptd"}).empty());
  }
  // No temporary file is made for the directory's refusal to be named in.
  const std::string dir = fresh_dir("fault_messages");
  const std::string dest = dir + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest, w.old_bytes));
  FaultyOps ops(Step::MakeTemp, EMFILE);
  Expected<WriteStats> r = detail::write_ptd_file_with(w.store, w.maps, dest, WriteOptions{}, ops);
  CHECK(r.error() == Error::IoError);
  CHECK(r.message() == "cannot write '" + dest + "': create a temporary file in directory '" + dir + "' failed: " +
                           std::strerror(EMFILE));
  CHECK(read_file(dest) == w.old_bytes);
  CHECK(others(dir, {"model.ptd"}).empty());
  // Written through a symbolic link, the rename names what it would have
  // replaced: the file the link points at, by its full path.
  REQUIRE(::symlink("model.ptd", (dir + "/link.ptd").c_str()) == 0);
  char* real = ::realpath(dir.c_str(), nullptr);
  REQUIRE(real != nullptr);
  const std::string real_dir = real;
  std::free(real);
  FaultyOps rename_fails(Step::Rename, EXDEV);
  r = detail::write_ptd_file_with(w.store, w.maps, dir + "/link.ptd", WriteOptions{}, rename_fails);
  CHECK(r.error() == Error::IoError);
  CHECK(r.message().rfind("cannot write '" + dir + "/link.ptd': rename '" + real_dir + "/.model.ptd.tmp-", 0) == 0);
  CHECK(contains(r.message(), "' to '" + real_dir + "/model.ptd' failed: " + std::strerror(EXDEV)));
  CHECK(read_file(dest) == w.old_bytes);
  CHECK(others(dir, {"model.ptd", "link.ptd"}).empty());
}

TEST_CASE("a temporary file the failure keeps from being removed is named in the error") {
  // What makes a write fail can keep its temporary file from being removed
  // too: ext4 remounts itself read-only after an I/O error
  // (errors=remount-ro), or the directory is made unwritable meanwhile.
  // The file is then left, and the error says so (it said nothing, and the
  // writer's documentation promised the file removed). A review helper's
  // finding, shown on a tmpfs remounted read-only and a directory chmodded
  // 0555 before the rename.
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1)};
  const NamedDataStore store = store_over(data);
  const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
  using Step = FaultyOps::Step;
  for (const Step step : {Step::Reserve, Step::Write, Step::Rename}) {
    for (const bool whole_file : {false, true}) {
      CAPTURE(static_cast<int>(step));
      CAPTURE(whole_file);
      const std::string dir = fresh_dir("unremoved");
      const std::string dest = dir + "/model.ptd";
      REQUIRE(wdedup_test::write_file(dest, old_bytes));
      FaultyOps ops(step, EROFS);
      ops.unlink_error = EROFS;
      const BuildError e =
          whole_file ? detail::write_whole_file(dest, "{}", true, ops).build_error()
                     : detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops).build_error();
      REQUIRE(e.code == Error::IoError);  // (a success would hold Error::Ok)
      const std::vector<std::string> left = others(dir, {"model.ptd"});
      REQUIRE(left.size() == 1);
      CHECK(left[0].rfind(".model.ptd.tmp-", 0) == 0);
      const std::string tail =
          "; the temporary file '" + dir + "/" + left[0] + "' could not be removed: " + std::strerror(EROFS);
      INFO(e.message);
      CHECK(e.message.rfind("cannot write '" + dest + "': ", 0) == 0);
      CHECK(e.message.size() > tail.size());
      CHECK(e.message.compare(e.message.size() - tail.size(), tail.size(), tail) == 0);
      CHECK(read_file(dest) == old_bytes);
    }
  }
  // A temporary file already gone (ENOENT) is not reported.
  const std::string dir = fresh_dir("unremoved_gone");
  FaultyOps ops(Step::Rename, EXDEV);
  ops.unlink_error = ENOENT;
  const Expected<void> r = detail::write_whole_file(dir + "/model.ptd", "{}", true, ops);
  REQUIRE_FALSE(r.ok());
  CHECK(r.message().find("could not be removed") == std::string::npos);
}

TEST_CASE("on_temporary is told the temporary file's path once it is made and once it is gone") {
  // For a program that removes the temporary file when a signal ends it
  // mid-write (the demo). Each call records what was on disk at that
  // moment: the file itself, and the destination.
  struct Call {
    std::string path;
    bool exists;       // what the call said
    bool on_disk;      // whether `path` was there when it was said
    off_t size;        // its size then (-1: not there)
    bool dest_is_old;  // the destination still held the old bytes
  };
  struct Seen {
    std::string dest;
    std::vector<std::uint8_t> old_bytes;
    std::vector<Call> calls;
  };
  const auto note = [](const char* path, bool exists_now, void* context) {
    Seen& seen = *static_cast<Seen*>(context);
    struct stat st {};
    const bool there = ::lstat(path, &st) == 0;
    seen.calls.push_back(Call{path, exists_now, there, there ? st.st_size : -1,
                              read_file(seen.dest) == seen.old_bytes});
  };
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1), pattern(9000, 2)};
  const NamedDataStore store = store_over(data);
  const std::vector<std::uint8_t> new_bytes = serialize(store);
  using Step = FaultyOps::Step;
  struct Case {
    Step step;        // the step that fails (None: the write succeeds)
    int unlink_error; // removing the temporary file fails too
    bool refused;     // the check before the replacement refuses the file
  } cases[] = {{Step::None, 0, false}, {Step::Reserve, 0, false}, {Step::Write, 0, false},
               {Step::Rename, 0, false}, {Step::None, 0, true}, {Step::Write, EROFS, false},
               {Step::MakeTemp, 0, false}};
  for (const Case& c : cases) {
    for (const bool whole_file : {false, true}) {
      if (whole_file && c.refused) continue;  // (write_whole_file takes no check)
      CAPTURE(static_cast<int>(c.step));
      CAPTURE(c.unlink_error);
      CAPTURE(c.refused);
      CAPTURE(whole_file);
      const std::string dir = fresh_dir("on_temporary");
      Seen seen{dir + "/model.ptd", pattern(1000, 7), {}};
      REQUIRE(wdedup_test::write_file(seen.dest, seen.old_bytes));
      FaultyOps ops(c.step, ENOSPC);
      ops.unlink_error = c.unlink_error;
      const std::string text(3000, 'j');
      bool ok;
      if (whole_file) {
        ok = detail::write_whole_file(seen.dest, text, true, ops, detail::TemporaryWatch{note, &seen}).ok();
      } else {
        WriteOptions options;
        options.on_temporary = note;
        options.temporary_context = &seen;
        if (c.refused)
          options.check_before_replace = [](const char*, void*) -> Expected<void> {
            return Expected<void>(Error::MalformedSegment, "refused");
          };
        ok = detail::write_ptd_file_with(store, FunctionMaps{}, seen.dest, options, ops).ok();
      }
      const bool fails = c.step != Step::None || c.refused;
      REQUIRE(ok == !fails);
      if (c.step == Step::MakeTemp) {  // never made: nothing to tell
        CHECK(seen.calls.empty());
        continue;
      }
      const bool stuck = c.unlink_error != 0;  // left behind, named in the error
      REQUIRE(seen.calls.size() == (stuck ? 1u : 2u));
      const Call& made = seen.calls[0];
      // Told as soon as it exists: empty (nothing reserved yet), in the
      // destination's directory, named after it; the destination untouched.
      CHECK(made.exists);
      CHECK(made.on_disk);
      CHECK(made.size == 0);
      CHECK(made.dest_is_old);
      CHECK(made.path.rfind(dir + "/.model.ptd.tmp-", 0) == 0);
      CHECK(made.path.size() == dir.size() + std::strlen("/.model.ptd.tmp-XXXXXX"));
      if (stuck) {
        CHECK(exists(made.path));
        continue;
      }
      const Call& gone = seen.calls[1];
      CHECK(gone.path == made.path);
      CHECK_FALSE(gone.exists);
      CHECK_FALSE(gone.on_disk);  // renamed or removed before it is said
      CHECK(gone.dest_is_old == fails);
      const std::vector<std::uint8_t> want =
          fails ? seen.old_bytes : whole_file ? std::vector<std::uint8_t>(text.begin(), text.end()) : new_bytes;
      CHECK(read_file(seen.dest) == want);
      CHECK(others(dir, {"model.ptd"}).empty());
    }
  }
  // can_create_file's own temporary file is told of as well.
  const std::string dir = fresh_dir("on_temporary_probe");
  Seen seen{dir + "/model.ptd", {}, {}};
  REQUIRE(detail::can_create_file(seen.dest, detail::TemporaryWatch{note, &seen}));
  REQUIRE(seen.calls.size() == 2u);
  CHECK(seen.calls[0].exists);
  CHECK(seen.calls[0].on_disk);
  CHECK(seen.calls[0].path.rfind(dir + "/.model.ptd.tmp-", 0) == 0);
  CHECK(seen.calls[1].path == seen.calls[0].path);
  CHECK_FALSE(seen.calls[1].exists);
  CHECK_FALSE(seen.calls[1].on_disk);
  CHECK(others(dir, {}).empty());
}

TEST_CASE("a temporary file someone else removed meanwhile is told of as gone all the same") {
  // Here on_temporary itself removes the file as soon as it is told of it
  // (as another process, or a cleaner, could): the rename then fails
  // (ENOENT), and so does the removal of the temporary file. That removal
  // finding nothing means the file is gone, and the watch is told so: a
  // watch never told would go on holding the path, and remove it later
  // (on a signal), when it may name another file.
  struct Seen {
    std::vector<std::string> paths;
    std::vector<bool> exists;
  };
  const auto remove_at_once = [](const char* path, bool exists_now, void* context) {
    Seen& seen = *static_cast<Seen*>(context);
    seen.paths.push_back(path);
    seen.exists.push_back(exists_now);
    if (exists_now) ::unlink(path);
  };
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1)};
  const NamedDataStore store = store_over(data);
  for (const bool whole_file : {false, true}) {
    CAPTURE(whole_file);
    const std::string dir = fresh_dir("temporary_removed");
    const std::string dest = dir + "/model.ptd";
    const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    Seen seen;
    FaultyOps ops;  // every step as the system does it
    BuildError e;
    if (whole_file) {
      e = detail::write_whole_file(dest, "{}", true, ops, detail::TemporaryWatch{remove_at_once, &seen}).build_error();
    } else {
      WriteOptions options;
      options.on_temporary = remove_at_once;
      options.temporary_context = &seen;
      e = detail::write_ptd_file_with(store, FunctionMaps{}, dest, options, ops).build_error();
    }
    REQUIRE(seen.paths.size() == 2u);
    const std::string& temp = seen.paths[0];
    CHECK(temp.rfind(dir + "/.model.ptd.tmp-", 0) == 0);
    CHECK(seen.exists[0]);
    CHECK(seen.paths[1] == temp);
    CHECK_FALSE(seen.exists[1]);
    CHECK(e.code == Error::IoError);
    CHECK(e.message == "cannot write '" + dest + "': rename '" + temp + "' to '" + dest + "' failed: " +
                           std::strerror(ENOENT));
    CHECK(read_file(dest) == old_bytes);
    CHECK(others(dir, {"model.ptd"}).empty());
  }
}

namespace {
// What the SIGUSR1 handler saw: how many times the watch had been told.
volatile sig_atomic_t g_told = 0;
volatile sig_atomic_t g_told_when_handled = -1;
extern "C" void note_told_on_usr1(int) { g_told_when_handled = g_told; }
extern "C" void never_called(int) {}
extern "C" void never_called_info(int, siginfo_t*, void*) {}
}  // namespace

TEST_CASE("a signal raised while the temporary file is created waits until on_temporary knows it") {
  // A handler that ran between the creation and the call could not remove
  // the file (a review's finding: SIGTERM during open(2) left an empty
  // temporary file). Here the signal comes right after the file is made,
  // inside make_temp; it must be handled only after the call.
  struct RaisingOps final : detail::FileOps {
    sigset_t during;  // the thread's mask while the file is made
    int make_temp(char* t, mode_t m) override {
      ::pthread_sigmask(SIG_BLOCK, nullptr, &during);
      const int fd = FileOps::make_temp(t, m);
      ::raise(SIGUSR1);
      return fd;
    }
  };
  struct sigaction sa, old;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = note_told_on_usr1;
  sigemptyset(&sa.sa_mask);
  REQUIRE(::sigaction(SIGUSR1, &sa, &old) == 0);
  // A SIGSEGV handler of this test's own (doctest's may not be there), so
  // that SIGSEGV counts as handled, and is left out only as a fault's.
  struct sigaction segv, old_segv;
  std::memset(&segv, 0, sizeof segv);
  segv.sa_handler = never_called;
  sigemptyset(&segv.sa_mask);
  REQUIRE(::sigaction(SIGSEGV, &segv, &old_segv) == 0);
  // Handled too, and so held: SIGRTMAX, the last signal there is, and
  // SIGRTMIN by a handler taking a siginfo_t (SA_SIGINFO, sa_sigaction).
  struct sigaction rt_max, old_rt_max, rt_min, old_rt_min;
  std::memset(&rt_max, 0, sizeof rt_max);
  rt_max.sa_handler = never_called;
  sigemptyset(&rt_max.sa_mask);
  REQUIRE(::sigaction(SIGRTMAX, &rt_max, &old_rt_max) == 0);
  std::memset(&rt_min, 0, sizeof rt_min);
  rt_min.sa_sigaction = never_called_info;
  rt_min.sa_flags = SA_SIGINFO;
  sigemptyset(&rt_min.sa_mask);
  REQUIRE(::sigaction(SIGRTMIN, &rt_min, &old_rt_min) == 0);
  const std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1)};  // (the store points into it)
  const NamedDataStore store = store_over(data);
  const auto told = [](const char*, bool, void*) { g_told = g_told + 1; };  // (++ on a volatile is deprecated in C++20)
  for (const bool watched : {true, false}) {
    CAPTURE(watched);
    const std::string dir = fresh_dir("signal_hold");
    g_told = 0;
    g_told_when_handled = -1;
    WriteOptions options;
    if (watched) options.on_temporary = told;
    RaisingOps ops;
    REQUIRE(detail::write_ptd_file_with(store, FunctionMaps{}, dir + "/model.ptd", options, ops).ok());
    // Watched: held back until the file was told of (once); not watched:
    // nothing is held, and the handler ran inside make_temp.
    CHECK(g_told_when_handled == (watched ? 1 : 0));
    CHECK(g_told == (watched ? 2 : 0));
    // Only what the process handles is held: SIGUSR1 (handled here), not
    // SIGUSR2 (its default action ends the process either way), nor a
    // fault's SIGSEGV, which cannot wait.
    CHECK(sigismember(&ops.during, SIGUSR1) == (watched ? 1 : 0));
    CHECK(sigismember(&ops.during, SIGUSR2) == 0);
    CHECK(sigismember(&ops.during, SIGSEGV) == 0);
    CHECK(sigismember(&ops.during, SIGRTMAX) == (watched ? 1 : 0));
    CHECK(sigismember(&ops.during, SIGRTMIN) == (watched ? 1 : 0));
    // The thread's mask is as it was: SIGUSR1 is let through again.
    sigset_t now;
    REQUIRE(::pthread_sigmask(SIG_BLOCK, nullptr, &now) == 0);
    CHECK(sigismember(&now, SIGUSR1) == 0);
  }
  REQUIRE(::sigaction(SIGUSR1, &old, nullptr) == 0);
  REQUIRE(::sigaction(SIGSEGV, &old_segv, nullptr) == 0);
  REQUIRE(::sigaction(SIGRTMAX, &old_rt_max, nullptr) == 0);
  REQUIRE(::sigaction(SIGRTMIN, &old_rt_min, nullptr) == 0);
}

namespace {
/// While above 0: the next creations (O_EXCL) of a temporary file (".tmp-"
/// in its name) fail as if someone had taken the name first (EEXIST), one
/// less each time.
std::atomic<int> g_names_taken{0};
}  // namespace

/// open(2) for this program: the names g_names_taken says are taken; the
/// rest as the system opens them.
extern "C" int open(const char* path, int flags, ...) {
  mode_t mode = 0;
  if ((flags & O_CREAT) != 0) {
    va_list args;
    va_start(args, flags);
    mode = va_arg(args, mode_t);
    va_end(args);
  }
  if ((flags & O_EXCL) != 0 && std::strstr(path, ".tmp-") != nullptr && g_names_taken.load() > 0) {
    --g_names_taken;
    errno = EEXIST;
    return -1;
  }
  return ::openat(AT_FDCWD, path, flags, mode);
}

TEST_CASE("a temporary file's name someone took first costs a retry: 100 names are tried, then EEXIST") {
  const std::string dir = fresh_dir("names_taken");
  const std::string dest = dir + "/r.json";
  g_names_taken = 99;  // the 100th name is free
  const Expected<void> w = detail::write_whole_file(dest, "{}\n", false);
  REQUIRE_MESSAGE(w.ok(), w.message());
  CHECK(g_names_taken.load() == 0);
  CHECK(read_file(dest) == std::vector<std::uint8_t>{'{', '}', '\n'});
  g_names_taken = 100;  // all taken
  const Expected<void> r = detail::write_whole_file(dest, "[]\n", false);
  g_names_taken = 0;
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Error::IoError);
  CHECK(r.message() == "cannot write '" + dest + "': create a temporary file in directory '" + dir +
                           "' failed: " + std::strerror(EEXIST));
  CHECK(read_file(dest) == std::vector<std::uint8_t>{'{', '}', '\n'});
  CHECK(others(dir, {"r.json"}).empty());
}

TEST_CASE("write_whole_file (the tools' JSON reports): all or nothing, as a store") {
  const std::string text = "[{\"report\": 1}]\n";
  const std::vector<std::uint8_t> old_bytes = pattern(3000, 7);
  using Step = FaultyOps::Step;
  for (Step step : {Step::MakeTemp, Step::Reserve, Step::Write, Step::Fsync, Step::Close, Step::Rename}) {
    CAPTURE(static_cast<int>(step));
    const std::string dir = fresh_dir("whole_file");
    const std::string dest = dir + "/report.json";
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    FaultyOps ops(step, ENOSPC);
    ops.fail_after_bytes = 5;  // a write fails part-way through the text
    Expected<void> r = detail::write_whole_file(dest, text, true, ops);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Error::IoError);
    INFO(r.message());
    CHECK(contains(r.message(), "cannot write '" + dest + "': "));
    CHECK(contains(r.message(), std::strerror(ENOSPC)));
    CHECK(read_file(dest) == old_bytes);
    CHECK(others(dir, {"report.json"}).empty());
  }
  const std::string dir = fresh_dir("whole_file_ok");
  const std::string dest = dir + "/report.json";
  REQUIRE(wdedup_test::write_file(dest, old_bytes));
  FaultyOps dribbling;
  dribbling.dribble = true;  // short writes and EINTR on the way
  const std::string big(5000, 'x');
  REQUIRE(detail::write_whole_file(dest, big, false, dribbling).ok());
  CHECK(read_file(dest) == std::vector<std::uint8_t>(big.begin(), big.end()));
  REQUIRE(detail::write_whole_file(dest, "", false).ok());
  CHECK(read_file(dest).empty());
  CHECK(others(dir, {"report.json"}).empty());
}

TEST_CASE("a check before the replacement sees the whole file; its error leaves the destination untouched") {
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1), pattern(9000, 2)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("check_before_replace");
  const std::string dest = dir + "/model.ptd";
  const std::vector<std::uint8_t> old_bytes{1, 2, 3};
  REQUIRE(wdedup_test::write_file(dest, old_bytes));
  struct Seen {
    std::string path;
    std::vector<std::uint8_t> bytes;
    bool refuse = false;
  } seen;
  WriteOptions o;
  o.check_context = &seen;
  o.check_before_replace = [](const char* written, void* context) -> Expected<void> {
    Seen& s = *static_cast<Seen*>(context);
    s.path = written;
    s.bytes = read_file(written);
    if (s.refuse) return Expected<void>(Error::MalformedSegment, "tensor 'layer.1.weight' does not read back");
    return {};
  };
  seen.refuse = true;
  Expected<WriteStats> r = write_ptd_file(store, FunctionMaps{}, dest, o);
  REQUIRE_FALSE(r.ok());
  CHECK(r.error() == Error::MalformedSegment);
  CHECK(r.message() == "cannot write '" + dest +
                           "': the check before replacing it failed: tensor 'layer.1.weight' does not read back");
  CHECK(seen.bytes == serialize(store));  // the check saw the file whole
  CHECK(seen.path.rfind(dir + "/", 0) == 0);
  CHECK(seen.path != dest);
  CHECK(read_file(dest) == old_bytes);
  CHECK(others(dir, {"model.ptd"}).empty());  // the temporary file removed
  // NotDurable would say the new file is in place: it comes back as IoError.
  o.check_before_replace = [](const char*, void*) -> Expected<void> {
    return Expected<void>(Error::NotDurable, "no");
  };
  r = write_ptd_file(store, FunctionMaps{}, dest, o);
  CHECK(r.error() == Error::IoError);
  CHECK(r.message() == "cannot write '" + dest + "': the check before replacing it failed: no");
  CHECK(read_file(dest) == old_bytes);
  CHECK(others(dir, {"model.ptd"}).empty());
  o.check_before_replace = [](const char* written, void* context) -> Expected<void> {
    Seen& s = *static_cast<Seen*>(context);
    s.path = written;
    s.bytes = read_file(written);
    return {};
  };
  seen = Seen{};
  r = write_ptd_file(store, FunctionMaps{}, dest, o);
  REQUIRE(r.ok());
  CHECK(read_file(dest) == serialize(store));
  CHECK(seen.bytes == serialize(store));
  CHECK(others(dir, {"model.ptd"}).empty());
}

TEST_CASE("a failed directory fsync after the rename is NotDurable, not IoError; the new file is complete") {
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("fsync_dir");
  const std::string dest = dir + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest, {1, 2, 3}));
  FaultyOps ops(FaultyOps::Step::FsyncDir, EIO);
  Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
  CHECK(r.error() == Error::NotDurable);
  CHECK(std::string(error_name(r.error())) == "NotDurable");
  CHECK(r.message() == "wrote '" + dest + "', but fsync directory '" + dir + "' failed: " + std::strerror(EIO) +
                           " (the new file is in place; its rename may not survive a power loss)");
  CHECK(read_file(dest) == serialize(store));
  CHECK(others(dir, {"model.ptd"}).empty());
}

namespace {
/// FileOps that counts the syncs of the file and of its directory.
class CountingSyncs final : public detail::FileOps {
 public:
  int fsyncs = 0, dir_fsyncs = 0;
  int fsync(int fd) override {
    ++fsyncs;
    return FileOps::fsync(fd);
  }
  int fsync_directory(const char* d) override {
    ++dir_fsyncs;
    return FileOps::fsync_directory(d);
  }
};
Expected<void> accept_file(const char*, void*) { return {}; }
}  // namespace

TEST_CASE("WriteOptions::fsync = false syncs neither the file nor its directory; true syncs both") {
  // A new file without a check (one sync of the file), and a replaced file
  // under a check (the file is synced before the check and again once its
  // mode is set after it). Either way the destination ends up whole.
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1), pattern(3000, 2)};
  const NamedDataStore store = store_over(data);
  struct Case {
    bool fsync, replace;
    int fsyncs, dir_fsyncs;
  } cases[] = {{false, false, 0, 0}, {false, true, 0, 0}, {true, false, 1, 1}, {true, true, 2, 1}};
  for (const Case& c : cases) {
    CAPTURE(c.fsync);
    CAPTURE(c.replace);
    const std::string dir = fresh_dir("no_fsync");
    const std::string dest = dir + "/model.ptd";
    if (c.replace) REQUIRE(wdedup_test::write_file(dest, {1, 2, 3}));
    WriteOptions o;
    o.fsync = c.fsync;
    if (c.replace) o.check_before_replace = accept_file;
    CountingSyncs ops;
    Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, o, ops);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(ops.fsyncs == c.fsyncs);
    CHECK(ops.dir_fsyncs == c.dir_fsyncs);
    CHECK(read_file(dest) == serialize(store));
    CHECK(others(dir, {"model.ptd"}).empty());
  }
}

TEST_CASE("the directory fsync opens '<dir>/.': a directory reached through a link is not a trailing link") {
  // The kernel's fs.protected_symlinks applies to a link that is the last
  // part of a path only: opened as "<dir>", a directory reached through a
  // link another user owns in a sticky, world-writable directory (as /tmp)
  // was refused after the rename, and every write there ended NotDurable.
  struct RecordingOps final : detail::FileOps {
    std::vector<std::string> dirs;
    int fsync_directory(const char* d) override {
      dirs.push_back(d);
      return FileOps::fsync_directory(d);
    }
  };
  std::vector<std::vector<std::uint8_t>> data{pattern(3000, 4)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("fsync_dot");
  REQUIRE(::mkdir((dir + "/real").c_str(), 0755) == 0);
  REQUIRE(::symlink("real", (dir + "/lnk").c_str()) == 0);
  RecordingOps ops;
  REQUIRE(detail::write_ptd_file_with(store, FunctionMaps{}, dir + "/lnk/model.ptd", WriteOptions{}, ops).ok());
  CHECK(ops.dirs == std::vector<std::string>{dir + "/lnk/."});
  CHECK(read_file(dir + "/real/model.ptd") == serialize(store));
  // A bare file name: the working directory, as "./.".
  ops.dirs.clear();
  char cwd[4096];
  REQUIRE(::getcwd(cwd, sizeof cwd) != nullptr);
  REQUIRE(::chdir((dir + "/real").c_str()) == 0);
  const bool ok = detail::write_ptd_file_with(store, FunctionMaps{}, "here.ptd", WriteOptions{}, ops).ok();
  REQUIRE(::chdir(cwd) == 0);
  CHECK(ok);
  CHECK(ops.dirs == std::vector<std::string>{"./."});

  // With the kernel's rule in force and root to plant the link as another
  // user: the write through it is complete and durable.
  if (::geteuid() != 0 || read_file("/proc/sys/fs/protected_symlinks") != std::vector<std::uint8_t>{'1', '\n'}) {
    MESSAGE("not root, or fs.protected_symlinks is not 1: the planted directory link is not tried");
    return;
  }
  const std::string sticky = dir + "/tmp";
  REQUIRE(::mkdir(sticky.c_str(), 0777) == 0);
  REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
  const std::string planted = sticky + "/out";
  REQUIRE(::symlink((dir + "/real").c_str(), planted.c_str()) == 0);
  REQUIRE(::lchown(planted.c_str(), 12345, 12345) == 0);
  Expected<WriteStats> r = write_ptd_file(store, planted + "/model2.ptd");
  CHECK(r.ok());
  CHECK(r.message() == "");
  CHECK(read_file(dir + "/real/model2.ptd") == serialize(store));
}

TEST_CASE("short writes and EINTR are retried until every byte is written") {
  std::vector<std::vector<std::uint8_t>> data{pattern(300000, 1), pattern(77, 2), pattern(0, 3), pattern(9000, 4)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("dribble");
  const std::string dest = dir + "/model.ptd";
  FaultyOps ops;
  ops.dribble = true;
  Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(ops.writes > 300);
  // The content hashes are written back over the metadata in one pwrite
  // loop: the four segments' 16-byte records, 64 bytes, 5 a call (13 calls
  // that write), with every third call from the first an EINTR (7 more).
  CHECK(format::segment_info::kSize * 4 == 64);
  CHECK(ops.pwrites == 20);
  CHECK(read_file(dest) == serialize(store));
  CHECK(others(dir, {"model.ptd"}).empty());
}

TEST_CASE("more pieces than IOV_MAX (1024) are written in writev calls of at most 1024, empty ones passed over") {
  // 2500 pieces of one byte and an empty one among them (the 1501st): calls
  // of 1024, 1024 and 453 pieces (one writev of all 2501 fails with
  // EINVAL), the empty piece passed over where a call ends past it.
  class CountingOps final : public detail::FileOps {
   public:
    std::vector<int> counts;
    ssize_t writev(int fd, const struct iovec* iov, int count) override {
      counts.push_back(count);
      return FileOps::writev(fd, iov, count);
    }
  };
  const std::string dir = fresh_dir("iov_max");
  const std::vector<std::uint8_t> bytes = pattern(2500, 5);
  CountingOps ops;
  detail::AtomicFile file(ops);
  const Expected<void> o = file.open(dir + "/pieces", bytes.size());
  REQUIRE_MESSAGE(o.ok(), o.message());
  std::vector<struct iovec> iov;
  for (const std::uint8_t& b : bytes) iov.push_back(iovec{const_cast<std::uint8_t*>(&b), 1});
  iov.insert(iov.begin() + 1500, iovec{const_cast<std::uint8_t*>(bytes.data()), 0});
  const Expected<void> w = file.write(iov);
  REQUIRE_MESSAGE(w.ok(), w.message());
  CHECK(iov.empty());
  CHECK(file.offset() == 2500);
  CHECK(ops.counts == std::vector<int>{1024, 1024, 453});
  const Expected<void> c = file.commit(false);
  REQUIRE_MESSAGE(c.ok(), c.message());
  CHECK(read_file(dir + "/pieces") == bytes);
  CHECK(others(dir, {"pieces"}).empty());
}

TEST_CASE("an interrupted fallocate (EINTR) is retried; an unsupported one, or EINVAL (a file system that cannot reserve), is skipped") {
  std::vector<std::vector<std::uint8_t>> data{pattern(40000, 1), pattern(3000, 2)};
  const NamedDataStore store = store_over(data);
  struct Allocate : detail::FileOps {
    int fail_first = 0;  // calls that fail before one goes through
    int error = EINTR;
    int calls = 0;
    off_t size = 0;
    int allocate(int fd, off_t n) override {
      ++calls;
      size = n;
      if (calls <= fail_first) {
        errno = error;
        return -1;
      }
      return detail::FileOps::allocate(fd, n);
    }
  };
  const std::vector<std::uint8_t> expected = serialize(store);
  for (int error : {EINTR, EOPNOTSUPP, ENOSYS, EINVAL}) {
    CAPTURE(error);
    const std::string dir = fresh_dir("allocate");
    const std::string dest = dir + "/model.ptd";
    Allocate ops;
    ops.error = error;
    ops.fail_first = error == EINTR ? 3 : 1;
    Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(ops.calls == (error == EINTR ? 4 : 1));  // EINTR: retried; unsupported: given up at once
    CHECK(ops.size == static_cast<off_t>(expected.size()));
    CHECK(read_file(dest) == expected);
    CHECK(others(dir, {"model.ptd"}).empty());
  }
}

/// RLIMIT_FSIZE of 1 MiB (soft; the hard limit unlimited).
bool set_fsize_limit() {
  struct rlimit lim {};
  lim.rlim_cur = 1 << 20;
  lim.rlim_max = RLIM_INFINITY;
  return ::setrlimit(RLIMIT_FSIZE, &lim) == 0;
}

/// A child process and the read end of a pipe from it.
struct Child {
  pid_t pid = 0;
  int read_fd = -1;
};

/// Forks a child that runs `body(write_fd)` (the pipe's write end) and
/// exits with the status it returns; the parent keeps the read end.
template <class Body>
Child fork_with_pipe(Body body) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    ::_exit(body(fds[1]));
  }
  ::close(fds[1]);
  return Child{pid, fds[0]};
}

/// Everything `child` wrote to its pipe, once it has exited, and its wait
/// status.
std::pair<std::string, int> output_of(const Child& child) {
  std::string msg;
  char buf[512];
  ssize_t n;
  while ((n = ::read(child.read_fd, buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
  ::close(child.read_fd);
  int status = 0;
  REQUIRE(::waitpid(child.pid, &status, 0) == child.pid);
  return {msg, status};
}

/// What `write` (returning a BuildError) gives in a child process, which
/// first sets a file size limit of 1 MiB (`limit_first`) and SIGXFSZ to
/// `sigxfsz`: "<error code>|<message>", and the child's wait status. In a
/// child so that the limit and the signal's disposition stay there.
template <class Write>
std::pair<std::string, int> in_child_with_fsize_limit(bool limit_first, void (*sigxfsz)(int), Write write) {
  const Child child = fork_with_pipe([&](int fd) {
    ::signal(SIGXFSZ, sigxfsz);
    if (limit_first && !set_fsize_limit()) return 3;
    const BuildError e = write();
    const std::string msg = std::to_string(static_cast<int>(e.code)) + "|" + e.message;
    (void)!::write(fd, msg.data(), msg.size());
    return 0;
  });
  return output_of(child);
}

/// in_child_with_fsize_limit's output for a write of `size` bytes to `dest`
/// refused under its 1 MiB limit, before anything is made.
std::string fsize_refusal(const std::string& dest, std::uint64_t size) {
  return std::to_string(static_cast<int>(Error::IoError)) + "|cannot write '" + dest + "': the file would be " +
         std::to_string(size) +
         " bytes, more than this process's file size limit (1048576 bytes: RLIMIT_FSIZE, ulimit -f)";
}

TEST_CASE("a real write error mid-file (file size limit): destination untouched, no temporary file") {
  // RLIMIT_FSIZE makes the kernel fail the write with EFBIG, for root too,
  // on any file system. In a child, so the limit and the ignored SIGXFSZ
  // stay there. The limit is set once the temporary file exists: set
  // before, the write is refused up front (the next test).
  std::vector<std::vector<std::uint8_t>> data{pattern(3 << 20, 1), pattern(2 << 20, 2)};
  const NamedDataStore store = store_over(data);
  for (bool reserve : {true, false}) {
    CAPTURE(reserve);
    const std::string dir = fresh_dir("fsize");
    const std::string dest = dir + "/model.ptd";
    const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    // Without reserve, the error comes from writev itself.
    class LimitAfterCreate final : public detail::FileOps {
     public:
      bool reserve_ = true;
      int make_temp(char* t, mode_t m) override {
        const int fd = FileOps::make_temp(t, m);
        if (fd >= 0 && !set_fsize_limit()) ::_exit(3);
        return fd;
      }
      int reserve(int fd, off_t size) override { return reserve_ ? FileOps::reserve(fd, size) : 0; }
    } ops;
    ops.reserve_ = reserve;
    const std::pair<std::string, int> out = in_child_with_fsize_limit(false, SIG_IGN, [&] {
      return detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops).build_error();
    });
    const std::string& msg = out.first;  // (not a structured binding: CAPTURE's lambda takes them by reference)
    const int status = out.second;
    CAPTURE(status);
    REQUIRE(WIFEXITED(status));
    INFO(msg);
    CHECK(msg.rfind(std::to_string(static_cast<int>(Error::IoError)) + "|cannot write '" + dest + "': ", 0) == 0);
    // With reserve, fallocate meets the limit first (on a file system without
    // fallocate the write does).
    CHECK((contains(msg, "write to temporary file") || (reserve && contains(msg, "reserve "))));
    CHECK(contains(msg, std::strerror(EFBIG)));
    CHECK(read_file(dest) == old_bytes);
    CHECK(others(dir, {"model.ptd"}).empty());
  }
}

TEST_CASE("a file past the process's file size limit is refused before anything is made") {
  // Past RLIMIT_FSIZE the kernel sends SIGXFSZ, whose default action ends
  // the process (a review helper's finding: a write of 3 MiB under a 1 MiB
  // limit killed its child, leaving the temporary file). In a child, with
  // SIGXFSZ left as it is: refused, alive, nothing made.
  std::vector<std::vector<std::uint8_t>> data{pattern(3 << 20, 1)};
  const NamedDataStore store = store_over(data);
  const Expected<std::vector<std::uint8_t>> bytes = serialize_ptd(store);
  REQUIRE(bytes.ok());
  for (const bool whole_file : {false, true}) {
    CAPTURE(whole_file);
    const std::string dir = fresh_dir("fsize_before");
    const std::string dest = dir + "/model.ptd";
    const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    const std::pair<std::string, int> out = in_child_with_fsize_limit(true, SIG_DFL, [&] {
      return whole_file ? detail::write_whole_file(dest, std::string(2 << 20, 'x'), true).build_error()
                        : write_ptd_file(store, dest).build_error();
    });
    const std::string& msg = out.first;
    const int status = out.second;
    CAPTURE(status);
    REQUIRE(WIFEXITED(status));  // not ended by SIGXFSZ
    CHECK(WEXITSTATUS(status) == 0);
    const std::uint64_t size = whole_file ? (2 << 20) : bytes->size();
    CHECK(msg == fsize_refusal(dest, size));
    CHECK(read_file(dest) == old_bytes);
    CHECK(others(dir, {"model.ptd"}).empty());
  }
}

TEST_CASE("a file of exactly the process's file size limit is written: only a larger one is refused") {
  // 1 MiB under a 1 MiB RLIMIT_FSIZE, set before the write.
  for (const bool exact : {true, false}) {
    CAPTURE(exact);
    const std::string dir = fresh_dir("fsize_exact");
    const std::string dest = dir + "/model.ptd";
    const std::pair<std::string, int> out = in_child_with_fsize_limit(true, SIG_DFL, [&] {
      return detail::write_whole_file(dest, std::string(exact ? (1 << 20) : (1 << 20) + 1, 'x'), true)
          .build_error();
    });
    const std::string& msg = out.first;
    const int status = out.second;
    CAPTURE(status);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    if (exact) {
      CHECK(msg == std::to_string(static_cast<int>(Error::Ok)) + "|");
      CHECK(read_file(dest).size() == std::size_t{1} << 20);
      CHECK(others(dir, {"model.ptd"}).empty());
    } else {
      CHECK(msg == fsize_refusal(dest, (1 << 20) + 1));
      CHECK(others(dir, {}).empty());
    }
  }
}

TEST_CASE("the size reserved is the file's, up to off_t's largest (2^63 - 1); 2^63 is refused, EFBIG") {
  // The reservation recorded, not made (no file system reserves 2^63 - 1
  // bytes): 0 bytes reserve nothing, 1 byte and off_t's largest are asked
  // for whole; one byte more is refused before anything is made.
  class Reserving final : public detail::FileOps {
   public:
    std::vector<std::int64_t> reserved;
    int reserve(int, off_t size) override {
      reserved.push_back(static_cast<std::int64_t>(size));
      return 0;
    }
  };
  struct rlimit fsize {};
  REQUIRE(::getrlimit(RLIMIT_FSIZE, &fsize) == 0);
  if (fsize.rlim_cur != RLIM_INFINITY) {
    MESSAGE("RLIMIT_FSIZE is set: a file of 2^63 - 1 bytes is refused for it; not run");
    return;
  }
  const std::string dir = fresh_dir("reserve_size");
  const std::uint64_t largest = static_cast<std::uint64_t>((std::numeric_limits<off_t>::max)());
  for (const std::uint64_t size : {std::uint64_t{0}, std::uint64_t{1}, largest}) {
    CAPTURE(size);
    Reserving ops;
    detail::AtomicFile file(ops);
    const Expected<void> o = file.open(dir + "/big.ptd", size);
    REQUIRE_MESSAGE(o.ok(), o.message());
    const std::vector<std::int64_t> want =
        size == 0 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{static_cast<std::int64_t>(size)};
    CHECK(ops.reserved == want);
  }
  Reserving ops;
  detail::AtomicFile file(ops);
  const Expected<void> o = file.open(dir + "/big.ptd", largest + 1);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error() == Error::IoError);
  if (sizeof(off_t) == 8)
    CHECK(o.message() ==
          "cannot write '" + dir + "/big.ptd': the file would be 9223372036854775808 bytes, more than 2^63 - 1");
  CHECK(file.failure_errno() == EFBIG);
  CHECK(ops.reserved.empty());
  CHECK(others(dir, {}).empty());
}

TEST_CASE("unwritable destinations: Error::IoError with the path, the operation and the reason") {
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("paths");
  const auto fails = [&](const std::string& path, const std::string& what) {
    CAPTURE(path);
    Expected<WriteStats> r = write_ptd_file(store, path);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Error::IoError);
    INFO(r.message());
    CHECK(contains(r.message(), "cannot write '" + path + "': "));
    CHECK(contains(r.message(), what));
  };

  SUBCASE("a directory that does not exist") {
    fails(dir + "/no/such/dir/model.ptd", "create a temporary file in directory '" + dir +
                                              "/no/such/dir' failed: " + std::strerror(ENOENT));
    CHECK(others(dir, {}).empty());
  }
  SUBCASE("a directory that does not exist, in an existing one") {
    fails(dir + "/missing/model.ptd",
          "create a temporary file in directory '" + dir + "/missing' failed: " + std::strerror(ENOENT));
    CHECK(others(dir, {}).empty());
  }
  SUBCASE("a path under a regular file") {
    REQUIRE(wdedup_test::write_file(dir + "/file", {1}));
    fails(dir + "/file/model.ptd", std::string("stat failed: ") + std::strerror(ENOTDIR));
    CHECK(read_file(dir + "/file") == std::vector<std::uint8_t>{1});
    CHECK(others(dir, {"file"}).empty());
  }
  SUBCASE("a file system that refuses new files, even for root (/proc)") {
    fails("/proc/wdedup_crash_safety_test.ptd", "create a temporary file in directory '/proc' failed: ");
  }
  SUBCASE("an existing directory, and a FIFO, are never replaced") {
    REQUIRE(::mkdir((dir + "/sub").c_str(), 0755) == 0);
    const char* const never = " (a directory, device, FIFO or socket is never replaced)";
    fails(dir + "/sub", std::string("it exists and is not a regular file but a directory") + never);
    REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0644) == 0);
    fails(dir + "/fifo", std::string("it exists and is not a regular file but a FIFO") + never);
    fails("/dev/null", std::string("it exists and is not a regular file but a character device") + never);
    struct stat st {};
    REQUIRE(::lstat((dir + "/fifo").c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    // The writer's own errno for that refusal is EINVAL, as can_create_file's.
    for (const std::string& path : {dir + "/sub", dir + "/fifo", std::string("/dev/null")}) {
      CAPTURE(path);
      CHECK(open_refused_errno(path) == EINVAL);
    }
    CHECK(others(dir, {"sub", "fifo"}).empty());
  }
  SUBCASE("a path ending in a slash") {
    fails(dir + "/", "not a regular file but a directory");
    // Under a missing directory too: it names a directory, not a missing parent.
    Expected<WriteStats> r = write_ptd_file(store, dir + "/missing/");
    REQUIRE_FALSE(r.ok());
    CHECK(r.error() == Error::IoError);
    CHECK(r.message() == "cannot write '" + dir + "/missing/': the path names a directory, not a file");
    // So do a last part "." or "..", whose directory is missing as well:
    // refused as directories, with EISDIR, not as a missing parent.
    for (const char* last : {".", ".."}) {
      const std::string path = dir + "/missing/" + last;
      CAPTURE(path);
      detail::AtomicFile file;
      const Expected<void> o = file.open(path, 0);
      REQUIRE_FALSE(o.ok());
      CHECK(o.error() == Error::IoError);
      CHECK(o.message() == "cannot write '" + path + "': the path names a directory, not a file");
      CHECK(file.failure_errno() == EISDIR);
    }
    CHECK(others(dir, {}).empty());
  }
  SUBCASE("a read-only directory (permissions are not enforced for root)") {
    const std::string ro = dir + "/ro";
    REQUIRE(::mkdir(ro.c_str(), 0555) == 0);
    if (::geteuid() == 0) {
      MESSAGE("running as root: read-only directories are writable, covered by /proc and the injected faults");
    } else {
      fails(ro + "/model.ptd", std::strerror(EACCES));
      CHECK(others(ro, {}).empty());
    }
    ::chmod(ro.c_str(), 0755);
  }
}

TEST_CASE("no path, or one with a NUL byte: Error::InvalidArgument, and nothing is created") {
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("nul_paths");
  Expected<WriteStats> r = write_ptd_file(store, "");
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "cannot write '': the path is empty");
  // The system calls would see the path up to the NUL: "DIR/out" would be
  // written, and reported written as the whole path.
  using namespace std::string_literals;
  const std::string nul = dir + "/out\0/model.ptd"s;
  r = write_ptd_file(store, nul);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "cannot write '" + dir + "/out\\x00/model.ptd': the path contains a NUL byte at offset " +
                           std::to_string(dir.size() + 4));
  // At offset 0 too, where the system calls would see an empty path.
  r = write_ptd_file(store, "\0model.ptd"s);
  CHECK(r.error() == Error::InvalidArgument);
  CHECK(r.message() == "cannot write '\\x00model.ptd': the path contains a NUL byte at offset 0");
  // Both refusals' errno (AtomicFile::failure_errno) is EINVAL.
  for (const std::string& path : {std::string(), nul}) {
    CAPTURE(path);
    CHECK(open_refused_errno(path) == EINVAL);
  }
  CHECK(others(dir, {}).empty());
}

TEST_CASE("can_create_file: what a tool checks before the work, with the reason in errno") {
  using wdedup::detail::can_create_file;
  const std::string dir = fresh_dir("can_create");
  REQUIRE(wdedup_test::write_file(dir + "/a_file", {1}));
  REQUIRE(::mkdir((dir + "/a_dir").c_str(), 0755) == 0);
  CHECK(can_create_file(dir + "/new.ptd"));
  CHECK(can_create_file(dir + "/a_file"));  // replaced, as the writer does
  // It tried by creating a file of its own, and left nothing behind.
  CHECK(others(dir, {"a_file", "a_dir"}).empty());
  // A link to nothing is refused, as the writer refuses it; one to a file is fine.
  REQUIRE(::symlink("nothing_there", (dir + "/dangling").c_str()) == 0);
  REQUIRE(::symlink("a_file", (dir + "/to_file").c_str()) == 0);
  CHECK(can_create_file(dir + "/to_file"));
  const Expected<void> dangling = detail::write_whole_file(dir + "/dangling", "x", false);
  CHECK(dangling.message() == "cannot write '" + dir +
                                  "/dangling': resolve symbolic link (to 'nothing_there') failed: " +
                                  std::strerror(ENOENT));
  // A target of one character is named as well.
  REQUIRE(::symlink("n", (dir + "/dangling_n").c_str()) == 0);
  CHECK(detail::write_whole_file(dir + "/dangling_n", "x", false).message() ==
        "cannot write '" + dir + "/dangling_n': resolve symbolic link (to 'n') failed: " + std::strerror(ENOENT));
  const std::pair<std::string, int> refused[] = {
      {dir + "/dangling", ENOENT},
      {"", EISDIR},
      {dir + "/", EISDIR},
      {dir + "/missing/", EISDIR},  // a directory's name, whether or not it exists
      {dir + "/a_dir", EISDIR},
      {dir + "/missing/new.ptd", ENOENT},
      {dir + "/a_file/new.ptd", ENOTDIR},
      {"/dev/null", EINVAL},  // a device: not a file to replace, nor a directory
  };
  for (const auto& r : refused) {
    const std::string& path = r.first;  // (clang cannot capture a structured binding)
    CAPTURE(path);
    errno = 0;
    CHECK_FALSE(can_create_file(path));
    CHECK(errno == r.second);
  }
  // The reason in words, as the tools give it: the writer's for a device,
  // what a name ending in '/' or a link to nothing is, else the errno's.
  using detail::cannot_create_reason;
  CHECK(cannot_create_reason("/dev/null", EINVAL) ==
        "it exists and is not a regular file but a character device (a directory, device, FIFO or socket is never "
        "replaced)");
  CHECK(cannot_create_reason(dir + "/missing/", EISDIR) == "the name ends in '/', which names a directory, not a file");
  CHECK(cannot_create_reason(dir + "/a_dir/", EISDIR) == std::strerror(EISDIR));  // one is there
  CHECK(cannot_create_reason(dir + "/a_dir", EISDIR) == std::strerror(EISDIR));
  CHECK(cannot_create_reason(dir + "/dangling", ENOENT) == "a symbolic link to nothing_there, which does not exist");
  // A file whose directory is not there: that is what is missing (a user
  // trial read "No such file or directory" as the file having to exist).
  CHECK(cannot_create_reason(dir + "/missing/new.ptd", ENOENT) == "its directory " + dir + "/missing does not exist");
  CHECK(cannot_create_reason(dir + "/missing/deeper/new.ptd", ENOENT) ==
        "its directory " + dir + "/missing/deeper does not exist");
  // Its directory is there: what failed is making a file in it (as in /proc, below).
  CHECK(cannot_create_reason(dir + "/a_dir/new.ptd", ENOENT) ==
        "no file can be created in its directory " + dir + "/a_dir (" + std::strerror(ENOENT) + ")");
  CHECK(cannot_create_reason(dir + "/a_file/new.ptd", ENOTDIR) == std::strerror(ENOTDIR));
  // ENOENT where the directory cannot be looked at for another reason (a
  // regular file in its path: ENOTDIR) is not "its directory does not exist".
  CHECK(cannot_create_reason(dir + "/a_file/sub/new.ptd", ENOENT) == std::strerror(ENOENT));
  REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0600) == 0);
  errno = 0;
  CHECK_FALSE(can_create_file(dir + "/fifo"));
  CHECK(cannot_create_reason(dir + "/fifo", errno) ==
        "it exists and is not a regular file but a FIFO (a directory, device, FIFO or socket is never replaced)");
  // The writer itself says the same.
  CHECK(detail::write_whole_file(dir + "/fifo", "x", false).message() ==
        "cannot write '" + dir + "/fifo': " + cannot_create_reason(dir + "/fifo", EINVAL));
  REQUIRE(::unlink((dir + "/fifo").c_str()) == 0);
  // Where the mode bits would let root through but no file can be made
  // (/proc: its directory is 0555, and root may write there by mode), the
  // attempt itself says no, for root too.
  struct stat st {};
  if (::stat("/proc/self", &st) == 0) {
    errno = 0;
    CHECK_FALSE(can_create_file("/proc/wdedup-test.ptd"));
    CHECK(errno == ENOENT);  // (procfs, for root and not: no new name there)
    // An existing file there, which cannot be replaced: the reason names
    // the directory, not the file ("No such file or directory" for
    // /proc/version, which exists, read as if it did not).
    errno = 0;
    CHECK_FALSE(can_create_file("/proc/version"));
    const int proc_errno = errno;
    CHECK(proc_errno == ENOENT);
    CHECK(cannot_create_reason("/proc/version", proc_errno) ==
          "no file can be created in its directory /proc (" + std::string(std::strerror(ENOENT)) + ")");
    // A symbolic link is followed as the writer follows it: the file goes
    // beside what it points at, not beside the link. Into /proc from a
    // directory where files can be made: no, with the writer's errno.
    REQUIRE(::symlink("/proc/version", (dir + "/to_proc").c_str()) == 0);
    errno = 0;
    CHECK_FALSE(can_create_file(dir + "/to_proc"));
    const int probe_errno = errno;
    // (A link to a file that is there: not "a symbolic link to /proc/version,
    // which does not exist".)
    CHECK(cannot_create_reason(dir + "/to_proc", probe_errno) ==
          "no file can be created in its directory /proc (" + std::string(std::strerror(ENOENT)) + ")");
    Expected<void> w = detail::write_whole_file(dir + "/to_proc", "x", false);
    CHECK_FALSE(w.ok());
    CHECK(w.message() == "cannot write '" + dir + "/to_proc': create a temporary file in directory '/proc' failed: " +
                             std::strerror(probe_errno));
    // From /proc, where no file can be made, into this directory: yes.
    const int fd = ::open((dir + "/a_file").c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    const std::string via_proc = "/proc/self/fd/" + std::to_string(fd);
    CHECK(can_create_file(via_proc));
    CHECK(detail::write_whole_file(via_proc, "y", false).ok());
    ::close(fd);
    CHECK(read_file(dir + "/a_file") == std::vector<std::uint8_t>{'y'});
    CHECK(others(dir, {"a_file", "a_dir", "dangling", "dangling_n", "to_file", "to_proc"}).empty());
  }
  // A link another user owns in a sticky, world-writable directory (as
  // /tmp): the writer does not follow it, so neither does the check.
  if (::geteuid() != 0) {
    MESSAGE("not root: no link of another user is planted");
    return;
  }
  const std::string sticky = dir + "/tmp";
  REQUIRE(::mkdir(sticky.c_str(), 0777) == 0);
  REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
  REQUIRE(::symlink((dir + "/a_file").c_str(), (sticky + "/planted").c_str()) == 0);
  REQUIRE(::lchown((sticky + "/planted").c_str(), 12345, 12345) == 0);
  errno = 0;
  CHECK_FALSE(can_create_file(sticky + "/planted"));
  CHECK(errno == EACCES);
  // Such a link to nothing as well: the writer refuses it as a link it
  // does not follow (EACCES) before it finds nothing there, and so does the
  // check, not "No such file or directory".
  REQUIRE(::symlink("nothing_there", (sticky + "/planted_dangling").c_str()) == 0);
  REQUIRE(::lchown((sticky + "/planted_dangling").c_str(), 12345, 12345) == 0);
  const std::string not_followed =
      "it is a symbolic link owned by another user (uid 12345) in a sticky, world-writable directory: not followed, "
      "as the kernel's protected_symlinks would not follow it";
  detail::AtomicFile file;
  const Expected<void> o = file.open(sticky + "/planted_dangling", 0);
  CHECK(o.message() == "cannot write '" + sticky + "/planted_dangling': " + not_followed);
  CHECK(file.failure_errno() == EACCES);
  errno = 0;
  CHECK_FALSE(can_create_file(sticky + "/planted_dangling"));
  CHECK(errno == EACCES);
  // The tools' reason for either is the writer's, not "Permission denied".
  CHECK(detail::cannot_create_reason(sticky + "/planted", EACCES) == not_followed);
  CHECK(detail::cannot_create_reason(sticky + "/planted_dangling", EACCES) == not_followed);
  CHECK(others(sticky, {"planted", "planted_dangling"}).empty());
}

namespace {

/// Sets or clears chattr flags (FS_IMMUTABLE_FL, FS_APPEND_FL) on `path`;
/// false where the file system or the process cannot (not root: EPERM).
bool set_inode_flags(const std::string& path, int flags, bool on) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  int now = 0;
  bool ok = ::ioctl(fd, FS_IOC_GETFLAGS, &now) == 0;
  if (ok) {
    now = on ? now | flags : now & ~flags;
    ok = ::ioctl(fd, FS_IOC_SETFLAGS, &now) == 0;
  }
  ::close(fd);
  return ok;
}

/// Clears the flags again when the test leaves, so its directory can be
/// removed on the next run whatever happened in this one.
struct FlagsSet {
  std::string path;
  int flags;
  bool set;
  FlagsSet(std::string p, int f) : path(std::move(p)), flags(f), set(set_inode_flags(path, flags, true)) {}
  ~FlagsSet() {
    if (set) set_inode_flags(path, flags, false);
  }
  FlagsSet(const FlagsSet&) = delete;
  FlagsSet& operator=(const FlagsSet&) = delete;
};

}  // namespace

TEST_CASE("a destination the rename could not replace is refused before anything is made, with the rule") {
  // Found only at the rename, these failed after every byte was written:
  // the demo did all its work, then lost its report (a review). Now the
  // writer refuses them first, and can_create_file (a tool's check before
  // its work) with EPERM and the same words.
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("unreplaceable");
  auto refused = [&](const std::string& path, const std::string& why) {
    CAPTURE(path);
    Expected<WriteStats> r = write_ptd_file(store, path);
    CHECK(r.error() == Error::IoError);
    CHECK(r.message() == "cannot write '" + path + "': " + why);
    errno = 0;
    CHECK_FALSE(detail::can_create_file(path));
    CHECK(errno == EPERM);
    CHECK(detail::cannot_create_reason(path, EPERM) == why);
  };
  if (::geteuid() != 0) {
    MESSAGE("not root: chattr flags and another user's file in a sticky directory not tried");
    return;
  }

  SUBCASE("an immutable or append-only file, and an append-only directory (chattr)") {
    const std::string imm = dir + "/immutable.ptd", app = dir + "/append.ptd", sub = dir + "/append_dir";
    REQUIRE(wdedup_test::write_file(imm, {7}));
    REQUIRE(wdedup_test::write_file(app, {8}));
    REQUIRE(::mkdir(sub.c_str(), 0755) == 0);
    REQUIRE(wdedup_test::write_file(sub + "/old.ptd", {9}));
    const FlagsSet i(imm, FS_IMMUTABLE_FL), a(app, FS_APPEND_FL), d(sub, FS_APPEND_FL);
    if (!i.set || !a.set || !d.set) {
      MESSAGE("this file system keeps no chattr flags: not tried");
      return;
    }
    refused(imm, "it is immutable (chattr +i), so it cannot be replaced");
    refused(app, "it is append-only (chattr +a), so it cannot be replaced");
    // In an append-only directory a new name can be made but none taken
    // out: the temporary file could be written, never renamed into place.
    const std::string in_dir = "its directory '" + sub +
                               "' is append-only (chattr +a): no file written there can be renamed into place";
    refused(sub + "/old.ptd", in_dir);
    refused(sub + "/new.ptd", in_dir);
    // The directory named as given, as the writer names it, whether the
    // file is there or not (the reason named an existing file's directory
    // by its real path, '<dir>/append_dir' here, a new one's as given).
    const std::string spelt = dir + "/./append_dir";
    const std::string in_spelt = "its directory '" + spelt +
                                 "' is append-only (chattr +a): no file written there can be renamed into place";
    refused(spelt + "/old.ptd", in_spelt);
    refused(spelt + "/new.ptd", in_spelt);
    CHECK(read_file(imm) == std::vector<std::uint8_t>{7});
    CHECK(read_file(app) == std::vector<std::uint8_t>{8});
    CHECK(read_file(sub + "/old.ptd") == std::vector<std::uint8_t>{9});
    CHECK(others(dir, {"immutable.ptd", "append.ptd", "append_dir"}).empty());
    CHECK(others(sub, {"old.ptd"}).empty());
    // Through a symbolic link, the rule is looked for where the writer
    // writes: beside what the link points at.
    REQUIRE(::symlink("immutable.ptd", (dir + "/to_immutable").c_str()) == 0);
    refused(dir + "/to_immutable", "it is immutable (chattr +i), so it cannot be replaced");
  }

  SUBCASE("another user's file in a sticky directory, written as a third user") {
    // In /tmp: nobody must reach it (see the set-ID test).
    char tmpl[] = "/tmp/wdedup-sticky-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    const std::string sticky = tmpl;
    REQUIRE(::chmod(sticky.c_str(), 01777) == 0);  // root's, as /tmp
    const std::string theirs = sticky + "/theirs.ptd", mine = sticky + "/mine.ptd";
    REQUIRE(wdedup_test::write_file(theirs, {1}));
    // (Mode first: without CAP_FOWNER root may not chmod another's file.)
    REQUIRE(::chmod(theirs.c_str(), 0666) == 0);  // writable by all: the rule is the directory's
    REQUIRE(::chown(theirs.c_str(), 12345, 12345) == 0);
    REQUIRE(wdedup_test::write_file(mine, {2}));
    REQUIRE(::chown(mine.c_str(), 65534, 65534) == 0);
    const std::string closed = sticky + "/closed";  // root's, 0755: no file of the third user's there
    REQUIRE(::mkdir(closed.c_str(), 0755) == 0);
    const std::string why = "it belongs to another user (uid 12345) in a sticky directory '" + sticky +
                            "' (mode +t, like /tmp), where only the file's owner, the directory's owner or a process "
                            "with CAP_FOWNER may replace it";
    const Child child = fork_with_pipe([&](int fd) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) return 3;
      std::string out;
      Expected<WriteStats> r = write_ptd_file(store, theirs);
      out += std::to_string(static_cast<int>(r.error())) + "|" + r.message() + "\n";
      errno = 0;
      const bool can = detail::can_create_file(theirs);
      const int e = errno;  // (before anything else that may set it)
      out += std::to_string(can) + "|" + std::to_string(e) + "|" + detail::cannot_create_reason(theirs, e) + "\n";
      errno = 0;
      const bool can_closed = detail::can_create_file(closed + "/new.ptd");
      const int e_closed = errno;
      out += std::to_string(can_closed) + "|" + std::to_string(e_closed) + "|" +
             detail::cannot_create_reason(closed + "/new.ptd", e_closed) + "\n";
      // Its own file there, and a new one: written.
      out += std::to_string(write_ptd_file(store, mine).ok()) + std::to_string(detail::can_create_file(mine)) +
             std::to_string(write_ptd_file(store, sticky + "/new.ptd").ok()) + "\n";
      (void)!::write(fd, out.data(), out.size());
      return 0;
    });
    const auto [msg, status] = output_of(child);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(msg == std::to_string(static_cast<int>(Error::IoError)) + "|cannot write '" + theirs + "': " + why + "\n" +
                     "0|" + std::to_string(EPERM) + "|" + why + "\n" + "0|" + std::to_string(EACCES) +
                     "|create a temporary file in directory '" + closed + "' failed: " + std::strerror(EACCES) +
                     "\n" + "111\n");
    CHECK(read_file(theirs) == std::vector<std::uint8_t>{1});
    CHECK(read_file(mine) == serialize(store));
    CHECK(others(sticky, {"theirs.ptd", "mine.ptd", "new.ptd", "closed"}).empty());
    CHECK(others(closed, {}).empty());
    // Root may replace it (it owns the directory, and has CAP_FOWNER, which
    // the writer also needs to give the file back to its owner with its
    // ACL: a container may drop it).
    if (detail::may_override_sticky()) {
      CHECK(write_ptd_file(store, theirs).ok());
      CHECK(read_file(theirs) == serialize(store));
    } else {
      MESSAGE("root without CAP_FOWNER here: its replacement of another user's file is not tried");
    }
    REQUIRE(std::system(("rm -rf '" + sticky + "'").c_str()) == 0);
  }
}

TEST_CASE("a sink that cannot write (/dev/full) fails with the system's reason") {
  class FdSink final : public ByteSink {
   public:
    explicit FdSink(int fd) : fd_(fd) {}
    Expected<void> write(const void* data, std::size_t size) override {
      const auto* p = static_cast<const char*>(data);
      while (size > 0) {
        const ssize_t w = ::write(fd_, p, size);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return Expected<void>(Error::IoError, std::string("write to /dev/full failed: ") + std::strerror(errno));
        p += w;
        size -= static_cast<std::size_t>(w);
      }
      return {};
    }

   private:
    int fd_;
  };
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  FdSink sink(fd);
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  Expected<WriteStats> r = write_ptd(store_over(data), sink);
  ::close(fd);
  CHECK(r.error() == Error::IoError);
  CHECK(contains(r.message(), std::string("write to /dev/full failed: ") + std::strerror(ENOSPC)));
  CHECK(contains(r.message(), "writing .ptd bytes [0, "));
}

TEST_CASE("replacing a file keeps its mode; a symbolic link keeps pointing at the new file") {
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::vector<std::uint8_t> want = serialize(store);
  const std::string dir = fresh_dir("modes");
  const std::string dest = dir + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest, {9}));
  REQUIRE(::chmod(dest.c_str(), 0640) == 0);
  REQUIRE(write_ptd_file(store, dest).ok());
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(read_file(dest) == want);

  const std::string fresh = dir + "/fresh.ptd";
  const mode_t old_mask = ::umask(022);
  REQUIRE(write_ptd_file(store, fresh).ok());
  ::umask(old_mask);
  REQUIRE(::stat(fresh.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0644);  // what a new file gets, not a temporary file's 0600
  const std::string private_file = dir + "/private.ptd";
  ::umask(077);
  REQUIRE(write_ptd_file(store, private_file).ok());
  ::umask(old_mask);
  REQUIRE(::stat(private_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(read_file(private_file) == want);
  // A replacement keeps the replaced file's mode whatever the umask.
  ::umask(077);
  REQUIRE(write_ptd_file(store, dest).ok());
  ::umask(old_mask);
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);

  const std::string target = dir + "/target.ptd", link = dir + "/link.ptd";
  REQUIRE(wdedup_test::write_file(target, {7}));
  REQUIRE(::symlink("target.ptd", link.c_str()) == 0);
  REQUIRE(write_ptd_file(store, link).ok());
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(read_file(target) == want);
  CHECK(others(dir, {"model.ptd", "fresh.ptd", "private.ptd", "target.ptd", "link.ptd"}).empty());
}

TEST_CASE("while an existing file is replaced, its temporary file is its owner's alone, whatever the umask") {
  // The replaced file's mode is given at the commit; until then the new
  // bytes are 0600, not what the umask lets a new file be (0644 here): a
  // private file's next version is not readable by others while written.
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("temporary_mode");
  const std::string dest = dir + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest, {9}));
  REQUIRE(::chmod(dest.c_str(), 0600) == 0);
  struct ModeAtWrite final : detail::FileOps {
    mode_t mode = 0;  ///< the temporary file's mode at its first write
    ssize_t writev(int fd, const struct iovec* iov, int count) override {
      struct stat st {};
      if (mode == 0 && ::fstat(fd, &st) == 0) mode = st.st_mode & 07777;
      return FileOps::writev(fd, iov, count);
    }
  } ops;
  const mode_t old_mask = ::umask(022);
  Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
  ::umask(old_mask);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(ops.mode == 0600);
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(read_file(dest) == serialize(store));
}

TEST_CASE("a new file gets its directory's default ACL, as any new file does") {
  // A default ACL replaces the umask for files created in its directory:
  // here user rw, group rw, others nothing, under a umask of 077 that alone
  // would give 0600. (Set as the raw extended attribute: version 2, then
  // tag, permissions and id of each entry, as setfacl writes it.)
  std::vector<std::vector<std::uint8_t>> data{pattern(100, 3)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("default_acl");
  std::vector<std::uint8_t> acl;
  auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) acl.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  put(2, 4);
  for (const auto& [tag, perm] : {std::pair<int, int>{0x01, 6}, {0x04, 6}, {0x20, 0}}) {  // user, group, other
    put(static_cast<std::uint32_t>(tag), 2);
    put(static_cast<std::uint32_t>(perm), 2);
    put(0xFFFFFFFFu, 4);
  }
  if (::setxattr(dir.c_str(), "system.posix_acl_default", acl.data(), acl.size(), 0) != 0) {
    MESSAGE("no POSIX ACLs on this file system (" << std::strerror(errno) << "): skipped");
    return;
  }
  const mode_t old_mask = ::umask(077);
  const Expected<WriteStats> r = write_ptd_file(store, dir + "/model.ptd");
  ::umask(old_mask);
  REQUIRE(r.ok());
  struct stat st {};
  REQUIRE(::stat((dir + "/model.ptd").c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0660);
  CHECK(others(dir, {"model.ptd"}).empty());
}

TEST_CASE("replacing a file keeps its access ACL, and adds none its directory's default would give") {
  // An ACL's mask is the mode's group bits: the mode alone (0660 here, with
  // the owning group at r-- and user 1234 at rw-) would give the group
  // write and take user 1234's access away. And a replacement must not
  // take an ACL from a default set on the directory after the old file was
  // made (user 1234, "other" to the old 0640 file, would read the new one).
  std::vector<std::vector<std::uint8_t>> data{pattern(100, 5)};
  const NamedDataStore store = store_over(data);
  const auto make_acl = [](std::initializer_list<std::pair<int, std::uint32_t>> entries) {
    std::vector<std::uint8_t> acl;
    auto put = [&](std::uint32_t v, int bytes) {
      for (int i = 0; i < bytes; ++i) acl.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
    };
    put(2, 4);
    for (const auto& [tag, perm] : entries) {
      put(static_cast<std::uint32_t>(tag), 2);
      put(static_cast<std::uint32_t>(perm), 2);
      put(tag == 0x02 ? 1234u : 0xFFFFFFFFu, 4);  // ACL_USER names uid 1234
    }
    return acl;
  };
  // user_obj rw, user 1234 rw, group_obj r, mask rw, other none
  const std::vector<std::uint8_t> acl = make_acl({{0x01, 6}, {0x02, 6}, {0x04, 4}, {0x10, 6}, {0x20, 0}});
  const auto read_acl = [](const std::string& path) {
    std::vector<std::uint8_t> buf(256);
    const ssize_t n = ::getxattr(path.c_str(), "system.posix_acl_access", buf.data(), buf.size());
    buf.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
    return buf;
  };

  const std::string dir = fresh_dir("access_acl");
  const std::string dest = dir + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest, {9}));
  if (::setxattr(dest.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) != 0) {
    MESSAGE("no POSIX ACLs on this file system (" << std::strerror(errno) << "): skipped");
    return;
  }
  const std::vector<std::uint8_t> before = read_acl(dest);
  REQUIRE(!before.empty());
  REQUIRE(write_ptd_file(store, dest).ok());
  CHECK(read_acl(dest) == before);
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0660);
  CHECK(read_file(dest) == serialize(store));

  const std::string dir2 = fresh_dir("access_acl_default");
  const std::string dest2 = dir2 + "/model.ptd";
  REQUIRE(wdedup_test::write_file(dest2, {9}));
  REQUIRE(::chmod(dest2.c_str(), 0640) == 0);
  REQUIRE(::setxattr(dir2.c_str(), "system.posix_acl_default", acl.data(), acl.size(), 0) == 0);
  REQUIRE(read_acl(dest2).empty());
  REQUIRE(write_ptd_file(store, dest2).ok());
  CHECK(read_acl(dest2).empty());
  REQUIRE(::stat(dest2.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);
  CHECK(others(dir2, {"model.ptd"}).empty());
}

TEST_CASE("replacing a file keeps its owner and group; a link another user planted in /tmp is not followed") {
  // Both need root (to give files and links away); elsewhere they are not
  // checked, and say so.
  if (::geteuid() != 0) {
    MESSAGE("not root: owner, group and protected-symlink checks not run");
    return;
  }
  std::vector<std::vector<std::uint8_t>> data{pattern(1000, 1)};
  const NamedDataStore store = store_over(data);
  const std::vector<std::uint8_t> want = serialize(store);
  const std::string dir = fresh_dir("owners");
  const std::string dest = dir + "/shared.ptd";
  REQUIRE(wdedup_test::write_file(dest, {9}));
  REQUIRE(::chown(dest.c_str(), 12345, 23456) == 0);
  REQUIRE(::chmod(dest.c_str(), 06750) == 0);  // chown cleared them; set again
  REQUIRE(write_ptd_file(store, dest).ok());
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK(st.st_uid == 12345u);  // not root's
  CHECK(st.st_gid == 23456u);
  CHECK((st.st_mode & 07777) == 06750);  // kept with the owner and group they were for
  CHECK(read_file(dest) == want);

  // A sticky, world-writable directory (as /tmp): a link in it owned by
  // another user is refused, and what it points at is untouched.
  const std::string sticky = dir + "/tmp";
  REQUIRE(::mkdir(sticky.c_str(), 0777) == 0);
  REQUIRE(::chmod(sticky.c_str(), 01777) == 0);
  const std::string secret = dir + "/secret", planted = sticky + "/model.ptd";
  REQUIRE(wdedup_test::write_file(secret, {1, 2, 3}));
  REQUIRE(::symlink(secret.c_str(), planted.c_str()) == 0);
  REQUIRE(::lchown(planted.c_str(), 12345, 12345) == 0);
  Expected<WriteStats> r = write_ptd_file(store, planted);
  CHECK(r.error() == Error::IoError);
  CHECK(r.message() == "cannot write '" + planted +
                           "': it is a symbolic link owned by another user (uid 12345) in a sticky, world-writable "
                           "directory: not followed, as the kernel's protected_symlinks would not follow it");
  CHECK(read_file(secret) == std::vector<std::uint8_t>{1, 2, 3});
  // A link of one's own pointing at the planted one: refused too (each
  // link of the chain is checked, not only the first).
  const std::string mine = dir + "/mine.ptd";
  REQUIRE(::symlink("tmp/model.ptd", mine.c_str()) == 0);
  r = write_ptd_file(store, mine);
  CHECK(r.error() == Error::IoError);
  CHECK(r.message() == "cannot write '" + mine + "': it leads to '" + dir +
                           "/tmp/model.ptd', a symbolic link owned by another user (uid 12345) in a sticky, "
                           "world-writable directory: not followed, as the kernel's protected_symlinks would not "
                           "follow it");
  CHECK(read_file(secret) == std::vector<std::uint8_t>{1, 2, 3});
  // The same link owned by the directory's owner (here root, as this
  // process) is followed, as the kernel would.
  REQUIRE(::lchown(planted.c_str(), 0, 0) == 0);
  REQUIRE(write_ptd_file(store, mine).ok());
  CHECK(read_file(secret) == want);
  // With the directory another user's (uid 12345), a link of this
  // process's own user and one of the directory's owner are followed: the
  // kernel follows a link owned by the follower or by the directory's owner.
  REQUIRE(::chown(sticky.c_str(), 12345, 12345) == 0);
  for (const uid_t owner : {uid_t{0}, uid_t{12345}}) {
    CAPTURE(owner);
    REQUIRE(::lchown(planted.c_str(), owner, owner) == 0);
    REQUIRE(wdedup_test::write_file(secret, {1, 2, 3}));
    r = write_ptd_file(store, planted);
    REQUIRE_MESSAGE(r.ok(), r.message());
    CHECK(read_file(secret) == want);
  }

  // In a setgid directory a new file takes the directory's group: a
  // replaced one keeps its own all the same.
  const std::string sgid = dir + "/sgid";
  REQUIRE(::mkdir(sgid.c_str(), 0775) == 0);
  REQUIRE(::chown(sgid.c_str(), 0, 34567) == 0);
  REQUIRE(::chmod(sgid.c_str(), 02775) == 0);
  const std::string own_group = sgid + "/model.ptd";
  REQUIRE(wdedup_test::write_file(own_group, {5}));
  REQUIRE(::chown(own_group.c_str(), 0, 0) == 0);
  REQUIRE(::chmod(own_group.c_str(), 0640) == 0);
  REQUIRE(write_ptd_file(store, own_group).ok());
  REQUIRE(::stat(own_group.c_str(), &st) == 0);
  CHECK(st.st_gid == 0u);  // not the directory's 34567
  CHECK((st.st_mode & 07777) == 0640);
}

namespace {

/// FileOps for a child process that the parent kills: when the writer
/// reaches `point` it reports to the parent (the bytes written so far, 8
/// bytes down a pipe) and waits there to be killed; at Point::Report it
/// reports once the temporary file exists and carries on, so that a kill
/// after a random delay lands at an unknown point of the write.
class PausingOps final : public detail::FileOps {
 public:
  enum class Point { None, BeforeCreate, Created, Reserved, MidWrite, BeforePatch, BeforeRename, BeforeDirFsync, Report };
  PausingOps(Point point, int report_fd, std::uint64_t mid_bytes)
      : point_(point), fd_(report_fd), mid_bytes_(mid_bytes) {}

  int make_temp(char* t, mode_t m) override {
    if (point_ == Point::BeforeCreate) stop();
    const int fd = FileOps::make_temp(t, m);
    if (point_ == Point::Created) stop();
    if (point_ == Point::Report) report();
    return fd;
  }
  int reserve(int fd, off_t size) override {
    const int rc = FileOps::reserve(fd, size);
    if (point_ == Point::Reserved) stop();
    return rc;
  }
  ssize_t writev(int fd, const struct iovec* iov, int count) override {
    const ssize_t w = FileOps::writev(fd, iov, count);
    if (w > 0) written_ += static_cast<std::uint64_t>(w);
    if (point_ == Point::MidWrite && written_ >= mid_bytes_) stop();
    return w;
  }
  ssize_t pwrite(int fd, const void* p, std::size_t n, off_t off) override {
    if (point_ == Point::BeforePatch) stop();
    return FileOps::pwrite(fd, p, n, off);
  }
  int rename(const char* a, const char* b) override {
    if (point_ == Point::BeforeRename) stop();
    return FileOps::rename(a, b);
  }
  int fsync_directory(const char* d) override {
    if (point_ == Point::BeforeDirFsync) stop();
    return FileOps::fsync_directory(d);
  }

 private:
  void report() { (void)!::write(fd_, &written_, sizeof written_); }
  [[noreturn]] void stop() {
    report();
    for (;;) ::pause();  // until SIGKILL
  }

  Point point_;
  int fd_;
  std::uint64_t mid_bytes_;
  std::uint64_t written_ = 0;
};

/// A writer in a child process; read_fd is its report pipe.
using Writer = Child;

Writer spawn_writer(const NamedDataStore& store, const std::string& dest, PausingOps::Point point,
                    std::uint64_t mid_bytes = 0) {
  return fork_with_pipe([&](int fd) {
    PausingOps ops(point, fd, mid_bytes);
    Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
    return r.ok() ? 0 : 3;
  });
}

/// Waits for the writer's report; false if it exited without one.
bool await_report(const Writer& w, std::uint64_t* written) {
  std::uint8_t buf[8];
  std::size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::read(w.read_fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  std::memcpy(written, buf, sizeof buf);
  return true;
}

/// Kills the writer (if still running) and reaps it: true if SIGKILL ended
/// it, false if it had exited with status 0 first.
bool kill_and_reap(const Writer& w) {
  ::kill(w.pid, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(w.pid, &status, 0) == w.pid);
  ::close(w.read_fd);
  if (WIFSIGNALED(status)) {
    CHECK(WTERMSIG(status) == SIGKILL);
    return true;
  }
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  return false;
}

/// Temporary files a killed writer left in `dir` (anything but model.ptd).
/// Each must carry the writer's name, ".model.ptd.tmp-" and six characters.
std::vector<std::string> temporaries(const std::string& dir) {
  const std::vector<std::string> stray = others(dir, {"model.ptd"});
  for (const std::string& n : stray) {
    CHECK(n.rfind(".model.ptd.tmp-", 0) == 0);
    CHECK(n.size() == std::strlen(".model.ptd.tmp-XXXXXX"));
  }
  return stray;
}

/// The bytes of `file` that hold the WDX1 content hashes (patched last, by
/// pwrite), as [begin, end) ranges.
std::vector<std::pair<std::uint64_t, std::uint64_t>> content_hash_ranges(const std::vector<std::uint8_t>& file) {
  namespace eh = format::ext_header;
  std::uint64_t ext = 0;
  REQUIRE(format::align_up(format::kFlatbufferOffset + format::load_u64(file.data() + format::kHeaderFlatbufferSizePos),
                           format::kExtAlignment, &ext));
  REQUIRE(std::memcmp(file.data() + ext, "WDX1", 4) == 0);
  const std::uint64_t info = ext + format::load_u32(file.data() + ext + eh::kSegmentInfoOffset);
  const std::uint32_t count = format::load_u32(file.data() + ext + eh::kSegmentCount);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (std::uint32_t i = 0; i < count; ++i) {
    const std::uint64_t p = info + std::uint64_t{i} * format::segment_info::kSize + format::segment_info::kContentHash;
    out.emplace_back(p, p + 8);
  }
  return out;
}

}  // namespace

TEST_CASE("killed by SIGKILL at each step, then at random points: the destination is absent, the previous version or complete") {
  // Two stores of 12 MB and 10 MB (deterministic bytes), written alternately
  // over one destination by child processes that the parent kills.
  std::vector<std::vector<std::uint8_t>> data_a, data_b;
  for (std::size_t i = 0; i < 4; ++i) data_a.push_back(pattern((3u << 20) + 4099u * i, 100 + i));
  for (std::size_t i = 0; i < 5; ++i) data_b.push_back(pattern((2u << 20) + 777u * i, 200 + i));
  const NamedDataStore store_a = store_over(data_a), store_b = store_over(data_b);
  const std::vector<std::uint8_t> bytes_a = serialize(store_a), bytes_b = serialize(store_b);
  REQUIRE(bytes_a.size() > (12u << 20));
  REQUIRE(bytes_b.size() > (10u << 20));
  REQUIRE(bytes_a.size() != bytes_b.size());

  const std::string dir = fresh_dir("kill");
  const std::string dest = dir + "/model.ptd";
  const std::vector<std::uint8_t>* previous = nullptr;  // no destination at first
  int killed = 0, completed = 0, kept_previous = 0, mid_write = 0;

  // After a writer ended (killed or not): the destination is the new file,
  // the previous one or (if there was none) absent, byte for byte; a
  // temporary file is left only by a kill before the rename, and then the
  // destination is still the previous file. Returns the temporary file's
  // bytes (empty if none was left).
  const auto inspect = [&](bool was_killed, const std::vector<std::uint8_t>& next) {
    const std::vector<std::string> stray = temporaries(dir);
    CHECK(stray.size() <= 1);
    if (!was_killed) CHECK(stray.empty());
    const bool present = exists(dest);
    const std::vector<std::uint8_t> now = read_file(dest);
    if (!present) {
      CHECK(previous == nullptr);  // absent only if there was nothing before
      ++kept_previous;
    } else if (now == next) {
      CHECK(stray.empty());  // renamed: the temporary file is the destination now
      ++completed;
      previous = &next;
    } else {
      REQUIRE(previous != nullptr);
      CHECK(now == *previous);  // never partial, never a mix
      ++kept_previous;
    }
    killed += was_killed;
    mid_write += was_killed && !stray.empty();
    std::vector<std::uint8_t> temp;
    for (const std::string& n : stray) {
      temp = read_file(dir + "/" + n);
      REQUIRE(::unlink((dir + "/" + n).c_str()) == 0);
    }
    return temp;
  };

  // ---- Phase 1: a kill at each step of the write, deterministically ------
  // The child stops at the step and reports; the parent kills it there.
  using Point = PausingOps::Point;
  enum class Dest { Absent, Previous, Next };
  struct Step {
    const char* name;
    Point point;
    bool write_a;
    Dest dest;
    bool temp_left;
  } steps[] = {
      {"before the temporary file is created", Point::BeforeCreate, true, Dest::Absent, false},
      {"right after the temporary file is created", Point::Created, true, Dest::Absent, true},
      {"not killed: completes", Point::None, false, Dest::Next, false},
      {"after the space is reserved", Point::Reserved, true, Dest::Previous, true},
      {"mid-write, past half the file", Point::MidWrite, true, Dest::Previous, true},
      {"all bytes written, content hashes not yet patched", Point::BeforePatch, true, Dest::Previous, true},
      {"written, fsync'd and closed, before the rename", Point::BeforeRename, true, Dest::Previous, true},
      {"after the rename, before the directory fsync", Point::BeforeDirFsync, true, Dest::Next, false},
      {"mid-write over a file of the other size", Point::MidWrite, false, Dest::Previous, true},
  };
  for (const Step& s : steps) {
    const std::string step = s.name;
    CAPTURE(step);
    const std::vector<std::uint8_t>& next = s.write_a ? bytes_a : bytes_b;
    const std::vector<std::uint8_t>* before = previous;
    const Writer w = spawn_writer(s.write_a ? store_a : store_b, dest, s.point, next.size() / 2);
    std::uint64_t written = 0;
    const bool reported = await_report(w, &written);
    CHECK(reported == (s.point != Point::None));
    const bool was_killed = kill_and_reap(w);
    CHECK(was_killed == (s.point != Point::None));
    const std::vector<std::uint8_t> temp = inspect(was_killed, next);
    switch (s.dest) {
      case Dest::Absent: CHECK_FALSE(exists(dest)); break;
      case Dest::Previous: REQUIRE(before != nullptr); CHECK(read_file(dest) == *before); break;
      case Dest::Next: CHECK(read_file(dest) == next); break;
    }
    CHECK(others(dir, {"model.ptd"}).empty());
    if (!s.temp_left) continue;
    // The temporary file holds exactly what the writer had got to.
    const std::uint64_t base = format::load_u64(next.data() + format::kHeaderSegmentBasePos);
    switch (s.point) {
      case Point::Created:
        CHECK(temp.empty());
        CHECK(written == 0);
        break;
      case Point::Reserved:
        CHECK((temp.size() == next.size() || temp.empty()));  // empty where fallocate is unsupported
        CHECK(written == 0);
        break;
      case Point::MidWrite:
        REQUIRE(written >= next.size() / 2);
        REQUIRE(written < next.size());
        REQUIRE(temp.size() >= written);
        CHECK(std::equal(temp.begin() + static_cast<std::ptrdiff_t>(base),
                         temp.begin() + static_cast<std::ptrdiff_t>(written),
                         next.begin() + static_cast<std::ptrdiff_t>(base)));
        break;
      case Point::BeforePatch: {
        CHECK(written == next.size());
        REQUIRE(temp.size() == next.size());
        CHECK(temp != next);  // the hashes are not in yet...
        std::vector<std::uint8_t> patched = temp;
        for (const auto& r : content_hash_ranges(next))
          std::copy(next.begin() + static_cast<std::ptrdiff_t>(r.first),
                    next.begin() + static_cast<std::ptrdiff_t>(r.second),
                    patched.begin() + static_cast<std::ptrdiff_t>(r.first));
        CHECK(patched == next);  // ...and nothing else is missing
        break;
      }
      case Point::BeforeRename:
        CHECK(written == next.size());
        CHECK(temp == next);  // complete, yet the destination is still the old file
        break;
      default: FAIL("no temporary file expected at this step");
    }
  }
  CHECK(killed == 8);
  CHECK(completed == 2);
  CHECK(kept_previous == 7);
  CHECK(mid_write == 6);

  // ---- Phase 2: kills at random delays ------------------------------------
  // A delay counted from the moment the temporary file exists, drawn from
  // [0, 1.25 x how long the rest of the write took uninterrupted here), so
  // most kills land inside the write whatever the machine's speed: a loaded
  // machine slows the writer, which moves the kills earlier in it, not past
  // it. Runs until a random kill has landed mid-write (a bounded number of
  // times); seeded, so the delays repeat.
  long long rest_us = 0;
  for (int warm = 0; warm < 2; ++warm) {
    const Writer w = spawn_writer(store_a, dest, Point::Report);
    std::uint64_t written = 0;
    REQUIRE(await_report(w, &written));
    const auto t0 = std::chrono::steady_clock::now();
    int status = 0;
    REQUIRE(::waitpid(w.pid, &status, 0) == w.pid);
    ::close(w.read_fd);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    const long long us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    rest_us = warm == 0 ? us : std::min(rest_us, us);
    REQUIRE(read_file(dest) == bytes_a);
  }
  previous = &bytes_a;

  std::mt19937 rng(20240601);
  const int killed_before = killed, completed_before = completed, mid_before = mid_write;
  constexpr int kMinIterations = 8, kMaxIterations = 40;
  int iterations = 0;
  for (; iterations < kMinIterations || (mid_write == mid_before && iterations < kMaxIterations); ++iterations) {
    CAPTURE(iterations);
    const bool write_a = previous != &bytes_a;  // always a change
    const long delay_us = static_cast<long>(rng() % static_cast<std::uint32_t>(rest_us * 5 / 4 + 1));
    const Writer w = spawn_writer(write_a ? store_a : store_b, dest, Point::Report);
    std::uint64_t written = 0;
    REQUIRE(await_report(w, &written));
    struct timespec ts {delay_us / 1000000, (delay_us % 1000000) * 1000};
    ::nanosleep(&ts, nullptr);
    (void)inspect(kill_and_reap(w), write_a ? bytes_a : bytes_b);
  }
  MESSAGE("random kills: ", iterations, " runs (uninterrupted write after the temporary file: ", rest_us,
          " us): ", killed - killed_before, " killed, ", mid_write - mid_before, " of them mid-write, ",
          completed - completed_before, " completed");
  CHECK(mid_write > mid_before);  // at least one random kill landed inside the write
  CHECK(killed > killed_before);
  CHECK(others(dir, {"model.ptd"}).empty());
}

// Paths the writer must follow or shorten, not refuse.
TEST_CASE("a destination whose name is 255 bytes long (NAME_MAX) is written: its temporary name is cut short") {
  std::vector<std::vector<std::uint8_t>> data{pattern(100, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("long_name");
  const std::string dest = dir + "/" + std::string(255, 'n');
  Expected<WriteStats> r = write_ptd_file(store, dest);
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(read_file(dest) == serialize(store));
  CHECK(others(dir, {std::string(255, 'n')}).empty());
}

TEST_CASE("a directory that allows shorter names (eCryptfs: 143 bytes): the temporary name fits its limit") {
  // The limit is the directory's (pathconf), injected here: no file system
  // with a short one can be mounted in a test. The name the writer creates
  // is recorded; the real directory takes any length up to 255.
  class ShortNames final : public detail::FileOps {
   public:
    long limit;
    std::string dir_asked, created;
    explicit ShortNames(long l) : limit(l) {}
    long name_max(const char* dir) override {
      dir_asked = dir;
      return limit;
    }
    int make_temp(char* t, mode_t m) override {
      const int fd = FileOps::make_temp(t, m);
      created = t;
      return fd;
    }
  };
  const std::string dir = fresh_dir("short_names");
  const std::string name(140, 'n');  // fits 143, and its temporary did not: 1 + 140 + 11 = 152
  struct Case {
    long limit;
    std::size_t kept;  // bytes of the destination's name in the temporary's
  };
  for (const Case c : {Case{143, 131}, Case{-1, 140}, Case{255, 140}, Case{12, 1}}) {
    CAPTURE(c.limit);
    ShortNames ops(c.limit);
    const std::string text = "limit " + std::to_string(c.limit);
    Expected<void> w = detail::write_whole_file(dir + "/" + name, text, false, ops);
    REQUIRE_MESSAGE(w.ok(), w.message());
    CHECK(read_file(dir + "/" + name) == std::vector<std::uint8_t>(text.begin(), text.end()));
    CHECK(ops.dir_asked == dir);
    const std::string base = ops.created.substr(dir.size() + 1);
    CHECK(base.size() == 1 + c.kept + 11);
    CHECK(base.size() == detail::temp_name_size(name.size(), c.limit));
    CHECK(base.compare(0, 1 + c.kept + 5, "." + std::string(c.kept, 'n') + ".tmp-") == 0);
  }
  CHECK(detail::temp_base_max(143) == 131);
  CHECK(detail::temp_base_max(0) == 200);    // not known: 255, less the dot and suffix, at most 200
  CHECK(detail::temp_base_max(1024) == 200);
  CHECK(others(dir, {name}).empty());  // no temporary left
}

TEST_CASE("fill_temp_name replaces the template's last six characters, and only those, from [a-zA-Z0-9]") {
  // 20 names from "d/.f.tmp-XXXXXX": the prefix (9 bytes) kept, the six
  // characters after it each from the 62, and each of the six, at least
  // once, not the template's 'X' (left 'X' in all 20 by chance: 62^-20).
  static const std::string kChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  bool replaced[6] = {};
  for (int i = 0; i < 20; ++i) {
    char name[] = "d/.f.tmp-XXXXXX";
    detail::fill_temp_name(name);
    CHECK(std::strlen(name) == 15);
    CHECK(std::string(name, 9) == "d/.f.tmp-");
    for (std::size_t k = 0; k < 6; ++k) {
      CHECK(kChars.find(name[9 + k]) != std::string::npos);
      replaced[k] = replaced[k] || name[9 + k] != 'X';
    }
  }
  for (std::size_t k = 0; k < 6; ++k) {
    CAPTURE(k);
    CHECK(replaced[k]);
  }
}

TEST_CASE("fill_temp_name leaves a string shorter than six characters as it is, and writes nothing before it") {
  // "ab" at byte 8 of a buffer of 'Z's: six bytes back from its end would
  // be bytes 4 to 9, four of them the Z's before it.
  char buf[16] = "ZZZZZZZZab";
  detail::fill_temp_name(buf + 8);
  CHECK(std::string(buf) == "ZZZZZZZZab");
  char empty[8] = "ZZZZZZ";
  detail::fill_temp_name(empty + 6);
  CHECK(std::string(empty) == "ZZZZZZ");
  CHECK(detail::is_temp_template("XXXXXX"));
  CHECK(detail::is_temp_template("d/.f.tmp-XXXXXX"));
  CHECK_FALSE(detail::is_temp_template("XXXXX"));
  CHECK_FALSE(detail::is_temp_template("d/.f.tmp-XXXXXY"));
  CHECK_FALSE(detail::is_temp_template("d/.f.tmp-YXXXXX"));
  CHECK_FALSE(detail::is_temp_template(""));
}

TEST_CASE("FileOps::make_temp refuses a template that does not end in XXXXXX with EINVAL, as mkostemp does, creating nothing") {
  const std::string dir = fresh_dir("temp_template");
  detail::FileOps ops;
  for (const std::string& tail : {std::string("t-XXXXX"), std::string("t-XXXXXY"), std::string("t-YXXXXX")}) {
    CAPTURE(tail);
    std::string t = dir + "/" + tail;
    errno = 0;
    CHECK(ops.make_temp(&t[0], 0600) == -1);
    CHECK(errno == EINVAL);
    CHECK(t == dir + "/" + tail);  // not one character replaced
  }
  // A path cut short by a NUL byte at its start: as a C string it is empty.
  std::string cut = std::string(1, '\0') + dir + "/t-XXXXXX";
  const std::string cut_before = cut;
  errno = 0;
  CHECK(ops.make_temp(&cut[0], 0600) == -1);
  CHECK(errno == EINVAL);
  CHECK(cut == cut_before);
  CHECK(others(dir, {}).empty());
  // A template that ends so is a new file, its six X's replaced.
  std::string good = dir + "/t-XXXXXX";
  const int fd = ops.make_temp(&good[0], 0600);
  REQUIRE(fd >= 0);
  CHECK(::close(fd) == 0);
  CHECK(good.size() == dir.size() + 9);
  CHECK(good.compare(0, dir.size() + 3, dir + "/t-") == 0);
  CHECK(good != dir + "/t-XXXXXX");
  CHECK(others(dir, {}) == std::vector<std::string>{good.substr(dir.size() + 1)});
}

TEST_CASE("unpredictable_u64: 64 calls give 64 different values, and each of the 64 bits is 1 in one and 0 in another") {
  // All 64 bits reach the caller (temporary names, the name indexes'
  // seeds): a bit the same in all 64 values happens by chance once in
  // 2^63, a repeated value once in about 2^53.
  std::vector<std::uint64_t> values;
  std::uint64_t any_one = 0, all_one = ~std::uint64_t{0};
  for (int i = 0; i < 64; ++i) {
    const std::uint64_t x = detail::unpredictable_u64();
    values.push_back(x);
    any_one |= x;
    all_one &= x;
  }
  CHECK(any_one == ~std::uint64_t{0});
  CHECK(all_one == 0);
  std::sort(values.begin(), values.end());
  const auto distinct = std::unique(values.begin(), values.end()) - values.begin();
  CHECK(distinct == 64);
}

namespace {
/// In `dir`: target.ptd holding {1, 2, 3}, and `links` symbolic links to
/// it in a chain, l0 -> target.ptd and l<i> -> l<i - 1>. The names made,
/// the target's first.
std::vector<std::string> target_and_link_chain(const std::string& dir, int links) {
  REQUIRE(wdedup_test::write_file(dir + "/target.ptd", {1, 2, 3}));
  std::vector<std::string> names{"target.ptd"};
  for (int i = 0; i < links; ++i) {
    const std::string l = "l" + std::to_string(i);
    REQUIRE(::symlink(names.back().c_str(), (dir + "/" + l).c_str()) == 0);
    names.push_back(l);
  }
  return names;
}
}  // namespace

TEST_CASE("a chain of 10 symbolic links of one's own is followed to its file, and the links kept") {
  std::vector<std::vector<std::uint8_t>> data{pattern(100, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("link_chain");
  const std::vector<std::string> names = target_and_link_chain(dir, 10);
  Expected<WriteStats> r = write_ptd_file(store, dir + "/" + names.back());
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(read_file(dir + "/target.ptd") == serialize(store));
  struct stat st {};
  CHECK((::lstat((dir + "/l9").c_str(), &st) == 0 && S_ISLNK(st.st_mode)));
}

TEST_CASE("a chain of 40 symbolic links (the kernel's limit) is followed; one of 41 is refused, ELOOP") {
  std::vector<std::vector<std::uint8_t>> data{pattern(100, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("link_chain_40");
  const std::vector<std::string> names = target_and_link_chain(dir, 41);  // l39 is 40 links from it, l40 41
  Expected<WriteStats> r = write_ptd_file(store, dir + "/l39");
  REQUIRE_MESSAGE(r.ok(), r.message());
  CHECK(read_file(dir + "/target.ptd") == serialize(store));
  REQUIRE(wdedup_test::write_file(dir + "/target.ptd", {1, 2, 3}));
  detail::AtomicFile file;
  const Expected<void> o = file.open(dir + "/l40", 100);
  REQUIRE_FALSE(o.ok());
  CHECK(o.error() == Error::IoError);
  CHECK(o.message() == "cannot write '" + dir + "/l40': resolve symbolic link failed: " + std::strerror(ELOOP));
  CHECK(file.failure_errno() == ELOOP);
  CHECK(read_file(dir + "/target.ptd") == std::vector<std::uint8_t>{1, 2, 3});
  CHECK(others(dir, names).empty());
}

TEST_CASE("a writer without CAP_FSETID replacing its own set-user-ID or set-group-ID file keeps those bits") {
  // Writing to a file clears its set-user-ID bit (and a group-executable
  // file's set-group-ID bit) unless the writer has CAP_FSETID, which root
  // has: the replacement is given the old file's mode after its last
  // write. Needs root to become another user; elsewhere not checked.
  if (::geteuid() != 0) {
    MESSAGE("not root: the set-ID bits of a non-root writer's replacement not checked");
    return;
  }
  const uid_t nobody = 65534;
  std::vector<std::vector<std::uint8_t>> data{pattern(3000, 4)};
  const NamedDataStore store = store_over(data);
  // In /tmp: the tests' own directory may sit under one nobody cannot enter.
  char tmpl[] = "/tmp/wdedup-setid-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  REQUIRE(::chown(dir.c_str(), nobody, nobody) == 0);
  REQUIRE(::chmod(dir.c_str(), 0755) == 0);
  const mode_t modes[] = {04755, 02755, 06755};
  std::vector<std::string> paths;
  for (const mode_t m : modes) {
    paths.push_back(dir + "/m" + std::to_string(m) + ".ptd");
    REQUIRE(wdedup_test::write_file(paths.back(), {1, 2}));
    REQUIRE(::chown(paths.back().c_str(), nobody, nobody) == 0);
    REQUIRE(::chmod(paths.back().c_str(), m) == 0);
  }
  const Child child = fork_with_pipe([&](int) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(nobody) != 0 || ::setuid(nobody) != 0) return 3;
    for (const std::string& p : paths)
      if (!write_ptd_file(store, p).ok()) return 4;
    return 0;
  });
  ::close(child.read_fd);
  int status = 0;
  REQUIRE(::waitpid(child.pid, &status, 0) == child.pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  for (std::size_t i = 0; i < paths.size(); ++i) {
    CAPTURE(paths[i]);
    struct stat st {};
    REQUIRE(::stat(paths[i].c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == modes[i]);
    CHECK(st.st_uid == nobody);
    CHECK(read_file(paths[i]) == serialize(store));
  }
  REQUIRE(std::system(("rm -rf '" + dir + "'").c_str()) == 0);
}

namespace {

constexpr uid_t kNobody = 65534;

/// A file of nobody's (holding 1, 2) named `name` in a directory of its
/// own in /tmp, nobody's too (0755): nobody must reach it, and a build tree
/// may lie under a directory only its owner enters (mktemp -d's 0700: the
/// fresh clone's). Remove its directory with remove_dir_of().
std::string nobody_file(const std::string& tag, const char* name) {
  std::string tmpl = "/tmp/wdedup-" + tag + "-XXXXXX";
  REQUIRE(::mkdtemp(&tmpl[0]) != nullptr);
  const std::string dest = tmpl + "/" + name;
  REQUIRE(::chown(tmpl.c_str(), kNobody, kNobody) == 0);
  REQUIRE(::chmod(tmpl.c_str(), 0755) == 0);
  REQUIRE(wdedup_test::write_file(dest, {1, 2}));
  REQUIRE(::chown(dest.c_str(), kNobody, kNobody) == 0);
  return dest;
}

void remove_dir_of(const std::string& path) {
  REQUIRE(std::system(("rm -rf '" + path.substr(0, path.rfind('/')) + "'").c_str()) == 0);
}

/// `store` written over `dest` by nobody, without root's override, under a
/// check that opens the written file; the child exits 0 when it is written.
void replace_as_nobody(const NamedDataStore& store, const std::string& dest) {
  const Child child = fork_with_pipe([&](int) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) return 3;
    WriteOptions wo;
    wo.check_before_replace = [](const char* written, void*) -> Expected<void> {
      const int fd = ::open(written, O_RDONLY | O_CLOEXEC);
      if (fd < 0) return Expected<void>(Error::IoError, "cannot open the temporary file");
      ::close(fd);
      return {};
    };
    return write_ptd_file(store, FunctionMaps{}, dest, wo).ok() ? 0 : 4;
  });
  ::close(child.read_fd);
  int status = 0;
  REQUIRE(::waitpid(child.pid, &status, 0) == child.pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

}  // namespace

TEST_CASE("a check before the replacement can read the file whatever the replaced file's mode (0200, 0000)") {
  // The replaced file's mode is set after the check: under 0200 or 0000 its
  // owner could not open the temporary file to read it back (the demo's
  // read-back failed, "Permission denied", a user trial). Root reads any
  // file, so the check also notes the mode it saw.
  std::vector<std::vector<std::uint8_t>> data{pattern(3000, 5)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("check_mode");
  struct Seen {
    mode_t mode = 0;
    std::vector<std::uint8_t> bytes;
  };
  WriteOptions o;
  o.check_before_replace = [](const char* written, void* context) -> Expected<void> {
    Seen& s = *static_cast<Seen*>(context);
    struct stat st {};
    if (::stat(written, &st) != 0) return Expected<void>(Error::IoError, "stat");
    s.mode = st.st_mode & 07777;
    s.bytes = read_file(written);
    return {};
  };
  for (const mode_t m : {mode_t{0200}, mode_t{0}, mode_t{0640}}) {
    CAPTURE(m);
    const std::string dest = dir + "/m" + std::to_string(m) + ".ptd";
    REQUIRE(wdedup_test::write_file(dest, {1, 2}));
    REQUIRE(::chmod(dest.c_str(), m) == 0);
    Seen seen;
    o.check_context = &seen;
    REQUIRE(write_ptd_file(store, FunctionMaps{}, dest, o).ok());
    CHECK((seen.mode & 0400) != 0);  // its owner may read it
    CHECK(seen.bytes == serialize(store));
    struct stat st {};
    REQUIRE(::stat(dest.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == m);  // and the replacement has the old mode
  }
  CHECK(others(dir, {"m128.ptd", "m0.ptd", "m416.ptd"}).empty());
  // Without root's override: a write-only file of nobody's, replaced by nobody.
  if (::geteuid() != 0) return;
  const std::string dest = nobody_file("check-mode", "write_only.ptd");
  REQUIRE(::chmod(dest.c_str(), 0200) == 0);
  replace_as_nobody(store, dest);
  struct stat st {};
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0200);
  CHECK(read_file(dest) == serialize(store));
  remove_dir_of(dest);
}

TEST_CASE("a failure after the check (chmod, fsync, close of the second descriptor) leaves the destination and no temporary file") {
  // 4d1c470's fchmod, fsync and close after the check: FaultyOps fails a
  // step from its first call, which is before the check, so the paths
  // after it had no fault injection.
  struct AfterCheck final : detail::FileOps {
    enum class Step { Chmod, Fsync, Close } step = Step::Chmod;
    bool checked = false;
    int closes_after = 0;
    int fchmod(int fd, mode_t m) override {
      if (checked && step == Step::Chmod) return fail();
      return FileOps::fchmod(fd, m);
    }
    int fsync(int fd) override {
      if (checked && step == Step::Fsync) return fail();
      return FileOps::fsync(fd);
    }
    int close(int fd) override {
      if (checked && step == Step::Close && closes_after++ == 0) {
        FileOps::close(fd);
        return fail();
      }
      return FileOps::close(fd);
    }
    static int fail() {
      errno = EIO;
      return -1;
    }
  };
  std::vector<std::vector<std::uint8_t>> data{pattern(3000, 5)};
  const NamedDataStore store = store_over(data);
  const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
  for (const auto step : {AfterCheck::Step::Chmod, AfterCheck::Step::Fsync, AfterCheck::Step::Close}) {
    CAPTURE(static_cast<int>(step));
    const std::string dir = fresh_dir("after_check");
    const std::string dest = dir + "/model.ptd";
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    REQUIRE(::chmod(dest.c_str(), 0640) == 0);
    AfterCheck ops;
    ops.step = step;
    struct Ctx {
      AfterCheck* ops;
      int told = 0;
      std::string checked;  // the temporary file, as the check saw it
    } ctx{&ops, 0, {}};
    WriteOptions o;
    o.check_before_replace = [](const char* path, void* c) -> Expected<void> {
      static_cast<Ctx*>(c)->ops->checked = true;
      static_cast<Ctx*>(c)->checked = path;
      return {};
    };
    o.check_context = &ctx;
    o.on_temporary = [](const char*, bool exists, void* c) { static_cast<Ctx*>(c)->told += exists ? 1 : -1; };
    o.temporary_context = &ctx;
    const std::size_t fds = wdedup_test::dir_entries("/proc/self/fd").size();
    Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, o, ops);
    REQUIRE_FALSE(r.ok());
    INFO(r.message());
    CHECK(r.error() == Error::IoError);
    CHECK(contains(r.message(), step == AfterCheck::Step::Chmod   ? "chmod temporary file"
                                : step == AfterCheck::Step::Fsync ? "fsync temporary file"
                                                                  : "close temporary file"));
    // The whole message: the step, the temporary file by its name, why.
    REQUIRE(ctx.checked.rfind(dir + "/.model.ptd.tmp-", 0) == 0);
    CHECK(r.message() == "cannot write '" + dest + "': " +
                             (step == AfterCheck::Step::Chmod   ? "chmod"
                              : step == AfterCheck::Step::Fsync ? "fsync"
                                                                : "close") +
                             " temporary file '" + ctx.checked + "' failed: " + std::strerror(EIO));
    CHECK(read_file(dest) == old_bytes);
    struct stat st {};
    REQUIRE(::stat(dest.c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0640);
    CHECK(others(dir, {"model.ptd"}).empty());
    CHECK(ctx.told == 0);
    CHECK(wdedup_test::dir_entries("/proc/self/fd").size() == fds);
  }
}

TEST_CASE("a check before the replacement can read the file whatever the replaced file's access ACL (user::-w-)") {
  // The access ACL was copied in open(), before the check: its owner entry
  // set the temporary file's owner bits, and an ACL of user::-w- failed
  // every check as a 0200 mode did before 4d1c470.
  if (::geteuid() != 0) {
    MESSAGE("not root: not run");
    return;
  }
  std::vector<std::vector<std::uint8_t>> data{pattern(3000, 5)};
  const NamedDataStore store = store_over(data);
  std::vector<std::uint8_t> acl;
  auto put = [&](std::uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) acl.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  };
  put(2, 4);
  // user::-w-, user:1234:r--, group::---, mask::r--, other::---
  for (const auto& [tag, perm] : {std::pair<int, int>{0x01, 2}, {0x02, 4}, {0x04, 0}, {0x10, 4}, {0x20, 0}}) {
    put(static_cast<std::uint32_t>(tag), 2);
    put(static_cast<std::uint32_t>(perm), 2);
    put(tag == 0x02 ? 1234u : 0xFFFFFFFFu, 4);
  }
  const std::string dest = nobody_file("check-acl", "write_only.ptd");
  const std::string dir = dest.substr(0, dest.rfind('/'));
  if (::setxattr(dest.c_str(), "system.posix_acl_access", acl.data(), acl.size(), 0) != 0) {
    MESSAGE("no POSIX ACLs on /tmp's file system: not run");
    remove_dir_of(dest);
    return;
  }
  std::vector<std::uint8_t> before(256);
  before.resize(static_cast<std::size_t>(::getxattr(dest.c_str(), "system.posix_acl_access", before.data(), 256)));
  replace_as_nobody(store, dest);
  std::vector<std::uint8_t> after(256);
  after.resize(static_cast<std::size_t>(::getxattr(dest.c_str(), "system.posix_acl_access", after.data(), 256)));
  CHECK(after == before);  // the ACL is still the replaced file's
  CHECK(read_file(dest) == serialize(store));
  CHECK(others(dir, {"write_only.ptd"}).empty());
  remove_dir_of(dest);
}

#if defined(__cpp_exceptions)
// Out of memory at each allocation a write makes, in turn: write_ptd_file
// throws std::bad_alloc (README, Errors) and, as on any other failure, the
// destination keeps its bytes and its mode and no temporary file is left,
// also when the allocation fails once the temporary file exists. The same
// with a directory fsync that fails after the rename: the write then ends
// NotDurable with the new file in place, and an allocation that fails
// before it still leaves the old one (the message is made before the
// rename; made after it, an allocation failing there threw with the new
// file in place). The replaced operator new fails once when armed.
#include "support/fail_each_allocation.hpp"
#include "support/failing_new.hpp"
using wdedup_test::g_fail_countdown;

TEST_CASE("out of memory at any allocation of a write: std::bad_alloc, the destination untouched, no temporary file") {
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1), pattern(9000, 2)};
  const NamedDataStore store = store_over(data);
  FunctionMaps maps;
  maps.functions.push_back(FunctionMap{"forward", 0, "blob", "forward", {{"w", "layer.0.weight"}}});
  const std::vector<std::uint8_t> new_bytes = REQUIRE_VALUE(serialize_ptd(store, maps));
  const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
  for (const bool dir_fsync_fails : {false, true}) {
    CAPTURE(dir_fsync_fails);
    const std::string dir = fresh_dir(dir_fsync_fails ? "out_of_memory_fsync_dir" : "out_of_memory");
    const std::string dest = dir + "/model.ptd";
    REQUIRE(wdedup_test::write_file(dest, old_bytes));
    REQUIRE(::chmod(dest.c_str(), 0640) == 0);
    struct Seen {
      bool made = false;  // the temporary file existed when the allocation failed
    } seen;
    WriteOptions o;
    REQUIRE(o.fsync);  // (the directory fsync happens)
    o.temporary_context = &seen;
    o.on_temporary = [](const char*, bool exists, void* context) {
      if (exists) static_cast<Seen*>(context)->made = true;
    };
    FaultyOps ops(dir_fsync_fails ? FaultyOps::Step::FsyncDir : FaultyOps::Step::None, EIO);
    Expected<WriteStats> r = BuildError{Error::InvalidArgument, "not called"};
    long after_temporary = 0;
    const long injected = wdedup_test::fail_each_allocation(
        g_fail_countdown, [&] { seen.made = false; },
        [&] { r = detail::write_ptd_file_with(store, maps, dest, o, ops); },
        [&] {
          if (seen.made) ++after_temporary;
          CHECK(read_file(dest) == old_bytes);
          struct stat st {};
          REQUIRE(::stat(dest.c_str(), &st) == 0);
          CHECK((st.st_mode & 07777) == 0640);
          CHECK(others(dir, {"model.ptd"}).empty());
        },
        [&] {
          if (dir_fsync_fails) {
            CHECK(r.error() == Error::NotDurable);
            CHECK(r.message() == "wrote '" + dest + "', but fsync directory '" + dir + "' failed: " +
                                     std::strerror(EIO) +
                                     " (the new file is in place; its rename may not survive a power loss)");
          } else {
            CHECK(r.ok());
          }
          CHECK(read_file(dest) == new_bytes);
          CHECK(others(dir, {"model.ptd"}).empty());
        });
    CHECK(injected >= 10);
    CHECK(after_temporary >= 2);  // (the content hashes' table and the write batch's pieces, at least)
  }
}
#endif  // __cpp_exceptions
