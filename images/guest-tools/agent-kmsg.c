// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kmsg: the guest's kernel log as the host reads it, by sequence number.
 * /dev/kmsg forgets what the kernel overwrites, so the agent keeps the
 * last KMSG_CAP records itself from its start.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

#define KMSG_CAP 20000
#define KMSG_RECORD_MAX 16384

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

int cmd_kmsg(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
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

int kmsg_start(struct agent *a)
{
	a->kmsg = calloc(KMSG_CAP, sizeof(*a->kmsg));
	if (!a->kmsg)
		return -1;
	a->kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (a->kmsg_fd < 0)
		fprintf(stderr, "vmce-agent: cannot open /dev/kmsg: %s\n", strerror(errno));
	return 0;
}
