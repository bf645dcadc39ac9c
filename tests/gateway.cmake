# The inference gateway end to end (label integration): tests/gateway/test_*.py drive the
# real `gantry gateway run` against a small torch model server (tests/gateway/
# model_server.py), nginx, redis-server and promtool, each started on free 127.0.0.1
# ports in a temp dir. One CTest test per file:
#   gateway_harness   the harness alone (model server, nginx, redis, promtool), no gantry
#   gateway_proxy     KServe v2 + OpenAI (stream, usage sniffing), ids, errors, keep-alive
#   gateway_hostile   401/403 without bypass (keys, JWT), smuggling, 431/413, slowloris
#   gateway_limits    rate limits, token limits, quotas, two gateways on one Redis, fail-open
#   gateway_audit     audit records, `gantry audit verify` on clean and tampered logs
#   gateway_admin     admin API and `gantry gateway keys` online and offline
#   gateway_reload    SIGHUP reload with a stream in flight, SIGTERM drain, `gateway check`
#   gateway_metrics   /metrics through `promtool check metrics`
#   gateway_robust    HTTP/1.0, idle timeout, pipelined flood, no crossed responses after a
#                     504 or a client abort, no secrets in logs/metrics/error bodies
#   gateway_tls       TLS termination (`tls:` in gateway.yaml) with a self-signed cert
#   gateway_pools     backend pools over 4 model servers in fake zones: least-request,
#                     zone preference and spill-over, retries, outlier ejection and return,
#                     fallback tier (X-Gantry-Degraded), 503 + Retry-After, circuit breaker
#   gateway_rollout   canary 90/10 over 10k requests (4 sigma), `gantry gateway rollout`
#                     set/switch/rollback, sticky by key and header, drain, rolling restart
#                     of every backend under non-idempotent load with zero failures
#   gateway_anomaly   output anomaly detection: drift, 500s and latency fire Alertmanager v4
#                     webhooks (a receiver in the test) and resolve
# Missing redis-server, nginx or promtool fail the tests that need them, with the Debian
# package to install (scripts/install-deps.sh), never skip them.
if(NOT EXISTS /usr/bin/python3)
  gantry_tests_dropped("/usr/bin/python3 not found" "python3" "the gateway end-to-end tests gateway_*")
  return()
endif()

foreach(suite harness proxy hostile limits audit admin reload metrics robust tls pools rollout
              anomaly)
  add_test(NAME gateway_${suite}
           COMMAND /usr/bin/python3 -m pytest -q -p no:cacheprovider -rfE
                   ${CMAKE_CURRENT_LIST_DIR}/gateway/test_${suite}.py
           WORKING_DIRECTORY ${CMAKE_CURRENT_LIST_DIR}/gateway)
  set_tests_properties(gateway_${suite} PROPERTIES LABELS integration TIMEOUT 150
    ENVIRONMENT "GANTRY=$<TARGET_FILE:gantry>;PYTHONDONTWRITEBYTECODE=1")
endforeach()
# Several model servers, restarts and 10k-request splits: more time on slow machines.
set_tests_properties(gateway_pools gateway_rollout gateway_anomaly PROPERTIES TIMEOUT 300)
