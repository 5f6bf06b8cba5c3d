#include "serve/http.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "forge/core/error.h"

namespace forge::serve {

struct HttpServer::Connection {
  HttpRequest request;
  bool too_large = false;
};

std::string HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers)
    if (key.size() == name.size() && strncasecmp(key.data(), name.data(), name.size()) == 0)
      return value;
  return {};
}

HttpResponse text_response(int status, std::string text) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  r.body = std::move(text);
  return r;
}

std::string escape_for_log(std::string_view text) {
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '\\') {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// The host part of a Host header: "[::1]:8080" → "::1", "localhost:8080" → "localhost".
std::string host_name(std::string_view header) {
  if (!header.empty() && header[0] == '[') {
    const size_t close = header.find(']');
    return close == std::string_view::npos ? std::string()
                                           : std::string(header.substr(1, close - 1));
  }
  return std::string(header.substr(0, header.find(':')));
}

bool is_loopback_name(const std::string& name) {
  if (strcasecmp(name.c_str(), "localhost") == 0 || name == "::1") return true;
  in_addr v4{};
  return inet_pton(AF_INET, name.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace

bool allowed_host(std::string_view host_header, std::string_view listen_host) {
  const std::string name = host_name(host_header);
  if (name.empty()) return false;
  if (is_loopback_name(name)) return true;
  const std::string listen(listen_host);
  if (is_loopback_name(listen)) return false;
  return listen == "0.0.0.0" || listen == "::" || strcasecmp(listen.c_str(), name.c_str()) == 0;
}

struct Callbacks {
  static MHD_Result on_header(void* cls, MHD_ValueKind, const char* key, const char* value) {
    static_cast<Headers*>(cls)->emplace_back(key, value ? value : "");
    return MHD_YES;
  }

  static ssize_t on_read(void* cls, uint64_t pos, char* buf, size_t max) {
    return (*static_cast<BodyReader*>(cls))(pos, buf, max);
  }
  static void on_free(void* cls) { delete static_cast<BodyReader*>(cls); }

  static MHD_Result send(MHD_Connection* connection, const HttpRequest& request,
                         HttpResponse response) {
    if (response.status >= 400)
      std::fprintf(stderr, "forge serve: %s %s -> %d\n", escape_for_log(request.method).c_str(),
                   escape_for_log(request.path).c_str(), response.status);
    MHD_Response* r = nullptr;
    if (response.reader) {
      r = MHD_create_response_from_callback(
          response.size == kUnknownSize ? MHD_SIZE_UNKNOWN : response.size, 64 * 1024, &on_read,
          new BodyReader(std::move(response.reader)), &on_free);
    } else {
      r = MHD_create_response_from_buffer(response.body.size(), response.body.data(),
                                          MHD_RESPMEM_MUST_COPY);
    }
    if (r == nullptr) return MHD_NO;
    for (const auto& [key, value] : response.headers)
      MHD_add_response_header(r, key.c_str(), value.c_str());
    const MHD_Result queued =
        MHD_queue_response(connection, static_cast<unsigned>(response.status), r);
    MHD_destroy_response(r);
    return queued;
  }

  static MHD_Result on_request(void* cls, MHD_Connection* connection, const char* url,
                               const char* method, const char*, const char* upload_data,
                               size_t* upload_size, void** state) {
    auto& server = *static_cast<HttpServer*>(cls);
    auto* conn = static_cast<HttpServer::Connection*>(*state);
    if (conn == nullptr) {  // the headers have arrived; the body (if any) follows
      conn = new HttpServer::Connection;
      *state = conn;
      HttpRequest& req = conn->request;
      req.method = method;
      req.path = url;
      MHD_get_connection_values(connection, MHD_HEADER_KIND, &on_header, &req.headers);
      const MHD_ConnectionInfo* info =
          MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      req.socket = info ? info->connect_fd : -1;
      if (req.headers.size() > server.limits_.max_headers)
        return send(connection, req,
                    text_response(431, "more than " + std::to_string(server.limits_.max_headers) +
                                           " header fields\n"));
      if (!allowed_host(req.header("Host"), server.host_))
        return send(connection, req,
                    text_response(403,
                                  "the Host header does not name this server (a page of "
                                  "another site may not use it; see forge serve --host)\n"));
      const std::string length = req.header("Content-Length");
      if (!length.empty() && std::strtoull(length.c_str(), nullptr, 10) > server.limits_.max_body)
        conn->too_large = true;
      if (!conn->too_large) return MHD_YES;
    }
    HttpRequest& req = conn->request;
    if (*upload_size != 0) {
      if (req.body.size() + *upload_size > server.limits_.max_body) {
        conn->too_large = true;
        req.body.clear();
      }
      if (!conn->too_large) req.body.append(upload_data, *upload_size);
      *upload_size = 0;
      return MHD_YES;
    }
    HttpResponse response;
    try {
      req.body_too_large = conn->too_large;
      response = server.handler_(req);
    } catch (const std::exception& e) {
      response = text_response(500, std::string(e.what()) + "\n");
    }
    return send(connection, req, std::move(response));
  }

  static void on_completed(void*, MHD_Connection*, void** state, MHD_RequestTerminationCode) {
    delete static_cast<HttpServer::Connection*>(*state);
    *state = nullptr;
  }
};

HttpServer::HttpServer(const std::string& host, int port, const HttpLimits& limits, Handler handler)
    : limits_(limits), handler_(std::move(handler)), host_(host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  FORGE_CHECK(getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0 && found,
              "cannot listen on {}: not an address of this machine", host);
  listen_fd_ = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int yes = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  const bool bound = listen_fd_ >= 0 && bind(listen_fd_, found->ai_addr, found->ai_addrlen) == 0;
  const int bind_errno = errno;
  freeaddrinfo(found);
  if (!bound || listen(listen_fd_, 128) != 0) {
    if (listen_fd_ >= 0) close(listen_fd_);
    FORGE_CHECK(bind_errno != EADDRINUSE,
                "cannot listen on {}:{}: the port is taken (--port 0 picks a free port)", host,
                port);
    FORGE_CHECK(false, "cannot listen on {}:{}: not an address of this machine ({})", host, port,
                std::strerror(bind_errno));
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                           : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
          (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
      0, nullptr, nullptr, &Callbacks::on_request, this, MHD_OPTION_LISTEN_SOCKET, listen_fd_,
      MHD_OPTION_CONNECTION_LIMIT, static_cast<unsigned>(limits.max_connections),
      MHD_OPTION_CONNECTION_TIMEOUT, static_cast<unsigned>(limits.idle_timeout_s),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.header_memory, MHD_OPTION_NOTIFY_COMPLETED,
      &Callbacks::on_completed, nullptr, MHD_OPTION_END);
  if (daemon_ == nullptr) {
    close(listen_fd_);
    FORGE_CHECK(false, "cannot start the HTTP server on {}:{}", host, port_);
  }
}

HttpServer::~HttpServer() {
  MHD_stop_daemon(daemon_);
}

}  // namespace forge::serve
