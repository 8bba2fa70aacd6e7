// wdedup/detail/atomic_file.hpp — replace a file so that every reader, and
// the file system after a crash, sees either the old file or the complete
// new one. Build-time half; internal (namespace detail). POSIX.
//
// The recipe: a uniquely named temporary file in the destination's own
// directory (rename is only atomic within one file system), written in
// full, fsync'd, closed (close can report a deferred write error), renamed
// over the destination, then the directory fsync'd so the rename itself is
// durable. Any failure before the rename unlinks the temporary file and
// leaves the destination untouched. Only a process killed mid-write leaves
// a temporary behind (named ".<name>.tmp-XXXXXX").
//
// Every system call goes through FileOps, a seam tests use to make any step
// fail (ENOSPC in the middle of a write, EIO on fsync, a failed rename).
#ifndef WDEDUP_DETAIL_ATOMIC_FILE_HPP
#define WDEDUP_DETAIL_ATOMIC_FILE_HPP

#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <string>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__linux__)
#include <linux/capability.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#endif

#include "wdedup/detail/random.hpp"
#include "wdedup/expected.hpp"

namespace wdedup {
namespace detail {

/// Whether `path_template` ends in "XXXXXX", as a template for
/// fill_temp_name must.
inline bool is_temp_template(const char* path_template) {
  const std::size_t n = std::strlen(path_template);
  return n >= 6 && std::memcmp(path_template + n - 6, "XXXXXX", 6) == 0;
}

/// A name for a temporary file: `path_template`'s trailing "XXXXXX"
/// replaced with 6 characters that another user cannot predict. A name
/// someone took first only costs a retry (O_EXCL). A string shorter than
/// six characters is left as it is: its end is found by its NUL, and six
/// bytes back from there would be before it.
inline void fill_temp_name(char* path_template) {
  const std::size_t n = std::strlen(path_template);
  if (n < 6) return;
  std::uint64_t x = unpredictable_u64();
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  char* end = path_template + n;
  for (char* p = end - 6; p < end; ++p, x /= 62) *p = kChars[x % 62];
}

/// The directory `path` names a file in: "." for a bare name, "/" for a
/// name right under the root.
inline std::string parent_dir(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
}

/// The temporary file beside a destination named `base` is "." + `base`
/// cut to temp_base_max bytes + kTempSuffix: at most kTempBaseMax, and
/// short enough for the directory's own limit on names. That limit is
/// NAME_MAX (255) on most file systems, but not all: eCryptfs allows 143
/// bytes, and a destination name that fits there would fail with a
/// temporary name 12 bytes longer.
constexpr std::size_t kTempBaseMax = 200;
constexpr char kTempSuffix[] = ".tmp-XXXXXX";
/// How much of the destination's name the temporary keeps, in a directory
/// whose names may be `name_max` bytes long (pathconf's _PC_NAME_MAX; 0 or
/// less, not known or no limit: 255, the usual one). At least 1.
constexpr std::size_t temp_base_max(long name_max) noexcept {
  constexpr long kOther = 1 + static_cast<long>(sizeof kTempSuffix - 1);  // the dot and the suffix
  const long limit = name_max > 0 ? name_max : 255;
  const long room = limit - kOther;
  return room < 1 ? 1 : (room > static_cast<long>(kTempBaseMax) ? kTempBaseMax : static_cast<std::size_t>(room));
}
/// Bytes of that temporary file's name.
constexpr std::size_t temp_name_size(std::size_t base, long name_max = 0) noexcept {
  const std::size_t keep = temp_base_max(name_max);
  return 1 + (base < keep ? base : keep) + sizeof kTempSuffix - 1;
}

/// stat (`follow`) or lstat of `path`. Where off_t has 32 bits (a 32-bit
/// glibc build without _FILE_OFFSET_BITS=64), a file past 2 GiB makes both
/// fail with EOVERFLOW, though all the writer reads of it (type, mode,
/// owner, group) fits: then they come from stat64, and st_size is 0.
inline int stat_path(const char* path, bool follow, struct stat* st) noexcept {
  const int rc = follow ? ::stat(path, st) : ::lstat(path, st);
#if defined(__GLIBC__) && defined(_LARGEFILE64_SOURCE) && !defined(__USE_FILE_OFFSET64)
  if (rc != 0 && errno == EOVERFLOW) {
    struct stat64 st64 {};
    if ((follow ? ::stat64(path, &st64) : ::lstat64(path, &st64)) != 0) return -1;
    *st = {};
    st->st_mode = st64.st_mode;
    st->st_uid = st64.st_uid;
    st->st_gid = st64.st_gid;
    st->st_nlink = static_cast<nlink_t>(st64.st_nlink);
    return 0;
  }
#endif
  return rc;
}

/// Who is told where the atomic writer's temporary file is
/// (WriteOptions::on_temporary): `tell(path, true)` once it exists,
/// `tell(path, false)` once it no longer exists under that name.
struct TemporaryWatch {
  void (*on_temporary)(const char* temp_path, bool exists, void* context) = nullptr;
  void* context = nullptr;
  void tell(const char* temp_path, bool exists) const {
    if (on_temporary != nullptr) on_temporary(temp_path, exists, context);
  }
};

/// While alive and `on`: the signals this process handles (a function of
/// its own, not the default action nor ignored) are held back on this
/// thread, from just before the temporary file's creation until a watch
/// knows its name, so that no handler runs in between, unable to remove a
/// file that exists (a review's finding, 2026-12-01: SIGTERM during the
/// open(2) left an empty temporary). Delivered once it ends, in the order
/// the system picks (a signal raised twice meanwhile counts once).
/// Not the others: a signal whose default action ends the process does so
/// either way, and is not kept waiting on a slow open; nor the signals a
/// thread's own fault raises (SIGSEGV and the like), which cannot wait.
/// Other threads are not held: a signal for the process may run a handler
/// there meanwhile (a program that writes while other threads run holds
/// its stop signals in them).
class SignalHold {
 public:
  explicit SignalHold(bool on) noexcept {
    if (!on) return;
    sigset_t handled;
    sigemptyset(&handled);
    for (int sig = 1; sig <= last_signal(); ++sig) {
      if (sig == SIGKILL || sig == SIGSTOP || sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE ||
          sig == SIGILL || sig == SIGTRAP || sig == SIGSYS)
        continue;
      struct sigaction sa;
      // (The C library's own signals refuse to be asked: EINVAL, skipped.)
      if (::sigaction(sig, nullptr, &sa) != 0) continue;
      if ((sa.sa_flags & SA_SIGINFO) != 0 || (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN))
        sigaddset(&handled, sig);
    }
    on_ = ::pthread_sigmask(SIG_BLOCK, &handled, &old_) == 0;
  }
  SignalHold(const SignalHold&) = delete;
  SignalHold& operator=(const SignalHold&) = delete;

  /// The highest signal number: SIGRTMAX where there are real-time
  /// signals (a call on glibc), else NSIG - 1, which POSIX does not promise
  /// (macOS hides it under strict POSIX), else 64.
  static int last_signal() noexcept {
#if defined(SIGRTMAX)
    return SIGRTMAX;
#elif defined(NSIG)
    return NSIG - 1;
#else
    return 64;
#endif
  }
  ~SignalHold() {
    if (on_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  bool on_ = false;
  sigset_t old_;
};

/// The system calls the atomic writer makes. Each returns what the POSIX
/// call returns and sets errno the same way.
class FileOps {
 public:
  virtual ~FileOps() = default;
  /// Creates a new file (O_EXCL) from `path_template` (ending in
  /// "XXXXXX", replaced), asking for `mode`, which the kernel then narrows
  /// as for any new file: by the directory's default ACL if it has one,
  /// else by the umask. Like mkostemp, but with a mode of the caller's.
  virtual int make_temp(char* path_template, mode_t mode) {
    // As mkostemp: a template that does not end in "XXXXXX" is EINVAL,
    // checked once, before its X's are replaced. The writer's own always
    // ends so, unless a NUL byte in the path cuts it short (AtomicFile::open
    // refuses such a path first); this keeps any other caller's from
    // naming a file by what it happens to end in.
    if (!is_temp_template(path_template)) {
      errno = EINVAL;
      return -1;
    }
    for (int attempt = 0; attempt < 100; ++attempt) {
      fill_temp_name(path_template);
      const int fd = ::open(path_template, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
      if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;  // errno: EEXIST
  }
  virtual ssize_t writev(int fd, const struct iovec* iov, int count) { return ::writev(fd, iov, count); }
  virtual ssize_t pwrite(int fd, const void* data, std::size_t size, off_t offset) {
    return ::pwrite(fd, data, size, offset);
  }
  /// fallocate(fd, 0, 0, size) where there is one; elsewhere fails with
  /// EOPNOTSUPP (reserve() then skips the reservation).
  virtual int allocate(int fd, off_t size) {
#if defined(__linux__)
    return ::fallocate(fd, 0, 0, size);
#else
    (void)fd;
    (void)size;
    errno = EOPNOTSUPP;
    return -1;
#endif
  }
  /// Reserves the file's final size up front, so a full disk fails fast and
  /// the file is laid out contiguously. Returns 0 where unsupported. A
  /// signal may interrupt it (EINTR): retried, as writes are.
  virtual int reserve(int fd, off_t size) {
    int rc;
    do rc = allocate(fd, size);
    while (rc != 0 && errno == EINTR);
    if (rc == 0) return 0;
    if (errno == EOPNOTSUPP || errno == ENOSYS || errno == EINVAL) return 0;
    return -1;
  }
  virtual int fchmod(int fd, mode_t mode) { return ::fchmod(fd, mode); }
  virtual int fsync(int fd) { return ::fsync(fd); }
  virtual int close(int fd) { return ::close(fd); }
  virtual int rename(const char* from, const char* to) { return ::rename(from, to); }
  virtual int unlink(const char* path) { return ::unlink(path); }
  /// pathconf(dir, _PC_NAME_MAX): how long a name in `dir` may be, or -1
  /// (no limit, or not known).
  virtual long name_max(const char* dir) { return ::pathconf(dir, _PC_NAME_MAX); }
  /// fsync of a directory (to make a rename in it durable).
  virtual int fsync_directory(const char* dir) {
    const int fd = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return -1;
    const int rc = ::fsync(fd);
    const int saved = errno;
    ::close(fd);
    errno = saved;
    return rc;
  }
};

inline FileOps& default_file_ops() {
  static FileOps ops;
  return ops;
}

/// Why a file of mode `mode`, which exists and is not a regular file, is
/// not replaced: the writer's refusal, which a tool that checks an output
/// before its work (can_create_file: EINVAL) gives too.
template <int = 0>
std::string not_regular_file(mode_t mode) {
  const char* kind = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "of another kind";
  return cat("it exists and is not a regular file but ", kind,
             " (a directory, device, FIFO or socket is never replaced)");
}

/// Whether this process may replace other users' files in a sticky
/// directory: CAP_FOWNER in its effective set (root has it, unless its
/// capabilities were dropped; another user may have been given it).
inline bool may_override_sticky() noexcept {
#if defined(__linux__) && defined(SYS_capget)
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) == 0) return (data[CAP_FOWNER / 32].effective >> (CAP_FOWNER % 32)) & 1u;
#endif
  return ::geteuid() == 0;
}

/// Why the writer's last step, renaming its temporary file over `target`
/// (which exists if `exists`, with `st`) in directory `dir`, would fail
/// with EPERM although a file can be created there; "" if it would not.
/// These are the kernel's rules for taking a name out of a directory
/// (may_delete): a directory that is append-only; a file that is immutable
/// or append-only; a file another user owns in a sticky directory (/tmp)
/// that is not this process's either. Found only at the rename, they let a
/// tool do all its work before it failed (a review: `--json r.json`, r.json
/// root's in /tmp, the demo run as another user, wrote its stores and lost
/// its report); the writer and can_create_file refuse them up front.
template <int = 0>
std::string replace_refusal(const std::string& target, bool exists, const struct stat& st, const std::string& dir) {
  struct stat dir_st {};
  if (::stat(dir.c_str(), &dir_st) != 0) return {};  // (making the temporary file will say why)
#if defined(__linux__) && defined(STATX_ATTR_IMMUTABLE) && defined(STATX_ATTR_APPEND)
  // The attributes of chattr(1), which stat() does not give; a file system
  // that keeps none leaves them out of stx_attributes_mask.
  auto attributes = [](const std::string& path) -> std::uint64_t {
    struct statx sx {};
    if (::statx(AT_FDCWD, path.c_str(), 0, 0, &sx) != 0) return 0;
    return sx.stx_attributes & sx.stx_attributes_mask;
  };
  if (attributes(dir) & STATX_ATTR_APPEND)
    return cat("its directory ", quote_name(dir),
               " is append-only (chattr +a): no file written there can be renamed into place");
  if (exists) {
    const std::uint64_t a = attributes(target);
    if (a & STATX_ATTR_IMMUTABLE) return "it is immutable (chattr +i), so it cannot be replaced";
    if (a & STATX_ATTR_APPEND) return "it is append-only (chattr +a), so it cannot be replaced";
  }
#endif
  const uid_t me = ::geteuid();
  if (exists && (dir_st.st_mode & S_ISVTX) != 0 && st.st_uid != me && dir_st.st_uid != me && !may_override_sticky())
    return cat("it belongs to another user (uid ", st.st_uid, ") in a sticky directory ", quote_name(dir),
               " (mode +t, like /tmp), where only the file's owner, the directory's owner or a process with "
               "CAP_FOWNER may replace it");
  return {};
}

/// One in-progress replacement of a file. Not copyable; the destructor
/// removes the temporary file unless commit() succeeded. (A template only
/// so that its members compile in the TUs that use them: AtomicFile.)
template <class = void>
class BasicAtomicFile {
 public:
  explicit BasicAtomicFile(FileOps& ops = default_file_ops()) : ops_(ops) {}
  BasicAtomicFile(const BasicAtomicFile&) = delete;
  BasicAtomicFile& operator=(const BasicAtomicFile&) = delete;
  ~BasicAtomicFile() { discard(); }

  /// Before open(): `watch` is told the temporary file's path once it is
  /// created and once it is gone (WriteOptions::on_temporary).
  void watch_temporary(TemporaryWatch watch) noexcept { watch_ = watch; }

  /// Creates the temporary file next to `path` and reserves `size` bytes.
  Expected<void> open(const std::string& path, std::uint64_t size) {
    path_ = path;
    // Not paths at all: refused before anything is looked at. A NUL would
    // end the path the system calls see, so the file would be written (and
    // reported written) somewhere else than asked.
    failure_errno_ = EINVAL;
    if (path.empty()) return Expected<void>(Error::InvalidArgument, "cannot write '': the path is empty");
    if (Expected<void> ok = refuse_nul_in_path("write", path); !ok) return ok;
    // Offsets reach the system calls as off_t, which has 32 bits in a
    // program built for a 32-bit ABI without _FILE_OFFSET_BITS=64 (glibc's
    // i386 and armhf): there a file past 2 GiB would fail with EFBIG
    // halfway, or reserve a wrapped size. Refused before anything is made.
    if (size > static_cast<std::uint64_t>((std::numeric_limits<off_t>::max)())) {
      if (sizeof(off_t) < 8)
        return refuse(EFBIG, cat("the file would be ", size, " bytes, more than this program's 32-bit off_t "
                                 "reaches (2^31 - 1); build it with -D_FILE_OFFSET_BITS=64"));
      return refuse(EFBIG, cat("the file would be ", size, " bytes, more than 2^63 - 1"));
    }
    // Past a file size limit (RLIMIT_FSIZE, `ulimit -f`) the kernel sends
    // SIGXFSZ, which ends the process unless it is caught or ignored, at
    // the reservation or the first write beyond it (only then is it EFBIG):
    // refused before anything is made.
    struct rlimit fsize {};
    if (::getrlimit(RLIMIT_FSIZE, &fsize) == 0 && fsize.rlim_cur != RLIM_INFINITY &&
        size > static_cast<std::uint64_t>(fsize.rlim_cur))
      return refuse(EFBIG, cat("the file would be ", size, " bytes, more than this process's file size limit (",
                               static_cast<std::uint64_t>(fsize.rlim_cur), " bytes: RLIMIT_FSIZE, ulimit -f)"));
    target_ = path;
    struct stat st {};
    bool exists = false;
    if (stat_path(path.c_str(), false, &st) == 0) {
      if (S_ISLNK(st.st_mode)) {
        // Replace what the link points at and keep the link itself. But not
        // through a link the kernel would refuse to follow for open(2) here
        // (fs.protected_symlinks): one in a sticky, world-writable directory
        // such as /tmp, owned by neither this user nor the directory's
        // owner. realpath and rename never apply that rule, so following it
        // would let another user aim a write by root at any file; every link
        // of the chain is checked (a link of one's own may point at a
        // planted one).
        if (Expected<void> ok = check_link_chain(path, st); !ok) return ok;
        char* real = ::realpath(path.c_str(), nullptr);
        if (!real) {
          const int e = errno;
          // Where it points (the first step of a chain), or the message
          // would not say what is missing.
          char to[PATH_MAX];
          const ssize_t n = ::readlink(path.c_str(), to, sizeof to);
          const std::string step =
              n > 0 ? "resolve symbolic link (to " + quote_name(std::string(to, static_cast<std::size_t>(n))) + ")"
                    : std::string("resolve symbolic link");
          return fail_errno(step, e);
        }
        target_ = real;
        std::free(real);
        if (const int e = errno_of(stat_path(target_.c_str(), true, &st)))
          return fail_errno("stat " + quote_name(target_), e);
      }
      if (!S_ISREG(st.st_mode))
        return refuse(EINVAL, not_regular_file(st.st_mode));
      exists = true;
    } else if (errno != ENOENT) {
      const int e = errno;
      return fail_errno("stat", e);
    }

    const std::size_t slash = target_.rfind('/');
    dir_ = parent_dir(target_);
    std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
    if (base.empty() || base == "." || base == "..") return refuse(EISDIR, "the path names a directory, not a file");
    // What would fail only at the rename, after every byte is written.
    if (std::string why = replace_refusal(target_, exists, st, dir_); !why.empty()) return refuse(EPERM, why);
    const std::size_t keep = temp_base_max(ops_.name_max(dir_.c_str()));  // (see kTempBaseMax)
    if (base.size() > keep) base.resize(keep);
    std::string tmpl = dir_ + "/." + base + kTempSuffix;
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    // A new file is created asking for 0666, as any program creating a file
    // does: the kernel narrows that by the directory's default ACL, or else
    // by the umask, so the file gets what a fresh file gets there. (Applying
    // the umask ourselves missed the ACL, and needed /proc to read it.) A
    // replacement is created 0600 and given the replaced file's mode in commit():
    // while it is written, no one may read more than the old file let them.
    // Room for the name first: an allocation that failed once the file
    // exists would leave it unnamed, so never removed.
    temp_.reserve(buf.size());
    {
      // Told before anything is reserved or written: from here on a process
      // ended by a signal leaves this file, unless its handler removes it.
      // Handled signals wait from its creation until then (SignalHold).
      SignalHold hold(watch_.on_temporary != nullptr);
      const int fd = ops_.make_temp(buf.data(), exists ? 0600 : 0666);
      if (fd < 0) {
        const int e = errno;
        return fail_errno("create a temporary file in directory " + quote_name(dir_), e);
      }
      fd_ = fd;
      temp_ = buf.data();
      watch_.tell(temp_.c_str(), true);
    }

    // A replacement takes the destination's mode (a new file has its own).
    int mode = exists ? static_cast<int>(st.st_mode & 07777) : -1;  // -1: leave it
    // A replaced file keeps its owner and group too, as far as this process
    // may give them (root: both; the owner: a group it belongs to). Its
    // set-user-ID and set-group-ID bits stay only with the owner and group
    // they were for: root replacing a user's setuid file must not make a
    // setuid-root one. (Owner first: a chown clears those bits, and the
    // mode is set after it.)
    // Compared with the temporary's own owner and group, which a setgid
    // directory gives its group rather than this process's.
    struct stat tmp_st {};
    if (exists && ::fstat(fd_, &tmp_st) == 0 && (st.st_uid != tmp_st.st_uid || st.st_gid != tmp_st.st_gid)) {
      bool uid_kept = ::fchown(fd_, st.st_uid, st.st_gid) == 0, gid_kept = uid_kept;
      if (!uid_kept) {
        gid_kept = ::fchown(fd_, static_cast<uid_t>(-1), st.st_gid) == 0;
        uid_kept = st.st_uid == tmp_st.st_uid;
        gid_kept = gid_kept || st.st_gid == tmp_st.st_gid;
      }
      if (!uid_kept) mode &= ~static_cast<int>(S_ISUID);
      if (!gid_kept) mode &= ~static_cast<int>(S_ISGID);
    }
    // A replaced file's POSIX access ACL goes with it, and a replacement
    // has none that the old file had not: the mode's group bits are an
    // ACL's mask, so the mode alone would give the owning group what only
    // the mask allowed, drop the named users' entries, and keep the ones
    // the directory's default ACL gave the temporary file. (Copied in
    // commit(), just before the mode, which then sets the same mask and the
    // set-ID bits: an ACL set here gave the temporary file its owner entry
    // before the check, and user::-w- kept the check from reading it.)
    // The mode itself is set in commit(), once every byte is written: a
    // write or fallocate by a process without CAP_FSETID clears the set-user-ID
    // bit, and the set-group-ID bit of a group-executable file, so set before
    // them a non-root owner's setuid file came out without it (a review found
    // 4755, 2755 and 6755 replaced as 755). Until then it stays 0600.
    mode_ = mode;
    if (size > 0)
      if (const int e = errno_of(ops_.reserve(fd_, static_cast<off_t>(size))))
        return fail_errno(cat("reserve ", size, " bytes for temporary file ", quote_name(temp_)), e);
    return {};
  }

  /// Writes the pieces in order at the current offset. Consumes `iov`.
  Expected<void> write(std::vector<struct iovec>& iov) {
    std::size_t first = 0;
    while (first < iov.size()) {
      if (iov[first].iov_len == 0) {
        ++first;
        continue;
      }
      const std::size_t pieces = iov.size() - first;
      const int count = static_cast<int>(pieces < kMaxIov ? pieces : kMaxIov);
      const ssize_t w = ops_.writev(fd_, iov.data() + first, count);
      if (w < 0) {
        const int e = errno;
        if (e == EINTR) continue;
        return fail_errno(cat("write to temporary file ", quote_name(temp_), " at offset ", offset_), e);
      }
      if (w == 0)
        return fail_errno(cat("write to temporary file ", quote_name(temp_), " at offset ", offset_), EIO);
      offset_ += static_cast<std::uint64_t>(w);
      auto left = static_cast<std::size_t>(w);
      while (left > 0) {
        if (left >= iov[first].iov_len) {
          left -= iov[first].iov_len;
          ++first;
        } else {
          iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
          iov[first].iov_len -= left;
          left = 0;
        }
      }
    }
    iov.clear();
    return {};
  }

  /// Overwrites bytes already written (the metadata's content hashes).
  Expected<void> write_at(const void* data, std::size_t size, std::uint64_t offset) {
    const auto* p = static_cast<const std::uint8_t*>(data);
    while (size > 0) {
      const ssize_t w = ops_.pwrite(fd_, p, size, static_cast<off_t>(offset));
      const int e = w < 0 ? errno : EIO;
      if (w < 0 && e == EINTR) continue;
      if (w <= 0) return fail_errno(cat("write to temporary file ", quote_name(temp_), " at offset ", offset), e);
      p += w;
      size -= static_cast<std::size_t>(w);
      offset += static_cast<std::uint64_t>(w);
    }
    return {};
  }

  /// Makes the temporary file the destination. `durable`: fsync the file
  /// before and the directory after the rename. `check`, if given, sees
  /// the closed temporary file first; its error stops the replacement
  /// (WriteOptions::check_before_replace).
  Expected<void> commit(bool durable, Expected<void> (*check)(const char*, void*) = nullptr,
                        void* check_context = nullptr) {
    // With a check, a replaced file's mode is set after it: the check reads
    // the file, which its owner may do while it is 0600, but not under a
    // mode such as 0200 or 0000 (a write-only destination could never be
    // replaced under a check: the demo's read-back failed, "Permission
    // denied", on the temporary file it had just written). A second
    // descriptor is kept open for that fchmod; the first is closed before
    // the check all the same (close can report a deferred write error).
    const bool mode_after_check = mode_ >= 0 && check != nullptr;
    if (mode_ >= 0 && !mode_after_check)
      if (Expected<void> ok = take_replaced_access(); !ok) return ok;
    if (durable)
      if (const int e = errno_of(ops_.fsync(fd_))) return fail_errno("fsync temporary file " + quote_name(temp_), e);
    int kept = -1;
    if (mode_after_check) {
      kept = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
      if (kept < 0) {
        const int e = errno;
        return fail_errno("duplicate the descriptor of temporary file " + quote_name(temp_), e);
      }
    }
    const int fd = fd_;
    fd_ = kept;  // (-1, or the second descriptor: discard() closes it on a failure below)
    if (const int e = errno_of(ops_.close(fd))) return fail_errno("close temporary file " + quote_name(temp_), e);
    // The check's own error code, but for NotDurable, which promises the
    // new file in place (here the old one stays), and Ok: IoError then.
    if (check != nullptr)
      if (Expected<void> r = check(temp_.c_str(), check_context); !r)
        return Expected<void>(r.error() == Error::NotDurable || r.error() == Error::Ok ? Error::IoError : r.error(),
                              "cannot write " + quote_name(path_) + ": the check before replacing it failed: " +
                                  r.message());
    if (mode_after_check) {
      if (Expected<void> ok = take_replaced_access(); !ok) return ok;
      if (durable)
        if (const int e = errno_of(ops_.fsync(fd_)))
          return fail_errno("fsync temporary file " + quote_name(temp_), e);
      const int second = fd_;
      fd_ = -1;
      if (const int e = errno_of(ops_.close(second)))
        return fail_errno("close temporary file " + quote_name(temp_), e);
    }
    // Everything that allocates is done before the rename: the directory's
    // path, and the whole NotDurable message but the system's reason, with
    // room reserved for it (255 characters: the most errno_text_into writes
    // into its buffer; the C library's own texts are far shorter). Once
    // the rename is done, running out of memory (std::bad_alloc) would be
    // a failure with the destination already replaced. Built after it, an
    // allocation that failed there threw with the new file in place
    // (tests/crash_safety.cpp, every allocation of a write failed in turn,
    // with and without a failing directory fsync).
    const std::string dir_dot = durable ? (dir_ == "/" ? std::string("/.") : dir_ + "/.") : std::string();
    static constexpr char kNotDurableEnd[] = " (the new file is in place; its rename may not survive a power loss)";
    std::string not_durable;
    if (durable) {
      not_durable = "wrote " + quote_name(path_) + ", but fsync directory " + quote_name(dir_) + " failed: ";
      not_durable.reserve(not_durable.size() + 255 + sizeof kNotDurableEnd);
    }
    if (const int e = errno_of(ops_.rename(temp_.c_str(), target_.c_str())))
      return fail_errno("rename " + quote_name(temp_) + " to " + quote_name(target_), e);
    committed_ = true;
    watch_.tell(temp_.c_str(), false);  // (its name now is the destination's)
    // From here on the destination is the new file: a failure is no longer
    // an IoError (which promises the destination untouched) but NotDurable.
    // The directory is opened as "<dir>/.", not "<dir>": one reached
    // through a symbolic link is then followed as a middle part of the path,
    // as it was for the temporary file and the rename. As the last part,
    // fs.protected_symlinks refuses a link in a sticky, world-writable
    // directory owned by neither this user nor the directory's owner, and
    // every write through it would have ended NotDurable.
    if (durable)
      if (const int e = errno_of(ops_.fsync_directory(dir_dot.c_str()))) {
        // At most the 255 characters reserved (a GNU strerror_r may give a
        // text of its own, a translation, of no bounded length): no allocation.
        char reason[256];
        const char* text = errno_text_into(e, reason);
        const std::size_t length = std::strlen(text);
        not_durable.append(text, length < 255 ? length : 255);
        not_durable += kNotDurableEnd;
        return Expected<void>(Error::NotDurable, std::move(not_durable));
      }
    return {};
  }

  /// Closes and removes the temporary file (no-op after commit()).
  /// Returns the errno of a failed removal, else 0.
  int discard() noexcept {
    if (fd_ >= 0) {
      ops_.close(fd_);
      fd_ = -1;
    }
    int e = 0;
    if (!committed_ && !temp_.empty()) {
      e = errno_of(ops_.unlink(temp_.c_str()));
      // One that could not be removed is not gone: the error names it.
      if (e == 0 || e == ENOENT) watch_.tell(temp_.c_str(), false);
      temp_.clear();
    }
    return e;
  }
  /// The failure `r` of a write, after discard(). What made the write fail
  /// may keep the temporary file from being removed too (a file system
  /// remounted read-only after an I/O error, as ext4's errors=remount-ro
  /// does; a directory made unwritable meanwhile): then `r`'s message says
  /// so and names it, for the caller to remove. The destination is as it
  /// was either way. (NotDurable: committed, nothing to remove.)
  Expected<void> abandon(Expected<void> r) {
    // Committed, nothing is removed, and nothing may allocate: the
    // destination is already the new file (see commit()).
    if (committed_) {
      discard();
      return r;
    }
    const std::string temp = temp_;
    if (const int e = discard(); e != 0 && e != ENOENT)
      return Expected<void>(r.error(), r.message() + "; the temporary file " + quote_name(temp) +
                                           " could not be removed: " + errno_text(e));
    return r;
  }

  std::uint64_t offset() const noexcept { return offset_; }
  const std::string& temp_path() const noexcept { return temp_; }
  /// The errno that describes open()'s failure: the system call's, or for
  /// a refusal of its own EACCES (a link not followed), EINVAL (not a
  /// regular file), EISDIR (a directory's name) or EFBIG (too big).
  int failure_errno() const noexcept { return failure_errno_; }
  /// Error for a failure the caller detected (not a system call).
  Expected<void> fail_msg(const std::string& what) const {
    return Expected<void>(Error::IoError, "cannot write " + quote_name(path_) + ": " + what);
  }

 private:
  /// Refuses a chain of symbolic links (from `path`, whose lstat is `st`)
  /// with a link the kernel's protected_symlinks rule would not follow.
  Expected<void> check_link_chain(const std::string& path, struct stat st) {
    std::string link = path;
    for (int hop = 0; S_ISLNK(st.st_mode); ++hop) {
      if (hop == 40) return fail_errno("resolve symbolic link", ELOOP);
      const std::string dir = parent_dir(link);
      struct stat ld {};
      if (const int e = errno_of(::stat(dir.c_str(), &ld))) return fail_errno("stat " + quote_name(dir), e);
      if ((ld.st_mode & S_ISVTX) && (ld.st_mode & S_IWOTH) && st.st_uid != ::geteuid() && st.st_uid != ld.st_uid)
        return refuse(EACCES, cat(link == path ? "it is" : cat("it leads to ", quote_name(link), ",").c_str(),
                                  " a symbolic link owned by another user (uid ", st.st_uid,
                                  ") in a sticky, world-writable directory: not followed, as the kernel's "
                                  "protected_symlinks would not follow it"));
      char buf[PATH_MAX];
      const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
      if (n < 0) {
        const int e = errno;
        return fail_errno("read symbolic link " + quote_name(link), e);
      }
      const std::string to(buf, static_cast<std::size_t>(n));
      link = !to.empty() && to[0] == '/' ? to : dir + "/" + to;
      if (stat_path(link.c_str(), false, &st) != 0) return {};  // dangling: realpath reports it
    }
    return {};
  }
  /// Gives the temporary file (open as fd_) the replaced file's access ACL
  /// and then its mode, which sets the same mask and the set-ID bits.
  Expected<void> take_replaced_access() {
    if (Expected<void> ok = copy_access_acl(); !ok) return ok;
    if (const int e = errno_of(ops_.fchmod(fd_, static_cast<mode_t>(mode_))))
      return fail_errno("chmod temporary file " + quote_name(temp_), e);
    return {};
  }
  /// Gives the temporary file the access ACL of target_, or none if it
  /// has none (where the system has POSIX ACLs).
  Expected<void> copy_access_acl() {
#if defined(__linux__)
    static const char kName[] = "system.posix_acl_access";
    std::vector<char> acl;
    for (;;) {
      const ssize_t n = ::getxattr(target_.c_str(), kName, nullptr, 0);
      if (n < 0) {
        const int e = errno;
        if (e == ENODATA || e == EOPNOTSUPP) break;  // no ACL, or none on this file system
        return fail_errno("read the access ACL of " + quote_name(target_), e);
      }
      acl.resize(static_cast<std::size_t>(n));
      const ssize_t m = n == 0 ? 0 : ::getxattr(target_.c_str(), kName, acl.data(), acl.size());
      if (m >= 0) {
        acl.resize(static_cast<std::size_t>(m));
        break;
      }
      if (errno == ENODATA) {  // removed since the size was asked: none
        acl.clear();
        break;
      }
      if (errno != ERANGE) {  // ERANGE: it grew meanwhile; again
        const int e = errno;
        return fail_errno("read the access ACL of " + quote_name(target_), e);
      }
    }
    if (!acl.empty()) {
      if (::fsetxattr(fd_, kName, acl.data(), acl.size(), 0) != 0) {
        const int e = errno;
        return fail_errno("set the access ACL of temporary file " + quote_name(temp_), e);
      }
    } else if (::fremovexattr(fd_, kName) != 0 && errno != ENODATA && errno != EOPNOTSUPP) {
      const int e = errno;
      return fail_errno("remove the access ACL of temporary file " + quote_name(temp_), e);
    }
#endif
    return {};
  }
  static constexpr std::size_t kMaxIov = 1024;  // IOV_MAX on Linux and the BSDs

  /// 0 if a call succeeded (returned 0), else its errno (never 0). Read
  /// before building a message: allocating may clobber errno.
  static int errno_of(int rc) noexcept { return rc == 0 ? 0 : (errno != 0 ? errno : EIO); }

  Expected<void> fail_errno(const std::string& operation, int e) {
    failure_errno_ = e;
    return Expected<void>(Error::IoError,
                          "cannot write " + quote_name(path_) + ": " + operation + " failed: " + errno_text(e));
  }

  /// fail_msg for open()'s own refusals, with the errno that names them.
  Expected<void> refuse(int e, const std::string& what) {
    failure_errno_ = e;
    return fail_msg(what);
  }

  FileOps& ops_;
  TemporaryWatch watch_;
  std::string path_, target_, dir_, temp_;
  int fd_ = -1;
  int mode_ = -1;  ///< the replaced file's mode, set by commit(); -1: a new file keeps its own
  int failure_errno_ = 0;
  std::uint64_t offset_ = 0;
  bool committed_ = false;
};
using AtomicFile = BasicAtomicFile<>;

/// Whether a file can be written at `path`: it names a file (not a
/// directory, nor anything but a regular file if it exists, nor a link to
/// nothing), in a directory that exists and where a file can be created;
/// errno says why not. For a
/// tool to check an output before the work whose result goes there (the
/// writer itself checks again, with a full message, when it writes). It
/// opens the writer's own temporary file, and removes it: permission bits
/// say nothing for root, nor for a read-only mount or a filesystem such as
/// /proc, and a symbolic link is followed as the writer follows it (its
/// temporary goes beside what the link points at, and a link the writer
/// would not follow is refused, EACCES). `watch` is told of that
/// temporary file as a write's would be.
template <int = 0>
bool can_create_file(const std::string& path, TemporaryWatch watch = {}) {
  struct stat st {};
  const bool exists = !path.empty() && stat_path(path.c_str(), true, &st) == 0;
  if (path.empty() || path.back() == '/' || (exists && S_ISDIR(st.st_mode))) {
    errno = EISDIR;
    return false;
  }
  // A device, a fifo or a socket (/dev/null): the writer would replace it
  // with a regular file where it may (root), so it is refused too, but it
  // is no directory ("Is a directory" for /dev/null misled).
  if (exists && !S_ISREG(st.st_mode)) {
    errno = EINVAL;
    return false;
  }
  const std::string dir = parent_dir(path);
  if (::stat(dir.c_str(), &st) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return false;
  }
  // The writer's own first step, undone by its destructor.
  BasicAtomicFile<void> file;
  file.watch_temporary(watch);
  if (file.open(path, 0).ok()) return true;
  errno = file.failure_errno();
  return false;
}

/// Why can_create_file refused `path`, in words, from the errno `e` it
/// left: a device, FIFO or socket (EINVAL) in the writer's own words; a
/// name ending in '/' that names nothing yet (EISDIR) as that ("Is a
/// directory" would say something is there); a symbolic link to nothing
/// (ENOENT) as that ("No such file or directory" would read as if a new
/// file could not be made); ENOENT with the directory there, as a
/// directory where no file can be made (/proc); EACCES in the writer's
/// own words, asked of its first step again (a link it does not follow,
/// "Permission denied" alone said nothing of why; a directory that refuses
/// its temporary file, named); anything else by the errno's text. For the
/// tools' messages; `watch` as for can_create_file.
template <int = 0>
std::string cannot_create_reason(const std::string& path, int e, TemporaryWatch watch = {}) {
  struct stat st {};
  if (e == EACCES) {
    BasicAtomicFile<void> file;
    file.watch_temporary(watch);
    const Expected<void> r = file.open(path, 0);
    const std::string prefix = "cannot write " + quote_name(path) + ": ";
    if (!r && file.failure_errno() == EACCES && r.message().compare(0, prefix.size(), prefix) == 0)
      return r.message().substr(prefix.size());
  }
  if (e == EINVAL && stat_path(path.c_str(), true, &st) == 0 && !S_ISREG(st.st_mode))
    return not_regular_file(st.st_mode);
  if (e == EISDIR && !path.empty() && path.back() == '/' && stat_path(path.c_str(), true, &st) != 0)
    return "the name ends in '/', which names a directory, not a file";
  struct stat target_st {};
  if (e == ENOENT && stat_path(path.c_str(), false, &st) == 0 && S_ISLNK(st.st_mode) &&
      stat_path(path.c_str(), true, &target_st) != 0) {
    char target[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), target, sizeof target);
    if (n >= 0) return cat("a symbolic link to ", std::string_view(target, static_cast<std::size_t>(n)),
                           ", which does not exist");
  }
  // A file the writer could make but not rename into place: the rule that
  // stops it (replace_refusal), found again where the writer looks, beside
  // what a symbolic link points at.
  // Where the writer's temporary goes, found as the writer finds it
  // (open()): beside what a symbolic link points at, else beside the name
  // as given. Resolving every name that exists named an existing file's
  // directory as a full path ('/home/u/ap' for ap/old.json) and a new
  // one's as given ('ap' for ap/new.json), where the writer's own message
  // and the rest of the tools' name it as given.
  auto resolved = [&path] {
    struct stat link_st {};
    if (stat_path(path.c_str(), false, &link_st) == 0 && S_ISLNK(link_st.st_mode))
      if (char* real = ::realpath(path.c_str(), nullptr)) {
        std::string target = real;
        std::free(real);
        return target;
      }
    return path;
  };
  if (e == EPERM) {
    const std::string target = resolved();
    const bool exists = stat_path(target.c_str(), true, &st) == 0;
    if (std::string why = replace_refusal(target, exists, st, parent_dir(target)); !why.empty()) return why;
  }
  // A file that is to be made: "No such file or directory" read as if the
  // file had to exist (a user trial). What is missing is its directory.
  if (e == ENOENT) {
    const std::string dir = parent_dir(path);
    if (stat_path(dir.c_str(), true, &st) != 0) {
      if (errno == ENOENT) return cat("its directory ", dir, " does not exist");
    } else if (S_ISDIR(st.st_mode)) {
      // The directory is there, and creating the writer's temporary in it
      // (beside what a link points at) said ENOENT: a filesystem such as
      // /proc, where no new file can be made. Bare, the errno's text read
      // as if /proc/version did not exist.
      return cat("no file can be created in its directory ", parent_dir(resolved()), " (", errno_text(e), ")");
    }
  }
  return errno_text(e);
}

/// Replaces `path` with `text`, as write_ptd_file replaces a store: on any
/// failure the destination is untouched. For the tools' reports (JSON):
/// a report cut off by a full disk, over the previous good one, is worse
/// than the previous one.
template <int = 0>
Expected<void> write_whole_file(const std::string& path, const std::string& text, bool durable,
                                FileOps& ops = default_file_ops(), TemporaryWatch watch = {}) {
  AtomicFile file(ops);
  file.watch_temporary(watch);
  if (Expected<void> r = file.open(path, text.size()); !r) return file.abandon(std::move(r));
  std::vector<struct iovec> iov{iovec{const_cast<char*>(text.data()), text.size()}};
  if (Expected<void> r = file.write(iov); !r) return file.abandon(std::move(r));
  return file.abandon(file.commit(durable));
}

}  // namespace detail
}  // namespace wdedup

#endif  // WDEDUP_DETAIL_ATOMIC_FILE_HPP
