// SPDX-License-Identifier: GPL-2.0-or-later
#include <stdio.h>

#include "kpageflags.h"

const char *const kpf_names[64] = {
	"locked", "error", "referenced", "uptodate", "dirty", "lru", "active",
	"slab", "writeback", "reclaim", "buddy", "mmap", "anon", "swapcache",
	"swapbacked", "compound_head", "compound_tail", "huge", "unevictable",
	"hwpoison", "nopage", "ksm", "thp", "offline", "zero_page", "idle",
	"pgtable",
	[32] = "reserved", "mlocked", "mappedtodisk", "private", "private_2",
	"owner_private", "arch", "uncached", "softdirty", "arch_2",
};

void kpf_describe(uint64_t flags, bool quoted, char *s, size_t size)
{
	const char *q = quoted ? "\"" : "";
	size_t len = 0;

	s[0] = '\0';
	for (int bit = 0; bit < 64 && len < size; bit++) {
		if (!(flags & KPF(bit)))
			continue;
		if (kpf_names[bit])
			len += snprintf(s + len, size - len, "%s%s%s%s", len ? "," : "", q, kpf_names[bit], q);
		else
			len += snprintf(s + len, size - len, "%s%sbit%d%s", len ? "," : "", q, bit, q);
	}
}
