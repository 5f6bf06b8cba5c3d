#include "serve/api.h"

#include <poll.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <random>

#include "forge/core/error.h"

namespace forge::serve {
namespace {

using json = nlohmann::json;

/// A request the API refuses, answered with OpenAI's error object.
struct ApiError {
  ApiError(int status_, std::string param_, std::string message_)
      : status(status_), param(std::move(param_)), message(std::move(message_)) {}
  int status;
  std::string param;  // the offending field, "" when none
  std::string message;
  std::string type = "invalid_request_error";
  std::string code;
};

[[noreturn]] void fail(int status, std::string param, std::string message) {
  throw ApiError(status, std::move(param), std::move(message));
}

std::string dump(const json& value) {
  // Token text can be half a UTF-8 character; it goes out as U+FFFD rather than failing.
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

HttpResponse json_response(int status, const json& body) {
  HttpResponse r;
  r.status = status;
  r.headers.emplace_back("Content-Type", "application/json");
  r.body = dump(body);
  return r;
}

json error_object(const ApiError& e) {
  return {{"error",
           {{"message", e.message},
            {"type", e.type},
            {"param", e.param.empty() ? json(nullptr) : json(e.param)},
            {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
}

HttpResponse error_response(const ApiError& e) {
  HttpResponse r = json_response(e.status, error_object(e));
  if (e.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

// The body as a JSON object; an invalid UTF-8 string names the field it is in.
json parse_body(const HttpRequest& req, size_t limit) {
  if (req.body_too_large)
    fail(413, "", "the request body is over " + std::to_string(limit) + " bytes");
  std::string last_key;
  const json::parser_callback_t note_key = [&](int, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key) last_key = parsed.get<std::string>();
    return true;
  };
  json body;
  try {
    body = json::parse(req.body, note_key);
  } catch (const json::exception& e) {  // a syntax error, or a number past a double's range
    const std::string what = e.what();
    if (what.find("UTF-8") != std::string::npos || what.find("surrogate") != std::string::npos)
      fail(400, last_key, "'" + last_key + "' is not valid UTF-8");
    fail(400, "", "the request body is not JSON: " + what);
  }
  if (!body.is_object()) fail(400, "", "the request body must be a JSON object");
  return body;
}

bool present(const json& body, const char* name) {
  return body.contains(name) && !body[name].is_null();
}

int64_t integer_field(const json& body, const char* name, int64_t fallback, int64_t lo,
                      int64_t hi) {
  if (!present(body, name)) return fallback;
  const json& v = body[name];
  if (!v.is_number_integer()) fail(400, name, std::string("'") + name + "' must be an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi))
    fail(400, name, std::string("'") + name + "' must be at most " + std::to_string(hi));
  const int64_t x = v.get<int64_t>();
  if (x < lo || x > hi)
    fail(400, name,
         std::string("'") + name + "' must be in [" + std::to_string(lo) + ", " +
             std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

double number_field(const json& body, const char* name, double fallback, double lo, double hi,
                    bool lo_open) {
  if (!present(body, name)) return fallback;
  const json& v = body[name];
  if (!v.is_number()) fail(400, name, std::string("'") + name + "' must be a number");
  const double x = v.get<double>();
  if (x > hi || x < lo || (lo_open && x == lo))
    fail(400, name,
         std::string("'") + name + "' must be in " + (lo_open ? "(" : "[") + std::to_string(lo) +
             ", " + std::to_string(hi) + "], got " + std::to_string(x));
  return x;
}

bool bool_field(const json& body, const char* name, bool fallback) {
  if (!present(body, name)) return fallback;
  if (!body[name].is_boolean()) fail(400, name, std::string("'") + name + "' must be a boolean");
  return body[name].get<bool>();
}

// A field this server does not implement must keep OpenAI's default, or the request is refused
// (rather than silently answered as if it were honoured).
void require_default(const json& body, const char* name, const json& fallback) {
  if (present(body, name) && body[name] != fallback)
    fail(400, name,
         std::string("'") + name + "' is not supported by forge serve (only " + dump(fallback) +
             ")");
}

bool client_gone(int socket) {
  if (socket < 0) return false;
  pollfd p{socket, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

const char* finish_reason(StopReason reason) {
  return reason == StopReason::Eos || reason == StopReason::StopString ? "stop" : "length";
}

std::string completion_id() {
  static std::atomic<uint64_t> next{1};
  return "cmpl-forge-" + std::to_string(next++);
}

}  // namespace

Api::Api(const Gpt2& model, const Tokenizer* tokenizer, ApiOptions options)
    : model_(model),
      tokenizer_(tokenizer),
      options_(std::move(options)),
      scheduler_(model, tokenizer, options_.limits) {}

bool Api::owns(const std::string& path) {
  return path == "/v1" || path.rfind("/v1/", 0) == 0 || path == "/tokenize" ||
         path == "/detokenize" || path == "/health";
}

namespace {

// What a completion request asks for, checked.
struct CompletionRequest {
  std::vector<uint32_t> prompt;
  GenerateOptions options;
  bool stream = false, include_usage = false;
  int64_t logprobs = -1;
};

void check_model(const json& body, const std::string& name, bool required) {
  if (!present(body, "model")) {
    if (required) fail(400, "model", "'model' is required (GET /v1/models lists them)");
    return;
  }
  if (!body["model"].is_string()) fail(400, "model", "'model' must be a string");
  if (body["model"].get<std::string>() != name) {
    ApiError e{404, "model",
               "the model '" + body["model"].get<std::string>() +
                   "' does not exist (this server has '" + name + "')"};
    e.code = "model_not_found";
    throw e;
  }
}

std::vector<uint32_t> token_ids(const json& array, const char* field, int64_t vocab) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < array.size(); ++i) {
    const json& v = array[i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab)
      fail(400, field,
           std::string("'") + field + "[" + std::to_string(i) + "]' = " + dump(v) +
               " is not a token id of this model (0 … " + std::to_string(vocab - 1) + ")");
    ids.push_back(static_cast<uint32_t>(v.get<int64_t>()));
  }
  return ids;
}

std::vector<uint32_t> encode_text(const Tokenizer* tokenizer, const std::string& text,
                                  const char* field) {
  if (!tokenizer)
    fail(400, field, "this model has no vocabulary: give the prompt as an array of token ids");
  try {
    return tokenizer->encode(text);
  } catch (const Error& e) {
    fail(400, field, std::string("'") + field + "': " + e.what());
  }
}

CompletionRequest parse_completion(const json& body, const Gpt2& model,
                                   const Tokenizer* tokenizer) {
  const int64_t n_ctx = model.config().n_ctx;
  const int64_t vocab = model.config().vocab_size;
  CompletionRequest r;
  if (!body.contains("prompt")) fail(400, "prompt", "'prompt' is required");
  json prompt = body["prompt"];
  // A list holding one prompt is one prompt; several are several completions (n > 1).
  if (prompt.is_array() && !prompt.empty() && (prompt[0].is_string() || prompt[0].is_array())) {
    if (prompt.size() != 1)
      fail(400, "prompt", "one prompt per request: forge serve answers n = 1 completion");
    prompt = json(prompt[0]);
  }
  if (prompt.is_string()) {
    r.prompt = encode_text(tokenizer, prompt.get<std::string>(), "prompt");
  } else if (prompt.is_array()) {
    r.prompt = token_ids(prompt, "prompt", vocab);
  } else {
    fail(400, "prompt", "'prompt' must be a string or an array of token ids");
  }
  if (r.prompt.empty()) fail(400, "prompt", "'prompt' is empty: give at least one token");
  const int64_t prompt_tokens = static_cast<int64_t>(r.prompt.size());
  if (prompt_tokens > n_ctx)
    fail(400, "prompt",
         "the prompt is " + std::to_string(prompt_tokens) +
             " tokens, over the model's context of " + std::to_string(n_ctx) + " tokens");
  GenerateOptions& o = r.options;
  o.max_tokens = integer_field(body, "max_tokens", 16, 0, n_ctx);
  if (prompt_tokens + o.max_tokens > n_ctx)
    fail(400, "max_tokens",
         "the prompt (" + std::to_string(prompt_tokens) + " tokens) and 'max_tokens' (" +
             std::to_string(o.max_tokens) + ") exceed the model's context of " +
             std::to_string(n_ctx) + " tokens");
  o.sampling.temperature =
      static_cast<float>(number_field(body, "temperature", 1.0, 0.0, 2.0, false));
  o.sampling.greedy = o.sampling.temperature == 0.0f;
  o.sampling.top_p = static_cast<float>(number_field(body, "top_p", 1.0, 0.0, 1.0, true));
  o.sampling.top_k = integer_field(body, "top_k", 0, 0, vocab);
  o.sampling.seed =
      present(body, "seed")
          ? static_cast<uint64_t>(integer_field(body, "seed", 0, INT64_MIN, INT64_MAX))
          : std::random_device{}();
  if (present(body, "stop")) {
    const json& stop = body["stop"];
    const json list = stop.is_string() ? json::array({stop}) : stop;
    if (!list.is_array() || list.size() > 4)
      fail(400, "stop", "'stop' must be a string or a list of at most 4 strings");
    for (const json& s : list) {
      if (!s.is_string() || s.get<std::string>().empty())
        fail(400, "stop", "'stop' entries must be non-empty strings");
      o.stop_strings.push_back(s.get<std::string>());
    }
    if (!o.stop_strings.empty() && !tokenizer)
      fail(400, "stop", "'stop' needs a model with a vocabulary");
  }
  r.logprobs = integer_field(body, "logprobs", -1, 0, 5);
  o.top_logprobs = r.logprobs;
  r.stream = bool_field(body, "stream", false);
  if (present(body, "stream_options")) {
    if (!body["stream_options"].is_object())
      fail(400, "stream_options", "'stream_options' must be an object");
    r.include_usage = bool_field(body["stream_options"], "include_usage", false);
  }
  integer_field(body, "n", 1, 1, 1);
  integer_field(body, "best_of", 1, 1, 1);
  require_default(body, "echo", false);
  require_default(body, "suffix", nullptr);
  require_default(body, "presence_penalty", 0);
  require_default(body, "frequency_penalty", 0);
  if (present(body, "logit_bias") && !body["logit_bias"].empty())
    fail(400, "logit_bias", "'logit_bias' is not supported by forge serve");
  return r;
}

std::string token_text(const Tokenizer* tokenizer, uint32_t id) {
  return tokenizer ? tokenizer->decode(std::span(&id, 1)) : std::to_string(id);
}

// OpenAI's legacy logprobs object for the given tokens, offsets counted from `offset`.
json logprobs_object(const Tokenizer* tokenizer, const std::vector<Piece>& pieces, size_t offset) {
  json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
       offsets = json::array();
  for (const Piece& p : pieces) {
    if (p.id == kNoToken || !p.logprobs) continue;
    const std::string text = token_text(tokenizer, p.id);
    tokens.push_back(text);
    token_logprobs.push_back(p.logprobs->logprob);
    json alternatives = json::object();
    for (const TokenLogprob& t : p.logprobs->top)
      alternatives[token_text(tokenizer, t.id)] = t.logprob;
    top.push_back(alternatives);
    offsets.push_back(offset);
    offset += text.size();
  }
  return {{"tokens", tokens},
          {"token_logprobs", token_logprobs},
          {"top_logprobs", top},
          {"text_offset", offsets}};
}

json usage(size_t prompt, size_t completion) {
  return {{"prompt_tokens", prompt},
          {"completion_tokens", completion},
          {"total_tokens", prompt + completion}};
}

// "300 s" or "0.05 s": the deadline as the --request-timeout flag took it.
std::string format_seconds(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(t.count()) / 1e3);
  return text;
}

// The error a sequence that did not finish ends with.
ApiError ended_early(Sequence::End end, const Sequence& s, std::chrono::milliseconds timeout) {
  switch (end) {
    case Sequence::End::DeadlinePassed: {
      ApiError e{504, "",
                 "the request passed its deadline of " + format_seconds(timeout) +
                     " (forge serve --request-timeout)"};
      e.type = "timeout";
      return e;
    }
    case Sequence::End::Failed: {
      ApiError e{500, "", s.error()};
      e.type = "server_error";
      return e;
    }
    default: {
      ApiError e{503, "", "the request was cancelled: the server is stopping"};
      e.type = "server_error";
      return e;
    }
  }
}

}  // namespace

HttpResponse Api::completions(const HttpRequest& request) {
  const json body = parse_body(request, options_.max_body);
  check_model(body, options_.model_name, true);
  CompletionRequest c = parse_completion(body, model_, tokenizer_);
  const size_t prompt_tokens = c.prompt.size();
  std::shared_ptr<Sequence> sequence = scheduler_.submit(
      std::move(c.prompt), c.options, Sequence::Clock::now() + options_.request_timeout);
  if (!sequence) {
    ApiError e{503, "",
               "the server is busy: " + std::to_string(options_.limits.slots) +
                   " completions are running and " + std::to_string(options_.limits.queue) +
                   " waiting; retry later"};
    e.type = "server_error";
    throw e;
  }
  const json head = {{"id", completion_id()},
                     {"object", "text_completion"},
                     {"created", static_cast<int64_t>(std::time(nullptr))},
                     {"model", options_.model_name}};
  const Tokenizer* tokenizer = tokenizer_;
  const bool want_logprobs = c.logprobs >= 0;

  if (!c.stream) {
    std::vector<Piece> pieces;
    Sequence::End end = Sequence::End::Running;
    while ((end = sequence->take(pieces, std::chrono::milliseconds(50))) ==
           Sequence::End::Running) {
      if (client_gone(request.socket)) {
        sequence->cancel();
        return text_response(499, "the client went away\n");
      }
    }
    if (end != Sequence::End::Done) throw ended_early(end, *sequence, options_.request_timeout);
    const GenerateResult& result = sequence->result();
    json choice = {{"text", result.text},
                   {"index", 0},
                   {"logprobs", want_logprobs ? logprobs_object(tokenizer, pieces, 0) : json()},
                   {"finish_reason", finish_reason(result.reason)}};
    json out = head;
    out["choices"] = json::array({choice});
    out["usage"] = usage(prompt_tokens, result.ids.size());
    return json_response(200, out);
  }

  // Server-sent events: a chunk per token, the finish reason, usage if asked, then [DONE].
  struct Stream {
    std::shared_ptr<Sequence> sequence;
    std::string pending;
    size_t text_bytes = 0;
    bool finished = false;
    // The server drops the body's reader when the connection ends, however it ends (a reset
    // client is never polled again): a stream not yet finished stops at the next step.
    ~Stream() {
      if (!finished) sequence->cancel();
    }
  };
  auto stream = std::make_shared<Stream>();
  stream->sequence = sequence;
  const auto event = [](const json& data) { return "data: " + dump(data) + "\n\n"; };
  const bool include_usage = c.include_usage;
  const int socket = request.socket;
  const std::chrono::milliseconds timeout = options_.request_timeout;
  HttpResponse r;
  r.headers = {{"Content-Type", "text/event-stream"}, {"Cache-Control", "no-cache"}};
  r.reader = [=](uint64_t, char* buf, size_t max) -> ssize_t {
    while (stream->pending.empty()) {
      if (stream->finished) return kBodyEnd;
      if (client_gone(socket)) {
        stream->sequence->cancel();
        return kBodyAbort;
      }
      std::vector<Piece> pieces;
      const Sequence::End end = stream->sequence->take(pieces, std::chrono::milliseconds(50));
      for (const Piece& p : pieces) {
        json choice = {
            {"text", p.text}, {"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
        if (want_logprobs && p.id != kNoToken)
          choice["logprobs"] = logprobs_object(tokenizer, {p}, stream->text_bytes);
        stream->text_bytes += p.text.size();
        json chunk = head;
        chunk["choices"] = json::array({choice});
        stream->pending += event(chunk);
      }
      if (end == Sequence::End::Running) continue;
      if (end == Sequence::End::Done) {
        const GenerateResult& result = stream->sequence->result();
        json chunk = head;
        chunk["choices"] = json::array({{{"text", ""},
                                         {"index", 0},
                                         {"logprobs", nullptr},
                                         {"finish_reason", finish_reason(result.reason)}}});
        stream->pending += event(chunk);
        if (include_usage) {
          json last = head;
          last["choices"] = json::array();
          last["usage"] = usage(prompt_tokens, result.ids.size());
          stream->pending += event(last);
        }
      } else {
        stream->pending += event(error_object(ended_early(end, *stream->sequence, timeout)));
      }
      stream->pending += "data: [DONE]\n\n";
      stream->finished = true;
    }
    const size_t n = std::min(max, stream->pending.size());
    std::copy_n(stream->pending.data(), n, buf);
    stream->pending.erase(0, n);
    return static_cast<ssize_t>(n);
  };
  return r;
}

HttpResponse Api::tokenize(const HttpRequest& request) {
  const json body = parse_body(request, options_.max_body);
  check_model(body, options_.model_name, false);
  if (!present(body, "prompt") || !body["prompt"].is_string())
    fail(400, "prompt", "'prompt' must be a string");
  const std::vector<uint32_t> ids =
      encode_text(tokenizer_, body["prompt"].get<std::string>(), "prompt");
  return json_response(
      200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", model_.config().n_ctx}});
}

HttpResponse Api::detokenize(const HttpRequest& request) {
  const json body = parse_body(request, options_.max_body);
  check_model(body, options_.model_name, false);
  if (!present(body, "tokens") || !body["tokens"].is_array())
    fail(400, "tokens", "'tokens' must be an array of token ids");
  const std::vector<uint32_t> ids = token_ids(body["tokens"], "tokens", model_.config().vocab_size);
  if (!tokenizer_) fail(400, "tokens", "this model has no vocabulary to decode with");
  return json_response(200, {{"prompt", tokenizer_->decode(ids)}});
}

HttpResponse Api::models() const {
  return json_response(200, {{"object", "list"},
                             {"data",
                              {{{"id", options_.model_name},
                                {"object", "model"},
                                {"created", 0},
                                {"owned_by", "forge"},
                                {"context_length", model_.config().n_ctx}}}}});
}

HttpResponse Api::health() const {
  const SchedulerCounters c = scheduler_.counters();
  return json_response(200, {{"status", "ok"},
                             {"model", options_.model_name},
                             {"slots", options_.limits.slots},
                             {"queue_limit", options_.limits.queue},
                             {"active", c.active},
                             {"queued", c.queued},
                             {"completed", c.completed},
                             {"cancelled", c.cancelled},
                             {"timed_out", c.timed_out},
                             {"failed", c.failed},
                             {"rejected", c.rejected},
                             {"tokens", c.tokens},
                             {"kv_cache_bytes", c.kv_cache_bytes}});
}

HttpResponse Api::handle(const HttpRequest& request) {
  HttpResponse r;
  try {
    if (request.method == "OPTIONS") {
      if (!options_.cors) fail(405, "", "cross-origin requests are off (forge serve --cors)");
      r.status = 204;
      r.headers = {{"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                   {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
                   {"Access-Control-Max-Age", "600"}};
    } else {
      if (!options_.api_key.empty() && request.path != "/health" &&
          request.header("Authorization") != "Bearer " + options_.api_key) {
        ApiError e{401, "", "a missing or wrong API key: send Authorization: Bearer <key>"};
        e.code = "invalid_api_key";
        throw e;
      }
      const auto route = [&](const char* method, const char* path) {
        if (request.path != path) return false;
        if (request.method != method)
          fail(405, "", std::string(path) + " takes " + method + ", not " + request.method);
        return true;
      };
      if (route("POST", "/v1/completions")) {
        r = completions(request);
      } else if (route("GET", "/v1/models")) {
        r = models();
      } else if (request.path == "/v1/models/" + options_.model_name && request.method == "GET") {
        r = models();
        r.body = dump(json::parse(r.body)["data"][0]);
      } else if (route("POST", "/tokenize")) {
        r = tokenize(request);
      } else if (route("POST", "/detokenize")) {
        r = detokenize(request);
      } else if (route("GET", "/health")) {
        r = health();
      } else {
        fail(404, "",
             "no route " + request.method + " " + request.path +
                 " (forge serve has POST /v1/completions, GET /v1/models, POST "
                 "/tokenize, POST /detokenize, GET /health)");
      }
    }
  } catch (const ApiError& e) {
    r = error_response(e);
  }
  if (options_.cors) r.headers.emplace_back("Access-Control-Allow-Origin", "*");
  return r;
}

}  // namespace forge::serve
