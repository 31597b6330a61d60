# Another Debian suite's packages without touching this host's apt: a
# private sources list and state (lists, cache, an empty dpkg status), read
# from the mirror this host already uses and signed by the same Debian
# archive keys. Used by guest-kernel/fetch (trixie's kernel),
# qemu-patches/fetch (bookworm-backports' QEMU, and trixie-backports' with
# its libraries: apt_closure) and qemu-patches/build (trixie's QEMU source).
# Sourced; the caller defines die() and sets -euo pipefail.

# apt_suite DIR LINE...: DIR holds the state; each LINE is "deb SUITE" or
# "deb-src SUITE" (a -security suite goes to the security mirror). Sets the
# global array apt_opts for apt-get and apt-cache, and updates the package
# lists when the last update is a day old (a failed update with lists from
# before still works: no network then means no newer packages, not no
# packages). A state made here for a suite the archive does not serve is
# removed again: nothing is left in the cache that looks like one.
# apt_arch=ARCH (e.g. arm64) before the call: the packages of another
# architecture (the Arm64 guest's kernel and busybox), in a state of their
# own, with no dpkg --add-architecture on this host.
apt_suite() {
	local aptdir=$1 mirror line type suite base fresh='' arch=${apt_arch:-}
	shift
	[[ -d $aptdir ]] || fresh=1
	mkdir -p "$aptdir/lists/partial" "$aptdir/cache/archives/partial" || die "cannot create $aptdir"
	: >"$aptdir/status"
	mirror=$(grep -rhoE 'https?://[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
		head -1 | tr -d ' ') || true
	mirror=${mirror:-http://deb.debian.org/debian}
	mirror=${mirror%/}
	for line in "$@"; do
		read -r type suite <<<"$line"
		base=$mirror
		[[ $suite == *-security ]] && base=$mirror-security
		echo "$type [${arch:+arch=$arch }signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $base $suite main"
	done >"$aptdir/sources.list.new"
	# new lines (another suite asked of the same state) mean new lists
	if ! cmp -s "$aptdir/sources.list.new" "$aptdir/sources.list"; then
		mv "$aptdir/sources.list.new" "$aptdir/sources.list"
		find "$aptdir/lists" -maxdepth 1 -type f -delete
		rm -f "$aptdir/updated"
	else
		rm -f "$aptdir/sources.list.new"
	fi
	apt_opts=(-o "Dir::Etc::SourceList=$aptdir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
		-o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir/cache"
		-o "Dir::State::status=$aptdir/status" -o Dir::Etc::Preferences=/dev/null
		-o Dir::Etc::PreferencesParts=/nonexistent -o APT::Sandbox::User=root)
	[[ -z $arch ]] || apt_opts+=(-o "APT::Architecture=$arch" -o "APT::Architectures=$arch")
	# the time of the last update is a stamp of its own: apt dates each list
	# file as the mirror's Release is dated, which may be days old, and
	# every call then updated again (5 s each)
	if [[ -z $(find "$aptdir" -maxdepth 1 -name updated -mmin -1440 2>/dev/null) ]]; then
		if apt-get -q "${apt_opts[@]}" update >"$aptdir/update.log" 2>&1; then
			touch "$aptdir/updated"
		else
			[[ -n $(find "$aptdir/lists" -maxdepth 1 -name '*_main_*') ]] ||
				apt_suite_failed "$aptdir" "$fresh" "$@"
		fi
	fi
}

# apt_suite_failed DIR FRESH LINE...: dies with why the update failed: a
# suite the mirror does not serve (its Release file answers 404) is named
# as such, not taken for a network failure; a state this call created is
# removed, so that a mistyped suite leaves nothing in the cache
apt_suite_failed() {
	local aptdir=$1 fresh=$2 missing
	shift 2
	missing=$(sed -n "s/^E: The repository '[^ ]* \([^ ]*\) Release' does not have a Release file.*/\1/p" \
		"$aptdir/update.log" | sort -u | tr '\n' ' ')
	if [[ -n $missing ]]; then
		[[ -z $fresh ]] || rm -rf "$aptdir"
		die "Debian's archive does not serve the suite ${missing% } (no Release file there); suites are e.g. bookworm-backports, trixie, trixie-backports, sid"
	fi
	die "apt-get update for ${*//deb-src /source } failed (see $aptdir/update.log); a Debian package mirror is needed (no network?)"
}

# apt_closure DIR SUITE PACKAGE...: downloads PACKAGEs of SUITE and
# everything they depend on (not what they only recommend) into DIR, as
# apt would install them on an empty system (the state's dpkg status is
# empty): a program with its own libraries, for a host whose own are too
# old for it. Needs apt_suite first, with SUITE (and, for a backports
# suite, its base) among its lines. SUITE is the default release, as
# `apt install -t SUITE` on an operator's host takes it.
apt_closure() {
	local dir=$1 suite=$2
	shift 2
	mkdir -p "$dir/partial" || die "cannot create $dir"
	if ! apt-get -q "${apt_opts[@]}" -o "Dir::Cache::archives=$dir" -o APT::Install-Recommends=false \
		-t "$suite" install --download-only -y "$@" >"$dir/download.log" 2>&1; then
		die "apt-get download of $* and its dependencies from $suite failed ($(grep -m1 '^E:' "$dir/download.log" || echo "see $dir/download.log"))"
	fi
	rmdir "$dir/partial" 2>/dev/null || true
}
