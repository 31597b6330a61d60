// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * meminfo, counters, translate, kpageflags: what the guest kernel says of
 * its memory and of one page, so the host can see where a page is and
 * what memory_failure() made of it.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agent.h"
#include "kpageflags.h"
#include "procfs.h"

/* Without a HardwareCorrupted line the kernel has no memory_failure() to observe. */
static int read_meminfo(char *text, size_t size, long long *corrupted, struct error *err)
{
	if (read_file("/proc/meminfo", text, size) < 0)
		return fail(err, "Failed", "cannot read /proc/meminfo: %s", strerror(errno));
	*corrupted = meminfo_field(text, "HardwareCorrupted");
	if (*corrupted < 0)
		return fail(err, "Failed", "/proc/meminfo has no HardwareCorrupted line (kernel without CONFIG_MEMORY_FAILURE)");
	return 0;
}

int cmd_meminfo(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char text[8192];
	long long corrupted, total, free_kb;

	if (read_meminfo(text, sizeof(text), &corrupted, err))
		return -1;
	total = meminfo_field(text, "MemTotal");
	free_kb = meminfo_field(text, "MemFree");
	buf_printf(out, "{\"hardware_corrupted_kb\":%lld,\"mem_total_kb\":%lld,\"mem_free_kb\":%lld}",
		   corrupted, total, free_kb);
	return 0;
}

int cmd_translate(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char path[64];
	uint64_t va, entry;
	pid_t pid;
	enum read_u64_result r;

	if (required_pid(rq, &pid, err) || required_u64(rq, "va", &va, err))
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	r = read_u64_at(path, va >> 12, &entry);
	if (r == RU64_OPEN)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s", path,
			    strerror(errno));
	if (r == RU64_READ)
		return fail(err, "Failed", "reading %s: %s", path, strerror(errno));
	if (r == RU64_PAST_END)
		return fail(err, "InvalidParameter", "va=%s is outside the address space of %d",
			    arg(rq, "va"), (int)pid);
	if (entry & PM_PRESENT) {
		uint64_t pfn = entry & PM_PFN_MASK;

		buf_printf(out, "{\"present\":true,\"pfn\":\"0x%llx\",\"gpa\":\"0x%llx\"",
			   (unsigned long long)pfn, (unsigned long long)(pfn << 12));
	} else {
		buf_puts(out, "{\"present\":false,\"pfn\":null,\"gpa\":null");
	}
	/* The raw entry shows swap and hwpoison entries of pages not present. */
	buf_printf(out, ",\"entry\":\"0x%llx\"}", (unsigned long long)entry);
	return 0;
}

int cmd_kpageflags(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t pfn, flags;
	enum read_u64_result r;
	char names[1024];

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (pfn > UINT64_MAX / 8)
		return fail(err, "InvalidParameter", "pfn=%s is not a page frame number", arg(rq, "pfn"));
	r = read_u64_at("/proc/kpageflags", pfn, &flags);
	if (r == RU64_OPEN)
		return fail(err, "Failed", "cannot open /proc/kpageflags: %s", strerror(errno));
	if (r == RU64_READ)
		return fail(err, "Failed", "reading /proc/kpageflags: %s", strerror(errno));
	if (r == RU64_PAST_END)
		return fail(err, "InvalidParameter", "pfn=%s is beyond the guest's memory", arg(rq, "pfn"));
	kpf_describe(flags, true, names, sizeof(names));
	buf_printf(out, "{\"pfn\":\"0x%llx\",\"kpageflags\":\"0x%llx\",\"flags\":[",
		   (unsigned long long)pfn, (unsigned long long)flags);
	buf_puts(out, names);
	buf_puts(out, "]}");
	return 0;
}

/* Every file of DIR as "name":number (the per-node memory_failure counters). */
static void add_counter_dir(struct buf *out, const char *dir)
{
	char path[600], text[64];
	struct dirent *d;
	DIR *dp = opendir(dir);
	bool first = true;

	buf_puts(out, "{");
	while (dp && (d = readdir(dp))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		if (read_file(path, text, sizeof(text)) < 0 || !isdigit((unsigned char)text[0]))
			continue;
		buf_puts(out, first ? "" : ",");
		buf_json_cstr(out, d->d_name);
		buf_printf(out, ":%llu", strtoull(text, NULL, 10));
		first = false;
	}
	if (dp)
		closedir(dp);
	buf_puts(out, "}");
}

int cmd_counters(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	char text[8192], path[300];
	long long corrupted;
	struct dirent *d;
	DIR *dp;
	bool any = false;

	if (read_meminfo(text, sizeof(text), &corrupted, err))
		return -1;
	buf_printf(out, "{\"hardware_corrupted_kb\":%lld,\"node_memory_failure\":", corrupted);
	/* Linux 6.3 added these (and vmce-6.1 has them); Debian's 6.1 has none. */
	dp = opendir("/sys/devices/system/node");
	while (dp && (d = readdir(dp))) {
		struct stat st;

		if (strncmp(d->d_name, "node", 4) || !isdigit((unsigned char)d->d_name[4]))
			continue;
		snprintf(path, sizeof(path), "/sys/devices/system/node/%s/memory_failure", d->d_name);
		if (stat(path, &st) || !S_ISDIR(st.st_mode))
			continue;
		buf_puts(out, any ? "," : "{");
		buf_json_cstr(out, d->d_name);
		buf_puts(out, ":");
		add_counter_dir(out, path);
		any = true;
	}
	if (dp)
		closedir(dp);
	buf_puts(out, any ? "}}" : "null}");
	return 0;
}
