# The forge CLI and the README's library example (built so it cannot rot).
find_package(CLI11 CONFIG REQUIRED)
# forge serve: GNU libmicrohttpd (connection limits, idle timeouts, a thread per connection).
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
set(FORGE_CLI_SOURCES
  main.cpp cli.cpp progress.cpp train_ranks.cpp
  cmd_bench.cpp cmd_convert.cpp cmd_council.cpp cmd_generate.cpp cmd_info.cpp cmd_score.cpp
  cmd_serve.cpp cmd_surprise.cpp cmd_tokenize.cpp cmd_top.cpp cmd_train.cpp
  serve/api.cpp serve/file_body.cpp serve/files.cpp serve/http.cpp serve/scheduler.cpp
  top/app.cpp top/generation.cpp top/layout.cpp top/metrics.cpp top/model_pane.cpp
  top/run_dashboard.cpp top/scanner.cpp)
list(TRANSFORM FORGE_CLI_SOURCES PREPEND ${PROJECT_SOURCE_DIR}/apps/forge/)
# forge top draws with ncurses (wide-character build, for UTF-8 text and sparklines).
pkg_check_modules(NCURSESW REQUIRED IMPORTED_TARGET ncursesw)
add_executable(forge_cli ${FORGE_CLI_SOURCES})
set_target_properties(forge_cli PROPERTIES OUTPUT_NAME forge)
target_include_directories(forge_cli PRIVATE ${PROJECT_SOURCE_DIR}/apps/forge)
target_link_libraries(forge_cli PRIVATE forge CLI11::CLI11 PkgConfig::MHD PkgConfig::NCURSESW
                                        forge_warnings ${CMAKE_DL_LIBS})
# The last place the CLI looks for the files it ships (models/, build-web/site): after beside
# the binary and $FORGE_HOME (apps/forge/cli.h, find_tree_dir).
target_compile_definitions(forge_cli PRIVATE FORGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
add_executable(example_generate ${PROJECT_SOURCE_DIR}/examples/generate.cpp)
target_link_libraries(example_generate PRIVATE forge forge_warnings)
