// SPDX-License-Identifier: GPL-2.0-or-later
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent-kmsg-ring.h"

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

static void kmsg_store(struct kmsg_ring *k, uint64_t seq, uint64_t usec, int level, char *text)
{
	struct kmsg_record *r;

	if (k->count == KMSG_CAP) {
		free(k->records[k->first].text);
		k->first = (k->first + 1) % KMSG_CAP;
		k->count--;
	}
	r = &k->records[(k->first + k->count++) % KMSG_CAP];
	*r = (struct kmsg_record){ .seq = seq, .usec = usec, .level = level, .text = text };
}

/*
 * One read() is one record: "PRIO,SEQ,USEC,FLAGS;text\n" followed by
 * " KEY=value\n" lines, which are that record's metadata, not its text.
 */
static void kmsg_parse(struct kmsg_ring *k, char *rec, size_t n)
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
		kmsg_store(k, seq, usec, (int)(prio & 7), t);
}

void kmsg_read_all(struct kmsg_ring *k)
{
	static char rec[KMSG_RECORD_MAX];
	ssize_t n;

	for (;;) {
		n = read(k->fd, rec, sizeof(rec) - 1);
		if (n > 0) {
			rec[n] = '\0';
			kmsg_parse(k, rec, (size_t)n);
			continue;
		}
		/* EPIPE: the kernel overwrote records we had not read; go on. */
		if (n < 0 && (errno == EPIPE || errno == EINTR))
			continue;
		return;
	}
}

const struct kmsg_record *kmsg_at(const struct kmsg_ring *k, size_t i)
{
	return &k->records[(k->first + i) % KMSG_CAP];
}

int kmsg_start(struct kmsg_ring *k)
{
	k->records = calloc(KMSG_CAP, sizeof(*k->records));
	if (!k->records)
		return -1;
	k->fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (k->fd < 0)
		fprintf(stderr, "vmce-agent: cannot open /dev/kmsg: %s\n", strerror(errno));
	return 0;
}
