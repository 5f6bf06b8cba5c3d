# cmake -DOUT=<file.cpp> -DDIR=<kernels dir> -P EmbedWgslScript.cmake
# Writes forge::gpu::wgsl_source(name): each file's text as a raw string literal, keyed by its
# base name ("matmul" for kernels/matmul.wgsl).
set(body "// Generated from src/forge/backend/webgpu/kernels/*.wgsl; do not edit.\n")
string(APPEND body "#include <string_view>\n\nnamespace forge::gpu {\n\n")
string(APPEND body "std::string_view wgsl_source(std::string_view name) {\n")
file(GLOB SOURCES ${DIR}/*.wgsl)
foreach(src ${SOURCES})
  get_filename_component(name ${src} NAME_WE)
  file(READ ${src} text)
  string(FIND "${text}" ")wgsl\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${src} contains the raw-string delimiter )wgsl\"")
  endif()
  string(APPEND body "  if (name == \"${name}\") return R\"wgsl(${text})wgsl\";\n")
endforeach()
string(APPEND body "  return {};\n}\n\n}  // namespace forge::gpu\n")
file(WRITE ${OUT}.tmp "${body}")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
