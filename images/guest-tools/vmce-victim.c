// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * vmce-victim: a guest process owning one dirty anonymous page for the host
 * to poison. It prints where the page is, then reports the SIGBUS that the
 * guest's memory-failure handling sends it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/mempolicy.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procfs.h"
#include "sigsafe.h"

#define PAGE_SIZE 4096UL
#define PAGE_SHIFT 12
#define CACHE_LINE 64
#define MAX_PAGES (1UL << 20)
#define MAX_NODE 1023

enum mode { MODE_IDLE, MODE_READ };

struct options {
	enum mode mode;
	long node; /* -1: no binding */
	uint64_t min_gpa;
	uint64_t pages; /* beyond the first: a run of more dirty pages after it */
	const char *report;
};

/* Read by the signal handlers, so set once before they are installed. */
static volatile unsigned char *victim_page;
static char report_path[4096];
static char report_tmp[4096 + 8];
static volatile sig_atomic_t touch_requested;

static void usage(FILE *f)
{
	fputs("Usage: vmce-victim [--mode idle|read] [--node N] [--min-gpa ADDR] [--pages N]\n"
	      "                   [--report FILE]\n"
	      "Owns one dirty anonymous page, prints {\"pid\",\"va\",\"gpa\",\"pfn\",\"mode\"} as one\n"
	      "JSON line, and reports a SIGBUS as one JSON line (and to FILE) before exiting 0.\n"
	      "  idle: wait; SIGUSR1 reads the page once and prints {\"touched\":true}\n"
	      "  read: read the page in a tight loop forever\n"
	      "  --pages N: also owns N dirty pages that it never touches again, a run\n"
	      "    at \"more_va\" (a storm's user pages: the guest may lose them)\n",
	      f);
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("vmce-victim: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* The agent checked the number with the same parse_u64. */
static uint64_t number(const char *opt, const char *s)
{
	uint64_t v;

	if (parse_u64(s, &v))
		fail("%s: '%s' is not a number", opt, s);
	return v;
}

static void parse_options(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "mode", required_argument, NULL, 'm' },
		{ "node", required_argument, NULL, 'n' },
		{ "min-gpa", required_argument, NULL, 'g' },
		{ "pages", required_argument, NULL, 'P' },
		{ "report", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c;

	*o = (struct options){ .mode = MODE_IDLE, .node = -1 };
	opterr = 0;
	/* The leading ':' makes a missing value ':' rather than '?'. */
	while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (!strcmp(optarg, "idle"))
				o->mode = MODE_IDLE;
			else if (!strcmp(optarg, "read"))
				o->mode = MODE_READ;
			else
				fail("--mode must be idle or read, not '%s'", optarg);
			break;
		case 'n': {
			uint64_t n = number("--node", optarg);

			if (n > MAX_NODE)
				fail("--node %s is above %d", optarg, MAX_NODE);
			o->node = (long)n;
			break;
		}
		case 'g':
			o->min_gpa = number("--min-gpa", optarg);
			break;
		case 'P':
			o->pages = number("--pages", optarg);
			if (o->pages > MAX_PAGES)
				fail("--pages %s is above %lu", optarg, MAX_PAGES);
			break;
		case 'r':
			o->report = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case ':':
			fail("%s needs a value", argv[optind - 1]);
		default:
			fail("bad option '%s' (see --help)", argv[optind - 1]);
		}
	}
	if (optind < argc)
		fail("unexpected argument '%s' (see --help)", argv[optind]);
}

static void bind_to_node(long node)
{
	unsigned long mask[(MAX_NODE + 1) / (8 * sizeof(unsigned long))] = { 0 };

	mask[node / (8 * sizeof(unsigned long))] = 1UL << (node % (8 * sizeof(unsigned long)));
	/* The kernel ignores the last bit of maxnode, hence the +2. */
	if (syscall(SYS_set_mempolicy, MPOL_BIND, mask, (unsigned long)node + 2))
		fail("set_mempolicy(MPOL_BIND, node %ld): %s", node, strerror(errno));
}

/* Returns the page's guest physical address; 0 if it is not present. */
static uint64_t gpa_of(int pagemap, const volatile void *va)
{
	uint64_t entry;
	off_t off = (off_t)((uintptr_t)va >> PAGE_SHIFT) * 8;

	if (pread(pagemap, &entry, sizeof(entry), off) != sizeof(entry))
		fail("reading /proc/self/pagemap: %s", strerror(errno));
	if (!(entry & PM_PRESENT))
		return 0;
	return (entry & PM_PFN_MASK) << PAGE_SHIFT;
}

/* A fresh dirty page, never merged into a huge page. */
static unsigned char *dirty_page(void)
{
	unsigned char *p = mmap(NULL, PAGE_SIZE, PROT_READ | PROT_WRITE,
				MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		fail("mmap: %s", strerror(errno));
	if (madvise(p, PAGE_SIZE, MADV_NOHUGEPAGE))
		fail("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	for (size_t i = 0; i < PAGE_SIZE; i++)
		p[i] = (unsigned char)(0xa5 ^ i);
	return p;
}

/*
 * A run of dirty pages, each its own 4 KiB page (no THP: a lost page must
 * cost the guest one page), populated now so each has a frame to lose.
 */
static void *more_pages(uint64_t n)
{
	unsigned char *p;

	if (!n)
		return NULL;
	p = mmap(NULL, n * PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		fail("mmap of %llu pages: %s", (unsigned long long)n, strerror(errno));
	if (madvise(p, n * PAGE_SIZE, MADV_NOHUGEPAGE))
		fail("madvise(MADV_NOHUGEPAGE): %s", strerror(errno));
	for (uint64_t i = 0; i < n; i++)
		memset(p + i * PAGE_SIZE, (int)(0x5a ^ i), PAGE_SIZE);
	return p;
}

/* Pages below min_gpa stay mapped so the kernel cannot hand them out again. */
static unsigned char *find_page(uint64_t min_gpa, uint64_t *gpa)
{
	int pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);

	if (pagemap < 0)
		fail("opening /proc/self/pagemap: %s", strerror(errno));
	for (unsigned long n = 0; n < MAX_PAGES; n++) {
		unsigned char *p = dirty_page();

		*gpa = gpa_of(pagemap, p);
		if (!*gpa)
			fail("page at %p has no PFN in /proc/self/pagemap (not root?)", (void *)p);
		if (*gpa >= min_gpa) {
			close(pagemap);
			return p;
		}
	}
	fail("no page at or above GPA 0x%llx after %lu pages",
	     (unsigned long long)min_gpa, MAX_PAGES);
}


static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	char line[256];
	struct sbuf b = { line, line + sizeof(line) - 1 };

	put_str(&b, "{\"signal\":\"SIGBUS\",\"code\":");
	put_dec(&b, si->si_code);
	put_str(&b, ",\"code_name\":\"");
	put_str(&b, bus_code_name(si->si_code));
	put_str(&b, "\",\"addr\":\"");
	put_hex(&b, (uintptr_t)si->si_addr);
	put_str(&b, "\",\"lsb\":");
	put_dec(&b, si->si_addr_lsb);
	put_str(&b, ",\"va\":\"");
	put_hex(&b, (uintptr_t)victim_page);
	put_str(&b, "\"}\n");

	write_all(STDOUT_FILENO, line, (size_t)(b.p - line));
	if (report_path[0]) {
		/* Readers see no report or a whole one, never a partial line. */
		int fd = open(report_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd >= 0) {
			write_all(fd, line, (size_t)(b.p - line));
			fsync(fd);
			close(fd);
			rename(report_tmp, report_path);
		}
	}
	_exit(0);
}

static void on_sigusr1(int sig)
{
	touch_requested = 1;
}

/*
 * SIGUSR1 stays blocked except inside sigsuspend(): a touch requested right
 * after the first line is printed, before the idle loop runs, stays pending
 * instead of being lost.
 */
static void install_handlers(void)
{
	struct sigaction sa = { .sa_sigaction = on_sigbus, .sa_flags = SA_SIGINFO };
	sigset_t usr1;

	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGBUS, &sa, NULL))
		fail("sigaction(SIGBUS): %s", strerror(errno));
	sa = (struct sigaction){ .sa_handler = on_sigusr1 };
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGUSR1, &sa, NULL))
		fail("sigaction(SIGUSR1): %s", strerror(errno));
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	sigprocmask(SIG_BLOCK, &usr1, NULL);
}

static void read_page_once(void)
{
	for (size_t i = 0; i < PAGE_SIZE; i += CACHE_LINE)
		(void)victim_page[i];
}

static void __attribute__((noreturn)) idle_loop(void)
{
	sigset_t waitmask;

	sigprocmask(SIG_SETMASK, NULL, &waitmask);
	sigdelset(&waitmask, SIGUSR1);
	for (;;) {
		sigsuspend(&waitmask);
		if (touch_requested) {
			touch_requested = 0;
			read_page_once();
			printf("{\"touched\":true}\n");
			fflush(stdout);
		}
	}
}

static void __attribute__((noreturn)) read_loop(void)
{
	for (;;)
		read_page_once();
}

int main(int argc, char **argv)
{
	struct options o;
	uint64_t gpa;
	void *more;

	parse_options(argc, argv, &o);
	if (o.report) {
		if (strlen(o.report) >= sizeof(report_path))
			fail("--report path is too long");
		strcpy(report_path, o.report);
		snprintf(report_tmp, sizeof(report_tmp), "%s.tmp", o.report);
	}
	if (o.node >= 0)
		bind_to_node(o.node);
	victim_page = find_page(o.min_gpa, &gpa);
	more = more_pages(o.pages);
	install_handlers();

	printf("{\"pid\":%d,\"va\":\"0x%lx\",\"gpa\":\"0x%llx\",\"pfn\":\"0x%llx\",\"mode\":\"%s\"",
	       (int)getpid(), (unsigned long)(uintptr_t)victim_page, (unsigned long long)gpa,
	       (unsigned long long)(gpa >> PAGE_SHIFT), o.mode == MODE_IDLE ? "idle" : "read");
	if (more)
		printf(",\"more_va\":\"0x%lx\",\"pages\":%llu", (unsigned long)(uintptr_t)more,
		       (unsigned long long)o.pages);
	printf("}\n");
	if (fflush(stdout))
		fail("writing stdout: %s", strerror(errno));

	if (o.mode == MODE_IDLE)
		idle_loop();
	read_loop();
}
