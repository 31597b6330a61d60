// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * victim-start, -status, -touch, -stop: vmce-victim processes, each owning
 * one dirty anonymous page for the host to poison. The agent keeps their
 * pipes drained and counts their touches, which only they print
 * (agent-children.c).
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
#include "procfs.h"

static void exec_victim(const struct request *rq)
{
	char report[64];
	const char *argv[14];
	int n = 0;

	snprintf(report, sizeof(report), REPORT_DIR "/victim-%d.json", (int)getpid());
	/* A report left by an earlier victim with this pid is not ours. */
	unlink(report);
	argv[n++] = tool_path("vmce-victim");
	argv[n++] = "--report";
	argv[n++] = report;
	argv[n++] = "--mode";
	argv[n++] = arg(rq, "mode") ? arg(rq, "mode") : "idle";
	if (arg(rq, "node")) {
		argv[n++] = "--node";
		argv[n++] = arg(rq, "node");
	}
	if (arg(rq, "min-gpa")) {
		argv[n++] = "--min-gpa";
		argv[n++] = arg(rq, "min-gpa");
	}
	if (arg(rq, "pages")) {
		argv[n++] = "--pages";
		argv[n++] = arg(rq, "pages");
	}
	argv[n] = NULL;
	execv(argv[0], (char **)argv);
	fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

int cmd_victim_start(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *mode = arg(rq, "mode");
	char first[4096];
	size_t len = 0;
	ssize_t extra;
	uint64_t v;
	int out_fd;
	pid_t pid;

	if (mode && strcmp(mode, "idle") && strcmp(mode, "read"))
		return fail(err, "InvalidParameter", "mode must be idle or read, not '%s'", mode);
	if (arg(rq, "node") && (parse_u64(arg(rq, "node"), &v) || v > 1023))
		return fail(err, "InvalidParameter", "node=%s is not a node number", arg(rq, "node"));
	if (arg(rq, "min-gpa") && parse_u64(arg(rq, "min-gpa"), &v))
		return fail(err, "InvalidParameter", "min-gpa=%s is not an address", arg(rq, "min-gpa"));
	if (arg(rq, "pages") && (parse_u64(arg(rq, "pages"), &v) || v > (1u << 20)))
		return fail(err, "InvalidParameter", "pages=%s is not a number of pages up to 1048576",
			    arg(rq, "pages"));

	pid = spawn_tool(exec_victim, rq, true, &out_fd, err);
	if (pid < 0)
		return -1;

	extra = read_first_line(out_fd, first, sizeof(first), &len);
	if (extra < 0 || len < 2 || first[0] != '{' || first[len - 1] != '}') {
		int status;
		char how[64];

		/* It printed an error and is exiting: let it, to report its own exit code. */
		if (extra >= 0)
			wait_for_eof(out_fd, 2000);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(out_fd);
		describe_exit(how, sizeof(how), status);
		first[strcspn(first, "\n")] = '\0';
		return fail(err, "Failed", "vmce-victim %s before reporting its page%s%s", how,
			    first[0] ? ": " : "", first);
	}

	/* What the victim printed right after its first line. */
	add_victim(&a->children, pid, out_fd, first + len + 1, (size_t)extra);
	buf_add(out, first, len);
	return 0;
}

static int known_victim(struct agent *a, const struct request *rq, struct victim **v, struct error *err)
{
	pid_t pid;

	if (required_pid(rq, &pid, err))
		return -1;
	reap_children(&a->children);
	*v = find_victim(&a->children, pid);
	if (!*v)
		return fail(err, "NotFound", "no victim with pid %d", (int)pid);
	return 0;
}

int cmd_victim_status(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct victim *v;
	char path[64];

	if (known_victim(a, rq, &v, err))
		return -1;
	drain_victim(v);

	buf_printf(out, "{\"pid\":%d,\"alive\":%s,\"exit\":", (int)v->pid, v->alive ? "true" : "false");
	exit_json(out, v->alive, v->status);
	buf_puts(out, ",\"sigbus\":");
	snprintf(path, sizeof(path), REPORT_DIR "/victim-%d.json", (int)v->pid);
	add_report(out, path);
	buf_printf(out, ",\"touched\":%u}", v->touched);
	return 0;
}

int cmd_victim_touch(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct victim *v;

	if (known_victim(a, rq, &v, err))
		return -1;
	if (!v->alive)
		return fail(err, "Failed", "victim %d has exited", (int)v->pid);
	if (kill(v->pid, SIGUSR1))
		return fail(err, "Failed", "kill(%d, SIGUSR1): %s", (int)v->pid, strerror(errno));
	buf_puts(out, "{}");
	return 0;
}

int cmd_victim_stop(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct victim *v;

	if (known_victim(a, rq, &v, err))
		return -1;
	if (v->alive) {
		kill(v->pid, SIGKILL);
		while (waitpid(v->pid, &v->status, 0) < 0 && errno == EINTR)
			;
		v->alive = false;
	}
	drain_victim(v);
	buf_puts(out, "{}");
	return 0;
}
