# libforge_mpi.so: the plugin through which `forge train` joins an MPI job for data-parallel
# training (src/forge/train/mpi_abi.h says why it is a plugin). Optional: without MPI's headers
# everything else builds as before, and a run under mpirun is refused with a message.
option(FORGE_MPI "Build the MPI plugin when an MPI implementation is found" ON)
if(FORGE_MPI)
  enable_language(C)  # FindMPI probes the C API (the plugin uses only that) with a C compiler
  find_package(MPI COMPONENTS C QUIET)
endif()
if(MPI_C_FOUND)
  add_library(forge_mpi MODULE ${PROJECT_SOURCE_DIR}/src/forge/train/mpi_plugin.cpp)
  target_include_directories(forge_mpi PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(forge_mpi PRIVATE OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  target_link_libraries(forge_mpi PRIVATE MPI::MPI_C forge_warnings)
  if(TARGET forge_cli)
    add_dependencies(forge_cli forge_mpi)  # under mpirun, forge loads it from beside itself
  endif()
  message(STATUS "Forge: MPI plugin for data-parallel training (${MPI_C_LIBRARIES})")
endif()
