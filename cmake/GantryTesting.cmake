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
