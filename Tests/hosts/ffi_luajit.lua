-- LuaJIT reads the shipped cdef unmodified: ffi.cdef accepts the whole file,
-- every function of appnorth.api.json resolves in the library, every integer
-- constant and enum value has the description's value, and a call answers.
-- Usage: luajit ffi_luajit.lua DIST_DIR EXPECTED_LUA
--   EXPECTED_LUA: a Lua file returning {functions = {...}, constants = {NAME = value}},
--   written from appnorth.api.json by ffi_luajit.sh.
local ffi = require("ffi")
local dist, expected_path = arg[1], arg[2]
local file = assert(io.open(dist .. "/share/appnorth/appnorth.cdef", "rb"))
ffi.cdef(file:read("*a"))
file:close()
local lib = ffi.load(dist .. "/lib/libappnorth.so.0")
local expected = dofile(expected_path)
local failures = {}
for _, name in ipairs(expected.functions) do
    local ok, err = pcall(function() return lib[name] end)
    if not ok then failures[#failures + 1] = name .. ": " .. tostring(err) end
end
local constants = 0
for name, value in pairs(expected.constants) do
    constants = constants + 1
    local ok, got = pcall(function() return lib[name] end)
    if not ok or tonumber(got) ~= value then
        failures[#failures + 1] = name .. ": LuaJIT has " .. tostring(got) .. ", the description " .. value
    end
end
if ffi.string(lib.appnorth_status_str(lib.APPNORTH_E_NETWORK)) ~= "network error" then
    failures[#failures + 1] = "appnorth_status_str(APPNORTH_E_NETWORK) is not 'network error'"
end
local err = ffi.new("appnorth_error")
local options = lib.appnorth_client_options_new()
local rc = lib.appnorth_client_options_set_api_url(options, "ftp://nowhere", err)
lib.appnorth_client_options_free(options)
if rc ~= lib.APPNORTH_E_INVALID_ARGUMENT or err.code ~= rc or ffi.sizeof(err.message) ~= lib.APPNORTH_ERROR_MESSAGE_SIZE then
    failures[#failures + 1] = "a bad URL gave status " .. rc .. " and err.code " .. err.code
end
if #failures > 0 then
    io.stderr:write("luajit: the shipped cdef does not match:\n  " .. table.concat(failures, "\n  ") .. "\n")
    os.exit(1)
end
print(("luajit: ffi.cdef reads the shipped appnorth.cdef unmodified; %d functions resolve, %d constants match (%s)")
      :format(#expected.functions, constants, ffi.string(lib.appnorth_version())))
