// tests/crash_safety.cpp — write_ptd_file replaces files crash-safely
// (wdedup/ptd_writer.hpp, wdedup/detail/atomic_file.hpp): a process killed
// at any point leaves the destination absent, at its previous version or
// complete; every failing step (full disk, I/O error, bad path, unwritable
// directory) leaves the destination untouched, removes the temporary file
// and reports Error::IoError naming the path, the operation and the reason.
#include <doctest/doctest.h>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "wdedup/ptd_writer.hpp"

using namespace wdedup;

namespace {

std::vector<std::uint8_t> read_file(const std::string& path) {
  std::vector<std::uint8_t> out;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return out;
  std::uint8_t buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.insert(out.end(), buf, buf + n);
  std::fclose(f);
  return out;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  if (!bytes.empty()) REQUIRE(std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size());
  REQUIRE(std::fclose(f) == 0);
}

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
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n == "." || n == "..") continue;
    bool known = false;
    for (const std::string& x : expected) known = known || x == n;
    if (!known) out.push_back(n);
  }
  ::closedir(d);
  return out;
}

std::vector<std::uint8_t> pattern(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> v(n);
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  std::size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(v.data() + i, &x, 8);
  }
  for (; i < n; ++i) v[i] = static_cast<std::uint8_t>(x >> (8 * (i % 8)));
  return v;
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

/// FileOps that fails one chosen step with a chosen errno, and can also
/// dribble writes (short writes and EINTR) to exercise the retry loops.
class FaultyOps final : public detail::FileOps {
 public:
  enum class Step { None, MakeTemp, Chmod, Reserve, Write, Pwrite, Fsync, Close, Rename, FsyncDir };
  Step fail = Step::None;
  int error = EIO;
  std::uint64_t fail_after_bytes = 0;  ///< Write: succeed this many bytes first
  bool dribble = false;                ///< short writes and EINTR
  std::uint64_t written = 0;
  int writes = 0;

  int make_temp(char* t) override { return fail == Step::MakeTemp ? set() : FileOps::make_temp(t); }
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
    return fail == Step::Pwrite ? set() : FileOps::pwrite(fd, p, n, off);
  }
  int fsync(int fd) override { return fail == Step::Fsync ? set() : FileOps::fsync(fd); }
  int close(int fd) override {
    if (fail == Step::Close) {
      FileOps::close(fd);  // the descriptor is gone either way, as with a real close error
      return set();
    }
    return FileOps::close(fd);
  }
  int rename(const char* a, const char* b) override { return fail == Step::Rename ? set() : FileOps::rename(a, b); }
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

TEST_CASE("every failing step leaves the destination untouched and removes the temporary file") {
  std::vector<std::vector<std::uint8_t>> data;
  for (int i = 0; i < 4; ++i) data.push_back(pattern(700000 + 1000 * i, 10 + i));
  const NamedDataStore store = store_over(data);
  FunctionMaps maps;
  maps.functions.push_back(FunctionMap{"forward", 0, "blob", "forward", {{"w", "layer.0.weight"}}});
  const std::vector<std::uint8_t> old_bytes = pattern(12345, 99);

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
      CAPTURE(had_old);
      CAPTURE(static_cast<int>(c.step));
      CAPTURE(c.after);
      const std::string dir = fresh_dir("faults");
      const std::string dest = dir + "/model.ptd";
      if (had_old) write_bytes(dest, old_bytes);
      FaultyOps ops;
      ops.fail = c.step;
      ops.error = c.error;
      ops.fail_after_bytes = c.after;
      Expected<WriteStats> r = detail::write_ptd_file_with(store, maps, dest, WriteOptions{}, ops);
      REQUIRE_FALSE(r.ok());
      CHECK(r.error() == Error::IoError);
      INFO(r.message());
      CHECK(contains(r.message(), "cannot write '" + dest + "': "));
      CHECK(contains(r.message(), c.operation));
      CHECK(contains(r.message(), std::strerror(c.error)));
      if (had_old) CHECK(read_file(dest) == old_bytes);
      else CHECK_FALSE(exists(dest));
      CHECK(others(dir, {"model.ptd"}).empty());  // no temporary file left
    }
  }
}

TEST_CASE("a failed directory fsync after the rename is NotDurable, not IoError; the new file is complete") {
  std::vector<std::vector<std::uint8_t>> data{pattern(5000, 1)};
  const NamedDataStore store = store_over(data);
  const std::string dir = fresh_dir("fsync_dir");
  const std::string dest = dir + "/model.ptd";
  write_bytes(dest, {1, 2, 3});
  FaultyOps ops;
  ops.fail = FaultyOps::Step::FsyncDir;
  Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
  CHECK(r.error() == Error::NotDurable);
  CHECK(std::string(error_name(r.error())) == "NotDurable");
  CHECK(r.message() == "wrote '" + dest + "', but fsync directory '" + dir + "' failed: " + std::strerror(EIO) +
                           " (the new file is in place; its rename may not survive a power loss)");
  CHECK(read_file(dest) == serialize(store));
  CHECK(others(dir, {"model.ptd"}).empty());
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
  CHECK(read_file(dest) == serialize(store));
}

TEST_CASE("an interrupted fallocate (EINTR) is retried; an unsupported one is skipped") {
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
  for (int error : {EINTR, EOPNOTSUPP, ENOSYS}) {
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

TEST_CASE("a real write error mid-file (file size limit): destination untouched, no temporary file") {
  // RLIMIT_FSIZE makes the kernel fail the write with EFBIG, for root too,
  // on any file system. In a child, so the limit and the ignored SIGXFSZ
  // stay there.
  std::vector<std::vector<std::uint8_t>> data{pattern(3 << 20, 1), pattern(2 << 20, 2)};
  const NamedDataStore store = store_over(data);
  for (bool reserve : {true, false}) {
    CAPTURE(reserve);
    const std::string dir = fresh_dir("fsize");
    const std::string dest = dir + "/model.ptd";
    const std::vector<std::uint8_t> old_bytes = pattern(1000, 7);
    write_bytes(dest, old_bytes);
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(fds[0]);
      ::signal(SIGXFSZ, SIG_IGN);
      struct rlimit lim {};
      lim.rlim_cur = 1 << 20;
      lim.rlim_max = RLIM_INFINITY;
      ::setrlimit(RLIMIT_FSIZE, &lim);
      // Without reserve, the error comes from writev itself.
      class NoReserve final : public detail::FileOps {
        int reserve(int, off_t) override { return 0; }
      } no_reserve;
      detail::FileOps& ops = reserve ? detail::default_file_ops() : no_reserve;
      Expected<WriteStats> r = detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, ops);
      const std::string msg = std::to_string(static_cast<int>(r.error())) + "|" + r.message();
      (void)!::write(fds[1], msg.data(), msg.size());
      ::_exit(0);
    }
    ::close(fds[1]);
    std::string msg;
    char buf[512];
    ssize_t n;
    while ((n = ::read(fds[0], buf, sizeof buf)) > 0) msg.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
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
    fails(dir + "/missing/model.ptd", "failed: " + std::string(std::strerror(ENOENT)));
  }
  SUBCASE("a path under a regular file") {
    write_bytes(dir + "/file", {1});
    fails(dir + "/file/model.ptd", std::string("stat failed: ") + std::strerror(ENOTDIR));
    CHECK(read_file(dir + "/file") == std::vector<std::uint8_t>{1});
    CHECK(others(dir, {"file"}).empty());
  }
  SUBCASE("a file system that refuses new files, even for root (/proc)") {
    fails("/proc/wdedup_crash_safety_test.ptd", "create a temporary file in directory '/proc' failed: ");
  }
  SUBCASE("an existing directory, and a FIFO, are never replaced") {
    REQUIRE(::mkdir((dir + "/sub").c_str(), 0755) == 0);
    fails(dir + "/sub", "not a regular file");
    REQUIRE(::mkfifo((dir + "/fifo").c_str(), 0644) == 0);
    fails(dir + "/fifo", "not a regular file");
    struct stat st {};
    REQUIRE(::lstat((dir + "/fifo").c_str(), &st) == 0);
    CHECK(S_ISFIFO(st.st_mode));
    CHECK(others(dir, {"sub", "fifo"}).empty());
  }
  SUBCASE("a path ending in a slash") {
    fails(dir + "/", "not a regular file");
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
  write_bytes(dest, {9});
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
  CHECK((st.st_mode & 07777) == 0644);  // what a new file gets, not mkstemp's 0600
  CHECK(detail::current_umask() == static_cast<int>(old_mask));  // read from /proc, not changed

  // Where the umask cannot be read (no /proc), a new file stays 0600
  // rather than taking a guessed 022; an existing file still keeps its mode.
  struct NoUmask : detail::FileOps {
    int umask() override { return -1; }
  } no_umask;
  const std::string private_file = dir + "/private.ptd";
  REQUIRE(detail::write_ptd_file_with(store, FunctionMaps{}, private_file, WriteOptions{}, no_umask).ok());
  REQUIRE(::stat(private_file.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  CHECK(read_file(private_file) == want);
  REQUIRE(detail::write_ptd_file_with(store, FunctionMaps{}, dest, WriteOptions{}, no_umask).ok());
  REQUIRE(::stat(dest.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0640);

  const std::string target = dir + "/target.ptd", link = dir + "/link.ptd";
  write_bytes(target, {7});
  REQUIRE(::symlink("target.ptd", link.c_str()) == 0);
  REQUIRE(write_ptd_file(store, link).ok());
  REQUIRE(::lstat(link.c_str(), &st) == 0);
  CHECK(S_ISLNK(st.st_mode));
  CHECK(read_file(target) == want);
  CHECK(others(dir, {"model.ptd", "fresh.ptd", "private.ptd", "target.ptd", "link.ptd"}).empty());
}

TEST_CASE("killed at random points (SIGKILL): the destination is absent, the previous version or complete") {
  // Two large stores (tens of MB); the child replaces the destination with
  // one while the parent kills it after a random delay. Deterministic seeds.
  std::vector<std::vector<std::uint8_t>> data_a, data_b;
  for (int i = 0; i < 6; ++i) data_a.push_back(pattern((5u << 20) + 4099u * i, 100 + i));
  for (int i = 0; i < 5; ++i) data_b.push_back(pattern((6u << 20) + 777u * i, 200 + i));
  const NamedDataStore store_a = store_over(data_a), store_b = store_over(data_b);
  const std::vector<std::uint8_t> bytes_a = serialize(store_a), bytes_b = serialize(store_b);
  REQUIRE(bytes_a.size() > (30u << 20));

  const std::string dir = fresh_dir("kill");
  const std::string dest = dir + "/model.ptd";
  const auto spawn = [&](const NamedDataStore& s) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      Expected<WriteStats> r = write_ptd_file(s, dest);
      ::_exit(r.ok() ? 0 : 3);
    }
    return pid;
  };

  // Uninterrupted writes to learn how long a write takes here (the faster
  // of two: the first is cold), so the kill points spread over the whole
  // write, from before the first byte to after the rename. No timing is
  // asserted.
  long long full_us = 0;
  pid_t pid = 0;
  int status = 0;
  for (int warm = 0; warm < 2; ++warm) {
    const auto t0 = std::chrono::steady_clock::now();
    pid = spawn(store_a);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    const long long us =
        std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
    full_us = warm == 0 ? us : std::min(full_us, us);
    REQUIRE(read_file(dest) == bytes_a);
    ::unlink(dest.c_str());
  }

  std::mt19937 rng(20240601);
  const std::vector<std::uint8_t>* previous = nullptr;  // no destination at first
  int killed = 0, completed = 0, kept_previous = 0;
  constexpr int kIterations = 16;
  for (int iteration = 0; iteration < kIterations; ++iteration) {
    CAPTURE(iteration);
    const bool write_a = iteration % 2 == 0;
    const std::vector<std::uint8_t>& next = write_a ? bytes_a : bytes_b;
    const long delay_us = static_cast<long>(rng() % static_cast<std::uint32_t>(full_us * 11 / 10 + 1));
    pid = spawn(write_a ? store_a : store_b);
    struct timespec ts {delay_us / 1000000, (delay_us % 1000000) * 1000};
    ::nanosleep(&ts, nullptr);
    ::kill(pid, SIGKILL);
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    const bool was_killed = WIFSIGNALED(status);
    if (!was_killed) REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));

    const std::vector<std::uint8_t> now = read_file(dest);
    if (!exists(dest)) {
      CHECK(previous == nullptr);  // absent only if there was nothing before
      ++kept_previous;
    } else if (now == next) {
      ++completed;
      previous = &next;
    } else {
      REQUIRE(previous != nullptr);
      CHECK(now == *previous);  // never partial, never a mix
      ++kept_previous;
    }
    // A stray temporary file may remain only when the writer was killed.
    const std::vector<std::string> stray = others(dir, {"model.ptd"});
    if (!was_killed) CHECK(stray.empty());
    for (const std::string& n : stray) {
      CHECK(n.rfind(".model.ptd.tmp-", 0) == 0);
      ::unlink((dir + "/" + n).c_str());
    }
    killed += was_killed;
  }
  MESSAGE("kill test: ", killed, " killed, ", completed, " completed, ", kept_previous, " kept the previous state");
  CHECK(completed + kept_previous == kIterations);
}
