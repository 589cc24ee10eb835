/* Once every handle is freed, no library thread is left (docs/threading.md;
 * issue #31: the transfer thread and the 2 operation workers lived as long
 * as the process, so a Mono host whose completion ran on the transfer
 * thread never exited). The process's thread count (/proc/self/task) after
 * the last free equals the count before the first handle, and no thread
 * named appnorth-* is left; twice, so the threads a second round needs
 * start again. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "support.h"

#define APP "threadcount"

static const char *server;

/* Threads of this process, and how many of them the library named. */
static int thread_count(int *library) {
    DIR *d = opendir("/proc/self/task");
    int n = 0;
    *library = 0;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        n++;
        char path[300], name[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(name, sizeof name, f) && strncmp(name, "appnorth-", 9) == 0) (*library)++;
        if (f) fclose(f);
    }
    if (d) closedir(d);
    return n;
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} waiter;

static void on_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)status; (void)err; (void)json;
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* One round: every kind of library thread runs, then every handle is freed. */
static void round_with_every_thread(int round) {
    char *dir = make_temp_dir("threads");
    appnorth_error err;
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    appnorth_events *events = events_in(c, dir);
    appnorth_config *config = config_in(c, dir);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_events_track(events, "round", NULL, NULL, &err), APPNORTH_OK, err);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    CHECK_STATUS(appnorth_client_list_boards_async(c, on_done, &w, NULL, &err), APPNORTH_OK, err); /* transfer thread */
    CHECK_STATUS(appnorth_config_refresh_async(config, on_done, &w, NULL, &err), APPNORTH_OK, err); /* a worker */
    CHECK_STATUS(appnorth_events_flush_async(events, 10000, on_done, &w, NULL, &err), APPNORTH_OK, err);
    pthread_mutex_lock(&w.mu);
    while (w.done < 3) pthread_cond_wait(&w.cv, &w.mu); /* the program's watchdog bounds it */
    pthread_mutex_unlock(&w.mu);
    int library = 0, during = thread_count(&library);
    printf("round %d: %d threads while every kind runs (%d of the library)\n", round, during, library);
    CHECK(library >= 4, "round %d: the uploader, config stream, transfer thread and a worker run (%d)", round, library);
    appnorth_config_free(config);
    appnorth_events_free(events);
    appnorth_client_free(c);
    remove_tree(dir);
}

static void *nothing(void *arg) { return arg; }

static void test_no_library_thread_is_left_after_the_last_free(void) {
    /* A thread started and joined first: a runtime's helper thread that
     * starts with a process's second thread (ThreadSanitizer's) is then
     * counted before and after alike. */
    pthread_t warm;
    if (pthread_create(&warm, NULL, nothing, NULL) == 0) pthread_join(warm, NULL);
    admin_reset(server);
    CHECK(admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"on\":true}}", NULL) == 201,
          "publish");
    int library = 0, before = thread_count(&library);
    for (int round = 1; round <= 2; round++) {
        round_with_every_thread(round);
        int after = thread_count(&library);
        printf("round %d: %d threads before the first handle, %d after the last free\n", round, before, after);
        CHECK(after == before, "round %d: %d threads after the last free, %d before the first handle", round, after,
              before);
        CHECK(library == 0, "round %d: %d library threads left", round, library);
    }
}

int main(void) {
    server = test_start("test_thread_count", 120);
    if (!server) return 2;
    RUN(test_no_library_thread_is_left_after_the_last_free);
    return check_summary();
}
