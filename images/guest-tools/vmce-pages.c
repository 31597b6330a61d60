// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmce-pages: puts one target page in a known state (anonymous, page cache,
 * shmem, mlocked, THP, hugetlb, KSM, swap cache, shared, free, kernel) for
 * the host to poison, prints where it is as one JSON line, and records what
 * each process then sees: SIGBUS, touches, checks, self-poisoning. The types,
 * the line and the files are described in images/README.md.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "jsonbuf.h"
#include "kpageflags.h"
#include "procfs.h"
#include "sigsafe.h"

#define PAGE_SIZE 4096UL
#define PAGE_SHIFT 12
#define HUGE_SIZE (2UL << 20)
#define HUGE_SHIFT 21
#define CACHE_LINE 64
#define MAX_PROCS 32
#define MAX_THREADS 16
#define DEFAULT_REPORT_DIR "/run/vmce"
#define DISK_DIR "/mnt/vmce"
#define DATA_FILE DISK_DIR "/data.bin"
#define SPARSE_FILE DISK_DIR "/sparse.bin"
/* data.bin and sparse.bin are 256 pages; sparse.bin's 1 to 254 are a hole. */
#define FILE_PAGES 256
#define TMPFS_MAGIC_ 0x01021994
#define KSM_RUN "/sys/kernel/mm/ksm/run"
#define THP_ENABLED "/sys/kernel/mm/transparent_hugepage/enabled"
#define KSM_TIMEOUT_MS 20000
#define READY_TIMEOUT_MS 10000
#define SETTLE_TRIES 40
#define FREE_FLUSH_PAGES 4096

/* The upper half of every 64-bit word of a page's pattern; the lower half is
 * the word's offset, so a page read back says where it came from. */
#define SALT_ZERO 0U		/* all zeros: a hole */
#define SALT_DISK 0x766d6365U	/* "vmce": images/mkdisk's data.bin */
#define SALT_DIRTY 0x64697274U	/* "dirt": written over the disk's data */
#define SALT_ANON 0x616e6f6eU	/* "anon" */
#define SALT_KSM 0x6b736d21U	/* "ksm!" */

#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif


/* Exit codes: the agent maps them to its error classes. */
enum { EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_NOT_HERE = 3 };

struct target;

struct type {
	const char *name;
	void (*setup)(struct target *t);
	/* What kpageflags must and must not show once the state is reached. */
	uint64_t need, forbid;
	bool dirty;	   /* a touch writes */
	bool kernel;	   /* no process maps it (free, slab, pagetable) */
	bool fan_out;	   /* --procs > 1: children map the same page */
	int procs, threads; /* defaults */
	int resetup;	   /* new pages to try when the kernel took the page back */
	void (*check)(void);
};

struct target {
	unsigned char *va;   /* the target page in this process; NULL: none */
	uint64_t pfn;
	int lsb;	     /* the si_addr_lsb a SIGBUS should carry; 0: none */
	char file[PATH_MAX]; /* backing file, "" if none */
	int fd;		     /* that file, open for the check; -1 */
	off_t file_off;	     /* the target page's offset in it */
	uint64_t base;	     /* the pattern's first word offset */
	uint32_t salt;	     /* the page's expected contents */
	char note[768];
};

struct options {
	const char *type;
	int procs, threads;
	const char *report_dir;
	int prctl; /* -1: leave alone, else PR_MCE_KILL_LATE/EARLY */
};

/* Set before the signal handlers are installed; read by them. */
static struct target tgt = { .fd = -1 };
static const struct type *type;
static char report_prefix[PATH_MAX]; /* "DIR/pages-" */
static bool is_leader = true;
static pid_t children[MAX_PROCS];
static int nchildren;

static volatile sig_atomic_t touch_requested, check_requested, poison_requested;
static void *volatile poison_va;

/* ---- failing ---- */

/*
 * The leader also says why on stdout, as the one JSON line it owes its
 * reader; children only on stderr, and their leader notices they are gone.
 */
static void __attribute__((format(printf, 2, 3), noreturn)) die(int code, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "vmce-pages: %s\n", msg);
	if (is_leader) {
		for (int i = 0; i < nchildren; i++)
			kill(children[i], SIGKILL);
		fputs("{\"error\":", stdout);
		json_fputs(stdout, msg);
		fputs("}\n", stdout);
		fflush(stdout);
	}
	exit(code);
}

#define fail(...) die(EXIT_FAILED, __VA_ARGS__)
#define not_here(...) die(EXIT_NOT_HERE, __VA_ARGS__)

/* ---- pages, pagemap, kpageflags ---- */

static void fill(unsigned char *p, uint64_t base, uint32_t salt)
{
	uint64_t *w = (uint64_t *)p;

	for (size_t i = 0; i < PAGE_SIZE / 8; i++)
		w[i] = salt ? (base + 8 * i) | (uint64_t)salt << 32 : 0;
}

static bool matches(const volatile unsigned char *p, uint64_t base, uint32_t salt)
{
	const volatile uint64_t *w = (const volatile uint64_t *)p;

	for (size_t i = 0; i < PAGE_SIZE / 8; i++)
		if (w[i] != (salt ? (base + 8 * i) | (uint64_t)salt << 32 : 0))
			return false;
	return true;
}

static void read_page(const volatile unsigned char *p)
{
	for (size_t i = 0; i < PAGE_SIZE; i += CACHE_LINE)
		(void)p[i];
}

static uint64_t pagemap_entry(pid_t pid, const void *va)
{
	char path[64];
	uint64_t entry;
	enum read_u64_result r;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/pagemap", (int)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/pagemap");
	r = read_u64_at(path, (uintptr_t)va >> PAGE_SHIFT, &entry);
	if (r == RU64_OPEN)
		fail("cannot open %s: %s", path, strerror(errno));
	if (r != RU64_OK)
		fail("reading %s: %s", path, strerror(errno));
	return entry;
}

/* 0 when the page is not present. */
static uint64_t pfn_of(pid_t pid, const void *va)
{
	uint64_t entry = pagemap_entry(pid, va);

	if (!(entry & PM_PRESENT))
		return 0;
	if (!(entry & PM_PFN_MASK))
		fail("/proc/self/pagemap hides PFNs (not root?)");
	return entry & PM_PFN_MASK;
}

static uint64_t kpageflags(uint64_t pfn)
{
	uint64_t flags;
	enum read_u64_result r = read_u64_at("/proc/kpageflags", pfn, &flags);

	if (r == RU64_OPEN)
		fail("cannot open /proc/kpageflags: %s", strerror(errno));
	if (r != RU64_OK)
		fail("reading /proc/kpageflags at pfn 0x%llx: %s", (unsigned long long)pfn,
		     strerror(errno));
	return flags;
}

/*
 * Calls fn for every pfn whose flags have any of the bits in mask; stops
 * when fn returns true.
 */
static void scan_kpageflags(uint64_t mask, bool (*fn)(uint64_t pfn, uint64_t flags, void *arg),
			    void *arg)
{
	static uint64_t chunk[8192];
	int fd = open("/proc/kpageflags", O_RDONLY | O_CLOEXEC);
	uint64_t pfn = 0;
	ssize_t n;

	if (fd < 0)
		fail("cannot open /proc/kpageflags: %s", strerror(errno));
	while ((n = read(fd, chunk, sizeof(chunk))) > 0) {
		for (size_t i = 0; i < (size_t)n / 8; i++, pfn++)
			if ((chunk[i] & mask) && fn(pfn, chunk[i], arg)) {
				close(fd);
				return;
			}
	}
	if (n < 0)
		fail("reading /proc/kpageflags: %s", strerror(errno));
	close(fd);
}

/*
 * New pages wait in per-CPU batches before they are put on an LRU list
 * (and mlocked pages before they are moved to the unevictable one), so
 * kpageflags shows "lru" only after a drain. MADV_COLD drains this CPU's
 * batches first thing; the process stays on one CPU meanwhile
 * (stay_on_this_cpu).
 */
static void drain_lru(void)
{
	static unsigned char *dummy;

	if (!dummy) {
		dummy = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (dummy == MAP_FAILED)
			fail("mmap: %s", strerror(errno));
		dummy[0] = 1;
	}
	if (madvise(dummy, PAGE_SIZE, MADV_COLD))
		fail("madvise(MADV_COLD): %s", strerror(errno));
}

static cpu_set_t start_cpus;

/* One CPU while setting up: drain_lru() must reach the batches this process filled. */
static void stay_on_this_cpu(void)
{
	cpu_set_t set;
	int cpu = sched_getcpu();

	sched_getaffinity(0, sizeof(start_cpus), &start_cpus);
	CPU_ZERO(&set);
	CPU_SET(cpu < 0 ? 0 : cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

static void free_to_move(void)
{
	sched_setaffinity(0, sizeof(start_cpus), &start_cpus);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- mappings ---- */

static unsigned char *map_anon(size_t len, int flags)
{
	unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_ANONYMOUS | flags, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap of %zu bytes: %s", len, strerror(errno));
	return p;
}

/* One private anonymous page that khugepaged will not fold into a THP. */
static unsigned char *anon_page(uint32_t salt)
{
	unsigned char *p = map_anon(PAGE_SIZE, MAP_PRIVATE);

	if (madvise(p, PAGE_SIZE, MADV_NOHUGEPAGE))
		fail("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	fill(p, 0, salt);
	return p;
}

static void need_disk(void)
{
	struct statfs sf;

	if (statfs(DISK_DIR, &sf) || sf.f_type == TMPFS_MAGIC_ || access(DATA_FILE, R_OK))
		not_here("needs the data disk: %s is not mounted (images/mkdisk, attached by run/vm)",
			 DISK_DIR);
}

/* A page of the file, mapped shared; reading it brings it into the page cache. */
static void map_file_page(struct target *t, const char *path, int flags, int prot, off_t page)
{
	t->fd = open(path, flags | O_CLOEXEC, 0644);
	if (t->fd < 0)
		fail("cannot open %s: %s", path, strerror(errno));
	snprintf(t->file, sizeof(t->file), "%s", path);
	t->file_off = page * (off_t)PAGE_SIZE;
	t->va = mmap(NULL, PAGE_SIZE, prot, MAP_SHARED, t->fd, t->file_off);
	if (t->va == MAP_FAILED)
		fail("mmap of %s: %s", path, strerror(errno));
	read_page(t->va);
}

/* Campaigns start several at once; give each its own page of the shared files. */
static off_t page_for_pid(int offset)
{
	return 1 + (getpid() + offset) % (FILE_PAGES - 2);
}

static bool swap_enabled(void)
{
	char text[4096], *nl;

	if (read_file("/proc/swaps", text, sizeof(text)) < 0)
		return false;
	/* The first line is the header. */
	nl = strchr(text, '\n');
	return nl && nl[1];
}

static long meminfo_value(const char *key)
{
	char text[8192];

	if (read_file("/proc/meminfo", text, sizeof(text)) < 0)
		return -1;
	return (long)meminfo_field(text, key);
}

/* ---- the types ---- */

static void setup_anon_dirty(struct target *t)
{
	t->va = anon_page(SALT_ANON);
	t->salt = SALT_ANON;
	snprintf(t->note, sizeof(t->note),
		 "private anonymous page, written: dirty in its page-table entry (kpageflags "
		 "shows PG_dirty only once the kernel moves that bit to the page, as "
		 "memory_failure's unmap does)");
}

/*
 * MADV_FREE makes a written anonymous page "lazily freed": the kernel
 * clears its dirty bits (PTE and PG_dirty) and PG_swapbacked and moves it
 * to the file LRU, to be dropped rather than swapped under pressure. Until
 * then it stays mapped with its data: a clean anonymous page, without swap.
 * kpageflags: anon, lru, no swapbacked, no dirty. A read keeps it so.
 */
static void setup_anon_clean(struct target *t)
{
	t->va = anon_page(SALT_ANON);
	t->salt = SALT_ANON;
	drain_lru();
	if (madvise(t->va, PAGE_SIZE, MADV_FREE))
		fail("madvise(MADV_FREE): %s", strerror(errno));
	snprintf(t->note, sizeof(t->note),
		 "private anonymous page, written, then MADV_FREE: lazily freed, clean "
		 "(no PG_dirty, no dirty PTE, no swapbacked), still mapped with its data");
}

static void setup_pagecache_clean(struct target *t)
{
	need_disk();
	map_file_page(t, DATA_FILE, O_RDONLY, PROT_READ, page_for_pid(0));
	t->base = (uint64_t)t->file_off;
	t->salt = SALT_DISK;
	snprintf(t->note, sizeof(t->note),
		 "page %lld of %s (ext4), mapped MAP_SHARED read-only and read: clean page cache",
		 (long long)(t->file_off / PAGE_SIZE), DATA_FILE);
}

/*
 * The file's blocks are written and synced first, so the page is dirty
 * page cache over allocated blocks: only the write through the mapping is
 * unsynced.
 */
static void setup_pagecache_dirty(struct target *t)
{
	unsigned char page[PAGE_SIZE];
	char path[128];

	need_disk();
	snprintf(path, sizeof(path), DISK_DIR "/dirty-%d.bin", (int)getpid());
	t->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (t->fd < 0)
		fail("cannot create %s: %s", path, strerror(errno));
	for (off_t off = 0; off < 4 * (off_t)PAGE_SIZE; off += PAGE_SIZE) {
		fill(page, (uint64_t)off, SALT_DISK);
		if (pwrite(t->fd, page, PAGE_SIZE, off) != (ssize_t)PAGE_SIZE)
			fail("writing %s: %s", path, strerror(errno));
	}
	if (fsync(t->fd))
		fail("fsync of %s: %s", path, strerror(errno));
	snprintf(t->file, sizeof(t->file), "%s", path);
	t->file_off = PAGE_SIZE;
	t->va = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, t->file_off);
	if (t->va == MAP_FAILED)
		fail("mmap of %s: %s", path, strerror(errno));
	t->base = (uint64_t)t->file_off;
	t->salt = SALT_DIRTY;
	fill(t->va, t->base, t->salt);
	snprintf(t->note, sizeof(t->note),
		 "page 1 of %s (ext4, 4 pages written and synced), then written through a "
		 "MAP_SHARED mapping and not synced: dirty page cache; check fsyncs it", path);
}

/* ext4 reads a hole as a zeroed page it never maps to a block. */
static void setup_file_hole(struct target *t)
{
	need_disk();
	map_file_page(t, SPARSE_FILE, O_RDONLY, PROT_READ, page_for_pid(0));
	t->salt = SALT_ZERO;
	snprintf(t->note, sizeof(t->note),
		 "page %lld of %s, in its hole, mapped MAP_SHARED read-only and read: a zeroed "
		 "page-cache page with no block behind it (no mappedtodisk)",
		 (long long)(t->file_off / PAGE_SIZE), SPARSE_FILE);
}

static void setup_shmem(struct target *t)
{
	static const char *const dirs[] = { "/dev/shm", "/run" };
	struct statfs sf;
	const char *dir = NULL;
	char path[128];

	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]) && !dir; i++)
		if (!statfs(dirs[i], &sf) && sf.f_type == TMPFS_MAGIC_)
			dir = dirs[i];
	if (!dir)
		not_here("needs a tmpfs on /dev/shm or /run");
	snprintf(path, sizeof(path), "%s/vmce-shmem-%d", dir, (int)getpid());
	t->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (t->fd < 0 || ftruncate(t->fd, PAGE_SIZE))
		fail("cannot create %s: %s", path, strerror(errno));
	snprintf(t->file, sizeof(t->file), "%s", path);
	t->va = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, t->fd, 0);
	if (t->va == MAP_FAILED)
		fail("mmap of %s: %s", path, strerror(errno));
	t->salt = SALT_ANON;
	fill(t->va, 0, t->salt);
	snprintf(t->note, sizeof(t->note), "page 0 of the tmpfs file %s, mapped MAP_SHARED and written",
		 path);
}

static void setup_mlock_clean(struct target *t)
{
	need_disk();
	/* Not the page pagecache-clean would pick for the same pid. */
	map_file_page(t, DATA_FILE, O_RDONLY, PROT_READ, page_for_pid(FILE_PAGES / 2));
	if (mlock(t->va, PAGE_SIZE))
		fail("mlock: %s", strerror(errno));
	t->base = (uint64_t)t->file_off;
	t->salt = SALT_DISK;
	snprintf(t->note, sizeof(t->note),
		 "page %lld of %s mapped MAP_SHARED read-only, read and mlocked: clean, mlocked "
		 "page cache", (long long)(t->file_off / PAGE_SIZE), DATA_FILE);
}

static void setup_mlock_dirty(struct target *t)
{
	t->va = anon_page(SALT_ANON);
	t->salt = SALT_ANON;
	if (mlock(t->va, PAGE_SIZE))
		fail("mlock: %s", strerror(errno));
	snprintf(t->note, sizeof(t->note), "private anonymous page, written and mlocked");
}

/* Linux turns THP off ("never") when the machine has less than 512 MiB. */
static void need_thp(void)
{
	char mode[128];

	if (read_file(THP_ENABLED, mode, sizeof(mode)) < 0)
		mode[0] = '\0';
	mode[strcspn(mode, "\n")] = '\0';
	if (!strstr(mode, "[always]") && !strstr(mode, "[madvise]"))
		not_here("needs transparent huge pages: %s is \"%s\" (sysfs path=%s value=madvise)",
			 THP_ENABLED, mode, THP_ENABLED);
}

static void setup_thp(struct target *t)
{
	unsigned char *map, *huge;

	need_thp();
	map = map_anon(2 * HUGE_SIZE, MAP_PRIVATE);
	huge = (unsigned char *)(((uintptr_t)map + HUGE_SIZE - 1) & ~(HUGE_SIZE - 1));
	if (madvise(huge, HUGE_SIZE, MADV_HUGEPAGE))
		not_here("madvise(MADV_HUGEPAGE): %s (no transparent huge pages)", strerror(errno));
	for (size_t off = 0; off < HUGE_SIZE; off += PAGE_SIZE)
		fill(huge + off, off, SALT_ANON);
	/* A tail page: memory_failure must split the THP to isolate it. */
	t->va = huge + 3 * PAGE_SIZE;
	t->base = 3 * PAGE_SIZE;
	t->salt = SALT_ANON;
	snprintf(t->note, sizeof(t->note),
		 "4 KiB page 3 of an anonymous transparent huge page at %p (MADV_HUGEPAGE, "
		 "2 MiB aligned, written)", (void *)huge);
}

static void setup_hugetlb(struct target *t)
{
	long free_pages = meminfo_value("HugePages_Free");
	unsigned char *p;

	if (free_pages < 1)
		not_here("needs hugepages: HugePages_Free is %ld (sysctl vm.nr_hugepages=1)", free_pages);
	p = mmap(NULL, HUGE_SIZE, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB, -1, 0);
	if (p == MAP_FAILED)
		not_here("needs hugepages: mmap(MAP_HUGETLB) of 2 MiB: %s", strerror(errno));
	for (size_t off = 0; off < HUGE_SIZE; off += PAGE_SIZE)
		fill(p + off, off, SALT_ANON);
	/* The kernel poisons and reports the whole huge page, from its head. */
	t->va = p;
	t->salt = SALT_ANON;
	t->lsb = HUGE_SHIFT;
	snprintf(t->note, sizeof(t->note),
		 "a 2 MiB hugetlb page (MAP_HUGETLB, private, written); the target is its head");
}

static void setup_ksm(struct target *t)
{
	char run[16];

	if (read_file(KSM_RUN, run, sizeof(run)) < 0)
		run[0] = '\0';
	if (run[0] != '1')
		not_here("needs KSM running: %s is %s (sysfs path=%s value=1)", KSM_RUN,
			 run[0] ? strtok(run, "\n") : "missing", KSM_RUN);
	t->va = anon_page(0);
	/* Unique to this group: the pages merge with each other only. */
	t->base = (uint64_t)getpid() << 20;
	t->salt = SALT_KSM;
	fill(t->va, t->base, t->salt);
	if (madvise(t->va, PAGE_SIZE, MADV_MERGEABLE))
		not_here("madvise(MADV_MERGEABLE): %s", strerror(errno));
	snprintf(t->note, sizeof(t->note),
		 "private anonymous pages of identical content in each process, MADV_MERGEABLE, "
		 "merged by KSM into this one page");
}

/*
 * MADV_PAGEOUT adds the page to the swap cache, writes it out and unmaps
 * it; reading it back maps the swap-cache page again. A read fault leaves
 * it there, clean (its copy on swap is current), unlike a write fault,
 * which frees the swap copy.
 */
static void setup_swapcache(struct target *t)
{
	int tries;

	if (!swap_enabled())
		not_here("needs swap: /proc/swaps lists none (the data disk's /dev/vdb)");
	t->va = anon_page(SALT_ANON);
	t->salt = SALT_ANON;
	for (tries = 0; tries < SETTLE_TRIES; tries++) {
		if (madvise(t->va, PAGE_SIZE, MADV_PAGEOUT))
			fail("madvise(MADV_PAGEOUT): %s", strerror(errno));
		if (pagemap_entry(0, t->va) & PM_SWAP)
			break;
		sleep_ms(50);
	}
	if (tries == SETTLE_TRIES)
		not_here("MADV_PAGEOUT did not swap the page out");
	if (!matches(t->va, 0, t->salt))
		fail("the page read back from swap has other contents");
	snprintf(t->note, sizeof(t->note),
		 "private anonymous page, written, swapped out with MADV_PAGEOUT and read back: "
		 "clean, in the swap cache");
}

static void setup_shared(struct target *t)
{
	t->va = map_anon(PAGE_SIZE, MAP_SHARED);
	t->salt = SALT_ANON;
	fill(t->va, 0, t->salt);
	snprintf(t->note, sizeof(t->note),
		 "one MAP_SHARED|MAP_ANONYMOUS page (shmem inside), written by the first process, "
		 "read by the others");
}

/*
 * A freed page goes to the head of this CPU's free list, where the very
 * next allocation would take it. Freeing many more pages after it pushes
 * the oldest ones, ours among them, on to the buddy allocator, where it
 * merges into a larger free block and is less likely to be handed out
 * before the error comes (it still can be).
 */
static void setup_free(struct target *t)
{
	unsigned char *p = anon_page(SALT_ANON);
	unsigned char *more = map_anon(FREE_FLUSH_PAGES * PAGE_SIZE, MAP_PRIVATE);

	for (size_t i = 0; i < FREE_FLUSH_PAGES; i++)
		more[i * PAGE_SIZE] = 1;
	t->pfn = pfn_of(0, p);
	if (munmap(p, PAGE_SIZE) || munmap(more, FREE_FLUSH_PAGES * PAGE_SIZE))
		fail("munmap: %s", strerror(errno));
	snprintf(t->note, sizeof(t->note),
		 "a page this process wrote and unmapped, followed by %d more: free, in the buddy "
		 "allocator (only a free block's first page shows \"buddy\"), unless the kernel "
		 "hands it out again before the error comes", FREE_FLUSH_PAGES);
}

struct pick {
	uint64_t pfn, flags;
};

/* Prefers an order-0 slab page: memory_failure calls a compound one high-order. */
static bool pick_slab(uint64_t pfn, uint64_t flags, void *arg)
{
	struct pick *p = arg;

	bool order0 = !(flags & (KPF(KPF_COMPOUND_HEAD) | KPF(KPF_COMPOUND_TAIL)));

	/* One poisoned before stays slab (the handler ignores it): not again. */
	if (flags & (KPF(KPF_COMPOUND_TAIL) | KPF(KPF_HWPOISON)))
		return false;
	if (!p->pfn || order0)
		*p = (struct pick){ pfn, flags };
	return order0;
}

static void setup_slab(struct target *t)
{
	struct pick p = { 0 };

	scan_kpageflags(KPF(KPF_SLAB), pick_slab, &p);
	if (!p.pfn)
		not_here("no slab page in /proc/kpageflags");
	t->pfn = p.pfn;
	snprintf(t->note, sizeof(t->note),
		 "a slab page (the first order-0 one in /proc/kpageflags not poisoned yet, else a "
		 "compound head): "
		 "kernel memory, not mapped by any process");
}

struct pgtables {
	uint64_t *pfns;
	size_t n, cap;
};

static bool collect(uint64_t pfn, uint64_t flags, void *arg)
{
	struct pgtables *s = arg;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 1024;
		s->pfns = realloc(s->pfns, s->cap * sizeof(*s->pfns));
		if (!s->pfns)
			fail("out of memory");
	}
	s->pfns[s->n++] = pfn;
	return false;
}

static bool contains(const struct pgtables *s, uint64_t pfn)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->pfns[i] == pfn)
			return true;
	return false;
}

/*
 * A page-table page of this very process: touch a page in an empty
 * gigabyte (page tables appear for it), then a page 2 MiB further on,
 * which needs exactly one new PTE page; that page is the difference
 * between two scans of kpageflags for "pgtable".
 */
static void setup_pagetable(struct target *t)
{
	unsigned char *area = mmap((void *)(1ULL << 46), 64 * HUGE_SIZE, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE,
				   -1, 0);

	if (area == MAP_FAILED)
		fail("mmap at 64 TiB: %s", strerror(errno));
	area[0] = 1;
	for (int i = 1; i < 64; i++) {
		struct pgtables before = { 0 }, after = { 0 };
		uint64_t found = 0;
		int nnew = 0;

		scan_kpageflags(KPF(KPF_PGTABLE), collect, &before);
		if (!before.n)
			not_here("/proc/kpageflags shows no page-table page (no KPF_PGTABLE here)");
		area[(size_t)i * HUGE_SIZE] = 1;
		scan_kpageflags(KPF(KPF_PGTABLE), collect, &after);
		for (size_t j = 0; j < after.n; j++)
			if (!contains(&before, after.pfns[j])) {
				found = after.pfns[j];
				nnew++;
			}
		free(before.pfns);
		free(after.pfns);
		if (nnew == 1) {
			t->pfn = found;
			snprintf(t->note, sizeof(t->note),
				 "the PTE page that maps this process's page at %p (the one new "
				 "\"pgtable\" page after touching it): kernel memory",
				 (void *)(area + (size_t)i * HUGE_SIZE));
			return;
		}
	}
	not_here("could not single out a new page-table page (other page tables came and went)");
}

/* ---- checks (SIGUSR2, the leader) ---- */

static void write_report(const char *suffix, const char *text)
{
	char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
	int fd;

	snprintf(path, sizeof(path), "%s%d%s", report_prefix, (int)getpid(), suffix);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "vmce-pages: cannot create %s: %s\n", tmp, strerror(errno));
		return;
	}
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text) || close(fd) || rename(tmp, path))
		fprintf(stderr, "vmce-pages: writing %s: %s\n", path, strerror(errno));
}

/* read(2), not the mapping: after a clean page is dropped it comes from disk again. */
static void check_clean_file(void)
{
	unsigned char page[PAGE_SIZE];
	char text[256];
	ssize_t n = pread(tgt.fd, page, PAGE_SIZE, tgt.file_off);
	int err = n < 0 ? errno : 0;

	snprintf(text, sizeof(text), "{\"pid\":%d,\"read_errno\":%d,\"reread_ok\":%s}\n",
		 (int)getpid(), err,
		 n == (ssize_t)PAGE_SIZE && matches(page, tgt.base, tgt.salt) ? "true" : "false");
	write_report(".check", text);
}

/*
 * The first fsync after a dirty page was lost reports EIO (errseq: once
 * per open file); the second shows it is not reported again. Then the
 * page is read back: what was written, or what the disk still has.
 */
static void check_dirty_file(void)
{
	unsigned char page[PAGE_SIZE];
	char text[256];
	int err1 = fsync(tgt.fd) ? errno : 0;
	int err2 = fsync(tgt.fd) ? errno : 0;
	ssize_t n = pread(tgt.fd, page, PAGE_SIZE, tgt.file_off);
	int read_err = n < 0 ? errno : 0;
	const char *got = "other";

	if (n != (ssize_t)PAGE_SIZE)
		got = "error";
	else if (matches(page, tgt.base, SALT_DIRTY))
		got = "written";
	else if (matches(page, tgt.base, SALT_DISK))
		got = "on-disk";
	snprintf(text, sizeof(text),
		 "{\"pid\":%d,\"fsync_errno\":%d,\"fsync_again_errno\":%d,\"read_errno\":%d,"
		 "\"reread\":\"%s\"}\n", (int)getpid(), err1, err2, read_err, got);
	write_report(".check", text);
}

/*
 * The other 511 pages of the transparent huge page, read: how many still
 * hold what was written. What a host that lost the huge page under it
 * kept of this process's data (vmced's hugepage = salvage keeps all of
 * them, `one` and `all` none); the target page, poisoned, is not read.
 */
static void check_huge_neighbours(void)
{
	const unsigned char *huge = (const unsigned char *)tgt.va - tgt.base;
	unsigned intact = 0, read = 0;
	char text[160];

	for (size_t off = 0; off < HUGE_SIZE; off += PAGE_SIZE) {
		if (off == tgt.base)
			continue;
		read++;
		intact += matches(huge + off, off, SALT_ANON);
	}
	snprintf(text, sizeof(text), "{\"pid\":%d,\"neighbours\":%u,\"intact\":%u}\n",
		 (int)getpid(), read, intact);
	write_report(".check", text);
}

/* ---- the type table ---- */

#define ANON_LRU (KPF(KPF_ANON) | KPF(KPF_LRU) | KPF(KPF_MMAP))
#define FILE_LRU (KPF(KPF_LRU) | KPF(KPF_UPTODATE) | KPF(KPF_MMAP))

static const struct type types[] = {
	{ "anon-dirty", setup_anon_dirty, ANON_LRU | KPF(KPF_SWAPBACKED),
	  KPF(KPF_SWAPCACHE) | KPF(KPF_THP) | KPF(KPF_KSM) | KPF(KPF_MLOCKED),
	  .dirty = true, .procs = 1, .threads = 1 },
	{ "anon-clean", setup_anon_clean, ANON_LRU,
	  KPF(KPF_SWAPBACKED) | KPF(KPF_DIRTY) | KPF(KPF_SWAPCACHE),
	  .procs = 1, .threads = 1 },
	{ "pagecache-clean", setup_pagecache_clean, FILE_LRU | KPF(KPF_MAPPEDTODISK),
	  KPF(KPF_ANON) | KPF(KPF_DIRTY) | KPF(KPF_SWAPBACKED),
	  .fan_out = true, .procs = 1, .threads = 1, .check = check_clean_file },
	{ "pagecache-dirty", setup_pagecache_dirty, FILE_LRU | KPF(KPF_DIRTY),
	  KPF(KPF_ANON) | KPF(KPF_SWAPBACKED),
	  .dirty = true, .fan_out = true, .procs = 1, .threads = 1, .check = check_dirty_file },
	{ "file-hole", setup_file_hole, FILE_LRU,
	  KPF(KPF_ANON) | KPF(KPF_DIRTY) | KPF(KPF_MAPPEDTODISK),
	  .fan_out = true, .procs = 1, .threads = 1, .check = check_clean_file },
	{ "shmem", setup_shmem, KPF(KPF_LRU) | KPF(KPF_MMAP) | KPF(KPF_SWAPBACKED),
	  KPF(KPF_ANON),
	  .dirty = true, .fan_out = true, .procs = 1, .threads = 1 },
	{ "mlock-clean", setup_mlock_clean,
	  KPF(KPF_MLOCKED) | KPF(KPF_UNEVICTABLE) | KPF(KPF_MMAP) | KPF(KPF_MAPPEDTODISK),
	  KPF(KPF_ANON) | KPF(KPF_DIRTY),
	  .procs = 1, .threads = 1, .check = check_clean_file },
	{ "mlock-dirty", setup_mlock_dirty,
	  KPF(KPF_MLOCKED) | KPF(KPF_UNEVICTABLE) | KPF(KPF_ANON) | KPF(KPF_MMAP), 0,
	  .dirty = true, .procs = 1, .threads = 1 },
	{ "thp", setup_thp, KPF(KPF_THP) | KPF(KPF_ANON) | KPF(KPF_COMPOUND_TAIL), KPF(KPF_HUGE),
	  .dirty = true, .procs = 1, .threads = 1, .check = check_huge_neighbours },
	{ "hugetlb", setup_hugetlb, KPF(KPF_HUGE) | KPF(KPF_COMPOUND_HEAD), 0,
	  .dirty = true, .procs = 1, .threads = 1 },
	{ "ksm", setup_ksm, KPF(KPF_KSM) | KPF(KPF_ANON) | KPF(KPF_MMAP), 0,
	  .fan_out = true, .procs = 2, .threads = 1 },
	{ "swapcache", setup_swapcache, ANON_LRU | KPF(KPF_SWAPCACHE) | KPF(KPF_UPTODATE),
	  KPF(KPF_DIRTY) | KPF(KPF_WRITEBACK),
	  .procs = 1, .threads = 1 },
	{ "shared", setup_shared, KPF(KPF_MMAP) | KPF(KPF_SWAPBACKED) | KPF(KPF_LRU), KPF(KPF_ANON),
	  .dirty = true, .fan_out = true, .procs = 3, .threads = 2 },
	{ "free", setup_free, 0,
	  KPF(KPF_MMAP) | KPF(KPF_LRU) | KPF(KPF_ANON) | KPF(KPF_SLAB) | KPF(KPF_PGTABLE),
	  .kernel = true, .procs = 1, .threads = 1, .resetup = 4 },
	{ "slab", setup_slab, KPF(KPF_SLAB), 0, .kernel = true, .procs = 1, .threads = 1 },
	{ "pagetable", setup_pagetable, KPF(KPF_PGTABLE), 0, .kernel = true, .procs = 1, .threads = 1 },
};

static const struct type *find_type(const char *name)
{
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (!strcmp(types[i].name, name))
			return &types[i];
	return NULL;
}

/* ---- signals ---- */


/*
 * Records the signal as DIR/pages-PID-TID.json (whole or not at all). An
 * AO is advice: like an application that handles it, the process carries
 * on (its page is gone; the writer of a dirty file page can still fsync
 * and hear of the loss). Any other SIGBUS cannot be returned from: the
 * faulting access would run again, so the process ends.
 */
static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	static const size_t prefix_len = sizeof("vmce-pages: ") - 1;
	char line[320], path[PATH_MAX + 64], tmp[PATH_MAX + 72];
	struct sbuf b = { line, line + sizeof(line) - 1 };
	struct sbuf p = { path, path + sizeof(path) - 1 };
	struct sbuf q = { tmp, tmp + sizeof(tmp) - 1 };
	pid_t pid = getpid();
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int fd;

	put_str(&b, "vmce-pages: {\"pid\":");
	put_dec(&b, pid);
	put_str(&b, ",\"tid\":");
	put_dec(&b, tid);
	put_str(&b, ",\"code\":");
	put_dec(&b, si->si_code);
	put_str(&b, ",\"code_name\":\"");
	put_str(&b, bus_code_name(si->si_code));
	put_str(&b, "\",\"addr\":\"");
	put_hex(&b, (uintptr_t)si->si_addr);
	put_str(&b, "\",\"lsb\":");
	put_dec(&b, si->si_addr_lsb);
	put_str(&b, ",\"va\":");
	if (tgt.va) {
		put_str(&b, "\"");
		put_hex(&b, (uintptr_t)tgt.va);
		put_str(&b, "\"");
	} else {
		put_str(&b, "null");
	}
	put_str(&b, "}\n");

	put_str(&p, report_prefix);
	put_dec(&p, pid);
	put_str(&p, "-");
	put_dec(&p, tid);
	put_str(&p, ".json");
	*p.p = '\0';
	put_str(&q, path);
	put_str(&q, ".tmp");
	*q.p = '\0';

	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd >= 0) {
		write_all(fd, line + prefix_len, (size_t)(b.p - line) - prefix_len);
		close(fd);
		rename(tmp, path);
	}
	/* One write: the group's processes may all be saying this at once. */
	write_all(STDERR_FILENO, line, (size_t)(b.p - line));
	if (si->si_code == BUS_MCEERR_AO)
		return;
	_exit(0);
}

static void on_request(int sig, siginfo_t *si, void *uc)
{
	if (sig == SIGUSR1) {
		touch_requested = 1;
	} else if (sig == SIGUSR2) {
		check_requested = 1;
	} else {
		poison_va = si->si_code == SI_QUEUE ? si->si_value.sival_ptr : NULL;
		poison_requested = 1;
	}
}

static void request_signals(sigset_t *set)
{
	sigemptyset(set);
	sigaddset(set, SIGUSR1);
	sigaddset(set, SIGUSR2);
	sigaddset(set, SIGRTMIN);
}

/*
 * The request signals stay blocked except in the main thread's
 * sigsuspend(): one sent before the idle loop runs waits instead of being
 * lost, and the other threads never take one.
 */
static void install_handlers(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	sigset_t requests;

	request_signals(&requests);
	sigprocmask(SIG_BLOCK, &requests, NULL);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL))
		fail("sigaction(SIGBUS): %s", strerror(errno));
	sa = (struct sigaction){ .sa_sigaction = on_request, .sa_flags = SA_SIGINFO };
	sa.sa_mask = requests;
	if (sigaction(SIGUSR1, &sa, NULL) || sigaction(SIGUSR2, &sa, NULL) ||
	    sigaction(SIGRTMIN, &sa, NULL))
		fail("sigaction: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
}

/* ---- the processes ---- */

static void touch(void)
{
	char text[128];
	const char *ok = "null";

	if (tgt.va && !type->kernel) {
		/* A dirty page is touched by a store first (of the value it
		 * holds): the page is what the case says it is when the touch
		 * consumes an error. A dirty file page written back since the
		 * set-up (the flusher, woken by reclaim, does so even with
		 * periodic writeback off) is write-protected again: the store
		 * dirties it before it reaches the memory, where a load would
		 * consume the error on a clean page ("clean LRU page", seen
		 * once in a loaded make check). */
		if (type->dirty)
			*(volatile uint64_t *)tgt.va = tgt.salt ? tgt.base | (uint64_t)tgt.salt << 32 : 0;
		ok = matches(tgt.va, tgt.base, tgt.salt) ? "true" : "false";
		if (type->dirty)
			fill(tgt.va, tgt.base, tgt.salt);
	}
	snprintf(text, sizeof(text), "{\"pid\":%d,\"data_ok\":%s}\n", (int)getpid(), ok);
	write_report(".touched", text);
}

/* The leader checks for the group: one report, DIR/pages-LEADER.check. */
static void check(void)
{
	char text[160];

	if (!is_leader)
		return;
	if (type->check) {
		type->check();
		return;
	}
	snprintf(text, sizeof(text), "{\"pid\":%d,\"note\":\"no check for %s\"}\n",
		 (int)getpid(), type->name);
	write_report(".check", text);
}

/* MADV_HWPOISON must come from a process that maps the page. */
static void poison(void)
{
	void *va = poison_va ? poison_va : (void *)tgt.va;
	char text[160];
	int err = 0;

	if (!va)
		err = EINVAL;
	else if (madvise((void *)((uintptr_t)va & ~(PAGE_SIZE - 1)), PAGE_SIZE, MADV_HWPOISON))
		err = errno;
	snprintf(text, sizeof(text), "{\"pid\":%d,\"va\":\"%p\",\"errno\":%d}\n",
		 (int)getpid(), va, err);
	write_report(".inject", text);
}

static void __attribute__((noreturn)) idle(void)
{
	sigset_t waitmask, requests;

	request_signals(&requests);
	sigprocmask(SIG_SETMASK, NULL, &waitmask);
	sigdelset(&waitmask, SIGUSR1);
	sigdelset(&waitmask, SIGUSR2);
	sigdelset(&waitmask, SIGRTMIN);
	for (;;) {
		sigsuspend(&waitmask);
		if (touch_requested) {
			touch_requested = 0;
			touch();
		}
		if (check_requested) {
			check_requested = 0;
			check();
		}
		if (poison_requested) {
			poison_requested = 0;
			poison();
		}
	}
}

static void *thread_idle(void *arg)
{
	for (;;)
		pause();
	return NULL;
}

/* Threads share the SIGBUS handler; a process-directed AO may land on any of them. */
static void start_threads(int n)
{
	for (int i = 1; i < n; i++) {
		pthread_t th;
		int err = pthread_create(&th, NULL, thread_idle, NULL);

		if (err)
			fail("pthread_create: %s", strerror(err));
	}
}

/* Report files of an earlier process with this pid are not ours. */
static void remove_old_reports(const char *dir)
{
	char prefix[64], path[PATH_MAX + 256];
	struct dirent *d;
	DIR *dp = opendir(dir);

	if (!dp)
		return;
	snprintf(prefix, sizeof(prefix), "pages-%d", (int)getpid());
	while ((d = readdir(dp))) {
		size_t len = strlen(prefix);

		if (strncmp(d->d_name, prefix, len) || (d->d_name[len] != '.' && d->d_name[len] != '-'))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, d->d_name);
		unlink(path);
	}
	closedir(dp);
}

static void child_attach(void)
{
	if (!strcmp(type->name, "ksm")) {
		/* Its own copy (copy-on-write), same contents, for KSM to merge. */
		fill(tgt.va, tgt.base, tgt.salt);
		if (madvise(tgt.va, PAGE_SIZE, MADV_MERGEABLE))
			fail("madvise(MADV_MERGEABLE): %s", strerror(errno));
	} else {
		/* fork() copies no page-table entries of shared mappings: fault it in. */
		read_page(tgt.va);
	}
}

static void __attribute__((noreturn)) run_child(int ready_fd, const struct options *o)
{
	is_leader = false;
	remove_old_reports(o->report_dir);
	child_attach();
	start_threads(o->threads);
	free_to_move();
	if (write(ready_fd, "r", 1) != 1)
		_exit(EXIT_FAILED);
	close(ready_fd);
	idle();
}

static void fork_children(const struct options *o, pid_t *pids)
{
	int fds[2];
	long deadline;

	if (pipe2(fds, O_CLOEXEC))
		fail("pipe: %s", strerror(errno));
	fflush(NULL);
	for (int i = 1; i < o->procs; i++) {
		pid_t pid = fork();

		if (pid < 0)
			fail("fork: %s", strerror(errno));
		if (pid == 0) {
			close(fds[0]);
			run_child(fds[1], o);
		}
		children[nchildren++] = pid;
		pids[i] = pid;
	}
	close(fds[1]);
	deadline = now_ms() + READY_TIMEOUT_MS;
	for (int ready = 1; ready < o->procs;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		char c;
		long left = deadline - now_ms();

		if (left <= 0 || poll(&pfd, 1, (int)left) <= 0 || read(fds[0], &c, 1) != 1)
			fail("%d of %d processes did not map the page (see the console)",
			     o->procs - ready, o->procs - 1);
		ready++;
	}
	close(fds[0]);
}

/* Every process must map the one target page; KSM needs time to get there. */
static void wait_same_pfn(const struct options *o, const pid_t *pids)
{
	bool ksm = !strcmp(type->name, "ksm");
	long deadline = now_ms() + (ksm ? KSM_TIMEOUT_MS : 0);

	for (;;) {
		uint64_t pfn = pfn_of(0, tgt.va);
		int same = 1;

		for (int i = 1; i < o->procs; i++)
			same += pfn && pfn_of(pids[i], tgt.va) == pfn;
		if (same == o->procs && (!ksm || (kpageflags(pfn) & KPF(KPF_KSM))))
			return;
		if (now_ms() >= deadline)
			break;
		sleep_ms(50);
	}
	if (ksm)
		not_here("KSM did not merge the %d pages within %d s", o->procs, KSM_TIMEOUT_MS / 1000);
	fail("the %d processes do not map the same page", o->procs);
}

/*
 * Linux 6.12's /proc/kpageflags sets KPF_KSM on every anonymous page (it
 * tests mapping & PAGE_MAPPING_KSM, true for either of the two bits), so
 * there "not KSM" cannot be read from it. A page of our own, never
 * mergeable, tells which kind of kernel this is. (A KSM page is known
 * anyway by all its processes mapping one pfn: see wait_same_pfn().)
 */
static bool ksm_flag_reliable(void)
{
	static int reliable = -1;

	if (reliable < 0) {
		char *page = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint64_t pfn;

		if (page == MAP_FAILED)
			return true;
		page[0] = 1;
		pfn = pfn_of(0, page);
		reliable = !pfn || !(kpageflags(pfn) & KPF(KPF_KSM));
		munmap(page, PAGE_SIZE);
	}
	return reliable;
}

/*
 * Waits for the state the type promises. False when it never came: *flags
 * then holds the last ones seen.
 */
static bool try_settle(uint64_t *flags)
{
	uint64_t forbid = type->forbid;

	if (!ksm_flag_reliable())
		forbid &= ~KPF(KPF_KSM);

	*flags = 0;
	for (int i = 0; i < SETTLE_TRIES; i++) {
		drain_lru();
		if (tgt.va)
			tgt.pfn = pfn_of(0, tgt.va);
		if (!tgt.pfn)
			fail("the target page is not present");
		*flags = kpageflags(tgt.pfn);
		if ((*flags & type->need) == type->need && !(*flags & forbid))
			return true;
		/* A page handed out again stays in use: waiting cannot help. */
		if (type->resetup && (*flags & forbid))
			return false;
		sleep_ms(50);
	}
	return false;
}

/*
 * Sets the page up and waits for its state; the flags are returned. A type
 * whose page the kernel may take back before we look ("free") is set up
 * again with a new page, a few times, before the case is called not here.
 */
static uint64_t settle(void)
{
	uint64_t flags = 0, forbid = type->forbid;
	char have[1024], missing[1024], extra[1024];

	if (!ksm_flag_reliable())
		forbid &= ~KPF(KPF_KSM);
	for (int attempt = 0; attempt <= type->resetup; attempt++) {
		if (attempt) {
			tgt = (struct target){ .lsb = tgt.lsb, .fd = -1 };
			type->setup(&tgt);
		}
		if (try_settle(&flags))
			return flags;
	}
	kpf_describe(flags, false, have, sizeof(have));
	kpf_describe(type->need & ~flags, false, missing, sizeof(missing));
	kpf_describe(flags & forbid, false, extra, sizeof(extra));
	not_here("the page did not reach the %s state%s: kpageflags %s (missing: %s; unwanted: %s)",
		 type->name, type->resetup ? " on any of its tries" : "", have,
		 missing[0] ? missing : "-", extra[0] ? extra : "-");
}

static void print_line(const struct options *o, const pid_t *pids, uint64_t flags)
{
	char names[1024];

	printf("{\"type\":\"%s\",\"pid\":%d,\"pids\":[", type->name, (int)pids[0]);
	for (int i = 0; i < o->procs; i++)
		printf("%s%d", i ? "," : "", (int)pids[i]);
	printf("],\"va\":");
	if (tgt.va && !type->kernel)
		printf("\"%p\"", (void *)tgt.va);
	else
		printf("null");
	kpf_describe(flags, true, names, sizeof(names));
	printf(",\"gpa\":\"0x%llx\",\"pfn\":\"0x%llx\",\"kpageflags\":\"0x%llx\",\"flags\":[%s]",
	       (unsigned long long)(tgt.pfn << PAGE_SHIFT), (unsigned long long)tgt.pfn,
	       (unsigned long long)flags, names);
	printf(",\"lsb\":");
	if (tgt.lsb)
		printf("%d", tgt.lsb);
	else
		printf("null");
	printf(",\"file\":");
	if (tgt.file[0])
		json_fputs(stdout, tgt.file);
	else
		printf("null");
	printf(",\"procs\":%d,\"threads\":%d,\"note\":", o->procs, o->threads);
	json_fputs(stdout, tgt.note);
	printf("}\n");
	if (fflush(stdout))
		fail("writing stdout: %s", strerror(errno));
}

/* ---- options ---- */

static void usage(FILE *f)
{
	fputs("Usage: vmce-pages --type TYPE [--procs N] [--threads N] [--prctl early|late]\n"
	      "                  [--report-dir DIR]\n"
	      "Puts one page in the state TYPE names, prints it as one JSON line, then waits:\n"
	      "SIGUSR1 touches the page, SIGUSR2 checks the file behind it, SIGRTMIN poisons it\n"
	      "with MADV_HWPOISON; a SIGBUS is recorded in DIR/pages-PID-TID.json (default\n"
	      DEFAULT_REPORT_DIR ") and ends the process. Exit 3: the state cannot be had here.\n"
	      "TYPE: ", f);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		fprintf(f, "%s%s", i ? ", " : "", types[i].name);
	fputs("\n(images/README.md describes each.)\n", f);
}

static int parse_count(const char *opt, const char *s, int max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 1 || v > max)
		die(EXIT_USAGE, "%s must be a number from 1 to %d, not '%s'", opt, max, s);
	return (int)v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "type", required_argument, NULL, 't' },
		{ "procs", required_argument, NULL, 'p' },
		{ "threads", required_argument, NULL, 'T' },
		{ "prctl", required_argument, NULL, 'k' },
		{ "report-dir", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .report_dir = DEFAULT_REPORT_DIR, .prctl = -1 };
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 't': o->type = optarg; break;
		case 'p': o->procs = parse_count("--procs", optarg, MAX_PROCS); break;
		case 'T': o->threads = parse_count("--threads", optarg, MAX_THREADS); break;
		case 'r': o->report_dir = optarg; break;
		case 'k':
			if (!strcmp(optarg, "early"))
				o->prctl = PR_MCE_KILL_EARLY;
			else if (!strcmp(optarg, "late"))
				o->prctl = PR_MCE_KILL_LATE;
			else
				die(EXIT_USAGE, "--prctl must be early or late, not '%s'", optarg);
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			die(EXIT_USAGE, "%s needs a value", argv[optind - 1]);
		default:
			die(EXIT_USAGE, "bad option '%s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		die(EXIT_USAGE, "unexpected argument '%s' (see --help)", argv[optind]);
	if (!o->type)
		die(EXIT_USAGE, "--type is needed (see --help)");
	type = find_type(o->type);
	if (!type)
		die(EXIT_USAGE, "unknown type '%s' (see --help)", o->type);
	if (!o->procs)
		o->procs = type->procs;
	if (!o->threads)
		o->threads = type->threads;
	if (o->procs > 1 && !type->fan_out)
		die(EXIT_USAGE, "--procs applies to shared mappings and ksm, not to %s", type->name);
	if (!strcmp(type->name, "ksm") && o->procs < 2)
		die(EXIT_USAGE, "ksm needs --procs 2 or more");
	if (type->kernel && o->threads > 1)
		die(EXIT_USAGE, "--threads does not apply to %s: no process maps it", type->name);
	if (strlen(o->report_dir) > PATH_MAX - 64)
		die(EXIT_USAGE, "--report-dir is too long");
}

int main(int argc, char **argv)
{
	/* stdio's own buffer would be allocated after "free" has freed its page. */
	static char out_buf[8192];
	struct options o;
	pid_t pids[MAX_PROCS];
	uint64_t flags;

	setvbuf(stdout, out_buf, _IOFBF, sizeof(out_buf));
	parse_options(argc, argv, &o);
	if (mkdir(o.report_dir, 0755) && errno != EEXIST)
		fail("cannot create %s: %s", o.report_dir, strerror(errno));
	snprintf(report_prefix, sizeof(report_prefix), "%s/pages-", o.report_dir);
	remove_old_reports(o.report_dir);
	/* Its own process group: the agent signals all its processes at once. */
	setpgid(0, 0);
	stay_on_this_cpu();
	install_handlers();
	if (o.prctl >= 0 && prctl(PR_MCE_KILL, PR_MCE_KILL_SET, o.prctl, 0, 0))
		fail("prctl(PR_MCE_KILL): %s", strerror(errno));
	/* Children that die of SIGBUS are reaped at once. */
	signal(SIGCHLD, SIG_IGN);

	pids[0] = getpid();
	/* Its page now, not later: it would take the page "free" has just freed. */
	drain_lru();
	tgt.lsb = PAGE_SHIFT;
	type->setup(&tgt);
	if (type->kernel)
		tgt.lsb = 0;
	if (o.procs > 1) {
		fork_children(&o, pids);
		wait_same_pfn(&o, pids);
	}
	flags = settle();
	free_to_move();
	start_threads(o.threads);
	print_line(&o, pids, flags);
	idle();
}
