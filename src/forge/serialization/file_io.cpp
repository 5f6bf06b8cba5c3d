#include "forge/serialization/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "forge/core/error.h"

namespace forge {
namespace {

std::string reason(int err) {
  return std::generic_category().message(err);
}

std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// An open descriptor, closed when it goes out of scope.
struct Descriptor {
  explicit Descriptor(int descriptor) : fd(descriptor) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd >= 0) ::close(fd);
  }
  const int fd;
};

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  if (S_ISSOCK(mode)) return "a socket";
  return "a special file";
}

}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer before the check below.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  FORGE_CHECK(fd_ >= 0, "cannot open {}: {}", path, reason(errno));
  struct stat st {};
  const int stat_rc = ::fstat(fd_, &st);
  const int err = errno;
  // The destructor does not run for a throwing constructor, so close here before throwing.
  if (stat_rc != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    FORGE_CHECK(stat_rc == 0, "cannot stat {}: {}", path, reason(err));
    fail("cannot open {}: it is {}, not a regular file", path, file_kind(st.st_mode));
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* dst, std::size_t bytes) const {
  FORGE_CHECK(offset <= size_ && bytes <= size_ - offset,
              "{}: read of {} bytes at offset {} runs past the end of the {}-byte file", path_,
              bytes, offset, size_);
  auto* out = static_cast<char*>(dst);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd_, out + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    FORGE_CHECK(n >= 0, "cannot read {}: {}", path_, reason(errno));
    // The size was checked at open, so an early end means the file shrank underneath us.
    FORGE_CHECK(n > 0, "{}: file ended at byte {} while reading {} bytes at offset {}", path_,
                offset + done, bytes, offset);
    done += static_cast<std::size_t>(n);
  }
}

std::string read_regular_file(const std::string& path) {
  const InputFile file(path);
  std::string text(file.size(), '\0');
  file.read_at(0, text.data(), text.size());
  return text;
}

void append_to_file(const std::string& path, const std::string& text) {
  // No O_CREAT: the file's first line (a CSV header) is its writer's to create. O_NONBLOCK:
  // a FIFO without a reader fails here instead of blocking.
  const Descriptor file{::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK)};
  FORGE_CHECK(file.fd >= 0, "cannot open {} to append: {}", path, reason(errno));
  struct stat st {};
  FORGE_CHECK(::fstat(file.fd, &st) == 0, "cannot stat {}: {}", path, reason(errno));
  FORGE_CHECK(S_ISREG(st.st_mode), "cannot append to {}: it is {}, not a regular file", path,
              file_kind(st.st_mode));
  ssize_t n = 0;
  do {
    n = ::write(file.fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  if (n != static_cast<ssize_t>(text.size())) {
    if (n > 0 && ::ftruncate(file.fd, st.st_size) != 0) {
      fail("cannot append to {}: wrote {} of {} bytes and could not cut them back off: {}", path, n,
           text.size(), reason(errno));
    }
    fail("cannot append to {}: {}", path,
         n < 0 ? reason(err) : fmt::format("wrote {} of {} bytes", n, text.size()));
  }
  FORGE_CHECK(::fdatasync(file.fd) == 0, "cannot sync {}: {}", path, reason(errno));
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_path_(path + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  FORGE_CHECK(fd_ >= 0, "cannot create {} (writing {}): {}", tmp_path_, path_, reason(errno));
}

AtomicFileWriter::~AtomicFileWriter() {
  if (committed_) return;
  close_fd();
  ::unlink(tmp_path_.c_str());
}

void AtomicFileWriter::close_fd() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void AtomicFileWriter::write(const void* data, std::size_t bytes) {
  FORGE_CHECK(fd_ >= 0 && !committed_, "{}: write after commit", path_);
  const auto* in = static_cast<const char*>(data);
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::write(fd_, in + done, bytes - done);
    if (n < 0 && errno == EINTR) continue;
    FORGE_CHECK(n > 0, "cannot write {} (writing {}): {}", tmp_path_, path_,
                n < 0 ? reason(errno) : "no progress");
    done += static_cast<std::size_t>(n);
  }
}

void AtomicFileWriter::commit() {
  FORGE_CHECK(fd_ >= 0 && !committed_, "{}: commit twice", path_);
  FORGE_CHECK(::fsync(fd_) == 0, "cannot fsync {}: {}", tmp_path_, reason(errno));
  const int closed = ::close(fd_);
  fd_ = -1;
  FORGE_CHECK(closed == 0, "cannot close {}: {}", tmp_path_, reason(errno));
  FORGE_CHECK(::rename(tmp_path_.c_str(), path_.c_str()) == 0, "cannot rename {} to {}: {}",
              tmp_path_, path_, reason(errno));
  committed_ = true;
  // Make the rename itself durable. It is already visible, so a directory that cannot be
  // synced (some filesystems refuse) only weakens crash safety and is not worth failing for.
  const int dir = ::open(parent_directory(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace forge
