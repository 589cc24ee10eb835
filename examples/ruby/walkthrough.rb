# The C walkthrough from Ruby through the ffi gem: boards and ideas, a
# comment written offline and flushed later, events that outlive a lost
# connection and a restart, remote config with a live listener (and the
# cached copy after a restart), a logger, and every handle freed at exit.
#
#     APPNORTH_DIST=dist ruby examples/ruby/walkthrough.rb API_URL APP_ID DATA_DIR
#
# DEV SERVER ONLY: "losing connectivity" asks the local dev server to drop
# every API connection (POST /admin/faults); config versions are published
# through /admin/apps/APP/config. A real API has neither.
require_relative "appnorth"
require "net/http"
require "timeout"

A = AppNorth
abort "usage: walkthrough.rb API_URL APP_ID DATA_DIR" unless ARGV.size == 3
API_URL, APP, DATA_DIR = ARGV

def dev_admin(method, path, body = nil)
  uri = URI(API_URL + path)
  request = (method == :post ? Net::HTTP::Post : Net::HTTP::Delete).new(uri, "Content-Type" => "application/json")
  request.body = body
  Net::HTTP.start(uri.host, uri.port) { |http| http.request(request) }
end

# Kept in constants: the library holds these procs' function pointers for as
# long as the client (logger) or the listener lives. They run on library
# threads; the ffi gem hands them to a Ruby thread, which needs the
# interpreter lock that blocking: true calls release.
LOGGER = proc { |_level, message, _user_data| puts "   [log] #{A.peek(message)}" }
CHANGES = Queue.new
LISTENER = proc do |json, changed, _tier, _user_data|
  puts "   listener: changed #{A.peek(changed)} -> #{A.peek(json)}"
  CHANGES << A.peek(json)
end

def open_with(options_new, options_free, set_client, set_dir, make, client, dir)
  options = A.public_send(options_new)
  A.call(set_client, options, client)
  A.call(set_dir, options, dir)
  out = A.out_pointer
  A.call(make, options, out)
  out.read_pointer
ensure
  A.public_send(options_free, options)
end

def open_events(client) = open_with(:appnorth_events_options_new, :appnorth_events_options_free,
                                    :appnorth_events_options_set_client, :appnorth_events_options_set_data_dir,
                                    :appnorth_events_new, client, "#{DATA_DIR}/events")

def open_config(client) = open_with(:appnorth_config_options_new, :appnorth_config_options_free,
                                    :appnorth_config_options_set_client, :appnorth_config_options_set_data_dir,
                                    :appnorth_config_new, client, "#{DATA_DIR}/config")

def ideas(client)
  out = A.out_pointer
  A.call(:appnorth_client_list_ideas, client, '{"q":"dark"}', out)
  A.take(out)
end

def boards(client)
  puts "1. Boards and ideas"
  out = A.out_pointer
  A.call(:appnorth_client_list_boards, client, out)
  puts "   boards: #{A.take(out)}"
  puts "   ideas matching \"dark\": #{ideas(client)}"
end

def offline_comment(client)
  puts "2. A comment written offline"
  idea_id = JSON.parse(ideas(client))["ideas"].first["id"]
  out = A.out_pointer
  A.call(:appnorth_storage_new_sqlite, "#{DATA_DIR}/queue", "queue", out)
  storage = out.read_pointer
  A.call(:appnorth_queue_new, storage, 0, out)
  queue = out.read_pointer
  A.appnorth_storage_free(storage) # the queue keeps its own reference
  dev_admin(:post, "/admin/faults", '{"drop":true,"count":1000}')
  submitted, sent, pending = Array.new(3) { FFI::MemoryPointer.new(:int32) }
  A.call(:appnorth_queue_submit_comment, queue, client, idea_id, "Ja bitte, im Flugzeug geschrieben ✈", nil, submitted)
  A.call(:appnorth_queue_pending_count, queue, pending)
  puts "   sent now: #{submitted.read_int32 == 1}, pending: #{pending.read_int32}"
  dev_admin(:delete, "/admin/faults")
  A.call(:appnorth_queue_flush, queue, client, sent)
  A.call(:appnorth_queue_pending_count, queue, pending)
  puts "   after reconnecting: #{sent.read_int32} sent, #{pending.read_int32} pending"
  submitted.read_int32.zero? && sent.read_int32 == 1 && pending.read_int32.zero?
ensure
  A.appnorth_queue_free(queue) if queue
end

def track_events(client)
  puts "3. Events that outlive a lost connection and a restart"
  dev_admin(:post, "/admin/faults", '{"drop":true,"count":1000}')
  events = open_events(client)
  (1..300).each { |level| A.call(:appnorth_events_track, events, "level_completed", %({"level":#{level}}), nil) }
  rc = A.appnorth_events_flush(events, 2000, nil)
  puts "   flush while offline: #{A.appnorth_status_str(rc)} (events kept)"
  A.appnorth_events_free(events) # "restart": the events stay on disk
  dev_admin(:delete, "/admin/faults")
  events = open_events(client)
  A.call(:appnorth_events_foreground, events)
  A.call(:appnorth_events_flush, events, 10_000)
  out = A.out_pointer
  A.call(:appnorth_events_stats, events, out)
  stats = A.take(out)
  puts "   after restarting online: #{stats}"
  JSON.parse(stats)["queued"].zero?
ensure
  A.appnorth_events_free(events) if events
end

def remote_config(client)
  puts "4. Remote config with a live listener"
  path = "/admin/apps/#{APP}/config"
  dev_admin(:post, path, '{"config":{"theme":"dark","price":9.99}}')
  config = open_config(client)
  token, price, out = FFI::MemoryPointer.new(:int64), FFI::MemoryPointer.new(:double), A.out_pointer
  A.call(:appnorth_config_add_listener, config, LISTENER, nil, token)
  A.call(:appnorth_config_start_live, config)
  wait = -> { Timeout.timeout(20) { CHANGES.pop } rescue nil }
  return false unless wait.call
  A.call(:appnorth_config_get_string, config, "theme", "light", out)
  puts "   theme #{A.take(out)}"
  dev_admin(:post, path, '{"config":{"theme":"dark","price":7.49}}')
  return false unless wait.call
  A.call(:appnorth_config_get_double, config, "price", 0.0, price)
  puts "   after a live update: price #{price.read_double}"
  A.call(:appnorth_config_remove_listener, config, token.read_int64)
  A.appnorth_config_free(config) # blocking: true; waits for a listener call in flight
  config = open_config(client)   # a "restart": opening makes no network call
  tier = FFI::MemoryPointer.new(:int32)
  A.call(:appnorth_config_source, config, tier, nil)
  A.call(:appnorth_config_get_double, config, "price", 0.0, price)
  cached = tier.read_int32 == A::CONFIG_TIER_CACHED
  puts "   after a restart, before any fetch: cached tier #{cached}, price #{price.read_double}"
  cached && price.read_double == 7.49
ensure
  A.appnorth_config_free(config) if config
end

puts "libappnorth #{A.appnorth_version} (Ruby, ffi gem)"
options = A.appnorth_client_options_new
A.call(:appnorth_client_options_set_api_url, options, API_URL)
A.call(:appnorth_client_options_set_app_id, options, APP)
A.call(:appnorth_client_options_set_logger, options, LOGGER, A::LOG_INFO, nil)
out = A.out_pointer
A.call(:appnorth_client_new, options, out)
A.appnorth_client_options_free(options)
client = out.read_pointer
begin
  boards(client)
  ok = offline_comment(client)
  ok = track_events(client) && ok
  ok = remote_config(client) && ok
ensure
  A.appnorth_client_free(client) # last: the other handles are freed
end
puts ok ? "all four walkthroughs done" : "a walkthrough did not end as expected"
exit(ok ? 0 : 1)
