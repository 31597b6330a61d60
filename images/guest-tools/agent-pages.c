// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * pages-start, -status, -touch, -check, -stop: vmce-pages runs, each a
 * process group holding one page in a chosen state. The tool records
 * what its processes see in REPORT_DIR; these commands signal the group
 * and gather those reports into answers.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "agent-reports.h"
#include "agent-spawn.h"

static void exec_pages(const struct request *rq)
{
	static const char *const opts[][2] = {
		{ "type", "--type" }, { "procs", "--procs" },
		{ "threads", "--threads" }, { "prctl", "--prctl" },
	};
	const char *argv[16];
	int n = 0;

	argv[n++] = tool_path("vmce-pages");
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (arg(rq, opts[i][0])) {
			argv[n++] = opts[i][1];
			argv[n++] = arg(rq, opts[i][0]);
		}
	}
	argv[n++] = "--report-dir";
	argv[n++] = REPORT_DIR;
	argv[n] = NULL;
	execv(argv[0], (char **)argv);
	printf("{\"error\":\"cannot run %s: %s\"}\n", argv[0], strerror(errno));
	_exit(1);
}

/* The string value of "key" in a flat JSON line, unescaped just enough. */
static bool json_get_str(const char *line, const char *key, char *out, size_t size)
{
	char pat[64];
	const char *p;
	size_t len = 0;

	snprintf(pat, sizeof(pat), "\"%s\":\"", key);
	p = strstr(line, pat);
	if (!p)
		return false;
	for (p += strlen(pat); *p && *p != '"' && len + 1 < size; p++) {
		if (*p == '\\' && p[1])
			p++;
		out[len++] = *p;
	}
	out[len] = '\0';
	return true;
}

static int parse_pids(const char *line, struct page_group *g)
{
	const char *p = strstr(line, "\"pids\":[");
	char *end;

	if (!p)
		return -1;
	p += strlen("\"pids\":[");
	g->npids = 0;
	while (*p && *p != ']' && g->npids < MAX_GROUP_PIDS) {
		long pid = strtol(p, &end, 10);

		if (end == p || pid <= 0)
			return -1;
		g->pids[g->npids++] = (pid_t)pid;
		p = *end == ',' ? end + 1 : end;
	}
	return g->npids ? 0 : -1;
}

static int pages_start_failed(pid_t pid, const char *line, struct error *err)
{
	char why[768] = "", how[64];
	int status = wait_exit(pid, 5000);

	if (!json_get_str(line, "error", why, sizeof(why)))
		snprintf(why, sizeof(why), "%.700s", line[0] ? line : "no output (see the console)");
	if (WIFEXITED(status) && WEXITSTATUS(status) == 3)
		return fail(err, "NotSupported", "%s", why);
	if (WIFEXITED(status) && WEXITSTATUS(status) == 2)
		return fail(err, "InvalidParameter", "%s", why);
	describe_exit(how, sizeof(how), status);
	return fail(err, "Failed", "vmce-pages %s: %s", how, why);
}

int cmd_pages_start(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char first[4096];
	size_t len = 0;
	int out_fd;
	pid_t pid;
	struct page_group g = { 0 };

	if (!arg(rq, "type"))
		return fail(err, "InvalidParameter", "pages-start needs the parameter type");
	/* stderr stays the agent's: the console. */
	pid = spawn_tool(exec_pages, rq, false, &out_fd, err);
	if (pid < 0)
		return -1;

	/* The tool prints one line and nothing after it: the pipe can go. */
	if (read_first_line(out_fd, first, sizeof(first), &len) < 0)
		first[strcspn(first, "\n")] = '\0';
	close(out_fd);
	if (len < 2 || first[0] != '{' || first[len - 1] != '}' || !strncmp(first, "{\"error\":", 9) ||
	    parse_pids(first, &g))
		return pages_start_failed(pid, first, err);

	g.leader = pid;
	g.alive = true;
	json_get_str(first, "type", g.type, sizeof(g.type));
	json_get_str(first, "file", g.file, sizeof(g.file));
	add_group(&a->children, &g);
	buf_add(out, first, len);
	return 0;
}

int cmd_pages_status(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];
	bool first = true;

	if (known_group(&a->children, rq, &g, err))
		return -1;
	buf_printf(out, "{\"pid\":%d,\"type\":", (int)g->leader);
	buf_json_cstr(out, g->type);
	buf_puts(out, ",\"pids\":[");
	for (int i = 0; i < g->npids; i++)
		buf_printf(out, "%s%d", i ? "," : "", (int)g->pids[i]);
	buf_puts(out, "],\"alive\":{");
	for (int i = 0; i < g->npids; i++)
		buf_printf(out, "%s\"%d\":%s", i ? "," : "", (int)g->pids[i],
			   process_alive(g->pids[i]) ? "true" : "false");
	buf_puts(out, "},\"sigbus\":");
	add_sigbus_records(out, g->pids, g->npids);
	buf_puts(out, ",\"touched\":[");
	for (int i = 0; i < g->npids; i++) {
		report_path(path, sizeof(path), g->pids[i], ".touched");
		if (access(path, F_OK) == 0) {
			buf_printf(out, "%s%d", first ? "" : ",", (int)g->pids[i]);
			first = false;
		}
	}
	buf_puts(out, "],\"touches\":[");
	first = true;
	for (int i = 0; i < g->npids; i++) {
		struct buf rec = { 0 };

		report_path(path, sizeof(path), g->pids[i], ".touched");
		if (add_report(&rec, path)) {
			buf_puts(out, first ? "" : ",");
			buf_add(out, rec.p, rec.len);
			first = false;
		}
		free(rec.p);
	}
	buf_puts(out, "],\"check\":");
	report_path(path, sizeof(path), g->leader, ".check");
	add_report(out, path);
	buf_puts(out, "}");
	return 0;
}

/* Signals the whole group: the tool made its leader a process-group leader. */
static int signal_group(struct page_group *g, int sig, struct error *err)
{
	if (kill(-g->leader, sig) == 0)
		return 0;
	if (errno == ESRCH)
		return fail(err, "Failed", "no process of group %d is alive", (int)g->leader);
	return fail(err, "Failed", "kill(-%d): %s", (int)g->leader, strerror(errno));
}

/*
 * Old reports go first, so that a caller polling pages-status sees the new
 * ones. only=1 touches with the named process alone: the one consumer of
 * a consumed (SRAR) error, whose sharers must not touch the page too.
 */
int cmd_pages_touch(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];
	const char *only = arg(rq, "only");
	pid_t pid;

	if (known_group(&a->children, rq, &g, err))
		return -1;
	for (int i = 0; i < g->npids; i++) {
		report_path(path, sizeof(path), g->pids[i], ".touched");
		unlink(path);
	}
	if (only && strcmp(only, "0")) {
		pid = (pid_t)strtol(arg(rq, "pid"), NULL, 10);
		if (kill(pid, SIGUSR1))
			return fail(err, "Failed", "process %d: %s", (int)pid, strerror(errno));
	} else if (signal_group(g, SIGUSR1, err)) {
		return -1;
	}
	buf_puts(out, "{}");
	return 0;
}

int cmd_pages_check(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];

	if (known_group(&a->children, rq, &g, err))
		return -1;
	report_path(path, sizeof(path), g->leader, ".check");
	unlink(path);
	if (signal_group(g, SIGUSR2, err))
		return -1;
	buf_puts(out, "{}");
	return 0;
}

/* The files the group made for itself (pagecache-dirty's, shmem's) go with it. */
static void remove_group_file(const struct page_group *g)
{
	const char *base = strrchr(g->file, '/');

	if (base && (!strncmp(base + 1, "dirty-", 6) || !strncmp(base + 1, "vmce-shmem-", 11)))
		unlink(g->file);
}

int cmd_pages_stop(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;

	if (known_group(&a->children, rq, &g, err))
		return -1;
	kill(-g->leader, SIGKILL);
	for (int i = 0; i < g->npids; i++)
		kill(g->pids[i], SIGKILL);
	if (g->alive) {
		while (waitpid(g->leader, &g->status, 0) < 0 && errno == EINTR)
			;
		g->alive = false;
	}
	/* The other processes are orphans now; the agent is their subreaper. */
	reap_children(&a->children);
	remove_group_file(g);
	buf_puts(out, "{}");
	return 0;
}
