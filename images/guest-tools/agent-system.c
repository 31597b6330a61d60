// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * ping, reboot, sysctl, sysfs, disk-up, modprobe: the guest system around
 * the experiments, set up and read back the way a test needs it. Writes
 * are limited to the sysctl and sysfs trees that memory-failure handling
 * reads.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/swap.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "procfs.h"

#define MODULE_DEPTH_MAX 16

/* This boot's id (/proc/sys/kernel/random/boot_id), 36 characters */
static int boot_id(char out[40], struct error *err)
{
	ssize_t n = read_file("/proc/sys/kernel/random/boot_id", out, 40);

	if (n < 36)
		return fail(err, "GenericError", "/proc/sys/kernel/random/boot_id: %s",
			    n < 0 ? strerror(errno) : "too short");
	out[36] = '\0';
	return 0;
}

/* The guest reboots itself, as `reboot -f` would: the kernel resets the
 * machine (through the reset port), which QEMU turns into a system reset.
 * A child does it a moment later, so that this answer gets out first.
 * boot=ID: only if this is that boot. QEMU holds what the host writes
 * while the guest's port is closed and hands it to the next boot's agent,
 * so a request made just as the guest reset by itself would otherwise
 * reboot the new boot too, unasked. */
int cmd_reboot(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *want = arg(rq, "boot");
	char id[40];
	pid_t pid;

	if (want != NULL) {
		if (boot_id(id, err))
			return -1;
		if (strcmp(id, want))
			return fail(err, "BootChanged",
				    "this is boot %s, not %s: the guest restarted since", id, want);
	}
	sync();
	pid = fork();
	if (pid < 0)
		return fail(err, "GenericError", "fork: %s", strerror(errno));
	if (pid == 0) {
		usleep(200 * 1000);
		reboot(RB_AUTOBOOT);
		_exit(1);
	}
	buf_puts(out, "{}");
	return 0;
}

int cmd_ping(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	struct timespec ts;
	struct utsname u;
	char id[40];

	clock_gettime(CLOCK_BOOTTIME, &ts);
	uname(&u);
	if (boot_id(id, err))
		return -1;
	buf_printf(out, "{\"uptime_ms\":%lld,\"boot_id\":\"%s\",\"release\":",
		   (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, id);
	buf_json_cstr(out, u.release);
	/* Echoed: a host on a new connection reads up to its own ping's answer,
	 * past those of requests a connection before it sent (a guest that
	 * reset, say, whose next boot's agent reads what the port still held). */
	if (arg(rq, "token")) {
		buf_puts(out, ",\"token\":");
		buf_json_cstr(out, arg(rq, "token"));
	}
	buf_puts(out, "}");
	return 0;
}

static bool sysctl_name_ok(const char *name)
{
	if (strncmp(name, "vm.", 3) && strncmp(name, "kernel.", 7) && strncmp(name, "net.", 4))
		return false;
	if (strstr(name, "..") || name[strlen(name) - 1] == '.')
		return false;
	for (const char *p = name; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("._-", *p))
			return false;
	return true;
}

/* images/mkdisk's data: the little-endian word at byte offset O is O | "vmce" << 32 */
#define DATA_SALT 0x766d6365ULL
#define DATA_BYTES (1 << 20)
#define DATA_PAGE 4096

static int write_pattern(int fd, off_t from, size_t bytes)
{
	uint64_t words[DATA_PAGE / 8];

	for (size_t done = 0; done < bytes; done += sizeof(words)) {
		for (size_t i = 0; i < DATA_PAGE / 8; i++)
			words[i] = (uint64_t)(from + done + 8 * i) | DATA_SALT << 32;
		if (pwrite(fd, words, sizeof(words), from + (off_t)done) != (ssize_t)sizeof(words))
			return -1;
	}
	return 0;
}

/* DIR/NAME as mkdisk makes it, unless it is there already; its pages then
 * leave the page cache, so that a case's first read brings in a clean page. */
static int data_file(const char *dir, const char *name, bool sparse, struct error *err)
{
	char path[512];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(err, "Failed", "cannot create %s: %s", path, strerror(errno));
	if (fstat(fd, &st) == 0 && st.st_size != DATA_BYTES) {
		int rc = ftruncate(fd, 0) || ftruncate(fd, DATA_BYTES) ||
			 (sparse ? write_pattern(fd, 0, DATA_PAGE) ||
					   write_pattern(fd, DATA_BYTES - DATA_PAGE, DATA_PAGE)
				 : write_pattern(fd, 0, DATA_BYTES)) ||
			 fsync(fd);

		if (rc) {
			int saved = errno;

			close(fd);
			return fail(err, "Failed", "writing %s: %s", path, strerror(saved));
		}
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

static bool is_mount_point(const char *path)
{
	struct stat up, here;
	char parent[256];

	snprintf(parent, sizeof(parent), "%s/..", path);
	return !stat(path, &here) && !stat(parent, &up) && here.st_dev != up.st_dev;
}

/*
 * disk-up dir=DIR: a guest vmce did not build (an operator's image) has no
 * data disk of vmce's, and its own disk is not ours to mount. The
 * page-cache cases need the data disk's files on a real file system: made
 * once in DIR, on the guest's own file system, and DIR bound on /mnt/vmce,
 * where vmce-pages looks for them.
 */
static int data_dir_up(const char *dir, struct buf *out, struct error *err)
{
	if (dir[0] != '/' || strstr(dir, ".."))
		return fail(err, "InvalidParameter", "dir=%s is not an absolute path", dir);
	if (mkdir(dir, 0755) && errno != EEXIST)
		return fail(err, "Failed", "cannot make %s: %s", dir, strerror(errno));
	if (data_file(dir, "data.bin", false, err) || data_file(dir, "sparse.bin", true, err))
		return -1;
	mkdir("/mnt", 0755);
	mkdir("/mnt/vmce", 0755);
	if (!is_mount_point("/mnt/vmce") && mount(dir, "/mnt/vmce", NULL, MS_BIND, NULL))
		return fail(err, "Failed", "bind %s on /mnt/vmce: %s", dir, strerror(errno));
	buf_printf(out, "{\"mounted\":\"/mnt/vmce\",\"dir\":");
	buf_json_cstr(out, dir);
	buf_puts(out, ",\"swap\":false}");
	return 0;
}

/*
 * The data disk, when /init left it alone (vmce.disk=later): a guest saved
 * as a template and restored many times must not have written to a disk
 * each restored copy gets fresh, so the restored copy mounts it itself.
 */
int cmd_disk_up(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	bool mounted, swap;

	if (arg(rq, "dir"))
		return data_dir_up(arg(rq, "dir"), out, err);
	if (access("/sys/block/vda", F_OK))
		return fail(err, "NotFound", "no data disk (/dev/vda)");
	mkdir("/mnt/vmce", 0755);
	mounted = mount("/dev/vda", "/mnt/vmce", "ext4", 0, NULL) == 0 || errno == EBUSY;
	if (!mounted)
		return fail(err, "Failed", "mount /dev/vda (ext4) on /mnt/vmce: %s", strerror(errno));
	swap = !access("/sys/block/vdb", F_OK) && (swapon("/dev/vdb", 0) == 0 || errno == EBUSY);
	buf_printf(out, "{\"mounted\":\"/mnt/vmce\",\"swap\":%s}", swap ? "true" : "false");
	return 0;
}

/* Writes V to the file (unless only reading), then reads it back. */
static int write_then_read(const char *path, const char *value, struct buf *out, struct error *err)
{
	char got[4096];
	ssize_t n;

	if (value) {
		int fd = open(path, O_WRONLY | O_CLOEXEC);

		if (fd < 0)
			return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot open %s: %s",
				    path, strerror(errno));
		n = write(fd, value, strlen(value));
		int saved = errno;

		close(fd);
		if (n < 0)
			return fail(err, "Failed", "writing %s to %s: %s", value, path, strerror(saved));
	}
	n = read_file(path, got, sizeof(got));
	if (n < 0)
		return fail(err, errno == ENOENT ? "NotFound" : "Failed", "cannot read %s: %s", path,
			    strerror(errno));
	while (n > 0 && got[n - 1] == '\n')
		got[--n] = '\0';
	buf_json_str(out, got, (size_t)n);
	return 0;
}

int cmd_sysctl(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *name = arg(rq, "name");
	char path[256];

	if (!name)
		return fail(err, "InvalidParameter", "sysctl needs the parameter name");
	if (strlen(name) > 200 || !sysctl_name_ok(name))
		return fail(err, "InvalidParameter", "name=%s is not a sysctl under vm., kernel. or net.", name);
	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	for (char *p = path + strlen("/proc/sys/"); *p; p++)
		if (*p == '.')
			*p = '/';
	buf_puts(out, "{\"name\":");
	buf_json_cstr(out, name);
	buf_puts(out, ",\"value\":");
	if (write_then_read(path, arg(rq, "value"), out, err))
		return -1;
	buf_puts(out, "}");
	return 0;
}

static bool sysfs_path_ok(const char *path)
{
	static const char *const roots[] = { "/sys/kernel/mm/", "/sys/devices/system/machinecheck/" };
	bool under = false;

	for (size_t i = 0; i < sizeof(roots) / sizeof(roots[0]); i++)
		under |= !strncmp(path, roots[i], strlen(roots[i])) && path[strlen(roots[i])];
	if (!under || strstr(path, "/.") || strstr(path, "//"))
		return false;
	for (const char *p = path; *p; p++)
		if (!isalnum((unsigned char)*p) && !strchr("/._-:", *p))
			return false;
	return true;
}

int cmd_sysfs(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *path = arg(rq, "path");

	if (!path)
		return fail(err, "InvalidParameter", "sysfs needs the parameter path");
	if (strlen(path) > 200 || !sysfs_path_ok(path))
		return fail(err, "InvalidParameter",
			    "path=%s is not a file under /sys/kernel/mm/ or /sys/devices/system/machinecheck/",
			    path);
	buf_puts(out, "{\"path\":");
	buf_json_cstr(out, path);
	buf_puts(out, ",\"value\":");
	if (write_then_read(path, arg(rq, "value"), out, err))
		return -1;
	buf_puts(out, "}");
	return 0;
}

static bool same_module(const char *path, const char *name)
{
	const char *base = strrchr(path, '/');
	size_t len;

	base = base ? base + 1 : path;
	len = strcspn(base, ".");
	if (len != strlen(name))
		return false;
	for (size_t i = 0; i < len; i++) {
		char x = base[i] == '-' ? '_' : base[i], y = name[i] == '-' ? '_' : name[i];

		if (x != y)
			return false;
	}
	return true;
}

/* The modules.dep line "kernel/x/name.ko: dep.ko ..." for name, split at ':'. */
static char *find_module(char *dep, const char *name, char **deps)
{
	char *save = NULL;

	for (char *line = strtok_r(dep, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *colon = strchr(line, ':');

		if (!colon)
			continue;
		*colon = '\0';
		if (same_module(line, name)) {
			*deps = colon + 1;
			return line;
		}
	}
	return NULL;
}

static int load_module(const char *moddir, const char *dep_text, const char *name, int depth,
		       struct error *err)
{
	char *dep = strdup(dep_text), *deps = NULL, *path, *save = NULL;
	char full[512], depname[128];
	int fd, rc = 0;

	if (!dep)
		return fail(err, "Failed", "out of memory");
	path = find_module(dep, name, &deps);
	if (!path) {
		free(dep);
		return fail(err, "NotFound", "module %s is not in this image", name);
	}
	if (depth > MODULE_DEPTH_MAX) {
		free(dep);
		return fail(err, "Failed", "module dependencies of %s nest too deep", name);
	}
	for (char *d = strtok_r(deps, " ", &save); d && !rc; d = strtok_r(NULL, " ", &save)) {
		const char *base = strrchr(d, '/') ? strrchr(d, '/') + 1 : d;

		snprintf(depname, sizeof(depname), "%.*s", (int)strcspn(base, "."), base);
		rc = load_module(moddir, dep_text, depname, depth + 1, err);
	}
	if (!rc) {
		snprintf(full, sizeof(full), "%s/%s", moddir, path);
		fd = open(full, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			rc = fail(err, "Failed", "cannot open %s: %s", full, strerror(errno));
		else if (syscall(SYS_finit_module, fd, "", 0) && errno != EEXIST)
			rc = fail(err, "Failed", "loading %s: %s", full, strerror(errno));
		if (fd >= 0)
			close(fd);
	}
	free(dep);
	return rc;
}

int cmd_modprobe(struct agent *a, const struct request *rq, struct buf *out, struct error *err)
{
	const char *name = arg(rq, "name");
	static char dep[65536];
	char moddir[300], path[320];
	struct utsname u;

	if (!name)
		return fail(err, "InvalidParameter", "modprobe needs the parameter name");
	if (strlen(name) > 100 || strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != strlen(name))
		return fail(err, "InvalidParameter", "name=%s is not a module name", name);
	uname(&u);
	snprintf(moddir, sizeof(moddir), "/lib/modules/%s", u.release);
	snprintf(path, sizeof(path), "%s/modules.dep", moddir);
	if (read_file(path, dep, sizeof(dep)) < 0)
		return fail(err, "Failed", "cannot read %s: %s", path, strerror(errno));
	if (load_module(moddir, dep, name, 0, err))
		return -1;
	buf_puts(out, "{}");
	return 0;
}
