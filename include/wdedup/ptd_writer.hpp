// wdedup/ptd_writer.hpp — writes a NamedDataStore (and the function maps of
// the program it came from) as one ExecuTorch FlatTensor .ptd file, with the
// optional WDX1 extension block the wdedup reader uses. Build-time half.
//
//   write_ptd_file(store, maps, "model.ptd")   crash-safe replacement of a file
//   write_ptd(store, maps, sink)               front-to-back into any ByteSink
//   serialize_ptd(store, maps)                 into memory
//
// All three produce the same bytes. Nothing is written before the whole
// input has been validated; the data bytes are written straight from the
// store's (caller's) memory, never copied. Layout: see
// wdedup/runtime/detail/format.hpp.
//
// The functions are templates on an unused `int` parameter (call them as
// plain functions) so that a TU including this header without calling them
// does not compile them, nor what they instantiate.
#ifndef WDEDUP_PTD_WRITER_HPP
#define WDEDUP_PTD_WRITER_HPP

#include "wdedup/runtime/detail/cxx17.hpp"  // first: a standard before C++17 gets one clear error

#include <cstdint>
#include <string>
#include <vector>

#include <sys/uio.h>

#include "wdedup/detail/atomic_file.hpp"
#include "wdedup/detail/ptd_plan.hpp"
#include "wdedup/expected.hpp"
#include "wdedup/function_map.hpp"
#include "wdedup/hash.hpp"
#include "wdedup/named_data_store.hpp"
#include "wdedup/write_options.hpp"

namespace wdedup {
namespace detail {

/// Zeros for padding, shared by every write (never written to).
inline const std::uint8_t* zero_block() noexcept {
  alignas(64) static const std::uint8_t zeros[64 * 1024] = {};
  return zeros;
}
constexpr std::size_t kZeroBlockSize = 64 * 1024;

/// How much segment data is hashed and then written in one piece: small
/// enough to stay in cache between the two, large enough that system calls
/// cost nothing.
constexpr std::size_t kHashChunk = 512 * 1024;

/// Walks the file front to back, handing `out(ptr, size)` every piece:
/// metadata, padding (zero_block) and segment data. With `hashes`, also
/// computes each segment's XXH3-64 (seed 0) chunk by chunk just before the
/// chunk is handed out, so the bytes are read from memory once.
template <class Out>
Expected<void> emit_file(const PtdPlan& plan, Out&& out, std::vector<std::uint64_t>* hashes) {
  if (Expected<void> r = out(plan.metadata.data(), plan.metadata.size()); !r) return r;
  std::uint64_t at = plan.metadata.size();
  XXH3_state_t state;
  for (std::size_t i = 0; i < plan.segments.size(); ++i) {
    for (std::uint64_t pad = plan.segment_offsets[i] - at; pad > 0;) {
      const std::size_t n = pad < kZeroBlockSize ? static_cast<std::size_t>(pad) : kZeroBlockSize;
      if (Expected<void> r = out(zero_block(), n); !r) return r;
      pad -= n;
    }
    const std::uint8_t* p = plan.segments[i].data();
    const std::size_t size = plan.segments[i].size();
    if (size <= kHashChunk) {
      if (hashes) (*hashes)[i] = XXH3_64bits(p, size);
      if (size)
        if (Expected<void> r = out(p, size); !r) return r;
    } else {
      if (hashes) XXH3_64bits_reset(&state);
      for (std::size_t done = 0; done < size;) {
        const std::size_t n = size - done < kHashChunk ? size - done : kHashChunk;
        if (hashes) XXH3_64bits_update(&state, p + done, n);
        if (Expected<void> r = out(p + done, n); !r) return r;
        done += n;
      }
      if (hashes) (*hashes)[i] = XXH3_64bits_digest(&state);
    }
    at = plan.segment_offsets[i] + size;
  }
  for (std::uint64_t pad = plan.file_size - at; pad > 0;) {  // a file without segments ends at the base
    const std::size_t n = pad < kZeroBlockSize ? static_cast<std::size_t>(pad) : kZeroBlockSize;
    if (Expected<void> r = out(zero_block(), n); !r) return r;
    pad -= n;
  }
  return {};
}

template <int = 0>
void hash_segments(PtdPlan& plan) {
  for (std::size_t i = 0; i < plan.segments.size(); ++i)
    plan.set_content_hash(i, XXH3_64bits(plan.segments[i].data(), plan.segments[i].size()));
}

/// Gathers pieces into one writev of about kBatchBytes (or kMaxPieces).
/// (A template only so that its members compile where it is used.)
template <class File = AtomicFile>
class WriteBatch {
 public:
  static constexpr std::size_t kBatchBytes = kHashChunk;
  static constexpr std::size_t kMaxPieces = 256;

  explicit WriteBatch(File& file) : file_(file) { iov_.reserve(kMaxPieces); }
  Expected<void> add(const void* data, std::size_t size) {
    iov_.push_back(iovec{const_cast<void*>(data), size});
    pending_ += size;
    if (pending_ >= kBatchBytes || iov_.size() >= kMaxPieces) return flush();
    return {};
  }
  Expected<void> flush() {
    pending_ = 0;
    return file_.write(iov_);
  }

 private:
  File& file_;
  std::vector<iovec> iov_;
  std::size_t pending_ = 0;
};

/// Sends a planned file into a sink: hashes first (they precede the data),
/// then every piece in order.
template <int = 0>
Expected<void> write_plan(PtdPlan& plan, ByteSink& sink) {
  if (plan.has_extension()) hash_segments(plan);
  std::uint64_t at = 0;
  return emit_file(
      plan,
      [&](const void* p, std::size_t n) -> Expected<void> {
        Expected<void> w = sink.write(p, n);
        if (!w)
          return Expected<void>(w.error(),
                                cat("writing .ptd bytes [", at, ", ", at + n, ") to the sink failed: ", w.message()));
        at += n;
        return {};
      },
      nullptr);
}

template <int = 0>
Expected<WriteStats> write_ptd_file_with(const NamedDataStore& store, const FunctionMaps& maps,
                                         const std::string& path, const WriteOptions& options,
                                         FileOps& ops) {
  Expected<PtdPlan> planned = plan_ptd(store, maps, options);
  if (!planned) return Expected<WriteStats>(planned.build_error());
  PtdPlan& plan = *planned;

  AtomicFile file(ops);
  file.watch_temporary(TemporaryWatch{options.on_temporary, options.temporary_context});
  if (Expected<void> r = file.open(path, plan.file_size); !r)
    return Expected<WriteStats>(file.abandon(std::move(r)).build_error());
  WriteBatch<> batch(file);
  std::vector<std::uint64_t> hashes(plan.segments.size());
  Expected<void> r = emit_file(
      plan, [&batch](const void* p, std::size_t n) { return batch.add(p, n); },
      plan.has_extension() ? &hashes : nullptr);
  if (r) r = batch.flush();
  if (r && file.offset() != plan.file_size)
    r = file.fail_msg(cat("internal error: wrote ", file.offset(), " bytes of a ", plan.file_size, "-byte file"));
  // The content hashes were only known once the data had gone by: patch
  // them into the metadata already written.
  if (r && plan.has_extension() && !hashes.empty()) {
    for (std::size_t i = 0; i < hashes.size(); ++i) plan.set_content_hash(i, hashes[i]);
    r = file.write_at(plan.metadata.data() + plan.segment_info_offset,
                      hashes.size() * format::segment_info::kSize, plan.segment_info_offset);
  }
  if (r) r = file.commit(options.fsync, options.check_before_replace, options.check_context);
  if (!r) return Expected<WriteStats>(file.abandon(std::move(r)).build_error());
  return plan.stats;
}

}  // namespace detail

/// Writes the file front to back into `sink`. With the WDX1 block, segment
/// data is read twice (hashed first, since the hashes precede the data);
/// write_ptd_file reads it once.
template <int = 0>
Expected<WriteStats> write_ptd(const NamedDataStore& store, const FunctionMaps& maps, ByteSink& sink,
                               const WriteOptions& options = {}) {
  Expected<detail::PtdPlan> planned = detail::plan_ptd(store, maps, options);
  if (!planned) return Expected<WriteStats>(planned.build_error());
  if (Expected<void> r = detail::write_plan(*planned, sink); !r) return Expected<WriteStats>(r.build_error());
  return planned->stats;
}

/// write_ptd for a store without function maps.
template <int = 0>
Expected<WriteStats> write_ptd(const NamedDataStore& store, ByteSink& sink, const WriteOptions& options = {}) {
  return write_ptd(store, FunctionMaps{}, sink, options);
}

/// Replaces (or creates) `path` crash-safely: a temporary file in the same
/// directory, fsync, rename over `path`, fsync of the directory. On any
/// failure `path` is untouched, the temporary file is removed (where the
/// failure keeps it from being removed too, the error says so and names
/// it), and the error (Error::IoError for file system failures) names the
/// path, the operation and the system's reason. The one exception is the last step:
/// if the directory's fsync fails after the rename, `path` already is the
/// new, complete file, and the error is Error::NotDurable. If `path` is a symbolic link, the file
/// it points at is replaced and the link kept (unless the kernel's protected_symlinks rule would
/// not follow it: a link in a sticky, world-writable directory owned by another user); a path
/// naming anything but a regular file is refused. A replaced file keeps its mode, owner and group
/// as far as this process may give them, and (Linux) its POSIX access ACL; a failure to read or
/// set that ACL fails the write.
template <int = 0>
Expected<WriteStats> write_ptd_file(const NamedDataStore& store, const FunctionMaps& maps,
                                    const std::string& path, const WriteOptions& options = {}) {
  return detail::write_ptd_file_with(store, maps, path, options, detail::default_file_ops());
}

/// write_ptd_file for a store without function maps.
template <int = 0>
Expected<WriteStats> write_ptd_file(const NamedDataStore& store, const std::string& path,
                                    const WriteOptions& options = {}) {
  return write_ptd_file(store, FunctionMaps{}, path, options);
}

/// The whole file in memory. Where std::size_t is 32 bits, a file past
/// 4 GiB is refused with OutOfMemory.
template <int = 0>
Expected<std::vector<std::uint8_t>> serialize_ptd(const NamedDataStore& store, const FunctionMaps& maps,
                                                  const WriteOptions& options = {}) {
  Expected<detail::PtdPlan> planned = detail::plan_ptd(store, maps, options);
  if (!planned) return Expected<std::vector<std::uint8_t>>(planned.build_error());
  if (Expected<void> fits = detail::check_addressable("the file", planned->file_size); !fits)
    return Expected<std::vector<std::uint8_t>>(fits.build_error());
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(planned->file_size));
  VectorSink sink(bytes);
  if (Expected<void> r = detail::write_plan(*planned, sink); !r)
    return Expected<std::vector<std::uint8_t>>(r.build_error());
  return bytes;
}

/// serialize_ptd for a store without function maps.
template <int = 0>
Expected<std::vector<std::uint8_t>> serialize_ptd(const NamedDataStore& store,
                                                  const WriteOptions& options = {}) {
  return serialize_ptd(store, FunctionMaps{}, options);
}

}  // namespace wdedup

#endif  // WDEDUP_PTD_WRITER_HPP
