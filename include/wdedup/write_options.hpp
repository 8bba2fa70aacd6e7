// wdedup/write_options.hpp — the vocabulary of the .ptd writer: its options,
// the statistics it reports and the ByteSink it can write to. Build-time
// half. The writer itself is wdedup/ptd_writer.hpp.
#ifndef WDEDUP_WRITE_OPTIONS_HPP
#define WDEDUP_WRITE_OPTIONS_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "wdedup/expected.hpp"
#include "wdedup/runtime/detail/format.hpp"

namespace wdedup {

/// How write_ptd lays a file out.
struct WriteOptions {
  /// segment_base_offset is a multiple of this, and every segment starts at
  /// a file offset that is a multiple of lcm(segment_alignment, the
  /// alignments its keys asked for). 128 is what ExecuTorch's export
  /// pipeline uses. Any value in [1, kMaxAlignment], not only powers of two.
  std::uint64_t segment_alignment = format::kDefaultSegmentAlignment;
  /// Write the WDX1 block (hash index, per-segment hashes and alignments,
  /// function maps). ExecuTorch ignores it. Without it the file is a plain
  /// FlatTensor file, byte-identical to ExecuTorch's for the same store
  /// whenever ExecuTorch's base-relative alignment is also absolute.
  /// Function maps given are checked either way (each row's key exists, no
  /// name repeats where a reader would pick one), so a caller's mistake
  /// shows whichever way the file is written; without the block they are
  /// then not written.
  bool wdedup_extensions = true;
  /// Seed of the key index hash (detail::key_hash), stored in the file:
  /// the first one tried. Keys that collide under it past the probes a
  /// reader allows (format::probe_budget: keys chosen against it) are
  /// placed under seeds derived from it instead, and the file stores the
  /// one used; InvalidArgument if three more fail too.
  std::uint64_t hash_seed = 0;
  /// write_ptd_file only: fsync the file before the rename and the directory
  /// after it, so the new file survives a power loss. Without it the
  /// replacement is still atomic for every reader and survives a crash of
  /// the writing process, but not of the machine.
  bool fsync = true;
  /// write_ptd_file only: a check of the finished file before it replaces
  /// the destination. Called with the temporary file's path once the file
  /// is whole, synced (with `fsync`) and closed, and with `check_context`.
  /// An error it returns fails the write: the temporary file is removed,
  /// the destination is left as it was, and the error comes back with its
  /// code (IoError for NotDurable, which would say the new file is in
  /// place), its message prefixed with what was being written. (The demo
  /// opens the file there with NamedDataMap and reads every tensor back,
  /// so a store that does not read back never replaces a good one.) Until
  /// the check has passed the file is 0600, readable by its owner: a
  /// replaced file's mode (0200, say) is given to it after the check.
  Expected<void> (*check_before_replace)(const char* written_path, void* check_context) = nullptr;
  void* check_context = nullptr;
  /// write_ptd_file only: told where the temporary file is, for a program
  /// that removes it when a signal ends the process mid-write (a handler
  /// may unlink() a path copied here; the demo does). Called on the writing
  /// thread with `exists` true once the temporary file is created, before
  /// a byte of it is reserved or written, and with false once it no longer
  /// exists under that name: renamed over the destination, or removed
  /// after a failure. One that could not be removed is not reported gone
  /// (the write's error names it). The path is the one the writer opened:
  /// relative to the working directory if the destination's path is and
  /// is not a symbolic link. Between the rename and the call with false, a
  /// handler's unlink finds no such file: the rename moved the name. From
  /// just before the file's creation until the first call, the writing
  /// thread holds back the signals the process handles (a handler that ran
  /// in between could not remove the file); a program whose other threads
  /// run meanwhile holds its stop signals in those. Must not throw: it is
  /// also called while a failed write cleans up.
  void (*on_temporary)(const char* temp_path, bool exists, void* temporary_context) = nullptr;
  void* temporary_context = nullptr;
};

/// What a write produced.
struct WriteStats {
  std::uint64_t file_size = 0;
  /// Bytes carrying metadata: root offset, identifier, the padded FH01
  /// header and the rest of the flatbuffer (48 + flatbuffer_size), plus the
  /// WDX1 block.
  std::uint64_t metadata_size = 0;
  std::uint64_t flatbuffer_size = 0;  ///< the header's flatbuffer_size field
  std::uint64_t extension_size = 0;   ///< WDX1 block, 0 if not written
  std::uint64_t segment_base_offset = 0;
  std::uint64_t data_bytes = 0;  ///< sum of segment sizes
  /// Zero bytes: file_size - metadata_size - data_bytes (alignment padding
  /// after the metadata and between segments).
  std::uint64_t padding_bytes = 0;
  std::uint32_t key_count = 0;
  std::uint32_t segment_count = 0;
  std::uint32_t function_count = 0;  ///< function maps written: 0 without wdedup_extensions
};

/// Where write_ptd sends the file, front to back, in one pass. A failed
/// write stops the writer, which returns the sink's error.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual Expected<void> write(const void* data, std::size_t size) = 0;
};

/// A sink that appends to a byte vector (what serialize_ptd uses). (A
/// template only so that write() compiles in the TUs that make one: a
/// virtual function is compiled with its class, used or not.)
template <class = void>
class BasicVectorSink final : public ByteSink {
 public:
  explicit BasicVectorSink(std::vector<std::uint8_t>& out) : out_(out) {}
  Expected<void> write(const void* data, std::size_t size) override {
    // resize + memcpy, not insert(end, p, p + size): the same bytes, and a
    // much smaller instantiation where it is compiled.
    if (size == 0) return {};
    const std::size_t at = out_.size();
    out_.resize(at + size);
    std::memcpy(out_.data() + at, data, size);
    return {};
  }

 private:
  std::vector<std::uint8_t>& out_;
};
using VectorSink = BasicVectorSink<>;

}  // namespace wdedup

#endif  // WDEDUP_WRITE_OPTIONS_HPP
