// forge serve's OpenAI-style API against the real binary and the shipped model: each error's
// status and the field it names, overload, disconnects and many concurrent streams whose greedy
// text must equal each prompt's solo run.
#include <gtest/gtest.h>

#include <atomic>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "serve_support.h"

namespace forge {
namespace {

using namespace serve_test;
using json = nlohmann::json;

const std::string kModel = std::string(FORGE_SOURCE_DIR) + "/models/forge-char";

std::string api_args(const TempTree& t, const std::string& extra = "") {
  return "--port 0 --site " + t.site.string() + " --model " + kModel + " " + extra;
}

std::string post_request(const Server& s, const std::string& path, const std::string& body,
                         const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: " + s.ip() +
         "\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

// A chunked body's data, or the body as it is.
std::string dechunk(const Response& r) {
  if (header(r, "Transfer-Encoding") != "chunked") return r.body;
  std::string out;
  size_t at = 0;
  while (at < r.body.size()) {
    const size_t eol = r.body.find("\r\n", at);
    if (eol == std::string::npos) break;
    const size_t n = std::stoul(r.body.substr(at, eol - at), nullptr, 16);
    if (n == 0) break;
    out += r.body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

Response post(const Server& s, const std::string& path, const std::string& body,
              const std::string& extra_headers = "") {
  Response r = http_raw(s.ip(), s.port(), post_request(s, path, body, extra_headers));
  r.body = dechunk(r);
  return r;
}

// The error object's message and param, asserting the status.
void expect_error(const Response& r, int status, const std::string& param,
                  const std::string& message_part) {
  ASSERT_EQ(r.status, status) << r.headers << "\n" << r.body;
  const json e = json::parse(r.body)["error"];
  EXPECT_EQ(e["param"].is_null() ? "" : e["param"].get<std::string>(), param) << r.body;
  EXPECT_NE(e["message"].get<std::string>().find(message_part), std::string::npos) << r.body;
}

// A streamed completion's text, joined from its `data:` chunks; "" unless it ended with [DONE].
std::string stream_text(const std::string& body, int* tokens = nullptr) {
  std::string text;
  int count = 0;
  size_t at = 0;
  while ((at = body.find("data: ", at)) != std::string::npos) {
    const size_t end = body.find("\n\n", at);
    const std::string data = body.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]") {
      if (tokens) *tokens = count;
      return text;
    }
    const json chunk = json::parse(data);
    const std::string piece = chunk["choices"][0]["text"];
    if (chunk["choices"][0]["finish_reason"].is_null()) ++count;
    text += piece;
  }
  return "";
}

json health(const Server& s) {
  return json::parse(http_get(s.ip(), s.port(), "/health").body);
}

std::string completion_body(const std::string& prompt, int max_tokens, bool stream) {
  return json{{"model", "forge-char"},
              {"prompt", prompt},
              {"max_tokens", max_tokens},
              {"temperature", 0},
              {"stream", stream}}
      .dump();
}

TEST(ServeApi, EveryBadRequestGetsItsStatusAndNamesTheField) {
  TempTree tree;
  Server s(api_args(tree, "--max-body 4096"));
  ASSERT_GT(s.port(), 0) << s.first_line();
  const std::string long_prompt(600, 'a');
  expect_error(post(s, "/v1/completions", R"({"model":"gpt-4","prompt":"Hi"})"), 404, "model",
               "'gpt-4' does not exist");
  expect_error(
      post(s, "/v1/completions", json{{"model", "forge-char"}, {"prompt", long_prompt}}.dump()),
      400, "prompt", "over the model's context of 512 tokens");
  expect_error(
      post(s, "/v1/completions", R"({"model":"forge-char","prompt":"Hi","temperature":7})"), 400,
      "temperature", "temperature");
  expect_error(
      post(s, "/v1/completions", R"({"model":"forge-char","prompt":"Hi","max_tokens":-1})"), 400,
      "max_tokens", "max_tokens");
  expect_error(post(s, "/v1/completions", "{\"model\":\"forge-char\",\"prompt\":\"\xff\xfe\"}"),
               400, "prompt", "not valid UTF-8");
  expect_error(post(s, "/v1/completions", R"({"model":"forge-char","prompt":[1,2,98]})"), 400,
               "prompt", "'prompt[2]' = 98 is not a token id");
  expect_error(post(s, "/v1/completions", R"({"model":"forge-char","prompt":"Hi","n":2})"), 400,
               "n", "'n'");
  expect_error(post(s, "/v1/completions", "{\"prompt\": \"" + std::string(5000, 'a') + "\"}"), 413,
               "", "over 4096 bytes");
  expect_error(post(s, "/v1/completions", "{not json"), 400, "", "not JSON");
  // A number past a double's range (found by fuzz_http_request) is refused, not thrown past the
  // handler.
  expect_error(post(s, "/v1/completions", R"({"prompt":"Hi","max_tokens":4e4000000})"), 400, "",
               "not JSON");
  const Response ok = post(s, "/v1/completions", completion_body("The ", 4, false));
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(json::parse(ok.body)["usage"]["completion_tokens"], 4);
}

TEST(ServeApi, AnApiKeyIsRequiredOnceOneIsSet) {
  TempTree tree;
  Server s(api_args(tree, "--api-key sesame"));
  ASSERT_GT(s.port(), 0) << s.first_line();
  const std::string body = completion_body("The ", 2, false);
  expect_error(post(s, "/v1/completions", body), 401, "", "API key");
  expect_error(post(s, "/v1/completions", body, "Authorization: Bearer wrong\r\n"), 401, "",
               "API key");
  EXPECT_EQ(post(s, "/v1/completions", body, "Authorization: Bearer sesame\r\n").status, 200);
}

// Opens a streamed completion and reads its first bytes, leaving it running; the socket's fd.
int start_stream(const Server& s, const std::string& prompt, int max_tokens) {
  const int sock = connect_to(s.ip(), s.port());
  const std::string request =
      post_request(s, "/v1/completions", completion_body(prompt, max_tokens, true));
  send(sock, request.data(), request.size(), MSG_NOSIGNAL);
  char chunk[512];
  recv(sock, chunk, sizeof(chunk), 0);
  return sock;
}

// Polls /health until `done` holds of it or 20 s pass.
template <typename Done>
json wait_for_health(const Server& s, Done done) {
  json h;
  for (int i = 0; i < 200; ++i) {
    h = health(s);
    if (done(h)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return h;
}

TEST(ServeApi, PastTheQueueIsA503AndDisconnectsLeaveNoSlotBehind) {
  TempTree tree;
  Server s(api_args(tree, "--slots 2 --queue 1"));
  ASSERT_GT(s.port(), 0) << s.first_line();
  const auto idle = [](const json& h) { return h["active"] == 0 && h["queued"] == 0; };
  // Two streams hold the slots, one waits; the fourth request is refused. On a loaded machine
  // the two can finish before the third is seen waiting, so the setup is tried again then.
  bool refused = false;
  int sent = 0;  // every request of the setup, each ends completed, cancelled or rejected
  for (int attempt = 0; attempt < 5 && !refused; ++attempt) {
    std::vector<int> socks;
    for (int i = 0; i < 2; ++i) socks.push_back(start_stream(s, "Long ", 500));
    wait_for_health(s, [](const json& h) { return h["active"] == 2; });
    const int waiting = connect_to(s.ip(), s.port());
    const std::string request = post_request(s, "/v1/completions", completion_body("W", 500, true));
    send(waiting, request.data(), request.size(), MSG_NOSIGNAL);
    socks.push_back(waiting);
    sent += 3;
    if (wait_for_health(s, [](const json& h) { return h["queued"] == 1; })["queued"] == 1) {
      const Response busy = post(s, "/v1/completions", completion_body("X", 4, false));
      ++sent;
      refused = busy.status == 503;
      if (refused) {
        expect_error(busy, 503, "", "the server is busy");
        EXPECT_EQ(header(busy, "Retry-After"), "1");
      } else {
        ASSERT_EQ(busy.status, 200) << busy.body;  // a slot came free between the two checks
      }
    }
    for (const int sock : socks) close(sock);
    wait_for_health(s, idle);
  }
  ASSERT_TRUE(refused) << "no attempt saw two streams active and one queued";
  const json before = wait_for_health(s, idle);
  EXPECT_EQ(before["completed"].get<int>() + before["cancelled"].get<int>() +
                before["rejected"].get<int>(),
            sent)
      << before.dump();
  EXPECT_GE(before["rejected"].get<int>(), 1) << before.dump();
  // Ten more clients that hang up mid-stream, each once it is decoding.
  for (int i = 0; i < 10; ++i) {
    const int sock = start_stream(s, "Gone " + std::to_string(i), 500);
    wait_for_health(s, [](const json& h) { return h["active"] == 1; });
    close(sock);
    wait_for_health(s, idle);
  }
  const json h = health(s);
  EXPECT_EQ(h["active"], 0) << h.dump();
  EXPECT_EQ(h["queued"], 0) << h.dump();
  EXPECT_EQ(h["kv_cache_bytes"], 0) << h.dump();
  EXPECT_EQ(h["cancelled"].get<int>() - before["cancelled"].get<int>(), 10) << h.dump();
  EXPECT_EQ(h["rejected"], before["rejected"]) << h.dump();
}

// A request past --request-timeout ends with OpenAI's error object (504 when not streamed, an
// error event before [DONE] when streamed), is counted, and gives its slot back. 480 tokens take
// far longer than 20 ms on any CPU, so both requests must pass the deadline.
TEST(ServeApi, ARequestPastItsDeadlineEndsWithATimeoutAndFreesItsSlot) {
  TempTree tree;
  Server s(api_args(tree, "--request-timeout 0.02"));
  ASSERT_GT(s.port(), 0) << s.first_line();
  const Response plain = post(s, "/v1/completions", completion_body("Slow ", 480, false));
  expect_error(plain, 504, "", "the request passed its deadline of 0.02 s");
  EXPECT_EQ(json::parse(plain.body)["error"]["type"], "timeout");
  const Response streamed = post(s, "/v1/completions", completion_body("Slower ", 480, true));
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const size_t error_at = streamed.body.find("\"type\":\"timeout\"");
  EXPECT_NE(error_at, std::string::npos) << streamed.body;
  EXPECT_LT(error_at, streamed.body.find("data: [DONE]")) << streamed.body;
  size_t tokens = 0;
  for (size_t at = 0; (at = streamed.body.find("\"finish_reason\":null", at)) != std::string::npos;
       ++at)
    ++tokens;
  EXPECT_LT(tokens, 480u) << streamed.body;
  const json h = wait_for_health(s, [](const json& h) { return h["active"] == 0; });
  EXPECT_EQ(h["timed_out"], 2) << h.dump();
  EXPECT_EQ(h["kv_cache_bytes"], 0) << h.dump();
}

// 64 greedy streams of 32 tokens at once (32 decoded together, 32 queued): each must carry 32
// tokens and the very text its prompt gives when it runs alone.
TEST(ServeApi, SixtyFourConcurrentStreamsEachEqualTheirSoloGreedyText) {
  TempTree tree;
  Server s(api_args(tree, "--slots 32 --queue 64"));
  ASSERT_GT(s.port(), 0) << s.first_line();
  constexpr int kStreams = 64, kTokens = 32;
  const auto prompt = [](int i) {
    return std::string(i % 2 ? "The people " : "Congress ") + std::to_string(i) + " ";
  };
  std::vector<std::string> solo(kStreams), together(kStreams);
  std::vector<int> counts(kStreams, -1);
  for (int i = 0; i < kStreams; ++i) {
    const Response r = post(s, "/v1/completions", completion_body(prompt(i), kTokens, false));
    ASSERT_EQ(r.status, 200) << r.body;
    solo[i] = json::parse(r.body)["choices"][0]["text"];
  }
  std::vector<std::thread> clients;
  for (int i = 0; i < kStreams; ++i) {
    clients.emplace_back([&, i] {
      const Response r = post(s, "/v1/completions", completion_body(prompt(i), kTokens, true));
      if (r.status == 200) together[i] = stream_text(r.body, &counts[i]);
    });
  }
  for (std::thread& t : clients) t.join();
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(counts[i], kTokens) << "stream " << i;
    EXPECT_EQ(together[i], solo[i]) << "stream " << i;
  }
  const json h = health(s);
  EXPECT_EQ(h["active"], 0) << h.dump();
  EXPECT_EQ(h["completed"], 2 * kStreams) << h.dump();
}

}  // namespace
}  // namespace forge
