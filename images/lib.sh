# Shared by mkinitramfs and host/mkhostimage: busybox, kernel modules with
# their dependencies, and a reproducible newc cpio archive.
# Sourced; the caller defines die() and sets -euo pipefail.

# Reads $1/modules.dep; fills the global array `order` with the modules
# named after it and their dependencies, dependencies first. A module the
# kernel has built in (in $1/modules.builtin) needs no loading: skipped.
modules_resolve() {
	local moddir=$1 line path base name module
	shift
	declare -gA dep_of=() path_of=() placed=() builtin=()
	order=()
	if [[ -f $moddir/modules.builtin ]]; then
		while IFS= read -r line; do
			base=${line##*/}
			name=${base%%.ko*}
			builtin[${name//-/_}]=1
		done <"$moddir/modules.builtin"
	fi
	while IFS= read -r line; do
		path=${line%%:*}
		base=${path##*/}
		name=${base%%.ko*}
		dep_of[$path]=${line#*:}
		path_of[${name//-/_}]=$path
	done <"$moddir/modules.dep"
	for module in "$@"; do
		[[ -z ${builtin[${module//-/_}]:-} ]] || continue
		path=${path_of[${module//-/_}]:-}
		[[ -n $path ]] || die "the kernel has no module $module (not in $moddir/modules.dep, nor built in by modules.builtin)"
		modules_place "$moddir" "$path"
	done
}

# Depth first, dependencies before the module that needs them.
modules_place() {
	local moddir=$1 path=$2 dep
	[[ -z ${placed[$path]:-} ]] || return 0
	placed[$path]=1
	for dep in ${dep_of[$path]}; do
		[[ -n ${dep_of[$dep]+set} ]] || die "$path needs $dep, which modules.dep does not list"
		modules_place "$moddir" "$dep"
	done
	case $path in
	*.ko | *.ko.xz | *.ko.zst | *.ko.gz) ;;
	*) die "$path is not a kernel module (.ko, or .ko.xz/.ko.zst/.ko.gz)" ;;
	esac
	[[ -f $moddir/$path ]] || die "$moddir/$path is missing"
	order+=("$path")
}

# Copies the resolved modules into $1 under /lib/modules/$3, with their
# load order in /etc/vmce/modules and a modules.dep for just these.
stage_modules() {
	local stage=$1 moddir=$2 release=$3 path plain dep deps
	local guest_moddir=/lib/modules/$release
	mkdir -p "$stage/etc/vmce"
	: >"$stage/etc/vmce/modules"
	for path in "${order[@]}"; do
		plain=$(module_plain "$path")
		mkdir -p "$(dirname "$stage$guest_moddir/$plain")"
		# busybox insmod loads plain .ko files: a compressed one (Debian 13
		# ships .ko.xz) is unpacked on the way in
		case $path in
		*.ko) install -m 0644 "$moddir/$path" "$stage$guest_moddir/$plain" ;;
		*.xz) xz -dc "$moddir/$path" >"$stage$guest_moddir/$plain" ;;
		*.zst) zstd -dcq "$moddir/$path" >"$stage$guest_moddir/$plain" ;;
		*.gz) gzip -dc "$moddir/$path" >"$stage$guest_moddir/$plain" ;;
		esac || die "cannot unpack $moddir/$path"
		echo "$guest_moddir/$plain" >>"$stage/etc/vmce/modules"
		deps=()
		for dep in ${dep_of[$path]}; do deps+=("$(module_plain "$dep")"); done
		echo "$plain:${deps[*]:+ }${deps[*]}" >>"$stage$guest_moddir/modules.dep"
	done
}

# kernel/fs/ext4/ext4.ko.xz -> kernel/fs/ext4/ext4.ko
module_plain() {
	local path=${1%.xz}
	path=${path%.zst}
	echo "${path%.gz}"
}

# Debian's busybox-static with a symlink per applet; $2, if given, the
# binary to install (another architecture's, busybox_for_arch), its applets
# those of this host's busybox of the same version.
stage_busybox() {
	local stage=$1 applet busybox=/bin/busybox
	[[ $(dpkg-query -W -f '${db:Status-Status}' busybox-static 2>/dev/null) == installed ]] ||
		die "busybox-static is not installed (apt-get install busybox-static)"
	[[ -x $busybox ]] || die "$busybox is missing although busybox-static is installed"
	mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,run,tmp,root}
	install -m 0755 "${2:-$busybox}" "$stage/bin/busybox"
	while IFS= read -r applet; do
		[[ $applet == */* && $applet != bin/busybox ]] || continue
		[[ -e $stage/$applet || -L $stage/$applet ]] && continue
		ln -s /bin/busybox "$stage/$applet"
	done < <("$busybox" --list-full)
}

# One newc header (no data) for an entry GNU cpio cannot take from disk.
newc_entry() {
	local name=$1 mode=$2 major=$3 minor=$4
	local namesize=$((${#name} + 1))
	printf '070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%s\0' \
		0 $((mode)) 0 0 1 0 0 0 0 "$major" "$minor" "$namesize" 0 "$name"
	# Header and name are padded to a multiple of 4 bytes.
	head -c $(((4 - (110 + namesize) % 4) % 4)) /dev/zero
}

# write_cpio STAGE OUT FILTER: a newc archive of STAGE through FILTER
# (e.g. "gzip -n -9", or "cat" for none); same inputs, same bytes.
write_cpio() {
	local stage=$1 out=$2 filter=$3 tmp=$2.tmp
	command -v cpio >/dev/null || die "cpio is not installed (apt-get install cpio)"
	find "$stage" -exec touch -h -d @0 {} +
	{
		(cd "$stage" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort |
			cpio --quiet -o -H newc -R 0:0 --reproducible)
		# /dev/console must exist before /init runs (the kernel opens it for
		# init's stdio) and mknod would need root: append it as a second
		# archive, which the kernel's unpacker accepts after the first.
		newc_entry dev/console 020600 5 1
		newc_entry TRAILER!!! 0 0 0
	} | $filter >"$tmp" || die "writing $tmp failed"
	mv "$tmp" "$out"
}

# busybox_for_arch ARCH: prints the path of Debian's busybox-static for ARCH
# (arm64), of the version installed here (so that this host's busybox lists
# its applets: the other one does not run here), downloaded once per machine
# into $VMCE_CACHE/busybox-ARCH-VERSION from a private apt state of that
# architecture (run/lib/apt-suite.sh)
busybox_for_arch() {
	local arch=$1 version cache dir log
	version=$(dpkg-query -W -f '${Version}' busybox-static 2>/dev/null) ||
		die "busybox-static is not installed (apt-get install busybox-static)"
	cache=${VMCE_CACHE:-/var/cache/vmce}
	dir=$cache/busybox-$arch-${version//:/_}
	if [[ ! -x $dir/busybox ]]; then
		# shellcheck source=run/lib/apt-suite.sh
		. "$(dirname "${BASH_SOURCE[0]}")/../run/lib/apt-suite.sh"
		apt_arch=$arch apt_suite "$cache/apt-bookworm-$arch" "deb bookworm" "deb bookworm-security" >&2
		rm -rf "$dir.new"
		mkdir -p "$dir.new"
		log=$dir.new/download.log
		(cd "$dir.new" && apt-get -qq "${apt_opts[@]}" download "busybox-static=$version") >"$log" 2>&1 ||
			die "apt-get download busybox-static=$version for $arch failed ($(grep -m1 '^E:' "$log" || echo "see $log")); a Debian package mirror is needed"
		dpkg -x "$dir.new"/busybox-static_*.deb "$dir.new/root" || die "dpkg -x of busybox-static ($arch) failed"
		install -m 0755 "$dir.new/root/bin/busybox" "$dir.new/busybox"
		rm -rf "$dir.new/root" "$dir.new"/*.deb "$log"
		rm -rf "$dir"
		mv "$dir.new" "$dir"
	fi
	echo "$dir/busybox"
}
