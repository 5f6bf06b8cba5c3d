# The library's translation units, by layer. Both builds compile FORGE_SOURCES; each adds its
# own platform's files (the browser has no Dawn loader, adapter choice or trainer).
set(FORGE_SOURCES
  core/shape.cpp core/tensor.cpp
  backend/cpu/bandwidth.cpp backend/cpu/cpu_backend.cpp backend/cpu/gemm.cpp
  backend/cpu/host_pool.cpp backend/cpu/isa.cpp backend/cpu/kernels.cpp backend/cpu/reference.cpp
  backend/cpu/thread_pool.cpp backend/cpu/train_kernels.cpp backend/cpu/train_reference.cpp
  backend/webgpu/context.cpp backend/webgpu/profiling.cpp backend/webgpu/webgpu_backend.cpp
  backend/webgpu/webgpu_options.cpp backend/webgpu/encoder.cpp backend/webgpu/elementwise.cpp
  backend/webgpu/attention.cpp backend/webgpu/matmul.cpp backend/webgpu/train_kernels.cpp
  ops/ops.cpp ops/train_ops.cpp
  autograd/functions.cpp autograd/tape.cpp
  optim/adamw.cpp
  serialization/compact.cpp serialization/file_io.cpp serialization/json_parse.cpp
  serialization/safetensors.cpp
  tokenizer/bpe_tokenizer.cpp tokenizer/char_class.cpp tokenizer/char_tokenizer.cpp
  tokenizer/tokenizer.cpp tokenizer/utf8.cpp tokenizer/vocab_file.cpp
  models/gpt2/config.cpp models/gpt2/council.cpp models/gpt2/generate.cpp models/gpt2/gpt2.cpp
  models/gpt2/inspect.cpp models/gpt2/kv_arena.cpp models/gpt2/sampler.cpp models/gpt2/score.cpp)
set(FORGE_NATIVE_SOURCES
  backend/webgpu/platform_dawn.cpp backend/webgpu/dawn_loader.cpp backend/webgpu/adapter.cpp
  train/distributed.cpp train/font.cpp train/image.cpp train/loss_plot.cpp train/run_dir.cpp
  train/sha256.cpp train/trainer.cpp)
set(FORGE_BROWSER_SOURCES backend/webgpu/platform_browser.cpp)
list(TRANSFORM FORGE_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/src/forge/)
list(TRANSFORM FORGE_NATIVE_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/src/forge/)
list(TRANSFORM FORGE_BROWSER_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/src/forge/)
