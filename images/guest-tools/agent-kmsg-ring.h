/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * The guest's kernel log, kept by the agent from its start: /dev/kmsg
 * forgets what the kernel overwrites, so the agent keeps the last
 * KMSG_CAP records itself, read in whenever the host asks for them.
 */
#ifndef VMCE_AGENT_KMSG_RING_H
#define VMCE_AGENT_KMSG_RING_H

#include <stddef.h>
#include <stdint.h>

struct kmsg_record {
	uint64_t seq, usec;
	int level;
	char *text;
};

struct kmsg_ring {
	int fd; /* /dev/kmsg; -1 when it could not be opened */
	struct kmsg_record *records; /* ring of KMSG_CAP */
	size_t first, count;
};

/* The ring and /dev/kmsg, before any request: -1 when out of memory. */
int kmsg_start(struct kmsg_ring *k);
/* Reads in every record the kernel logged since the last call. */
void kmsg_read_all(struct kmsg_ring *k);
/* The Ith of the k->count records kept, the oldest first. */
const struct kmsg_record *kmsg_at(const struct kmsg_ring *k, size_t i);

#endif
