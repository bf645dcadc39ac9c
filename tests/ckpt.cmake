# `gantry ckpt plan` and `gantry ckpt bench` end to end (the other ckpt verbs
# are driven by src/ckpt/cli_integration_test.cc, which writes checkpoints
# with the library first).
add_test(NAME ckpt_plan_daly
         COMMAND /bin/bash ${CMAKE_CURRENT_LIST_DIR}/mpi_expect.sh 0 "Daly interval: +1h56m41s"
                 $<TARGET_FILE:gantry> ckpt plan --save-time 5m --mtbf 24h --state-size 80G)
set_tests_properties(ckpt_plan_daly PROPERTIES LABELS unit TIMEOUT 30)

# The usage exit code (2) and a message naming the flag: WILL_FAIL alone would
# pass a crash too.
add_test(NAME ckpt_plan_rejects_bad_mtbf
         COMMAND /bin/bash ${CMAKE_CURRENT_LIST_DIR}/mpi_expect.sh 2 "ckpt plan: --mtbf: .*soon"
                 $<TARGET_FILE:gantry> ckpt plan --save-time 5m --mtbf soon)
set_tests_properties(ckpt_plan_rejects_bad_mtbf PROPERTIES LABELS unit TIMEOUT 30)

add_test(NAME ckpt_bench_smoke
         COMMAND /bin/bash ${CMAKE_CURRENT_LIST_DIR}/ckpt_bench_smoke.sh $<TARGET_FILE:gantry>)
set_tests_properties(ckpt_bench_smoke PROPERTIES LABELS integration TIMEOUT 120)
