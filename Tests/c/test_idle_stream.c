/* An idle client with the live config stream open wakes at most once per
 * server keepalive. Before the fix its stream thread woke about once a
 * second (68 wakeups a minute against a 15 s keepalive): curl's low-speed
 * check re-armed a 1 s timer on a silent stream, and the transfer loop
 * waited at most 1 s at a time. Counted from /proc/self/task/<tid>/status
 * (voluntary context switches of the "appnorth-config" thread: each
 * is one time it blocked, so one wakeup; involuntary ones are preemptions
 * on a loaded machine) over a quiet window of a few seconds, from 3.5 s
 * after connect (past curl's connect-timeout timer), with the server's
 * keepalive at 15 s. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "check.h"
#include "fixtures.h"
#include "support.h"

static const char *server;

/* Voluntary context switches (wakeups) of every thread of this process named `name`; -1 if none. */
static long switches_of(const char *name) {
    DIR *tasks = opendir("/proc/self/task");
    if (!tasks) return -1;
    long total = -1;
    struct dirent *e;
    while ((e = readdir(tasks))) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        fclose(f);
        if (strcmp(comm, name) != 0) continue;
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        if (!f) continue;
        char line[256];
        long sum = 0;
        while (fgets(line, sizeof line, f)) {
            long v;
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1) sum += v;
        }
        fclose(f);
        total = (total < 0 ? 0 : total) + sum;
    }
    closedir(tasks);
    return total;
}

static int stream_count(void) {
    json_t *health = NULL;
    admin_request(server, "GET", "/admin/health", NULL, &health);
    int n = (int)json_integer_value(json_object_get(health, "sse_streams"));
    json_decref(health);
    return n;
}

static void test_an_idle_stream_wakes_once_per_keepalive(void) {
    CHECK(admin_request(server, "POST", "/admin/settings", "{\"sse_keepalive\":15}", NULL) == 200, "keepalive 15 s");
    char app[64];
    snprintf(app, sizeof app, "idle-%d", (int)getpid());
    appnorth_client *client = make_client(server, app, NULL, NULL);
    appnorth_config_options *o = appnorth_config_options_new();
    appnorth_error err;
    CHECK_STATUS(appnorth_config_options_set_client(o, client, &err), APPNORTH_OK, err);
    appnorth_config *config = NULL;
    CHECK_STATUS(appnorth_config_new(o, &config, &err), APPNORTH_OK, err);
    appnorth_config_options_free(o);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    for (int i = 0; i < 500 && stream_count() < 1; i++) sleep_ms(20);
    CHECK(stream_count() >= 1, "the stream is connected");
    /* Past the transfer's own timers (strace): curl wakes the thread once
     * 200 ms in, and once when the connect timeout (3 s with these test
     * clients; 10 s by default) comes due, connected or not; from then on
     * only data, the idle deadline (45 s) or a cancel wake it. */
    sleep_ms(3500);

    const int window_ms = 6000;
    long before = switches_of("appnorth-config");
    CHECK(before >= 0, "the config thread is found by name");
    sleep_ms(window_ms);
    long after = switches_of("appnorth-config");
    long wakeups = after - before;
    printf("idle live stream: the config thread woke %ld time(s) in %d s with a 15 s keepalive "
           "(%.1f a minute; before the fix about 68)\n", wakeups, window_ms / 1000, wakeups * 60000.0 / window_ms);
    /* At most one keepalive falls in the window; one more for its read. */
    CHECK(wakeups <= 3, "woke %ld times in %d s", wakeups, window_ms / 1000);

    appnorth_config_free(config);
    appnorth_client_free(client);
}

int main(void) {
    server = test_start("test_idle_stream", 60);
    if (!server) return 2;
    (void)admin_board, (void)admin_idea;
    curl_global_init(CURL_GLOBAL_ALL);
    RUN(test_an_idle_stream_wakes_once_per_keepalive);
    curl_global_cleanup();
    return check_summary();
}
