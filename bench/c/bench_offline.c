/* The offline write queue: submitting while the server is down (the queue
 * path), then flushing the 50 queued entries once it is back.
 *
 * The program runs its own dev server (same database file across restarts,
 * same port), so "down" is real: the process is stopped and connections are
 * refused, as with a server that is gone. Per round:
 *   1. stop the server;
 *   2. appnorth_queue_submit_idea() 50 times (the queue's default limit):
 *      each call tries the request, gets a network error, and stores the
 *      entry (SQLite storage in a data directory); every call is timed;
 *   3. start the server again on the same port;
 *   4. appnorth_queue_flush() sends the 50 entries in order with their
 *      idempotency keys; the whole flush is timed.
 *
 * usage: bench_offline PYTHON DEVSERVER_PY   env: BENCH_OFFLINE_ROUNDS (5)
 */
#include "bench.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

typedef struct {
    const char *python, *script;
    char db[4200], port_file[4200], log[4200];
    int port;
    pid_t pid;
} server;

static void server_start(server *s) {
    unlink(s->port_file);
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    char *argv[] = {(char *)s->python, (char *)s->script, "--host", "127.0.0.1", "--port", port,
                    "--db", s->db, "--port-file", s->port_file, NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, s->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    if (posix_spawn(&s->pid, s->python, &fa, NULL, argv, environ) != 0) die("cannot start %s", s->script);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 400; i++) {
        struct stat st;
        if (stat(s->port_file, &st) == 0 && st.st_size > 0) {
            FILE *f = fopen(s->port_file, "r");
            int p = 0;
            if (f && fscanf(f, "%d", &p) == 1) s->port = p;
            if (f) fclose(f);
            return;
        }
        if (waitpid(s->pid, NULL, WNOHANG) == s->pid) die("dev server exited; see %s", s->log);
        sleep_ms(25);
    }
    die("dev server did not start; see %s", s->log);
}

static void server_stop(server *s) {
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

int main(int argc, char **argv) {
    if (argc != 3) die("usage: bench_offline PYTHON DEVSERVER_PY");
    int rounds = env_int("BENCH_OFFLINE_ROUNDS", 5);
    if (rounds < 1 || rounds > 32) die("bad BENCH_OFFLINE_ROUNDS");
    const int per_round = 50;
    curl_global_init(CURL_GLOBAL_DEFAULT);

    char *work = scratch_dir("offline-server");
    server s = {argv[1], argv[2], {0}, {0}, {0}, 0, 0};
    snprintf(s.db, sizeof s.db, "%s/server.sqlite3", work);
    snprintf(s.port_file, sizeof s.port_file, "%s/port", work);
    snprintf(s.log, sizeof s.log, "%s/server.log", work);
    server_start(&s);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", s.port);

    char *reply = NULL;
    if (admin_request_text(url, "POST", "/admin/apps/bench-offline/boards",
                      "{\"name\":\"Bench\",\"description\":\"offline queue bench\"}", &reply) != 201)
        die("cannot create a board: %s", reply ? reply : "");
    char board[64] = {0};
    const char *id = strstr(reply, "\"id\"");
    if (!id || sscanf(id, "\"id\" : \"%63[^\"]\"", board) != 1) {
        if (!id || sscanf(id, "\"id\":\"%63[^\"]\"", board) != 1) die("no board id in %s", reply);
    }
    free(reply);

    appnorth_client *client = make_client(url, "bench-offline");
    char *data = scratch_dir("offline-data");
    appnorth_storage *storage = NULL;
    appnorth_queue *queue = NULL;
    CHECK(appnorth_storage_new_sqlite(data, "queue", &storage, &E));
    CHECK(appnorth_queue_new(storage, 0, &queue, &E));
    appnorth_storage_free(storage);

    double *submit_us = malloc((size_t)(rounds * per_round) * sizeof(double));
    double round_p50[32], round_p99[32], flush_ms[32];
    size_t k = 0;
    for (int r = 0; r < rounds; r++) {
        server_stop(&s);
        double *lat = submit_us + k;
        for (int i = 0; i < per_round; i++) {
            char title[64];
            snprintf(title, sizeof title, "Offline idea %d.%d", r, i);
            int32_t submitted = -1;
            uint64_t t0 = now_ns();
            CHECK(appnorth_queue_submit_idea(queue, client, board, title, "written while the server was down",
                                             NULL, &submitted, &E));
            uint64_t t1 = now_ns();
            if (submitted != 0) die("submit went through while the server was down");
            lat[i] = (double)(t1 - t0) / 1000.0;
        }
        k += (size_t)per_round;
        round_p50[r] = quantile(lat, (size_t)per_round, 0.5);
        round_p99[r] = quantile(lat, (size_t)per_round, 0.99);

        server_start(&s);
        int32_t sent = 0, pending = -1;
        uint64_t t0 = now_ns();
        CHECK(appnorth_queue_flush(queue, client, &sent, &E));
        flush_ms[r] = (double)(now_ns() - t0) / 1e6;
        CHECK(appnorth_queue_pending_count(queue, &pending, &E));
        if (sent != per_round || pending != 0) die("flush sent %d, %d pending", sent, pending);
        fprintf(stderr, "offline round %d: submit p50 %.1f us p99 %.1f us; flush of %d %.1f ms\n", r + 1,
                round_p50[r], round_p99[r], per_round, flush_ms[r]);
    }
    server_stop(&s);

    jw w;
    jw_begin(&w, stdout);
    jw_string(&w, "bench", "offline");
    jw_int(&w, "entries_per_round", per_round);
    jw_int(&w, "rounds", rounds);
    jw_num(&w, "submit_p50_us", median(round_p50, (size_t)rounds));
    jw_num(&w, "submit_p99_us", median(round_p99, (size_t)rounds));
    jw_num(&w, "submit_all_p50_us", quantile(submit_us, k, 0.5));
    jw_num(&w, "submit_all_p99_us", quantile(submit_us, k, 0.99));
    jw_num(&w, "flush_ms", median(flush_ms, (size_t)rounds));
    jw_num(&w, "flush_per_entry_ms", median(flush_ms, (size_t)rounds) / per_round);
    jw_array(&w, "round_submit_p50_us", round_p50, (size_t)rounds);
    jw_array(&w, "round_flush_ms", flush_ms, (size_t)rounds);
    jw_end(&w);

    appnorth_queue_free(queue);
    appnorth_client_free(client);
    remove_tree(data);
    remove_tree(work);
    curl_global_cleanup();
    return 0;
}
