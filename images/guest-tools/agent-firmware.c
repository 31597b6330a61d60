// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * firmware: how the guest's firmware can tell it of a memory error. An
 * x86 guest learns of one by a machine check; an Arm64 guest only
 * firmware-first, through ACPI's HEST and its GHES error sources, which
 * reach the kernel only when it booted through UEFI with ACPI. So the host
 * asks: which ACPI tables the kernel has, and which GHES error sources
 * its GHES driver took.
 */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define ACPI_TABLES "/sys/firmware/acpi/tables"
#define GHES_DRIVER "/sys/bus/platform/drivers/GHES"

static int by_name(const void *x, const void *y)
{
	return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The entries of @dir whose names @keep accepts, sorted, as a JSON array
 * of strings; an absent directory is an empty array (no ACPI, no GHES
 * driver bound), anything else an error */
static int list_dir(struct buf *out, const char *dir, bool (*keep)(const char *dir, const char *name),
		    struct error *err)
{
	DIR *d = opendir(dir);
	char **names = NULL;
	size_t n = 0;
	struct dirent *e;

	if (!d) {
		if (errno == ENOENT) {
			buf_puts(out, "[]");
			return 0;
		}
		return fail(err, "GenericError", "%s: %s", dir, strerror(errno));
	}
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.' || !keep(dir, e->d_name))
			continue;
		size_t len = strlen(e->d_name) + 1;

		names = xrealloc(names, (n + 1) * sizeof(*names));
		names[n] = memcpy(xrealloc(NULL, len), e->d_name, len);
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), by_name);
	buf_puts(out, "[");
	for (size_t i = 0; i < n; i++) {
		buf_puts(out, i ? "," : "");
		buf_json_cstr(out, names[i]);
		free(names[i]);
	}
	buf_puts(out, "]");
	free(names);
	return 0;
}

/* a table is a file there; dynamic/ and data/ are directories of others */
static bool is_table(const char *dir, const char *name)
{
	char path[512];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* a device the driver is bound to is a link named for it (GHES.0); bind,
 * unbind, uevent and module are the driver's own files */
static bool is_device(const char *dir, const char *name)
{
	return strncmp(name, "GHES", 4) == 0 || strchr(name, ':') != NULL;
}

int cmd_firmware(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	buf_printf(out, "{\"efi\":%s,\"acpi_tables\":", access("/sys/firmware/efi", F_OK) == 0 ? "true" : "false");
	if (list_dir(out, ACPI_TABLES, is_table, err))
		return -1;
	buf_puts(out, ",\"ghes\":");
	if (list_dir(out, GHES_DRIVER, is_device, err))
		return -1;
	buf_puts(out, "}");
	return 0;
}
