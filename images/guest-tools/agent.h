/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * What vmce-agent's files share: the agent's state, a request and its
 * error, and each command group's entry points. vmce-agent.c speaks the
 * protocol and dispatches; agent-<concern>.c serve the commands, grouped
 * as qemu-ga groups its commands (qga/commands-*.c), so a command is
 * found, and changed, beside the ones it shares helpers with.
 */
#ifndef VMCE_AGENT_H
#define VMCE_AGENT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "jsonbuf.h"

#define MAX_LINE 4096
#define MAX_ARGS 8
#define MAX_GROUP_PIDS 33
#define REPORT_DIR "/run/vmce"

/* ---- a request and its error (vmce-agent.c) ---- */

struct kv {
	const char *key;
	const char *value;
};

struct request {
	const char *command;
	struct kv args[MAX_ARGS];
	int nargs;
};

struct error {
	const char *class;
	char desc[512];
};

/* Sets err; returns -1, for "return fail(...)". */
int fail(struct error *err, const char *class, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *arg(const struct request *rq, const char *key);
int required_u64(const struct request *rq, const char *key, uint64_t *v, struct error *err);
int required_pid(const struct request *rq, pid_t *pid, struct error *err);

/* ---- agent state ---- */

struct victim {
	pid_t pid;
	bool alive;
	int status; /* from waitpid, once !alive */
	int out_fd; /* its stdout+stderr; -1 after EOF */
	char line[128];
	size_t line_len;
	unsigned touched;
};

/* The processes of one vmce-pages run; its first process leads their group. */
struct page_group {
	pid_t leader;
	pid_t pids[MAX_GROUP_PIDS];
	int npids;
	bool alive; /* the leader, until reaped */
	int status;
	char type[32];
	char file[256];
};

struct kmsg_record {
	uint64_t seq, usec;
	int level;
	char *text;
};

struct agent {
	int port;	/* the virtio-serial port, or (--listen) the caller; -1: none */
	int listen_fd;	/* --listen: the socket; -1 on a port */
	bool port_live; /* false while the host seems absent */
	char line[MAX_LINE + 1];
	size_t line_len;
	bool line_too_long;

	struct victim *victims;
	size_t nvictims;
	struct page_group *groups;
	size_t ngroups;
	int trace_fd; /* trace_pipe, once read */

	int kmsg_fd;
	struct kmsg_record *kmsg; /* ring of KMSG_CAP */
	size_t kmsg_first, kmsg_count;
};

/* A command: its answer's value goes to out, or it fails with err and returns -1. */
typedef int command_fn(struct agent *a, const struct request *rq, struct buf *out,
		       struct error *err);

/* ---- the tools the agent starts (agent-children.c) ---- */

/* Runs the tool, in the child, with what the request asks for; never returns. */
typedef void exec_fn(const struct request *rq);

/* NAME beside the agent's own binary. */
const char *tool_path(const char *name);
pid_t spawn_tool(exec_fn *exec_tool, const struct request *rq, bool with_stderr, int *out_fd,
		 struct error *err);
ssize_t read_first_line(int fd, char *out, size_t size, size_t *len);
void wait_for_eof(int fd, int timeout_ms);
int wait_exit(pid_t pid, int timeout_ms);
void reap_children(struct agent *a);
void exit_json(struct buf *out, bool alive, int status);
void describe_exit(char *s, size_t size, int status);
bool process_alive(pid_t pid);
bool add_report(struct buf *out, const char *path);

/* ---- victims (agent-victim.c) ---- */

command_fn cmd_victim_start, cmd_victim_status, cmd_victim_touch, cmd_victim_stop;
struct victim *find_victim(struct agent *a, pid_t pid);
void drain_victim(struct victim *v);

/* ---- page workloads (agent-pages.c) ---- */

command_fn cmd_pages_start, cmd_pages_status, cmd_pages_touch, cmd_pages_check, cmd_pages_stop;
struct page_group *find_leader(struct agent *a, pid_t pid);
int known_group(struct agent *a, const struct request *rq, struct page_group **g, struct error *err);
void report_path(char *path, size_t size, pid_t pid, const char *suffix);
void add_sigbus_records(struct buf *out, const struct page_group *g);

/* ---- kernel log (agent-kmsg.c) ---- */

command_fn cmd_kmsg;
/* The ring and /dev/kmsg, before any request: -1 when out of memory. */
int kmsg_start(struct agent *a);

/* ---- the guest system (agent-system.c) ---- */

command_fn cmd_ping, cmd_reboot, cmd_sysctl, cmd_sysfs, cmd_disk_up, cmd_modprobe;
int write_string(const char *path, const char *value, struct error *err);

/* ---- memory and page state (agent-memory.c) ---- */

command_fn cmd_meminfo, cmd_translate, cmd_kpageflags, cmd_counters;

/* ---- memory-failure tracing (agent-trace.c) and injection (agent-inject.c) ---- */

command_fn cmd_trace_mf, cmd_inject;

/* ---- a workload that counts what it got done (agent-workload.c) ---- */

command_fn cmd_workload;

#endif
