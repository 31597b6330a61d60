/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * Formatting a SIGBUS report inside the signal handler: no stdio, no
 * malloc, only appends to a stack buffer and write(2). Shared by
 * vmce-victim and vmce-pages.
 */
#ifndef VMCE_SIGSAFE_H
#define VMCE_SIGSAFE_H

#include <stddef.h>
#include <stdint.h>

struct sbuf {
	char *p;
	char *end;
};

void put_str(struct sbuf *b, const char *s);
void put_hex(struct sbuf *b, uint64_t v);
void put_dec(struct sbuf *b, int64_t v);
/* BUS_MCEERR_AO and the other SIGBUS si_codes by name; "unknown" else. */
const char *bus_code_name(int code);
/* All of it unless the fd fails; EINTR is retried. */
void write_all(int fd, const char *s, size_t len);

#endif
