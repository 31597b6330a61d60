// SPDX-License-Identifier: GPL-2.0-or-later
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "agent-request.h"
#include "procfs.h"

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
