// forge serve's request path past the HTTP parser (libmicrohttpd's own): the Host check, log
// escaping, a Range header on a file, and the API's routes on arbitrary JSON bodies, against a
// tiny random model. Invariants: escaped log text is printable ASCII; an accepted Host is a
// loopback name when listening on loopback; a file reply is 200, 206 or 416 and never longer
// than the file; an API reply has a status in 200..599 and, unless streamed, a JSON body.
#include <fuzzer/FuzzedDataProvider.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "forge/models/gpt2/gpt2.h"
#include "forge/tokenizer/char_tokenizer.h"
#include "fuzz_check.h"
#include "serve/api.h"
#include "serve/file_body.h"
#include "serve/http.h"

namespace {

namespace fs = std::filesystem;

// A 1-layer model of context 16 over a 10-character vocabulary, and a 1 kB file to range over,
// in a directory removed when the harness exits.
struct Fixture {
  fs::path dir;
  std::unique_ptr<forge::Gpt2> model;
  std::unique_ptr<forge::CharTokenizer> tokenizer;
  std::unique_ptr<forge::serve::Api> api;
  fs::path file;
  Fixture() {
    const char* tmp = std::getenv("TMPDIR");
    dir = fs::path(tmp ? tmp : "/tmp") / ("forge_fuzz_http_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    forge::Gpt2Config c;
    c.n_layer = 1;
    c.n_head = 2;
    c.n_embd = 8;
    c.n_ctx = 16;
    c.vocab_size = 10;
    model = std::make_unique<forge::Gpt2>(forge::Gpt2::init_random(c, 1, forge::Device::cpu()));
    nlohmann::json vocab = nlohmann::json::object();
    for (int i = 0; i < 10; ++i) vocab[std::string(1, char('a' + i))] = i;
    std::ofstream(dir / "vocab.json") << vocab.dump();
    tokenizer = forge::CharTokenizer::load((dir / "vocab.json").string());
    forge::serve::ApiOptions options;
    options.model_name = "tiny";
    options.limits.slots = 2;
    options.limits.queue = 2;
    api = std::make_unique<forge::serve::Api>(*model, tokenizer.get(), options);
    file = dir / "file.bin";
    std::ofstream(file) << std::string(1000, 'x');
  }
  ~Fixture() {
    api.reset();
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

bool is_loopback(std::string host) {
  std::transform(host.begin(), host.end(), host.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  return host.rfind("localhost", 0) == 0 || host.rfind("127.", 0) == 0 ||
         host.rfind("[::1]", 0) == 0;
}

/// Every byte a reader gives, up to `cap`; streams end (kBodyEnd) or are cut (kBodyAbort).
std::string drain(const forge::serve::HttpResponse& r, size_t cap) {
  std::string out;
  char buf[4096];
  while (out.size() < cap) {
    const ssize_t n = r.reader(out.size(), buf, sizeof buf);
    if (n < 0) break;
    if (r.size != forge::serve::kUnknownSize && n == 0) break;
    out.append(buf, size_t(n));
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;
  using namespace forge::serve;
  FuzzedDataProvider in(data, size);
  const std::string host = in.ConsumeRandomLengthString(64);
  const std::string range = in.ConsumeRandomLengthString(64);
  const int route = in.ConsumeIntegralInRange(0, 4);
  const std::string body = in.ConsumeRemainingBytesAsString();

  for (const char ch : escape_for_log(body + host)) {
    FORGE_FUZZ_CHECK(ch >= 0x20 && ch < 0x7f, "escape_for_log left a control or non-ASCII byte");
  }
  if (allowed_host(host, "127.0.0.1")) {
    FORGE_FUZZ_CHECK(is_loopback(host), "a non-loopback Host was accepted on loopback");
  }

  const HttpResponse file = file_response(fixture.file, range);
  FORGE_FUZZ_CHECK(file.status == 200 || file.status == 206 || file.status == 416,
                   "a file reply that is not 200, 206 or 416");
  if (file.status != 416) {
    FORGE_FUZZ_CHECK(file.size <= 1000, "a file reply longer than the file");
    FORGE_FUZZ_CHECK(drain(file, 4096).size() == file.size, "a file body of another length");
  }

  static const char* const kPaths[] = {"/v1/completions", "/tokenize", "/detokenize", "/v1/models",
                                       "/health"};
  HttpRequest request;
  request.method = route < 3 ? "POST" : "GET";
  request.path = kPaths[route];
  request.headers = {{"Host", "127.0.0.1"}, {"Content-Type", "application/json"}};
  request.body = body;
  const HttpResponse reply = fixture.api->handle(request);
  FORGE_FUZZ_CHECK(reply.status >= 200 && reply.status <= 599, "an API status out of range");
  if (reply.reader) {
    drain(reply, 1 << 20);  // a stream runs to its end, so its slot is freed
  } else {
    FORGE_FUZZ_CHECK(!nlohmann::json::parse(reply.body, nullptr, false).is_discarded(),
                     "an API reply that is not JSON");
  }
  return 0;
}
