# `gantry health --slurm` against a real single-node Slurm (label integration):
# tests/health_slurm/test_slurm.py starts munged, slurmctld and slurmd (Debian packages
# munge, slurmctld, slurmd, slurm-client; scripts/install-deps.sh) in a temp dir with their
# own slurm.conf on free 127.0.0.1 ports, then checks drain on failure, resume after a clean
# pass, an admin's drain left alone, and --dry-run. Needs root (slurmd, scontrol update);
# missing Slurm or munge fails the test with the package to install, never skips it.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the health_slurm test")
  return()
endif()

add_test(NAME health_slurm
         COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -rfE
                 ${CMAKE_CURRENT_LIST_DIR}/health_slurm/test_slurm.py
         WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/health_slurm)
set_tests_properties(health_slurm PROPERTIES LABELS integration TIMEOUT 300
  ENVIRONMENT "GANTRY=$<TARGET_FILE:gantry>;PYTHONDONTWRITEBYTECODE=1")
