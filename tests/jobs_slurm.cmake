# `gantry jobs run --backend slurm` end to end against a real single-node Slurm
# (label integration): tests/jobs_slurm/test_jobs_slurm.py starts the cluster of
# tests/health_slurm/slurm_cluster.py (munged, slurmctld, slurmd on free loopback
# ports, as root) and runs workflows with a failing step, a retry, a cancel and a
# client killed with SIGKILL and resumed mid-workflow. Missing Slurm or munge fails
# the test with the package to install, never skips it.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the jobs_slurm_e2e test")
  return()
endif()
add_test(NAME jobs_slurm_e2e
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -rfE
                 ${CMAKE_CURRENT_LIST_DIR}/jobs_slurm/test_jobs_slurm.py
         WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/jobs_slurm)
set_tests_properties(jobs_slurm_e2e PROPERTIES LABELS integration TIMEOUT 600
  ENVIRONMENT "GANTRY=$<TARGET_FILE:gantry>;PYTHONDONTWRITEBYTECODE=1")
