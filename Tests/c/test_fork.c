/* Handles do not survive fork(), but a child that only exits or execs must
 * not deadlock, even while library threads (the event uploader) run and
 * hold their locks in the parent. */
#include <appnorth.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* Waits for a child for at most `seconds`; a hung child is killed. */
static int wait_child(pid_t pid, int seconds) {
    for (int i = 0; i < seconds * 100; i++) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
}

/* The host of the exit test: makes handles, keeps the uploader busy, and
 * exits without freeing anything. */
static int exit_with_live_handles(const char *server, const char *dir) {
    appnorth_client_options *co = appnorth_client_options_new();
    appnorth_client_options_set_api_url(co, server, NULL);
    appnorth_client_options_set_app_id(co, "fork", NULL);
    appnorth_client *c = NULL;
    if (appnorth_client_new(co, &c, NULL) != APPNORTH_OK) return 3;
    appnorth_events_options *o = appnorth_events_options_new();
    appnorth_events_options_set_client(o, c, NULL);
    appnorth_events_options_set_data_dir(o, dir, NULL);
    appnorth_events_options_set_flush_policy(o, 10, 1, NULL);
    appnorth_events *e = NULL;
    if (appnorth_events_new(o, &e, NULL) != APPNORTH_OK) return 4;
    for (int i = 0; i < 50; i++) appnorth_events_track(e, "leak", NULL, NULL, NULL);
    exit(0);
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "--exit-with-live-handles") == 0)
        return exit_with_live_handles(argv[2], argv[3]);
    const char *self = argv[0];
    (void)argc;
    const char *server = getenv("APPNORTH_TEST_SERVER");
    if (!server) server = "http://127.0.0.1:9";
    char dir[] = "/tmp/appnorth-fork-XXXXXX";
    if (!mkdtemp(dir)) return 2;

    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, "fork", &err);
    appnorth_client *client = NULL;
    CHECK_STATUS(appnorth_client_new(o, &client, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);

    appnorth_events_options *eo = appnorth_events_options_new();
    appnorth_events_options_set_client(eo, client, &err);
    appnorth_events_options_set_data_dir(eo, dir, &err);
    appnorth_events_options_set_flush_policy(eo, 10, 1, &err); /* the uploader is always busy */
    appnorth_events *events = NULL;
    CHECK_STATUS(appnorth_events_new(eo, &events, &err), APPNORTH_OK, err);
    appnorth_events_options_free(eo);

    for (int round = 0; round < 20; round++) {
        appnorth_events_track(events, "before fork", "{\"round\":1}", NULL, NULL);
        pid_t pid = fork();
        if (pid == 0) exit(0); /* runs atexit handlers and stdio flushing */
        CHECK(wait_child(pid, 10) == 0, "child that exits, round %d", round);

        pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", (char *)NULL);
            _exit(127);
        }
        CHECK(wait_child(pid, 10) == 0, "child that execs, round %d", round);
    }

    /* A host that exits without freeing its handles, while the upload
     * thread is busy, exits cleanly. The host is a fresh process (this
     * program exec'd again), since a forked child must not call the
     * library at all. */
    for (int round = 0; round < 10; round++) {
        char child_dir[64];
        snprintf(child_dir, sizeof child_dir, "%s/child%d", dir, round);
        pid_t pid = fork();
        if (pid == 0) {
            execl(self, self, "--exit-with-live-handles", server, child_dir, (char *)NULL);
            _exit(127);
        }
        CHECK(wait_child(pid, 10) == 0, "host exiting with live handles, round %d", round);
    }

    /* The parent's handles still work after its children are gone. */
    CHECK_STATUS(appnorth_events_track(events, "after fork", NULL, NULL, &err), APPNORTH_OK, err);
    appnorth_events_free(events);
    appnorth_client_free(client);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return check_summary();
}
