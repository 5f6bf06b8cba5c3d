#include "generation.h"

#include "../cli.h"
#include "forge/core/error.h"
#include "forge/models/gpt2/generate.h"

namespace forge::top {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Thrown from the load progress callback to abandon a load the user cancelled.
struct Cancelled {};

}  // namespace

const char* phase_name(RunPhase phase) {
  switch (phase) {
    case RunPhase::Idle:
      return "idle";
    case RunPhase::Loading:
      return "loading";
    case RunPhase::Prefill:
      return "prefill";
    case RunPhase::Generating:
      return "generating";
    case RunPhase::Done:
      return "done";
    case RunPhase::Cancelled:
      return "cancelled";
    case RunPhase::Failed:
      return "failed";
  }
  return "?";
}

GenerationWorker::~GenerationWorker() {
  cancel();
  if (thread_.joinable()) thread_.join();
}

void GenerationWorker::start(GenerationRequest request) {
  cancel();
  if (thread_.joinable()) thread_.join();
  cancel_ = false;
  {
    const std::lock_guard lock(mutex_);
    view_ = GenerationView{};
    view_.phase = RunPhase::Loading;
    view_.model_dir = request.model_dir;
  }
  thread_ = std::thread([this, request = std::move(request)] { run(request); });
}

void GenerationWorker::cancel() {
  cancel_ = true;
}

GenerationView GenerationWorker::view() const {
  const std::lock_guard lock(mutex_);
  return view_;
}

bool GenerationWorker::busy() const {
  const RunPhase p = view().phase;
  return p == RunPhase::Loading || p == RunPhase::Prefill || p == RunPhase::Generating;
}

void GenerationWorker::set_phase(RunPhase phase) {
  const std::lock_guard lock(mutex_);
  view_.phase = phase;
}

void GenerationWorker::run(const GenerationRequest& request) {
  const Clock::time_point t0 = Clock::now();
  try {
    cli::CommonOptions options;
    options.backend = request.backend;
    const Device device = cli::open_device(options);
    {
      const std::lock_guard lock(mutex_);
      view_.device = device.name();
    }
    const Gpt2 model = Gpt2::load(request.model_dir, device, [&](int64_t, int64_t) {
      if (cancel_) throw Cancelled{};
    });
    const auto tokenizer = Tokenizer::from_directory(request.model_dir);
    {
      const std::lock_guard lock(mutex_);
      view_.load_s = since(t0);
      view_.phase = RunPhase::Prefill;
    }
    std::vector<uint32_t> prompt = tokenizer->encode(request.prompt);
    if (prompt.empty() && tokenizer->eos_id()) prompt.push_back(*tokenizer->eos_id());
    FORGE_CHECK(!prompt.empty(), "the prompt is empty and the vocabulary has no end-of-text token");
    // A prompt longer than half the context keeps its end, so the answer has room to grow.
    const int64_t keep = std::max<int64_t>(1, model.config().n_ctx / 2);
    if (int64_t(prompt.size()) > keep) prompt.erase(prompt.begin(), prompt.end() - keep);
    GenerateOptions g;
    g.max_tokens = request.max_tokens;
    g.sampling.temperature = request.temperature;
    g.sampling.seed = request.seed;
    g.sliding_window = true;
    const Clock::time_point start = Clock::now();
    double first_s = 0;
    generate(model, tokenizer.get(), prompt, g, [&](uint32_t id, std::string_view text) {
      const std::lock_guard lock(mutex_);
      view_.text += text;
      if (id == kNoToken) return true;
      const double now = since(t0);
      if (view_.tokens++ == 0) {
        first_s = now;
        view_.ttft_s = since(start);
        view_.phase = RunPhase::Generating;
      } else {
        view_.tokens_per_s = double(view_.tokens - 1) / std::max(1e-9, now - first_s);
      }
      view_.token_times_s.push_back(now);
      return !cancel_.load();
    });
    set_phase(cancel_ ? RunPhase::Cancelled : RunPhase::Done);
  } catch (const Cancelled&) {
    set_phase(RunPhase::Cancelled);
  } catch (const std::exception& e) {
    const std::lock_guard lock(mutex_);
    view_.error = e.what();
    view_.phase = RunPhase::Failed;
  }
}

}  // namespace forge::top
