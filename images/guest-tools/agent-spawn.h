/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * How vmce-agent runs its tools (vmce-victim, vmce-pages): forked with
 * their first line read back over a pipe, waited for, and their end told.
 * Victims and page workloads differ in what they are asked and answer,
 * not in how they are run.
 */
#ifndef VMCE_AGENT_SPAWN_H
#define VMCE_AGENT_SPAWN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent-request.h"
#include "jsonbuf.h"

/* Runs the tool, in the child, with what the request asks for; never returns. */
typedef void exec_fn(const struct request *rq);

/* NAME beside the agent's own binary. */
const char *tool_path(const char *name);
pid_t spawn_tool(exec_fn *exec_tool, const struct request *rq, bool with_stderr, int *out_fd,
		 struct error *err);
ssize_t read_first_line(int fd, char *out, size_t size, size_t *len);
void wait_for_eof(int fd, int timeout_ms);
int wait_exit(pid_t pid, int timeout_ms);
void exit_json(struct buf *out, bool alive, int status);
void describe_exit(char *s, size_t size, int status);
bool process_alive(pid_t pid);

#endif
