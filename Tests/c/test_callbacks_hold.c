/* appnorth_callbacks_hold() / appnorth_callbacks_resume(), through the real
 * .so: bad input; a completion due while the gate is held waits for the
 * resume, then runs; a hold waits for a callback running on another thread
 * (and times out while it runs); a hold from inside a callback does not
 * wait for itself; a fork between hold and resume gives a child whose
 * library works; and a child forked while a callback ran on a parent
 * thread (no hold) does not count that callback (its appnorth_shutdown
 * does not wait for it). */
#define _XOPEN_SOURCE 700
#include <appnorth.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "support.h"

/* ThreadSanitizer does not support new threads in the child of a
 * multi-threaded parent (scripts/sanitize.sh): the fork tests run in
 * make test and under ASan. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define UNDER_TSAN 1
#endif
#endif

static const char *base;
static atomic_int completed, running, release_callback, inside_status;

static void count_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json, void *user_data) {
    (void)op, (void)status, (void)err, (void)json, (void)user_data;
    atomic_fetch_add(&completed, 1);
}

/* A completion that runs until the test lets it return. */
static void blocking_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json,
                          void *user_data) {
    (void)op, (void)status, (void)err, (void)json, (void)user_data;
    atomic_store(&running, 1);
    while (!atomic_load(&release_callback)) sleep_ms(1);
    atomic_store(&running, 0);
    atomic_fetch_add(&completed, 1);
}

/* A completion that holds the gate itself: it must not wait for itself. */
static void holding_done(uint64_t op, int32_t status, const appnorth_error *err, const char *json,
                         void *user_data) {
    (void)op, (void)status, (void)err, (void)json, (void)user_data;
    appnorth_error e;
    atomic_store(&inside_status, 100 + appnorth_callbacks_hold(60000, &e));
    appnorth_callbacks_resume();
    atomic_fetch_add(&completed, 1);
}

static int wait_completed(int count, int64_t ms) {
    int64_t deadline = mono_ms() + ms;
    while (atomic_load(&completed) < count && mono_ms() < deadline) sleep_ms(1);
    return atomic_load(&completed) >= count;
}

static void start_read(appnorth_client *c, appnorth_completion_fn fn) {
    appnorth_error err;
    CHECK_STATUS(appnorth_client_list_boards_async(c, fn, NULL, NULL, &err), APPNORTH_OK, err);
}

static void test_bad_input(void) {
    appnorth_error err;
    CHECK_STATUS(appnorth_callbacks_hold(-1, &err), APPNORTH_E_INVALID_ARGUMENT, err);
    CHECK(strstr(err.message, "timeout_ms") != NULL, "message: %s", err.message);
    CHECK_STATUS(appnorth_callbacks_hold(-1, NULL), APPNORTH_E_INVALID_ARGUMENT, err);
    appnorth_callbacks_resume(); /* no hold in place: nothing */
    appnorth_callbacks_resume();
    /* Neither left a hold behind: a completion runs. */
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    atomic_store(&completed, 0);
    start_read(c, count_done);
    CHECK(wait_completed(1, 10000), "a completion ran");
    appnorth_client_free(c);
}

/* A host that holds without resuming meets a clear refusal, not an
 * overflow into the gate's other bits; its resumes undo every hold. */
static void test_holds_without_a_resume_are_capped(void) {
    appnorth_error err;
    int held = 0;
    while (held < 70000 && appnorth_callbacks_hold(0, NULL) == APPNORTH_OK) held++;
    CHECK(held == 65536, "holds in place at most: %d", held);
    CHECK_STATUS(appnorth_callbacks_hold(0, &err), APPNORTH_E_WRONG_STATE, err);
    CHECK(strstr(err.message, "without a resume") != NULL, "message: %s", err.message);
    for (int i = 0; i < held; i++) appnorth_callbacks_resume();
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    atomic_store(&completed, 0);
    start_read(c, count_done);
    CHECK(wait_completed(1, 10000), "a completion ran once every hold was resumed");
    CHECK_STATUS(appnorth_callbacks_hold(0, &err), APPNORTH_OK, err);
    appnorth_callbacks_resume();
    appnorth_client_free(c);
}

static void test_a_held_completion_runs_after_the_resume(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    appnorth_error err;
    atomic_store(&completed, 0);
    CHECK_STATUS(appnorth_callbacks_hold(1000, &err), APPNORTH_OK, err);
    CHECK_STATUS(appnorth_callbacks_hold(1000, NULL), APPNORTH_OK, err); /* holds nest */
    admin_add_fault(base, "{\"delay_ms\":1,\"count\":1,\"path_prefix\":\"/v1/apps/hold/boards\"}");
    start_read(c, count_done);
    admin_wait_fault_taken(base, "/v1/apps/hold/boards");
    /* The answer is on its way; a grace window in which a gate that does
     * not hold would have let the completion run (it takes about 1 ms). */
    sleep_ms(300);
    CHECK(atomic_load(&completed) == 0, "no completion while held (%d)", atomic_load(&completed));
    appnorth_callbacks_resume();
    sleep_ms(100);
    CHECK(atomic_load(&completed) == 0, "still held by the second hold (%d)", atomic_load(&completed));
    appnorth_callbacks_resume();
    CHECK(wait_completed(1, 10000), "the completion ran after the resume");
    admin_clear_faults(base);
    appnorth_client_free(c);
}

static void test_a_hold_waits_for_a_running_callback(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    appnorth_error err;
    atomic_store(&completed, 0);
    atomic_store(&release_callback, 0);
    start_read(c, blocking_done);
    int64_t deadline = mono_ms() + 10000;
    while (!atomic_load(&running) && mono_ms() < deadline) sleep_ms(1);
    CHECK(atomic_load(&running), "the completion runs on the transfer thread");
    int64_t started = mono_ms();
    CHECK_STATUS(appnorth_callbacks_hold(50, &err), APPNORTH_E_TIMEOUT, err);
    CHECK(mono_ms() - started >= 50, "waited its timeout: %lld ms", (long long)(mono_ms() - started));
    CHECK(strstr(err.message, "still running") != NULL, "message: %s", err.message);
    appnorth_callbacks_resume();
    atomic_store(&release_callback, 1);
    CHECK_STATUS(appnorth_callbacks_hold(10000, &err), APPNORTH_OK, err);
    CHECK(atomic_load(&running) == 0 && atomic_load(&completed) == 1, "the callback had returned");
    appnorth_callbacks_resume();
    appnorth_client_free(c);
}

static void test_a_hold_inside_a_callback_does_not_wait_for_itself(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    atomic_store(&completed, 0);
    atomic_store(&inside_status, 0);
    start_read(c, holding_done);
    CHECK(wait_completed(1, 10000), "the holding completion returned");
    CHECK(atomic_load(&inside_status) == 100 + APPNORTH_OK, "hold inside: %d", atomic_load(&inside_status) - 100);
    /* Its resume ended its hold: the next completion runs. */
    start_read(c, count_done);
    CHECK(wait_completed(2, 10000), "a completion after it ran");
    appnorth_client_free(c);
}

#ifndef UNDER_TSAN
/* In a child: a new client, a blocking and a non-blocking read, a free
 * and appnorth_shutdown (which would wait for a callback still counted). */
static int child_uses_the_library(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 5000, 5000);
    char *json = NULL;
    appnorth_error err;
    if (appnorth_client_list_boards(c, &json, &err) != APPNORTH_OK) return 10;
    appnorth_string_free(json);
    atomic_store(&completed, 0);
    if (appnorth_client_list_boards_async(c, count_done, NULL, NULL, &err) != APPNORTH_OK) return 11;
    if (!wait_completed(1, 5000)) return 12;
    appnorth_client_free(c);
    return appnorth_shutdown(1000, &err) == APPNORTH_OK ? 0 : 13;
}

static int wait_child(pid_t pid) {
    int status = 0;
    int64_t deadline = mono_ms() + 20000;
    while (waitpid(pid, &status, WNOHANG) == 0) {
        if (mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        sleep_ms(2);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

static void test_a_fork_between_hold_and_resume(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    appnorth_error err;
    for (int i = 0; i < 20; i++) {
        atomic_store(&completed, 0);
        for (int j = 0; j < 8; j++) start_read(c, count_done);
        CHECK_STATUS(appnorth_callbacks_hold(1000, &err), APPNORTH_OK, err);
        pid_t pid = fork();
        if (pid == 0) {
            alarm(15);
            appnorth_callbacks_resume();
            _exit(child_uses_the_library());
        }
        appnorth_callbacks_resume();
        CHECK(wait_child(pid) == 0, "fork %d: the child used the library", i);
        CHECK(wait_completed(8, 10000), "fork %d: the parent's completions ran", i);
    }
    appnorth_client_free(c);
}

/* Last: the parent's blocked callback is released only after the child. */
static void test_a_child_does_not_count_a_parent_threads_callback(void) {
    appnorth_client *c = client_with_timeouts(base, "hold", 10000, 10000);
    atomic_store(&completed, 0);
    atomic_store(&release_callback, 0);
    start_read(c, blocking_done);
    int64_t deadline = mono_ms() + 10000;
    while (!atomic_load(&running) && mono_ms() < deadline) sleep_ms(1);
    CHECK(atomic_load(&running), "a completion runs on the transfer thread");
    pid_t pid = fork(); /* no hold: as a C host forks */
    if (pid == 0) {
        alarm(15);
        _exit(child_uses_the_library());
    }
    CHECK(wait_child(pid) == 0, "the child's shutdown did not wait for the parent's callback");
    atomic_store(&release_callback, 1);
    CHECK(wait_completed(1, 10000), "the parent's callback returned");
    appnorth_client_free(c);
}

#endif

int main(void) {
    base = test_start("test_callbacks_hold", 180);
    if (base == NULL) return 2;
    RUN(test_bad_input);
    RUN(test_holds_without_a_resume_are_capped);
    RUN(test_a_held_completion_runs_after_the_resume);
    RUN(test_a_hold_waits_for_a_running_callback);
    RUN(test_a_hold_inside_a_callback_does_not_wait_for_itself);
#ifndef UNDER_TSAN
    RUN(test_a_fork_between_hold_and_resume);
    RUN(test_a_child_does_not_count_a_parent_threads_callback);
#endif
    return check_summary();
}
