// forge serve: the browser page at /, the --model directory at /model/ and every model directory
// under --models at /models/<path>/, over local HTTP.
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "forge/core/error.h"
#include "serve/api.h"
#include "serve/file_body.h"
#include "serve/files.h"
#include "serve/http.h"

namespace forge::cli {
namespace {

namespace fs = std::filesystem;

struct ServeArgs {
  CommonOptions common;
  serve::ApiOptions api;
  bool no_api = false;
  double request_timeout_s = 300;
  TreeDir default_site = find_tree_dir("build-web/site", "index.html");
  std::string site_dir = default_site.path;
  std::string model_dir;
  std::string models_root = fs::path(default_model().path).parent_path().string();
  std::string host = "127.0.0.1";
  int port = 8080;
  serve::HttpLimits limits;
};

// SIGINT and SIGTERM are blocked before any server thread starts (threads inherit the mask) and
// taken by sigwait on the main thread, which then stops the server: no signal handler runs.
class BlockedSignals {
 public:
  BlockedSignals() {
    sigemptyset(&signals_);
    sigaddset(&signals_, SIGINT);
    sigaddset(&signals_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals_, &old_mask_);
    signal(SIGPIPE, SIG_IGN);  // a client gone mid-reply is an error return, not a kill
  }
  ~BlockedSignals() { pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr); }
  BlockedSignals(const BlockedSignals&) = delete;
  BlockedSignals& operator=(const BlockedSignals&) = delete;
  void wait() const {
    int sig = 0;
    sigwait(&signals_, &sig);
  }

 private:
  sigset_t signals_, old_mask_;
};

void run_serve(const ServeArgs& args) {
  const bool default_site = args.site_dir == args.default_site.path;
  FORGE_CHECK(!default_site || !args.default_site.found.empty(),
              "no --site given, and the site build-web/site (with its index.html) is in none "
              "of:{}\nbuild the page first with `bash scripts/build_web.sh`, set FORGE_HOME to a "
              "Forge tree that holds it, or pass --site DIR",
              args.default_site.tried);
  FORGE_CHECK(fs::is_regular_file(fs::path(args.site_dir) / "index.html"),
              "site directory {} has no index.html: build the page first with "
              "`bash scripts/build_web.sh`, or pass --site DIR",
              args.site_dir);
  check_model_found(args.model_dir);
  FORGE_CHECK(fs::is_regular_file(fs::path(args.model_dir) / "config.json"),
              "--model {}: no config.json there", args.model_dir);
  const serve::FileRoots roots(args.site_dir, args.model_dir, args.models_root);

  // The API serves the --model model, named after its directory.
  std::unique_ptr<Device> device;
  LoadedModel loaded;
  std::unique_ptr<serve::Api> api;
  if (!args.no_api) {
    device = std::make_unique<Device>(open_device(args.common));
    loaded = load_model(args.model_dir, *device, true);
    serve::ApiOptions options = args.api;
    if (options.model_name.empty()) options.model_name = roots.model().filename().string();
    if (options.api_key.empty())
      if (const char* key = std::getenv("FORGE_API_KEY")) options.api_key = key;
    options.max_body = args.limits.max_body;
    options.request_timeout = std::chrono::milliseconds(std::llround(1e3 * args.request_timeout_s));
    api = std::make_unique<serve::Api>(*loaded.model, loaded.tokenizer.get(), options);
  }

  // The model directories a page can offer, as {"models": ["council/expert-0", ...]}; then
  // the files.
  const auto handle = [&](const serve::HttpRequest& req) {
    if (api && serve::Api::owns(req.path)) return api->handle(req);
    if (req.body_too_large) return serve::text_response(413, "413: the body is too large\n");
    if (req.method != "GET" && req.method != "HEAD") {
      serve::HttpResponse r = serve::text_response(405, "405: only GET and HEAD\n");
      r.headers.emplace_back("Allow", "GET, HEAD");
      return r;
    }
    if (req.path == "/models/") {
      serve::HttpResponse r;
      r.headers = {{"Content-Type", "application/json"}, {"Cache-Control", "no-cache"}};
      r.body = nlohmann::json{{"models", roots.model_directories()}}.dump();
      return r;
    }
    const fs::path file = roots.resolve(req.path);
    if (file.empty()) return serve::text_response(404, "404\n");
    return serve::file_response(file, req.header("Range"));
  };

  const BlockedSignals signals;  // before the server's threads start
  const serve::HttpServer server(args.host, args.port, args.limits, handle);
  const std::string host =
      args.host.find(':') != std::string::npos ? "[" + args.host + "]" : args.host;
  const auto found = [](const std::string& dir, const TreeDir& shipped) {
    return dir == shipped.path ? " (" + shipped.found + ")" : std::string();
  };
  std::printf("forge serve: http://%s:%d/  (site %s%s, model %s%s, models %s; Ctrl+C stops)\n",
              host.c_str(), server.port(), roots.site().c_str(),
              found(args.site_dir, args.default_site).c_str(), roots.model().c_str(),
              found(args.model_dir, default_model()).c_str(), roots.models().c_str());
  std::fflush(stdout);
  signals.wait();
  api.reset();  // ends every completion in flight, so no connection waits on one
  std::printf("forge serve: stopped\n");
  std::fflush(stdout);
}

}  // namespace

void register_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "serve the browser page and a model over HTTP");
  add_common_options(*cmd, args->common);
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
  cmd->add_option("--idle-timeout", args->limits.idle_timeout_s,
                  "seconds a connection may send nothing before it is closed")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd->add_option("--max-connections", args->limits.max_connections,
                  "connections served at once (each has a thread)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_flag("--no-api", args->no_api, "serve the page and files only, load no model");
  cmd->add_option("--model-name", args->api.model_name,
                  "the model's id in the API (default: its directory's name)");
  cmd->add_option("--api-key", args->api.api_key,
                  "require `Authorization: Bearer KEY` on the API (or set FORGE_API_KEY)");
  cmd->add_flag("--cors", args->api.cors, "allow cross-origin API requests from any page");
  cmd->add_option("--slots", args->api.limits.slots, "completions decoded together")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--queue", args->api.limits.queue,
                  "completions waiting for a slot; more are answered 503")
      ->check(CLI::Range(0, 65536))
      ->capture_default_str();
  cmd->add_option("--request-timeout", args->request_timeout_s,
                  "seconds a completion may take, queueing included (fractions allowed)")
      ->check(CLI::Range(0.001, 86400.0))
      ->capture_default_str();
  cmd->add_option("--max-body", args->limits.max_body, "request body bytes; more is answered 413")
      ->check(CLI::Range(1024, 64 << 20))
      ->capture_default_str();
  cmd->callback([args] { run_serve(*args); });
}

}  // namespace forge::cli
