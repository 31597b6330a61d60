// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * trace-mf: the ras:memory_failure_event tracepoint, which says for each
 * page how memory_failure() classed it and what came of it, in words the
 * kernel log does not always print.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "agent-write.h"

#define TRACING_DIR "/sys/kernel/tracing"
#define MF_EVENT "events/ras/memory_failure_event"

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

int cmd_trace_mf(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
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
