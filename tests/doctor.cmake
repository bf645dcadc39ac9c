# `gantry doctor` end to end (label integration): the real binary against a fake
# IMDS served by tests/doctor_smoke.py, which checks the JSON report, the exit
# codes and the table, and prints (never asserts) how long the run took.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the doctor_smoke test")
  return()
endif()

add_test(NAME doctor_smoke
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/doctor_smoke.py $<TARGET_FILE:gantry>)
set_tests_properties(doctor_smoke PROPERTIES LABELS integration TIMEOUT 300)
