# The WebGPU backend: the webgpu.h include path, where Dawn is looked for at run time, and the
# .wgsl kernels embedded into a generated C++ source at build time (so a binary carries them).
if(NOT FORGE_WEB)  # the browser build uses Emscripten's own webgpu.h and no Dawn
  set(FORGE_DAWN_INCLUDE ${PROJECT_SOURCE_DIR}/third_party/dawn/include)
  if(NOT EXISTS ${FORGE_DAWN_INCLUDE}/webgpu/webgpu.h)
    message(FATAL_ERROR "third_party/dawn/include/webgpu/webgpu.h is missing: run scripts/setup.sh")
  endif()
  # PUBLIC so tests can prove the ABI-compat header against the raw library.
  target_include_directories(forge SYSTEM PUBLIC ${FORGE_DAWN_INCLUDE})
  # The source tree is the last place Dawn and the Vulkan loader are looked for, after beside the
  # binary and $FORGE_HOME (dawn_loader.cpp).
  set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/forge/backend/webgpu/dawn_loader.cpp APPEND PROPERTY
    COMPILE_DEFINITIONS FORGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()

file(GLOB FORGE_WGSL CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/forge/backend/webgpu/kernels/*.wgsl)
set(FORGE_WGSL_CPP ${CMAKE_BINARY_DIR}/generated/wgsl_sources.cpp)
add_custom_command(
  OUTPUT ${FORGE_WGSL_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${FORGE_WGSL_CPP} -DDIR=${PROJECT_SOURCE_DIR}/src/forge/backend/webgpu/kernels
          -P ${PROJECT_SOURCE_DIR}/cmake/EmbedWgslScript.cmake
  DEPENDS ${FORGE_WGSL} ${PROJECT_SOURCE_DIR}/cmake/EmbedWgslScript.cmake
  COMMENT "Embedding WGSL kernels")
target_sources(forge PRIVATE ${FORGE_WGSL_CPP})
