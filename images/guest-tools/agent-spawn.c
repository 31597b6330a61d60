// SPDX-License-Identifier: GPL-2.0-or-later
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent-reports.h"
#include "agent-spawn.h"
#include "procfs.h"

/* The tools' first line can take long: vmce-pages waits for KSM to merge. */
#define START_TIMEOUT_MS 30000

void exit_json(struct buf *out, bool alive, int status)
{
	if (alive)
		buf_puts(out, "null");
	else if (WIFSIGNALED(status))
		buf_printf(out, "{\"signal\":%d}", WTERMSIG(status));
	else
		buf_printf(out, "{\"code\":%d}", WEXITSTATUS(status));
}

void describe_exit(char *s, size_t size, int status)
{
	if (WIFSIGNALED(status))
		snprintf(s, size, "was killed by signal %d", WTERMSIG(status));
	else
		snprintf(s, size, "exited with code %d", WEXITSTATUS(status));
}

/*
 * The tools live beside the agent: /bin in vmce's initramfs, and wherever
 * the host put them in a guest it reaches through qemu-guest-agent (a
 * tmpfs: an operator's image is not ours to write to). Called in the
 * child, just before the exec.
 */
const char *tool_path(const char *name)
{
	static char path[PATH_MAX];
	char dir[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", dir, sizeof(dir) - 1);
	char *slash;

	if (n <= 0) {
		snprintf(path, sizeof(path), "/bin/%s", name);
		return path;
	}
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		snprintf(path, sizeof(path), "/bin/%s", name);
	return path;
}

/*
 * The tool must not inherit the agent's blocked signals or ignored
 * SIGPIPE, nor read the agent's stdin; what it prints comes back on the
 * pipe (stderr too when with_stderr, else it goes to the console).
 */
pid_t spawn_tool(exec_fn *exec_tool, const struct request *rq, bool with_stderr, int *out_fd,
		 struct error *err)
{
	int fds[2];
	pid_t pid;

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
	if (pid == 0) {
		int null_fd = open("/dev/null", O_RDONLY);
		sigset_t none;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		if (null_fd >= 0)
			dup2(null_fd, STDIN_FILENO);
		dup2(fds[1], STDOUT_FILENO);
		if (with_stderr)
			dup2(fds[1], STDERR_FILENO);
		exec_tool(rq);
		_exit(127);
	}
	close(fds[1]);
	*out_fd = fds[0];
	return pid;
}

/*
 * Reads the tool's first line into out (NUL-terminated, without '\n').
 * Returns the number of bytes read past it, which stay at out + len + 1,
 * or -1 on EOF or timeout, leaving what was read in out.
 */
ssize_t read_first_line(int fd, char *out, size_t size, size_t *len)
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
		if (got + 1 >= size || waited >= START_TIMEOUT_MS)
			return -1;
		if (poll(&pfd, 1, (int)(START_TIMEOUT_MS - waited)) <= 0)
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

void wait_for_eof(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	char sink[512];

	while (poll(&pfd, 1, timeout_ms) > 0 && read(fd, sink, sizeof(sink)) > 0)
		;
}

/* Waits up to timeout_ms for pid to exit; kills it after that. */
int wait_exit(pid_t pid, int timeout_ms)
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

/* Running, not a zombie waiting to be reaped. */
bool process_alive(pid_t pid)
{
	char path[64], stat[512], *paren;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_file(path, stat, sizeof(stat)) < 0)
		return false;
	paren = strrchr(stat, ')');
	return paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
}
