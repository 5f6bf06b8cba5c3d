// forge serve's OpenAI-compatible API: POST /v1/completions (streamed as server-sent events or
// not), GET /v1/models, POST /tokenize and /detokenize, GET /health; errors in OpenAI's error
// object. Generation goes through the scheduler.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "forge/models/gpt2/gpt2.h"
#include "forge/tokenizer/tokenizer.h"
#include "serve/http.h"
#include "serve/scheduler.h"

namespace forge::serve {

struct ApiOptions {
  std::string model_name;  // the id clients name in "model"
  std::string api_key;     // when set, every route but /health needs `Authorization: Bearer`
  bool cors = false;       // answer browsers' cross-origin requests (Access-Control-*)
  SchedulerLimits limits;
  size_t max_body = 1 << 20;  // HttpLimits::max_body, named in the 413 error
  std::chrono::milliseconds request_timeout{300000};  // a request's deadline, queueing included
};

class Api {
 public:
  /// `tokenizer` may be null: prompts are then token-id arrays and text is empty.
  Api(const Gpt2& model, const Tokenizer* tokenizer, ApiOptions options);

  /// Whether a path is the API's (the rest of the server serves files).
  static bool owns(const std::string& path);
  HttpResponse handle(const HttpRequest& request);

 private:
  HttpResponse completions(const HttpRequest& request);
  HttpResponse tokenize(const HttpRequest& request);
  HttpResponse detokenize(const HttpRequest& request);
  HttpResponse models() const;
  HttpResponse health() const;

  const Gpt2& model_;
  const Tokenizer* tokenizer_;
  const ApiOptions options_;
  Scheduler scheduler_;
};

}  // namespace forge::serve
