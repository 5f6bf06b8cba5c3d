// forge top's generation worker: loads a model and generates on its own thread, publishing
// text and timings for the UI to read at any moment. Cancelling takes effect at the next
// tensor loaded or token generated, so the UI never waits on the model.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace forge::top {

enum class RunPhase { Idle, Loading, Prefill, Generating, Done, Cancelled, Failed };
const char* phase_name(RunPhase phase);

struct GenerationRequest {
  std::string model_dir;
  std::string backend = "cpu";  // cpu | webgpu | auto, as on every forge command
  std::string prompt;
  int64_t max_tokens = 200;
  float temperature = 0.8f;
  uint64_t seed = 0;
};

/// What the UI shows, copied out under the worker's lock.
struct GenerationView {
  RunPhase phase = RunPhase::Idle;
  std::string model_dir, device, text, error;
  int64_t tokens = 0;
  double load_s = 0, ttft_s = 0;      // ttft: from the prompt's prefill to the first token
  double tokens_per_s = 0;            // decode rate after the first token
  std::vector<double> token_times_s;  // each token's time since the run began
};

class GenerationWorker {
 public:
  GenerationWorker() = default;
  /// Cancels any run and joins its thread.
  ~GenerationWorker();
  GenerationWorker(const GenerationWorker&) = delete;
  GenerationWorker& operator=(const GenerationWorker&) = delete;

  /// Cancels a run in progress, then starts `request`.
  void start(GenerationRequest request);
  void cancel();
  GenerationView view() const;
  bool busy() const;

 private:
  void run(const GenerationRequest& request);
  void set_phase(RunPhase phase);

  mutable std::mutex mutex_;
  GenerationView view_;
  std::atomic<bool> cancel_{false};
  std::thread thread_;
};

}  // namespace forge::top
