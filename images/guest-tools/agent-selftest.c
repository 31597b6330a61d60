// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * selftest: a kernel selftest of vmce's guest-kernel series, run in the
 * guest as a kernel developer runs it (its own TAP output, its exit
 * status), so that a campaign case and tools/testing/selftests judge the
 * same program. Only the selftests built beside the agent can be named.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "agent-spawn.h"

/* The series' selftests (images/guest-tools/meson.build builds them) */
static const char *const selftests[] = { "ksm_hwpoison", NULL };

#define SELFTEST_OUTPUT_MAX 65536
#define SELFTEST_TIMEOUT_MS 120000

static void exec_selftest(const struct request *rq)
{
	const char *path = tool_path(arg(rq, "name"));

	execl(path, path, (char *)NULL);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * Its output until it closes it (it exits) or the time is up, at most
 * SELFTEST_OUTPUT_MAX bytes; the rest is read and dropped so that the
 * selftest never blocks on a full pipe.
 */
static size_t read_output(int fd, char *out, size_t size, long long deadline, bool *timed_out)
{
	size_t len = 0;

	*timed_out = false;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long long left = deadline - now_ms();
		char drop[4096];
		ssize_t n;

		if (left <= 0) {
			*timed_out = true;
			return len;
		}
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) <= 0)
			continue;
		if (len < size)
			n = read(fd, out + len, size - len);
		else
			n = read(fd, drop, sizeof(drop));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return len;
		if (len < size)
			len += (size_t)n;
	}
}

int cmd_selftest(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	static char output[SELFTEST_OUTPUT_MAX];
	const char *name = arg(rq, "name");
	uint64_t timeout_ms = SELFTEST_TIMEOUT_MS;
	bool known = false, timed_out;
	int fd, status;
	size_t len;
	pid_t pid;

	(void)a;
	if (!name)
		return fail(err, "InvalidParameter", "selftest needs the parameter name");
	for (const char *const *s = selftests; *s; s++)
		known |= !strcmp(*s, name);
	if (!known)
		return fail(err, "InvalidParameter", "name=%s is not a selftest of vmce's series", name);
	if (arg(rq, "timeout-ms") && required_u64(rq, "timeout-ms", &timeout_ms, err))
		return -1;
	pid = spawn_tool(exec_selftest, rq, true, &fd, err);
	if (pid < 0)
		return -1;
	len = read_output(fd, output, sizeof(output), now_ms() + (long long)timeout_ms, &timed_out);
	close(fd);
	/* a selftest that outlives its time is killed, and says so */
	status = wait_exit(pid, timed_out ? 0 : 5000);
	buf_puts(out, "{\"exit\":");
	exit_json(out, false, status);
	buf_printf(out, ",\"timed_out\":%s,\"output\":", timed_out ? "true" : "false");
	buf_json_str(out, output, len);
	buf_puts(out, "}");
	return 0;
}
