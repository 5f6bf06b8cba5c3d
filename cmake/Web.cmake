# The browser build (emcmake cmake -DFORGE_WEB=ON, driven by scripts/build_web.sh): the inference
# runtime as one wasm ES module, forge_wasm.{js,wasm}. No tests, benchmarks, CLI or trainer; no
# Dawn (the browser context runs on the device JS hands in); no libutf8proc (generated tables).
# forge::Error must reach JS as a message, so C++ exceptions stay on (Emscripten's JS-based
# ones: 3.1.6's wasm-native exceptions do not combine with Asyncify). SIMD128 lets clang
# vectorise the portable CPU kernels.
add_compile_options(-fexceptions -msimd128)
add_link_options(-fexceptions)

# fmt (header-only) and nlohmann-json from the host's Debian packages: only their own include
# folders, linked into the build tree, never the whole host include directory.
set(FORGE_HOST_INCLUDE ${CMAKE_BINARY_DIR}/host-include)
foreach(header fmt/format.h nlohmann/json.hpp)
  get_filename_component(dir ${header} DIRECTORY)
  find_path(FORGE_HOST_${dir} ${header} PATHS /usr/include NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH
            REQUIRED)
  file(MAKE_DIRECTORY ${FORGE_HOST_INCLUDE})
  file(CREATE_LINK ${FORGE_HOST_${dir}}/${dir} ${FORGE_HOST_INCLUDE}/${dir} SYMBOLIC)
endforeach()

if(NOT FORGE_CHAR_CLASS_RANGES OR NOT EXISTS ${FORGE_CHAR_CLASS_RANGES})
  message(FATAL_ERROR "FORGE_CHAR_CLASS_RANGES must name the generated char class table: build "
                      "with scripts/build_web.sh")
endif()

add_library(forge STATIC ${FORGE_SOURCES} ${FORGE_BROWSER_SOURCES})
target_include_directories(forge PUBLIC ${PROJECT_SOURCE_DIR}/src)
target_include_directories(forge SYSTEM PUBLIC ${FORGE_HOST_INCLUDE})
target_compile_definitions(forge PUBLIC FMT_HEADER_ONLY)
target_link_libraries(forge PRIVATE forge_warnings)
include(cmake/EmbedWgsl.cmake)
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/forge/tokenizer/char_class.cpp APPEND PROPERTY
             COMPILE_DEFINITIONS FORGE_CHAR_CLASS_RANGES="${FORGE_CHAR_CLASS_RANGES}")

add_executable(forge_wasm ${PROJECT_SOURCE_DIR}/apps/web/wasm_api.cpp)
target_link_libraries(forge_wasm PRIVATE forge forge_warnings)
# Asyncify lets a C++ wait (a WebGPU readback) yield to the browser's event loop, so the one
# runtime serves both backends; its data stack must hold the deepest such wait. The imports
# that suspend are web/forge_webgpu_fixes.js's waits.
set(FORGE_WEB_JS_LIBRARY ${PROJECT_SOURCE_DIR}/web/forge_webgpu_fixes.js)
set_property(TARGET forge_wasm APPEND PROPERTY LINK_DEPENDS ${FORGE_WEB_JS_LIBRARY})
target_link_options(forge_wasm PRIVATE
  -sUSE_WEBGPU=1 --js-library=${FORGE_WEB_JS_LIBRARY}
  "-sASYNCIFY_IMPORTS=['forge_gpu_map_read','forge_gpu_pop_error_scope','forge_gpu_queue_done']"
  -sMODULARIZE=1 -sEXPORT_ES6=1 -sEXPORT_NAME=createForgeWasm -sENVIRONMENT=web,worker
  -sALLOW_MEMORY_GROWTH=1 -sINITIAL_MEMORY=64MB -sMAXIMUM_MEMORY=4GB
  -sASYNCIFY=1 -sASYNCIFY_STACK_SIZE=65536
  -sFORCE_FILESYSTEM=1 -sEXPORTED_RUNTIME_METHODS=ccall,FS,UTF8ToString
  -sEXPORTED_FUNCTIONS=_malloc,_free)
