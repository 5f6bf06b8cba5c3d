// forge serve's HTTP server: GNU libmicrohttpd behind a small request → response interface.
//
// libmicrohttpd rather than cpp-httplib 0.11.4: it bounds what a client can make it hold (the
// request header memory per connection, the number of connections), closes idle connections,
// gives every connection its own thread (a slow client cannot starve the others, and a streamed
// completion may block until its next token), and takes response bodies from a callback (SSE
// streams, files read from an opened descriptor). Range requests, the Host check, body limits
// and logging are this project's policy, implemented here and in file_body.cpp.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct MHD_Daemon;

namespace forge::serve {

using Headers = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;
  std::string path;  // percent-decoded, without the query string
  Headers headers;
  std::string body;
  bool body_too_large = false;  // it passed HttpLimits::max_body and was dropped: answer 413
  int socket = -1;  // the client's socket, to notice a disconnect while a reply is prepared
  /// The first header of this name (case-insensitive), "" when absent.
  std::string header(std::string_view name) const;
};

/// Fills `buf` (room for `max` bytes) with the body's bytes from `pos` on and returns how many,
/// or kBodyEnd at the end of a body of unknown length, or kBodyAbort to cut the connection
/// (the client then sees a body shorter than announced, never a torn one presented as whole).
/// Called on the connection's thread; it may block until it has something to send.
using BodyReader = std::function<ssize_t(uint64_t pos, char* buf, size_t max)>;
inline constexpr ssize_t kBodyEnd = -1;
inline constexpr ssize_t kBodyAbort = -2;
inline constexpr uint64_t kUnknownSize = ~uint64_t{0};

struct HttpResponse {
  int status = 200;
  Headers headers;
  std::string body;
  /// When set, the body comes from it instead of `body`: `size` bytes, or sent chunked until
  /// kBodyEnd when the size is kUnknownSize.
  BodyReader reader;
  uint64_t size = kUnknownSize;
};

/// A plain-text body ("404\n"-style replies and errors outside the API).
HttpResponse text_response(int status, std::string text);

struct HttpLimits {
  int max_connections = 256;
  int idle_timeout_s = 10;        // a connection that sends nothing this long is closed
  size_t header_memory = 32768;   // request line + headers per connection
  size_t max_headers = 100;       // header fields per request
  size_t max_body = 1024 * 1024;  // request body bytes; more is answered 413
};

/// `text` with control bytes, backslashes and non-ASCII bytes written as \xNN, for log lines a
/// client cannot forge or use to drive a terminal.
std::string escape_for_log(std::string_view text);

/// Whether a Host header names this server when it listens on `listen_host`: on a loopback
/// address only loopback names (localhost, 127.x.x.x, [::1]) — a DNS-rebinding page sends its
/// own name — and on any other address also that address itself, or any name for 0.0.0.0/::.
bool allowed_host(std::string_view host_header, std::string_view listen_host);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;
  /// Listens on host:port (0: a free port) and starts serving; errors say why it cannot.
  HttpServer(const std::string& host, int port, const HttpLimits& limits, Handler handler);
  /// Stops: closes the listening socket and waits for every connection's thread.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }

  struct Connection;  // one request's state while its body arrives

 private:
  friend struct Callbacks;
  HttpLimits limits_;
  Handler handler_;
  std::string host_;
  int port_ = 0;
  int listen_fd_ = -1;
  MHD_Daemon* daemon_ = nullptr;
};

}  // namespace forge::serve
