/* Helpers shared by the C tests: clients and temporary data directories.
 * Test files define _XOPEN_SOURCE 700 (for nftw) before any include. */
#ifndef APPNORTH_TEST_SUPPORT_H
#define APPNORTH_TEST_SUPPORT_H

#include <appnorth.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

/* A client for `app` on `url`, with an optional credential and 3 s
 * timeouts. Every step is checked. */
static inline appnorth_client *make_client(const char *url, const char *app, const char *email,
                                    const char *token) {
    appnorth_error err;
    appnorth_client_options *o = appnorth_client_options_new();
    CHECK_STATUS(appnorth_client_options_set_api_url(o, url, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_app_id(o, app, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_credential(o, email, token, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_client_options_set_timeouts(o, 3000, 3000, &err), APPNORTH_OK, err);
    appnorth_client *c = NULL;
    CHECK_STATUS(appnorth_client_new(o, &c, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    return c;
}

/* A new empty folder under /tmp named after `what`; free with remove_tree. */
static inline char *make_temp_dir(const char *what) {
    char tmpl[256];
    snprintf(tmpl, sizeof tmpl, "/tmp/appnorth-%s-XXXXXX", what);
    char *dir = mkdtemp(tmpl);
    CHECK(dir != NULL, "mkdtemp");
    return dir ? strdup(dir) : NULL;
}

static inline int remove_tree_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Removes a folder made by make_temp_dir and frees its path. */
static inline void remove_tree(char *path) {
    if (path) nftw(path, remove_tree_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(path);
}

static const char *test_name = "test";

/* Names the program and the RUN() test that hung (write(2) only: it runs
 * in a signal handler). */
static inline void test_watchdog(int sig) {
    (void)sig;
    static const char in[] = ": watchdog fired in ", hung[] = " (a call hung?)\n";
    const char *current = *test_current ? test_current : "main";
    if (write(2, test_name, strlen(test_name)) < 0 || write(2, in, sizeof in - 1) < 0 ||
        write(2, current, strlen(current)) < 0 || write(2, hung, sizeof hung - 1) < 0)
        _exit(3);
    _exit(3);
}

/* Start of every test program: the server URL from $APPNORTH_TEST_SERVER
 * (NULL, with a message, when unset) and a watchdog that ends a hung run
 * after `seconds` ($APPNORTH_TEST_TIMEOUT overrides it). */
static inline const char *test_start(const char *name, unsigned seconds) {
    test_name = name;
    const char *server = getenv("APPNORTH_TEST_SERVER");
    if (!server) {
        fprintf(stderr, "%s: APPNORTH_TEST_SERVER is not set (run through scripts/with-devserver.sh)\n", name);
        return NULL;
    }
    const char *override = getenv("APPNORTH_TEST_TIMEOUT");
    signal(SIGALRM, test_watchdog);
    alarm(override ? (unsigned)atoi(override) : seconds);
    return server;
}

#endif
