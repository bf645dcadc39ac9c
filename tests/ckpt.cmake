# `gantry ckpt plan` and `gantry ckpt bench` end to end (the other ckpt verbs
# are driven by src/ckpt/cli_integration_test.cc, which writes checkpoints
# with the library first).
add_test(NAME ckpt_plan_daly
         COMMAND $<TARGET_FILE:gantry> ckpt plan --save-time 5m --mtbf 24h --state-size 80G)
set_tests_properties(ckpt_plan_daly PROPERTIES LABELS unit TIMEOUT 30
  PASS_REGULAR_EXPRESSION "Daly interval: +1h56m41s")

add_test(NAME ckpt_plan_rejects_bad_mtbf
         COMMAND $<TARGET_FILE:gantry> ckpt plan --save-time 5m --mtbf soon)
set_tests_properties(ckpt_plan_rejects_bad_mtbf PROPERTIES LABELS unit TIMEOUT 30 WILL_FAIL TRUE)

add_test(NAME ckpt_bench_smoke
         COMMAND /bin/bash ${CMAKE_CURRENT_LIST_DIR}/ckpt_bench_smoke.sh $<TARGET_FILE:gantry>)
set_tests_properties(ckpt_bench_smoke PROPERTIES LABELS integration TIMEOUT 120)
