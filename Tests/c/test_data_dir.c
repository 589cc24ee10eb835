/* Issue 23, class 1 through the real .so: a data directory that is a
 * symbolic link, writable by others or another user's is refused with
 * APPNORTH_E_STORAGE ("unsafe data directory ..."); one of ours readable
 * by others is tightened to 0700; a link planted as the database is never
 * followed. The second-uid cases with a real other user (setpriv) are in
 * bindings/python/tests/test_security.py. */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

static char *root;

static int mode_of(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? (int)(st.st_mode & 07777) : -1;
}

static char *path_in(const char *name) {
    static char buffers[4][512];
    static int next;
    char *out = buffers[next++ % 4];
    snprintf(out, sizeof buffers[0], "%s/%s", root, name);
    return out;
}

static void check_refused(const char *dir, const char *needle) {
    appnorth_error err;
    appnorth_storage *storage = (appnorth_storage *)1;
    CHECK_STATUS(appnorth_storage_new_sqlite(dir, "s", &storage, &err), APPNORTH_E_STORAGE, err);
    CHECK(storage == NULL, "out set to NULL");
    CHECK(strstr(err.message, needle) != NULL, "%s: message says \"%s\": %s", dir, needle, err.message);
}

static void test_a_symlinked_directory_is_refused(void) {
    char *target = path_in("elsewhere"), *link = path_in("linked");
    CHECK(mkdir(target, 0755) == 0 && chmod(target, 0755) == 0 && symlink(target, link) == 0, "setup");
    check_refused(link, "unsafe data directory");
    CHECK(mode_of(target) == 0755, "the link's target was not chmodded: %o", mode_of(target));
}

static void test_a_directory_others_can_write_is_refused(void) {
    char *wide = path_in("wide"), *group = path_in("group");
    CHECK(mkdir(wide, 0700) == 0 && chmod(wide, 0777) == 0, "setup");
    CHECK(mkdir(group, 0700) == 0 && chmod(group, 0770) == 0, "setup");
    check_refused(wide, "lets other users write");
    check_refused(group, "lets other users write");
}

static void test_an_older_readable_directory_of_ours_is_tightened(void) {
    char *older = path_in("older");
    CHECK(mkdir(older, 0700) == 0 && chmod(older, 0755) == 0, "setup");
    appnorth_error err;
    appnorth_storage *storage = NULL;
    CHECK_STATUS(appnorth_storage_new_sqlite(older, "s", &storage, &err), APPNORTH_OK, err);
    appnorth_storage_free(storage);
    CHECK(mode_of(older) == 0700, "tightened to 0700: %o", mode_of(older));
}

static void test_a_link_planted_as_the_database_is_not_followed(void) {
    char *dir = path_in("planted"), *victim = path_in("victim"), *db = path_in("planted/appnorth.sqlite3");
    CHECK(mkdir(dir, 0700) == 0, "setup");
    int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "precious", 8) == 8, "victim written");
    close(fd);
    chmod(victim, 0644);
    CHECK(symlink(victim, db) == 0, "link planted");
    check_refused(dir, "unsafe file");
    struct stat st;
    CHECK(stat(victim, &st) == 0 && st.st_size == 8 && (st.st_mode & 0777) == 0644, "victim untouched");
}

static void test_another_users_directory_is_refused(void) {
    if (geteuid() != 0) {
        fprintf(stderr, "test_data_dir: skipped the other-uid directory (needs root to chown)\n");
        return;
    }
    char *theirs = path_in("theirs");
    CHECK(mkdir(theirs, 0700) == 0 && chown(theirs, 65534, 65534) == 0, "setup");
    check_refused(theirs, "belongs to uid 65534");
}

int main(void) {
    if (!test_start("test_data_dir", 60)) return 2;
    root = make_temp_dir("datadir");
    if (!root) return 1;
    RUN(test_a_symlinked_directory_is_refused);
    RUN(test_a_directory_others_can_write_is_refused);
    RUN(test_an_older_readable_directory_of_ours_is_tightened);
    RUN(test_a_link_planted_as_the_database_is_not_followed);
    RUN(test_another_users_directory_is_refused);
    remove_tree(root);
    return check_summary();
}
