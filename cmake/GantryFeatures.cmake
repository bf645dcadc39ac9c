# Optional build features, detected at configure time and reported in one line.
# Nothing here is required: without MPI, CUDA, NCCL, Python or Gloo, Gantry still
# builds, and the tests of the missing features are not registered: each place
# that drops tests calls gantry_tests_dropped() (below), which warns, naming the
# tests and the Debian package to install, or, with
# -DGANTRY_REQUIRE_ALL_FEATURES=ON (CI), stops the configure with that message.

option(GANTRY_REQUIRE_ALL_FEATURES
       "Fail the configure when an optional piece (MPI, python3, pybind11, Gloo) is missing \
instead of registering fewer tests" OFF)

# gantry_tests_dropped(<piece> <debian packages> <tests>): `piece` is missing (or
# switched off), so `tests` are not registered. FATAL_ERROR under
# GANTRY_REQUIRE_ALL_FEATURES, else a WARNING; either way the message names the
# tests and what to install. The dropped tests are also collected in the global
# property GANTRY_DROPPED_TESTS for the summary at the end of the configure.
function(gantry_tests_dropped piece packages tests)
  set(msg "${piece}: not registered: ${tests}. Install the Debian package(s) ${packages} \
(scripts/install-deps.sh installs them) and configure again.")
  if(GANTRY_REQUIRE_ALL_FEATURES)
    message(FATAL_ERROR "GANTRY_REQUIRE_ALL_FEATURES=ON and ${msg}")
  endif()
  message(WARNING "${msg} (-DGANTRY_REQUIRE_ALL_FEATURES=ON makes this an error.)")
  set_property(GLOBAL APPEND PROPERTY GANTRY_DROPPED_TESTS "${tests} [${piece}]")
endfunction()

# Called at the end of the top-level CMakeLists.txt: one WARNING listing every
# group of tests that was not registered, so a green `ctest` is not mistaken for
# the full suite.
function(gantry_report_dropped_tests)
  get_property(dropped GLOBAL PROPERTY GANTRY_DROPPED_TESTS)
  if(dropped)
    list(JOIN dropped "\n  - " lines)
    message(WARNING "Tests NOT registered in this build:\n  - ${lines}\n"
                    "ctest passing here does not mean the full suite passes.")
  endif()
endfunction()

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)

# NUMA placement of shared-memory buffers (libnuma).
find_library(NUMA_LIBRARY numa)
find_path(NUMA_INCLUDE_DIR numa.h)
if(NUMA_LIBRARY AND NUMA_INCLUDE_DIR)
  set(GANTRY_HAVE_NUMA ON)
else()
  set(GANTRY_HAVE_NUMA OFF)
endif()

# MPI: Debian's OpenMPI.
option(GANTRY_WITH_MPI "Build the MPI backend when MPI is found" ON)
set(GANTRY_HAVE_MPI OFF)
if(GANTRY_WITH_MPI)
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(GANTRY_HAVE_MPI ON)
  endif()
endif()

# CUDA + NCCL: both must be present for the nccl backend.
option(GANTRY_WITH_CUDA "Build the CUDA/NCCL backend when nvcc and libnccl are found" ON)
set(GANTRY_HAVE_CUDA OFF)
set(GANTRY_HAVE_NCCL OFF)
if(GANTRY_WITH_CUDA)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(GANTRY_HAVE_CUDA ON)
      find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} $ENV{NCCL_HOME}/include)
      find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} $ENV{NCCL_HOME}/lib)
      if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
        set(GANTRY_HAVE_NCCL ON)
      endif()
    endif()
  endif()
endif()

# Python bindings: always Debian's interpreter, never one that happens to be first on PATH.
option(GANTRY_WITH_PYTHON "Build Python bindings when pybind11 is found" ON)
set(GANTRY_HAVE_PYTHON OFF)
if(GANTRY_WITH_PYTHON)
  if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module QUIET)
  find_package(pybind11 CONFIG QUIET)
  if(Python3_FOUND AND pybind11_FOUND)
    set(GANTRY_HAVE_PYTHON ON)
  endif()
endif()

# Gloo: only the benchmark anchor harness uses it.
find_package(Gloo CONFIG QUIET)
if(Gloo_FOUND OR TARGET gloo)
  set(GANTRY_HAVE_GLOO ON)
else()
  set(GANTRY_HAVE_GLOO OFF)
endif()

message(STATUS "Gantry ${PROJECT_VERSION} features: MPI=${GANTRY_HAVE_MPI} CUDA=${GANTRY_HAVE_CUDA} "
               "NCCL=${GANTRY_HAVE_NCCL} Python=${GANTRY_HAVE_PYTHON} Gloo=${GANTRY_HAVE_GLOO} "
               "NUMA=${GANTRY_HAVE_NUMA} ccache=${GANTRY_CCACHE} native=${GANTRY_NATIVE} "
               "sanitize=${GANTRY_SANITIZE} tsan=${GANTRY_TSAN}")

foreach(f MPI CUDA NCCL PYTHON NUMA)
  if(GANTRY_HAVE_${f})
    set(GANTRY_HAVE_${f}_INT 1)
  else()
    set(GANTRY_HAVE_${f}_INT 0)
  endif()
endforeach()
