/* Every descriptor the library or libcurl opens is close-on-exec (issue
 * #31: libcurl's sockets were not, so a program the host started held the
 * live connection to the API server). With a kept-alive connection of a
 * blocking read, the transfer thread's connections of non-blocking reads,
 * an events handle (journal, consent mapping), a live config stream and a
 * dispatch-mode client (eventfd) open, this program execs itself; the
 * exec'd copy lists every descriptor it holds beyond 0, 1 and 2. */
#define _GNU_SOURCE
#include <appnorth.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"

#define APP "cloexec"

static const char *server;

/* The exec'd copy: prints "fd -> target" for each descriptor above 2. */
static int list_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return 2;
    int own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int fd = atoi(e->d_name);
        if (e->d_name[0] == '.' || fd <= 2 || fd == own) continue;
        char path[64], target[256] = "";
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n > 0) target[n] = 0;
        printf("%d -> %s\n", fd, target);
    }
    closedir(d);
    return 0;
}

static pthread_mutex_t done_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER;

static void done_once(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user) {
    (void)op; (void)err; (void)json;
    pthread_mutex_lock(&done_mu);
    *(int32_t *)user = status + 100;
    pthread_cond_broadcast(&done_cv);
    pthread_mutex_unlock(&done_mu);
}

/* Execs this program with --list-fds; returns what it printed (malloc'd). */
static char *exec_and_list(const char *self) {
    int out[2];
    if (pipe(out) != 0) return NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(out[1], 1); /* stdout only: the pipe's own ends are closed below */
        close(out[0]);
        close(out[1]);
        execl(self, self, "--list-fds", (char *)NULL);
        _exit(127);
    }
    close(out[1]);
    size_t size = 0, cap = 4096;
    char *text = calloc(1, cap);
    ssize_t n;
    while (text && (n = read(out[0], text + size, cap - size - 1)) > 0) {
        size += (size_t)n;
        if (size + 1 >= cap) text = realloc(text, cap *= 2);
    }
    if (text) text[size] = 0;
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the exec'd copy ran (status %d)", status);
    return text;
}

/* The lines of `after` that `before` does not have (malloc'd). */
static char *new_lines(const char *before, const char *after) {
    char *out = calloc(1, strlen(after) + 1);
    for (const char *line = after; out && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line + 1) : strlen(line);
        char *copy = strndup(line, n);
        if (copy && !strstr(before, copy)) strcat(out, copy);
        free(copy);
        line += n;
    }
    return out;
}

static void test_an_execed_program_inherits_no_descriptor(const char *self) {
    /* What the test runner itself passed down (not the library's). */
    char *before = exec_and_list(self);
    admin_reset(server);
    CHECK(admin_request(server, "POST", "/admin/apps/" APP "/config", "{\"config\":{\"on\":true}}", NULL) == 201,
          "publish");
    char *dir = make_temp_dir("cloexec");
    appnorth_error err;
    appnorth_client *c = make_client(server, APP, NULL, NULL);
    char *json = NULL;
    CHECK_STATUS(appnorth_client_list_boards(c, &json, &err), APPNORTH_OK, err); /* a kept-alive connection */
    appnorth_string_free(json);
    int32_t done = 0;
    CHECK_STATUS(appnorth_client_list_boards_async(c, done_once, &done, NULL, &err), APPNORTH_OK, err);
    pthread_mutex_lock(&done_mu);
    while (done == 0) pthread_cond_wait(&done_cv, &done_mu); /* the program's watchdog bounds it */
    pthread_mutex_unlock(&done_mu);
    CHECK(done == 100 + APPNORTH_OK, "the non-blocking read completed (%d)", (int)done);
    appnorth_events *events = events_in(c, dir);
    CHECK_STATUS(appnorth_events_track(events, "open", NULL, NULL, &err), APPNORTH_OK, err);
    appnorth_config *config = config_in(c, dir);
    CHECK_STATUS(appnorth_config_start_live(config, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_config_refresh(config, &err), APPNORTH_OK, err);
    appnorth_client_options *o = appnorth_client_options_new();
    appnorth_client_options_set_api_url(o, server, &err);
    appnorth_client_options_set_app_id(o, APP, &err);
    appnorth_client_options_set_dispatch_mode(o, 1, &err);
    appnorth_client *dispatching = NULL;
    CHECK_STATUS(appnorth_client_new(o, &dispatching, &err), APPNORTH_OK, err);
    appnorth_client_options_free(o);
    int32_t fd = -1;
    CHECK_STATUS(appnorth_dispatch_fd(dispatching, &fd, &err), APPNORTH_OK, err);

    char *after = exec_and_list(self);
    char *added = before && after ? new_lines(before, after) : NULL;
    CHECK(added && *added == 0, "the exec'd program holds no descriptor of the library or libcurl:\n%s",
          added ? added : "(nothing read)");
    free(added);
    free(after);
    free(before);
    appnorth_client_free(dispatching);
    appnorth_config_free(config);
    appnorth_events_free(events);
    appnorth_client_free(c);
    remove_tree(dir);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--list-fds") == 0) return list_fds();
    server = test_start("test_cloexec", 60);
    if (!server) return 2;
    RUN_WITH(test_an_execed_program_inherits_no_descriptor, argv[0]);
    return check_summary();
}
