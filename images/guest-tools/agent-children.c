// SPDX-License-Identifier: GPL-2.0-or-later
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent-children.h"
#include "jsonbuf.h"

/* The newest first: an old victim's pid may have been reused by a new one. */
struct victim *find_victim(struct children *c, pid_t pid)
{
	for (size_t i = c->nvictims; i-- > 0;)
		if (c->victims[i].pid == pid)
			return &c->victims[i];
	return NULL;
}

/* Counts the victim's {"touched":true} lines; it prints nothing else we need. */
static void victim_feed(struct victim *v, const char *data, size_t n)
{
	static const char touched[] = "{\"touched\":true}";

	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n') {
			if (v->line_len == strlen(touched) && !memcmp(v->line, touched, v->line_len))
				v->touched++;
			v->line_len = 0;
		} else if (v->line_len < sizeof(v->line)) {
			v->line[v->line_len++] = data[i];
		}
	}
}

void add_victim(struct children *c, pid_t pid, int out_fd, const char *printed, size_t n)
{
	struct victim *nv;

	c->victims = xrealloc(c->victims, (c->nvictims + 1) * sizeof(*nv));
	nv = &c->victims[c->nvictims++];
	*nv = (struct victim){ .pid = pid, .alive = true, .out_fd = out_fd };
	fcntl(out_fd, F_SETFL, O_NONBLOCK);
	victim_feed(nv, printed, n);
}

/* Consumes what the victim printed, so it never blocks on a full pipe. */
void drain_victim(struct victim *v)
{
	char chunk[4096];
	ssize_t n;

	while (v->out_fd >= 0) {
		n = read(v->out_fd, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			close(v->out_fd);
			v->out_fd = -1;
			return;
		}
		victim_feed(v, chunk, (size_t)n);
	}
}

void add_group(struct children *c, const struct page_group *g)
{
	c->groups = xrealloc(c->groups, (c->ngroups + 1) * sizeof(*c->groups));
	c->groups[c->ngroups++] = *g;
}

static struct page_group *find_leader(struct children *c, pid_t pid)
{
	for (size_t i = c->ngroups; i-- > 0;)
		if (c->groups[i].leader == pid)
			return &c->groups[i];
	return NULL;
}

/* The newest first, as for victims. */
static struct page_group *find_group(struct children *c, pid_t pid)
{
	for (size_t i = c->ngroups; i-- > 0;)
		for (int j = 0; j < c->groups[i].npids; j++)
			if (c->groups[i].pids[j] == pid)
				return &c->groups[i];
	return NULL;
}

int known_group(struct children *c, const struct request *rq, struct page_group **g,
		struct error *err)
{
	pid_t pid;

	if (required_pid(rq, &pid, err))
		return -1;
	reap_children(c);
	*g = find_group(c, pid);
	if (!*g)
		return fail(err, "NotFound", "no vmce-pages process with pid %d", (int)pid);
	return 0;
}

/* Also reaps vmce-pages processes orphaned by their leader (the agent is their subreaper). */
void reap_children(struct children *c)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct victim *v = find_victim(c, pid);
		struct page_group *g = find_leader(c, pid);

		if (v) {
			v->alive = false;
			v->status = status;
		}
		if (g) {
			g->alive = false;
			g->status = status;
		}
	}
}
