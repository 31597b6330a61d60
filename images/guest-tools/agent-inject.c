// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * inject: memory errors raised from inside the guest (MADV_HWPOISON by a
 * vmce-pages process, hwpoison-inject's corrupt-pfn, mce-inject), to
 * compare with the ones the host forwards through QEMU.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "agent-reports.h"
#include "agent-spawn.h"
#include "agent-write.h"

#define INJECT_TIMEOUT_MS 5000
#define HWPOISON_CORRUPT "/sys/kernel/debug/hwpoison/corrupt-pfn"
#define MCE_INJECT_DIR "/sys/kernel/debug/mce-inject"

static int inject_madvise(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct page_group *g;
	union sigval value = { 0 };
	char path[128], sigbus_prefix[64];
	uint64_t va = 0;
	pid_t pid;

	if (known_group(&a->children, rq, &g, err))
		return -1;
	required_pid(rq, &pid, err);
	if (arg(rq, "va") && required_u64(rq, "va", &va, err))
		return -1;
	value.sival_ptr = (void *)(uintptr_t)va;
	report_path(path, sizeof(path), pid, ".inject");
	unlink(path);
	if (sigqueue(pid, SIGRTMIN, value))
		return fail(err, "Failed", "sigqueue(%d): %s", (int)pid, strerror(errno));
	snprintf(sigbus_prefix, sizeof(sigbus_prefix), "pages-%d-", (int)pid);
	/* madvise answers in a report, unless its own SIGBUS ends the process first. */
	for (int waited = 0; waited < INJECT_TIMEOUT_MS; waited += 10) {
		struct buf rec = { 0 };

		if (add_report(&rec, path)) {
			buf_printf(out, "{\"method\":\"madvise\",\"pid\":%d,\"result\":", (int)pid);
			buf_add(out, rec.p, rec.len);
			buf_puts(out, ",\"killed\":false}");
			free(rec.p);
			return 0;
		}
		free(rec.p);
		if (!process_alive(pid)) {
			buf_printf(out, "{\"method\":\"madvise\",\"pid\":%d,\"result\":null,\"killed\":true,"
				   "\"sigbus\":", (int)pid);
			add_sigbus_records(out, &pid, 1);
			buf_puts(out, "}");
			return 0;
		}
		usleep(10000);
	}
	return fail(err, "Failed", "process %d did not answer the MADV_HWPOISON request within %d s",
		    (int)pid, INJECT_TIMEOUT_MS / 1000);
}

/* The kernel's refusal (e.g. a page poisoned already) is an answer, not a failure. */
static void write_answer(struct buf *out, const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	int e = 0;

	if (fd < 0 || write(fd, value, strlen(value)) < 0)
		e = errno;
	if (fd >= 0)
		close(fd);
	buf_printf(out, "\"errno\":%d,\"error\":", e);
	if (e)
		buf_json_cstr(out, strerror(e));
	else
		buf_puts(out, "null");
}

static int inject_corrupt_pfn(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	uint64_t pfn;
	char value[32];

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (access(HWPOISON_CORRUPT, W_OK))
		return fail(err, "NotFound", HWPOISON_CORRUPT " is missing (module hwpoison_inject, debugfs): %s",
			    strerror(errno));
	snprintf(value, sizeof(value), "0x%llx", (unsigned long long)pfn);
	buf_printf(out, "{\"method\":\"corrupt-pfn\",\"pfn\":\"%s\",\"path\":\"" HWPOISON_CORRUPT "\",",
		   value);
	write_answer(out, HWPOISON_CORRUPT, value);
	buf_puts(out, "}");
	return 0;
}

/*
 * mce-inject's "hw" mode writes the bank's MSRs (QEMU's TCG takes them) and
 * raises #MC with "int $18": the guest's own machine-check handler grades
 * and handles it as it would QEMU's injection. "sw" only logs the record,
 * which memory_failure() never sees. The injection runs in kernel context,
 * so an SRAR (kind=ar) is "data load in kernel context": a panic.
 */
static int inject_mce(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *kind = arg(rq, "kind") ? arg(rq, "kind") : "ao";
	const char *mode = arg(rq, "flags") ? arg(rq, "flags") : "hw";
	const char *status = !strcmp(kind, "ar") ? "0xbd80000000000134" : "0xbd000000000000c0";
	uint64_t pfn, bank = 9;
	char value[32];
	static const char *const files[] = { "flags", "status", "misc", "addr" };
	const char *values[4];

	if (required_u64(rq, "pfn", &pfn, err))
		return -1;
	if (strcmp(kind, "ao") && strcmp(kind, "ar"))
		return fail(err, "InvalidParameter", "kind must be ao or ar, not '%s'", kind);
	if (strcmp(mode, "hw") && strcmp(mode, "sw"))
		return fail(err, "InvalidParameter", "flags must be hw or sw, not '%s'", mode);
	if (arg(rq, "bank") && required_u64(rq, "bank", &bank, err))
		return -1;
	if (bank > 31)
		return fail(err, "InvalidParameter", "bank=%s is not a bank", arg(rq, "bank"));
	if (access(MCE_INJECT_DIR "/bank", W_OK))
		return fail(err, "NotFound", MCE_INJECT_DIR "/bank is missing (module mce-inject, debugfs): %s",
			    strerror(errno));
	snprintf(value, sizeof(value), "0x%llx", (unsigned long long)(pfn << 12));
	/* flags_write() drops the last byte it is given, meant to be a newline. */
	values[0] = !strcmp(mode, "hw") ? "hw\n" : "sw\n";
	values[1] = status;
	values[2] = "0x8c";
	values[3] = value;
	for (size_t i = 0; i < 4; i++) {
		char path[128];

		snprintf(path, sizeof(path), MCE_INJECT_DIR "/%s", files[i]);
		if (write_string(path, values[i], err))
			return -1;
	}
	buf_printf(out, "{\"method\":\"mce-inject\",\"pfn\":\"0x%llx\",\"kind\":\"%s\",\"flags\":\"%s\","
		   "\"bank\":%llu,\"status\":\"%s\",\"misc\":\"0x8c\",\"addr\":\"%s\",",
		   (unsigned long long)pfn, kind, mode, (unsigned long long)bank, status, value);
	/* Writing the bank number is what injects. */
	snprintf(value, sizeof(value), "%llu", (unsigned long long)bank);
	write_answer(out, MCE_INJECT_DIR "/bank", value);
	buf_puts(out, "}");
	return 0;
}

int cmd_inject(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *method = arg(rq, "method");

	if (!method)
		return fail(err, "InvalidParameter", "inject needs the parameter method");
	if (!strcmp(method, "madvise"))
		return inject_madvise(a, rq, out, err);
	if (!strcmp(method, "corrupt-pfn"))
		return inject_corrupt_pfn(a, rq, out, err);
	if (!strcmp(method, "mce-inject"))
		return inject_mce(a, rq, out, err);
	return fail(err, "InvalidParameter", "method must be madvise, corrupt-pfn or mce-inject, not '%s'",
		    method);
}
