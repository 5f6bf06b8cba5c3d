#include "serve/file_body.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>

namespace forge::serve {
namespace {

// An open file and the size and modification time it had when the response began.
class Snapshot {
 public:
  explicit Snapshot(const std::filesystem::path& file)
      : fd_(open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {
    struct stat st {};
    ok_ = fd_ >= 0 && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
    size_ = static_cast<uint64_t>(st.st_size);
    mtime_ = st.st_mtim;
  }
  ~Snapshot() {
    if (fd_ >= 0) close(fd_);
  }
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  bool ok() const { return ok_; }
  uint64_t size() const { return size_; }
  bool unchanged() const {
    struct stat st {};
    return fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) == size_ &&
           st.st_mtim.tv_sec == mtime_.tv_sec && st.st_mtim.tv_nsec == mtime_.tv_nsec;
  }
  ssize_t read(uint64_t offset, char* buf, size_t n) const {
    return pread(fd_, buf, n, static_cast<off_t>(offset));
  }

 private:
  int fd_;
  bool ok_ = false;
  uint64_t size_ = 0;
  timespec mtime_{};
};

std::optional<uint64_t> parse_number(const std::string& text) {
  if (text.empty() || text.size() > 19 || text.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  return std::stoull(text);
}

struct Range {
  bool unsatisfiable = false;
  uint64_t first = 0, last = 0;  // inclusive
};

// The one range `header` asks for in a file of `size` bytes; nullopt when the header is absent,
// asks for several ranges or does not parse (then the whole file is sent).
std::optional<Range> parse_range(const std::string& header, uint64_t size) {
  const std::string prefix = "bytes=";
  if (header.rfind(prefix, 0) != 0) return std::nullopt;
  const std::string spec = header.substr(prefix.size());
  const size_t dash = spec.find('-');
  if (dash == std::string::npos || spec.find(',') != std::string::npos) return std::nullopt;
  const std::string a = spec.substr(0, dash), b = spec.substr(dash + 1);
  Range r;
  if (a.empty()) {  // the last n bytes
    const std::optional<uint64_t> n = parse_number(b);
    if (!n) return std::nullopt;
    if (*n == 0 || size == 0) return Range{.unsatisfiable = true};
    r.first = size - std::min(*n, size);
    r.last = size - 1;
    return r;
  }
  const std::optional<uint64_t> first = parse_number(a);
  const std::optional<uint64_t> last =
      b.empty() ? std::optional<uint64_t>(UINT64_MAX) : parse_number(b);
  if (!first || !last || *last < *first) return std::nullopt;
  if (*first >= size) return Range{.unsatisfiable = true};
  r.first = *first;
  r.last = std::min(*last, size - 1);
  return r;
}

}  // namespace

std::string mime_type(const std::filesystem::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".wasm") return "application/wasm";
  if (ext == ".json") return "application/json";
  if (ext == ".txt" || ext == ".md") return "text/plain; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".ico") return "image/x-icon";
  return "application/octet-stream";
}

HttpResponse file_response(const std::filesystem::path& file, const std::string& range_header) {
  auto snapshot = std::make_shared<Snapshot>(file);
  if (!snapshot->ok()) return text_response(404, "404\n");
  const uint64_t size = snapshot->size();
  HttpResponse r;
  r.headers = {{"Content-Type", mime_type(file)},
               {"Cache-Control", "no-cache"},  // a rebuilt site or model shows on reload
               {"Accept-Ranges", "bytes"}};
  const std::optional<Range> range = parse_range(range_header, size);
  if (range && range->unsatisfiable) {
    HttpResponse bad = text_response(416, "416: the range starts past the end of the file\n");
    bad.headers.emplace_back("Content-Range", "bytes */" + std::to_string(size));
    return bad;
  }
  const uint64_t first = range ? range->first : 0;
  r.size = range ? range->last - range->first + 1 : size;
  if (range) {
    r.status = 206;
    r.headers.emplace_back("Content-Range", "bytes " + std::to_string(range->first) + "-" +
                                                std::to_string(range->last) + "/" +
                                                std::to_string(size));
  }
  const uint64_t length = r.size;
  r.reader = [snapshot, first, length](uint64_t pos, char* buf, size_t max) -> ssize_t {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(max, length - pos));
    if (n == 0 || !snapshot->unchanged()) return kBodyAbort;
    const ssize_t got = snapshot->read(first + pos, buf, n);
    if (got <= 0 || !snapshot->unchanged()) return kBodyAbort;
    return got;
  };
  return r;
}

}  // namespace forge::serve
