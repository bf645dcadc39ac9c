# MPI end-to-end tests (label integration): the mpi, auto and shm backends under
# mpirun, checked collective by collective (tests/mpi_collectives_check.cc), and
# `gantry bench` under mpirun. Registered only when MPI was found.
#
# Open MPI needs --allow-run-as-root when run as root (CI containers) and
# --oversubscribe on machines with fewer cores than ranks; --bind-to none keeps
# concurrently running tests from being bound to the same cores, and the
# shared-memory BTL (vader) keeps everything on this machine.
if(NOT GANTRY_HAVE_MPI)
  if(GANTRY_WITH_MPI)
    set(why "MPI (Open MPI) not found")
  else()
    set(why "MPI switched off (GANTRY_WITH_MPI=OFF)")
  endif()
  gantry_tests_dropped("${why}" "openmpi-bin libopenmpi-dev"
                       "the MPI end-to-end tests mpi_* of tests/mpi.cmake")
  return()
endif()

add_executable(mpi_collectives_check ${CMAKE_CURRENT_LIST_DIR}/mpi_collectives_check.cc)
# RunUnderMpi goes through libgantry_plugin_mpi.so like `gantry` does; the check
# also builds an MPI communicator of its own (gantry_comm_mpi) on the same libmpi.
target_link_libraries(mpi_collectives_check PRIVATE gantry_comm_mpi gantry_comm gantry_core
                      gantry_options MPI::MPI_C)
add_dependencies(mpi_collectives_check gantry_plugin_mpi)
target_include_directories(mpi_collectives_check PRIVATE
  ${CMAKE_SOURCE_DIR}/src/comm ${CMAKE_SOURCE_DIR}/src/comm/mpi)

if(MPIEXEC_EXECUTABLE)
  set(GANTRY_MPIRUN ${MPIEXEC_EXECUTABLE})
else()
  set(GANTRY_MPIRUN mpirun)
endif()
set(GANTRY_MPIRUN_FLAGS --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader)
set(GANTRY_MPI_ENV OMPI_MCA_rmaps_base_oversubscribe=1)
if(GANTRY_SANITIZE)
  # Open MPI 4.1 leaves its own allocations behind at MPI_Finalize (op selection,
  # MCA components), which LeakSanitizer reports from frames it cannot name. Leak
  # checking stays on for every test that does not load Open MPI.
  list(APPEND GANTRY_MPI_ENV ASAN_OPTIONS=detect_leaks=0)
endif()

# gantry_mpi_test(<name> NP <n> [ENV <k=v>...] [RC <code> REGEX <regex>] COMMAND <cmd...>)
# Without REGEX the test passes when mpirun exits 0; with it, mpirun must exit
# with RC (default 0) and its output must match REGEX (tests/mpi_expect.sh).
function(gantry_mpi_test name)
  cmake_parse_arguments(T "" "NP;RC;REGEX" "ENV;COMMAND" ${ARGN})
  set(run ${GANTRY_MPIRUN} ${GANTRY_MPIRUN_FLAGS} -np ${T_NP} ${T_COMMAND})
  if(T_REGEX)
    if(NOT DEFINED T_RC)
      set(T_RC 0)
    endif()
    set(run ${CMAKE_CURRENT_LIST_DIR}/mpi_expect.sh ${T_RC} ${T_REGEX} ${run})
  endif()
  add_test(NAME ${name} COMMAND ${run})
  set_tests_properties(${name} PROPERTIES
    LABELS integration TIMEOUT 120 ENVIRONMENT "${GANTRY_MPI_ENV};${T_ENV}")
endfunction()

set(CHECK $<TARGET_FILE:mpi_collectives_check>)
# mpi: plain MPI collectives, and the split paths for counts beyond MPI's int.
gantry_mpi_test(mpi_check_mpi_np2 NP 2 COMMAND ${CHECK} mpi)
gantry_mpi_test(mpi_check_mpi_np3 NP 3 COMMAND ${CHECK} mpi)
# auto on one node: every collective is shm's.
gantry_mpi_test(mpi_check_auto_np2 NP 2 COMMAND ${CHECK} auto)
# auto over 2 fake nodes of 2 ranks: shm inside, MPI rails between (hierarchical).
gantry_mpi_test(mpi_check_auto_np4_2nodes NP 4 ENV GANTRY_TEST_NODE_SPLIT=2 COMMAND ${CHECK} auto)
# auto over fake nodes of 2 and 1 ranks: uneven nodes fall back to MPI for the
# rooted and reducing collectives; barrier stays hierarchical.
gantry_mpi_test(mpi_check_auto_np3_uneven NP 3 ENV GANTRY_TEST_NODE_SPLIT=2 COMMAND ${CHECK} auto)
# auto with one rank per fake node: every collective is MPI's.
gantry_mpi_test(mpi_check_auto_np2_1pernode NP 2 ENV GANTRY_TEST_NODE_SPLIT=1 COMMAND ${CHECK} auto)
# shm bootstrapped over MPI, and its refusal when the ranks span nodes.
gantry_mpi_test(mpi_check_shm_np2 NP 2 COMMAND ${CHECK} shm)
gantry_mpi_test(mpi_shm_refuses_two_nodes NP 2 ENV GANTRY_TEST_NODE_SPLIT=1 RC 2
                REGEX "ranks span 2 nodes. use --backend auto" COMMAND ${CHECK} shm)

# End to end: the bench CLI under mpirun, with its own correctness check.
foreach(backend mpi auto)
  gantry_mpi_test(mpi_bench_all_reduce_${backend} NP 2
                  REGEX "Out of bounds values : 0 OK"
                  COMMAND $<TARGET_FILE:gantry> bench all_reduce --backend ${backend}
                          -b 8 -e 1M -f 4)
endforeach()
gantry_mpi_test(mpi_bench_all_reduce_auto_2nodes NP 4 ENV GANTRY_TEST_NODE_SPLIT=2
                REGEX "Out of bounds values : 0 OK"
                COMMAND $<TARGET_FILE:gantry> bench all_reduce --backend auto -b 8 -e 1M -f 4)
# Every type and op through the bench's own checker, whose integer inputs wrap
# around: catches MPI reductions that saturate 8-bit sums (open-mpi/ompi#8045).
foreach(coll all_reduce reduce_scatter reduce)
  gantry_mpi_test(mpi_bench_${coll}_all_types_mpi NP 2
                  REGEX "Out of bounds values : 0 OK"
                  COMMAND $<TARGET_FILE:gantry> bench ${coll} --backend mpi -d all -o all
                          -b 64 -e 64K -f 32 -n 2 -w 1)
endforeach()
gantry_mpi_test(mpi_bench_all_reduce_all_types_auto_2nodes NP 4 ENV GANTRY_TEST_NODE_SPLIT=2
                REGEX "Out of bounds values : 0 OK"
                COMMAND $<TARGET_FILE:gantry> bench all_reduce --backend auto -d all -o all
                        -b 64 -e 64K -f 32 -n 2 -w 1)

# The mpi backend is libgantry_plugin_mpi.so, loaded on first use (src/comm/plugins.h):
# the runs above prove it loads; without it the error names the plugin and the folder.
gantry_mpi_test(mpi_bench_without_plugin_says_which NP 1
                ENV GANTRY_PLUGIN_DIR=${CMAKE_BINARY_DIR}/no-such-plugin-dir RC 2
                REGEX "the mpi backend needs the Gantry plugin libgantry_plugin_mpi.so"
                COMMAND $<TARGET_FILE:gantry> bench all_reduce --backend mpi -b 8 -e 8)
