// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmce-agent: serves the host over a virtio-serial port. One request per
 * line ("COMMAND key=value ..."), one JSON line per answer. The protocol is
 * described in images/README.md. This file is the protocol: the port, the
 * request line, the table of commands and the answer; the commands are in
 * agent-<concern>.c (agent.h).
 *
 * In a guest vmce did not build, which has no port of vmce's but has
 * qemu-guest-agent, the same agent serves a Unix socket instead
 * (--listen), and the host runs "vmce-agent --call SOCKET REQUEST" through
 * qemu-guest-agent's guest-exec for each request: the commands, and the
 * state they keep between requests (the page workloads, the kernel log
 * ring), are the same either way.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define REPLY_TIMEOUT_MS 2000
/* Without a host on the port, look again this often even without SIGIO. */
#define RECONNECT_POLL_MS 1000
/* --call: a request that takes longer is a guest in trouble. */
#define CALL_TIMEOUT_S 120

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
	{ "ping", cmd_ping, { "token", NULL } },
	{ "reboot", cmd_reboot, { "boot", NULL } },
	{ "sysctl", cmd_sysctl, { "name", "value", NULL } },
	{ "sysfs", cmd_sysfs, { "path", "value", NULL } },
	{ "disk-up", cmd_disk_up, { "dir", NULL } },
	{ "modprobe", cmd_modprobe, { "name", NULL } },
	/* agent-victim.c */
	{ "victim-start", cmd_victim_start, { "mode", "node", "min-gpa", "pages", NULL } },
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
	{ "fill", cmd_fill, { "mb", NULL } },
	/* agent-selftest.c */
	{ "selftest", cmd_selftest, { "name", "timeout-ms", NULL } },
	/* agent-firmware.c */
	{ "firmware", cmd_firmware, { NULL } },
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
		if (a->listen_fd >= 0) {
			/* --listen: that caller is done; the next one connects anew */
			close(a->port);
			a->port = -1;
		}
		a->port_live = false;
		a->line_len = 0;
		a->line_too_long = false;
		return;
	}
}

/* --listen: one caller at a time, each a request or a few. */
static void accept_caller(struct agent *a)
{
	int fd = accept4(a->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

	if (fd < 0)
		return;
	a->port = fd;
	a->port_live = true;
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

		reap_children(&a->children);
		if (cap < a->children.nvictims + 1) {
			cap = a->children.nvictims + 16;
			fds = xrealloc(fds, cap * sizeof(*fds));
		}
		if (a->listen_fd >= 0 && a->port < 0)
			fds[n++] = (struct pollfd){ .fd = a->listen_fd, .events = POLLIN };
		else
			fds[n++] = (struct pollfd){ .fd = a->port_live ? a->port : -1, .events = POLLIN };
		for (size_t i = 0; i < a->children.nvictims; i++)
			fds[n++] = (struct pollfd){ .fd = a->children.victims[i].out_fd, .events = POLLIN };

		/* SIGIO, unblocked only here, says the host connected or left. */
		rc = ppoll(fds, n, a->port_live || a->listen_fd >= 0 ? NULL : &retry, &waitmask);
		if (rc < 0 && errno != EINTR) {
			fprintf(stderr, "vmce-agent: ppoll: %s\n", strerror(errno));
			exit(1);
		}
		if (a->listen_fd < 0 && (port_event || (rc == 0 && !a->port_live))) {
			port_event = 0;
			a->port_live = true;
		}
		if (rc <= 0)
			continue;
		for (size_t i = 1; i < n; i++)
			if (fds[i].revents)
				drain_victim(&a->children.victims[i - 1]);
		if (fds[0].revents && a->listen_fd >= 0 && a->port < 0)
			accept_caller(a);
		else if (fds[0].revents)
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

static int unix_address(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path)) {
		fprintf(stderr, "vmce-agent: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa->sun_path, path);
	return 0;
}

/*
 * --listen SOCKET: serves it from the background, so that the guest-exec
 * that started it ends at once. A socket nobody answers on is stale (a
 * guest agent that died): it is taken over; a live one is left alone and
 * this one exits 0, the host having what it asked for.
 */
static int listen_on(struct agent *a, const char *path)
{
	struct sockaddr_un sa;
	int fd, probe;

	if (unix_address(path, &sa))
		return -1;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(probe);
		exit(0);
	}
	if (probe >= 0)
		close(probe);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || chmod(path, 0600) ||
	    listen(fd, 4)) {
		fprintf(stderr, "vmce-agent: cannot listen on %s: %s\n", path, strerror(errno));
		return -1;
	}
	a->listen_fd = fd;
	a->port = -1;
	a->port_live = false;
	/* the guest-exec that started us returns; we live on, in our own session */
	if (fork() > 0)
		_exit(0);
	setsid();
	/* not the caller's pipes: qemu-guest-agent would wait for them to close */
	char log[sizeof(sa.sun_path) + 8];
	int null = open("/dev/null", O_RDWR);
	int errfd;

	snprintf(log, sizeof(log), "%s.log", path);
	errfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (null >= 0) {
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(errfd >= 0 ? errfd : null, STDERR_FILENO);
	}
	return 0;
}

/* --call SOCKET REQUEST...: one request to a --listen agent, its answer on stdout. */
static int call(const char *path, int nwords, char **words)
{
	struct sockaddr_un sa;
	struct buf line = { 0 };
	char chunk[4096];
	int fd;

	if (unix_address(path, &sa))
		return 2;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		/* the host tells this from an answer: it starts the agent again */
		fprintf(stderr, "vmce-agent: no agent on %s: %s\n", path, strerror(errno));
		return 3;
	}
	for (int i = 0; i < nwords; i++)
		buf_printf(&line, "%s%s", i ? " " : "", words[i]);
	buf_puts(&line, "\n");
	alarm(CALL_TIMEOUT_S);
	if (write(fd, line.p, line.len) != (ssize_t)line.len) {
		fprintf(stderr, "vmce-agent: sending the request: %s\n", strerror(errno));
		return 1;
	}
	shutdown(fd, SHUT_WR);
	for (;;) {
		ssize_t n = read(fd, chunk, sizeof(chunk));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		fwrite(chunk, 1, (size_t)n, stdout);
	}
	free(line.p);
	return 0;
}

static int usage(FILE *f)
{
	fputs("Usage: vmce-agent PORT_DEVICE\n"
	      "       vmce-agent --listen SOCKET\n"
	      "       vmce-agent --call SOCKET COMMAND [KEY=VALUE]...\n"
	      "Serves the vmce host over a virtio-serial port, or over a Unix socket that\n"
	      "--call reaches (through qemu-guest-agent's guest-exec); protocol: images/README.md.\n",
	      f);
	return f == stdout ? 0 : 2;
}

int main(int argc, char **argv)
{
	static struct agent a = { .kmsg.fd = -1, .trace_fd = -1, .port_live = true, .listen_fd = -1 };

	if (argc == 2 && !strcmp(argv[1], "--help"))
		return usage(stdout);
	if (argc >= 4 && !strcmp(argv[1], "--call"))
		return call(argv[2], argc - 3, argv + 3);
	if (argc == 3 && !strcmp(argv[1], "--listen")) {
		setup_signals();
		prctl(PR_SET_CHILD_SUBREAPER, 1);
		if (listen_on(&a, argv[2]))
			return 1;
		if (kmsg_start(&a.kmsg)) {
			fputs("vmce-agent: out of memory\n", stderr);
			return 1;
		}
		serve(&a);
	}
	if (argc != 2 || argv[1][0] == '-')
		return usage(stderr);
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

	if (kmsg_start(&a.kmsg)) {
		fputs("vmce-agent: out of memory\n", stderr);
		return 1;
	}

	serve(&a);
}
