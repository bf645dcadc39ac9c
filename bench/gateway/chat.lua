-- wrk script for bench/gateway.sh: every request is a small OpenAI chat completion
-- (POST /v1/chat/completions with a JSON body), the same for every variant.
-- GANTRY_KEY (optional) is sent as "Authorization: Bearer ...".
-- RATE_DELAY_MS (optional) makes each connection wait that long between requests, for
-- the fixed-rate latency run (wrk has no -R; wrk2 is not in Debian).
wrk.method = "POST"
wrk.path = "/v1/chat/completions"
wrk.body = '{"model":"tiny-lm","messages":[{"role":"user","content":"hello"}],"max_tokens":2}'
wrk.headers["Content-Type"] = "application/json"
local key = os.getenv("GANTRY_KEY")
if key ~= nil and key ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. key
end
local d = tonumber(os.getenv("RATE_DELAY_MS") or "")
if d ~= nil and d > 0 then
  function delay()
    return d
  end
end
