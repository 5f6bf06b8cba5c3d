# The forge CLI and the README's library example (built so it cannot rot).
find_package(CLI11 CONFIG REQUIRED)
# forge serve: GNU libmicrohttpd (connection limits, idle timeouts, a thread per connection).
pkg_check_modules(MHD REQUIRED IMPORTED_TARGET libmicrohttpd)
file(GLOB FORGE_CLI_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/apps/forge/*.cpp
     ${PROJECT_SOURCE_DIR}/apps/forge/top/*.cpp ${PROJECT_SOURCE_DIR}/apps/forge/serve/*.cpp)
# forge top draws with ncurses (wide-character build, for UTF-8 text and sparklines).
pkg_check_modules(NCURSESW REQUIRED IMPORTED_TARGET ncursesw)
if(FORGE_CLI_SOURCES)
  add_executable(forge_cli ${FORGE_CLI_SOURCES})
  set_target_properties(forge_cli PROPERTIES OUTPUT_NAME forge)
  target_include_directories(forge_cli PRIVATE ${PROJECT_SOURCE_DIR}/apps/forge)
  target_link_libraries(forge_cli PRIVATE forge CLI11::CLI11 PkgConfig::MHD PkgConfig::NCURSESW
                                          forge_warnings ${CMAKE_DL_LIBS})
  # The last place the CLI looks for the files it ships (models/, build-web/site): after beside
  # the binary and $FORGE_HOME (apps/forge/cli.h, find_tree_dir).
  target_compile_definitions(forge_cli PRIVATE FORGE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
file(GLOB FORGE_EXAMPLES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/examples/*.cpp)
foreach(example ${FORGE_EXAMPLES})
  get_filename_component(name ${example} NAME_WE)
  add_executable(example_${name} ${example})
  target_link_libraries(example_${name} PRIVATE forge forge_warnings)
endforeach()
