/* List an app's boards and the ideas on each, as a C host would: through
 * libappnorth, reading the returned JSON with jansson.
 *
 *   boards API_URL APP_ID        e.g. boards http://127.0.0.1:8080 demo
 *   boards --version
 */
#include <appnorth.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, const appnorth_error *err) {
    fprintf(stderr, "%s failed: %s (%s, HTTP %d)\n", what, err->message,
            appnorth_status_str(err->code), err->http_status);
    return 1;
}

static void print_ideas(appnorth_client *client, const char *board_id) {
    char query[256];
    snprintf(query, sizeof query, "{\"board\":\"%s\",\"limit\":50}", board_id);
    char *text = NULL;
    appnorth_error err;
    if (appnorth_client_list_ideas(client, query, &text, &err) != APPNORTH_OK) {
        fail("list ideas", &err);
        return;
    }
    json_t *page = json_loads(text, 0, NULL);
    appnorth_string_free(text);
    size_t i;
    json_t *idea;
    json_array_foreach(json_object_get(page, "ideas"), i, idea) {
        printf("    - %-28s [%s] %lld votes\n",
               json_string_value(json_object_get(idea, "title")),
               json_string_value(json_object_get(idea, "status")),
               (long long)json_integer_value(json_object_get(idea, "votes")));
    }
    json_decref(page);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--version") == 0) {
        printf("libappnorth %s (header %s)\n", appnorth_version(), APPNORTH_VERSION_STRING);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: %s API_URL APP_ID\n", argv[0]);
        return 2;
    }

    appnorth_error err;
    appnorth_client_options *options = appnorth_client_options_new();
    if (appnorth_client_options_set_api_url(options, argv[1], &err) != APPNORTH_OK ||
        appnorth_client_options_set_app_id(options, argv[2], &err) != APPNORTH_OK) {
        appnorth_client_options_free(options);
        return fail("options", &err);
    }
    appnorth_client *client = NULL;
    int rc = appnorth_client_new(options, &client, &err);
    appnorth_client_options_free(options); /* the client keeps a copy */
    if (rc != APPNORTH_OK) return fail("client", &err);

    char *text = NULL;
    if (appnorth_client_list_boards(client, &text, &err) != APPNORTH_OK) {
        appnorth_client_free(client);
        return fail("list boards", &err);
    }
    json_error_t jerr;
    json_t *reply = json_loads(text, 0, &jerr);
    appnorth_string_free(text);

    json_t *boards = json_object_get(reply, "boards");
    printf("%zu boards on %s (app %s)\n", json_array_size(boards), argv[1], argv[2]);
    size_t i;
    json_t *board;
    json_array_foreach(boards, i, board) {
        printf("  %s: %s\n", json_string_value(json_object_get(board, "name")),
               json_string_value(json_object_get(board, "description")));
        print_ideas(client, json_string_value(json_object_get(board, "id")));
    }
    json_decref(reply);
    appnorth_client_free(client);
    return 0;
}
