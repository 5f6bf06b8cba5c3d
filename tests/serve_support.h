// forge serve's tests' side: a temporary site and model tree, a raw-socket HTTP client and the
// real binary as a child process (serve_test.cpp, serve_api_test.cpp).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

namespace forge::serve_test {

namespace fs = std::filesystem;

inline void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A site and a model directory, and a secret beside them that no URL may reach.
struct TempTree {
  fs::path root, site, model, models;
  TempTree() {
    std::string pattern = (fs::temp_directory_path() / "forge-serve-XXXXXX").string();
    root = mkdtemp(pattern.data());
    site = root / "site";
    model = root / "model";
    write_file(site / "index.html", "<!doctype html><title>forge test page</title>");
    write_file(site / "forge_wasm.wasm", std::string("\0asm\1\0\0\0", 8));
    write_file(site / "app.js", "export const x = 1;\n");
    models = root / "models";
    write_file(model / "config.json", R"({"n_layer": 1})");
    write_file(model / "vocab.json", "{}");
    write_file(model / "model.safetensors", "weights");
    write_file(model / "README.md", "private notes");
    write_file(model / "train_log.csv", "step,loss");
    write_file(models / "tiny" / "config.json", R"({"tiny": 1})");
    write_file(models / "tiny" / "model.compact", "compact weights");
    write_file(models / "council" / "expert-0" / "config.json", R"({"expert": 0})");
    write_file(models / "council" / "expert-0" / "merges.txt", "#version");
    write_file(models / "council" / "expert-0" / "checkpoint" / "state.json", "{}");
    write_file(models / "notes" / "vocab.json", "{} no config.json beside it");
    write_file(root / "secret.txt", "the secret outside both directories");
  }
  ~TempTree() { fs::remove_all(root); }
};

struct Response {
  int status = 0;
  std::string headers, body;
};

inline int connect_to(const std::string& ip, int port, int rcvbuf = 0) {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  // Long enough for a request queued behind a full batch on a loaded or sanitized build; a
  // server that stalls still fails the test in bounded time.
  timeval timeout{30, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (rcvbuf > 0) setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, ip.c_str(), &addr.sin_addr);
  if (connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(sock);
    return -1;
  }
  return sock;
}

inline Response parse_response(const std::string& raw) {
  Response r;
  const size_t split = raw.find("\r\n\r\n");
  if (raw.rfind("HTTP/1.1 ", 0) != 0 || split == std::string::npos) return r;
  r.status = std::atoi(raw.c_str() + 9);
  r.headers = raw.substr(0, split);
  r.body = raw.substr(split + 4);
  return r;
}

// Sends `request` as it is and reads until the server closes; status 0 when the connection is
// refused or times out.
inline Response http_raw(const std::string& ip, int port, const std::string& request) {
  const int sock = connect_to(ip, port);
  if (sock < 0) return {};
  if (send(sock, request.data(), request.size(), MSG_NOSIGNAL) < 0) {
    close(sock);
    return {};
  }
  std::string raw;
  char chunk[4096];
  ssize_t n;
  while ((n = recv(sock, chunk, sizeof(chunk), 0)) > 0) raw.append(chunk, static_cast<size_t>(n));
  close(sock);
  return parse_response(raw);
}

// One GET with `Connection: close` and the address as the Host.
inline Response http_get(const std::string& ip, int port, const std::string& path,
                         const std::string& extra_headers = "") {
  return http_raw(ip, port,
                  "GET " + path + " HTTP/1.1\r\nHost: " + ip + "\r\nConnection: close\r\n" +
                      extra_headers + "\r\n");
}

inline std::string header(const Response& r, const std::string& name) {
  const std::regex re("\r\n" + name + ": ([^\r]*)", std::regex::icase);
  std::smatch m;
  return std::regex_search(r.headers, m, re) ? m[1].str() : "";
}

// `forge serve ARGS` as a child; its first stdout line (the URL) is read with a timeout. The
// destructor always kills it.
class Server {
 public:
  explicit Server(const std::string& args) {
    int out[2];
    EXPECT_EQ(pipe(out), 0);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      const std::string command = std::string("exec ") + FORGE_CLI + " serve " + args;
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    out_ = out[0];
    line_ = read_line(std::chrono::seconds(20));
    std::smatch m;
    if (std::regex_search(line_, m, std::regex("http://([0-9.]+):([0-9]+)/"))) {
      ip_ = m[1].str();
      port_ = std::stoi(m[2].str());
    }
  }
  ~Server() {
    if (pid_ > 0 && !exited_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(out_);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& first_line() const { return line_; }
  const std::string& ip() const { return ip_; }
  int port() const { return port_; }
  pid_t pid() const { return pid_; }

  // Sends `sig` (0: none) and waits up to 10 s for the exit status; -1 if it did not exit.
  int stop(int sig) {
    if (sig != 0) kill(pid_, sig);
    for (int i = 0; i < 1000; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        exited_ = true;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  // Everything it printed after the first line, until it closes stdout (after stop()).
  std::string rest() { return read_line(std::chrono::seconds(5), false); }

 private:
  std::string read_line(std::chrono::seconds limit, bool one_line = true) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c;
      if (read(out_, &c, 1) != 1) break;
      if (one_line && c == '\n') break;
      text += c;
    }
    return text;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  bool exited_ = false;
  std::string line_, ip_;
  int port_ = 0;
};

}  // namespace forge::serve_test
