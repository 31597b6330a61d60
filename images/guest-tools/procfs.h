/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The kernel files the guest tools read (/proc/PID/pagemap,
 * /proc/kpageflags, /proc/meminfo, small sysfs and procfs files), and the
 * one syntax for a number the host sends: the agent checks an argument
 * with the parse_u64 that vmce-victim then reads it with, so that what
 * the agent lets through the tool takes. Shared by vmce-agent, vmce-pages
 * and vmce-victim.
 */
#ifndef VMCE_PROCFS_H
#define VMCE_PROCFS_H

#include <stdint.h>
#include <sys/types.h>

/* A /proc/PID/pagemap entry (Documentation/admin-guide/mm/pagemap.rst). */
#define PM_PRESENT (1ULL << 63)
#define PM_SWAP (1ULL << 62)
#define PM_PFN_MASK ((1ULL << 55) - 1)

/* Reads a small file whole; returns its length or -1 with errno set. */
ssize_t read_file(const char *path, char *out, size_t size);

/* How read_u64_at went; on RU64_OPEN and RU64_READ errno says why. */
enum read_u64_result { RU64_OK, RU64_OPEN, RU64_READ, RU64_PAST_END };

/* The INDEXth 64-bit word of a file such as pagemap or kpageflags. */
enum read_u64_result read_u64_at(const char *path, uint64_t index, uint64_t *v);

/* The number after "KEY:" in /proc/meminfo's TEXT, or -1 without that line. */
long long meminfo_field(const char *text, const char *key);

/* A whole unsigned number, decimal or 0x hex, that starts with a digit: 0 or -1. */
int parse_u64(const char *s, uint64_t *v);

#endif
