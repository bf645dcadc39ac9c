# `gantry health` end to end (label integration): the real binary with the
# generic profile, its JSON, NHC log and JUnit outputs, a failing extension, a
# bad profile and the profile list, against a fake IMDS served by
# tests/health_smoke.py, which prints (never asserts) how long the run took.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the health_smoke test")
  return()
endif()

add_test(NAME health_smoke
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/health_smoke.py $<TARGET_FILE:gantry>)
set_tests_properties(health_smoke PROPERTIES LABELS integration TIMEOUT 300)
