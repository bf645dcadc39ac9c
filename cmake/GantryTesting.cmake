include(GoogleTest)

# gantry_add_test(NAME <name> SOURCES <files...> [LIBS <targets...>] [LABEL unit|integration]
#                 [TIMEOUT <seconds>])
# Builds one GoogleTest binary and registers each of its tests with CTest under the
# given label (default: unit). Every test in `make test` carries a label.
function(gantry_add_test)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SOURCES;LIBS" ${ARGN})
  if(NOT T_LABEL)
    set(T_LABEL unit)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  # gantry_testing (src/testing): the shared fakes, fixtures and CLI runner.
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} gantry_testing GTest::gtest GTest::gmock
                        GTest::gtest_main gantry_options)
  target_compile_definitions(${T_NAME} PRIVATE
    GANTRY_SOURCE_DIR="${CMAKE_SOURCE_DIR}" GANTRY_BINARY_DIR="${CMAKE_BINARY_DIR}")
  gtest_discover_tests(${T_NAME}
    DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS ${T_LABEL} TIMEOUT ${T_TIMEOUT})
endfunction()

# gantry_module_tests(<module> LIBS <targets...> DIRS <dirs...>)
# Convention over configuration: every `foo_test.cc` in DIRS becomes the test
# binary `<module>_foo_test` labelled `unit`; every `foo_integration_test.cc`
# becomes one labelled `integration`, and every `foo_gpu_test.cc` one labelled
# `gpu` (needs a CUDA device; `make test-gpu`, not part of `make test`). Adding a
# test is adding a file.
function(gantry_module_tests module)
  cmake_parse_arguments(T "" "" "LIBS;DIRS" ${ARGN})
  foreach(dir ${T_DIRS})
    file(GLOB tests CONFIGURE_DEPENDS ${dir}/*_test.cc)
    foreach(src ${tests})
      get_filename_component(base ${src} NAME_WE)
      if(base MATCHES "_integration_test$")
        set(label integration)
      elseif(base MATCHES "_gpu_test$")
        set(label gpu)
      else()
        set(label unit)
      endif()
      gantry_add_test(NAME ${module}_${base} SOURCES ${src} LIBS ${T_LIBS} LABEL ${label})
    endforeach()
  endforeach()
endfunction()

# gantry_module_sources(<var> <dirs...>): the non-test, non-fuzz .cc files of DIRS.
function(gantry_module_sources var)
  set(out)
  foreach(dir ${ARGN})
    file(GLOB srcs CONFIGURE_DEPENDS ${dir}/*.cc)
    list(FILTER srcs EXCLUDE REGEX "(_test|_fuzz)\\.cc$")
    list(APPEND out ${srcs})
  endforeach()
  set(${var} ${out} PARENT_SCOPE)
endfunction()

# gantry_add_fuzzer(NAME <fuzz_name> FUZZER <x_fuzz.cc> [SOURCES <files...>]
#                   [LIBS <targets...>] [REPLAY_LIBS <targets...>] [INCLUDES <dirs...>])
# One libFuzzer entry point, built two ways:
# - with -DGANTRY_FUZZ=ON (clang, `make fuzz`): the libFuzzer binary <fuzz_name>
#   from FUZZER plus SOURCES (the parsers, compiled here so that they carry
#   coverage instrumentation and ASan/UBSan) linked with LIBS;
# - otherwise (any compiler, `make test`): <fuzz_name>_replay, FUZZER with the
#   standalone driver src/testing/fuzz_replay_main.cc linked with REPLAY_LIBS
#   (the module libraries), and the ctest <fuzz_name>_replay (label unit)
#   that runs every input of fuzz/corpus/<fuzz_name>/ and
#   fuzz/regressions/<fuzz_name>/ once. An empty or missing corpus fails.
function(gantry_add_fuzzer)
  cmake_parse_arguments(F "" "NAME;FUZZER" "SOURCES;LIBS;REPLAY_LIBS;INCLUDES" ${ARGN})
  if(GANTRY_FUZZ)
    add_executable(${F_NAME} ${F_FUZZER} ${F_SOURCES})
    target_compile_options(${F_NAME} PRIVATE
      -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
    target_link_options(${F_NAME} PRIVATE -fsanitize=fuzzer,address,undefined)
    target_include_directories(${F_NAME} PRIVATE ${F_INCLUDES})
    target_link_libraries(${F_NAME} PRIVATE ${F_LIBS} gantry_options)
  else()
    add_executable(${F_NAME}_replay ${F_FUZZER} ${CMAKE_SOURCE_DIR}/src/testing/fuzz_replay_main.cc)
    target_include_directories(${F_NAME}_replay PRIVATE ${F_INCLUDES})
    target_link_libraries(${F_NAME}_replay PRIVATE ${F_REPLAY_LIBS} gantry_options)
    add_test(NAME ${F_NAME}_replay
             COMMAND ${F_NAME}_replay ${CMAKE_SOURCE_DIR}/fuzz/corpus/${F_NAME}
                     --optional ${CMAKE_SOURCE_DIR}/fuzz/regressions/${F_NAME})
    set_tests_properties(${F_NAME}_replay PROPERTIES LABELS unit TIMEOUT 300)
  endif()
endfunction()
