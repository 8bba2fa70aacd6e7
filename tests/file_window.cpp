// Tests for the file sources' descriptors and windows
// (wdedup/runtime/file_sources.hpp, mapped_file.hpp): a .ptd file put
// inside a bigger one is read through a FileWindow exactly as the file
// itself, by MmapSource, FileSource, MappedFile and PreadFile, opened from
// a path or from a descriptor; a descriptor stays the caller's; a window is
// the source's whole world; each bad descriptor or window is refused by
// name, leaving no descriptor or mapping behind. Built with
// -fno-exceptions -fno-rtti.
// REQUIRE under -fno-exceptions: a failed REQUIRE ends the run (tests/doctest_main.cpp).
#include <doctest/doctest.h>

#include "support/wdedup_file.hpp"  // first: see the note there

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/ptd_files.hpp"
#include "support/require_value.hpp"
#include "wdedup/runtime.hpp"

using namespace wdedup;
using namespace wdedup_test;

namespace {

/// `lead` bytes of 0xCC, the file, 4096 bytes of 0xEE: a container whose
/// window {lead, file size} is the file.
std::string write_container(const std::string& name, const std::vector<std::uint8_t>& file, std::size_t lead) {
  std::vector<std::uint8_t> bytes(lead, 0xCC);
  bytes.insert(bytes.end(), file.begin(), file.end());
  bytes.insert(bytes.end(), 4096, 0xEE);
  return write_temp(name, bytes);
}

/// An open descriptor, closed when it goes.
struct Fd {
  explicit Fd(int f) : fd(f) {}
  Fd(const std::string& path, int flags) : fd(::open(path.c_str(), flags | O_CLOEXEC)) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  int fd;
};

/// Open descriptors of this process (a refusal must leave none behind).
std::size_t open_fds() { return dir_entries("/proc/self/fd").size(); }

/// Mappings of `path` in this process (an unmap must let the whole mapping
/// go, the page before the window too).
std::size_t mappings_of(const std::string& file) {
  char resolved[PATH_MAX];
  REQUIRE(::realpath(file.c_str(), resolved) != nullptr);
  const std::string path = resolved;
  std::ifstream maps("/proc/self/maps");
  std::size_t n = 0;
  for (std::string line; std::getline(maps, line);)
    if (line.size() >= path.size() && line.compare(line.size() - path.size(), path.size(), path) == 0) ++n;
  return n;
}

/// A map over `src` with lent metadata memory (open_lent), kept with it.
std::unique_ptr<Opened> open_lent_over(const DataSource& src) {
  auto o = std::make_unique<Opened>();
  o->source = &src;
  open_lent(*o);
  return o;
}

std::vector<std::string> all_files() {
  std::vector<std::string> out = fixture_paths();
  out.push_back(wdedup_file_path());
  return out;
}

// Where the file starts in its container: page-aligned (0, 4096, 12352 is
// 3 pages and 64), 8-aligned but not a page (8), and at odd places (5, 4095).
constexpr std::size_t kLeads[] = {0, 8, 4096, 3 * 4096 + 64, 5, 4095};

}  // namespace

TEST_CASE("every fixture and a wdedup file, inside a bigger file, read through a window as the file itself") {
  for (const std::string& path : all_files()) {
    const std::vector<std::uint8_t> file = read_file(path);
    MappedFile ref = REQUIRE_VALUE(MappedFile::open(path.c_str()));
    for (const std::size_t lead : kLeads) {
      CAPTURE(path);
      CAPTURE(lead);
      const std::string container = write_container("window_container.bin", file, lead);
      const FileWindow window{lead, file.size()};
      const Fd fd(container, O_RDONLY);
      REQUIRE(fd.fd >= 0);
      const bool in_place = lead % 8 == 0;  // the map asks memory 8-byte aligned

      // MmapSource, from the path and from the descriptor.
      for (int how = 0; how < 2; ++how) {
        CAPTURE(how);
        Result<MmapSource> src = how == 0 ? MmapSource::open(container.c_str(), window)
                                          : MmapSource::from_fd(fd.fd, window);
        REQUIRE(src.ok());
        CHECK(src->size() == file.size());
        if (!file.empty()) {
          // At the address file offset `lead` has in a mapping of the whole file.
          CHECK(reinterpret_cast<std::uintptr_t>(src->data()) % 4096 == lead % 4096);
          CHECK(std::memcmp(src->data(), file.data(), file.size()) == 0);
        }
        Result<NamedDataMap> map = NamedDataMap::open(*src);
        if (in_place) {
          REQUIRE(map.ok());
          check_reads_as(*map, ref.map());
        } else {
          CHECK(map.error() == Error::Misaligned);
          CHECK(std::string(map.failure().what) == "source memory is not 8-byte aligned");
        }
        const std::unique_ptr<Opened> lent = open_lent_over(*src);  // metadata copied: any address
        REQUIRE(lent->ok());
        check_reads_as(lent->map(), ref.map());
      }

      // FileSource, from the path and from the descriptor.
      for (int how = 0; how < 2; ++how) {
        CAPTURE(how);
        Result<FileSource> src = how == 0 ? FileSource::open(container.c_str(), window)
                                          : FileSource::from_fd(fd.fd, window);
        REQUIRE(src.ok());
        CHECK(src->size() == file.size());
        CHECK(src->window_offset() == lead);
        const std::unique_ptr<Opened> lent = open_lent_over(*src);
        REQUIRE(lent->ok());
        check_reads_as(lent->map(), ref.map());
      }

      // MappedFile and PreadFile, both ways.
      for (int how = 0; how < 2; ++how) {
        CAPTURE(how);
        Result<MappedFile> mf = how == 0 ? MappedFile::open(container.c_str(), {}, window)
                                         : MappedFile::from_fd(fd.fd, {}, window);
        if (in_place) {
          REQUIRE(mf.ok());
          check_reads_as(mf->map(), ref.map());
        } else {
          CHECK(mf.error() == Error::Misaligned);
        }
        Result<std::uint64_t> need = how == 0 ? PreadFile::metadata_size(container.c_str(), window)
                                              : PreadFile::metadata_size_from_fd(fd.fd, window);
        REQUIRE(need.ok());
        const std::uint64_t file_need = REQUIRE_VALUE(PreadFile::metadata_size(path.c_str()));
        CHECK(*need == file_need);
        AlignedBytes memory(static_cast<std::size_t>(*need), 8);
        Result<PreadFile> pf = how == 0 ? PreadFile::open(container.c_str(), memory.span(), {}, window)
                                        : PreadFile::from_fd(fd.fd, memory.span(), {}, window);
        REQUIRE(pf.ok());
        check_reads_as(pf->map(), ref.map());
      }
    }
  }
}

TEST_CASE("a window is the source's whole world: reads stop at its end where the file goes on") {
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  const std::string container = write_container("window_world.bin", file, 4096 + 8);
  const std::uint64_t n = file.size();
  const FileWindow window{4096 + 8, n};
  std::vector<std::uint8_t> buf(static_cast<std::size_t>(n) + 2, 0);

  Result<FileSource> f = FileSource::open(container.c_str(), window);
  REQUIRE(f.ok());
  REQUIRE(f->read(0, buf.data(), n).ok());
  CHECK(std::memcmp(buf.data(), file.data(), file.size()) == 0);
  REQUIRE(f->read(n - 1, buf.data(), 1).ok());
  CHECK(buf[0] == file.back());
  Status past = f->read(n - 1, buf.data(), 2);  // the container's next byte is 0xEE
  CHECK(past.error() == Error::Truncated);
  CHECK(std::string(past.failure().what) == "read past the end of the file");
  CHECK(past.failure().at == n - 1);
  CHECK(f->view(0, 1) == nullptr);

  Result<MmapSource> m = MmapSource::open(container.c_str(), window);
  REQUIRE(m.ok());
  CHECK(m->view(n - 1, 1) == m->data() + (n - 1));
  CHECK(m->view(n - 1, 2) == nullptr);
  const Status mapped_past = m->read(n - 1, buf.data(), 2);
  CHECK(mapped_past.error() == Error::Truncated);
  CHECK(std::string(mapped_past.failure().what) == "read past the end of the source");
  CHECK(mapped_past.failure().at == n - 1);  // where the read starts, not its size (2)

  // To the file's end by default: the 0xEE tail is then in the window.
  Result<FileSource> rest = FileSource::open(container.c_str(), FileWindow{4096 + 8});
  REQUIRE(rest.ok());
  CHECK(rest->size() == n + 4096);
  REQUIRE(rest->read(n, buf.data(), 1).ok());
  CHECK(buf[0] == 0xEE);
  // And a window of the whole file is the file: the 0xCC lead at 0.
  Result<FileSource> whole = FileSource::open(container.c_str());
  REQUIRE(whole.ok());
  CHECK(whole->size() == 4096 + 8 + n + 4096);
  CHECK(whole->window_offset() == 0);
  REQUIRE(whole->read(0, buf.data(), 1).ok());
  CHECK(buf[0] == 0xCC);
}

TEST_CASE("a descriptor given stays the caller's: its own state, its file position, open after the source goes") {
  const std::string path = wdedup_file_path();
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  Fd fd(path, O_RDONLY);
  REQUIRE(fd.fd >= 0);
  REQUIRE(::lseek(fd.fd, 17, SEEK_SET) == 17);
  const int fd_flags = ::fcntl(fd.fd, F_GETFD);
  std::vector<std::uint8_t> buf(file.size());
  std::uint64_t first = 0;
  {
    Result<FileSource> f = FileSource::from_fd(fd.fd);
    REQUIRE(f.ok());
    CHECK(f->fd() != fd.fd);                                // a duplicate of its own
    CHECK((::fcntl(f->fd(), F_GETFD) & FD_CLOEXEC) != 0);  // not inherited by a child's exec
    first = f->instance();
    CHECK(first != 0);
    REQUIRE(f->read(0, buf.data(), buf.size()).ok());
    CHECK(buf == file);
    FileSource moved = std::move(f).value();
    CHECK(moved.instance() == first);
    Result<FileSource> g = FileSource::from_fd(fd.fd);
    REQUIRE(g.ok());
    CHECK(g->instance() != first);
    CHECK(g->instance() != 0);
  }
  CHECK(::fcntl(fd.fd, F_GETFD) == fd_flags);  // still open, as it was
  CHECK(::lseek(fd.fd, 0, SEEK_CUR) == 17);    // pread moved no file position

  // The caller may close its descriptor as soon as the call returns.
  Fd mine(path, O_RDONLY);
  Result<FileSource> f = FileSource::from_fd(mine.fd);
  Result<MmapSource> m = MmapSource::from_fd(mine.fd);
  Result<MappedFile> mf = MappedFile::from_fd(mine.fd);
  REQUIRE(f.ok());
  REQUIRE(m.ok());
  REQUIRE(mf.ok());
  REQUIRE(::close(mine.fd) == 0);
  mine.fd = -1;
  std::fill(buf.begin(), buf.end(), 0);
  REQUIRE(f->read(0, buf.data(), buf.size()).ok());
  CHECK(buf == file);
  CHECK(std::memcmp(m->data(), file.data(), file.size()) == 0);
  CHECK(mf->map().check_source().ok());
  const std::size_t mf_keys = REQUIRE_VALUE((*mf)->get_num_keys());
  CHECK(mf_keys == small_file_keys().size());
}

TEST_CASE("a FileSource whose descriptor is 0 (standard input closed) closes it when it goes") {
  // A program may run with standard input closed: the open then gives the
  // file descriptor 0, which the source owns and must close like any other.
  const int saved = ::fcntl(0, F_DUPFD_CLOEXEC, 10);  // standard input set aside (-1: it was closed)
  ::close(0);
  {
    Result<FileSource> f = FileSource::open(wdedup_file_path().c_str());
    REQUIRE(f.ok());
    CHECK(f->fd() == 0);
    std::uint8_t first = 0;
    REQUIRE(f->read(0, &first, 1).ok());
    CHECK(first == wdedup_file_bytes()[0]);
  }
  errno = 0;
  CHECK(::fcntl(0, F_GETFD) == -1);  // closed with the source
  CHECK(errno == EBADF);
  if (saved >= 0) {
    ::dup2(saved, 0);
    ::close(saved);
  }
}

TEST_CASE("the caller's POSIX record lock: kept by MmapSource::from_fd and MappedFile::from_fd, released by every close") {
  // A close of any descriptor of a file releases every fcntl(F_SETLK) lock
  // the process holds on it (README "Descriptors, and files inside files"):
  // only the two mapping from_fd calls, which keep no descriptor, close none.
  // Seen from another process (a process's own F_GETLK never meets its own
  // locks): a child asks whether a write lock would be refused.
  const std::string path = wdedup_file_path();
  const auto held = [&path]() {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      struct flock q {};
      q.l_type = F_WRLCK;
      q.l_whence = SEEK_SET;
      if (fd < 0 || ::fcntl(fd, F_GETLK, &q) != 0) ::_exit(2);
      ::_exit(q.l_type == F_UNLCK ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) != 2);
    return WEXITSTATUS(status) == 1;
  };
  Fd mine(path, O_RDONLY);
  REQUIRE(mine.fd >= 0);
  const auto lock = [&mine]() {
    struct flock l {};
    l.l_type = F_RDLCK;
    l.l_whence = SEEK_SET;
    REQUIRE(::fcntl(mine.fd, F_SETLK, &l) == 0);
  };
  lock();
  REQUIRE(held());
  {
    Result<MmapSource> m = MmapSource::from_fd(mine.fd);
    Result<MappedFile> mf = MappedFile::from_fd(mine.fd);
    REQUIRE(m.ok());
    REQUIRE(mf.ok());
    CHECK(held());
  }
  CHECK(held());  // (and unmapping closes nothing either)
  {
    Result<FileSource> f = FileSource::from_fd(mine.fd);
    REQUIRE(f.ok());
    CHECK(held());  // its duplicate is open
  }
  CHECK(!held());  // closed with the source
  lock();
  REQUIRE(held());
  CHECK(PreadFile::metadata_size_from_fd(mine.fd).ok());
  CHECK(!held());
  lock();
  REQUIRE(held());
  CHECK(MmapSource::open(path.c_str()).ok());
  CHECK(!held());
}

TEST_CASE("a bad descriptor is refused by name, with its errno, by every way to open one") {
  const std::string path = wdedup_file_path();
  AlignedBytes memory(1 << 16, 8);
  struct Case {
    const char* name;
    int fd;
    const char* what;
    int err;
  };
  Fd write_only(path, O_WRONLY), no_access(path, O_ACCMODE), as_path(path, O_PATH), dir(std::string(WDEDUP_TEST_TMPDIR), O_RDONLY | O_DIRECTORY);
  int pipe_fds[2] = {-1, -1};
  REQUIRE(::pipe(pipe_fds) == 0);
  Fd pipe_read(pipe_fds[0]), pipe_write(pipe_fds[1]);
  int socket_fds[2] = {-1, -1};
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, socket_fds) == 0);
  Fd socket_a(socket_fds[0]), socket_b(socket_fds[1]);
  REQUIRE(write_only.fd >= 0);
  REQUIRE(no_access.fd >= 0);
  REQUIRE(as_path.fd >= 0);
  REQUIRE(dir.fd >= 0);
  const std::size_t with_ours = open_fds();
  const Case cases[] = {
      {"not open", -1, "fcntl(F_GETFL) failed: not an open descriptor? (at = errno)", EBADF},
      {"write-only", write_only.fd, "the descriptor is not open for reading (at = errno)", EBADF},
      {"O_PATH", as_path.fd, "the descriptor is not open for reading (at = errno)", EBADF},
      {"access mode 3", no_access.fd, "the descriptor is not open for reading (at = errno)", EBADF},
      {"a directory", dir.fd, "not a regular file but a directory", 0},
      {"a pipe", pipe_read.fd, "not a regular file but a FIFO", 0},
      {"a socket", socket_a.fd, "not a regular file but a socket", 0},
  };
  for (const Case& c : cases) {
    CAPTURE(c.name);
    std::vector<Failure> failures;
    failures.push_back(MmapSource::from_fd(c.fd).failure());
    failures.push_back(FileSource::from_fd(c.fd).failure());
    failures.push_back(MappedFile::from_fd(c.fd).failure());
    failures.push_back(PreadFile::from_fd(c.fd, memory.span()).failure());
    failures.push_back(PreadFile::metadata_size_from_fd(c.fd).failure());
    for (const Failure& f : failures) {
      CHECK(f.code == Error::IoError);
      CHECK(std::string(f.what) == c.what);
      CHECK(failure_errno(f) == c.err);
      if (c.err == 0) CHECK(f.at == 0);
    }
  }
  CHECK(open_fds() == with_ours);  // nothing left open by a refusal
}

TEST_CASE("a path that is not a regular file is refused by name, by every way to open one, leaving nothing open") {
  // The path opens (non-blocking: a FIFO without a writer opens at once),
  // then fstat refuses it: the descriptor must be closed on the way out.
  const std::string fifo = std::string(WDEDUP_TEST_TMPDIR) + "/window_not_regular.fifo";
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  AlignedBytes memory(1 << 16, 8);
  struct Case {
    std::string path;
    const char* what;
  };
  const Case cases[] = {
      {std::string(WDEDUP_TEST_TMPDIR), "not a regular file but a directory"},
      {fifo, "not a regular file but a FIFO"},
      {"/dev/null", "not a regular file but a device"},
  };
  const std::size_t fds = open_fds();
  for (const Case& c : cases) {
    CAPTURE(c.path);
    std::vector<Failure> failures;
    failures.push_back(MmapSource::open(c.path.c_str()).failure());
    failures.push_back(FileSource::open(c.path.c_str()).failure());
    failures.push_back(MappedFile::open(c.path.c_str()).failure());
    failures.push_back(PreadFile::open(c.path.c_str(), memory.span()).failure());
    failures.push_back(PreadFile::metadata_size(c.path.c_str()).failure());
    for (const Failure& f : failures) {
      CHECK(f.code == Error::IoError);
      CHECK(std::string(f.what) == c.what);
      CHECK(f.at == 0);
    }
    CHECK(open_fds() == fds);  // the five opens of the path, each closed
  }
  ::unlink(fifo.c_str());
}

TEST_CASE("a descriptor open for reading and writing is read like a read-only one, by every way to open one") {
  // O_RDWR reads: only a write-only descriptor, access mode 3 and O_PATH are refused.
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  const std::string path = write_temp("read_write_fd.ptd", file);
  Fd rw(path, O_RDWR);
  REQUIRE(rw.fd >= 0);
  AlignedBytes memory(1 << 16, 8);
  Result<MmapSource> m = MmapSource::from_fd(rw.fd);
  REQUIRE(m.ok());
  CHECK(m->size() == file.size());
  CHECK(std::memcmp(m->data(), file.data(), file.size()) == 0);
  Result<FileSource> f = FileSource::from_fd(rw.fd);
  REQUIRE(f.ok());
  std::vector<std::uint8_t> buf(file.size());
  REQUIRE(f->read(0, buf.data(), buf.size()).ok());
  CHECK(buf == file);
  Result<MappedFile> mf = MappedFile::from_fd(rw.fd);
  REQUIRE(mf.ok());
  const std::size_t mf_keys = REQUIRE_VALUE((*mf)->get_num_keys());
  CHECK(mf_keys == small_file_keys().size());
  Result<std::uint64_t> need = PreadFile::metadata_size_from_fd(rw.fd);
  REQUIRE(need.ok());
  const std::uint64_t path_need = REQUIRE_VALUE(PreadFile::metadata_size(path.c_str()));
  CHECK(*need == path_need);
  Result<PreadFile> pf = PreadFile::from_fd(rw.fd, memory.span());
  REQUIRE(pf.ok());
  const std::size_t pf_keys = REQUIRE_VALUE((*pf)->get_num_keys());
  CHECK(pf_keys == small_file_keys().size());
}

TEST_CASE("a FileSource's failed reads in a window name the offset in the window, not in the file") {
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  REQUIRE(file.size() > 700);
  const std::uint64_t lead = 4096 + 8;
  const FileWindow window{lead, file.size()};
  // A failed pread (the descriptor made a directory's: EISDIR).
  {
    const std::string container = write_container("window_pread_fails.bin", file, lead);
    Result<FileSource> f = FileSource::open(container.c_str(), window);
    REQUIRE(f.ok());
    const Status st = read_from_directory(*f, WDEDUP_TEST_TMPDIR, 64);
    CHECK(st.error() == Error::IoError);
    CHECK(std::string(st.failure().what) == "pread failed: EISDIR, the descriptor is a directory (at = offset)");
    CHECK(st.failure().at == 64);
  }
  // The container cut short inside the window: 600 of the window's bytes remain.
  {
    const std::string container = write_container("window_shrinks.bin", file, lead);
    Result<FileSource> f = FileSource::open(container.c_str(), window);
    REQUIRE(f.ok());
    REQUIRE(::truncate(container.c_str(), static_cast<off_t>(lead + 600)) == 0);
    std::vector<std::uint8_t> buf(200, 0);
    const Status st = f->read(500, buf.data(), buf.size());
    CHECK(st.error() == Error::Truncated);
    CHECK(std::string(st.failure().what) == "file shrank while open");
    CHECK(st.failure().at == 600);
    CHECK(std::memcmp(buf.data(), file.data() + 500, 100) == 0);  // the 100 bytes still there were read
  }
}

#ifdef O_DIRECT
TEST_CASE("a descriptor open with O_DIRECT: mapped as any other, refused by the pread sources, naming the flag") {
  // FileSource reads through a duplicate, which shares O_DIRECT: every
  // unaligned pread would fail (EINVAL) long after from_fd took it.
  const std::string path = wdedup_file_path();
  Fd direct(path, O_RDONLY | O_DIRECT);
  if (direct.fd < 0) {  // (a file system without direct I/O)
    MESSAGE("O_DIRECT open failed here (" << std::strerror(errno) << "): not tried");
    return;
  }
  AlignedBytes memory(1 << 16, 8);
  const std::size_t with_ours = open_fds();
  Result<MappedFile> mapped = MappedFile::from_fd(direct.fd);
  REQUIRE(mapped.ok());
  const std::size_t mapped_keys = REQUIRE_VALUE((*mapped)->get_num_keys());
  CHECK(mapped_keys == small_file_keys().size());
  std::vector<Failure> failures;
  failures.push_back(FileSource::from_fd(direct.fd).failure());
  failures.push_back(PreadFile::from_fd(direct.fd, memory.span()).failure());
  failures.push_back(PreadFile::metadata_size_from_fd(direct.fd).failure());
  for (const Failure& f : failures) {
    CHECK(f.code == Error::IoError);
    CHECK(std::string(f.what) ==
          "the descriptor is open with O_DIRECT, whose reads must be aligned to the device's blocks: open the "
          "file without it, or map it (MmapSource::from_fd, MappedFile::from_fd) (at = errno)");
    CHECK(failure_errno(f) == EINVAL);
  }
  CHECK(open_fds() == with_ours);  // the mapping holds no descriptor; the refusals left none
  CHECK((::fcntl(direct.fd, F_GETFL) & O_DIRECT) != 0);  // the caller's descriptor as it was
}
#endif

TEST_CASE("a window outside the file is refused with the file's size, leaving nothing open or mapped") {
  const std::string path = wdedup_file_path();
  const std::uint64_t n = wdedup_file_bytes().size();
  const Fd fd(path, O_RDONLY);
  REQUIRE(fd.fd >= 0);
  AlignedBytes memory(1 << 16, 8);
  const std::size_t fds = open_fds();
  struct Case {
    FileWindow window;
    const char* what;
  };
  const Case cases[] = {
      {{n + 1}, "the window starts past the end of the file (at = the file's size)"},
      {{n + 1, 0}, "the window starts past the end of the file (at = the file's size)"},
      {{~std::uint64_t{0}, 1}, "the window starts past the end of the file (at = the file's size)"},
      {{10, n - 9}, "the window ends past the end of the file (at = the file's size)"},
      {{0, n + 1}, "the window ends past the end of the file (at = the file's size)"},
      {{10, FileWindow::kToEnd - 5}, "the window ends past the end of the file (at = the file's size)"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.window.offset);
    CAPTURE(c.window.length);
    std::vector<Failure> failures;
    failures.push_back(MmapSource::open(path.c_str(), c.window).failure());
    failures.push_back(MmapSource::from_fd(fd.fd, c.window).failure());
    failures.push_back(FileSource::open(path.c_str(), c.window).failure());
    failures.push_back(FileSource::from_fd(fd.fd, c.window).failure());
    failures.push_back(MappedFile::open(path.c_str(), {}, c.window).failure());
    failures.push_back(MappedFile::from_fd(fd.fd, {}, c.window).failure());
    failures.push_back(PreadFile::open(path.c_str(), memory.span(), {}, c.window).failure());
    failures.push_back(PreadFile::from_fd(fd.fd, memory.span(), {}, c.window).failure());
    failures.push_back(PreadFile::metadata_size(path.c_str(), c.window).failure());
    failures.push_back(PreadFile::metadata_size_from_fd(fd.fd, c.window).failure());
    for (const Failure& f : failures) {
      CHECK(f.code == Error::InvalidArgument);
      CHECK(std::string(f.what) == c.what);
      CHECK(f.at == n);
    }
    CHECK(open_fds() == fds);
    CHECK(mappings_of(path) == 0);
  }

  // At the end, an empty window: an empty source, which no map opens.
  for (const FileWindow w : {FileWindow{n}, FileWindow{n, 0}, FileWindow{3, 0}}) {
    Result<MmapSource> m = MmapSource::from_fd(fd.fd, w);
    Result<FileSource> f = FileSource::from_fd(fd.fd, w);
    REQUIRE(m.ok());
    REQUIRE(f.ok());
    CHECK(m->size() == 0);
    CHECK(m->data() == nullptr);
    CHECK(f->size() == 0);
    CHECK(NamedDataMap::open(*m).error() == Error::Truncated);
    CHECK(mappings_of(path) == 0);
  }
}

TEST_CASE("a mapped window goes whole: the pages before the window too, when destroyed or moved over") {
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  // a's window starts 4000 bytes into a page, so its mapping reaches a page
  // past the window's length from that page: an unmap of the length alone
  // would leave it.
  REQUIRE(file.size() % 4096 > 96);
  const std::string a = write_container("window_unmap_a.bin", file, 4096 + 4000);
  const std::string b = write_container("window_unmap_b.bin", file, 2 * 4096 + 8);
  REQUIRE(mappings_of(a) == 0);
  {
    Result<MmapSource> m = MmapSource::open(a.c_str(), FileWindow{4096 + 4000, file.size()});
    REQUIRE(m.ok());
    CHECK(mappings_of(a) == 1);
    MmapSource moved = std::move(m).value();
    CHECK(mappings_of(a) == 1);
    Result<MmapSource> other = MmapSource::open(b.c_str(), FileWindow{2 * 4096 + 8, file.size()});
    REQUIRE(other.ok());
    moved = std::move(other).value();  // lets a's mapping go
    CHECK(mappings_of(a) == 0);
    CHECK(mappings_of(b) == 1);
    CHECK(std::memcmp(moved.data(), file.data(), file.size()) == 0);
  }
  CHECK(mappings_of(b) == 0);
}

TEST_CASE("an MmapSource or FileSource moved onto itself keeps its window, its mapping or descriptor and its number") {
  // A self-move (through a reference, as a swap or a container's shuffle
  // makes one) leaves the source as it was: an assignment that let its own
  // resource go first would unmap the window, or close the descriptor, and
  // then take the emptied one.
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  const std::string container = write_container("window_self_move.bin", file, 4096 + 8);
  const FileWindow window{4096 + 8, file.size()};

  Result<MmapSource> m = MmapSource::open(container.c_str(), window);
  REQUIRE(m.ok());
  const std::uint8_t* const data = m->data();
  const std::uint64_t mapped_instance = m->instance();
  MmapSource& same_mapping = *m;
  *m = std::move(same_mapping);
  CHECK(m->size() == file.size());
  CHECK(m->data() == data);
  CHECK(m->instance() == mapped_instance);
  CHECK(mappings_of(container) == 1);
  REQUIRE(m->size() == file.size());
  CHECK(std::memcmp(m->data(), file.data(), file.size()) == 0);

  Result<FileSource> f = FileSource::open(container.c_str(), window);
  REQUIRE(f.ok());
  const int fd = f->fd();
  const std::uint64_t read_instance = f->instance();
  FileSource& same_file = *f;
  *f = std::move(same_file);
  CHECK(f->fd() == fd);
  CHECK(f->size() == file.size());
  CHECK(f->window_offset() == 4096 + 8);
  CHECK(f->instance() == read_instance);
  std::vector<std::uint8_t> buf(file.size(), 0);
  REQUIRE(f->read(0, buf.data(), buf.size()).ok());
  CHECK(buf == file);
}

TEST_CASE("a descriptor that cannot be duplicated (no descriptor free: EMFILE) is refused by the pread sources, leaving nothing open") {
  // FileSource::from_fd reads through a duplicate of its own: with every
  // descriptor below the limit in use, fcntl(F_DUPFD_CLOEXEC) fails, and
  // FileSource, PreadFile and metadata_size_from_fd name it, errno EMFILE
  // (24). The mappings need no descriptor: MmapSource::from_fd maps.
  const std::string path = wdedup_file_path();
  const Fd mine(path, O_RDONLY);
  REQUIRE(mine.fd >= 0);
  AlignedBytes memory(1 << 16, 8);
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  const std::size_t fds = open_fds();
  rlimit low = before;
  low.rlim_cur = static_cast<rlim_t>(fds + 8);  // room for the dups below, then none
  REQUIRE(low.rlim_cur <= before.rlim_max);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  std::vector<int> fill;
  fill.reserve(16);
  int dup_errno = 0;
  for (;;) {
    const int d = ::fcntl(mine.fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) {
      dup_errno = errno;
      break;
    }
    fill.push_back(d);
  }
  std::vector<Failure> failures;
  failures.push_back(FileSource::from_fd(mine.fd).failure());
  failures.push_back(PreadFile::from_fd(mine.fd, memory.span()).failure());
  failures.push_back(PreadFile::metadata_size_from_fd(mine.fd).failure());
  Result<MmapSource> mapped = MmapSource::from_fd(mine.fd);
  for (const int d : fill) ::close(d);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &before) == 0);
  REQUIRE(dup_errno == EMFILE);
  REQUIRE(!fill.empty());
  for (const Failure& f : failures) {
    CHECK(f.code == Error::IoError);
    CHECK(std::string(f.what) == "fcntl(F_DUPFD_CLOEXEC) failed (at = errno)");
    CHECK(failure_errno(f) == EMFILE);
  }
  REQUIRE(mapped.ok());
  CHECK(mapped->size() == wdedup_file_bytes().size());
  CHECK(open_fds() == fds);
}

TEST_CASE("a FileSource read whose offset + size wraps past 2^64 is refused as past its end, reading nothing") {
  // offset 1 and size 2^64 - 1 add up to 0 modulo 2^64: the check must not
  // add them. Refused "read past the end of the file" at 1, in the whole
  // file and in a window of a container, and the buffer (room for all the
  // container: a read let through goes on to the file's end) left as it was.
  const std::vector<std::uint8_t> file = wdedup_file_bytes();
  const std::string container = write_container("window_wraps.bin", file, 4096 + 8);
  const std::size_t room = 4096 + 8 + file.size() + 4096;
  for (const FileWindow window : {FileWindow{}, FileWindow{4096 + 8, file.size()}}) {
    CAPTURE(window.offset);
    Result<FileSource> f = FileSource::open(container.c_str(), window);
    REQUIRE(f.ok());
    std::vector<std::uint8_t> buf(room, 0xCD);
    const Status st = f->read(1, buf.data(), ~std::uint64_t{0});
    CHECK(st.error() == Error::Truncated);
    CHECK(std::string(st.failure().what) == "read past the end of the file");
    CHECK(st.failure().at == 1);
    CHECK(buf == std::vector<std::uint8_t>(room, 0xCD));
  }
}
