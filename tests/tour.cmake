# The tour (examples/tour/, `make tour`) end to end (label integration): every module working
# together on this machine, the report screenshotted in headless Chromium. report_test.py checks
# the report generator alone (label unit).
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the tour tests")
  return()
endif()

add_test(NAME tour_report COMMAND /usr/bin/python3 -B -m unittest -q report_test
         WORKING_DIRECTORY ${CMAKE_SOURCE_DIR}/examples/tour)
set_tests_properties(tour_report PROPERTIES LABELS unit TIMEOUT 120)

add_test(NAME tour COMMAND /usr/bin/python3 -B ${CMAKE_CURRENT_LIST_DIR}/tour/tour_test.py
         ${CMAKE_BINARY_DIR})
# The tour starts services on free loopback ports and needs both cores for its serve step.
set_tests_properties(tour PROPERTIES LABELS integration TIMEOUT 1500 RUN_SERIAL TRUE)
