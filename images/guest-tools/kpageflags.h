/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * /proc/kpageflags bits: include/uapi/linux/kernel-page-flags.h (0-26) and
 * the kernel's own include/linux/kernel-page-flags.h (32-41), which
 * /proc/kpageflags reports too. Shared by vmce-agent and vmce-pages.
 */
#ifndef VMCE_KPAGEFLAGS_H
#define VMCE_KPAGEFLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KPF(n) (1ULL << (n))
enum {
	KPF_LOCKED, KPF_ERROR, KPF_REFERENCED, KPF_UPTODATE, KPF_DIRTY, KPF_LRU,
	KPF_ACTIVE, KPF_SLAB, KPF_WRITEBACK, KPF_RECLAIM, KPF_BUDDY, KPF_MMAP,
	KPF_ANON, KPF_SWAPCACHE, KPF_SWAPBACKED, KPF_COMPOUND_HEAD,
	KPF_COMPOUND_TAIL, KPF_HUGE, KPF_UNEVICTABLE, KPF_HWPOISON, KPF_NOPAGE,
	KPF_KSM, KPF_THP, KPF_OFFLINE, KPF_ZERO_PAGE, KPF_IDLE, KPF_PGTABLE,
	KPF_RESERVED = 32, KPF_MLOCKED, KPF_MAPPEDTODISK, KPF_PRIVATE,
	KPF_PRIVATE_2, KPF_OWNER_PRIVATE, KPF_ARCH, KPF_UNCACHED, KPF_SOFTDIRTY,
	KPF_ARCH_2,
};

/* The bit's name, or NULL for a bit without one. */
extern const char *const kpf_names[64];

/*
 * The names of the bits set in FLAGS, comma-separated ("bitN" for a bit
 * without one), each in double quotes when QUOTED: the host's "flags"
 * arrays and vmce-pages' messages name bits alike. 1024 bytes hold all 64.
 */
void kpf_describe(uint64_t flags, bool quoted, char *s, size_t size);

#endif
