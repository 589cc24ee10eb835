# One Ruby process in the default mode that exits with every handle live:
# a logger proc called from the events uploader (DEBUG lines every 10 ms),
# a config listener proc on the live stream thread, nothing freed.
# Run by Tests/hosts/ruby_exit.sh. Usage: ruby ruby_exit.rb API_URL DATA_DIR
require_relative "../../examples/ruby/appnorth"
A = AppNorth

api_url, dir = ARGV
LOGGED = Queue.new
LOGGER = proc { |_level, _message, _user| LOGGED << 1 if LOGGED.empty? }
LISTENER = proc { |_config, _keys, _tier, _user| LOGGED << 2 }
options = A.appnorth_client_options_new
A.call(:appnorth_client_options_set_api_url, options, api_url)
A.call(:appnorth_client_options_set_app_id, options, "rubyexit")
A.call(:appnorth_client_options_set_logger, options, LOGGER, A::LOG_DEBUG, nil)
out = A.out_pointer
A.call(:appnorth_client_new, options, out)
client = out.read_pointer
A.appnorth_client_options_free(options)

events_options = A.appnorth_events_options_new
A.call(:appnorth_events_options_set_client, events_options, client)
A.call(:appnorth_events_options_set_data_dir, events_options, File.join(dir, "events"))
A.call(:appnorth_events_options_set_flush_policy, events_options, 10, 1)
A.call(:appnorth_events_new, events_options, out)
events = out.read_pointer
A.appnorth_events_options_free(events_options)

config_options = A.appnorth_config_options_new
A.call(:appnorth_config_options_set_client, config_options, client)
A.call(:appnorth_config_options_set_data_dir, config_options, File.join(dir, "config"))
A.call(:appnorth_config_new, config_options, out)
config = out.read_pointer
A.appnorth_config_options_free(config_options)
token = FFI::MemoryPointer.new(:int64)
A.call(:appnorth_config_add_listener, config, LISTENER, nil, token)
A.call(:appnorth_config_start_live, config)

20.times { |i| A.call(:appnorth_events_track, events, "exit_test", %({"i":#{i}}), nil) }
LOGGED.pop # a library thread has called the logger: callbacks are live
puts "exiting with live handles"
