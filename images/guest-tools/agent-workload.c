// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * workload: a fixed-length guest workload that counts what it got done, so
 * that the host can compare the guest's throughput with vmced attached to
 * its QEMU and without (run/bench --overhead). Being QEMU's tracer costs a
 * guest only through the signals QEMU's threads take, so each kind leans on
 * a different path through QEMU:
 *   cpu  a loop that never leaves the guest (what a vCPU does most)
 *   io   4 KiB synchronous writes to the virtio-blk data disk (QEMU's I/O
 *        thread and the vCPU's notifications)
 *   ipi  two processes on two vCPUs waking each other through a futex:
 *        every round trip is a sleep, an IPI and a wake-up on each side
 * It runs in a child of the agent, so that its CPU affinity and its file
 * stay out of the agent.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"

#define WORKLOAD_MAX_MS 60000
#define IO_FILE "/mnt/vmce/workload.bin"
#define IO_PAGES 256 /* a 1 MiB file, written round and round */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t run_cpu(uint64_t end_ns)
{
	static uint64_t table[8192];
	uint64_t x = 0x9e3779b97f4a7c15u, ops = 0;

	while (now_ns() < end_ns) {
		/* enough work between clock reads that the clock is not what is measured */
		for (int i = 0; i < 4096; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			table[x & 8191] += x;
		}
		ops += 4096;
	}
	return ops + (table[x & 8191] & 1); /* the table is used: not optimized away */
}

static int64_t run_io(uint64_t end_ns)
{
	char *page;
	uint64_t ops = 0;
	int fd = open(IO_FILE, O_RDWR | O_CREAT | O_DSYNC | O_CLOEXEC, 0600);

	if (fd < 0 || posix_memalign((void **)&page, 4096, 4096))
		return -errno;
	memset(page, 0x5a, 4096);
	while (now_ns() < end_ns) {
		if (pwrite(fd, page, 4096, (off_t)(ops % IO_PAGES) * 4096) != 4096)
			return -errno;
		ops++;
	}
	close(fd);
	free(page);
	return (int64_t)ops;
}

static long futex(atomic_int *addr, int op, int val)
{
	return syscall(SYS_futex, addr, op, val, NULL, NULL, 0);
}

static int pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sched_setaffinity(0, sizeof(set), &set);
}

/* Waits for *turn == mine, then hands the turn over and wakes the other */
static void ping_pong(atomic_int *turn, int mine, uint64_t end_ns, atomic_int *stop, uint64_t *ops)
{
	while (!atomic_load(stop)) {
		while (atomic_load(turn) != mine && !atomic_load(stop))
			futex(turn, FUTEX_WAIT, !mine);
		if (now_ns() >= end_ns)
			atomic_store(stop, 1);
		atomic_store(turn, !mine);
		futex(turn, FUTEX_WAKE, 1);
		(*ops)++;
	}
	futex(turn, FUTEX_WAKE, 1);
}

static int64_t run_ipi(uint64_t end_ns)
{
	atomic_int *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	uint64_t ops = 0;
	pid_t other;

	if (shared == MAP_FAILED)
		return -errno;
	if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
		return -ENXIO;
	other = fork();
	if (other < 0)
		return -errno;
	if (other == 0) {
		uint64_t theirs = 0;

		pin(1);
		ping_pong(&shared[0], 1, end_ns, &shared[1], &theirs);
		_exit(0);
	}
	if (pin(0))
		return -errno;
	ping_pong(&shared[0], 0, end_ns, &shared[1], &ops);
	waitpid(other, NULL, 0);
	munmap(shared, 4096);
	return (int64_t)ops;
}

static int64_t run_kind(const char *kind, uint64_t end_ns)
{
	if (!strcmp(kind, "cpu"))
		return (int64_t)run_cpu(end_ns);
	if (!strcmp(kind, "io"))
		return run_io(end_ns);
	return run_ipi(end_ns);
}

/* A mount point, not the directory disk-up made before finding no disk:
 * writes there would go to the initramfs, in RAM */
static bool data_disk_mounted(void)
{
	struct stat mnt, dir;

	return !stat("/mnt", &mnt) && !stat("/mnt/vmce", &dir) && mnt.st_dev != dir.st_dev;
}

int cmd_workload(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *kind = arg(rq, "kind");
	uint64_t ms, start;
	int64_t result[2] = { 0 }; /* ops (or -errno), and the ns they took */
	int fds[2], status;
	pid_t child;

	if (!kind || (strcmp(kind, "cpu") && strcmp(kind, "io") && strcmp(kind, "ipi")))
		return fail(err, "InvalidParameter", "kind must be cpu, io or ipi");
	if (required_u64(rq, "ms", &ms, err))
		return -1;
	if (ms == 0 || ms > WORKLOAD_MAX_MS)
		return fail(err, "InvalidParameter", "ms must be 1 to %d", WORKLOAD_MAX_MS);
	if (!strcmp(kind, "io") && !data_disk_mounted())
		return fail(err, "NotFound", "no data disk mounted on /mnt/vmce (disk-up first)");
	if (pipe2(fds, O_CLOEXEC))
		return fail(err, "Failed", "pipe: %s", strerror(errno));
	start = now_ns();
	child = fork();
	if (child < 0)
		return fail(err, "Failed", "fork: %s", strerror(errno));
	if (child == 0) {
		result[0] = run_kind(kind, start + ms * 1000000u);
		result[1] = (int64_t)(now_ns() - start);
		_exit(write(fds[1], result, sizeof(result)) == sizeof(result) ? 0 : 1);
	}
	close(fds[1]);
	if (read(fds[0], result, sizeof(result)) != sizeof(result))
		result[0] = -EIO;
	close(fds[0]);
	waitpid(child, &status, 0);
	if (result[0] == -ENXIO)
		return fail(err, "NotSupported", "the ipi workload needs two online CPUs");
	if (result[0] < 0)
		return fail(err, "Failed", "%s workload: %s", kind, strerror((int)-result[0]));
	buf_printf(out, "{\"kind\":\"%s\",\"ops\":%lld,\"ns\":%lld}", kind, (long long)result[0],
		   (long long)result[1]);
	return 0;
}

/*
 * fill: a process takes @mb MiB of anonymous memory and writes every page,
 * as a guest's next workload takes what memory is free. Each page it gets
 * is zeroed by the guest's kernel first: a page the guest was never told
 * is lost on the host (a neighbour in a lost huge page, hugepage-loss.c on
 * the host) is read there, in kernel context. How far it got and what
 * ended it are the answer; a guest that panics gives none.
 */
#define FILL_MAX_MB (1 << 20)

int cmd_fill(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t mb, done = 0, start = now_ns();
	int fds[2], status;
	pid_t child;

	if (required_u64(rq, "mb", &mb, err))
		return -1;
	if (mb == 0 || mb > FILL_MAX_MB)
		return fail(err, "InvalidParameter", "mb must be 1 to %d", FILL_MAX_MB);
	if (pipe2(fds, O_CLOEXEC))
		return fail(err, "Failed", "pipe: %s", strerror(errno));
	child = fork();
	if (child < 0) {
		close(fds[0]);
		close(fds[1]);
		return fail(err, "Failed", "fork: %s", strerror(errno));
	}
	if (child == 0) {
		/* a MiB at a time, each reported once written: the parent
		 * knows how far a child killed on the way got */
		close(fds[0]);
		for (uint64_t i = 0; i < mb; i++) {
			unsigned char *p = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
						MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
			char one = 1;

			if (p == MAP_FAILED)
				_exit(2);
			for (size_t off = 0; off < (1 << 20); off += 4096)
				p[off] = 0x5a;
			if (write(fds[1], &one, 1) != 1)
				_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	for (char c; read(fds[0], &c, 1) == 1;)
		done++;
	close(fds[0]);
	waitpid(child, &status, 0);
	buf_printf(out, "{\"mb\":%llu,\"mb_done\":%llu,\"ns\":%llu,", (unsigned long long)mb,
		   (unsigned long long)done, (unsigned long long)(now_ns() - start));
	if (WIFSIGNALED(status))
		buf_printf(out, "\"signal\":%d,\"exit\":null}", WTERMSIG(status));
	else
		buf_printf(out, "\"signal\":null,\"exit\":%d}", WEXITSTATUS(status));
	return 0;
}
