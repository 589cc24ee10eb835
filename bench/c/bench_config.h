/* The only place the benchmarks touch the remote-config API
 * (appnorth_config_*). bench/run.sh compiles bench_config.c, and defines
 * BENCH_HAVE_CONFIG for the programs that use these helpers, only when
 * dist/include/appnorth.h declares appnorth_config_new; otherwise the config
 * rows say "not measured: remote config not in this build". If the API's
 * names change, adapt bench_config.c alone. */
#ifndef APPNORTH_BENCH_CONFIG_H
#define APPNORTH_BENCH_CONFIG_H

#include <appnorth.h>

/* Publishes `config_json` (a JSON object) for `app` on the dev server, then
 * opens a config on `data_dir` for a client of `server` and fetches it once,
 * so that `data_dir` holds a cached copy. Exits on failure. */
void bench_config_prepare_cache(const char *server, const char *app, const char *data_dir,
                                const char *config_json);

/* Opens the config of `client` on `data_dir` (the cached copy, no network)
 * and reads one integer key, as a host does at start-up. Returns the handle,
 * freed with bench_config_close(). */
void *bench_config_open_cached(appnorth_client *client, const char *data_dir, const char *int_key);

void bench_config_close(void *config);

#endif
