/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A request to vmce-agent, as vmce-agent.c parsed it from its line, and
 * the error a command fails with: the one way every command reads its
 * arguments and says what went wrong, below the commands and the
 * protocol alike.
 */
#ifndef VMCE_AGENT_REQUEST_H
#define VMCE_AGENT_REQUEST_H

#include <stdint.h>
#include <sys/types.h>

#define MAX_ARGS 8

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

/* Sets err; returns -1, for "return fail(...)". */
int fail(struct error *err, const char *class, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
const char *arg(const struct request *rq, const char *key);
int required_u64(const struct request *rq, const char *key, uint64_t *v, struct error *err);
int required_pid(const struct request *rq, pid_t *pid, struct error *err);

#endif
