// SPDX-License-Identifier: GPL-2.0-or-later
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-reports.h"
#include "procfs.h"

bool add_report(struct buf *out, const char *path)
{
	char text[1024];
	ssize_t n = read_file(path, text, sizeof(text));

	while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
		text[--n] = '\0';
	/* Reports are renamed into place whole: one object or nothing. */
	if (n > 1 && text[0] == '{' && text[n - 1] == '}' && !memchr(text, '\n', (size_t)n)) {
		buf_add(out, text, (size_t)n);
		return true;
	}
	buf_puts(out, "null");
	return false;
}

void report_path(char *path, size_t size, pid_t pid, const char *suffix)
{
	snprintf(path, size, REPORT_DIR "/pages-%d%s", (int)pid, suffix);
}

static bool in_pids(const pid_t *pids, int npids, pid_t pid)
{
	for (int i = 0; i < npids; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

static int compare_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

void add_sigbus_records(struct buf *out, const pid_t *pids, int npids)
{
	char **names = NULL, path[512];
	size_t n = 0;
	struct dirent *d;
	DIR *dp = opendir(REPORT_DIR);
	bool first = true;

	while (dp && (d = readdir(dp))) {
		long pid, tid;
		char tail[16];
		size_t size;

		if (sscanf(d->d_name, "pages-%ld-%ld%15s", &pid, &tid, tail) != 3 ||
		    strcmp(tail, ".json") || !in_pids(pids, npids, (pid_t)pid))
			continue;
		names = xrealloc(names, (n + 1) * sizeof(*names));
		size = strlen(d->d_name) + 1;
		names[n++] = memcpy(xrealloc(NULL, size), d->d_name, size);
	}
	if (dp)
		closedir(dp);
	qsort(names, n, sizeof(*names), compare_names);
	buf_puts(out, "[");
	for (size_t i = 0; i < n; i++) {
		struct buf rec = { 0 };

		snprintf(path, sizeof(path), REPORT_DIR "/%s", names[i]);
		if (add_report(&rec, path)) {
			buf_puts(out, first ? "" : ",");
			buf_add(out, rec.p, rec.len);
			first = false;
		}
		free(rec.p);
		free(names[i]);
	}
	free(names);
	buf_puts(out, "]");
}
