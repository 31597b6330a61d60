/*
 * vmce-poison: makes the host kernel's memory_failure() run on a page, the
 * way a real uncorrected DRAM error would, in the vmce host lab(L1).
 *
 *   vmce-poison file PATH OFFSET   madvise(MADV_HWPOISON) on the page at
 *                                  OFFSET of PATH(e.g. a guest's RAM in a
 *                                  shared memory-backend-file)
 *   vmce-poison pfn PID ADDR       the physical page behind ADDR in PID
 *   vmce-poison pid-addr PID ADDR  debugfs hwpoison on the page behind ADDR
 *                                  in PID(e.g. QEMU's anonymous guest RAM,
 *                                  which no file maps), with whether it sat
 *                                  in a transparent huge page
 *   vmce-poison corrupt-pfn PFN    debugfs hwpoison: poison a pfn
 *   vmce-poison unpoison-pfn PFN   debugfs hwpoison: unpoison it again
 *
 * Prints one JSON line. Exits 1 with one line on stderr when it cannot.
 *
 * Copyright(C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#ifndef MADV_HWPOISON
#define MADV_HWPOISON 100
#endif

#define PAGE 4096UL
#ifndef HUGETLBFS_MAGIC
#define HUGETLBFS_MAGIC 0x958458f6
#endif

static int
fail(const char *what, const char *arg)
{
	fprintf(stderr, "vmce-poison: %s %s: %s\n", what, arg, strerror(errno));
	return 1;
}

static int
parse_u64(const char *s, uint64_t *v)
{
	char *end = NULL;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno == 0 && end != s && *end == '\0';
}

/* pagemap: bit 63 present, bits 0-54 the pfn(root only) */
static int
lookup_pfn(const char *pagemap, uint64_t addr, uint64_t *pfn)
{
	uint64_t entry = 0;
	int fd = open(pagemap, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (pread(fd, &entry, sizeof entry, (off_t) (addr / PAGE * sizeof entry)) != sizeof entry) {
		close(fd);
		return -1;
	}
	close(fd);
	if (!(entry & (1ULL << 63))) {
		errno = ENXIO;
		return -1;
	}
	*pfn = entry & ((1ULL << 55) - 1);
	return 0;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* the SIGBUS the kernel sends the poisoner itself (6.12's madvise), if any */
static volatile sig_atomic_t own_sigbus_code, own_sigbus_lsb;

static void
on_own_sigbus(int sig, siginfo_t *si, void *ctx)
{
	(void) sig;
	(void) ctx;
	own_sigbus_code = si->si_code;
	own_sigbus_lsb = si->si_addr_lsb;
}

static int
catch_own_sigbus(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_own_sigbus;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	return sigaction(SIGBUS, &sa, NULL);
}

static int
poison_file(const char *path, const char *offset_str)
{
	uint64_t offset, pfn = 0, map_len = PAGE, map_off;
	volatile char *map, *page;
	struct statfs fs;
	uint64_t t;
	bool busy;
	int fd;

	if (!parse_u64(offset_str, &offset) || offset % PAGE) {
		errno = EINVAL;
		return fail("offset must be a page-aligned number:", offset_str);
	}
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail("cannot open", path);
	/*
	 * A file of hugetlbfs (guest RAM on huge pages) maps only in whole
	 * huge pages: map the one that holds the page, then poison the 4 KiB
	 * page itself. memory_failure() poisons all of the huge page and
	 * tells its users so (si_addr_lsb 21): the loss vmced's hugepage
	 * policy is about.
	 */
	if (fstatfs(fd, &fs) == 0 && (unsigned long) fs.f_type == HUGETLBFS_MAGIC && fs.f_bsize > (long) PAGE)
		map_len = (uint64_t) fs.f_bsize;
	map_off = offset & ~(map_len - 1);
	map = mmap(NULL, map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t) map_off);
	close(fd);
	if (map == MAP_FAILED)
		return fail("cannot map", path);
	page = map + (offset - map_off);
	/* present in our page table, so pagemap tells its pfn */
	(void) page[0];
	if (lookup_pfn("/proc/self/pagemap", (uint64_t) (uintptr_t) page, &pfn) < 0)
		return fail("cannot read the pfn of", path);
	/*
	 * Linux 6.9 and later (6.12: mm/madvise.c) call memory_failure() with
	 * MF_ACTION_REQUIRED for MADV_HWPOISON, so the caller, which maps the
	 * page, gets BUS_MCEERR_AR itself as the syscall returns (6.1: no
	 * signal to the caller). Caught and said, not died of.
	 */
	if (catch_own_sigbus() < 0)
		return fail("cannot catch SIGBUS for", path);
	t = now_ns();
	/*
	 * EBUSY: memory_failure() poisoned the page and signalled its users
	 * but could not isolate it (say, a vCPU held an extra reference at
	 * that instant: "still referenced by 1 users"). The error happened
	 * all the same; say so and let the caller watch what follows.
	 */
	busy = madvise((void *) page, PAGE, MADV_HWPOISON) < 0;
	if (busy && errno != EBUSY)
		return fail("madvise(MADV_HWPOISON) failed on", path);
	printf("{\"pfn\":\"0x%" PRIx64 "\",\"offset\":\"0x%" PRIx64 "\",\"time_ns\":%" PRIu64
	       ",\"isolated\":%s,\"own_sigbus\":", pfn, offset, t, busy ? "false" : "true");
	if (own_sigbus_code)
		printf("{\"code\":%d,\"lsb\":%d}}\n", (int) own_sigbus_code, (int) own_sigbus_lsb);
	else
		printf("null}\n");
	/* the page is gone from our mapping: do not touch it again */
	return 0;
}

/* 0, or fail()'s exit status */
static int
pid_pfn(const char *pid, const char *addr_str, uint64_t *addr, uint64_t *pfn)
{
	char pagemap[64];

	if (!parse_u64(addr_str, addr)) {
		errno = EINVAL;
		return fail("not an address:", addr_str);
	}
	snprintf(pagemap, sizeof pagemap, "/proc/%s/pagemap", pid);
	if (lookup_pfn(pagemap, *addr, pfn) < 0)
		return fail("no page behind that address in", pagemap);
	return 0;
}

static int
show_pfn(const char *pid, const char *addr_str)
{
	uint64_t addr, pfn = 0;
	int rc = pid_pfn(pid, addr_str, &addr, &pfn);

	if (rc)
		return rc;
	printf("{\"pfn\":\"0x%" PRIx64 "\"}\n", pfn);
	return 0;
}

/* 0 written, -1 with errno (EBUSY: memory_failure() did not isolate it) */
static int
debugfs_pfn(const char *file, uint64_t pfn, uint64_t *t)
{
	char path[128];
	int fd, saved;

	snprintf(path, sizeof path, "/sys/kernel/debug/hwpoison/%s", file);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		fail("cannot open(is hwpoison_inject loaded, debugfs mounted?)", path);
		errno = ENOENT;
		return -2;
	}
	*t = now_ns();
	if (dprintf(fd, "%" PRIu64 "\n", pfn) < 0) {
		saved = errno;
		close(fd);
		errno = saved;
		return -1;
	}
	close(fd);
	return 0;
}

static int
debugfs_write(const char *file, const char *pfn_str)
{
	uint64_t pfn, t = 0;
	int rc;

	if (!parse_u64(pfn_str, &pfn)) {
		errno = EINVAL;
		return fail("not a pfn:", pfn_str);
	}
	rc = debugfs_pfn(file, pfn, &t);
	if (rc == -2)
		return 1;
	if (rc < 0)
		return fail("cannot write to debugfs hwpoison", file);
	printf("{\"pfn\":\"0x%" PRIx64 "\",\"time_ns\":%" PRIu64 "}\n", pfn, t);
	return 0;
}

/* /proc/kpageflags bits (include/uapi/linux/kernel-page-flags.h) */
#define KPF_HUGE 17
#define KPF_THP 22

static int
page_flags(uint64_t pfn, uint64_t *flags)
{
	int fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pread(fd, flags, sizeof *flags, (off_t) (pfn * sizeof *flags));
	close(fd);
	return n == sizeof *flags ? 0 : -1;
}

/*
 * Another process's anonymous page has no file to madvise() through, and
 * madvise(MADV_HWPOISON) works on the caller's own mappings only: the pfn
 * from its page table goes to debugfs hwpoison, which runs
 * memory_failure(pfn, 0) as a found (not consumed) error does, so a
 * process with PR_MCE_KILL_EARLY (QEMU) gets BUS_MCEERR_AO. The THP bit
 * is read just before, since khugepaged may have moved the page since the
 * caller last looked.
 */
static int
poison_pid_addr(const char *pid, const char *addr_str)
{
	uint64_t addr, pfn = 0, flags = 0, t = 0;
	bool have_flags, busy;
	int rc = pid_pfn(pid, addr_str, &addr, &pfn);

	if (rc)
		return rc;
	if (pfn == 0) {
		errno = EPERM;
		return fail("pagemap hides pfns from this user(not root?) for", pid);
	}
	have_flags = page_flags(pfn, &flags) == 0;
	rc = debugfs_pfn("corrupt-pfn", pfn, &t);
	if (rc == -2)
		return 1;
	busy = rc < 0;
	if (busy && errno != EBUSY)
		return fail("debugfs hwpoison corrupt-pfn failed for", addr_str);
	printf("{\"pfn\":\"0x%" PRIx64 "\",\"addr\":\"0x%" PRIx64 "\",\"time_ns\":%" PRIu64
	       ",\"isolated\":%s", pfn, addr, t, busy ? "false" : "true");
	if (have_flags)
		printf(",\"kpageflags\":\"0x%" PRIx64 "\",\"thp\":%s,\"hugetlb\":%s", flags,
		       (flags >> KPF_THP) & 1 ? "true" : "false", (flags >> KPF_HUGE) & 1 ? "true" : "false");
	printf("}\n");
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "file") == 0)
		return poison_file(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "pfn") == 0)
		return show_pfn(argv[2], argv[3]);
	if (argc == 4 && strcmp(argv[1], "pid-addr") == 0)
		return poison_pid_addr(argv[2], argv[3]);
	if (argc == 3 && strcmp(argv[1], "corrupt-pfn") == 0)
		return debugfs_write("corrupt-pfn", argv[2]);
	if (argc == 3 && strcmp(argv[1], "unpoison-pfn") == 0)
		return debugfs_write("unpoison-pfn", argv[2]);
	fprintf(stderr, "usage: vmce-poison file PATH OFFSET | pfn PID ADDR | pid-addr PID ADDR | "
	                 "corrupt-pfn PFN | unpoison-pfn PFN\n");
	return 2;
}
