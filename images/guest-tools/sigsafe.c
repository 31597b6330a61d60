// SPDX-License-Identifier: GPL-2.0-or-later
#include <errno.h>
#include <signal.h>
#include <unistd.h>

#include "sigsafe.h"

void put_str(struct sbuf *b, const char *s)
{
	while (*s && b->p < b->end)
		*b->p++ = *s++;
}

void put_hex(struct sbuf *b, uint64_t v)
{
	char tmp[16];
	int n = 0;

	put_str(b, "0x");
	do {
		tmp[n++] = "0123456789abcdef"[v & 0xf];
		v >>= 4;
	} while (v);
	while (n && b->p < b->end)
		*b->p++ = tmp[--n];
}

void put_dec(struct sbuf *b, int64_t v)
{
	char tmp[20];
	int n = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;

	if (v < 0)
		put_str(b, "-");
	do {
		tmp[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	while (n && b->p < b->end)
		*b->p++ = tmp[--n];
}

const char *bus_code_name(int code)
{
	switch (code) {
	case BUS_ADRALN: return "BUS_ADRALN";
	case BUS_ADRERR: return "BUS_ADRERR";
	case BUS_OBJERR: return "BUS_OBJERR";
	case BUS_MCEERR_AR: return "BUS_MCEERR_AR";
	case BUS_MCEERR_AO: return "BUS_MCEERR_AO";
	default: return "unknown";
	}
}

void write_all(int fd, const char *s, size_t len)
{
	while (len) {
		ssize_t n = write(fd, s, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		s += n;
		len -= (size_t)n;
	}
}
