/* Reads the event journal files a data directory holds (docs/events.md,
 * "Durability"): events-<pid>-<token>.journal, each a run of records
 *   "ANJ2" | payload length (uint32 LE) | checksum (uint64 LE) | payload
 * ("ANJ1" records, from earlier versions, differ only in their checksum).
 * The tests walk records by their lengths only: they look at journals the
 * library wrote whole, or damage copies on purpose. */
#ifndef APPNORTH_TEST_JOURNAL_H
#define APPNORTH_TEST_JOURNAL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define JOURNAL_HEADER 16

/* A whole file in memory (caller frees), or NULL. */
static inline unsigned char *journal_read_file(const char *path, size_t *out_len) {
    *out_len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    unsigned char *bytes = malloc(cap);
    size_t got;
    while (bytes && (got = fread(bytes + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) bytes = realloc(bytes, cap *= 2);
    }
    fclose(f);
    *out_len = len;
    return bytes;
}

static inline int journal_is_name(const char *name) {
    size_t n = strlen(name);
    return strncmp(name, "events-", 7) == 0 && n > 8 + 7 && strcmp(name + n - 8, ".journal") == 0;
}

/* Calls `each` for every record payload in every journal of `dir`; returns
 * how many records there were. */
static inline int journal_each(const char *dir, void (*each)(const unsigned char *, size_t, void *), void *ctx) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int records = 0;
    struct dirent *entry;
    while ((entry = readdir(d)) != NULL) {
        if (!journal_is_name(entry->d_name)) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, entry->d_name);
        size_t len = 0;
        unsigned char *bytes = journal_read_file(path, &len);
        size_t at = 0;
        while (bytes && len - at >= JOURNAL_HEADER && (memcmp(bytes + at, "ANJ2", 4) == 0 || memcmp(bytes + at, "ANJ1", 4) == 0)) {
            uint32_t n = (uint32_t)bytes[at + 4] | (uint32_t)bytes[at + 5] << 8 | (uint32_t)bytes[at + 6] << 16 |
                         (uint32_t)bytes[at + 7] << 24;
            if (n > len - at - JOURNAL_HEADER) break;
            if (each) each(bytes + at + JOURNAL_HEADER, n, ctx);
            records++;
            at += JOURNAL_HEADER + n;
        }
        free(bytes);
    }
    closedir(d);
    return records;
}

/* The path of the first journal in `dir` into `out`; 0 when there is none. */
static inline int journal_first_path(const char *dir, char *out, size_t size) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(d)) != NULL) {
        if (!journal_is_name(entry->d_name)) continue;
        snprintf(out, size, "%s/%s", dir, entry->d_name);
        found = 1;
    }
    closedir(d);
    return found;
}

#endif
