-- The C walkthrough from LuaJIT's ffi, in the shape of a game's frame loop:
-- boards and ideas, a comment written offline and flushed later, events that
-- outlive a lost connection and a restart, remote config with a live
-- listener (and the cached copy after a restart), a logger, reads that never
-- block a frame (non-blocking calls completed in the frame loop), every handle
-- freed at exit.
--
--     luajit examples/luajit/walkthrough.lua DIST_DIR API_URL APP_ID DATA_DIR
--
-- The declarations are the shipped dist/share/appnorth/appnorth.cdef, read
-- unmodified: they cannot drift from the header.
--
-- LuaJIT aborts ("bad callback") when the library calls a Lua function from
-- one of its own threads while Lua runs, so the client is in dispatch mode:
-- its logger and the config listener run only inside appnorth_dispatch(),
-- called once per frame on this thread. docs/hosts.md, "LuaJIT", has the
-- rules.
--
-- DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
-- every API connection (POST /admin/faults); config versions are published
-- through /admin/apps/APP/config. A real API has neither.
local ffi = require("ffi")
local dist, api_url, app, data_dir = arg[1], arg[2], arg[3], arg[4]
if not data_dir then
    io.stderr:write("usage: luajit walkthrough.lua DIST_DIR API_URL APP_ID DATA_DIR\n")
    os.exit(2)
end
local cdef = assert(io.open(dist .. "/share/appnorth/appnorth.cdef", "rb"))
ffi.cdef(cdef:read("*a"))
cdef:close()
local lib = ffi.load(dist .. "/lib/libappnorth.so.0")

-- The two string rules: Lua strings passed in are copied by the library;
-- a char **out_* string is copied into Lua, then released with
-- appnorth_string_free. A const char * return is static: never freed.
local err = ffi.new("appnorth_error")
local function check(rc)
    if rc ~= lib.APPNORTH_OK then
        error(("%s (HTTP %d): %s"):format(ffi.string(lib.appnorth_status_str(rc)), err.http_status,
                                          ffi.string(err.message)), 2)
    end
end
local function take(out)
    if out[0] == nil then return nil end
    local text = ffi.string(out[0])
    lib.appnorth_string_free(out[0])
    return text
end
local function out_string() return ffi.new("char *[1]") end

-- ---- dev server /admin calls over a libc socket (loopback only) ----------
ffi.cdef [[
struct appnorth_example_sockaddr_in { uint16_t family; uint16_t port; uint32_t addr; uint8_t zero[8]; };
int socket(int domain, int type, int protocol);
int connect(int fd, const void *addr, uint32_t len);
long write(int fd, const void *buf, size_t n);
long read(int fd, void *buf, size_t n);
int close(int fd);
int inet_pton(int af, const char *src, void *dst);
int poll(void *fds, unsigned long nfds, int timeout);
]]
local host, port = api_url:match("^http://([%d.]+):(%d+)")
local function dev_admin(method, path, body)
    body = body or ""
    local address = ffi.new("struct appnorth_example_sockaddr_in")
    address.family, address.port = 2, bit.rshift(bit.bswap(tonumber(port)), 16) -- AF_INET, network order
    assert(ffi.C.inet_pton(2, host, ffi.cast("void *", ffi.cast("char *", address) + 4)) == 1)
    local fd = ffi.C.socket(2, 1, 0) -- SOCK_STREAM
    assert(fd >= 0 and ffi.C.connect(fd, address, ffi.sizeof(address)) == 0, "dev server unreachable")
    local request = ("%s %s HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                     .. "Connection: close\r\n\r\n%s"):format(method, path, host, port, #body, body)
    ffi.C.write(fd, request, #request)
    local reply = ffi.new("char[64]")
    ffi.C.read(fd, reply, 63)
    ffi.C.close(fd)
end

-- ---- the frame loop ---------------------------------------------------------
-- Callbacks: ffi.cast keeps each Lua function callable from C until
-- :free(), done at exit after the client is freed. In dispatch mode they
-- run inside appnorth_dispatch(), on this thread.
local config_changes = 0
local logger = ffi.cast("appnorth_log_fn", function(_, message)
    print("   [log] " .. ffi.string(message))
end)
local listener = ffi.cast("appnorth_config_listener_fn", function(config_json, changed_keys)
    print("   listener: changed " .. ffi.string(changed_keys) .. " -> " .. ffi.string(config_json))
    config_changes = config_changes + 1
end)

local client
local ran = ffi.new("int32_t[1]")
-- One frame: run what the library queued for this thread (nothing pending
-- costs one atomic load), then wait for the next frame (16 ms).
local function frame()
    check(lib.appnorth_dispatch(client, 0, ran, err))
    ffi.C.poll(nil, 0, 16)
end
-- Never compiled: appnorth_dispatch() calls back into Lua (the logger, the
-- listener, the completions). After some quiet frames LuaJIT compiles the
-- frame loop, this function inlined; the first callback from a C call made
-- by compiled code then aborts the process ("PANIC: unprotected error in
-- call to Lua API (bad callback)"). LuaJIT's FFI manual: turn compilation
-- off for the function that calls the C function that calls back. The
-- loops around it may still be compiled: their traces stop at this call.
jit.off(frame)
-- Runs frames until done() is true: 20 s at most.
local function frames(done)
    for _ = 1, 1250 do
        if done() then return true end
        frame()
    end
    return false
end

-- Non-blocking reads: a start call returns at once; its completion runs in
-- a later frame's appnorth_dispatch(), on this thread (dispatch mode).
local finished = {}
local on_done = ffi.cast("appnorth_completion_fn", function(op, status, e, result_json)
    finished[tostring(op)] = {status = status, message = ffi.string(e.message),
                              json = result_json ~= nil and ffi.string(result_json) or nil}
end)
-- read(start, args...): starts start(client, args..., on_done, NULL, &op,
-- &err), keeps the frames going until it completed, returns its JSON.
local function read(start, ...)
    local n, args, op = select("#", ...), {client, ...}, ffi.new("uint64_t[1]")
    args[n + 2], args[n + 3], args[n + 4], args[n + 5] = on_done, ffi.cast("void *", 0), op, err
    check(start(unpack(args, 1, n + 5)))
    local key, frames_waited = tostring(op[0]), 0
    assert(frames(function() frames_waited = frames_waited + 1; return finished[key] ~= nil end), "no completion")
    local result = finished[key]
    finished[key] = nil
    if result.status ~= lib.APPNORTH_OK then
        error(("%s: %s"):format(ffi.string(lib.appnorth_status_str(result.status)), result.message))
    end
    return result.json, frames_waited - 1 -- done() runs once before each frame
end

print(("libappnorth %s (LuaJIT %s, ffi)"):format(ffi.string(lib.appnorth_version()), jit.version))
local client_out = ffi.new("appnorth_client *[1]")
do
    local options = lib.appnorth_client_options_new()
    check(lib.appnorth_client_options_set_api_url(options, api_url, err))
    check(lib.appnorth_client_options_set_app_id(options, app, err))
    check(lib.appnorth_client_options_set_logger(options, logger, lib.APPNORTH_LOG_INFO, nil, err))
    check(lib.appnorth_client_options_set_dispatch_mode(options, 1, err))
    check(lib.appnorth_client_new(options, client_out, err))
    lib.appnorth_client_options_free(options)
end
client = client_out[0]

-- APPNORTH_IDLE_FRAMES=N: first a loop of N quiet frames (a game's menu)
-- that then starts a read, whose completion runs in the same loop, long
-- after LuaJIT compiled it (make test runs 300).
local idle = tonumber(os.getenv("APPNORTH_IDLE_FRAMES") or "0")
if idle > 0 then
    local count, op, key = 0, ffi.new("uint64_t[1]"), nil
    while not (key and finished[key]) do -- a game's loop: one frame per turn
        frame()
        count = count + 1
        if count == idle then
            check(lib.appnorth_client_list_boards_async(client, on_done, nil, op, err))
            key = tostring(op[0])
        end
        assert(count < idle + 1250, "no completion")
    end
    finished[key] = nil
    print(("0. %d idle frames, then a read completed in the same frame loop (frame %d)"):format(idle, count))
end

print("1. Boards and ideas, read without blocking a frame")
local boards, waited = read(lib.appnorth_client_list_boards_async)
print(("   boards (after %d frames): %s"):format(waited, boards))
local ideas = read(lib.appnorth_client_list_ideas_async, '{"q":"dark"}')
print('   ideas matching "dark": ' .. ideas)
local json = out_string()

print("2. A comment written offline")
local storage, queue = ffi.new("appnorth_storage *[1]"), ffi.new("appnorth_queue *[1]")
check(lib.appnorth_storage_new_sqlite(data_dir .. "/queue", "queue", storage, err))
check(lib.appnorth_queue_new(storage[0], 0, queue, err))
lib.appnorth_storage_free(storage[0]) -- the queue keeps its own reference
dev_admin("POST", "/admin/faults", '{"drop":true,"count":1000}')
local submitted, sent, pending = ffi.new("int32_t[1]"), ffi.new("int32_t[1]"), ffi.new("int32_t[1]")
check(lib.appnorth_queue_submit_comment(queue[0], client, ideas:match('"id":"([^"]+)"'),
                                        "Sí, escrito en el avión ✈", nil, submitted, err))
check(lib.appnorth_queue_pending_count(queue[0], pending, err))
print(("   sent now: %s, pending: %d"):format(tostring(submitted[0] == 1), pending[0]))
dev_admin("DELETE", "/admin/faults")
check(lib.appnorth_queue_flush(queue[0], client, sent, err))
check(lib.appnorth_queue_pending_count(queue[0], pending, err))
print(("   after reconnecting: %d sent, %d pending"):format(sent[0], pending[0]))
local ok = submitted[0] == 0 and sent[0] == 1 and pending[0] == 0
lib.appnorth_queue_free(queue[0])
frame() -- the log lines of this step run here, on this thread

print("3. Events that outlive a lost connection and a restart")
local function open_events()
    local options, out = lib.appnorth_events_options_new(), ffi.new("appnorth_events *[1]")
    check(lib.appnorth_events_options_set_client(options, client, err))
    check(lib.appnorth_events_options_set_data_dir(options, data_dir .. "/events", err))
    check(lib.appnorth_events_new(options, out, err))
    lib.appnorth_events_options_free(options)
    return out[0]
end
dev_admin("POST", "/admin/faults", '{"drop":true,"count":1000}')
local events = open_events()
for level = 1, 300 do
    check(lib.appnorth_events_track(events, "level_completed", ('{"level":%d}'):format(level), nil, err))
end
print("   flush while offline: " .. ffi.string(lib.appnorth_status_str(lib.appnorth_events_flush(events, 2000, err)))
      .. " (events kept)")
lib.appnorth_events_free(events) -- "restart": the events stay on disk
dev_admin("DELETE", "/admin/faults")
events = open_events()
check(lib.appnorth_events_foreground(events, err))
check(lib.appnorth_events_flush(events, 10000, err))
check(lib.appnorth_events_stats(events, json, err))
local stats = take(json)
print("   after restarting online: " .. stats)
ok = ok and stats:find('"queued":0', 1, true) ~= nil
lib.appnorth_events_free(events)
frame()

print("4. Remote config with a live listener, run by the frame loop")
local function open_config()
    local options, out = lib.appnorth_config_options_new(), ffi.new("appnorth_config *[1]")
    check(lib.appnorth_config_options_set_client(options, client, err))
    check(lib.appnorth_config_options_set_data_dir(options, data_dir .. "/config", err))
    check(lib.appnorth_config_new(options, out, err))
    lib.appnorth_config_options_free(options)
    return out[0]
end
local path = "/admin/apps/" .. app .. "/config"
dev_admin("POST", path, '{"config":{"theme":"dark","price":9.99}}')
local config = open_config()
local token = ffi.new("int64_t[1]")
check(lib.appnorth_config_add_listener(config, listener, nil, token, err))
check(lib.appnorth_config_start_live(config, err))
local price = ffi.new("double[1]")
local function price_is(value) -- one frame's read: from memory, never blocks
    check(lib.appnorth_config_get_double(config, "price", 0, price, err))
    return price[0] == value
end
ok = frames(function() return config_changes >= 1 end) and price_is(9.99) and ok
check(lib.appnorth_config_get_string(config, "theme", "light", json, err))
print("   theme " .. take(json) .. ", price " .. price[0])
dev_admin("POST", path, '{"config":{"theme":"dark","price":7.49}}')
ok = frames(function() return config_changes >= 2 end) and price_is(7.49) and ok
print("   after a live update: price " .. price[0])
check(lib.appnorth_config_remove_listener(config, token[0], err))
lib.appnorth_config_free(config) -- stops the stream thread
config = open_config()           -- a "restart": opening makes no network call
local tier = ffi.new("int32_t[1]")
check(lib.appnorth_config_source(config, tier, nil, err))
ok = ok and price_is(7.49) and tier[0] == lib.APPNORTH_CONFIG_TIER_CACHED
print(("   after a restart, before any fetch: cached tier %s, price %s"):format(
      tostring(tier[0] == lib.APPNORTH_CONFIG_TIER_CACHED), tostring(price[0])))
lib.appnorth_config_free(config)
frame()                          -- the log lines queued so far
lib.appnorth_client_free(client) -- last: the other handles are freed; queued log lines are dropped
logger:free()                    -- nothing can call them any more
on_done:free()
listener:free()

print(ok and "all four walkthroughs done" or "a walkthrough did not end as expected")
os.exit(ok and 0 or 1)
