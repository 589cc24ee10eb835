/* The threads of this process, by name (/proc/self/task/N/comm), for the
 * tests that check which library threads run. */
#ifndef APPNORTH_TEST_THREADS_H
#define APPNORTH_TEST_THREADS_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>

/* Threads of this process whose name is `name`; -1 when /proc is unreadable. */
static inline int threads_named(const char *name) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] == '.') continue;
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", entry->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL) continue;
        if (fgets(comm, sizeof comm, f) != NULL) comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        count += strcmp(comm, name) == 0;
    }
    closedir(tasks);
    return count;
}

#endif
