/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * JSON text built in a growable buffer, and the one way the guest tools
 * quote a string. One quoting because the agent passes vmce-pages' line on
 * to the host verbatim: what vmce-pages writes must be what the agent
 * would. Shared by vmce-agent and vmce-pages.
 */
#ifndef VMCE_JSONBUF_H
#define VMCE_JSONBUF_H

#include <stddef.h>
#include <stdio.h>

struct buf {
	char *p; /* NUL-terminated once anything was added */
	size_t len, cap;
};

/* realloc(), but out of memory the tool says so and exits 1: it has no
 * half-done answer worth keeping. */
void *xrealloc(void *p, size_t size);

void buf_add(struct buf *b, const void *s, size_t n);
void buf_puts(struct buf *b, const char *s);
/* At most 255 bytes per call: the answers' numbers and short names. */
void buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON string; bytes that are not UTF-8 become U+FFFD so the line stays valid JSON. */
void buf_json_str(struct buf *b, const char *s, size_t n);
void buf_json_cstr(struct buf *b, const char *s);
/* The same, onto a stream: vmce-pages prints without allocating once its page is set up. */
void json_fputs(FILE *f, const char *s);

#endif
