/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The agent's state and each command group's entry points. vmce-agent.c
 * speaks the protocol and dispatches; agent-<concern>.c serve the
 * commands, grouped as qemu-ga groups its commands (qga/commands-*.c), so
 * a command is found, and changed, beside the ones it shares helpers with.
 *
 * What groups share lies below them all, one concern to a file with its
 * own header: a request and its error (agent-request), the tools' report
 * files (agent-reports), running a tool (agent-spawn), the children kept
 * between requests (agent-children), the kernel log ring
 * (agent-kmsg-ring), kernel control files (agent-write). Calls go one
 * way, down: a group calls no other group and not vmce-agent.c, and a
 * helper no group (check-layers keeps it so).
 */
#ifndef VMCE_AGENT_H
#define VMCE_AGENT_H

#include <stdbool.h>
#include <stddef.h>

#include "agent-children.h"
#include "agent-kmsg-ring.h"
#include "agent-request.h"
#include "jsonbuf.h"

#define MAX_LINE 4096

struct agent {
	int port;	/* the virtio-serial port, or (--listen) the caller; -1: none */
	int listen_fd;	/* --listen: the socket; -1 on a port */
	bool port_live; /* false while the host seems absent */
	char line[MAX_LINE + 1];
	size_t line_len;
	bool line_too_long;

	struct children children; /* victims and page groups */
	int trace_fd; /* trace_pipe, once read */
	struct kmsg_ring kmsg;
};

/* A command: its answer's value goes to out, or it fails with err and returns -1. */
typedef int command_fn(struct agent *a, const struct request *rq, struct buf *out,
		       struct error *err);

/* ---- the guest system (agent-system.c) ---- */

command_fn cmd_ping, cmd_reboot, cmd_sysctl, cmd_sysfs, cmd_disk_up, cmd_modprobe;

/* ---- victims (agent-victim.c) ---- */

command_fn cmd_victim_start, cmd_victim_status, cmd_victim_touch, cmd_victim_stop;

/* ---- page workloads (agent-pages.c) ---- */

command_fn cmd_pages_start, cmd_pages_status, cmd_pages_touch, cmd_pages_check, cmd_pages_stop;

/* ---- memory and page state (agent-memory.c) ---- */

command_fn cmd_meminfo, cmd_translate, cmd_kpageflags, cmd_counters;

/* ---- kernel log (agent-kmsg.c) ---- */

command_fn cmd_kmsg;

/* ---- memory-failure tracing (agent-trace.c) and injection (agent-inject.c) ---- */

command_fn cmd_trace_mf, cmd_inject;

/* ---- a workload that counts what it got done, and one that fills memory
 * (agent-workload.c) ---- */

command_fn cmd_workload, cmd_fill;

/* ---- the series' kernel selftests, run as they are (agent-selftest.c) ---- */

command_fn cmd_selftest;

/* ---- how firmware tells the guest of an error: ACPI tables, GHES
 * (agent-firmware.c) ---- */

command_fn cmd_firmware;

#endif
