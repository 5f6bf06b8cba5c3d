// forge serve: the browser page at /, the --model directory at /model/ and every model directory
// under --models at /models/<path>/, over local HTTP.
#include <httplib.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cli.h"
#include "forge/core/error.h"
#include "serve/files.h"

namespace forge::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  std::string site_dir = FORGE_DEFAULT_SITE;
  std::string model_dir;
  std::string models_root = FORGE_DEFAULT_MODELS;
  std::string host = "127.0.0.1";
  int port = 8080;
};

std::string mime_type(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js" || ext == ".mjs") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".wasm") return "application/wasm";  // streaming compilation insists on it
  if (ext == ".json") return "application/json";
  if (ext == ".txt" || ext == ".md") return "text/plain; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".ico") return "image/x-icon";
  return "application/octet-stream";
}

void send_file(const fs::path& file, httplib::Response& res) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  auto in = std::make_shared<std::ifstream>(file, std::ios::binary);
  if (ec || !*in) {
    res.status = 404;
    return;
  }
  res.set_header("Cache-Control", "no-cache");  // a rebuilt site or model shows on reload
  // Streamed in chunks: a GPT-2 124M checkpoint is half a gigabyte.
  res.set_content_provider(size, mime_type(file),
                           [in](size_t offset, size_t length, httplib::DataSink& sink) {
                             std::vector<char> chunk(std::min<size_t>(length, 1 << 20));
                             in->seekg(static_cast<std::streamoff>(offset));
                             in->read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
                             return in->gcount() == static_cast<std::streamsize>(chunk.size()) &&
                                    sink.write(chunk.data(), chunk.size());
                           });
}

// SIGINT and SIGTERM are blocked in every thread and taken by one waiter thread, which stops the
// server: a signal handler could not safely call into httplib.
class StopOnSignal {
 public:
  explicit StopOnSignal(httplib::Server& server) {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
    waiter_ = std::thread([this, &server] {
      int sig = 0;
      sigwait(&signals_, &sig);
      if (done_) return;
      caught_ = sig;
      // A signal between bind and listen would otherwise be lost: stop() ignores a server that
      // is not running yet.
      while (!server.is_running() && !done_)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      server.stop();
    });
  }
  ~StopOnSignal() {
    done_ = true;
    if (caught_ == 0) pthread_kill(waiter_.native_handle(), SIGTERM);  // wake the waiter
    waiter_.join();
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  int caught() const { return caught_; }

 private:
  sigset_t signals_, old_mask_;
  std::atomic<bool> done_{false};
  std::atomic<int> caught_{0};
  std::thread waiter_;
};

void run_serve(const ServeArgs& args) {
  FORGE_CHECK(fs::is_regular_file(fs::path(args.site_dir) / "index.html"),
              "site directory {} has no index.html: build the page first with "
              "`bash scripts/build_web.sh`, or pass --site DIR",
              args.site_dir);
  FORGE_CHECK(fs::is_regular_file(fs::path(args.model_dir) / "config.json"),
              "--model {}: no config.json there", args.model_dir);
  const serve::FileRoots roots(args.site_dir, args.model_dir, args.models_root);

  httplib::Server server;
  // httplib's default adds SO_REUSEPORT, which would let a second server share a taken port.
  server.set_socket_options([](socket_t sock) {
    const int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server.set_keep_alive_timeout(1);  // idle browser connections must not hold up shutdown
  // The model directories a page can offer, as {"models": ["council/expert-0", ...]}.
  server.Get("/models/", [&](const httplib::Request&, httplib::Response& res) {
    res.set_header("Cache-Control", "no-cache");
    res.set_content(nlohmann::json{{"models", roots.model_directories()}}.dump(),
                    "application/json");
  });
  server.Get("/.*", [&](const httplib::Request& req, httplib::Response& res) {
    const fs::path file = roots.resolve(req.path);
    if (file.empty()) {
      res.status = 404;
      return;
    }
    send_file(file, res);
  });
  server.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(res.status) + "\n", "text/plain; charset=utf-8");
  });
  server.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    if (res.status >= 400)
      std::fprintf(stderr, "forge serve: %s %s -> %d\n", req.method.c_str(), req.path.c_str(),
                   res.status);
  });

  StopOnSignal stop(server);  // before the URL is printed: from then on a signal is a clean stop
  int port = args.port;
  if (port == 0) {
    port = server.bind_to_any_port(args.host);
    FORGE_CHECK(port > 0, "cannot listen on {}: not an address of this machine", args.host);
  } else {
    FORGE_CHECK(server.bind_to_port(args.host, port),
                "cannot listen on {}:{}: the port is taken or {} is not an address of this "
                "machine (--port 0 picks a free port)",
                args.host, port, args.host);
  }
  const std::string host =
      args.host.find(':') != std::string::npos ? "[" + args.host + "]" : args.host;
  std::printf("forge serve: http://%s:%d/  (site %s, model %s, models %s; Ctrl+C stops)\n",
              host.c_str(), port, roots.site().c_str(), roots.model().c_str(),
              roots.models().c_str());
  std::fflush(stdout);

  const bool ok = server.listen_after_bind();
  FORGE_CHECK(ok || stop.caught() != 0, "the server on {}:{} stopped unexpectedly", args.host,
              port);
  std::printf("forge serve: stopped\n");
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the browser page and a model over HTTP");
  add_model_option(*cmd, args->model_dir);
  cmd->add_option("--site", args->site_dir, "the web build's site directory (scripts/build_web.sh)")
      ->capture_default_str();
  cmd->add_option("--models", args->models_root,
                  "root whose model directories are served at /models/<path>/")
      ->capture_default_str();
  cmd->add_option("--host", args->host, "address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "port to listen on (0: a free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace forge::cli
