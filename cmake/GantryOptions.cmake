# One INTERFACE target carries every warning and code-generation flag, so each
# library, binary and test is compiled the same way.
option(GANTRY_NATIVE "Tune for the build machine (-march=native); Gantry is built where it runs" ON)
option(GANTRY_WERROR "Treat warnings as errors" OFF)
option(GANTRY_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(GANTRY_TSAN "Build with ThreadSanitizer (the `tsan` preset; not with GANTRY_SANITIZE)" OFF)
option(GANTRY_FUZZ "Build libFuzzer targets (needs clang)" OFF)
if(GANTRY_TSAN AND GANTRY_SANITIZE)
  message(FATAL_ERROR "GANTRY_TSAN and GANTRY_SANITIZE (ASan) cannot be combined")
endif()
if(GANTRY_FUZZ AND NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "GANTRY_FUZZ needs clang (configure with CC=clang CXX=clang++)")
endif()

find_program(CCACHE_PROGRAM ccache)
if(CCACHE_PROGRAM)
  set(CMAKE_C_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
  set(GANTRY_CCACHE ON)
else()
  set(GANTRY_CCACHE OFF)
endif()

add_library(gantry_options INTERFACE)
target_compile_options(gantry_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wno-unused-parameter -Wnon-virtual-dtor>
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<COMPILE_LANGUAGE:CXX,C>>:-Wshadow=local>
  $<$<AND:$<BOOL:${GANTRY_WERROR}>,$<COMPILE_LANGUAGE:CXX,C>>:-Werror>
  $<$<AND:$<BOOL:${GANTRY_NATIVE}>,$<COMPILE_LANGUAGE:CXX,C>>:-march=native>)
target_include_directories(gantry_options INTERFACE
  ${CMAKE_SOURCE_DIR}/include ${CMAKE_BINARY_DIR}/include)
target_compile_features(gantry_options INTERFACE cxx_std_20)
if(GANTRY_SANITIZE OR GANTRY_TSAN)
  # The plugins (shared modules) link the static libraries; sanitizer code refers to
  # runtime symbols (e.g. __ubsan_vptr_type_cache) that only PIC may reach from a
  # shared object.
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)
endif()
if(GANTRY_SANITIZE)
  target_compile_options(gantry_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined>)
  target_link_options(gantry_options INTERFACE -fsanitize=address,undefined)
endif()
if(GANTRY_TSAN)
  # Suppressions for third-party reports only: .ci/tsan.supp (TSAN_OPTIONS).
  target_compile_options(gantry_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=thread -fno-omit-frame-pointer>)
  target_link_options(gantry_options INTERFACE -fsanitize=thread)
endif()
