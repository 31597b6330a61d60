/*
 * The host page behind an address of QEMU's: its page frame number, read
 * from /proc/PID/pagemap.
 *
 * Copyright (C) 2026 The vmce authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#pragma once

#include <glib.h>
#include <sys/types.h>

typedef enum {
  VMCE_HOST_PFN_UNKNOWN,  /* not looked up: no host error behind the record */
  VMCE_HOST_PFN_NONE,     /* looked up, no pfn: @why says why */
  VMCE_HOST_PFN_PRESENT,  /* the page is still mapped (a simulated error, or one the kernel left mapped) */
  VMCE_HOST_PFN_HWPOISON, /* the kernel's hwpoison entry that replaced the page */
} VmceHostPfnFrom;

typedef struct {
  VmceHostPfnFrom from;
  guint64 pfn;     /* from PRESENT or HWPOISON */
  const gchar *why; /* from NONE: a static string */
} VmceHostPfn;

/* What one pagemap @entry says of the page, for a memory error the kernel
 * sent (@kernel_error: a swap entry there is its hwpoison entry) or vmced
 * simulated (a swap entry is the page swapped out) */
void vmce_host_pfn_decode (guint64 entry, gboolean kernel_error, VmceHostPfn *out);

/* "hwpoison-entry", "present", or NULL */
const gchar *vmce_host_pfn_from_to_string (VmceHostPfnFrom from);

/* /proc/@pid/pagemap, opened for vmce_host_pfn_read() */
int vmce_host_pfn_open (pid_t pid, GError **error);

/* The pagemap entry of the page at @hva: one pread of 8 bytes */
gboolean vmce_host_pfn_read (int pagemap_fd, guint64 hva, guint64 *entry, GError **error);
