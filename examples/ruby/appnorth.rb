# libappnorth through the ffi gem, declared from the shipped ABI description
# (dist/share/appnorth/appnorth.api.json): every function and callback type
# is attached from it, so these declarations cannot drift from the header.
#
# The rules it keeps (docs/hosts.md, "Ruby"):
#  - every function the description marks "blocks" (network calls, and the
#    _free / remove calls that wait for a callback in flight) is attached with
#    blocking: true, so it releases the interpreter lock while it waits: a
#    library thread that needs the lock to run a Ruby callback would
#    otherwise deadlock against it;
#  - strings the library returns are copied and tagged UTF-8
#    (force_encoding); char **out_* ones are released with
#    appnorth_string_free; const char * returns are static (ffi's :string
#    copies them and frees nothing);
#  - procs handed to the library are kept in constants or fields for as
#    long as the library may call them.
require "ffi"
require "json"

module AppNorth
  extend FFI::Library
  DIST = ENV.fetch("APPNORTH_DIST") { File.expand_path("../../dist", __dir__) }
  API = JSON.parse(File.read(File.join(DIST, "share/appnorth/appnorth.api.json")))
  ffi_lib File.join(DIST, "lib", API.fetch("soname"))

  SCALARS = { "int32_t" => :int32, "int64_t" => :int64, "uint64_t" => :uint64, "double" => :double,
              "size_t" => :size_t, "void" => :void, "const char *" => :string }.freeze
  def self.ffi_type(c_type, callbacks)
    return c_type.to_sym if callbacks.include?(c_type)
    SCALARS.fetch(c_type) { c_type.end_with?("*") ? :pointer : raise("no ffi type for #{c_type}") }
  end

  callback_names = API["callbacks"].map { |c| c["name"] }
  API["callbacks"].each do |c|
    params = c["params"].map { |p| p["type"] == "const char *" ? :pointer : ffi_type(p["type"], []) }
    callback c["name"].to_sym, params, ffi_type(c["return"], [])
  end
  API["functions"].each do |f|
    attach_function f["name"].to_sym, f["params"].map { |p| ffi_type(p["type"], callback_names) },
                    ffi_type(f["return"]["type"], callback_names), blocking: f["blocks"]
  end
  API["enums"].flat_map { |e| e["values"] }.each { |v| const_set(v["name"].sub("APPNORTH_", ""), v["value"]) }

  class Error < FFI::Struct
    layout :code, :int32, :http_status, :int32, :message, [:char, 256]
  end

  class Failure < StandardError; end

  # Runs one call that takes `appnorth_error *err` last; raises on failure.
  def self.call(name, *args)
    err = Error.new
    rc = public_send(name, *args, err)
    return rc if rc == OK
    raise Failure, "#{appnorth_status_str(rc)} (HTTP #{err[:http_status]}): #{err[:message].to_s.force_encoding('UTF-8')}"
  end

  # UTF-8 text the library lends for a call (a callback argument).
  def self.peek(pointer)
    pointer.null? ? nil : pointer.read_string.force_encoding("UTF-8")
  end

  # A char **out_* string: copied, then released with appnorth_string_free.
  def self.take(out)
    pointer = out.read_pointer
    text = peek(pointer)
    appnorth_string_free(pointer)
    text
  end

  def self.out_pointer = FFI::MemoryPointer.new(:pointer)

  # Exit: Ruby's teardown frees the ffi callback trampolines; a library
  # thread still calling a logger or listener proc after that crashes the
  # process. appnorth_shutdown (attached blocking: it waits for the library
  # threads, which may need the interpreter lock to finish a callback)
  # stops every handle's threads and every host callback first, whatever
  # was left open; handles are safe to leak after it. Registered when this
  # file loads, so it runs after the app's own at_exit hooks.
  # APPNORTH_NO_SHUTDOWN_AT_EXIT=1 leaves it out (Tests/hosts/ruby_exit.sh
  # uses it to show the crash it prevents).
  at_exit { appnorth_shutdown(2000, nil) } unless ENV["APPNORTH_NO_SHUTDOWN_AT_EXIT"] == "1"
end
