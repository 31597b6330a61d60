/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The part of the kernel's tools/testing/selftests/kselftest.h API that
 * the series' selftests use, for building them into vmce's guest tools
 * without a kernel tree: the same calls, the same TAP 13 output and exit
 * codes. Written for vmce, not copied; the series check
 * (tests/unit/test_series.py) also builds each selftest against the real
 * header of its base, so a call this file lacks is caught there too.
 */
#ifndef VMCE_KSELFTEST_H
#define VMCE_KSELFTEST_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KSFT_PASS 0
#define KSFT_FAIL 1
#define KSFT_SKIP 4

#ifndef ARRAY_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#endif

struct ksft_counts {
	unsigned int pass, fail, skip, planned;
};

static struct ksft_counts ksft_counts;

static inline unsigned int ksft_test_num(void)
{
	return ksft_counts.pass + ksft_counts.fail + ksft_counts.skip + 1;
}

static inline void ksft_print_header(void)
{
	printf("TAP version 13\n");
}

static inline void ksft_set_plan(unsigned int plan)
{
	ksft_counts.planned = plan;
	printf("1..%u\n", plan);
}

static inline void ksft_vprint(const char *prefix, const char *fmt, va_list ap)
{
	fputs(prefix, stdout);
	vprintf(fmt, ap);
	fflush(stdout);
}

__attribute__((format(printf, 1, 2)))
static inline void ksft_print_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ksft_vprint("# ", fmt, ap);
	va_end(ap);
}

/* "ok N " or "not ok N " and the message, which brings its own newline */
__attribute__((format(printf, 2, 3)))
static inline void ksft_result(int ok, const char *fmt, ...)
{
	unsigned int n = ksft_test_num();
	va_list ap;

	if (ok)
		ksft_counts.pass++;
	else
		ksft_counts.fail++;
	printf("%sok %u ", ok ? "" : "not ", n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

#define ksft_test_result(condition, fmt, ...) ksft_result(!!(condition), fmt, ##__VA_ARGS__)
#define ksft_test_result_pass(fmt, ...) ksft_result(1, fmt, ##__VA_ARGS__)
#define ksft_test_result_fail(fmt, ...) ksft_result(0, fmt, ##__VA_ARGS__)

__attribute__((format(printf, 1, 2)))
static inline void ksft_test_result_skip(const char *fmt, ...)
{
	unsigned int n = ksft_test_num();
	va_list ap;

	ksft_counts.skip++;
	printf("ok %u # SKIP ", n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	fflush(stdout);
}

static inline void ksft_print_cnts(void)
{
	printf("# Totals: pass:%u fail:%u xfail:0 xpass:0 skip:%u error:0\n",
	       ksft_counts.pass, ksft_counts.fail, ksft_counts.skip);
	fflush(stdout);
}

static inline __attribute__((noreturn)) void ksft_exit(int code)
{
	ksft_print_cnts();
	exit(code);
}

__attribute__((noreturn, format(printf, 1, 2)))
static inline void ksft_exit_fail_msg(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	ksft_vprint("Bail out! ", fmt, ap);
	va_end(ap);
	ksft_exit(KSFT_FAIL);
}

__attribute__((noreturn))
static inline void ksft_exit_fail_perror(const char *what)
{
	ksft_exit_fail_msg("%s: %s\n", what, strerror(errno));
}

__attribute__((noreturn, format(printf, 1, 2)))
static inline void ksft_exit_skip(const char *fmt, ...)
{
	va_list ap;

	/* a whole skip before any test: the plan says 0 were run */
	if (ksft_test_num() == 1)
		printf("1..0 # SKIP ");
	else
		printf("# SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	ksft_exit(KSFT_SKIP);
}

/* every planned test reported, and none failed */
#define ksft_finished() \
	ksft_exit(ksft_counts.fail == 0 && ksft_test_num() - 1 == ksft_counts.planned ? \
		  KSFT_PASS : KSFT_FAIL)

#endif
