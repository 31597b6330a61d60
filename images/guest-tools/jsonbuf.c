// SPDX-License-Identifier: GPL-2.0-or-later
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jsonbuf.h"

void *xrealloc(void *p, size_t size)
{
	p = realloc(p, size);
	if (!p) {
		fprintf(stderr, "%s: out of memory\n", program_invocation_short_name);
		exit(1);
	}
	return p;
}

void buf_add(struct buf *b, const void *s, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;

		while (b->len + n + 1 > cap)
			cap *= 2;
		b->p = xrealloc(b->p, cap);
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
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

typedef void put_fn(void *to, const void *s, size_t n);

static void put_buf(void *to, const void *s, size_t n)
{
	buf_add(to, s, n);
}

static void put_stream(void *to, const void *s, size_t n)
{
	fwrite(s, 1, n, to);
}

/* One quoting for both kinds of output, written through put. */
static void json_quote(put_fn *put, void *to, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;

	put(to, "\"", 1);
	for (size_t i = 0; i < n;) {
		unsigned char c = u[i];
		char esc[8];
		size_t len;

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(to, esc, 2);
			i++;
		} else if (c == '\n') {
			put(to, "\\n", 2);
			i++;
		} else if (c == '\t') {
			put(to, "\\t", 2);
			i++;
		} else if (c < 0x20 || c == 0x7f) {
			put(to, esc, (size_t)snprintf(esc, sizeof(esc), "\\u%04x", c));
			i++;
		} else if ((len = utf8_len(u + i, n - i))) {
			put(to, u + i, len);
			i += len;
		} else {
			put(to, "\\ufffd", 6);
			i++;
		}
	}
	put(to, "\"", 1);
}

void buf_json_str(struct buf *b, const char *s, size_t n)
{
	json_quote(put_buf, b, s, n);
}

void buf_json_cstr(struct buf *b, const char *s)
{
	buf_json_str(b, s, strlen(s));
}

void json_fputs(FILE *f, const char *s)
{
	json_quote(put_stream, f, s, strlen(s));
}
