// SPDX-License-Identifier: GPL-2.0-or-later
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
