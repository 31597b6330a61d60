// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmce-agent: serves the host over a virtio-serial port. One request per
 * line ("COMMAND key=value ..."), one JSON line per answer. The protocol is
 * described in images/README.md. This file is the protocol: the port, the
 * request line, the table of commands and the answer; the commands are in
 * agent-<concern>.c (agent.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "procfs.h"

#define REPLY_TIMEOUT_MS 2000
/* Without a host on the port, look again this often even without SIGIO. */
#define RECONNECT_POLL_MS 1000

/* ---- requests and errors ---- */

int fail(struct error *err, const char *class, const char *fmt, ...)
{
	va_list ap;

	err->class = class;
	va_start(ap, fmt);
	vsnprintf(err->desc, sizeof(err->desc), fmt, ap);
	va_end(ap);
	return -1;
}

const char *arg(const struct request *rq, const char *key)
{
	for (int i = 0; i < rq->nargs; i++)
		if (!strcmp(rq->args[i].key, key))
			return rq->args[i].value;
	return NULL;
}

int required_u64(const struct request *rq, const char *key, uint64_t *v, struct error *err)
{
	const char *s = arg(rq, key);

	if (!s)
		return fail(err, "InvalidParameter", "%s needs the parameter %s", rq->command, key);
	if (parse_u64(s, v))
		return fail(err, "InvalidParameter", "%s=%s is not a number", key, s);
	return 0;
}

int required_pid(const struct request *rq, pid_t *pid, struct error *err)
{
	uint64_t v;

	if (required_u64(rq, "pid", &v, err))
		return -1;
	if (v == 0 || v > INT32_MAX)
		return fail(err, "InvalidParameter", "pid=%s is not a process id", arg(rq, "pid"));
	*pid = (pid_t)v;
	return 0;
}

static volatile sig_atomic_t port_event;

static void on_sigio(int sig)
{
	port_event = 1;
}

/* ---- dispatch ---- */

struct command {
	const char *name;
	command_fn *run;
	const char *keys[8];
};

/* Grouped as agent.h groups the files that serve them. */
static const struct command commands[] = {
	/* agent-system.c */
	{ "ping", cmd_ping, { NULL } },
	{ "reboot", cmd_reboot, { "boot", NULL } },
	{ "sysctl", cmd_sysctl, { "name", "value", NULL } },
	{ "sysfs", cmd_sysfs, { "path", "value", NULL } },
	{ "disk-up", cmd_disk_up, { NULL } },
	{ "modprobe", cmd_modprobe, { "name", NULL } },
	/* agent-victim.c */
	{ "victim-start", cmd_victim_start, { "mode", "node", "min-gpa", NULL } },
	{ "victim-status", cmd_victim_status, { "pid", NULL } },
	{ "victim-touch", cmd_victim_touch, { "pid", NULL } },
	{ "victim-stop", cmd_victim_stop, { "pid", NULL } },
	/* agent-pages.c */
	{ "pages-start", cmd_pages_start, { "type", "procs", "threads", "prctl", NULL } },
	{ "pages-status", cmd_pages_status, { "pid", NULL } },
	{ "pages-touch", cmd_pages_touch, { "pid", "only", NULL } },
	{ "pages-check", cmd_pages_check, { "pid", NULL } },
	{ "pages-stop", cmd_pages_stop, { "pid", NULL } },
	/* agent-memory.c */
	{ "meminfo", cmd_meminfo, { NULL } },
	{ "counters", cmd_counters, { NULL } },
	{ "translate", cmd_translate, { "pid", "va", NULL } },
	{ "kpageflags", cmd_kpageflags, { "pfn", NULL } },
	/* agent-kmsg.c */
	{ "kmsg", cmd_kmsg, { "since", NULL } },
	/* agent-trace.c, agent-inject.c */
	{ "trace-mf", cmd_trace_mf, { "on", "off", "read", NULL } },
	{ "inject", cmd_inject, { "method", "pid", "va", "pfn", "kind", "flags", "bank", NULL } },
	/* agent-workload.c */
	{ "workload", cmd_workload, { "kind", "ms", NULL } },
};

static bool key_allowed(const struct command *c, const char *key)
{
	for (int i = 0; c->keys[i]; i++)
		if (!strcmp(c->keys[i], key))
			return true;
	return false;
}

/* Splits line in place into rq; words are separated by single spaces. */
static int parse_request(char *line, struct request *rq, struct error *err)
{
	char *word = line, *next;

	rq->nargs = 0;
	rq->command = NULL;
	for (; word; word = next) {
		next = strchr(word, ' ');
		if (next)
			*next++ = '\0';
		if (!*word)
			return fail(err, "InvalidParameter", "empty word: words are separated by single spaces");
		if (!rq->command) {
			rq->command = word;
			continue;
		}
		char *eq = strchr(word, '=');

		if (!eq || eq == word)
			return fail(err, "InvalidParameter", "'%s' is not key=value", word);
		if (rq->nargs == MAX_ARGS)
			return fail(err, "InvalidParameter", "more than %d parameters", MAX_ARGS);
		*eq = '\0';
		for (int i = 0; i < rq->nargs; i++)
			if (!strcmp(rq->args[i].key, word))
				return fail(err, "InvalidParameter", "parameter %s given twice", word);
		rq->args[rq->nargs++] = (struct kv){ word, eq + 1 };
	}
	return 0;
}

static void handle_request(struct agent *a, char *line, size_t len, struct buf *reply)
{
	struct error err = { 0 };
	struct buf value = { 0 };
	struct request rq;
	const struct command *c = NULL;
	int rc;

	if (memchr(line, '\0', len)) {
		rc = fail(&err, "InvalidParameter", "the request contains a NUL byte");
	} else if ((rc = parse_request(line, &rq, &err)) == 0) {
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
			if (!strcmp(commands[i].name, rq.command))
				c = &commands[i];
		if (!c)
			rc = fail(&err, "CommandNotFound", "unknown command '%s'", rq.command);
		for (int i = 0; c && !rc && i < rq.nargs; i++)
			if (!key_allowed(c, rq.args[i].key))
				rc = fail(&err, "InvalidParameter", "%s takes no parameter %s",
					  c->name, rq.args[i].key);
		if (!rc)
			rc = c->run(a, &rq, &value, &err);
	}

	if (rc) {
		buf_printf(reply, "{\"error\":{\"class\":\"%s\",\"desc\":", err.class);
		buf_json_cstr(reply, err.desc);
		buf_puts(reply, "}}\n");
	} else {
		buf_puts(reply, "{\"return\":");
		buf_add(reply, value.p, value.len);
		buf_puts(reply, "}\n");
	}
	free(value.p);
}

/* ---- the port ---- */

/* Gives up on a reply when the host is gone or stops reading. */
static void send_reply(struct agent *a, const struct buf *reply)
{
	size_t off = 0;
	int waited = 0;

	while (off < reply->len) {
		ssize_t n = write(a->port, reply->p + off, reply->len - off);

		if (n > 0) {
			off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			break;
		struct pollfd pfd = { .fd = a->port, .events = POLLOUT };

		if (waited >= REPLY_TIMEOUT_MS || poll(&pfd, 1, 100) < 0)
			break;
		/* Without a host the port reports POLLHUP and never POLLOUT. But a
		 * host that has just reconnected can have its request read before
		 * the guest kernel handles the port-open message that came with
		 * it, so a hang-up is only believed after a while. */
		if ((pfd.revents & POLLHUP) && !(pfd.revents & POLLOUT)) {
			const struct timespec tick = { 0, 10 * 1000000L };

			nanosleep(&tick, NULL);
			waited += 10;
			continue;
		}
		waited += 100;
	}
	if (off < reply->len)
		fprintf(stderr, "vmce-agent: dropped a reply (%zu of %zu bytes sent)\n", off, reply->len);
}

static void end_of_line(struct agent *a)
{
	struct buf reply = { 0 };

	if (a->line_too_long) {
		buf_printf(&reply, "{\"error\":{\"class\":\"InvalidParameter\","
				   "\"desc\":\"request line longer than %d bytes\"}}\n", MAX_LINE);
	} else {
		size_t len = a->line_len;

		if (len && a->line[len - 1] == '\r')
			len--;
		a->line[len] = '\0';
		if (len)
			handle_request(a, a->line, len, &reply);
	}
	if (reply.len)
		send_reply(a, &reply);
	free(reply.p);
	a->line_len = 0;
	a->line_too_long = false;
}

static void feed(struct agent *a, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n')
			end_of_line(a);
		else if (a->line_len == MAX_LINE)
			a->line_too_long = true;
		else
			a->line[a->line_len++] = data[i];
	}
}

/* Reads what the host sent; notices when the host goes away. */
static void read_port(struct agent *a)
{
	char chunk[4096];

	for (;;) {
		ssize_t n = read(a->port, chunk, sizeof(chunk));

		if (n > 0) {
			feed(a, chunk, (size_t)n);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		/* 0: no host on the other end; a new one must not see old bytes. */
		a->port_live = false;
		a->line_len = 0;
		a->line_too_long = false;
		return;
	}
}

static void __attribute__((noreturn)) serve(struct agent *a)
{
	sigset_t waitmask;
	struct pollfd *fds = NULL;
	size_t cap = 0;

	sigprocmask(SIG_SETMASK, NULL, &waitmask);
	sigdelset(&waitmask, SIGIO);
	for (;;) {
		const struct timespec retry = { RECONNECT_POLL_MS / 1000, (RECONNECT_POLL_MS % 1000) * 1000000L };
		size_t n = 0;
		int rc;

		reap_children(a);
		if (cap < a->nvictims + 1) {
			cap = a->nvictims + 16;
			fds = xrealloc(fds, cap * sizeof(*fds));
		}
		fds[n++] = (struct pollfd){ .fd = a->port_live ? a->port : -1, .events = POLLIN };
		for (size_t i = 0; i < a->nvictims; i++)
			fds[n++] = (struct pollfd){ .fd = a->victims[i].out_fd, .events = POLLIN };

		/* SIGIO, unblocked only here, says the host connected or left. */
		rc = ppoll(fds, n, a->port_live ? NULL : &retry, &waitmask);
		if (rc < 0 && errno != EINTR) {
			fprintf(stderr, "vmce-agent: ppoll: %s\n", strerror(errno));
			exit(1);
		}
		if (port_event || (rc == 0 && !a->port_live)) {
			port_event = 0;
			a->port_live = true;
		}
		if (rc <= 0)
			continue;
		for (size_t i = 1; i < n; i++)
			if (fds[i].revents)
				drain_victim(&a->victims[i - 1]);
		if (fds[0].revents)
			read_port(a);
	}
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_sigio };
	sigset_t io;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGIO, &sa, NULL);
	sigemptyset(&io);
	sigaddset(&io, SIGIO);
	sigprocmask(SIG_BLOCK, &io, NULL);
}

int main(int argc, char **argv)
{
	static struct agent a = { .kmsg_fd = -1, .trace_fd = -1, .port_live = true };

	if (argc != 2 || argv[1][0] == '-') {
		fputs("Usage: vmce-agent PORT_DEVICE\n"
		      "Serves the vmce host over a virtio-serial port (protocol: images/README.md).\n",
		      argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr);
		return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
	}
	setup_signals();
	/* vmce-pages processes whose leader died become ours to reap. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	a.port = open(argv[1], O_RDWR | O_NONBLOCK | O_CLOEXEC);
	if (a.port < 0) {
		fprintf(stderr, "vmce-agent: cannot open %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	/* Ask for SIGIO on host connect and disconnect (virtio_console sends it). */
	if (fcntl(a.port, F_SETOWN, getpid()) ||
	    fcntl(a.port, F_SETFL, O_RDWR | O_NONBLOCK | O_ASYNC))
		fprintf(stderr, "vmce-agent: no SIGIO on %s (%s); polling for the host every %d ms\n",
			argv[1], strerror(errno), RECONNECT_POLL_MS);

	if (kmsg_start(&a)) {
		fputs("vmce-agent: out of memory\n", stderr);
		return 1;
	}

	serve(&a);
}
