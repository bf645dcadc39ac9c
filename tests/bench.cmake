# `gantry bench` end to end (label integration), checked by tests/bench_nccl_format.py,
# a strict parser written from nccl-tests' output format:
#   bench_format_text       *_perf entry points in many modes: every line's layout, the
#                           number formats, busbw = algbw x factor, the sweep's sizes
#   bench_format_files      -J (nccl-tests JSON v3), --csv and --json agree with the text
#   bench_format_corrupt    a damaged element (test hook) gives #wrong > 0 and exit 7
#   bench_format_bad_input  bad flags and values: exit 2 with one line naming them
#   bench_sweep_<c>_<n>     every collective, type and op on 2, 3 and 4 ranks checks clean
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the bench end-to-end tests bench_format_* and bench_sweep_*")
  return()
endif()

set(GANTRY_BENCH_CHECK /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/bench_nccl_format.py
    $<TARGET_FILE_DIR:gantry>)

foreach(scenario text files corrupt bad-input)
  string(REPLACE "-" "_" name ${scenario})
  add_test(NAME bench_format_${name} COMMAND ${GANTRY_BENCH_CHECK} ${scenario})
  set_tests_properties(bench_format_${name} PROPERTIES LABELS integration TIMEOUT 300)
endforeach()

foreach(collective all_reduce all_gather reduce_scatter broadcast reduce alltoall sendrecv
                   gather scatter)
  foreach(ranks 2 3 4)
    add_test(NAME bench_sweep_${collective}_${ranks}
             COMMAND ${GANTRY_BENCH_CHECK} sweep ${collective} ${ranks})
    set_tests_properties(bench_sweep_${collective}_${ranks} PROPERTIES LABELS integration TIMEOUT 120)
  endforeach()
endforeach()
