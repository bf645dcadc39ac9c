# Optional build features, detected at configure time and reported in one line.
# Nothing here is required: without MPI, CUDA, NCCL, Python or Gloo, Gantry still
# builds, and the tests of the missing features are not registered (the summary
# line says which).

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
