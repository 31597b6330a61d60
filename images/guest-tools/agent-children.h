/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The processes vmce-agent keeps between requests: its victims and its
 * vmce-pages runs, found by pid, reaped, and the victims' pipes kept
 * drained. The commands that start them add them here; the commands that
 * name them and the serving loop find, reap and drain them alike.
 */
#ifndef VMCE_AGENT_CHILDREN_H
#define VMCE_AGENT_CHILDREN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "agent-request.h"

#define MAX_GROUP_PIDS 33

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

struct children {
	struct victim *victims;
	size_t nvictims;
	struct page_group *groups;
	size_t ngroups;
};

/*
 * Keeps a victim that has reported its page, with its pipe made
 * non-blocking for drain_victim; PRINTED is what it printed after its
 * first line, counted as drain_victim counts the rest.
 */
void add_victim(struct children *c, pid_t pid, int out_fd, const char *printed, size_t n);
struct victim *find_victim(struct children *c, pid_t pid);
void drain_victim(struct victim *v);

void add_group(struct children *c, const struct page_group *g);
/* The group of the process the request's pid names, reaped first. */
int known_group(struct children *c, const struct request *rq, struct page_group **g,
		struct error *err);

void reap_children(struct children *c);

#endif
