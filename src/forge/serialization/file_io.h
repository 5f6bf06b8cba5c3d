// POSIX file access for checkpoints: positional reads from one open descriptor, and writes
// that replace a file atomically. Every error names the path and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace forge {

/// A regular file opened read-only, closed on destruction. read_at() is positional (pread),
/// so one InputFile may serve several threads at once.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  /// The size when opened; reads past it fail rather than trusting a file that shrank.
  uint64_t size() const { return size_; }
  /// Reads exactly `bytes` bytes at `offset` into `dst`.
  void read_at(uint64_t offset, void* dst, std::size_t bytes) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

/// The whole of a regular file, read through InputFile, so the read is bounded by the size the
/// file had when opened; a FIFO, device or directory is an error naming the path (never a hang
/// or an endless read). The one whole-file reader: the library, the CLI, the tests and the
/// benchmarks all read through it rather than each looping over a stream. (Not for /proc files,
/// whose size reads as 0: those are parsed as streams.)
std::string read_regular_file(const std::string& path);

/// Appends `text` to the existing regular file `path` in one write(2) on a descriptor opened
/// O_APPEND, then fdatasync: what the file held is never rewritten. A short write (a full disk)
/// is cut back off, so on an error the file is as it was. A kill cannot tear a one-page write in
/// practice; should one ever, the line lacks its newline, which line-based readers drop.
void append_to_file(const std::string& path, const std::string& text);

/// Writes `path` atomically: bytes go to `path.tmp.<pid>`; commit() fsyncs and renames it over
/// `path`. Destroyed without a successful commit(), the temporary is removed, so a failure or a
/// crash never leaves a half-written file under the final name.
class AtomicFileWriter {
 public:
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, std::size_t bytes);
  void commit();

 private:
  void close_fd();

  std::string path_;
  std::string tmp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

}  // namespace forge
