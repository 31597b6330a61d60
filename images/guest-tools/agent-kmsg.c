// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kmsg: the guest's kernel log as the host reads it, by sequence number,
 * from the records the agent keeps (agent-kmsg-ring.c).
 */
#include <stdbool.h>
#include <stdint.h>

#include "agent.h"

int cmd_kmsg(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t since = 0, next;
	bool first = true;

	if (arg(rq, "since") && required_u64(rq, "since", &since, err))
		return -1;
	if (a->kmsg.fd < 0)
		return fail(err, "Failed", "/dev/kmsg could not be opened at start");
	kmsg_read_all(&a->kmsg);

	next = since;
	buf_puts(out, "{\"lines\":[");
	for (size_t i = 0; i < a->kmsg.count; i++) {
		const struct kmsg_record *r = kmsg_at(&a->kmsg, i);

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
