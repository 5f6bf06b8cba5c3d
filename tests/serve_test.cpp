// forge serve as a browser sees it: the real binary on a free port, spoken to over raw HTTP so
// nothing between the test and the server normalizes the request path.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include "serve_support.h"

namespace forge {
namespace {

using namespace serve_test;

std::string dirs(const TempTree& t) {
  return "--no-api --site " + t.site.string() + " --model " + t.model.string() + " --models " +
         t.models.string();
}

TEST(Serve, ServesTheSiteAtRootAndTheModelUnderModel) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  const Response index = http_get(server.ip(), server.port(), "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<!doctype html><title>forge test page</title>");
  EXPECT_EQ(header(index, "Content-Type"), "text/html; charset=utf-8");
  const Response config = http_get(server.ip(), server.port(), "/model/config.json");
  EXPECT_EQ(config.status, 200);
  EXPECT_EQ(config.body, R"({"n_layer": 1})");
  EXPECT_EQ(header(config, "Content-Type"), "application/json");
  EXPECT_EQ(http_get(server.ip(), server.port(), "/missing.js").status, 404);
  EXPECT_EQ(http_get(server.ip(), server.port(), "/model/").status, 404);  // no listings
}

TEST(Serve, WasmAndJavaScriptCarryTheMimeTypesBrowsersRequire) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  const Response wasm = http_get(server.ip(), server.port(), "/forge_wasm.wasm");
  EXPECT_EQ(wasm.status, 200);
  EXPECT_EQ(header(wasm, "Content-Type"), "application/wasm");
  EXPECT_EQ(wasm.body, std::string("\0asm\1\0\0\0", 8));
  EXPECT_EQ(header(http_get(server.ip(), server.port(), "/app.js"), "Content-Type"),
            "text/javascript; charset=utf-8");
}

TEST(Serve, NoPathLeavesTheServedDirectories) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  ASSERT_EQ(http_get(server.ip(), server.port(), "/model/config.json").status, 200);
  for (const char* path :
       {"/model/../secret.txt", "/model/../../secret.txt", "/../secret.txt",
        "/model/%2e%2e/secret.txt", "/model/..%2fsecret.txt", "/%2e%2e/secret.txt",
        "/model/../model/config.json", "/model/./config.json", "/model//config.json"}) {
    const Response r = http_get(server.ip(), server.port(), path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body.find("secret"), std::string::npos) << path;
  }
}

TEST(Serve, ModelDirectoriesServeOnlyTheFilesAPageNeeds) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  auto get = [&](const std::string& path) { return http_get(server.ip(), server.port(), path); };
  EXPECT_EQ(get("/model/vocab.json").body, "{}");
  EXPECT_EQ(get("/model/model.safetensors").body, "weights");
  EXPECT_EQ(get("/models/tiny/config.json").body, R"({"tiny": 1})");
  EXPECT_EQ(get("/models/tiny/model.compact").body, "compact weights");
  EXPECT_EQ(get("/models/council/expert-0/config.json").body, R"({"expert": 0})");
  EXPECT_EQ(get("/models/council/expert-0/merges.txt").body, "#version");
  for (const char* path :
       {"/model/README.md", "/model/train_log.csv", "/models/tiny/", "/models/tiny",
        "/models/council/config.json", "/models/council/expert-0/checkpoint/state.json",
        "/models/notes/vocab.json", "/models/tiny/missing.safetensors",
        "/models/tiny/../council/expert-0/config.json"})
    EXPECT_EQ(get(path).status, 404) << path;
  const Response listing = get("/models/");
  EXPECT_EQ(listing.status, 200);
  EXPECT_EQ(listing.body, R"({"models":["council/expert-0","tiny"]})");
}

TEST(Serve, SymlinksNeverLeadOutOfTheServedDirectories) {
  const TempTree tree;
  fs::create_symlink(tree.root / "secret.txt", tree.model / "leak.safetensors");
  fs::create_symlink(tree.root / "secret.txt", tree.site / "leak.js");
  fs::create_symlink(tree.root, tree.site / "up");
  fs::create_symlink(tree.model, tree.models / "outside");  // a whole model, outside the root
  fs::create_symlink(tree.models / "tiny" / "model.compact", tree.models / "tiny" / "b.compact");
  ASSERT_EQ(mkfifo((tree.site / "fifo.js").c_str(), 0600), 0);
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  auto get = [&](const std::string& path) { return http_get(server.ip(), server.port(), path); };
  for (const char* path : {"/model/leak.safetensors", "/leak.js", "/up/secret.txt",
                           "/models/outside/config.json", "/fifo.js"}) {
    const Response r = get(path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.body.find("secret"), std::string::npos) << path;
  }
  EXPECT_EQ(get("/models/tiny/b.compact").body, "compact weights");  // a link within its root
  EXPECT_EQ(get("/models/").body, R"({"models":["council/expert-0","tiny"]})");
}

TEST(Serve, BindsToLoopbackOnlyByDefault) {
  const TempTree tree;
  Server local(dirs(tree) + " --port 0");
  ASSERT_GT(local.port(), 0) << local.first_line();
  EXPECT_EQ(local.ip(), "127.0.0.1");
  EXPECT_EQ(http_get("127.0.0.1", local.port(), "/").status, 200);
  // 127.0.0.2 reaches this machine too, but not a socket bound to 127.0.0.1 alone.
  EXPECT_EQ(http_get("127.0.0.2", local.port(), "/").status, 0);
  // The probe can tell: a server bound to every address answers there.
  Server any(dirs(tree) + " --host 0.0.0.0 --port 0");
  ASSERT_GT(any.port(), 0) << any.first_line();
  EXPECT_EQ(http_get("127.0.0.2", any.port(), "/").status, 200);
}

TEST(Serve, TakenPortIsAClearError) {
  const TempTree tree;
  Server first(dirs(tree) + " --port 0");
  ASSERT_GT(first.port(), 0) << first.first_line();
  Server second(dirs(tree) + " --port " + std::to_string(first.port()));
  EXPECT_EQ(second.stop(0), 1);
  EXPECT_NE(second.first_line().find("the port is taken"), std::string::npos)
      << second.first_line();
  EXPECT_EQ(http_get(first.ip(), first.port(), "/").status, 200);
}

TEST(Serve, MissingSiteDirectoryTellsHowToBuildIt) {
  const TempTree tree;
  Server server("--no-api --site " + (tree.root / "nosite").string() + " --model " +
                tree.model.string() + " --port 0");
  EXPECT_EQ(server.stop(0), 1);
  EXPECT_NE(server.first_line().find("scripts/build_web.sh"), std::string::npos)
      << server.first_line();
}

TEST(Serve, SigintAndSigtermStopItCleanly) {
  const TempTree tree;
  for (int sig : {SIGINT, SIGTERM}) {
    Server server(dirs(tree) + " --port 0");
    ASSERT_GT(server.port(), 0) << server.first_line();
    ASSERT_EQ(http_get(server.ip(), server.port(), "/").status, 200);
    EXPECT_EQ(server.stop(sig), 0) << "signal " << sig;
    EXPECT_NE(server.rest().find("forge serve: stopped"), std::string::npos);
    EXPECT_EQ(http_get(server.ip(), server.port(), "/").status, 0);
  }
}

// Resident memory of a process in KiB, from /proc.
long resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

TEST(Serve, OnlyLoopbackHostNamesUnlessTheHostFlagSaysOtherwise) {
  const TempTree tree;
  Server local(dirs(tree) + " --port 0");
  ASSERT_GT(local.port(), 0) << local.first_line();
  auto with_host = [&](const Server& s, const std::string& host) {
    return http_raw(s.ip(), s.port(),
                    "GET / HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n");
  };
  for (const std::string host :
       {"localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.9:80", "[::1]:8080"})
    EXPECT_EQ(with_host(local, host).status, 200) << host;
  // A DNS-rebinding page reaches 127.0.0.1 under its own name, and that name is in Host.
  for (const std::string host :
       {"evil.example", "evil.example:8080", "127.0.0.1.evil.example", "[::2]", ""}) {
    const Response r = with_host(local, host);
    EXPECT_EQ(r.status, 403) << host;
    EXPECT_NE(r.body.find("Host header"), std::string::npos) << host;
  }
  Server any(dirs(tree) + " --host 0.0.0.0 --port 0");
  ASSERT_GT(any.port(), 0) << any.first_line();
  EXPECT_EQ(http_raw("127.0.0.1", any.port(),
                     "GET / HTTP/1.1\r\nHost: forge.lan:80\r\nConnection: close\r\n\r\n")
                .status,
            200);
}

TEST(Serve, HeaderCountAndSizeAreBounded) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  std::string many;
  for (int i = 0; i < 150; ++i) many += "X-H" + std::to_string(i) + ": 1\r\n";
  const Response counted = http_get(server.ip(), server.port(), "/", many);
  EXPECT_EQ(counted.status, 431);
  EXPECT_NE(counted.body.find("100 header fields"), std::string::npos) << counted.body;
  // 64 MiB of headers on one connection: refused early, nothing of it kept.
  const long before = resident_kib(server.pid());
  const int sock = connect_to(server.ip(), server.port());
  ASSERT_GE(sock, 0);
  const std::string start = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  send(sock, start.data(), start.size(), MSG_NOSIGNAL);
  const std::string line = "X-Filler: " + std::string(1000, 'a') + "\r\n";
  std::string block;
  for (int i = 0; i < 64; ++i) block += line;
  size_t sent = 0;
  while (sent < (64u << 20) && send(sock, block.data(), block.size(), MSG_NOSIGNAL) > 0)
    sent += block.size();
  EXPECT_LT(sent, 64u << 20) << "the server read 64 MiB of headers";
  close(sock);
  EXPECT_LT(resident_kib(server.pid()) - before, 16 * 1024);
  EXPECT_EQ(http_get(server.ip(), server.port(), "/").status, 200);
}

TEST(Serve, SlowClientsNeitherStarveOthersNorStayForever) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0 --idle-timeout 1");
  ASSERT_GT(server.port(), 0) << server.first_line();
  std::vector<int> slow;
  for (int i = 0; i < 32; ++i) {  // slowloris: a request line and half a header, then silence
    slow.push_back(connect_to(server.ip(), server.port()));
    ASSERT_GE(slow.back(), 0);
    const std::string part = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    send(slow.back(), part.data(), part.size(), MSG_NOSIGNAL);
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(http_get(server.ip(), server.port(), "/").status, 200);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
  // Each silent connection is closed after the idle timeout (recv sees the end, not a timeout).
  for (const int sock : slow) {
    char c;
    EXPECT_EQ(recv(sock, &c, 1, 0), 0);
    close(sock);
  }
}

TEST(Serve, OneRangeAtMostAnd416PastTheEnd) {
  const TempTree tree;
  write_file(tree.site / "data.txt", "0123456789");
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  auto get = [&](const std::string& range) {
    return http_get(server.ip(), server.port(), "/data.txt", "Range: " + range + "\r\n");
  };
  const Response head = get("bytes=2-4");
  EXPECT_EQ(head.status, 206);
  EXPECT_EQ(head.body, "234");
  EXPECT_EQ(header(head, "Content-Range"), "bytes 2-4/10");
  EXPECT_EQ(get("bytes=7-").body, "789");
  EXPECT_EQ(get("bytes=-3").body, "789");
  EXPECT_EQ(get("bytes=8-99999999999").body, "89");
  for (const std::string past : {"bytes=99999999-", "bytes=10-", "bytes=-0"}) {
    const Response r = get(past);
    EXPECT_EQ(r.status, 416) << past;
    EXPECT_EQ(header(r, "Content-Range"), "bytes */10") << past;
  }
  // 700 overlapping ranges, a reversed range and nonsense: the file once, whole.
  std::string many = "bytes=0-";
  for (int i = 0; i < 700; ++i) many += ",0-";
  for (const std::string& ignored : {many, std::string("bytes=5-2"), std::string("bytes=a-b"),
                                     std::string("lines=1-2"), std::string("bytes=-")}) {
    const Response r = get(ignored);
    EXPECT_EQ(r.status, 200) << ignored.substr(0, 20);
    EXPECT_EQ(r.body, "0123456789") << ignored.substr(0, 20);
  }
}

TEST(Serve, LyingOrHugeContentLengthIsRefused) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  const Response huge = http_raw(server.ip(), server.port(),
                                 "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                 "Content-Length: 18446744073622557417\r\n\r\n{}");
  EXPECT_EQ(huge.status, 413);
  const Response garbage =
      http_raw(server.ip(), server.port(),
               "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -5\r\n\r\n");
  EXPECT_EQ(garbage.status, 400);
  EXPECT_EQ(http_get(server.ip(), server.port(), "/").status, 200);
}

TEST(Serve, LogLinesEscapeControlBytes) {
  const TempTree tree;
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  EXPECT_EQ(http_get(server.ip(), server.port(), "/%1b[31mred%0aforged%7f.js").status, 404);
  EXPECT_EQ(server.stop(SIGTERM), 0);
  const std::string log = server.rest();
  EXPECT_NE(log.find("GET /\\x1b[31mred\\x0aforged\\x7f.js -> 404"), std::string::npos) << log;
  EXPECT_EQ(log.find('\x1b'), std::string::npos);
  EXPECT_EQ(log.find("\nforged"), std::string::npos);
}

TEST(Serve, AFileChangedDuringADownloadIsNeverAWhole200) {
  const TempTree tree;
  const std::string original(32 << 20, 'a');
  write_file(tree.model / "big.safetensors", original);
  Server server(dirs(tree) + " --port 0");
  ASSERT_GT(server.port(), 0) << server.first_line();
  const int sock = connect_to(server.ip(), server.port(), 4096);  // a slow reader
  ASSERT_GE(sock, 0);
  const std::string request =
      "GET /model/big.safetensors HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  send(sock, request.data(), request.size(), MSG_NOSIGNAL);
  std::string raw(65536, '\0');
  const ssize_t first = recv(sock, raw.data(), raw.size(), MSG_WAITALL);
  ASSERT_GT(first, 0);
  raw.resize(static_cast<size_t>(first));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  write_file(tree.model / "big.safetensors", std::string(32 << 20, 'b'));  // edited in place
  char chunk[65536];
  ssize_t n;
  while ((n = recv(sock, chunk, sizeof(chunk), 0)) > 0) raw.append(chunk, static_cast<size_t>(n));
  close(sock);
  const Response r = parse_response(raw);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(header(r, "Content-Length"), std::to_string(original.size()));
  EXPECT_LT(r.body.size(), original.size()) << "the changed file was sent to the end";
  EXPECT_EQ(r.body.find('b'), std::string::npos) << "bytes of the new version were sent";
}

}  // namespace
}  // namespace forge
