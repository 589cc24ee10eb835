/* Helpers shared by the C tests: clients and temporary data directories.
 * Test files define _XOPEN_SOURCE 700 (for nftw) before any include. */
#ifndef APPNORTH_TEST_SUPPORT_H
#define APPNORTH_TEST_SUPPORT_H

#include <appnorth.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

#endif
