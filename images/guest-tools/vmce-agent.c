// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmce-agent: serves the host over a virtio-serial port. One request per
 * line ("COMMAND key=value ..."), one JSON line per answer. The protocol is
 * described in images/README.md.
 */
#include <ctype.h>
#include <dirent.h>
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
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kpageflags.h"

#define MAX_LINE 4096
#define MAX_ARGS 8
#define KMSG_CAP 20000
#define KMSG_RECORD_MAX 16384
#define VICTIM_PATH "/bin/vmce-victim"
#define PAGES_PATH "/bin/vmce-pages"
#define MAX_GROUP_PIDS 33
#define INJECT_TIMEOUT_MS 5000
#define TRACING_DIR "/sys/kernel/tracing"
#define MF_EVENT "events/ras/memory_failure_event"
#define HWPOISON_CORRUPT "/sys/kernel/debug/hwpoison/corrupt-pfn"
#define MCE_INJECT_DIR "/sys/kernel/debug/mce-inject"
#define REPORT_DIR "/run/vmce"
#define VICTIM_START_TIMEOUT_MS 30000
#define REPLY_TIMEOUT_MS 2000
/* Without a host on the port, look again this often even without SIGIO. */
#define RECONNECT_POLL_MS 1000
#define MODULE_DEPTH_MAX 16

/* ---- growable output buffer and JSON ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static void buf_add(struct buf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = realloc(b->p, cap);
		if (!b->p) {
			fputs("vmce-agent: out of memory\n", stderr);
			exit(1);
		}
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

static void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(struct buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	buf_add(b, tmp, n < (int)sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Length of the valid UTF-8 sequence at s, or 0 if it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	static const uint32_t min_cp[] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		len = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		len = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* A JSON string; bytes that are not UTF-8 become U+FFFD so the line stays valid JSON. */
static void buf_json_str(struct buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	buf_puts(b, "\"");
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		size_t len;

		if (c == '"' || c == '\\') {
			buf_add(b, "\\", 1);
			buf_add(b, &c, 1);
			i++;
		} else if (c == '\n') {
			buf_puts(b, "\\n");
			i++;
		} else if (c == '\t') {
			buf_puts(b, "\\t");
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			buf_printf(b, "\\u%04x", c);
			i++;
		} else if ((len = utf8_len(u + i, n - i))) {
			buf_add(b, u + i, len);
			i += len;
		} else {
			buf_puts(b, "\\ufffd");
			i++;
		}
	}
	buf_puts(b, "\"");
}

static void buf_json_cstr(struct buf *b, const char *s)
{
	buf_json_str(b, s, strlen(s));
}

/* ---- requests and errors ---- */

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

static int fail(struct error *err, const char *class, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail(struct error *err, const char *class, const char *fmt, ...)
{
	va_list ap;

	err->class = class;
	va_start(ap, fmt);
	vsnprintf(err->desc, sizeof(err->desc), fmt, ap);
	va_end(ap);
	return -1;
}

static const char *arg(const struct request *rq, const char *key)
{
	for (int i = 0; i < rq->nargs; i++)
		if (!strcmp(rq->args[i].key, key))
			return rq->args[i].value;
	return NULL;
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || *end ? -1 : 0;
}

static int required_u64(const struct request *rq, const char *key, uint64_t *v, struct error *err)
{
	const char *s = arg(rq, key);

	if (!s)
		return fail(err, "InvalidParameter", "%s needs the parameter %s", rq->command, key);
	if (parse_u64(s, v))
		return fail(err, "InvalidParameter", "%s=%s is not a number", key, s);
	return 0;
}

static int required_pid(const struct request *rq, pid_t *pid, struct error *err)
{
	uint64_t v;

	if (required_u64(rq, "pid", &v, err))
		return -1;
	if (v == 0 || v > INT32_MAX)
		return fail(err, "InvalidParameter", "pid=%s is not a process id", arg(rq, "pid"));
	*pid = (pid_t)v;
	return 0;
}

/* Reads a small file whole; returns its length or -1 with errno set. */
static ssize_t read_file(const char *path, char *out, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t len = 0;
	ssize_t n;

	if (fd < 0)
		return -1;
	while (len + 1 < size && (n = read(fd, out + len, size - 1 - len)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			int saved = errno;

			close(fd);
			errno = saved;
			return -1;
		}
		len += (size_t)n;
	}
	close(fd);
	out[len] = '\0';
	return (ssize_t)len;
}

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
	int port;
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

static volatile sig_atomic_t port_event;

static void on_sigio(int sig)
{
	port_event = 1;
}

/* ---- victims ---- */

/* The newest first: an old victim's pid may have been reused by a new one. */
static struct victim *find_victim(struct agent *a, pid_t pid)
{
	for (size_t i = a->nvictims; i-- > 0;)
		if (a->victims[i].pid == pid)
			return &a->victims[i];
	return NULL;
}

static struct page_group *find_leader(struct agent *a, pid_t pid)
{
	for (size_t i = a->ngroups; i-- > 0;)
		if (a->groups[i].leader == pid)
			return &a->groups[i];
	return NULL;
}

/* Also reaps vmce-pages processes orphaned by their leader (the agent is their subreaper). */
static void reap_children(struct agent *a)
{
	pid_t pid;
	int status;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		struct victim *v = find_victim(a, pid);
		struct page_group *g = find_leader(a, pid);

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

/* Consumes what the victim printed, so it never blocks on a full pipe. */
static void drain_victim(struct victim *v)
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

static void exit_json(struct buf *out, bool alive, int status)
{
	if (alive)
		buf_puts(out, "null");
	else if (WIFSIGNALED(status))
		buf_printf(out, "{\"signal\":%d}", WTERMSIG(status));
	else
		buf_printf(out, "{\"code\":%d}", WEXITSTATUS(status));
}

static void describe_exit(char *s, size_t size, int status)
{
	if (WIFSIGNALED(status))
		snprintf(s, size, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(s, size, "exited with code %d", WEXITSTATUS(status));
}

static void __attribute__((noreturn)) exec_victim(int out_fd, const struct request *rq)
{
	char report[64];
	const char *argv[10];
	int n = 0;
	int null_fd = open("/dev/null", O_RDONLY);
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (null_fd >= 0)
		dup2(null_fd, STDIN_FILENO);
	dup2(out_fd, STDOUT_FILENO);
	dup2(out_fd, STDERR_FILENO);

	snprintf(report, sizeof(report), REPORT_DIR "/victim-%d.json", (int)getpid());
	/* A report left by an earlier victim with this pid is not ours. */
	unlink(report);
	argv[n++] = VICTIM_PATH;
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
	argv[n] = NULL;
	execv(VICTIM_PATH, (char **)argv);
	fprintf(stderr, "cannot run " VICTIM_PATH ": %s\n", strerror(errno));
	_exit(127);
}

/*
 * Reads the victim's first line into out (NUL-terminated, without '\n').
 * Returns the number of bytes read past it, which stay at out + len + 1,
 * or -1 on EOF or timeout, leaving what was read in out.
 */
static ssize_t read_first_line(int fd, char *out, size_t size, size_t *len)
{
	struct timespec start, now;
	size_t got = 0;

	out[0] = '\0';
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		char *nl = memchr(out, '\n', got);
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		long waited;
		ssize_t n;

		if (nl) {
			*nl = '\0';
			*len = (size_t)(nl - out);
			return (ssize_t)(got - *len - 1);
		}
		clock_gettime(CLOCK_MONOTONIC, &now);
		waited = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
		if (got + 1 >= size || waited >= VICTIM_START_TIMEOUT_MS)
			return -1;
		if (poll(&pfd, 1, (int)(VICTIM_START_TIMEOUT_MS - waited)) <= 0)
			continue;
		n = read(fd, out + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		got += (size_t)n;
		out[got] = '\0';
	}
}

static void wait_for_eof(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char sink[512];

	while (poll(&pfd, 1, timeout_ms) > 0 && read(fd, sink, sizeof(sink)) > 0)
		;
}

static int cmd_victim_start(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *mode = arg(rq, "mode");
	char first[4096];
	size_t len = 0;
	ssize_t extra;
	uint64_t v;
	int fds[2];
	pid_t pid;

	if (mode && strcmp(mode, "idle") && strcmp(mode, "read"))
		return fail(err, "InvalidParameter", "mode must be idle or read, not '%s'", mode);
	if (arg(rq, "node") && (parse_u64(arg(rq, "node"), &v) || v > 1023))
		return fail(err, "InvalidParameter", "node=%s is not a node number", arg(rq, "node"));
	if (arg(rq, "min-gpa") && parse_u64(arg(rq, "min-gpa"), &v))
		return fail(err, "InvalidParameter", "min-gpa=%s is not an address", arg(rq, "min-gpa"));

	if (mkdir(REPORT_DIR, 0755) && errno != EEXIST)
		return fail(err, "Failed", "cannot create " REPORT_DIR ": %s", strerror(errno));
	if (pipe2(fds, O_CLOEXEC))
		return fail(err, "Failed", "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return fail(err, "Failed", "fork: %s", strerror(errno));
	}
	if (pid == 0)
		exec_victim(fds[1], rq);
	close(fds[1]);

	extra = read_first_line(fds[0], first, sizeof(first), &len);
	if (extra < 0 || len < 2 || first[0] != '{' || first[len - 1] != '}') {
		int status;
		char how[64];

		/* It printed an error and is exiting: let it, to report its own exit code. */
		if (extra >= 0)
			wait_for_eof(fds[0], 2000);
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		close(fds[0]);
		describe_exit(how, sizeof(how), status);
		first[strcspn(first, "\n")] = '\0';
		return fail(err, "Failed", "vmce-victim %s before reporting its page%s%s", how,
			    first[0] ? ": " : "", first);
	}

	struct victim *nv = realloc(a->victims, (a->nvictims + 1) * sizeof(*nv));

	if (!nv) {
		fputs("vmce-agent: out of memory\n", stderr);
		exit(1);
	}
	a->victims = nv;
	nv = &a->victims[a->nvictims++];
	*nv = (struct victim){ .pid = pid, .alive = true, .out_fd = fds[0] };
	fcntl(fds[0], F_SETFL, O_NONBLOCK);
	/* What the victim printed right after its first line. */
	victim_feed(nv, first + len + 1, (size_t)extra);
	buf_add(out, first, len);
	return 0;
}

static int known_victim(struct agent *a, const struct request *rq, struct victim **v, struct error *err)
{
	pid_t pid;

	if (required_pid(rq, &pid, err))
		return -1;
	reap_children(a);
	*v = find_victim(a, pid);
	if (!*v)
		return fail(err, "NotFound", "no victim with pid %d", (int)pid);
	return 0;
}

static int cmd_victim_status(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct victim *v;
	char path[64], report[1024];
	ssize_t n;

	if (known_victim(a, rq, &v, err))
		return -1;
	drain_victim(v);

	buf_printf(out, "{\"pid\":%d,\"alive\":%s,\"exit\":", (int)v->pid, v->alive ? "true" : "false");
	exit_json(out, v->alive, v->status);
	buf_puts(out, ",\"sigbus\":");
	snprintf(path, sizeof(path), REPORT_DIR "/victim-%d.json", (int)v->pid);
	n = read_file(path, report, sizeof(report));
	while (n > 0 && (report[n - 1] == '\n' || report[n - 1] == ' '))
		report[--n] = '\0';
	/* The victim renames a complete report into place, so it is one object. */
	if (n > 1 && report[0] == '{' && report[n - 1] == '}' && !memchr(report, '\n', (size_t)n))
		buf_add(out, report, (size_t)n);
	else
		buf_puts(out, "null");
	buf_printf(out, ",\"touched\":%u}", v->touched);
	return 0;
}

static int cmd_victim_touch(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
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

static int cmd_victim_stop(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
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

/* ---- page workloads (vmce-pages) ---- */

/* The newest first, as for victims. */
static struct page_group *find_group(struct agent *a, pid_t pid)
{
	for (size_t i = a->ngroups; i-- > 0;)
		for (int j = 0; j < a->groups[i].npids; j++)
			if (a->groups[i].pids[j] == pid)
				return &a->groups[i];
	return NULL;
}

/* Running, not a zombie waiting to be reaped. */
static bool process_alive(pid_t pid)
{
	char path[64], stat[512], *paren;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, stat, sizeof(stat)) < 0)
		return false;
	paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}

static void __attribute__((noreturn)) exec_pages(int out_fd, const struct request *rq)
{
	static const char *const opts[][2] = {
		{ "type", "--type" }, { "procs", "--procs" },
		{ "threads", "--threads" }, { "prctl", "--prctl" },
	};
	const char *argv[16];
	int n = 0;
	int null_fd = open("/dev/null", O_RDONLY);
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (null_fd >= 0)
		dup2(null_fd, STDIN_FILENO);
	/* stderr stays the agent's: the console. */
	dup2(out_fd, STDOUT_FILENO);
	argv[n++] = PAGES_PATH;
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++) {
		if (arg(rq, opts[i][0])) {
			argv[n++] = opts[i][1];
			argv[n++] = arg(rq, opts[i][0]);
		}
	}
	argv[n++] = "--report-dir";
	argv[n++] = REPORT_DIR;
	argv[n] = NULL;
	execv(PAGES_PATH, (char **)argv);
	printf("{\"error\":\"cannot run " PAGES_PATH ": %s\"}\n", strerror(errno));
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

/* Waits up to timeout_ms for pid to exit; kills it after that. */
static int wait_exit(pid_t pid, int timeout_ms)
{
	int status = 0;

	for (int waited = 0; waited < timeout_ms; waited += 10) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid || (r < 0 && errno != EINTR))
			return status;
		usleep(10000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return status;
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

static int cmd_pages_start(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char first[4096];
	size_t len = 0;
	int fds[2];
	pid_t pid;
	struct page_group g = { 0 };

	if (!arg(rq, "type"))
		return fail(err, "InvalidParameter", "pages-start needs the parameter type");
	if (mkdir(REPORT_DIR, 0755) && errno != EEXIST)
		return fail(err, "Failed", "cannot create " REPORT_DIR ": %s", strerror(errno));
	if (pipe2(fds, O_CLOEXEC))
		return fail(err, "Failed", "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return fail(err, "Failed", "fork: %s", strerror(errno));
	}
	if (pid == 0)
		exec_pages(fds[1], rq);
	close(fds[1]);

	/* The tool prints one line and nothing after it: the pipe can go. */
	if (read_first_line(fds[0], first, sizeof(first), &len) < 0)
		first[strcspn(first, "\n")] = '\0';
	close(fds[0]);
	if (len < 2 || first[0] != '{' || first[len - 1] != '}' || !strncmp(first, "{\"error\":", 9) ||
	    parse_pids(first, &g))
		return pages_start_failed(pid, first, err);

	struct page_group *ng = realloc(a->groups, (a->ngroups + 1) * sizeof(*ng));

	if (!ng) {
		fputs("vmce-agent: out of memory\n", stderr);
		exit(1);
	}
	a->groups = ng;
	g.leader = pid;
	g.alive = true;
	json_get_str(first, "type", g.type, sizeof(g.type));
	json_get_str(first, "file", g.file, sizeof(g.file));
	a->groups[a->ngroups++] = g;
	buf_add(out, first, len);
	return 0;
}

static int known_group(struct agent *a, const struct request *rq, struct page_group **g, struct error *err)
{
	pid_t pid;

	if (required_pid(rq, &pid, err))
		return -1;
	reap_children(a);
	*g = find_group(a, pid);
	if (!*g)
		return fail(err, "NotFound", "no vmce-pages process with pid %d", (int)pid);
	return 0;
}

static bool in_group(const struct page_group *g, pid_t pid)
{
	for (int i = 0; i < g->npids; i++)
		if (g->pids[i] == pid)
			return true;
	return false;
}

/* Appends the file's one JSON object, or null when there is none (yet). */
static bool add_report(struct buf *out, const char *path)
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

static int compare_names(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The SIGBUS records DIR/pages-PID-TID.json of the group's processes, by name. */
static void add_sigbus_records(struct buf *out, const struct page_group *g)
{
	char **names = NULL, path[512];
	size_t n = 0;
	struct dirent *d;
	DIR *dp = opendir(REPORT_DIR);
	bool first = true;

	while (dp && (d = readdir(dp))) {
		long pid, tid;
		char tail[16];

		if (sscanf(d->d_name, "pages-%ld-%ld%15s", &pid, &tid, tail) != 3 ||
		    strcmp(tail, ".json") || !in_group(g, (pid_t)pid))
			continue;
		names = realloc(names, (n + 1) * sizeof(*names));
		if (!names || !(names[n++] = strdup(d->d_name))) {
			fputs("vmce-agent: out of memory\n", stderr);
			exit(1);
		}
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

static void report_path(char *path, size_t size, pid_t pid, const char *suffix)
{
	snprintf(path, size, REPORT_DIR "/pages-%d%s", (int)pid, suffix);
}

static int cmd_pages_status(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];
	bool first = true;

	if (known_group(a, rq, &g, err))
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
	add_sigbus_records(out, g);
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
static int cmd_pages_touch(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];
	const char *only = arg(rq, "only");
	pid_t pid;

	if (known_group(a, rq, &g, err))
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

static int cmd_pages_check(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	char path[128];

	if (known_group(a, rq, &g, err))
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

static int cmd_pages_stop(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;

	if (known_group(a, rq, &g, err))
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
	reap_children(a);
	remove_group_file(g);
	buf_puts(out, "{}");
	return 0;
}

/* ---- kernel log ---- */

/* /dev/kmsg escapes unprintable bytes and '\' as \xNN; undo that. */
static char *kmsg_unescape(const char *s, size_t n)
{
	char *text = malloc(n + 1), *t = text;

	if (!text)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' &&
		    isxdigit((unsigned char)s[i + 2]) && isxdigit((unsigned char)s[i + 3])) {
			char hex[3] = { s[i + 2], s[i + 3], '\0' };

			*t++ = (char)strtoul(hex, NULL, 16);
			i += 3;
		} else {
			*t++ = s[i];
		}
	}
	*t = '\0';
	return text;
}

static void kmsg_store(struct agent *a, uint64_t seq, uint64_t usec, int level, char *text)
{
	struct kmsg_record *r;

	if (a->kmsg_count == KMSG_CAP) {
		free(a->kmsg[a->kmsg_first].text);
		a->kmsg_first = (a->kmsg_first + 1) % KMSG_CAP;
		a->kmsg_count--;
	}
	r = &a->kmsg[(a->kmsg_first + a->kmsg_count++) % KMSG_CAP];
	*r = (struct kmsg_record){ .seq = seq, .usec = usec, .level = level, .text = text };
}

/*
 * One read() is one record: "PRIO,SEQ,USEC,FLAGS;text\n" followed by
 * " KEY=value\n" lines, which are that record's metadata, not its text.
 */
static void kmsg_parse(struct agent *a, char *rec, size_t n)
{
	unsigned long long prio, seq, usec;
	char *semi = memchr(rec, ';', n);
	char *text, *nl, *t;

	if (!semi || sscanf(rec, "%llu,%llu,%llu", &prio, &seq, &usec) != 3)
		return;
	text = semi + 1;
	nl = memchr(text, '\n', n - (size_t)(text - rec));
	t = kmsg_unescape(text, nl ? (size_t)(nl - text) : n - (size_t)(text - rec));
	if (t)
		kmsg_store(a, seq, usec, (int)(prio & 7), t);
}

static void kmsg_read_all(struct agent *a)
{
	static char rec[KMSG_RECORD_MAX];
	ssize_t n;

	for (;;) {
		n = read(a->kmsg_fd, rec, sizeof(rec) - 1);
		if (n > 0) {
			rec[n] = '\0';
			kmsg_parse(a, rec, (size_t)n);
			continue;
		}
		/* EPIPE: the kernel overwrote records we had not read; go on. */
		if (n < 0 && (errno == EPIPE || errno == EINTR))
			continue;
		return;
	}
}

static int cmd_kmsg(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t since = 0, next;
	bool first = true;

	if (arg(rq, "since") && required_u64(rq, "since", &since, err))
		return -1;
	if (a->kmsg_fd < 0)
		return fail(err, "Failed", "/dev/kmsg could not be opened at start");
	kmsg_read_all(a);

	next = since;
	buf_puts(out, "{\"lines\":[");
	for (size_t i = 0; i < a->kmsg_count; i++) {
		const struct kmsg_record *r = &a->kmsg[(a->kmsg_first + i) % KMSG_CAP];

		if (r->seq < since)
			continue;
		buf_printf(out, "%s{\"seq\":%llu,\"level\":%d,\"usec\":%llu,\"text\":", first ? "" : ",",
			   (unsigned long long)r->seq, r->level, (unsigned long long)r->usec);
		buf_json_cstr(out, r->text);
		buf_puts(out, "}");
		first = false;
		next = r->seq + 1;
	}
	buf_printf(out, "],\"next\":%llu}", (unsigned long long)next);
	return 0;
}

/* ---- system information ---- */

/* The guest reboots itself, as `reboot -f` would: the kernel resets the
 * machine (through the reset port), which QEMU turns into a system reset.
 * A child does it a moment later, so that this answer gets out first. */
static int cmd_reboot(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	pid_t pid;

	sync();
	pid = fork();
	if (pid < 0)
		return fail(err, "GenericError", "fork: %s", strerror(errno));
	if (pid == 0) {
		usleep(200 * 1000);
		reboot(RB_AUTOBOOT);
		_exit(1);
	}
	buf_puts(out, "{}");
	return 0;
}

static int cmd_ping(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct timespec ts;
	struct utsname u;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	uname(&u);
	buf_printf(out, "{\"uptime_ms\":%lld,\"release\":",
		   (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	buf_json_cstr(out, u.release);
	buf_puts(out, "}");
	return 0;
}

static bool sysctl_name_ok(const char *name)
{
	if (strncmp(name, "vm.", 3) && strncmp(name, "kernel.", 7) && strncmp(name, "net.", 4))
		return false;
	if (strstr(name, "..") || name[strlen(name) - 1] == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

/*
 * The data disk, when /init left it alone (vmce.disk=later): a guest saved
 * as a template and restored many times must not have written to a disk
 * each restored copy gets fresh, so the restored copy mounts it itself.
 */
static int cmd_disk_up(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	bool mounted, swap;

	if (access("/sys/block/vda", F_OK))
		return fail(err, "NotFound", "no data disk (/dev/vda)");
	mkdir("/mnt/vmce", 0755);
	mounted = mount("/dev/vda", "/mnt/vmce", "ext4", 0, NULL) == 0 || errno == EBUSY;
	if (!mounted)
		return fail(err, "Failed", "mount /dev/vda (ext4) on /mnt/vmce: %s", strerror(errno));
	swap = !access("/sys/block/vdb", F_OK) && (swapon("/dev/vdb", 0) == 0 || errno == EBUSY);
	buf_printf(out, "{\"mounted\":\"/mnt/vmce\",\"swap\":%s}", swap ? "true" : "false");
	return 0;
}

/* Writes V to the file (unless only reading), then reads it back. */
static int write_then_read(const char *path, const char *value, struct buf *out, struct error *err)
{
	char got[4096];
	ssize_t n;

	if (value) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd < 0)
			return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s",
				    path, strerror(errno));
		n = write(fd, value, strlen(value));
		int saved = errno;

		close(fd);
		if (n < 0)
			return fail(err, "Failed", "writing %s to %s: %s", value, path, strerror(saved));
	}
	n = read_file(path, got, sizeof(got));
	if (n < 0)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot read %s: %s", path,
			    strerror(errno));
	while (n > 0 && got[n - 1] == '\n')
		got[--n] = '\0';
	buf_json_str(out, got, (size_t)n);
	return 0;
}

static int cmd_sysctl(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *name = arg(rq, "name");
	char path[256];

	if (!name)
		return fail(err, "InvalidParameter", "sysctl needs the parameter name");
	if (strlen(name) > 200 || !sysctl_name_ok(name))
		return fail(err, "InvalidParameter", "name=%s is not a sysctl under vm., kernel. or net.", name);
	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	for (char *p = path + strlen("/proc/sys/"); *p; p++)
		if (*p == '.')
			*p = '/';
	buf_puts(out, "{\"name\":");
	buf_json_cstr(out, name);
	buf_puts(out, ",\"value\":");
	if (write_then_read(path, arg(rq, "value"), out, err))
		return -1;
	buf_puts(out, "}");
	return 0;
}

static int cmd_meminfo(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char text[8192], *line;
	long long corrupted = -1, total = -1, free_kb = -1;

	if (read_file("/proc/meminfo", text, sizeof(text)) < 0)
		return fail(err, "Failed", "cannot read /proc/meminfo: %s", strerror(errno));
	for (line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
		sscanf(line, "HardwareCorrupted: %lld", &corrupted);
		sscanf(line, "MemTotal: %lld", &total);
		sscanf(line, "MemFree: %lld", &free_kb);
	}
	if (corrupted < 0)
		return fail(err, "Failed", "/proc/meminfo has no HardwareCorrupted line (kernel without CONFIG_MEMORY_FAILURE)");
	buf_printf(out, "{\"hardware_corrupted_kb\":%lld,\"mem_total_kb\":%lld,\"mem_free_kb\":%lld}",
		   corrupted, total, free_kb);
	return 0;
}

static int cmd_translate(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char path[64];
	uint64_t va, entry;
	pid_t pid;
	int fd;
	ssize_t n;

	if (required_pid(rq, &pid, err) || required_u64(rq, "va", &va, err))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s", path,
			    strerror(errno));
	n = pread(fd, &entry, sizeof(entry), (off_t)(va >> 12) * 8);
	int saved = errno;

	close(fd);
	if (n < 0)
		return fail(err, "Failed", "reading %s: %s", path, strerror(saved));
	if (n != sizeof(entry))
		return fail(err, "InvalidParameter", "va=%s is outside the address space of %d",
			    arg(rq, "va"), (int)pid);
	if (entry >> 63) {
		uint64_t pfn = entry & ((1ULL << 55) - 1);

		buf_printf(out, "{\"present\":true,\"pfn\":\"0x%llx\",\"gpa\":\"0x%llx\"",
			   (unsigned long long)pfn, (unsigned long long)(pfn << 12));
	} else {
		buf_puts(out, "{\"present\":false,\"pfn\":null,\"gpa\":null");
	}
	/* The raw entry shows swap and hwpoison entries of pages not present. */
	buf_printf(out, ",\"entry\":\"0x%llx\"}", (unsigned long long)entry);
	return 0;
}

/* ---- modules ---- */

static bool same_module(const char *path, const char *name)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strcspn(base, ".");
	if (len != strlen(name))
		return false;
	for (size_t i = 0; i < len; i++) {
		char x = base[i] == '-' ? '_' : base[i], y = name[i] == '-' ? '_' : name[i];

		if (x != y)
			return false;
	}
	return true;
}

/* The modules.dep line "kernel/x/name.ko: dep.ko ..." for name, split at ':'. */
static char *find_module(char *dep, const char *name, char **deps)
{
	char *save = NULL;

	for (char *line = strtok_r(dep, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if (same_module(line, name)) {
			*deps = colon + 1;
			return line;
		}
	}
	return NULL;
}

static int load_module(const char *moddir, const char *dep_text, const char *name, int depth,
		       struct error *err)
{
	char *dep = strdup(dep_text), *deps = NULL, *path, *save = NULL;
	char full[512], depname[128];
	int fd, rc = 0;

	if (!dep)
		return fail(err, "Failed", "out of memory");
	path = find_module(dep, name, &deps);
	if (!path) {
		free(dep);
		return fail(err, "NotFound", "module %s is not in this image", name);
	}
	if (depth > MODULE_DEPTH_MAX) {
		free(dep);
		return fail(err, "Failed", "module dependencies of %s nest too deep", name);
	}
	for (char *d = strtok_r(deps, " ", &save); d && !rc; d = strtok_r(NULL, " ", &save)) {
		const char *base = strrchr(d, '/') ? strrchr(d, '/') + 1 : d;

		snprintf(depname, sizeof(depname), "%.*s", (int)strcspn(base, "."), base);
		rc = load_module(moddir, dep_text, depname, depth + 1, err);
	}
	if (!rc) {
		snprintf(full, sizeof(full), "%s/%s", moddir, path);
		fd = open(full, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = fail(err, "Failed", "cannot open %s: %s", full, strerror(errno));
		else if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			rc = fail(err, "Failed", "loading %s: %s", full, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	free(dep);
	return rc;
}

static int cmd_modprobe(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *name = arg(rq, "name");
	static char dep[65536];
	char moddir[300], path[320];
	struct utsname u;

	if (!name)
		return fail(err, "InvalidParameter", "modprobe needs the parameter name");
	if (strlen(name) > 100 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(name))
		return fail(err, "InvalidParameter", "name=%s is not a module name", name);
	uname(&u);
	snprintf(moddir, sizeof(moddir), "/lib/modules/%s", u.release);
	snprintf(path, sizeof(path), "%s/modules.dep", moddir);
	if (read_file(path, dep, sizeof(dep)) < 0)
		return fail(err, "Failed", "cannot read %s: %s", path, strerror(errno));
	if (load_module(moddir, dep, name, 0, err))
		return -1;
	buf_puts(out, "{}");
	return 0;
}

/* ---- page flags and memory-failure counters ---- */


static int cmd_kpageflags(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t pfn, flags;
	ssize_t n;
	int fd;

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (pfn > UINT64_MAX / 8)
		return fail(err, "InvalidParameter", "pfn=%s is not a page frame number", arg(rq, "pfn"));
	fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(err, "Failed", "cannot open /proc/kpageflags: %s", strerror(errno));
	n = pread(fd, &flags, sizeof(flags), (off_t)(pfn * 8));
	int saved = errno;

	close(fd);
	if (n < 0)
		return fail(err, "Failed", "reading /proc/kpageflags: %s", strerror(saved));
	if (n != sizeof(flags))
		return fail(err, "InvalidParameter", "pfn=%s is beyond the guest's memory", arg(rq, "pfn"));
	buf_printf(out, "{\"pfn\":\"0x%llx\",\"kpageflags\":\"0x%llx\",\"flags\":[",
		   (unsigned long long)pfn, (unsigned long long)flags);
	for (int bit = 0, first = 1; bit < 64; bit++) {
		if (!(flags & (1ULL << bit)))
			continue;
		if (kpf_names[bit])
			buf_printf(out, "%s\"%s\"", first ? "" : ",", kpf_names[bit]);
		else
			buf_printf(out, "%s\"bit%d\"", first ? "" : ",", bit);
		first = 0;
	}
	buf_puts(out, "]}");
	return 0;
}

/* Every file of DIR as "name":number (the per-node memory_failure counters). */
static void add_counter_dir(struct buf *out, const char *dir)
{
	char path[600], text[64];
	struct dirent *d;
	DIR *dp = opendir(dir);
	bool first = true;

	buf_puts(out, "{");
	while (dp && (d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (read_file(path, text, sizeof(text)) < 0 || !isdigit((unsigned char)text[0]))
			continue;
		buf_puts(out, first ? "" : ",");
		buf_json_cstr(out, d->d_name);
		buf_printf(out, ":%llu", strtoull(text, NULL, 10));
		first = false;
	}
	if (dp)
		closedir(dp);
	buf_puts(out, "}");
}

static int cmd_counters(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char text[8192], path[300], *line, *save = NULL;
	long long corrupted = -1;
	struct dirent *d;
	DIR *dp;
	bool any = false;

	if (read_file("/proc/meminfo", text, sizeof(text)) < 0)
		return fail(err, "Failed", "cannot read /proc/meminfo: %s", strerror(errno));
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		sscanf(line, "HardwareCorrupted: %lld", &corrupted);
	if (corrupted < 0)
		return fail(err, "Failed", "/proc/meminfo has no HardwareCorrupted line (kernel without CONFIG_MEMORY_FAILURE)");
	buf_printf(out, "{\"hardware_corrupted_kb\":%lld,\"node_memory_failure\":", corrupted);
	/* Linux 6.3 added these (and vmce-6.1 has them); Debian's 6.1 has none. */
	dp = opendir("/sys/devices/system/node");
	while (dp && (d = readdir(dp))) {
		struct stat st;

		if (strncmp(d->d_name, "node", 4) || !isdigit((unsigned char)d->d_name[4]))
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/%s/memory_failure", d->d_name);
		if (stat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		buf_puts(out, any ? "," : "{");
		buf_json_cstr(out, d->d_name);
		buf_puts(out, ":");
		add_counter_dir(out, path);
		any = true;
	}
	if (dp)
		closedir(dp);
	buf_puts(out, any ? "}}" : "null}");
	return 0;
}

/* ---- sysfs ---- */

static bool sysfs_path_ok(const char *path)
{
	static const char *const roots[] = { "/sys/kernel/mm/", "/sys/devices/system/machinecheck/" };
	bool under = false;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		under |= !strncmp(path, roots[i], strlen(roots[i])) && path[strlen(roots[i])];
	if (!under || strstr(path, "/.") || strstr(path, "//"))
		return false;
	for (const char *p = path; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("/._-:", *p))
			return false;
	return true;
}


static int cmd_sysfs(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *path = arg(rq, "path");

	if (!path)
		return fail(err, "InvalidParameter", "sysfs needs the parameter path");
	if (strlen(path) > 200 || !sysfs_path_ok(path))
		return fail(err, "InvalidParameter",
			    "path=%s is not a file under /sys/kernel/mm/ or /sys/devices/system/machinecheck/",
			    path);
	buf_puts(out, "{\"path\":");
	buf_json_cstr(out, path);
	buf_puts(out, ",\"value\":");
	if (write_then_read(path, arg(rq, "value"), out, err))
		return -1;
	buf_puts(out, "}");
	return 0;
}

/* ---- tracing memory_failure_event ---- */

static int tracing_ready(struct error *err)
{
	struct stat st;

	if (stat(TRACING_DIR "/" MF_EVENT, &st) == 0)
		return 0;
	if (mount("tracefs", TRACING_DIR, "tracefs", 0, NULL) && errno != EBUSY)
		return fail(err, "Failed", "cannot mount tracefs on " TRACING_DIR ": %s", strerror(errno));
	if (stat(TRACING_DIR "/" MF_EVENT, &st))
		return fail(err, "NotFound", TRACING_DIR "/" MF_EVENT " is missing: %s", strerror(errno));
	return 0;
}

static int write_string(const char *path, const char *value, struct error *err)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s", path,
			    strerror(errno));
	n = write(fd, value, strlen(value));
	int saved = errno;

	close(fd);
	if (n < 0) {
		errno = saved;
		return fail(err, "Failed", "writing %s to %s: %s", value, path, strerror(saved));
	}
	return 0;
}

/*
 * One event line, as ras_event.h prints it:
 *   "... memory_failure_event: pfn 0x1234: recovery action for dirty LRU page: Recovered"
 */
static void add_trace_event(struct buf *out, const char *line, size_t len)
{
	char text[1024], *p, *type, *result;

	snprintf(text, sizeof(text), "%.*s", (int)len, line);
	buf_puts(out, "{\"pfn\":");
	p = strstr(text, "memory_failure_event: pfn ");
	type = p ? strstr(p, ": recovery action for ") : NULL;
	result = type ? strrchr(type + 1, ':') : NULL;
	if (p && type && result && result > type + 1) {
		p += strlen("memory_failure_event: pfn ");
		buf_printf(out, "\"%.*s\",\"type\":", (int)(type - p), p);
		type += strlen(": recovery action for ");
		buf_json_str(out, type, result > type ? (size_t)(result - type) : 0);
		buf_puts(out, ",\"result\":");
		buf_json_cstr(out, result[1] == ' ' ? result + 2 : result + 1);
	} else {
		buf_puts(out, "null,\"type\":null,\"result\":null");
	}
	buf_puts(out, ",\"raw\":");
	buf_json_cstr(out, text);
	buf_puts(out, "}");
}

/* trace_pipe hands each event out once: "read" returns those since the last read. */
static int trace_read(struct agent *a, struct buf *out, struct error *err)
{
	static char data[65536];
	size_t len = 0;
	bool first = true;

	if (a->trace_fd < 0) {
		a->trace_fd = open(TRACING_DIR "/trace_pipe", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
		if (a->trace_fd < 0)
			return fail(err, "Failed", "cannot open " TRACING_DIR "/trace_pipe: %s",
				    strerror(errno));
	}
	for (;;) {
		ssize_t n = read(a->trace_fd, data + len, sizeof(data) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || (len += (size_t)n) == sizeof(data) - 1)
			break;
	}
	buf_puts(out, "{\"events\":[");
	for (size_t i = 0; i < len;) {
		char *nl = memchr(data + i, '\n', len - i);
		size_t end = nl ? (size_t)(nl - data) : len;

		if (memmem(data + i, end - i, "memory_failure_event:", 21)) {
			buf_puts(out, first ? "" : ",");
			add_trace_event(out, data + i, end - i);
			first = false;
		}
		i = end + 1;
	}
	buf_puts(out, "]}");
	return 0;
}

static int cmd_trace_mf(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *enable = TRACING_DIR "/" MF_EVENT "/enable";
	int given = !!arg(rq, "on") + !!arg(rq, "off") + !!arg(rq, "read");

	if (given != 1)
		return fail(err, "InvalidParameter", "trace-mf needs one of on=1, off=1 or read=1");
	if (tracing_ready(err))
		return -1;
	if (arg(rq, "read"))
		return trace_read(a, out, err);
	if (write_string(enable, arg(rq, "on") ? "1" : "0", err))
		return -1;
	buf_printf(out, "{\"enabled\":%s,\"event\":\"" TRACING_DIR "/" MF_EVENT "\"}",
		   arg(rq, "on") ? "true" : "false");
	return 0;
}

/* ---- guest-side injection ---- */

static int inject_madvise(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	union sigval value = { 0 };
	char path[128], sigbus_prefix[64];
	uint64_t va = 0;
	pid_t pid;

	if (known_group(a, rq, &g, err))
		return -1;
	required_pid(rq, &pid, err);
	if (arg(rq, "va") && required_u64(rq, "va", &va, err))
		return -1;
	value.sival_ptr = (void *)(uintptr_t)va;
	report_path(path, sizeof(path), pid, ".inject");
	unlink(path);
	if (sigqueue(pid, SIGRTMIN, value))
		return fail(err, "Failed", "sigqueue(%d): %s", (int)pid, strerror(errno));
	snprintf(sigbus_prefix, sizeof(sigbus_prefix), "pages-%d-", (int)pid);
	/* madvise answers in a report, unless its own SIGBUS ends the process first. */
	for (int waited = 0; waited < INJECT_TIMEOUT_MS; waited += 10) {
		struct buf rec = { 0 };

		if (add_report(&rec, path)) {
			buf_printf(out, "{\"method\":\"madvise\",\"pid\":%d,\"result\":", (int)pid);
			buf_add(out, rec.p, rec.len);
			buf_puts(out, ",\"killed\":false}");
			free(rec.p);
			return 0;
		}
		free(rec.p);
		if (!process_alive(pid)) {
			buf_printf(out, "{\"method\":\"madvise\",\"pid\":%d,\"result\":null,\"killed\":true,"
				   "\"sigbus\":", (int)pid);
			add_sigbus_records(out, &(struct page_group){ .pids = { pid }, .npids = 1 });
			buf_puts(out, "}");
			return 0;
		}
		usleep(10000);
	}
	return fail(err, "Failed", "process %d did not answer the MADV_HWPOISON request within %d s",
		    (int)pid, INJECT_TIMEOUT_MS / 1000);
}

/* The kernel's refusal (e.g. a page poisoned already) is an answer, not a failure. */
static void write_answer(struct buf *out, const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int e = 0;

	if (fd < 0 || write(fd, value, strlen(value)) < 0)
		e = errno;
	if (fd >= 0)
		close(fd);
	buf_printf(out, "\"errno\":%d,\"error\":", e);
	if (e)
		buf_json_cstr(out, strerror(e));
	else
		buf_puts(out, "null");
}

static int inject_corrupt_pfn(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t pfn;
	char value[32];

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (access(HWPOISON_CORRUPT, W_OK))
		return fail(err, "NotFound", HWPOISON_CORRUPT " is missing (module hwpoison_inject, debugfs): %s",
			    strerror(errno));
	snprintf(value, sizeof(value), "0x%llx", (unsigned long long)pfn);
	buf_printf(out, "{\"method\":\"corrupt-pfn\",\"pfn\":\"%s\",\"path\":\"" HWPOISON_CORRUPT "\",",
		   value);
	write_answer(out, HWPOISON_CORRUPT, value);
	buf_puts(out, "}");
	return 0;
}

/*
 * mce-inject's "hw" mode writes the bank's MSRs (QEMU's TCG takes them) and
 * raises #MC with "int $18": the guest's own machine-check handler grades
 * and handles it as it would QEMU's injection. "sw" only logs the record,
 * which memory_failure() never sees. The injection runs in kernel context,
 * so an SRAR (kind=ar) is "data load in kernel context": a panic.
 */
static int inject_mce(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *kind = arg(rq, "kind") ? arg(rq, "kind") : "ao";
	const char *mode = arg(rq, "flags") ? arg(rq, "flags") : "hw";
	const char *status = !strcmp(kind, "ar") ? "0xbd80000000000134" : "0xbd000000000000c0";
	uint64_t pfn, bank = 9;
	char value[32];
	static const char *const files[] = { "flags", "status", "misc", "addr" };
	const char *values[4];

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (strcmp(kind, "ao") && strcmp(kind, "ar"))
		return fail(err, "InvalidParameter", "kind must be ao or ar, not '%s'", kind);
	if (strcmp(mode, "hw") && strcmp(mode, "sw"))
		return fail(err, "InvalidParameter", "flags must be hw or sw, not '%s'", mode);
	if (arg(rq, "bank") && required_u64(rq, "bank", &bank, err))
		return -1;
	if (bank > 31)
		return fail(err, "InvalidParameter", "bank=%s is not a bank", arg(rq, "bank"));
	if (access(MCE_INJECT_DIR "/bank", W_OK))
		return fail(err, "NotFound", MCE_INJECT_DIR "/bank is missing (module mce-inject, debugfs): %s",
			    strerror(errno));
	snprintf(value, sizeof(value), "0x%llx", (unsigned long long)(pfn << 12));
	/* flags_write() drops the last byte it is given, meant to be a newline. */
	values[0] = !strcmp(mode, "hw") ? "hw\n" : "sw\n";
	values[1] = status;
	values[2] = "0x8c";
	values[3] = value;
	for (size_t i = 0; i < 4; i++) {
		char path[128];

		snprintf(path, sizeof(path), MCE_INJECT_DIR "/%s", files[i]);
		if (write_string(path, values[i], err))
			return -1;
	}
	buf_printf(out, "{\"method\":\"mce-inject\",\"pfn\":\"0x%llx\",\"kind\":\"%s\",\"flags\":\"%s\","
		   "\"bank\":%llu,\"status\":\"%s\",\"misc\":\"0x8c\",\"addr\":\"%s\",",
		   (unsigned long long)pfn, kind, mode, (unsigned long long)bank, status, value);
	/* Writing the bank number is what injects. */
	snprintf(value, sizeof(value), "%llu", (unsigned long long)bank);
	write_answer(out, MCE_INJECT_DIR "/bank", value);
	buf_puts(out, "}");
	return 0;
}

static int cmd_inject(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *method = arg(rq, "method");

	if (!method)
		return fail(err, "InvalidParameter", "inject needs the parameter method");
	if (!strcmp(method, "madvise"))
		return inject_madvise(a, rq, out, err);
	if (!strcmp(method, "corrupt-pfn"))
		return inject_corrupt_pfn(a, rq, out, err);
	if (!strcmp(method, "mce-inject"))
		return inject_mce(a, rq, out, err);
	return fail(err, "InvalidParameter", "method must be madvise, corrupt-pfn or mce-inject, not '%s'",
		    method);
}

/* ---- dispatch ---- */

struct command {
	const char *name;
	int (*run)(struct agent *a, const struct request *rq, struct buf *out, struct error *err);
	const char *keys[8];
};

static const struct command commands[] = {
	{ "ping", cmd_ping, { NULL } },
	{ "reboot", cmd_reboot, { NULL } },
	{ "sysctl", cmd_sysctl, { "name", "value", NULL } },
	{ "victim-start", cmd_victim_start, { "mode", "node", "min-gpa", NULL } },
	{ "victim-status", cmd_victim_status, { "pid", NULL } },
	{ "victim-touch", cmd_victim_touch, { "pid", NULL } },
	{ "victim-stop", cmd_victim_stop, { "pid", NULL } },
	{ "meminfo", cmd_meminfo, { NULL } },
	{ "kmsg", cmd_kmsg, { "since", NULL } },
	{ "translate", cmd_translate, { "pid", "va", NULL } },
	{ "modprobe", cmd_modprobe, { "name", NULL } },
	{ "disk-up", cmd_disk_up, { NULL } },
	{ "pages-start", cmd_pages_start, { "type", "procs", "threads", "prctl", NULL } },
	{ "pages-status", cmd_pages_status, { "pid", NULL } },
	{ "pages-touch", cmd_pages_touch, { "pid", "only", NULL } },
	{ "pages-check", cmd_pages_check, { "pid", NULL } },
	{ "pages-stop", cmd_pages_stop, { "pid", NULL } },
	{ "kpageflags", cmd_kpageflags, { "pfn", NULL } },
	{ "counters", cmd_counters, { NULL } },
	{ "inject", cmd_inject, { "method", "pid", "va", "pfn", "kind", "flags", "bank", NULL } },
	{ "trace-mf", cmd_trace_mf, { "on", "off", "read", NULL } },
	{ "sysfs", cmd_sysfs, { "path", "value", NULL } },
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
			fds = realloc(fds, cap * sizeof(*fds));
			if (!fds) {
				fputs("vmce-agent: out of memory\n", stderr);
				exit(1);
			}
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

	a.kmsg = calloc(KMSG_CAP, sizeof(*a.kmsg));
	if (!a.kmsg) {
		fputs("vmce-agent: out of memory\n", stderr);
		return 1;
	}
	a.kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (a.kmsg_fd < 0)
		fprintf(stderr, "vmce-agent: cannot open /dev/kmsg: %s\n", strerror(errno));

	serve(&a);
}
