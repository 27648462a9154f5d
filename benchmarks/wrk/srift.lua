-- wrk script for benchmarks/load_wrk.py: one request (method, path, JSON body, bearer token) sent in a loop,
-- optionally paced to a target rate, with a JSON report written by done().
--
-- Environment (set by load_wrk.py):
--   SRIFT_WRK_METHOD, SRIFT_WRK_PATH      the request
--   SRIFT_WRK_BODY_FILE                   file holding the JSON body (empty: no body)
--   SRIFT_WRK_TOKEN                       bearer token (empty: none)
--   SRIFT_WRK_THREAD_RATE                 requests per second per wrk thread (empty or 0: as fast as possible)
--   SRIFT_WRK_REPORT                      where done() writes its JSON report
--
-- Pacing: each wrk thread keeps a schedule of send times 1/rate apart and delay() holds each request until
-- its slot; a thread whose connections are all busy falls behind and catches up at once (latency is then
-- measured from the late send, so a saturated server shows as a missed rate, which the report states).

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } srift_timespec;
  int clock_gettime(int clk_id, srift_timespec *tp);
]]
local CLOCK_MONOTONIC = 1
local ts = ffi.new("srift_timespec")

local function now_s()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, ts)
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

local function read_file(path)
  if path == nil or path == "" then return nil end
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

wrk.method = os.getenv("SRIFT_WRK_METHOD") or "GET"
wrk.path = os.getenv("SRIFT_WRK_PATH") or "/"
wrk.body = read_file(os.getenv("SRIFT_WRK_BODY_FILE"))
if wrk.body ~= nil then wrk.headers["Content-Type"] = "application/json" end
local token = os.getenv("SRIFT_WRK_TOKEN")
if token ~= nil and token ~= "" then wrk.headers["Authorization"] = "Bearer " .. token end

-- delay() exists only when pacing, so an unpaced run sends wrk's static request with no Lua per request
local rate = tonumber(os.getenv("SRIFT_WRK_THREAD_RATE") or "")
if rate ~= nil and rate > 0 then
  local interval_s = 1.0 / rate
  local next_send_s = nil
  function delay()
    local now = now_s()
    if next_send_s == nil then next_send_s = now end
    next_send_s = next_send_s + interval_s
    local wait_ms = (next_send_s - now) * 1000.0
    if wait_ms < 1 then return 0 end
    return math.floor(wait_ms)
  end
end

function done(summary, latency, requests)
  local path = os.getenv("SRIFT_WRK_REPORT")
  local e = summary.errors
  local parts = {
    string.format('"requests": %d', summary.requests),
    string.format('"duration_us": %d', summary.duration),
    string.format('"bytes": %d', summary.bytes),
    string.format('"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}',
      e.connect, e.read, e.write, e.status, e.timeout),
    string.format('"latency_us": {"min": %d, "mean": %.1f, "stdev": %.1f, "max": %d, "p50": %d, "p90": %d, "p99": %d, "p999": %d}',
      latency.min, latency.mean, latency.stdev, latency.max,
      latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9)),
  }
  local f = assert(io.open(path, "w"))
  f:write("{" .. table.concat(parts, ", ") .. "}\n")
  f:close()
end
