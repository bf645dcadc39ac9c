# `gantry autoscale slurm-resume|slurm-suspend` as a real Slurm's power saving programs
# (label integration): tests/autoscale_slurm/test_autoscale_slurm.py starts munged and
# slurmctld (tests/health_slurm/slurm_cluster.py, as root, free 127.0.0.1 ports) with two
# State=CLOUD nodes, SuspendTime=5 and ResumeProgram/SuspendProgram wrappers around gantry,
# whose autoscale.yaml starts and stops a `slurmd -N <node>` per node. A job resumes its
# node and runs; the idle node is suspended (POWERED_DOWN, its slurmd gone); both come back
# for a second round. Missing Slurm, munge or gantry fails the test, never skips it.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the autoscale_slurm_e2e test")
  return()
endif()
add_test(NAME autoscale_slurm_e2e
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -rfE
                 ${CMAKE_CURRENT_LIST_DIR}/autoscale_slurm/test_autoscale_slurm.py
         WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/autoscale_slurm)
set_tests_properties(autoscale_slurm_e2e PROPERTIES LABELS integration TIMEOUT 600
  ENVIRONMENT "GANTRY=$<TARGET_FILE:gantry>;PYTHONDONTWRITEBYTECODE=1")
